"""Aggregate finished records into ``summary.json``: pure functions, reused by the report.

Definitions (also in docs/runs.md):

* **accuracy** (primary): over samples whose outcome is *not* an error outcome
  (``judge_error``, ``model_error``, ``verify_error``, ``harness_error``: they say nothing
  about the model),
  the mean over tasks of each task's mean ``success``. With the same number of trials per
  task this equals the plain mean over samples.
* **accuracy_errors_as_failures**: the same over *all* samples, error outcomes counted as
  failures: the pessimistic reading, shown beside the primary one, never instead of it.
* **se**: task-clustered standard error, sd(task means, ddof=1)/sqrt(tasks). ``se_samples``
  treats samples as independent; both coincide when every task has one trial.
* **ci95**: percentile bootstrap over tasks (resampled with replacement), seeded.
* **points** (tracks whose records carry judge points, e.g. research): mean points with the
  same estimators; ``accuracy`` there is the success rate at the track's threshold.
* **eed**: mean EED score over samples that have one.
* **cost_usd**: input tokens x input price + output tokens x output price per million, per
  model, where the model config sets prices (output tokens include reasoning tokens, as
  providers report them).
* **judge**: the judge's own tokens over all its attempts (``JudgeRecord.input_tokens`` /
  ``output_tokens``; never part of ``tokens``), the samples it was asked about, and
  ``cost_usd`` at the judge config's prices.
* **total_cost_usd**: answering models' plus judge's cost, over whichever of them are priced
  (``priced`` says which); None when neither is.
* **sandbox_wall_share**, **sandbox_cpu_per_wall_second**: the sandbox calls' share of the
  samples' wall time, and their CPU seconds (``cpu_s``, measured by the controller) per second of
  it; calls without a CPU figure are unknown, counted apart (``sandbox_cpu_calls``), never 0.
* **pass_at_k**: unbiased pass@k for k = 1..(most scored trials of a task), errors excluded
  from n (``proctor.agent.results.passk``); the top-level ``tasks`` block holds each model's
  trials x task grid.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from proctor.agent.results.passk import grid_by_model, pass_at_k_summary, task_grid
from proctor.agent.results.records import ERROR_OUTCOMES, Outcome, SampleRecord
from proctor.agent.results.task_stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    bootstrap_engine,
    clustered_estimate,
    total,
)

# (input, output) USD per million tokens, keyed by the record's model label.
Prices = Mapping[str, tuple[float | None, float | None]]
# The judge's (input, output) USD per million tokens.
JudgePrices = tuple[float | None, float | None]

NO_SUBJECT = "(none)"
NO_EFFORT = "(default)"


def is_error(record: SampleRecord) -> bool:
    return record.outcome in ERROR_OUTCOMES


def scoring_headline(group: Mapping[str, Any]) -> str:
    """Over how many samples accuracy is taken, in words: the unscored samples (error outcomes,
    left out of accuracy and run again by --resume) and the provider's refusals (scored as
    failures) named and counted, so a fine accuracy over few samples cannot pass unnoticed."""
    samples = int(group.get("samples", 0) or 0)
    scored = int(group.get("scored_samples", 0) or 0)
    errors = group.get("errors") or {}
    unscored = samples - scored
    if unscored:
        kinds = ", ".join(f"{k} {v}" for k, v in errors.items() if k != "total" and v)
        text = (
            f"accuracy is over {scored} of {samples} samples: {unscored} unscored "
            f"({kinds or 'errors'}), left out of accuracy; --resume runs them again"
        )
    else:
        text = f"accuracy is over all {samples} samples"
    refusals = int((group.get("outcomes") or {}).get(Outcome.PROVIDER_REFUSAL.value, 0) or 0)
    if refusals:
        text += f"; {refusals} refused by the provider, counted as failures"
    return text


def reasoning_not_carried(records: Iterable[SampleRecord]) -> dict[str, dict[str, Any]]:
    """Per model, the samples some of whose requests went without the model's reasoning (its
    endpoint refused reasoning carried across turns), and the endpoint's reason."""
    found: dict[str, dict[str, Any]] = {}
    for record in records:
        if record.reasoning_not_carried:
            entry = found.setdefault(record.model, {"samples": 0, "reason": record.reasoning_not_carried})
            entry["samples"] += 1
    return dict(sorted(found.items()))


