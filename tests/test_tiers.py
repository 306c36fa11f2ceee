"""The two tiers of the suite (tests/conftest.py): `-m "not slow"` for iteration, everything for CI.

Invariants: every test that needs infrastructure (a docker/runsc/local_model/browser marker,
or a fixture that builds an image or opens an engine) is slow, so the quick tier never
selects one; and while the quick tier runs, no Docker engine is reachable, so a quick test
that uses Docker without saying so fails instead of passing only where an engine exists.
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any, cast

import docker
import pytest

from tests.conftest import (
    NO_DOCKER,
    QUICK_TIMEOUT_S,
    declared_timeout,
    deselects_slow,
    docker_engine_answers,
    longest_first,
    needs_infrastructure,
)


def _config(markexpr: str) -> pytest.Config:
    return cast(pytest.Config, SimpleNamespace(getoption=lambda name, default=None: markexpr))


@pytest.mark.parametrize(
    ("markexpr", "quick"),
    [
        ("not slow", True),
        ("not slow and not docker", True),
        ("(not slow)", True),
        ("", False),
        ("slow", False),
        ("docker", False),
        ("slow or not slow", False),
        ("not docker", False),
    ],
)
def test_a_run_that_leaves_out_slow_tests_is_the_quick_tier(markexpr: str, quick: bool) -> None:
    assert deselects_slow(_config(markexpr)) is quick


def test_every_test_that_needs_infrastructure_is_slow(request: pytest.FixtureRequest) -> None:
    items = request.session.items
    assert any(item.nodeid == request.node.nodeid for item in items)
    unmarked = [item.nodeid for item in items if needs_infrastructure(item) and "slow" not in item.keywords]
    assert unmarked == []
    if deselects_slow(request.config):
        # The quick tier selected no test that needs Docker, gVisor, a model or a browser.
        assert [item.nodeid for item in items if needs_infrastructure(item)] == []
    for item in items:
        if "slow" not in item.keywords and request.config.getoption("timeout", None) is None:
            marker = item.get_closest_marker("timeout")
            assert marker is not None, item.nodeid
            assert marker.args[0] <= QUICK_TIMEOUT_S, item.nodeid


def test_the_quick_tier_reaches_no_docker_engine(request: pytest.FixtureRequest) -> None:
    if not deselects_slow(request.config):
        pytest.skip('the guard is on only in the quick tier: python3 -m pytest -m "not slow"')
    assert os.environ["DOCKER_HOST"] == NO_DOCKER
    assert docker_engine_answers() is False
    with pytest.raises(docker.errors.DockerException):
        client: Any = docker.from_env(timeout=5)
        client.ping()


@pytest.mark.docker
def test_a_docker_marked_test_is_slow(request: pytest.FixtureRequest) -> None:
    # Collected in both tiers' collection; selected only in the full one.
    assert "slow" in request.node.keywords


def test_tests_declared_long_start_first_longest_first(request: pytest.FixtureRequest) -> None:
    # xdist hands tests out in collection order: a long test collected last would start last.
    default = float(request.config.getini("timeout"))
    declared = [declared_timeout(item) for item in request.session.items]
    long = [t for t in declared if t > default]
    assert declared[: len(long)] == sorted(long, reverse=True)


def test_longest_first_moves_only_the_tests_declared_long() -> None:
    def item(name: str, timeout: float | None) -> Any:
        own = [] if timeout is None else [pytest.mark.timeout(timeout).mark]
        return SimpleNamespace(name=name, own_markers=[pytest.mark.slow.mark, *own])

    config = cast(pytest.Config, SimpleNamespace(getini=lambda name: "300"))
    timeouts = {"a": None, "b": 600, "c": 120, "d": 300, "e": 1500, "f": None}
    items = [item(name, timeout) for name, timeout in timeouts.items()]
    longest_first(config, items)
    assert [i.name for i in items] == ["e", "b", "a", "c", "d", "f"]
