"""Track names -> implementations, imported lazily so the CLI starts fast."""

from __future__ import annotations

import importlib
from typing import Any

from proctor.agent.errors import UserError
from proctor.agent.tracks.base import Track

_TRACKS: dict[str, str] = {
    "frontiermath": "proctor.agent.tracks.frontiermath.track:FrontierMathTrack",
    "olympiad": "proctor.agent.tracks.olympiad:OlympiadTrack",
    "research": "proctor.agent.tracks.research:ResearchTrack",
    "phybench": "proctor.agent.tracks.phybench:PhybenchTrack",
}


def track_names() -> list[str]:
    return sorted(_TRACKS)


def make_track(name: str, options: dict[str, Any] | None = None) -> Track:
    target = _TRACKS.get(name)
    if target is None:
        raise UserError(f"unknown track {name!r}; choose one of: {', '.join(track_names())}")
    module_name, _, class_name = target.partition(":")
    track_class: type[Track] = getattr(importlib.import_module(module_name), class_name)
    return track_class(options)