def reasoning_carry_lines(group: Mapping[str, Any]) -> list[str]:
    """One line per model whose reasoning was not carried, for the terminal and the report."""
    entries = group.get("reasoning_not_carried") or {}
    return [
        f"reasoning not carried for {entry.get('samples', 0)} samples of {model}: {entry.get('reason', '')}"
        for model, entry in entries.items()
        if isinstance(entry, Mapping)
    ]


# What ModelError texts say of the endpoint's answer (agent/model/retry.py): "... rejected the
# request (HTTP 400): message", "... gave up after N retries; last failure: HTTP 503 (...)".
_ERROR_STATUS = re.compile(r"\bHTTP (\d{3})\b")
_REJECTED = re.compile(r"rejected the request \(HTTP \d{3}\): (.*)", re.S)
_DIGITS = re.compile(r"\d+")
MAX_GROUP_MESSAGE_CHARS = 200
MAX_ERROR_GROUPS = 20


def model_error_groups(records: Iterable[SampleRecord]) -> list[dict[str, Any]]:
    """The ``model_error`` samples grouped by the endpoint's status and message (numbers in the
    message read as N, so one refusal worded with each sample's token counts is one group),
    largest first: an unrecognised refusal shows at a glance instead of hiding in re-runs."""
    groups: Counter[tuple[int | None, str]] = Counter()
    for record in records:
        if record.outcome is not Outcome.MODEL_ERROR:
            continue
        text = record.error or ""
        status_match = _ERROR_STATUS.search(text)
        rejected = _REJECTED.search(text)
        message = (rejected.group(1) if rejected else text).strip()
        message = _DIGITS.sub("N", " ".join(message.split()))[:MAX_GROUP_MESSAGE_CHARS]
        groups[(int(status_match.group(1)) if status_match else None, message)] += 1
    ordered = sorted(groups.items(), key=lambda item: (-item[1], item[0][0] or 0, item[0][1]))
    return [
        {"status": status, "message": message, "samples": count}
        for (status, message), count in ordered[:MAX_ERROR_GROUPS]
    ]


def model_error_lines(group: Mapping[str, Any]) -> list[str]:
    """One line per group of model errors, for the terminal and the report."""
    lines = []
    for entry in group.get("model_errors") or ():
        if not isinstance(entry, Mapping):
            continue
        status = entry.get("status")
        where = f"HTTP {status}" if status is not None else "no HTTP status"
        lines.append(f"model_error x{entry.get('samples', 0)} ({where}): {entry.get('message', '')}")
    return lines


def _by_task(
    records: Iterable[SampleRecord], value: Callable[[SampleRecord], float]
) -> dict[str, list[float]]:
    grouped: dict[str, list[float]] = defaultdict(list)
    for record in records:
        grouped[record.task_id].append(value(record))
    return grouped


def _estimate(
    records: Sequence[SampleRecord], value: Callable[[SampleRecord], float], resamples: int, seed: int
) -> dict[str, Any] | None:
    estimate = clustered_estimate(_by_task(records, value), resamples=resamples, seed=seed)
    return None if estimate is None else estimate.to_dict()


@dataclass
class _SandboxUse:
    """One sample's sandbox executions (python tool, answer(), verify()): their count and wall
    seconds, and the CPU seconds of those that carry a believable ``cpu_s`` (``cpu_calls``)."""

    calls: int = 0
    seconds: float = 0.0
    cpu_calls: int = 0
    cpu_seconds: float = 0.0

    def add(self, wall_s: float, exec_result: Mapping[str, Any]) -> None:
        self.calls += 1
        self.seconds += wall_s
        cpu_s = _cpu_seconds(exec_result.get("cpu_s"))
        if cpu_s is not None:
            self.cpu_calls += 1
            self.cpu_seconds += cpu_s


