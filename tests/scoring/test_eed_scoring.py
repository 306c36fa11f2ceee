"""End-to-end EED through the worker pool: gates, equivalence, errors, time limits, modes, async."""

from __future__ import annotations

import asyncio
import time

import pytest

from proctor.agent.scoring.eed import eed_score, eed_score_async, string_gate
from proctor.agent.scoring.worker_pool import EEDWorkerPool


@pytest.mark.parametrize(
    ("reference", "answer"),
    [
        (r"\frac{m v^2}{2}", r"\frac12 m v^2"),
        (r"\sin^2\theta+\cos^2\theta", "1"),
        (r"\sqrt{x^2 y^2}", "x y"),  # symbols are positive, so the root simplifies
        (r"\frac{a}{b} + \frac{c}{b}", r"\frac{a+c}{b}"),
        (r"\boxed{E = m c^2}", r"m c^{2}"),
        (r"e^{\ln x}", "x"),
    ],
)
def test_equivalent_forms_score_100(eed_pool: EEDWorkerPool, reference: str, answer: str) -> None:
    result = eed_score(reference, answer, pool=eed_pool)
    assert result.status == "equivalent", result
    assert result.score == 100.0
    assert result.distance == 0.0


def test_a_wrong_answer_scores_below_60(eed_pool: EEDWorkerPool) -> None:
    result = eed_score(r"\frac{G M m}{r^2}", r"\frac{G M m}{r}", pool=eed_pool)
    assert result.status == "ok"
    assert result.distance is not None and result.distance > 0
    assert 0 <= result.score < 60
    assert result.reference_size is not None and result.answer_size is not None
    assert result.relative_distance == pytest.approx(result.distance / result.reference_size)


@pytest.mark.parametrize(
    ("reference", "answer", "status"),
    [
        ("x", "", "zero_gate:empty_answer"),
        (r"\int_0^1 x\,dx", "x", "zero_gate:integral"),
        ("x", r"\int x", "zero_gate:integral"),
        (r"\sum_n a_n", "a", "zero_gate:sum"),
        ("a+b", r"\sum a", "zero_gate:sum"),
        ("abc", "a+b+c+d+ef", "zero_gate:answer_too_long"),  # 10 > 3 * 3
    ],
)
def test_each_zero_gate(reference: str, answer: str, status: str) -> None:
    # The gates need no worker: no pool is passed, and none may be started.
    result = eed_score(reference, answer, pool=_NoPool())  # type: ignore[arg-type]
    assert result.status == status
    assert result.score == 0.0


class _NoPool:
    def score(self, *args: object) -> None:
        raise AssertionError("a gated pair must not reach a worker")


def test_length_gate_allows_exactly_three_times() -> None:
    assert string_gate("abc", "a+b+c+d+e") is None  # 9 == 3 * 3
    assert string_gate("abc", "a+b+c+d+ef") is not None


def test_identical_strings_score_100_before_any_conversion() -> None:
    result = eed_score(r"\frac{", r"\frac{", pool=_NoPool())  # type: ignore[arg-type]
    assert (result.status, result.score) == ("equivalent", 100.0)
    # ... but the \int gate comes first, as published.
    assert eed_score(r"\int x", r"\int x").status == "zero_gate:integral"


def test_whitespace_answer_is_empty_only_in_fixed_mode(eed_pool: EEDWorkerPool) -> None:
    assert eed_score("x+y", "  ", mode="fixed", pool=eed_pool).status == "zero_gate:empty_answer"
    assert eed_score("x+y", "  ", mode="strict", pool=eed_pool).status == "parse_error"


def test_unparseable_answer_is_a_parse_error(eed_pool: EEDWorkerPool) -> None:
    result = eed_score(r"\frac{x}{y}", r"\frac{", pool=eed_pool)
    assert result.status == "parse_error"
    assert result.score == 0.0
    assert result.detail is not None and result.detail.startswith("answer:")


def test_unparseable_reference_is_a_parse_error(eed_pool: EEDWorkerPool) -> None:
    result = eed_score(r"\frac{", "x", pool=eed_pool)
    assert result.status == "parse_error"
    assert result.detail is not None and result.detail.startswith("reference:")


def test_an_expression_outside_the_tree_types_scores_zero(eed_pool: EEDWorkerPool) -> None:
    result = eed_score("x+y", r"\sqrt{-1}", pool=eed_pool)  # sympy gives I
    assert result.status == "zero_gate:unsupported_expression"
    assert result.score == 0.0


