"""The sandbox's CPU in the summary: totals and CPU seconds per wall second, worked by hand; calls
without a figure (older records, backends that measure none, edited values) are unknown, not 0."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.agent.results.records import SampleRecord, SubmissionRecord, ToolCallRecord
from proctor.agent.results.summary import summarize, summarize_group
from proctor.sandbox.api import ExecResult
from tests.runner.test_summary import rec

_NO_FIGURE = object()


def _exec(duration_s: float, cpu_s: Any = _NO_FIGURE) -> dict[str, Any]:
    result = ExecResult(exit_code=0, stdout="", stderr="", duration_s=duration_s).to_dict()
    if cpu_s is _NO_FIGURE:
        del result["cpu_s"]  # as a record written before the field
    else:
        result["cpu_s"] = cpu_s
    return result


def _sample(
    task: str,
    wall_s: float,
    calls: list[tuple[float, Any]],
    answer: tuple[float, Any] | None = None,
    verify: tuple[float, Any] | None = None,
) -> SampleRecord:
    tool_calls = [
        ToolCallRecord(
            turn=i,
            call_id=f"c{i}",
            name="python",
            raw_arguments="{}",
            duration_s=wall,
            sandbox=_exec(wall, cpu),
        )
        for i, (wall, cpu) in enumerate(calls)
    ]
    submission = None
    if answer is not None or verify is not None:
        submission = SubmissionRecord(
            code="def answer(): return 1",
            answer_exec=_exec(*answer) if answer is not None else None,
            verify_exec=_exec(*verify) if verify is not None else None,
        )
    return rec(task, 0, "correct").model_copy(
        update={"duration_s": wall_s, "tool_calls": tool_calls, "submission": submission}
    )


def test_cpu_seconds_and_their_rate_per_wall_second_are_summed_by_hand() -> None:
    records = [
        # 0.5 + 1.5 (tool calls) + 0.25 (answer) + 0.75 (verify) = 3 CPU-s over 10 s: 0.3.
        _sample("A", 10.0, [(1.0, 0.5), (2.0, 1.5)], answer=(0.5, 0.25), verify=(1.0, 0.75)),
        # Two cores kept busy for half its 4 s: 1.0.
        _sample("B", 4.0, [(2.0, 4.0)]),
        # No sandbox call: it used no sandbox CPU, a figure of 0.
        _sample("C", 6.0, []),
    ]
    group = summarize_group(records)
    assert group["sandbox_calls"] == 5 and group["sandbox_cpu_calls"] == 5
    assert group["sandbox_cpu_seconds"] == pytest.approx(7.0)
    rate = group["sandbox_cpu_per_wall_second"]
    assert rate["overall"] == pytest.approx(7.0 / 20.0)
    assert rate["median_sample"] == pytest.approx(0.3)
    assert rate["max_sample"] == pytest.approx(1.0)
    assert rate["samples"] == 3


def test_calls_without_a_figure_are_unknown_not_zero() -> None:
    records = [
        # One of two calls measured: its figure counts, the other adds nothing and is counted apart.
        _sample("A", 10.0, [(1.0, 2.0), (1.0, None)]),
        # No call measured: the sample has no figure at all and is left out of the rate.
        _sample("B", 10.0, [(1.0, None), (3.0, _NO_FIGURE)]),
    ]
    group = summarize_group(records)
    assert group["sandbox_calls"] == 4 and group["sandbox_cpu_calls"] == 1
    assert group["sandbox_cpu_seconds"] == pytest.approx(2.0)
    rate = group["sandbox_cpu_per_wall_second"]
    assert rate["samples"] == 1
    assert rate["overall"] == pytest.approx(0.2) and rate["median_sample"] == pytest.approx(0.2)


def test_a_run_recorded_before_cpu_figures_loads_and_summarises_with_none_measured() -> None:
    old = _sample("A", 10.0, [(1.0, _NO_FIGURE)], answer=(0.5, _NO_FIGURE), verify=(0.5, _NO_FIGURE))
    line = old.model_dump_json()
    assert '"cpu_s"' not in line
    loaded = SampleRecord.model_validate_json(line)
    overall = summarize([loaded])["overall"]
    assert overall["sandbox_calls"] == 3 and overall["sandbox_cpu_calls"] == 0
    assert overall["sandbox_cpu_seconds"] == 0.0
    assert overall["sandbox_cpu_per_wall_second"] == {
        "overall": None,
        "median_sample": None,
        "max_sample": None,
        "samples": 0,
    }
    # The wall share is as it was.
    assert overall["sandbox_wall_share"]["overall"] == pytest.approx(0.2)
    # An exec result stored before the field comes back with no figure; a new one round-trips.
    stored = json.loads(line)["submission"]["answer_exec"]
    assert ExecResult.from_dict(stored).cpu_s is None
    measured = ExecResult(exit_code=0, stdout="", stderr="", cpu_s=0.125)
    assert ExecResult.from_dict(json.loads(json.dumps(measured.to_dict()))).cpu_s == 0.125


def test_a_run_without_samples_has_no_cpu_rate() -> None:
    overall = summarize([])["overall"]
    assert overall["sandbox_cpu_calls"] == 0 and overall["sandbox_cpu_per_wall_second"]["overall"] is None


# What an edited run directory may put where a figure belongs.
_HOSTILE = st.one_of(
    st.just(_NO_FIGURE),
    st.none(),
    st.booleans(),
    st.text(max_size=8),
    st.lists(st.floats(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0, max_value=1e9),
)


def _believable(value: Any) -> bool:
    if value is _NO_FIGURE or isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return 0.0 <= float(value) <= 1e9
    except OverflowError:
        return False


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(allow_nan=True, allow_infinity=True),
            st.lists(_HOSTILE, max_size=4),
            st.one_of(st.just(_NO_FIGURE), _HOSTILE),
        ),
        max_size=5,
    )
)
def test_edited_cpu_figures_never_break_the_summary_or_leave_its_bounds(
    samples: list[tuple[float, list[Any], Any]],
) -> None:
    records = [
        _sample(f"T{i}", wall, [(1.0, cpu) for cpu in calls], answer=(1.0, answer))
        for i, (wall, calls, answer) in enumerate(samples)
    ]
    group = summarize_group(records)
    believed = sum(_believable(cpu) for _, calls, answer in samples for cpu in [*calls, answer])
    assert group["sandbox_cpu_calls"] == believed <= group["sandbox_calls"]
    assert math.isfinite(group["sandbox_cpu_seconds"]) and group["sandbox_cpu_seconds"] >= 0
    rate = group["sandbox_cpu_per_wall_second"]
    assert 0 <= rate["samples"] <= len(records)
    for key in ("overall", "median_sample", "max_sample"):
        assert rate[key] is None or (math.isfinite(rate[key]) and rate[key] >= 0), (key, rate)
    # The CPU fields stay plain JSON (other fields keep an edited duration's infinity, as before).
    json.dumps([group[key] for key in ("sandbox_cpu_calls", "sandbox_cpu_seconds")] + [rate], allow_nan=False)
