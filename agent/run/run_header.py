"""What run.json says about a run before any sample runs: the config as recorded, the tasks
file, the models and their APIs, the endpoints, and the versions and host it ran on.

`proctor rescore` records the same environment, and `--dry-run` builds the same header to
check a resume without running."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import socket
import sys
from typing import Any

from proctor.agent.inputs.config import RunConfig
from proctor.agent.model.api_choice import choose_api
from proctor.agent.model.endpoint import without_secrets
from proctor.agent.results.records import utc_now
from proctor.agent.results.store import file_sha256
from proctor.agent.run.endpoint_record import endpoints_record
from proctor.agent.run.preflight import EndpointUse
from proctor.agent.tracks.frontiermath.profiles import get_profile


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment_info() -> dict[str, Any]:
    return {
        "versions": {
            "proctor": _version("proctor"),
            "python": platform.python_version(),
            "openai": _version("openai"),
            "sympy": _version("sympy"),
            "pydantic": _version("pydantic"),
        },
        "host": {
            "hostname": socket.gethostname(),
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "python_executable": sys.executable,
        },
    }


def _prompt_template_hash(config: RunConfig) -> str | None:
    if config.prompt_template is None:
        return None
    return hashlib.sha256(config.prompt_template.read_bytes()).hexdigest()


def recorded_config(config: RunConfig) -> dict[str, Any]:
    """The config as run.json keeps it: every value explicit, credentials in base URLs removed
    (a resumed run reads it back, so such a URL must be given again with the config)."""
    data = config.model_dump(mode="json")
    for entry in [*data.get("models", []), data.get("judge")]:
        if isinstance(entry, dict) and isinstance(entry.get("base_url"), str):
            entry["base_url"] = without_secrets(entry["base_url"])
    return data


def base_header(
    config: RunConfig, run_id: str, labels: list[str], task_count: int, uses: list[EndpointUse]
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "track": config.track,
        "status": "running",
        "created_at": utc_now(),
        "config": recorded_config(config),
        "tasks_file": {
            "path": str(config.tasks),
            "sha256": file_sha256(config.tasks),
            "selected_tasks": task_count,
        },
        "prompt_template_sha256": _prompt_template_hash(config),
        # The conversation rules that ran, spelled out, so a reader need not know this version's code.
        "protocol": get_profile(config.protocol).describe() if config.track == "frontiermath" else None,
        "models": [
            {"label": label, "name": m.name, "reasoning_effort": m.reasoning_effort, "api": choose_api(m).api}
            for label, m in zip(labels, config.models, strict=True)
        ],
        # Which API each model and the judge is spoken to with, and why (agent/model/api_choice.py).
        "api_choices": [
            {"role": use.role, "label": use.label, **choose_api(use.cfg).as_json()} for use in uses
        ],
        # The base URL each model and the judge talks to, after the environment; never a key.
        "endpoints": endpoints_record(uses),
        "events": [],
        "sessions": [],
        **environment_info(),
    }
