"""An entry-point shim: Inspect finds the provider through its real discovery (importlib.metadata)
from pyproject's own declaration, before the package is reinstalled with it."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def declared_entry_points() -> dict[str, str]:
    """pyproject.toml's ``inspect_ai`` entry points, name to module."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return dict(project.get("entry-points", {}).get("inspect_ai", {}))


def entry_point_dir(tmp: Path) -> Path:
    """A directory holding a distribution whose only content is pyproject's inspect_ai entry
    points; on sys.path (PYTHONPATH), importlib.metadata lists them as installed."""
    dist = tmp / "proctor_inspect_entry_points-0.0.0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: proctor-inspect-entry-points\nVersion: 0.0.0\n"
    )
    lines = "".join(f"{name} = {target}\n" for name, target in declared_entry_points().items())
    (dist / "entry_points.txt").write_text(f"[inspect_ai]\n{lines}")
    return tmp


def environment_with_entry_points(tmp: Path) -> dict[str, str]:
    """The environment a child ``inspect`` needs: this checkout first, then the shim."""
    path = os.pathsep.join([str(REPO), str(entry_point_dir(tmp))])
    env = {**os.environ, "PYTHONPATH": path}
    env.pop("INSPECT_EVAL_MODEL", None)
    return env