def _sandbox_calls(record: SampleRecord) -> _SandboxUse:
    use = _SandboxUse()
    for call in record.tool_calls:
        # A submit call's answer() and verify() runs are counted from the submission below.
        if call.ran_in_sandbox and call.sandbox is not None:
            use.add(call.duration_s, call.sandbox)
    if record.submission is not None:
        for exec_result in (record.submission.answer_exec, record.submission.verify_exec):
            if exec_result is not None:
                use.add(_seconds(exec_result.get("duration_s")), exec_result)
    return use


def _sandbox_share(records: Sequence[SampleRecord], sandbox_seconds: Sequence[float]) -> dict[str, Any]:
    """How much of the samples' wall time their sandbox calls took: whether the sandbox or the
    model bounds a run. Each sample's share is its calls' seconds over its own duration (at most
    1: an edited record cannot claim more); ``overall`` weighs samples by their duration."""
    timed = [
        # A non-finite or negative figure (an edited record) claims the whole sample or none.
        (record.duration_s, min(record.duration_s, seconds) if math.isfinite(seconds) else record.duration_s)
        for record, seconds in zip(records, sandbox_seconds, strict=True)
        if record.duration_s > 0 and math.isfinite(record.duration_s)
    ]
    shares = [max(0.0, used) / wall for wall, used in timed]
    wall = total(wall for wall, _ in timed)
    used = total(max(0.0, used) for _, used in timed)
    return {
        "overall": used / wall if wall > 0 else None,
        "median_sample": statistics.median(shares) if shares else None,
        "max_sample": max(shares) if shares else None,
    }


def _sandbox_cpu_per_wall_second(
    records: Sequence[SampleRecord], uses: Sequence[_SandboxUse]
) -> dict[str, Any]:
    """The sandbox's CPU seconds per second of the samples' wall time: the mean number of cores
    its calls kept busy (it may pass 1; ``overall`` weighs samples by their duration). A sample
    counts when it has a figure: no sandbox call (0), or at least one call with ``cpu_s``; calls
    without one add nothing, so where ``sandbox_cpu_calls`` < ``sandbox_calls`` it is a lower
    bound. ``samples`` says over how many samples it is taken."""
    timed = [
        (record.duration_s, use.cpu_seconds)
        for record, use in zip(records, uses, strict=True)
        if record.duration_s > 0
        and math.isfinite(record.duration_s)
        and (use.cpu_calls or not use.calls)
        # A subnormal duration from an edited record would make the ratio infinite.
        and math.isfinite(use.cpu_seconds / record.duration_s)
    ]
    shares = [cpu / wall for wall, cpu in timed]
    wall = total(wall for wall, _ in timed)
    overall = total(cpu for _, cpu in timed) / wall if wall > 0 else None
    return {
        "overall": overall if overall is not None and math.isfinite(overall) else None,
        "median_sample": statistics.median(shares) if shares else None,
        "max_sample": max(shares) if shares else None,
        "samples": len(timed),
    }


# A call's CPU figure past this (about 32 years) can only come from an edited record; it counts
# as unknown, which also keeps every sum of figures finite.
_MOST_CPU_S = 1e9


def _cpu_seconds(value: Any) -> float | None:
    """A sandbox result's ``cpu_s`` as seconds, or None where it holds no believable figure: a
    record written before the field, a backend that measured none, or an edited value (text, a
    list, a bool, NaN, an infinity, a negative number, an integer past float's range)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    # NaN fails both comparisons.
    return seconds if 0.0 <= seconds <= _MOST_CPU_S else None


def _seconds(value: Any) -> float:
    """A sandbox result's ``duration_s`` (a free-form dict in the record: an edited run
    directory may put text, a list or a 400-digit integer there) as seconds, else 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    try:
        return float(value)
    except OverflowError:  # an int past float's range
        return math.inf if value > 0 else -math.inf


