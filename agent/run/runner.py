"""The shared runner: every (model, task, trial) of a run, concurrently, into the run store.

Concurrency is bounded three ways: ``max_concurrency`` workers here, the connection limit
inside each model client, and the sandbox's own pool. Every finished sample is on disk
(fsync'd) before its worker takes the next one, so a crash loses only samples in flight,
and ``--resume`` runs exactly those again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proctor.agent.inputs import selection
from proctor.agent.inputs.config import PAPER_SOURCE, ModelConfig, RunConfig
from proctor.agent.model.base import ModelClient, ModelError
from proctor.agent.results.records import RERUN_ON_RESUME, SampleRecord, utc_now
from proctor.agent.results.store import RunStore, SampleKey
from proctor.agent.results.summary import (
    judge_prices_from_config,
    prices_from_config,
    reasoning_not_carried,
    summarize,
)
from proctor.agent.run.clients import open_clients
from proctor.agent.run.failure_records import (
    describe_exception,
    fallback_model_error,
    harness_error_record,
    reference_or_none,
)
from proctor.agent.run.guard import StopReason
from proctor.agent.run.preflight import (
    EndpointUse,
    check_keys,
    preflight,
    require_judge,
    uses_of,
)
from proctor.agent.run.progress import Pricing, RunProgress
from proctor.agent.run.resume import pinned_to_recorded_endpoints, prepare_header
from proctor.agent.run.run_header import base_header
from proctor.agent.run.run_sandbox import SandboxOpener, open_run_sandbox
from proctor.agent.run.sample_plan import (
    PlannedSample,
    check_plan_size,
    default_run_dir,
    model_labels,
    plan_samples,
    select_tasks,
)
from proctor.agent.run.sample_workers import ShieldedWrites
from proctor.agent.run.session import SampleSession, SessionPlan, plan_session
from proctor.agent.text.terminal import one_line
from proctor.agent.tracks.base import SampleContext, Track
from proctor.agent.tracks.registry import make_track
from proctor.sandbox import Sandbox, execution_caller


@dataclass
class RunResult:
    run_dir: Path
    status: str  # finished | interrupted | failed | stopped: auth | stopped: quota
    summary: dict[str, Any]
    planned: int
    finished: int
    ran_now: int
    harness_errors: list[str] = field(default_factory=list)
    # Why the run stopped early (an endpoint refused for good); None when it did not.
    stop: StopReason | None = None


@dataclass(frozen=True)
class RunOptions:
    """How a run goes beside its config: what `proctor run`'s flags, the Python API and the
    benchmarks choose, passed to the runner as one value."""

    progress: RunProgress
    # The config file the run was given, recorded in run.json.
    config_file: Path | None = None
    # SIGINT/SIGTERM stop the run gracefully; off where the run is not in the main thread.
    handle_signals: bool = True
    # Benchmarks inject an in-process double here; runs always use open_sandbox.
    sandbox_opener: SandboxOpener | None = None
    # "quick" or "full": audit the opened sandbox before any sample runs (`proctor run --audit`).
    audit: str | None = None
    # Probe every endpoint with one tiny request before anything is spent (`proctor run`
    # does; `--no-preflight` turns it off).
    preflight: bool = False
    # A resume may move a model or the judge to another endpoint, kept as an event in run.json
    # (`--allow-endpoint-change`); without it such a resume is refused.
    allow_endpoint_change: bool = False


class Runner(SampleSession[PlannedSample]):
    """One invocation of `proctor run`: fresh or resumed, ends with a summary either way.

    The session's lifecycle (claim, header, workers, Ctrl-C, final status, summary) is
    :class:`SampleSession`'s, shared with `proctor rescore`; this class says how a planned
    sample becomes a record."""

    def __init__(self, config: RunConfig, options: RunOptions) -> None:
        super().__init__(
            options.progress, max_concurrency=config.max_concurrency, handle_signals=options.handle_signals
        )
        self.config = config
        self.options = options
        # Set once the run is planned and opened (run(), open_resources()).
        self._track: Track | None = None
        self._run_id = ""
        self._labelled: list[tuple[str, ModelConfig]] = []
        self._sandbox: Sandbox | None = None
        self._clients: dict[str, ModelClient] = {}
        self._judge: ModelClient | None = None
        self._run_dir = Path()
        # When each sample in flight started (wall clock, monotonic), for the harness-error
        # record of a sample whose own record the store refused.
        self._started: dict[SampleKey, tuple[str, float]] = {}

    # -- setup -------------------------------------------------------------------------
    def _say_paper_defaults(self, record: Any) -> None:
        """The run's first line names every value it took from the paper unasked."""
        values = record.get("values") if isinstance(record, dict) else None
        if not isinstance(values, dict) or not values:
            return
        listed = ", ".join(f"{field}={value}" for field, value in values.items())
        self.progress.console.print(
            one_line(f"paper defaults (not set by this run's config; {record.get('source')}): {listed}"),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )

    # -- the run -----------------------------------------------------------------------
    async def run(self) -> RunResult:
        config = self.config
        track = make_track(config.track, config.track_options)
        require_judge(track, config)
        loaded_tasks = track.load_tasks(config.tasks)
        tasks = select_tasks(loaded_tasks, config)
        # Before the run directory is touched: nothing is written for a plan that cannot be held.
        check_plan_size(config, len(tasks))
        run_dir = config.out or default_run_dir(config)
        # run.json keeps the config as given; the pinned URLs are in its "endpoints".
        given = config
        if config.resume:
            config = self.config = pinned_to_recorded_endpoints(config, RunStore(run_dir))
        labelled = list(zip(model_labels(config.models), config.models, strict=True))
        labels = [label for label, _ in labelled]
        uses = uses_of(config, labels)
        run_id = run_dir.name
        header = base_header(given, run_id, labels, len(tasks), uses)
        header["track_settings"] = track.effective_settings(config)
        header["defaults_applied"] = config.defaults_applied
        # Every value taken from the paper because the config left it unset, by field path.
        header["paper_defaults"] = {"source": PAPER_SOURCE, "values": config.paper_defaults}
        header["selection"] = selection.selection_record(
            len(loaded_tasks),
            tasks,
            task_filter=config.task_filter,
            task_ids=config.task_ids,
            limit=config.limit_tasks,
        )
        if self.options.config_file is not None:
            header["config_file"] = str(self.options.config_file)
        store = RunStore(run_dir)
        if run_dir.is_dir():
            # Before anything is read: a second process must not resume what this one writes.
            store.lock()
        try:
            return await self._run_in(store, run_dir, header, track, tasks, labelled, uses)
        finally:
            store.unlock()

    async def _run_in(
        self,
        store: RunStore,
        run_dir: Path,
        header: dict[str, Any],
        track: Track,
        tasks: list[Any],
        labelled: list[tuple[str, ModelConfig]],
        uses: list[EndpointUse],
    ) -> RunResult:
        config = self.config
        labels = [label for label, _ in labelled]
        header = prepare_header(
            config, store, header, allow_endpoint_change=self.options.allow_endpoint_change
        )
        self._track, self._run_id, self._labelled = track, header["run_id"], labelled
        self._run_dir = run_dir
        plan = plan_session(
            store,
            plan_samples(labels, config, tasks),
            # An error outcome is not a result: --resume runs that sample again.
            finished=lambda record: record.outcome not in RERUN_ON_RESUME,
            resume=config.resume,
        )
        # A resumed run may select other tasks; the summary covers this session's selection.
        plan.record["selection"] = selection.describe_selection(
            config.task_filter, config.task_ids, config.limit_tasks
        )
        if plan.pending:
            # Before the sandbox, the store or any sample: a missing key or a dead endpoint
            # costs seconds and leaves nothing behind.
            check_keys(uses)
            if self.options.preflight:
                plan.record["preflight"] = [result.as_json() for result in await preflight(uses)]
        end = await self.run_session(store, header, plan)
        return RunResult(
            run_dir=run_dir,
            status=end.status,
            summary=end.summary,
            planned=len(plan.planned),
            finished=end.finished,
            ran_now=end.ran,
            harness_errors=self.harness_errors,
            stop=end.stop,
        )

    # -- what the shared session asks of a run ----------------------------------------
    async def open_resources(
        self, stack: contextlib.AsyncExitStack, header: dict[str, Any], pending: list[PlannedSample]
    ) -> None:
        track = self._require_track()
        self._sandbox = await open_run_sandbox(
            self.config,
            header,
            needed=track.needs_sandbox and bool(pending),
            opener=self.options.sandbox_opener,
            audit=self.options.audit,
            console=self.progress.console,
        )
        if self._sandbox is not None:
            stack.push_async_callback(self._sandbox.aclose)
        # Clients before the store: a bad key or URL is a config error and should leave no run behind.
        if pending:
            self._clients, self._judge = await open_clients(
                stack, self._labelled, self.config.judge, self.guard
            )

    def begin_progress(self, header: dict[str, Any], plan: SessionPlan[PlannedSample]) -> None:
        track = self._require_track()
        self._say_paper_defaults(header.get("paper_defaults"))
        self.progress.begin(
            total=len(plan.planned),
            already_done=plan.already,
            run_dir=str(self._run_dir),
            pricing=Pricing(
                models=prices_from_config(self._labelled),
                labels=[label for label, _ in self._labelled],
                judge=judge_prices_from_config(self.config.judge),
                judged=track.needs_judge and self.config.judge is not None,
            ),
        )

    async def finish_sample(self, item: PlannedSample) -> SampleRecord:
        self._started[item.key] = (utc_now(), time.monotonic())
        return await self._run_one(
            self._require_track(), item, self._run_id, self._sandbox, self._clients[item.label], self._judge
        )

    async def keep(self, writes: ShieldedWrites, item: PlannedSample, record: SampleRecord) -> SampleRecord:
        started_at, started = self._started.pop(item.key, (utc_now(), time.monotonic()))
        try:
            return await writes.write(record)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # The record itself could not be stored: keep the sample as the harness error it
            # is (a bare record; it is the content that failed), with the reference every
            # record carries unless that is what the store refused.
            track = self._require_track()
            self._note_harness_error(item, exc)
            failed = harness_error_record(item, self._run_id, track.name, exc, started_at, started)
            try:
                referenced = failed.model_copy(update={"reference": reference_or_none(track, item.task)})
                return await writes.write(referenced)
            except asyncio.CancelledError:
                raise
            except Exception:
                return await writes.write(failed)

    def close_header(self, header: dict[str, Any], records: list[SampleRecord]) -> None:
        # Per model, the samples that went without the model's reasoning, and why (never silent).
        header["reasoning_not_carried"] = reasoning_not_carried(records)

    def summarize(self, records: list[SampleRecord], header: dict[str, Any], planned: int) -> dict[str, Any]:
        return summarize(
            records,
            header=header,
            prices=prices_from_config(self._labelled),
            judge_prices=judge_prices_from_config(self.config.judge),
            planned_samples=planned,
        )

    def _require_track(self) -> Track:
        if self._track is None:
            raise RuntimeError("the run's track is set by run() before any sample runs")
        return self._track

    def _note_harness_error(self, sample: PlannedSample, error: BaseException) -> None:
        what = f"{sample.label} {sample.task.id}#{sample.trial}"
        self.harness_errors.append(f"{what}: {describe_exception(error)}")

    async def _run_one(
        self,
        track: Track,
        sample: PlannedSample,
        run_id: str,
        sandbox: Sandbox | None,
        client: ModelClient,
        judge: ModelClient | None,
    ) -> SampleRecord:
        """Run one sample to a record; whatever the track raises becomes a recorded outcome."""
        ctx = SampleContext(
            run_id=run_id,
            model=client,
            model_name=sample.label,
            reasoning_effort=sample.model.reasoning_effort,
            sandbox=sandbox,
            config=self.config,
            judge=judge,
            # Its own view, so the display can show this sample's turns while it runs.
            events=self.progress.for_sample(sample.label, str(sample.task.id), sample.trial),
        )
        started_at, started = utc_now(), time.monotonic()
        with self.guard.sample() as tally:
            try:
                # One fair turn per sample under the process's sandbox bound: a reply with sixty
                # python calls queues behind itself, not in front of another sample's call.
                with execution_caller(object()):
                    record = await track.run_sample(sample.task, sample.trial, ctx)
                if not isinstance(record, SampleRecord):
                    raise TypeError(
                        f"track {track.name} returned {type(record).__name__}, not a SampleRecord"
                    )
            except ModelError as exc:
                record = fallback_model_error(sample, run_id, track, exc, started_at, started)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # Not the model's fault and not a result; recorded apart, and --resume runs it again.
                # (KeyboardInterrupt and other BaseExceptions still stop the run.)
                self._note_harness_error(sample, exc)
                record = harness_error_record(sample, run_id, track.name, exc, started_at, started)
        # The runner owns the identity of a sample, and counts its retries (every one, those of
        # calls that finally failed included, which a track never sees); the track owns the rest.
        return record.model_copy(
            update={
                "retries": tally.model_retries,
                "judge_retries": tally.judge_retries,
                # What the sample is graded against, on every record: a harness error or a
                # fallback record has none from its track, and an auditor must still see it.
                "reference": record.reference
                if record.reference is not None
                else reference_or_none(track, sample.task),
                "run_id": run_id,
                "task_id": str(sample.task.id),
                "trial": sample.trial,
                "model": sample.label,
                "reasoning_effort": record.reasoning_effort or sample.model.reasoning_effort,
                "subject": record.subject
                if record.subject is not None
                else getattr(sample.task, "subject", None),
            }
        )


async def execute_run(
    config: RunConfig,
    *,
    progress: RunProgress,
    config_file: Path | None = None,
    handle_signals: bool = True,
    sandbox_opener: SandboxOpener | None = None,
    audit: str | None = None,
    preflight: bool = False,
    allow_endpoint_change: bool = False,
) -> RunResult:
    """Run ``config`` to the end: the entry of `proctor run`, the Python API and the benchmarks
    (each option is :class:`RunOptions`'s field of the same name)."""
    options = RunOptions(
        progress=progress,
        config_file=config_file,
        handle_signals=handle_signals,
        sandbox_opener=sandbox_opener,
        audit=audit,
        preflight=preflight,
        allow_endpoint_change=allow_endpoint_change,
    )
    return await Runner(config, options).run()
