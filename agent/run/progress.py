"""What `proctor run` shows while it works, and the summary table it ends with.

On a terminal: a rich Live panel (samples done / total, running accuracy, tokens, sandbox
calls in flight, errors, retries, the time left and, when every model's prices are known, the
cost so far) and one row per running sample (its turn, tokens so far, and how long it has
waited for the model). Elsewhere (CI, pipes): one plain line per finished
sample, and for a long sample a line at most every ``PLAIN_PROGRESS_INTERVAL_S`` as its turns
end, so logs stay readable. A phase that ends no turn (a judge grading, a long tool call, a slow
first reply) would still be silent: a heartbeat line follows ``HEARTBEAT_S`` after the last line
while samples run, saying how many and for how long.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from proctor.agent.results.records import ERROR_OUTCOMES, SampleRecord
from proctor.agent.text.terminal import escape_for_terminal

# Plain output: a running sample's progress line at most this often (printed when a turn ends).
PLAIN_PROGRESS_INTERVAL_S = 30.0
# Plain output: with samples running and nothing printed for this long, a heartbeat line.
HEARTBEAT_S = 30.0
# Running samples listed in the live panel; more are counted in one line.
MAX_SAMPLE_ROWS = 8
# Samples this session must finish before the panel estimates the time left: one sample that
# failed in a second (or ran all night) says too little about the rest.
ETA_MIN_FINISHED = 3
NO_ESTIMATE = "\u2014"

SampleKey = tuple[str, str, int]


@dataclass(frozen=True)
class Pricing:
    """The prices the run summary's cost uses (``prices_from_config`` and
    ``judge_prices_from_config`` in agent/results/summary.py), for the panel's running cost."""

    # Record label -> (input, output) USD per million tokens, for the models that set any.
    models: Mapping[str, tuple[float | None, float | None]]
    # Every answering model's label: a model missing from ``models`` has no known price.
    labels: Sequence[str]
    # The judge's (input, output) prices; None when it sets neither (or there is no judge).
    judge: tuple[float | None, float | None] | None = None
    # Whether the track asks a judge about every answer, so its price is needed up front.
    judged: bool = False

    def unpriced(self) -> list[str]:
        """What the cost needs and has no price for (both of input and output): labels, "judge"."""
        missing = [
            label
            for label in self.labels
            if any(price is None for price in self.models.get(label, (None, None)))
        ]
        if self.judged and (self.judge is None or any(price is None for price in self.judge)):
            missing.append("judge")
        return missing

    @property
    def any_price(self) -> bool:
        return bool(self.models) or self.judge is not None


@dataclass
class RunningSample:
    """Where one running sample is, for the display."""

    name: str
    started: float
    last_line: float
    turn: int = 0
    tokens: int = 0
    # When the request now in flight was sent; None while tools run or before the first.
    waiting_since: float | None = None


class SampleProgress:
    """One sample's ``RunEvents``: run-wide counts go to the run, its turns to its own row."""

    def __init__(self, run: RunProgress, key: SampleKey) -> None:
        self.run = run
        self.key = key

    def sandbox_call_started(self) -> None:
        self.run.sandbox_call_started()

    def sandbox_call_finished(self, duration_s: float) -> None:
        self.run.sandbox_call_finished(duration_s)

    def model_retry(self, reason: str) -> None:
        self.run.model_retry(reason)

    def tokens_used(self, count: int) -> None:
        self.run.tokens_used(count)

    def model_call_started(self, turn: int) -> None:
        self.run.sample_waiting(self.key, turn)

    def turn_finished(self, turn: int, tokens: int) -> None:
        self.run.sample_turn_finished(self.key, turn, tokens)


class Heartbeat:
    """Asks the progress for a heartbeat line every ``interval_s`` until stopped: a thread, so
    it beats while the event loop waits on a judge (or is busy), and a daemon, so it never holds
    the process's exit."""

    def __init__(self, progress: RunProgress, interval_s: float) -> None:
        self._progress = progress
        # Checked more often than it beats, so a line comes at most a tenth late.
        self._interval_s = max(0.05, interval_s / 10)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="proctor-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._stopped.wait(self._interval_s):
            try:
                self._progress.heartbeat()
            except Exception:  # a display problem must never end a run; the next beat tries again
                continue


