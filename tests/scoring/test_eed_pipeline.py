"""The in-worker pipeline, run in-process: the reference cache never changes a result."""

from __future__ import annotations

import pytest

from proctor.agent.scoring.eed_pipeline import _REFERENCES, run_pipeline, step_category

REFERENCE = r"2 m g + 4\frac{mv_0^2}{l}"
ANSWERS = [r"2 m g+2\frac{mv_0^2}{l}", r"\frac{2m(gl + 2v_0^2)}{l}", r"m g", r"\frac{", r"\sqrt{-1}"]


def _without_timings(result: dict[str, object]) -> dict[str, object]:
    return {key: value for key, value in result.items() if key != "timings"}


def test_cached_reference_gives_the_same_results_as_a_cold_start() -> None:
    cold = []
    for answer in ANSWERS:
        _REFERENCES.clear()
        cold.append(_without_timings(run_pipeline(REFERENCE, answer, "strict")))
    _REFERENCES.clear()
    warm = [_without_timings(run_pipeline(REFERENCE, answer, "strict")) for answer in ANSWERS]
    assert warm == cold
    assert [r["status"] for r in cold] == [
        "ok",
        "equivalent",
        "ok",
        "parse_error",
        "zero_gate:unsupported_expression",
    ]


def test_a_cached_reference_is_not_converted_again() -> None:
    _REFERENCES.clear()
    steps: list[str] = []
    run_pipeline(REFERENCE, "m g", "strict", on_step=steps.append)
    assert "convert_reference" in steps and "simplify_reference" in steps
    steps.clear()
    run_pipeline(REFERENCE, "m g h", "strict", on_step=steps.append)
    assert "convert_reference" not in steps and "simplify_reference" not in steps
    assert "convert_answer" in steps and "simplify_answer" in steps


def test_a_skipped_simplification_is_never_cached() -> None:
    _REFERENCES.clear()
    skipped = run_pipeline(REFERENCE, "m g", "strict", skip=["simplify_reference"])
    assert skipped["fallbacks"] == ["simplify_reference"]
    steps: list[str] = []
    run_pipeline(REFERENCE, "m g", "strict", on_step=steps.append)
    assert "simplify_reference" in steps


def test_an_unparseable_reference_is_remembered() -> None:
    _REFERENCES.clear()
    first = run_pipeline(r"\frac{", "x", "strict")
    steps: list[str] = []
    second = run_pipeline(r"\frac{", "y", "strict", on_step=steps.append)
    assert first["status"] == second["status"] == "parse_error"
    assert first["detail"] == second["detail"]
    assert steps == []


@pytest.mark.parametrize(
    ("step", "category"),
    [
        ("convert_answer", "convert"),
        ("simplify_difference", "simplify"),
        ("equals", "equals"),
        ("build_trees", "tree"),
        ("distance", "distance"),
        ("expand_difference", "other"),
    ],
)
def test_step_categories(step: str, category: str) -> None:
    assert step_category(step) == category