def _cost(records: Sequence[SampleRecord], prices: Prices | None) -> float | None:
    if not prices:
        return None
    total, priced = 0.0, False
    for record in records:
        input_price, output_price = prices.get(record.model, (None, None))
        if input_price is not None:
            total += record.input_tokens * input_price / 1e6
            priced = True
        if output_price is not None:
            total += record.output_tokens * output_price / 1e6
            priced = True
    return total if priced else None


def judge_asked(record: SampleRecord) -> bool:
    """Whether a judge model was asked about this sample (and so its tokens cost something)."""
    # A judge record without a model is a judged track run without a judge: nobody was asked.
    return record.judge is not None and record.judge.decided_by == "judge" and bool(record.judge.model)


def _judge_usage(records: Sequence[SampleRecord], prices: JudgePrices | None) -> dict[str, Any]:
    """The judge's tokens (all attempts) and their cost at the judge's prices."""
    asked = [r.judge for r in records if r.judge is not None and judge_asked(r)]
    input_tokens = sum(j.input_tokens for j in asked)
    output_tokens = sum(j.output_tokens for j in asked)
    cost: float | None = None
    input_price, output_price = prices or (None, None)
    if input_price is not None or output_price is not None:
        cost = input_tokens * (input_price or 0.0) / 1e6 + output_tokens * (output_price or 0.0) / 1e6
    return {
        "samples_judged": len(asked),
        "attempts": sum(len(j.replies) for j in asked),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
        "cost_usd": cost,
    }


def sample_costs(
    record: SampleRecord, prices: Prices | None, judge_prices: JudgePrices | None
) -> tuple[float | None, float | None]:
    """(answering model's cost, judge's cost) of one sample, as :func:`summarize_group` adds them
    up; None where nothing is priced. Lets the live panel keep a running total that ends where
    the summary's does."""
    return _cost([record], prices), _judge_usage([record], judge_prices)["cost_usd"]


def _total_cost(model_cost: float | None, judge_cost: float | None) -> dict[str, Any]:
    priced = [name for name, cost in (("models", model_cost), ("judge", judge_cost)) if cost is not None]
    total = None if not priced else (model_cost or 0.0) + (judge_cost or 0.0)
    return {"total_cost_usd": total, "priced": priced}


