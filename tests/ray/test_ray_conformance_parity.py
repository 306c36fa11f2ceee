"""The ray module runs the whole conformance suite, not a copy that falls behind (no cluster needed).

What is attacked: a conformance case added to tests/sandbox/test_conformance.py later that the
ray backend never meets, or a test there that quietly needs something other than the
backend's ``sandbox`` fixture (so it could not run through Ray and would have to be left out).
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

from tests.sandbox import test_conformance as conformance

REPO = Path(__file__).resolve().parents[2]


def test_every_test_of_the_conformance_suite_is_a_case_over_the_backends_sandbox() -> None:
    tests = [name for name, value in vars(conformance).items() if name.startswith("test_")]
    assert len(tests) >= 20
    assert list(conformance.conformance_cases()) == tests
    for name in tests:
        case = getattr(conformance, name)
        # Anything else (a docker sandbox of its own, a fixture only tests/sandbox has) belongs
        # beside its backend, as tests/sandbox/test_docker_lifecycle.py does.
        assert inspect.iscoroutinefunction(case), name
        assert "sandbox" in inspect.signature(case).parameters, name
        assert not {"sandbox_image"} & set(inspect.signature(case).parameters), name


def test_pytest_collects_every_conformance_case_in_the_ray_module_first() -> None:
    collected = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "tests/ray/test_ray_cluster.py",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    prefix = "tests/ray/test_ray_cluster.py::"
    names = [line.removeprefix(prefix) for line in collected.stdout.splitlines() if line.startswith(prefix)]
    cases = list(conformance.conformance_cases())
    # First, in the suite's own order: the tests after them swap and kill nodes.
    assert names[: len(cases)] == cases
    assert len(names) > len(cases)
