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
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
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

_PARTS = ("agent", "sandbox")


class _CheckoutParts(importlib.abc.MetaPathFinder):
    """In a checkout, ``proctor.agent`` is ``<root>/agent`` and ``proctor.sandbox`` ``<root>/sandbox``.

    A wheel lays the two parts out inside proctor/ (setup.py's package_dir), so this finder is
    installed only when they are not there. It answers for exactly the two part names, always
    from the checkout this ``proctor`` came from, so the editable install of another checkout
    cannot mix trees; their submodules are then found through the parts' own ``__path__``.
    The parts refuse to load under any other name (agent/__init__.py): one path per module.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        prefix, _, part = fullname.partition(".")
        if prefix != __name__ or part not in _PARTS:
            return None
        folder = self.root / part
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


_HERE = Path(__file__).resolve().parent
if not (_HERE / "agent").is_dir() and (_HERE.parent / "agent" / "__init__.py").is_file():
    sys.meta_path.insert(0, _CheckoutParts(_HERE.parent))


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
