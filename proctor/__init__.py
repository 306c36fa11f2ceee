"""Proctor: a sandboxed code-execution agent runtime for math and science evaluations.

The documented API (docs/api.md)::

    import proctor
    run = proctor.run("configs/examples/frontiermath-openai.yaml")   # or await proctor.run_async(...)
    run = proctor.load_run("runs/2026-12-01T...")
    run.summary, run.samples, run.to_dataframe()
    sandbox = await proctor.open_sandbox("docker")

``proctor.agent`` (runner, tracks, judges, reports) and ``proctor.sandbox`` (runs untrusted
code; never imports ``proctor.agent``) are the two parts. Names are loaded on first use, so
``import proctor.sandbox`` does not pull in the agent side.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from proctor.agent.api import Run as Run
    from proctor.agent.api import UserError as UserError
    from proctor.agent.api import load_run as load_run
    from proctor.agent.api import run as run
    from proctor.agent.api import run_async as run_async
    from proctor.sandbox import ExecResult as ExecResult
    from proctor.sandbox import Limits as Limits
    from proctor.sandbox import Sandbox as Sandbox
    from proctor.sandbox import SandboxError as SandboxError
    from proctor.sandbox import open_sandbox as open_sandbox

    __version__: str  # the installed distribution's, read on first use (__getattr__)

_EXPORTS = {
    "Run": "proctor.agent.api",
    "UserError": "proctor.agent.api",
    "load_run": "proctor.agent.api",
    "run": "proctor.agent.api",
    "run_async": "proctor.agent.api",
    "ExecResult": "proctor.sandbox",
    "Limits": "proctor.sandbox",
    "Sandbox": "proctor.sandbox",
    "SandboxError": "proctor.sandbox",
    "open_sandbox": "proctor.sandbox",
}


def _installed_version() -> str:
    # Read when asked for: importlib.metadata costs ~0.03 s of CPU, which every `proctor`
    # command (and `import proctor`) paid before printing anything.
    import importlib.metadata

    try:
        return importlib.metadata.version("proctor")
    except importlib.metadata.PackageNotFoundError:  # a checkout that was never installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        version = _installed_version()
        globals()["__version__"] = version
        return version
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'proctor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [*_EXPORTS, "__version__"]
