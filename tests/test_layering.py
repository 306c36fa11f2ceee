"""The design's one-way layering, checked on the source: `sandbox/` never imports `agent/`, and
the eval path of `agent/` reaches the sandbox only through the package's public names
(`open_sandbox` and its `SandboxSpec`, `Sandbox`, `ExecResult`, `Limits` and the exceptions)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Operator commands (image builds, cleanup, benches, the audit) may use the sandbox's internals.
ADMIN = ("cli/", "audit/", "bench/")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, "." * node.level + (node.module or "")))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "agent." in node.value:
            found.append((node.lineno, node.value))
    return found


def test_sandbox_never_imports_agent() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {name}"
        for path in sorted((REPO / "sandbox").rglob("*.py"))
        for line, name in imported_modules(path)
        if name.startswith(("agent", "proctor.agent", "..")) or "proctor.agent" in name
    ]
    assert offenders == []


def test_the_eval_path_uses_only_the_sandbox_packages_public_names() -> None:
    offenders = []
    for path in sorted((REPO / "agent").rglob("*.py")):
        relative = path.relative_to(REPO / "agent").as_posix()
        if relative.startswith(ADMIN):
            continue
        for line, name in imported_modules(path):
            if name.startswith("proctor.sandbox."):
                offenders.append(f"agent/{relative}:{line}: {name}")
    assert offenders == []


def test_backends_are_registered_by_name_one_folder_each() -> None:
    """Each sandbox/NAME/opener.py registers the backend its folder names; nothing else does."""
    from proctor.sandbox import factory, registry

    folders = sorted(path.parent.name for path in (REPO / "sandbox").glob("*/opener.py"))
    assert registry.backend_packages() == folders
    assert registry.backend_names() == tuple(folders)
    assert set(folders) >= {"docker", "local", "ray"}
    for name in folders:
        assert registry.opener_for(name).__module__ == f"proctor.sandbox.{name}.opener"
    assert ("auto", *folders) == factory.BACKENDS


def test_the_factory_names_no_backend_module() -> None:
    """A new backend touches no existing file: open_sandbox reaches backends only via the registry."""
    imported = {name for _, name in imported_modules(REPO / "sandbox" / "factory.py")}
    assert not {name for name in imported if "backend" in name} - {"proctor.sandbox.registry"}
    assert "proctor.sandbox.registry" in imported


def test_a_backend_registered_twice_is_refused() -> None:
    from proctor.sandbox import registry

    opener = registry.opener_for("local")
    assert registry.register("local")(opener) is opener  # the same function again: a re-import
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("local")(registry.opener_for("docker"))
    with pytest.raises(ValueError, match="unknown sandbox backend 'nope': choose one of docker"):
        registry.opener_for("nope")


# The modules sandbox/'s top level may hold (issue 37): the interface (api, spec), the registry,
# the factory and the package itself, and only what every backend shares. Each backend's own
# modules live in its folder (sandbox/docker/, sandbox/local/, sandbox/ray/).
TOP_LEVEL_LIMIT = 10


def top_level_modules(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.glob("*.py"))


def test_the_sandbox_top_level_holds_at_most_ten_modules() -> None:
    modules = top_level_modules(REPO / "sandbox")
    assert len(modules) <= TOP_LEVEL_LIMIT, f"move backend-specific modules into its folder: {modules}"
    assert {"__init__.py", "api.py", "spec.py", "registry.py", "factory.py"} <= set(modules)


def test_the_top_level_count_sees_an_eleventh_module(tmp_path: Path) -> None:
    for index in range(TOP_LEVEL_LIMIT + 1):
        (tmp_path / f"m{index}.py").write_text("")
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "inside.py").write_text("")  # a backend's folder does not count
    assert len(top_level_modules(tmp_path)) == TOP_LEVEL_LIMIT + 1


# In a fresh interpreter: the package, its public names and the list of backends load neither
# the docker SDK nor ray (nor inspect_ai): each backend's implementation loads when it is opened.
_LAZY_PROBE = """
import json, sys
import proctor.sandbox
from proctor.sandbox import Limits, SandboxSpec, open_sandbox, registry
names = registry.backend_names()
SandboxSpec(backend="docker")
print(json.dumps({"names": names, "loaded": sorted(
    name for name in ("docker", "requests", "ray", "inspect_ai") if name in sys.modules)}))
"""


def test_importing_the_sandbox_and_listing_its_backends_loads_no_backend_library() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _LAZY_PROBE], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["loaded"] == []
    assert set(found["names"]) >= {"docker", "local", "ray"}
