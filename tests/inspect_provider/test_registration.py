"""How Inspect finds the provider, and that Proctor stays free of Inspect until it does.

Both sides: the entry point pyproject declares loads a module that registers ``proctor`` (and
Inspect's own discovery finds it), while ``import proctor``, ``import proctor.sandbox`` and every
provider module but the registering one leave Inspect unimported.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.inspect_provider.support import REPO, declared_entry_points, environment_with_entry_points

PROVIDER_MODULE = "proctor.sandbox.inspect_provider.provider"


def test_pyproject_declares_the_inspect_entry_point() -> None:
    assert declared_entry_points() == {"proctor": PROVIDER_MODULE}


@pytest.mark.slow  # imports Inspect: seconds
def test_the_entry_point_module_registers_proctor() -> None:
    from inspect_ai.util._sandbox.registry import registry_find_sandboxenv

    module = importlib.import_module(declared_entry_points()["proctor"])
    assert registry_find_sandboxenv("proctor") is module.ProctorSandboxEnvironment


@pytest.mark.slow  # a fresh interpreter importing Inspect: seconds
def test_inspect_discovers_the_provider_through_the_entry_point(tmp_path: Path) -> None:
    # A fresh interpreter that never imports Proctor itself: only Inspect's discovery can find it.
    probe = (
        "from inspect_ai._util.entrypoints import ensure_entry_points\n"
        "from inspect_ai.util._sandbox.registry import registry_find_sandboxenv\n"
        "ensure_entry_points()\n"
        "found = registry_find_sandboxenv('proctor')\n"
        "print(found.__module__, found.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=environment_with_entry_points(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [PROVIDER_MODULE, "ProctorSandboxEnvironment"]


def test_proctor_never_imports_inspect() -> None:
    probe = (
        "import sys\n"
        "import proctor, proctor.sandbox\n"
        "from proctor.sandbox import open_sandbox, SandboxSpec\n"
        "import proctor.sandbox.inspect_provider\n"
        "import proctor.sandbox.inspect_provider.config\n"
        "import proctor.sandbox.inspect_provider.files\n"
        "import proctor.sandbox.inspect_provider.long_lived\n"
        "import proctor.sandbox.inspect_provider.sweep\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'inspect_ai'))\n"
        "print('proctor.sandbox.inspect_provider.long_lived' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    before, after = done.stdout.splitlines()
    assert before == "[]"
    assert after == "True"  # the probe reads the interpreter's real module table
