"""The design's one-way layering, checked on the source: `sandbox/` never imports `agent/`, and
the eval path of `agent/` reaches the sandbox only through the package's public names
(`open_sandbox` and its `SandboxSpec`, `Sandbox`, `ExecResult`, `Limits` and the exceptions)."""

from __future__ import annotations

import ast
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
