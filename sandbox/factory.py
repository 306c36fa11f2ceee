"""Choose and open a backend (being written)."""

from __future__ import annotations

from typing import Any

from sandbox.api import Sandbox


async def open_sandbox(backend: str = "auto", **options: Any) -> Sandbox:
    raise NotImplementedError("sandbox backends are being written")
