"""The design's one-way layering, checked on the source: `sandbox/` never imports `agent/`, and
the eval path of `agent/` reaches the sandbox only through the package's public names
(`open_sandbox` and its `SandboxSpec`, `Sandbox`, `ExecResult`, `Limits` and the exceptions)."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# A module named as text, e.g. importlib.import_module("proctor.agent.cli.app"): a hidden import.
NAMED_AGENT_MODULE = re.compile(r"\Aproctor\.agent(?:\.\w+)+\Z")
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


# -- No cycles between agent/'s packages ----------------------------------------------------------
# The unit is a subpackage of agent/ (run, cli, model...) or a top-level module (api, errors).
# Every import counts: at module level, inside a function (a lazy import still makes the importer
# depend on the imported), relative, or a module named as text for importlib.


def _absolute(path: Path, root: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` in ``path`` (under the agent/ folder ``root``) names."""
    if node.level == 0:
        return node.module or ""
    package = ["proctor", "agent", *path.relative_to(root).with_suffix("").parts]
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _agent_imports(path: Path, root: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(path, root, node)
            yield node.lineno, module
            # `from proctor.agent import run` imports the package run.
            if module == "proctor.agent":
                yield from ((node.lineno, f"proctor.agent.{alias.name}") for alias in node.names)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and NAMED_AGENT_MODULE.match(node.value)
        ):
            yield node.lineno, node.value


def _unit(parts: list[str], root: Path) -> str | None:
    """The package (or top-level module) of agent/ that ``proctor.agent.<parts>`` lies in."""
    if not parts:
        return None
    head = parts[0]
    if (root / head).is_dir() or (root / f"{head}.py").is_file():
        return head
    return None


def package_graph(root: Path) -> dict[str, dict[str, list[str]]]:
    """importer unit -> imported unit -> every ``file:line`` that makes the edge."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        source = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        for line, name in _agent_imports(path, root):
            parts = name.split(".")
            if parts[:2] != ["proctor", "agent"]:
                continue
            target = _unit(parts[2:], root)
            if target is not None and target != source:
                edges = graph.setdefault(source, {}).setdefault(target, [])
                edges.append(f"agent/{relative.as_posix()}:{line}")
    return graph


def package_cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Every set of units that import each other in a ring (Tarjan's strongly connected
    components of two or more units), each sorted, in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        on_stack.add(unit)
        for target in sorted(graph.get(unit, {})):
            if target not in index:
                visit(target)
                low[unit] = min(low[unit], low[target])
            elif target in on_stack:
                low[unit] = min(low[unit], index[target])
        if low[unit] == index[unit]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == unit:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    units = set(graph) | {target for targets in graph.values() for target in targets}
    for unit in sorted(units):
        if unit not in index:
            visit(unit)
    return sorted(found)


def describe_cycles(graph: dict[str, dict[str, list[str]]], cycles: list[list[str]]) -> list[str]:
    """Each edge inside a cycle with the first line that makes it: what to move to break it."""
    return [
        f"{source} -> {target}: {graph[source][target][0]} (+{len(graph[source][target]) - 1} more)"
        for cycle in cycles
        for source in cycle
        for target in sorted(graph.get(source, {}))
        if target in cycle
    ]


def test_no_cycles_between_agent_packages() -> None:
    graph = package_graph(REPO / "agent")
    # The check sees the real graph (not an empty one that would pass anything).
    assert {"run", "cli", "inputs", "tracks"} <= graph.keys()
    assert "inputs" in graph["tracks"] and "run" in graph["cli"]
    cycles = package_cycles(graph)
    assert cycles == [], "\n".join(describe_cycles(graph, cycles))


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "agent" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "agent"


@pytest.mark.parametrize(
    "back_edge",
    [
        "from proctor.agent.high.top import thing\n",
        "def late():\n    from proctor.agent.high import top\n    return top\n",
        "def late():\n    import importlib\n    return importlib.import_module('proctor.agent.high.top')\n",
        "from ..high.top import thing\n",
        "from proctor.agent import high\n",
    ],
    ids=["module level", "function level", "named for importlib", "relative", "the package itself"],
)
def test_the_cycle_check_rejects_a_cycle_however_it_is_imported(tmp_path: Path, back_edge: str) -> None:
    """high imports low; low's one back edge, in each spelling, closes a ring the check names."""
    files = {
        "__init__.py": "",
        "errors.py": "",
        "low/__init__.py": "",
        "low/base.py": "import os\n\n" + back_edge,
        "high/__init__.py": "",
        "high/top.py": "from proctor.agent.low.base import thing\nfrom proctor.agent.errors import E\n",
    }
    graph = package_graph(_write(tmp_path, files))
    cycles = package_cycles(graph)
    assert cycles == [["high", "low"]]
    # The edge is named by the line that makes it (the back edge is on base.py's third line or later).
    back_line = 3 + next(i for i, line in enumerate(back_edge.splitlines()) if "high" in line)
    assert describe_cycles(graph, cycles) == [
        "high -> low: agent/high/top.py:1 (+0 more)",
        f"low -> high: agent/low/base.py:{back_line} (+0 more)",
    ]


def test_the_cycle_check_accepts_a_layered_tree_and_imports_inside_one_package(tmp_path: Path) -> None:
    files = {
        "__init__.py": "",
        "errors.py": "",
        "text/__init__.py": "",
        "text/a.py": "from . import b\nfrom proctor.agent.errors import UserError\n",
        "text/b.py": "def f():\n    from proctor.agent.text import a\n    return a\n",
        "inputs/__init__.py": "",
        "inputs/config.py": "from proctor.agent.text.a import x\nfrom ..errors import UserError\n",
        "run/__init__.py": "",
        "run/runner.py": "from proctor.agent.inputs.config import C\nimport proctor.sandbox\n",
        "cli/__init__.py": "",
        "cli/main.py": "def main():\n    from proctor.agent.run import runner\n",
        "api.py": "from proctor.agent.run.runner import R\n",
    }
    graph = package_graph(_write(tmp_path, files))
    assert package_cycles(graph) == []
    assert graph["inputs"] == {"text": ["agent/inputs/config.py:1"], "errors": ["agent/inputs/config.py:2"]}
    assert set(graph["cli"]) == {"run"} and set(graph["api"]) == {"run"}


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