def summarize_group(
    records: Sequence[SampleRecord],
    *,
    prices: Prices | None = None,
    judge_prices: JudgePrices | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict[str, Any]:
    """Every statistic for one slice of a run (overall, one subject, one model, ...)."""
    scored = [r for r in records if not is_error(r)]
    outcomes = Counter(r.outcome.value for r in records)
    errors = {o.value: outcomes.get(o.value, 0) for o in sorted(ERROR_OUTCOMES)}
    sandbox = [_sandbox_calls(r) for r in records]
    group: dict[str, Any] = {
        "samples": len(records),
        "tasks": len({r.task_id for r in records}),
        "scored_samples": len(scored),
        "outcomes": {o.value: outcomes.get(o.value, 0) for o in Outcome if outcomes.get(o.value)},
        "errors": {**errors, "total": sum(errors.values())},
        "accuracy": _estimate(scored, lambda r: float(r.success), resamples, seed),
        "accuracy_errors_as_failures": _estimate(
            records, lambda r: 0.0 if is_error(r) else float(r.success), resamples, seed
        ),
        "tokens": {
            "input": sum(r.input_tokens for r in records),
            "output": sum(r.output_tokens for r in records),
            "reasoning": sum(r.reasoning_tokens for r in records),
            "total": sum(r.total_tokens for r in records),
            "estimated_samples": sum(1 for r in records if r.tokens_estimated),
            "mean_per_sample": (total(r.total_tokens for r in records) / len(records) if records else 0.0),
        },
        "turns": sum(len(r.turns) for r in records),
        # How the providers reported each turn's usage (agent/model/usage.py): a shape other
        # than reasoning_in_output is a gateway whose counts were read another way.
        "usage_shapes": dict(
            sorted(Counter(t.usage_shape for r in records for t in r.turns if t.usage_shape).items())
        ),
        "forced_submissions": sum(1 for r in records if r.forced_submission_turn is not None),
        "cap_reached": sum(1 for r in records if r.cap_reached),
        "tool_calls": sum(len(r.tool_calls) for r in records),
        "sandbox_calls": sum(use.calls for use in sandbox),
        "sandbox_seconds": total(use.seconds for use in sandbox),
        # CPU measured from outside the program (ExecResult.cpu_s), over the calls that have it.
        "sandbox_cpu_calls": sum(use.cpu_calls for use in sandbox),
        "sandbox_cpu_seconds": total(use.cpu_seconds for use in sandbox),
        "model_retries": sum(r.retries for r in records),
        "model_errors": model_error_groups(records),
        "reasoning_not_carried": reasoning_not_carried(records),
        "judge_retries": sum(r.judge_retries for r in records),
        # Judge tracks: answers that imitate the judge prompt's sections (agent/judge/forgery.py).
        "answer_mimics_prompt_sections": sum(1 for r in records if r.answer_mimics_prompt_sections),
        "sample_seconds": total(r.duration_s for r in records),
        "cost_usd": _cost(records, prices),
        "judge": _judge_usage(records, judge_prices),
        "pass_at_k": pass_at_k_summary(task_grid(records)),
    }
    group["sandbox_wall_share"] = _sandbox_share(records, [use.seconds for use in sandbox])
    group["sandbox_cpu_per_wall_second"] = _sandbox_cpu_per_wall_second(records, sandbox)
    cost = _total_cost(group["cost_usd"], group["judge"]["cost_usd"])
    group["total_cost_usd"], group["cost_priced"] = cost["total_cost_usd"], cost["priced"]
    with_points = [r for r in scored if r.judge is not None and r.judge.points is not None]
    if with_points:
        group["points"] = _estimate(with_points, lambda r: float(r.score), resamples, seed)
    with_eed = [r for r in records if r.eed is not None]
    if with_eed:
        group["eed"] = _estimate(with_eed, lambda r: float(r.eed.score if r.eed else 0.0), resamples, seed)
    return group


def _breakdown(
    records: Sequence[SampleRecord],
    key: Callable[[SampleRecord], str],
    **options: Any,
) -> dict[str, dict[str, Any]]:
    grouped: dict[str, list[SampleRecord]] = defaultdict(list)
    for record in records:
        grouped[key(record)].append(record)
    return {name: summarize_group(grouped[name], **options) for name in sorted(grouped)}


def summarize(
    records: Sequence[SampleRecord],
    *,
    header: Mapping[str, Any] | None = None,
    prices: Prices | None = None,
    judge_prices: JudgePrices | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    planned_samples: int | None = None,
) -> dict[str, Any]:
    """The whole ``summary.json``: overall and broken down by model, subject, effort."""
    options: dict[str, Any] = {
        "prices": prices,
        "judge_prices": judge_prices,
        "resamples": resamples,
        "seed": seed,
    }
    header = header or {}
    by_model_subject = {
        model: _breakdown(group, lambda r: r.subject or NO_SUBJECT, **options)
        for model, group in _group(records, lambda r: r.model).items()
    }
    return {
        "run_id": header.get("run_id"),
        "tracks": sorted({r.track for r in records}),
        "status": header.get("status"),
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "planned_samples": planned_samples,
        "finished_samples": len(records),
        "wall_seconds": wall_seconds(header),
        "bootstrap": {
            "unit": "task",
            "resamples": resamples,
            "seed": seed,
            "level": 0.95,
            "engine": bootstrap_engine(),
        },
        "error_outcomes": sorted(o.value for o in ERROR_OUTCOMES),
        "sandbox": sandbox_summary(header),
        "overall": summarize_group(records, **options),
        "by_model": _breakdown(records, lambda r: r.model, **options),
        "by_subject": _breakdown(records, lambda r: r.subject or NO_SUBJECT, **options),
        "by_reasoning_effort": _breakdown(records, lambda r: r.reasoning_effort or NO_EFFORT, **options),
        "by_model_subject": by_model_subject,
        "tasks": grid_by_model(records),
    }


def sandbox_summary(header: Mapping[str, Any]) -> dict[str, Any] | None:
    """What ran the code, as run.json recorded it: the backend, whether (and why) it isolates
    less than docker, and the libraries the prompt offered."""
    described = header.get("sandbox")
    if not isinstance(described, Mapping):
        return None
    return {
        "backend": described.get("backend"),
        "image_id": described.get("image_id"),
        "isolates_less": bool(header.get("sandbox_isolates_less", described.get("isolates_less"))),
        "warning": described.get("warning"),
        "notes": described.get("notes"),
        "libraries": described.get("libraries"),
    }


def _group(
    records: Sequence[SampleRecord], key: Callable[[SampleRecord], str]
) -> dict[str, list[SampleRecord]]:
    grouped: dict[str, list[SampleRecord]] = defaultdict(list)
    for record in records:
        grouped[key(record)].append(record)
    return dict(sorted(grouped.items()))


def wall_seconds(header: Mapping[str, Any]) -> float | None:
    """Wall time of the run: the sum over its sessions (a resumed run has several)."""
    sessions = header.get("sessions") or []
    total, known = 0.0, False
    if not isinstance(sessions, list):
        return None
    for session in sessions:
        if not isinstance(session, dict):
            continue
        start, end = session.get("started_at"), session.get("ended_at")
        if not (isinstance(start, str) and isinstance(end, str)):
            continue
        try:
            seconds = (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds()
        except (ValueError, TypeError):
            # A hand-edited time (or one naive, one aware) says nothing measurable.
            continue
        total += seconds
        known = True
    return total if known else None


def _sessions(header: Mapping[str, Any]) -> list[dict[str, Any]]:
    sessions = header.get("sessions")
    return [s for s in sessions if isinstance(s, dict)] if isinstance(sessions, list) else []


def run_span(header: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """When the whole run began and last ended: the first session's start and the last one's
    end (a resumed run's header holds only its latest session's), else the header's own."""
    sessions = _sessions(header)
    starts = [s["started_at"] for s in sessions if isinstance(s.get("started_at"), str)]
    first = starts[0] if starts else header.get("started_at")
    last = sessions[-1].get("ended_at") if sessions else header.get("ended_at")
    return (first if isinstance(first, str) else None, last if isinstance(last, str) else None)


def session_count(header: Mapping[str, Any]) -> int:
    return len(_sessions(header))


def cost_usd(records: Sequence[SampleRecord], prices: Prices | None) -> float | None:
    """The records' cost at ``prices`` (model label -> (input, output) USD per million tokens);
    None when no price applies to them."""
    return _cost(records, prices)


def judge_prices_from_config(judge: Any) -> JudgePrices | None:
    """The judge ModelConfig's (input, output) prices, or None when it sets neither (or is None)."""
    if judge is None or (judge.input_price_per_mtok is None and judge.output_price_per_mtok is None):
        return None
    return (judge.input_price_per_mtok, judge.output_price_per_mtok)


def prices_from_config(labelled_models: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """Model label -> (input, output) USD per million tokens, from ``(label, ModelConfig)`` pairs."""
    prices: dict[str, tuple[float | None, float | None]] = {}
    for label, model in labelled_models:
        if model.input_price_per_mtok is not None or model.output_price_per_mtok is not None:
            prices[label] = (model.input_price_per_mtok, model.output_price_per_mtok)
    return prices