def test_pathological_expansion_times_out_within_its_limit(eed_pool: EEDWorkerPool) -> None:
    eed_pool.warm_up()  # a worker replaced by an earlier test may still be starting: not timed here
    started = time.monotonic()
    result = eed_score("(x+1)^{10000}", "(x+1)^{9999}", timeout_s=1.5, pool=eed_pool)
    elapsed = time.monotonic() - started
    assert result.status == "timeout"
    assert result.score == 0.0
    assert elapsed < 1.5 + 1.0
    # The time of the killed attempt is counted under the step that was running.
    assert result.timings["simplify"] > 0.2
    # The killed worker was replaced: the pool still scores.
    assert eed_score("x^2", r"x \cdot x", pool=eed_pool).status == "equivalent"


def test_a_power_tower_times_out_too(eed_pool: EEDWorkerPool) -> None:
    eed_pool.warm_up()
    started = time.monotonic()
    result = eed_score("x^{x^{x^{x}}} + 1", "(x^{x^{x^{x}}})^{7^{7^{7}}}", timeout_s=1.5, pool=eed_pool)
    assert result.status == "timeout"  # sympy's equals() on 7^(7^7) runs far longer
    assert time.monotonic() - started < 1.5 + 1.0


def test_a_step_over_its_own_limit_falls_back_as_published(eed_pool: EEDWorkerPool) -> None:
    # simplify((x+1)^10000) runs for minutes. With a 0.5 s step limit both simplifications are
    # abandoned for the unsimplified expressions (the published fallback) and the pair is scored.
    result = eed_score("(x+1)^{10000}", "(x+1)^{10000}+1", timeout_s=20, simplify_limit_s=0.5, pool=eed_pool)
    assert result.status == "ok"
    assert result.fallbacks == ["simplify_reference", "simplify_answer"]
    assert result.timings["simplify"] >= 1.0  # the two abandoned 0.5 s simplifications
    # Pow(Add(1, x), 10000) has 5 nodes; the answer adds an Add node and the leaf 1: d = 2.
    assert (result.reference_size, result.distance) == (5, 2.0)
    assert result.score == pytest.approx(60 - 100 * 2 / 5)


def test_strict_loses_a_sign_behind_left_and_fixed_does_not(eed_pool: EEDWorkerPool) -> None:
    reference = r"\arctan\left(\frac{v^2}{g r}\right)"
    answer = r"-\arctan\left(\frac{v^2}{g r}\right)"
    # Published behaviour: "\le" matches inside "\left", both strings are cut to "left(...)".
    strict = eed_score(reference, answer, mode="strict", pool=eed_pool)
    assert (strict.status, strict.score) == ("equivalent", 100.0)
    fixed = eed_score(reference, answer, mode="fixed", pool=eed_pool)
    assert fixed.status == "ok"
    assert fixed.score < 60


def test_repeated_text_command_fails_only_in_strict_mode(eed_pool: EEDWorkerPool) -> None:
    reference = r"\text{m} g h"
    answer = r"\text{m} g h + \text{m} v^2"
    assert eed_score(reference, answer, mode="strict", pool=eed_pool).status == "parse_error"
    assert eed_score(reference, answer, mode="fixed", pool=eed_pool).status == "ok"


def test_approx_tail_is_sliced_properly_only_in_fixed_mode(eed_pool: EEDWorkerPool) -> None:
    # Strict keeps "approx 3" (a product of letters); fixed keeps "3".
    strict = eed_score("v_0 t", r"v_0 t \approx 3", mode="strict", pool=eed_pool)
    fixed = eed_score("v_0 t", r"v_0 t \approx 3", mode="fixed", pool=eed_pool)
    assert strict.answer_size is not None and fixed.answer_size == 1
    assert strict.answer_size > fixed.answer_size


def test_unknown_mode_and_bad_timeout_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown EED mode"):
        eed_score("x", "y", mode="lenient")
    with pytest.raises(ValueError, match="timeout_s"):
        eed_score("x", "y", timeout_s=0)


async def test_async_scoring_leaves_the_event_loop_free(eed_pool: EEDWorkerPool) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    result = await eed_score_async("(x+1)^{10000}", "(x+1)^{9999}", timeout_s=1.0, pool=eed_pool)
    task.cancel()
    assert result.status == "timeout"
    assert ticks > 5  # a blocked loop would tick at most once; it ran through the second of sympy work


async def test_many_async_callers_share_the_pool_without_taking_the_default_threads(
    eed_pool: EEDWorkerPool,
) -> None:
    # More callers than the default executor has threads (min(32, cores + 4)).
    answers = [f"{k} m g h" for k in range(2, 40)]
    scoring = asyncio.gather(*(eed_score_async("m g h", a, pool=eed_pool) for a in answers))
    await asyncio.sleep(0.05)
    # While they queue on the pool's own executor, the default one still answers at once.
    started = time.monotonic()
    assert await asyncio.wait_for(asyncio.to_thread(lambda: 42), timeout=5) == 42
    assert time.monotonic() - started < 1.0
    assert not scoring.done()
    results = await scoring
    assert all(r.status == "ok" for r in results)
