"""The suite runs its longest modules first (tests/suite_order.py), each module's tests together."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.suite_order import longest_modules_first, module_of, recorded_seconds, seconds_by_module


@dataclass(frozen=True)
class _Item:
    nodeid: str


def test_longer_modules_go_first_and_each_keeps_its_tests_in_order() -> None:
    collected = [
        _Item("tests/a/test_short.py::test_one"),
        _Item("tests/a/test_short.py::test_two"),
        _Item("tests/b/test_new.py::test_one"),
        _Item("tests/c/test_long.py::test_one[x]"),
        _Item("tests/c/test_long.py::test_one[y]"),
        _Item("tests/d/test_newer.py::test_one"),
        _Item("tests/e/test_middle.py::Test::test_one"),
    ]
    seconds = {"tests/a/test_short.py": 2.0, "tests/c/test_long.py": 90.0, "tests/e/test_middle.py": 30.0}
    assert [item.nodeid for item in longest_modules_first(collected, seconds)] == [
        "tests/c/test_long.py::test_one[x]",
        "tests/c/test_long.py::test_one[y]",
        "tests/e/test_middle.py::Test::test_one",
        "tests/a/test_short.py::test_one",
        "tests/a/test_short.py::test_two",
        # Not yet recorded: last, in the order they were collected.
        "tests/b/test_new.py::test_one",
        "tests/d/test_newer.py::test_one",
    ]


def test_the_figures_are_each_modules_total_from_junit_xml(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.sandbox.test_cli" name="test_a[docker]" time="1.5"/>'
        '<testcase classname="tests.sandbox.test_cli" name="test_a[local]" time="2.25"/>'
        '<testcase classname="tests.runner.test_runs.TestResume" name="test_b" time="4"/>'
        "</testsuite></testsuites>"
    )
    assert seconds_by_module(junit) == {"tests/runner/test_runs.py": 4.0, "tests/sandbox/test_cli.py": 3.8}


@pytest.mark.parametrize("content", ["", "not json", "[1, 2]", '{"tests/test_x.py": "slow"}'])
def test_unreadable_figures_leave_the_collection_order(tmp_path: Path, content: str) -> None:
    figures = tmp_path / "module_durations.json"
    figures.write_text(content)
    assert recorded_seconds(figures) == {}
    assert recorded_seconds(tmp_path / "missing.json") == {}


def test_this_session_runs_in_that_order(request: pytest.FixtureRequest) -> None:
    seconds = recorded_seconds()
    assert seconds, "tests/module_durations.json holds no figures"
    modules = [module_of(item.nodeid) for item in request.session.items]
    runs = [module for index, module in enumerate(modules) if index == 0 or modules[index - 1] != module]
    assert len(runs) == len(set(runs)), "a module's tests were split apart"
    figures = [seconds.get(module, 0.0) for module in runs]
    assert figures == sorted(figures, reverse=True)