def _fmt_duration(seconds: float) -> str:
    """``45s``, ``3m 20s``, ``2h 05m``: the time left, as precise as it is worth."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def _fmt_tokens(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1e6:.2f}M"
    if count >= 10_000:
        return f"{count / 1e3:.0f}k"
    return f"{count:,}"


class RunProgress:
    """Counts what happens during a run; implements the tracks' ``RunEvents`` protocol."""

    def __init__(
        self,
        console: Console | None = None,
        *,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        self.console = console or Console()
        self.clock = clock
        self.use_live = self.console.is_terminal if live is None else live
        self.total = 0
        self.done = 0
        self.resumed = 0
        self.successes = 0
        self.scored = 0
        self.error_outcomes = 0
        self.retries = 0
        self.live_tokens = 0
        self.finished_tokens = 0
        self.sandbox_in_flight = 0
        self.sandbox_calls = 0
        self.running = 0
        self.last_retry_reason: str | None = None
        self.active: dict[SampleKey, RunningSample] = {}
        self._started = clock()
        self._live: Live | None = None
        # For the time left: when each sample now running started (the runner's samples are
        # also in ``active`` by key; rescore's are only here), how long each sample finished
        # this session took, and the most samples seen in flight at once (the run's concurrency).
        self._starts: deque[float] = deque()
        self.session_durations: list[float] = []
        self.peak_running = 0
        self.pricing: Pricing | None = None
        self.cost_usd = 0.0
        # Names of what finished samples used without a known price ("judge", a model label).
        self.unpriced: list[str] = []
        # Plain output: when the last line was printed, and the thread that beats after silence.
        self.heartbeat_s = heartbeat_s
        self._last_line = clock()
        self._print_lock = threading.Lock()
        self._heartbeat: Heartbeat | None = None

    # -- RunEvents ---------------------------------------------------------------------
    def sandbox_call_started(self) -> None:
        self.sandbox_in_flight += 1
        self.sandbox_calls += 1

    def sandbox_call_finished(self, duration_s: float) -> None:
        self.sandbox_in_flight = max(0, self.sandbox_in_flight - 1)

    def model_retry(self, reason: str) -> None:
        self.retries += 1
        self.last_retry_reason = reason
        if not self.use_live:
            self._line(f"  retry: {reason}")

    def tokens_used(self, count: int) -> None:
        self.live_tokens += count

    # The run itself is a RunEvents too (for callers without a per-sample view): these two
    # need a sample to belong to, so at run level they only keep the display fresh.
    def model_call_started(self, turn: int) -> None:
        pass

    def turn_finished(self, turn: int, tokens: int) -> None:
        pass

    # -- per-sample progress -----------------------------------------------------------
    def for_sample(self, model: str, task_id: str, trial: int) -> SampleProgress:
        """The events view of one sample; its row lasts until ``sample_finished`` of its record."""
        key = (model, task_id, trial)
        now = self.clock()
        label = f"{escape_for_terminal(model)} {escape_for_terminal(task_id)}#{trial}"
        self.active[key] = RunningSample(label, now, now)
        return SampleProgress(self, key)

    def sample_waiting(self, key: SampleKey, turn: int) -> None:
        sample = self.active.get(key)
        if sample is not None:
            sample.turn = turn
            sample.waiting_since = self.clock()

    def sample_turn_finished(self, key: SampleKey, turn: int, tokens: int) -> None:
        sample = self.active.get(key)
        if sample is None:
            return
        sample.turn, sample.tokens, sample.waiting_since = turn, tokens, None
        now = self.clock()
        if not self.use_live and now - sample.last_line >= PLAIN_PROGRESS_INTERVAL_S:
            sample.last_line = now
            self._line(f"  {sample.name}: turn {turn}, {tokens:,} tokens, {now - sample.started:.0f}s")

    # -- runner hooks ------------------------------------------------------------------
    def begin(
        self,
        *,
        total: int,
        already_done: list[SampleRecord],
        run_dir: str,
        pricing: Pricing | None = None,
    ) -> None:
        self.total = total
        self.resumed = len(already_done)
        self.pricing = pricing
        self.unpriced = pricing.unpriced() if pricing is not None else []
        # Samples of earlier sessions count in the cost (the summary's total covers them), not
        # in the time left: they ran at another time, perhaps at another concurrency.
        for record in already_done:
            self._count(record)
        self._started = self.clock()
        if self.use_live:
            self._live = Live(self, console=self.console, refresh_per_second=4, transient=True)
            self._live.start()
        else:
            note = f", {self.resumed} already done" if self.resumed else ""
            self._line(f"run {run_dir}: {total} samples{note}")
            self._heartbeat = Heartbeat(self, self.heartbeat_s)
            self._heartbeat.start()

    def sample_started(self) -> None:
        self.running += 1
        self.peak_running = max(self.peak_running, self.running)
        self._starts.append(self.clock())

    def sample_finished(self, record: SampleRecord) -> None:
        self.running = max(0, self.running - 1)
        now = self.clock()
        oldest = self._starts.popleft() if self._starts else None
        sample = self.active.pop((record.model, record.task_id, record.trial), None)
        # A sample without a row (rescore's) is timed from the oldest start still open: over
        # the run the durations add up the same, and the record's own duration_s may include
        # an earlier session's work (a rescored sample keeps its first run's time).
        started = sample.started if sample is not None else oldest
        if started is not None:
            self.session_durations.append(max(0.0, now - started))
        self._count(record)
        if not self.use_live:
            parts = [
                f"[{self.done}/{self.total}]",
                escape_for_terminal(record.model),
                f"{escape_for_terminal(record.task_id)}#{record.trial}",
                f"{record.outcome.value}",
                f"tokens={record.total_tokens}",
                f"{record.duration_s:.1f}s",
            ]
            if record.retries:
                parts.append(f"retries={record.retries}")
            if record.judge_retries:
                parts.append(f"judge_retries={record.judge_retries}")
            if record.error:
                # An error outcome has no result; any other outcome's text says why it scored so.
                key = "error" if record.outcome in ERROR_OUTCOMES else "reason"
                parts.append(f"{key}={escape_for_terminal(headline(record.error)[:120])}")
            parts.append(f"acc={self.accuracy_text()}")
            self._line(" ".join(parts))

    def end(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None
        if self._live is not None:
            self._live.stop()
            self._live = None
        self.active.clear()

    # -- plain output ------------------------------------------------------------------
    def _line(self, text: str) -> None:
        with self._print_lock:
            self._last_line = self.clock()
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def heartbeat(self) -> bool:
        """Print a line when samples run and nothing was printed for ``heartbeat_s``: a judge
        grading or a slow reply ends no turn, and a log that says nothing looks hung."""
        now = self.clock()
        running = self.running or len(self.active)
        if self.use_live or not running or now - self._last_line < self.heartbeat_s:
            return False
        starts = [sample.started for sample in list(self.active.values())] or list(self._starts)
        oldest = f", the longest for {_fmt_duration(now - min(starts))}" if starts else ""
        self._line(
            f"  still working: {self.done}/{self.total} samples finished, {running} running{oldest}; "
            f"{_fmt_duration(now - self._started)} so far"
        )
        return True

    def _count(self, record: SampleRecord) -> None:
        self.done += 1
        self.finished_tokens += record.total_tokens
        self._add_cost(record)
        if record.outcome in ERROR_OUTCOMES:
            self.error_outcomes += 1
        else:
            self.scored += 1
            self.successes += int(record.success)

    def _add_cost(self, record: SampleRecord) -> None:
        if self.pricing is None or not self.pricing.any_price:
            return
        from proctor.agent.results.summary import judge_asked, sample_costs

        model_cost, judge_cost = sample_costs(record, self.pricing.models, self.pricing.judge)
        # A judge the config did not announce (a track that asks one only sometimes) or a model
        # without a price makes the total unknown, rather than quietly too low.
        if judge_asked(record) and judge_cost is None and "judge" not in self.unpriced:
            self.unpriced.append("judge")
        if model_cost is None and record.model not in self.unpriced:
            self.unpriced.append(record.model)
        self.cost_usd += (model_cost or 0.0) + (judge_cost or 0.0)

    # -- display -----------------------------------------------------------------------
    def eta_seconds(self) -> float | None:
        """Seconds until the last planned sample should finish, or None while too few finished.

        The work left is each queued sample at the mean duration of this session's finished
        samples plus what each running sample has left of that mean; the run's concurrency
        (the most samples seen in flight) shares it out, and the last running sample bounds it
        from below. Between finishes it counts down with the clock; a finish moves the mean by
        one sample in many, so the estimate does not jump.
        """
        finished = len(self.session_durations)
        # A short session says when its last sample should end from the others.
        needed = min(ETA_MIN_FINISHED, max(1, self.total - self.resumed - 1))
        if finished < needed:
            return None
        mean = sum(self.session_durations) / finished
        now = self.clock()
        starts = [sample.started for sample in self.active.values()] or list(self._starts)
        left_running = [max(0.0, mean - (now - started)) for started in starts]
        queued = max(0, self.total - self.done - len(starts))
        work = queued * mean + sum(left_running)
        slots = max(self.peak_running, 1)
        return max(0.0, work / slots, max(left_running, default=0.0))

    def eta_text(self) -> str:
        if self.done >= self.total:
            return "ETA 0s"
        eta = self.eta_seconds()
        return f"ETA {NO_ESTIMATE}" if eta is None else f"ETA {_fmt_duration(eta)}"

    def cost_text(self) -> str | None:
        """The cost so far, when every model (and the judge) used has a price; a note when only
        some have; None (nothing said) when the config prices nothing."""
        if self.pricing is None or not self.pricing.any_price:
            return None
        if self.unpriced:
            unpriced = ", ".join(escape_for_terminal(name) for name in self.unpriced)
            return f"cost unknown (no prices for {unpriced})"
        return f"cost ${self.cost_usd:.4f}"

    @property
    def tokens(self) -> int:
        # Live counts come from tracks as calls finish; finished records are a floor.
        return max(self.live_tokens, self.finished_tokens)

    def accuracy_text(self) -> str:
        if not self.scored:
            return "-"
        return f"{self.successes / self.scored:.3f} ({self.successes}/{self.scored})"

    def sample_rows(self) -> Table | None:
        """One row per running sample: turn, tokens so far, time waiting for the model."""
        if not self.active:
            return None
        now = self.clock()
        rows = Table.grid(padding=(0, 2))
        samples = sorted(self.active.values(), key=lambda s: s.started)
        for sample in samples[:MAX_SAMPLE_ROWS]:
            if sample.waiting_since is not None:
                state = f"waiting for the model {now - sample.waiting_since:.0f}s"
            elif sample.turn:
                state = "running tools"
            else:
                state = "starting"
            rows.add_row(
                # Text, never markup: a task id is data.
                Text(sample.name, style="dim"),
                Text(f"turn {sample.turn}"),
                Text(f"tokens {_fmt_tokens(sample.tokens)}"),
                Text(state),
                Text(f"{now - sample.started:.0f}s"),
            )
        if len(samples) > MAX_SAMPLE_ROWS:
            rows.add_row(Text(f"... and {len(samples) - MAX_SAMPLE_ROWS} more running", style="dim"))
        return rows

    def __rich__(self) -> RenderableType:
        elapsed = self.clock() - self._started
        bar = ProgressBar(total=max(self.total, 1), completed=self.done, width=40)
        stats = Table.grid(padding=(0, 2))
        stats.add_row(
            Text(f"{self.done}/{self.total} samples"),
            Text(f"running {self.running}"),
            Text(f"accuracy {self.accuracy_text()}"),
        )
        stats.add_row(
            Text(f"tokens {_fmt_tokens(self.tokens)}"),
            Text(f"sandbox in flight {self.sandbox_in_flight} (calls {self.sandbox_calls})"),
            Text(f"elapsed {elapsed:.0f}s"),
        )
        errors = Text(f"errors {self.error_outcomes}")
        if self.error_outcomes:
            errors.stylize("bold red")
        retry = Text(f"retries {self.retries}")
        if self.last_retry_reason:
            retry.append(f" (last: {self.last_retry_reason[:60]})", style="dim")
        stats.add_row(errors, retry, Text(self.eta_text()))
        parts: list[RenderableType] = [bar, stats]
        cost = self.cost_text()
        if cost is not None:
            parts.append(Text(cost))
        rows = self.sample_rows()
        if rows is not None:
            parts.append(rows)
        return Group(*parts)


TRACEBACK_HEADER = "Traceback (most recent call last):"


def headline(text: str) -> str:
    """The one line of ``text`` that says what happened.

    A Python traceback (an ``answer()`` that raised, say) opens with a header that says nothing;
    the exception's own line is the first one after the last header (chained tracebacks end with
    the exception that ended it) not indented as frames and source lines are. A message of
    several lines is shown by its first. Any other text opens with its point.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    headers = [index for index, line in enumerate(lines) if line.strip() == TRACEBACK_HEADER]
    if headers:
        own = [line for line in lines[headers[-1] + 1 :] if not line[:1].isspace()]
        if own:
            return own[0].strip()
    return lines[0].strip()


def _estimate_text(estimate: dict[str, Any] | None, *, scale: float = 1.0, digits: int = 3) -> str:
    if not estimate:
        return "-"
    mean = estimate["mean"] * scale
    se = estimate.get("se")
    se_text = f" ± {se * scale:.{digits}f}" if se is not None else ""
    low, high = estimate["ci95_low"] * scale, estimate["ci95_high"] * scale
    return f"{mean:.{digits}f}{se_text} [{low:.{digits}f}, {high:.{digits}f}]"


def summary_table(summary: dict[str, Any]) -> Table:
    """Overall and per model / subject / reasoning effort, errors kept in their own columns."""
    table = Table(title="Run summary", title_justify="left", show_lines=False)
    table.add_column("slice")
    table.add_column("n", justify="right")
    table.add_column("accuracy ± SE [95% CI]", justify="right")
    table.add_column("errors as failures", justify="right")
    table.add_column("errors", justify="right")
    extra_columns = []
    overall = summary.get("overall", {})
    if overall.get("points"):
        extra_columns.append(("points", "points ± SE"))
    if overall.get("eed"):
        extra_columns.append(("eed", "EED ± SE"))
    for _, title in extra_columns:
        table.add_column(title, justify="right")
    table.add_column("tokens", justify="right")

    def add(name: str, group: dict[str, Any], style: str | None = None) -> None:
        errors = group.get("errors", {})
        error_text = str(errors.get("total", 0))
        if errors.get("total"):
            details = ", ".join(f"{k} {v}" for k, v in errors.items() if k != "total" and v)
            error_text += f" ({details})"
        row: list[str | Text] = [
            # Text, not str: a subject or model name is data, never rich markup ("[/]" would raise).
            Text(escape_for_terminal(name)),
            str(group.get("samples", 0)),
            _estimate_text(group.get("accuracy")),
            _estimate_text(group.get("accuracy_errors_as_failures")),
            error_text,
        ]
        for key, _ in extra_columns:
            row.append(_estimate_text(group.get(key), digits=2))
        row.append(_fmt_tokens(int(group.get("tokens", {}).get("total", 0))))
        table.add_row(*row, style=style)

    add("overall", overall, style="bold")
    for heading, key in (("model", "by_model"), ("subject", "by_subject"), ("effort", "by_reasoning_effort")):
        groups = summary.get(key) or {}
        if len(groups) > 1 or (key == "by_model" and groups):
            for name, group in groups.items():
                add(f"{heading}: {name}", group)
    return table


def outcome_line(summary: dict[str, Any]) -> str:
    overall = summary.get("overall", {})
    outcomes = ", ".join(f"{name} {count}" for name, count in overall.get("outcomes", {}).items())
    parts = [f"outcomes: {outcomes or 'none'}"]
    wall = summary.get("wall_seconds")
    if wall is not None:
        parts.append(f"wall {wall:.1f}s")
    parts.append(f"sandbox calls {overall.get('sandbox_calls', 0)}")
    parts.append(f"model retries {overall.get('model_retries', 0)}")
    if overall.get("judge_retries"):
        parts.append(f"judge retries {overall['judge_retries']}")
    if overall.get("answer_mimics_prompt_sections"):
        parts.append(
            f"answers imitating the judge prompt's sections {overall['answer_mimics_prompt_sections']}"
        )
    if overall.get("cost_usd") is not None:
        parts.append(f"model cost ${overall['cost_usd']:.4f}")
    return "; ".join(parts)


def print_final(console: Console, summary: dict[str, Any], run_dir: str) -> None:
    from proctor.agent.results.summary import (
        model_error_lines,
        reasoning_carry_lines,
        scoring_headline,
    )
    from proctor.agent.results.summary_tables import PASSK_NOTE, cost_line, grid_table, passk_table

    console.print(summary_table(summary))
    overall = summary.get("overall") or {}
    console.print(scoring_headline(overall), markup=False, highlight=False, soft_wrap=True)
    # A model whose endpoint refused its reasoning ran another protocol than the others, and an
    # unrecognised refusal shows as a group of model errors: both named here, never silent.
    for line in [*reasoning_carry_lines(overall), *model_error_lines(overall)]:
        # The lines quote endpoints' own messages: shown, never obeyed by the terminal.
        console.print(escape_for_terminal(line), markup=False, highlight=False, soft_wrap=True)
    console.print(outcome_line(summary), markup=False, highlight=False, soft_wrap=True)
    costs = cost_line(summary)
    if costs:
        console.print(costs, markup=False, highlight=False, soft_wrap=True)
    passk = passk_table(summary)
    if passk is not None:
        console.print(passk)
        console.print(PASSK_NOTE, markup=False, highlight=False, soft_wrap=True)
    grid, left_out = grid_table(summary)
    if grid is not None:
        console.print(grid)
        if left_out:
            console.print(
                f"... {left_out} more task rows in summary.json and the report",
                markup=False,
                highlight=False,
            )
    sandbox = summary.get("sandbox") or {}
    if sandbox.get("warning"):
        console.print(f"sandbox: {sandbox['warning']}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"run: {run_dir}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"report: proctor view {run_dir}", markup=False, highlight=False, soft_wrap=True)
