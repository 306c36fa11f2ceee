"""PHYBench expression edit distance (EED): the public scoring API.

    result = eed_score(r"2 m g + 4\\frac{mv_0^2}{l}", r"2 m g + 2\\frac{mv_0^2}{l}")
    result.score            # 46.67 (the published example rounds to 47)

Order of decisions, as published (docs/eed.md has the full account):

1. String gates, scored 0 without conversion: empty answer, ``\\int`` or ``\\sum`` in either string,
   and (after "identical strings score 100") an answer more than 3x the reference's length.
2. Conversion to sympy after the published LaTeX preprocessing; failure -> ``parse_error``.
3. Equivalence (simplify, structural equality, zero difference, ``equals``) -> 100.
4. Otherwise trees + extended Zhang–Shasha distance d; score = max(0, 60 - 100 d / |reference|).

Steps 2-4 run in a persistent worker process (proctor.agent.scoring.worker_pool) under a hard,
killable wall-clock budget; when it runs out the status is ``timeout``.
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from proctor.agent.scoring.eed_pipeline import LIMITED_STEPS
from proctor.agent.scoring.hedges import MAX_READINGS, scoring_pairs
from proctor.agent.scoring.latex_preprocess import MODES, Mode
from proctor.agent.scoring.worker_pool import EEDWorkerPool, StepLimits, default_pool

PUBLISHED_SIMPLIFY_LIMIT_S = 30.0
PUBLISHED_EQUALS_LIMIT_S = 10.0
# The published scorer leaves conversion, tree building and the distance unlimited; our hard
# budget must stop a hang somewhere, so it grants them this much beyond the limited steps.
UNLIMITED_STEPS_ALLOWANCE_S = 20.0


def published_pair_budget_s(
    simplify_limit_s: float = PUBLISHED_SIMPLIFY_LIMIT_S, equals_limit_s: float = PUBLISHED_EQUALS_LIMIT_S
) -> float:
    """The default hard budget for one pair: long enough for every limited step to reach its own
    limit and take the published fallback (3 simplifies + equals = 100 s), plus the allowance.

    A smaller budget scores 0 (``timeout``) pairs the published scorer would finish after a
    fallback; that is why it is an option and not the default.
    """
    limits = StepLimits(simplify_limit_s, equals_limit_s)
    return sum(limits.for_step(step) or 0.0 for step in LIMITED_STEPS) + UNLIMITED_STEPS_ALLOWANCE_S


@dataclass
class EEDResult:
    """One scored pair.

    ``status``: "ok" | "equivalent" | "zero_gate:<reason>" | "parse_error" | "timeout".
    """

    score: float
    relative_distance: float | None
    distance: float | None
    reference_size: int | None
    answer_size: int | None
    status: str
    detail: str | None
    # Seconds per pipeline category (convert, simplify, equals, other, tree, distance) and wall time.
    timings: dict[str, float] = field(default_factory=dict)
    # Published fallbacks taken because a step hit its own limit (e.g. "simplify_answer").
    fallbacks: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def string_gate(reference: str, answer: str, mode: Mode = "strict") -> EEDResult | None:
    """The published checks made on the raw strings, in the published order; None = go on."""
    if not answer or (mode == "fixed" and not answer.strip()):
        return _zero("empty_answer", "the answer is empty")
    if "\\int" in answer or "\\int" in reference:
        return _zero("integral", "\\int appears in the reference or the answer (not supported, as published)")
    if "\\sum" in answer or "\\sum" in reference:
        return _zero("sum", "\\sum appears in the reference or the answer (not supported, as published)")
    if reference == answer:
        return EEDResult(100.0, 0.0, 0.0, None, None, "equivalent", "identical strings")
    if len(answer) > 3 * len(reference):
        return _zero(
            "answer_too_long",
            f"the answer has {len(answer)} characters, more than 3x the reference's {len(reference)}",
        )
    return None


def _zero(reason: str, detail: str) -> EEDResult:
    return EEDResult(0.0, None, None, None, None, f"zero_gate:{reason}", detail)


def eed_score(
    reference: str,
    answer: str,
    *,
    mode: str = "strict",
    timeout_s: float | None = None,
    simplify_limit_s: float = PUBLISHED_SIMPLIFY_LIMIT_S,
    equals_limit_s: float = PUBLISHED_EQUALS_LIMIT_S,
    pool: EEDWorkerPool | None = None,
) -> EEDResult:
    """Score ``answer`` against ``reference`` (both LaTeX). Blocks until done or ``timeout_s`` passes.

    ``timeout_s`` is the hard wall-clock budget for the sympy work on this pair (waiting for a free
    worker is not counted); None means :func:`published_pair_budget_s` of the step limits.
    ``simplify_limit_s``/``equals_limit_s`` are the published per-step limits after which the
    published fallbacks apply; they only matter when below ``timeout_s``.
    """
    if mode not in MODES:
        raise ValueError(f"unknown EED mode {mode!r}; expected one of: {', '.join(MODES)}")
    if timeout_s is None:
        timeout_s = published_pair_budget_s(simplify_limit_s, equals_limit_s)
    if timeout_s <= 0:
        raise ValueError("timeout_s must be positive")
    checked_mode: Mode = "fixed" if mode == "fixed" else "strict"
    gated = string_gate(reference, answer, checked_mode)
    if gated is not None:
        return gated
    limits = StepLimits(simplify_limit_s, equals_limit_s)
    if checked_mode == "strict":
        return _score_in_worker(pool or default_pool(), reference, answer, checked_mode, timeout_s, limits)
    pairs = scoring_pairs(reference, answer)
    if pairs is None:
        return _zero(
            "hedged",
            f"the answer has no sensible readings: more than {MAX_READINGS} candidates, sides or signs,"
            " or a comma inside a group that is not a function's arguments",
        )
    if pairs == [(reference, answer)]:
        return _score_in_worker(pool or default_pool(), reference, answer, checked_mode, timeout_s, limits)
    return _worst_reading(pool or default_pool(), pairs, timeout_s, limits)


def _score_in_worker(
    pool: EEDWorkerPool, reference: str, answer: str, mode: Mode, timeout_s: float, limits: StepLimits
) -> EEDResult:
    scored = pool.score(reference, answer, mode, timeout_s, limits)
    raw = scored.result
    timings = dict(raw.get("timings") or {})
    timings["wall"] = scored.wall_s
    return EEDResult(
        score=float(raw.get("score", 0.0)),
        relative_distance=raw.get("relative_distance"),
        distance=raw.get("distance"),
        reference_size=raw.get("reference_size"),
        answer_size=raw.get("answer_size"),
        status=str(raw["status"]),
        detail=raw.get("detail"),
        timings=timings,
        fallbacks=list(scored.fallbacks),
    )


def _worst_reading(
    pool: EEDWorkerPool, pairs: list[tuple[str, str]], timeout_s: float, limits: StepLimits
) -> EEDResult:
    """Fixed mode on a hedged answer: every reading is scored and the lowest score is the result.

    The readings share the pair's one time budget; a reading that runs out of it makes the whole
    pair a ``timeout`` (its worst reading is unknown).
    """
    deadline = time.monotonic() + timeout_s
    worst: EEDResult | None = None
    worst_answer = ""
    timings: dict[str, float] = {}
    for reference, answer in pairs:
        remaining = deadline - time.monotonic()
        result = string_gate(reference, answer, "fixed")
        if result is None:
            if remaining <= 0:
                result = EEDResult(0.0, None, None, None, None, "timeout", "the readings used up the budget")
            else:
                result = _score_in_worker(pool, reference, answer, "fixed", remaining, limits)
        for category, seconds in result.timings.items():
            timings[category] = timings.get(category, 0.0) + seconds
        if worst is None or result.score < worst.score or result.status == "timeout":
            worst, worst_answer = result, answer
        if result.status == "timeout":
            break
    assert worst is not None  # scoring_pairs never returns an empty list
    worst.timings = timings
    what = (
        f"hedged answer, {len(pairs)} readings scored, the worst kept: {worst_answer!r}"
        if len(pairs) > 1
        else f"one answer, boxed more than once: {worst_answer!r}"
    )
    worst.detail = what + (f" ({worst.detail})" if worst.detail else "")
    return worst


async def eed_score_async(
    reference: str,
    answer: str,
    *,
    mode: str = "strict",
    timeout_s: float | None = None,
    simplify_limit_s: float = PUBLISHED_SIMPLIFY_LIMIT_S,
    equals_limit_s: float = PUBLISHED_EQUALS_LIMIT_S,
    pool: EEDWorkerPool | None = None,
) -> EEDResult:
    """``eed_score`` on one of the pool's threads, so the event loop keeps running meanwhile."""
    chosen = pool or default_pool()
    call = functools.partial(
        eed_score,
        reference,
        answer,
        mode=mode,
        timeout_s=timeout_s,
        simplify_limit_s=simplify_limit_s,
        equals_limit_s=equals_limit_s,
        pool=chosen,
    )
    return await asyncio.get_running_loop().run_in_executor(chosen.executor, call)


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (balanced braces), or None when there is none.

    ``\\boxed {x}`` (space before the brace) counts; an unclosed last box yields None.
    """
    search_from = len(text)
    while True:
        start = text.rfind("\\boxed", 0, search_from)
        if start < 0:
            return None
        brace = start + len("\\boxed")
        while brace < len(text) and text[brace] in " \t\n":
            brace += 1
        if brace < len(text) and text[brace] == "{":
            depth = 0
            for index in range(brace, len(text)):
                if text[index] == "{" and text[index - 1] != "\\":
                    depth += 1
                elif text[index] == "}" and text[index - 1] != "\\":
                    depth -= 1
                    if depth == 0:
                        return text[brace + 1 : index]
            return None
        search_from = start  # "\boxed" not followed by a brace (e.g. \boxedfoo): look further left
