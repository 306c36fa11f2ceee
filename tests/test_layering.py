"""The design's one-way layering, checked on the source: `sandbox/` never imports `agent/`, and
the eval path of `agent/` reaches the sandbox only through the package's public names
(`open_sandbox`, `Sandbox`, `ExecResult`, `Limits` and the exceptions)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Operator commands (image builds, cleanup, benches, the audit) may use the sandbox's internals.
ADMIN = ("cli/", "audit/", "bench_")


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
