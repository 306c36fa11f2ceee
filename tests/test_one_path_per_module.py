"""One path per module (issue 26): every source file imports under exactly one name, the docs'
layout names only modules that exist, and the package tree is plain folders under proctor/ whose
two parts are links to agent/ and sandbox/ (issue 37), so no import hook is needed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# In a fresh interpreter with the repository root first on sys.path (as `python3 -m pytest`
# from the root has it): import every module of both parts, try every other name a file could
# be found under, and report each loaded file's names.
_PROBE = r"""
import importlib, json, pkgutil, sys
sys.path.insert(0, sys.argv[1])
import proctor.agent, proctor.sandbox
failed = []
for part in (proctor.agent, proctor.sandbox):
    for module in pkgutil.walk_packages(part.__path__, part.__name__ + "."):
        try:
            importlib.import_module(module.name)
        except ImportError as exc:
            failed.append(f"{module.name}: {exc}")
refused = {}
for name in ("agent", "sandbox", "agent.run.runner", "sandbox.api"):
    try:
        importlib.import_module(name)
        refused[name] = None
    except ImportError as exc:
        refused[name] = str(exc)
files = {}
for name, module in list(sys.modules.items()):
    path = getattr(module, "__file__", None)
    if path and path.startswith(sys.argv[1]):
        files.setdefault(__import__("os").path.realpath(path), []).append(name)
print(json.dumps({"failed": failed, "refused": refused, "files": files}))
"""


@pytest.mark.slow
def test_every_module_imports_under_exactly_one_name() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(REPO)], capture_output=True, text=True, cwd=REPO, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["failed"] == []
    # The folder names are not packages: a clear ImportError naming the one real name.
    for name, error in found["refused"].items():
        part = name.split(".")[0]
        assert error is not None, f"{name} imported under its folder name"
        assert f"import proctor.{part}" in error
    twice = {path: names for path, names in found["files"].items() if len(names) > 1}
    assert twice == {}
    loaded = set(found["files"])
    for folder in ("agent", "sandbox"):
        # npm's tree (agent/report/katex/node_modules: KaTeX ships its font build scripts) is
        # not Python of this project.
        every = {
            str(path.resolve())
            for path in (REPO / folder).rglob("*.py")
            if "node_modules" not in path.relative_to(REPO).parts
        }
        assert every <= loaded, sorted(every - loaded)[:5]


def test_the_only_tracked_symlinks_are_the_two_parts_under_proctor() -> None:
    """proctor/agent -> ../agent and proctor/sandbox -> ../sandbox (docs/architecture.md, "Import
    names and folders"): the package tree is plain folders, so every tool maps an import to its
    file; nothing else is a link."""
    listing = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-s"], capture_output=True, text=True, check=True
    ).stdout
    links = sorted(line.split("\t", 1)[1] for line in listing.splitlines() if line.startswith("120000"))
    assert links == ["proctor/agent", "proctor/sandbox"]
    for part in ("agent", "sandbox"):
        link = REPO / "proctor" / part
        assert link.is_symlink() and os.readlink(link) == f"../{part}"
        assert link.resolve() == (REPO / part).resolve()


def test_the_package_needs_no_import_hook() -> None:
    """A plain path entry finds every module: the checkout's root alone, no finder of ours."""
    code = (
        "import importlib.util, json, sys\n"
        "hooks = [type(f).__module__ for f in sys.meta_path]\n"
        "import proctor.agent.api, proctor.sandbox.docker.launcher\n"
        "print(json.dumps({'hooks': [type(f).__module__ for f in sys.meta_path if "
        "type(f).__module__ not in hooks], 'files': [proctor.agent.api.__file__, "
        "proctor.sandbox.docker.launcher.__file__]}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(REPO)!r})\n{code}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["hooks"] == []
    assert found["files"] == [
        str(REPO / "proctor" / "agent" / "api.py"),
        str(REPO / "proctor" / "sandbox" / "docker" / "launcher.py"),
    ]


DOCS = [REPO / "README.md", REPO / "docs" / "architecture.md"]
DOTTED = re.compile(r"(?<![\w.])proctor\.(?:agent|sandbox)(?:\.\w+)+")


def test_every_module_the_layout_docs_name_exists() -> None:
    """Dotted names (proctor.agent.x) and folders in the README and architecture.md are real."""
    import importlib.util

    missing = []
    for doc in DOCS:
        for name in set(DOTTED.findall(doc.read_text(encoding="utf-8"))):
            parts = name.split(".")
            # The longest prefix that is a module; at most one attribute may follow it.
            modules = [".".join(parts[:n]) for n in range(len(parts), 1, -1)]
            found = next((m for m in modules if importlib.util.find_spec(m) is not None), None)
            if found is None or len(parts) - len(found.split(".")) > 1:
                missing.append(f"{doc.name}: {name}")
    assert missing == []


def test_the_readme_layout_table_lists_every_package_of_both_parts() -> None:
    """A newcomer reads the tree from the table: each top-level package of agent/ and sandbox/."""
    table = (REPO / "README.md").read_text(encoding="utf-8").split("## Layout", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`((?:agent|sandbox)/[\w/]*?/?)`", table))
    packages = {
        f"{folder}/{path.parent.name}/"
        for folder in ("agent", "sandbox")
        for path in (REPO / folder).glob("*/__init__.py")
    }
    assert packages - listed == set()
    assert all((REPO / path).exists() for path in listed)


def test_the_architecture_page_names_an_owner_for_each_step() -> None:
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = {
        line.split("|")[1].strip(): line.split("|")[3]
        for line in page.splitlines()
        if line.startswith("| ") and not line.startswith("| step")
    }
    steps = ["task", "conversation", "tool call", "submission", "verdict", "record", "report"]
    assert [step for step in steps if step in rows] == steps
    for step in steps:
        owners = re.findall(r"`((?:agent|sandbox)/[\w/.]+)`", rows[step])
        assert owners and all((REPO / owner).exists() for owner in owners), step


ENTRY = re.compile(r"`((?:agent|sandbox)/[\w/]+\.py):(\w+(?:\.\w+)?)`")


def _defines(path: Path, name: str) -> bool:
    """Whether ``path`` defines ``name`` at top level, or ``Class.method`` inside that class."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    owner, _, member = name.partition(".")
    for node in tree.body:
        if isinstance(node, kinds) and node.name == owner:
            if not member:
                return True
            return isinstance(node, ast.ClassDef) and any(
                isinstance(item, kinds) and item.name == member for item in node.body
            )
    return False


def test_every_entry_function_the_walk_names_exists() -> None:
    """The architecture page's walk names each step's entry as file:function, and each is real."""
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    walk = page.split("## The walk, by entry function", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^\d+\. \*\*([\w ]+)\*\*: (.*?)(?=^\d+\. |\Z)", walk, flags=re.M | re.S)
    named = [step for step, _ in steps]
    assert named == ["task", "conversation", "tool call", "submission", "verdict", "record", "report"]
    for step, text in steps:
        assert ENTRY.search(text), f"step {step} names no file:function"
    missing = [f"{file}:{name}" for file, name in ENTRY.findall(walk) if not _defines(REPO / file, name)]
    assert missing == []
    # The verdict's owner is the driver with submission._verify, not the code-shape pre-check.
    verdict = dict(steps)["verdict"]
    assert "sandbox_driver.py" in verdict and "SubmissionRunner._verify" in verdict
    assert "checks.py" not in verdict
