"""The shared runner: every (model, task, trial) of a run, concurrently, into the run store.

Concurrency is bounded three ways: ``max_concurrency`` workers here, the connection limit
inside each model client, and the sandbox's own pool. Every finished sample is on disk
(fsync'd) before its worker takes the next one, so a crash loses only samples in flight,
and ``--resume`` runs exactly those again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import hashlib
import importlib
import importlib.metadata
import logging
import os
import platform
import re
import socket
import sys
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proctor.agent.errors import UserError
from proctor.agent.inputs import selection
from proctor.agent.inputs.config import MAX_PLANNED_SAMPLES, PAPER_SOURCE, ModelConfig, RunConfig
from proctor.agent.inputs.run_config_loader import parse_size
from proctor.agent.model.api_choice import choose_api
from proctor.agent.model.base import ModelClient, ModelError
from proctor.agent.model.endpoint import without_secrets
from proctor.agent.results.records import RERUN_ON_RESUME, Outcome, ReferenceRecord, SampleRecord
from proctor.agent.results.store import RunStore, checked_header, file_sha256, resume_conflicts, sample_key
from proctor.agent.results.summary import judge_prices_from_config, prices_from_config, summarize
from proctor.agent.run.endpoint_record import (
    endpoint_changes,
    endpoints_record,
    pin_recorded_endpoints,
    refuse_or_record,
)
from proctor.agent.run.guard import GuardedClient, RunGuard, StopReason
from proctor.agent.run.hardware import calibrate, hardware_record, host_memory_bytes, memory_check
from proctor.agent.run.preflight import (
    EndpointUse,
    check_keys,
    preflight,
    require_judge,
    uses_of,
)
from proctor.agent.run.progress import Pricing, RunProgress, one_line
from proctor.agent.run.sample_workers import ShieldedWrites, drive_workers, final_status
from proctor.agent.text.encodable import safe_text
from proctor.agent.tracks.base import SampleContext, Track, model_failure
from proctor.agent.tracks.frontiermath.profiles import get_profile
from proctor.agent.tracks.registry import make_track
from proctor.sandbox import Limits, Sandbox, execution_caller, open_sandbox

log = logging.getLogger(__name__)

# open_sandbox's signature: (backend, *, image, pool_size, default_limits) -> Sandbox.
SandboxOpener = Callable[..., Awaitable[Sandbox]]


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def model_labels(models: list[ModelConfig]) -> list[str]:
    """The name each model's records carry; the effort is added only to tell twins apart."""
    names = [m.name for m in models]
    labels = [
        f"{m.name}@{m.reasoning_effort or 'default'}" if names.count(m.name) > 1 else m.name for m in models
    ]
    if len(set(labels)) != len(labels):
        raise UserError("field 'models': the same model with the same reasoning effort is listed twice")
    return labels


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "run"


def default_run_dir(config: RunConfig, *, now: dt.datetime | None = None) -> Path:
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    first = config.models[0].name.split("/", 1)[-1]
    more = f"+{len(config.models) - 1}" if len(config.models) > 1 else ""
    return Path("runs") / f"{stamp}-{_slug(config.track)}-{_slug(first)}{more}"


def select_tasks(tasks: list[Any], config: RunConfig) -> list[Any]:
    """Apply the selection (agent/inputs/selection.py: filter, task ids, limit), keeping file order."""
    counts = collections.Counter(str(task.id) for task in tasks)
    duplicated = sorted(task_id for task_id, count in counts.items() if count > 1)
    if duplicated:
        raise UserError(f"{config.tasks}: task ids must be unique; repeated: {', '.join(duplicated[:5])}")
    return selection.select(
        tasks,
        task_filter=config.task_filter,
        task_ids=config.task_ids,
        limit=config.limit_tasks,
        source=str(config.tasks),
    )


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment_info() -> dict[str, Any]:
    return {
        "versions": {
            "proctor": _version("proctor"),
            "python": platform.python_version(),
            "openai": _version("openai"),
            "sympy": _version("sympy"),
            "pydantic": _version("pydantic"),
        },
        "host": {
            "hostname": socket.gethostname(),
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "python_executable": sys.executable,
        },
    }


@dataclass(frozen=True)
class PlannedSample:
    label: str
    model: ModelConfig
    task: Any
    trial: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.label, str(self.task.id), self.trial)


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


def check_plan_size(config: RunConfig, task_count: int) -> None:
    """One line when models x tasks x trials passes ``MAX_PLANNED_SAMPLES``: the plan is a list
    in memory, and one of 10**400 trials (each field is bounded, their product is not) would
    take the machine's memory, or forever, before the first sample ran."""
    count = len(config.models) * task_count * config.trials
    if count > MAX_PLANNED_SAMPLES:
        raise UserError(
            f"field 'trials': {len(config.models)} model(s) x {task_count:,} task(s) x {config.trials:,} "
            f"trial(s) plan {count:,} samples; one run holds at most {MAX_PLANNED_SAMPLES:,}"
        )


def plan_samples(labels: list[str], config: RunConfig, tasks: list[Any]) -> list[PlannedSample]:
    """Trial-major order, so early results already span tasks and models.

    The count is checked before the list is built (see :func:`check_plan_size`).
    """
    check_plan_size(config, len(tasks))
    return [
        PlannedSample(label, model, task, trial)
        for trial in range(config.trials)
        for task in tasks
        for label, model in zip(labels, config.models, strict=True)
    ]


def _prompt_template_hash(config: RunConfig) -> str | None:
    if config.prompt_template is None:
        return None
    return hashlib.sha256(config.prompt_template.read_bytes()).hexdigest()


def recorded_config(config: RunConfig) -> dict[str, Any]:
    """The config as run.json keeps it: every value explicit, credentials in base URLs removed
    (a resumed run reads it back, so such a URL must be given again with the config)."""
    data = config.model_dump(mode="json")
    for entry in [*data.get("models", []), data.get("judge")]:
        if isinstance(entry, dict) and isinstance(entry.get("base_url"), str):
            entry["base_url"] = without_secrets(entry["base_url"])
    return data


def _base_header(
    config: RunConfig, run_id: str, labels: list[str], task_count: int, uses: list[EndpointUse]
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "track": config.track,
        "status": "running",
        "created_at": utc_now(),
        "config": recorded_config(config),
        "tasks_file": {
            "path": str(config.tasks),
            "sha256": file_sha256(config.tasks),
            "selected_tasks": task_count,
        },
        "prompt_template_sha256": _prompt_template_hash(config),
        # The conversation rules that ran, spelled out, so a reader need not know this version's code.
        "protocol": get_profile(config.protocol).describe() if config.track == "frontiermath" else None,
        "models": [
            {"label": label, "name": m.name, "reasoning_effort": m.reasoning_effort, "api": choose_api(m).api}
            for label, m in zip(labels, config.models, strict=True)
        ],
        # Which API each model and the judge is spoken to with, and why (agent/model/api_choice.py).
        "api_choices": [
            {"role": use.role, "label": use.label, **choose_api(use.cfg).as_json()} for use in uses
        ],
        # The base URL each model and the judge talks to, after the environment; never a key.
        "endpoints": endpoints_record(uses),
        "events": [],
        "sessions": [],
        **environment_info(),
    }


def _fallback_model_error(
    sample: PlannedSample, run_id: str, track: Track, error: ModelError, started_at: str, started: float
) -> SampleRecord:
    """A track let a ModelError escape; record it as the outcome it is rather than lose it: a
    provider's refusal of the conversation is scored, any other failure an error."""
    failure = model_failure(error)
    return SampleRecord(
        run_id=run_id,
        track=track.name,
        task_id=str(sample.task.id),
        trial=sample.trial,
        model=sample.label,
        subject=getattr(sample.task, "subject", None),
        reasoning_effort=sample.model.reasoning_effort,
        outcome=failure.outcome,
        error=failure.error if failure.refusal is not None else f"{type(error).__name__}: {error}",
        provider_refusal=failure.refusal,
        started_at=started_at,
        finished_at=utc_now(),
        duration_s=time.monotonic() - started,
    )


def reference_or_none(track: Track, task: Any) -> ReferenceRecord | None:
    """The track's reference for ``task``; None rather than losing the record if it cannot say."""
    try:
        return track.reference_for(task)
    except Exception as exc:  # a malformed task must not cost the sample its record
        log.warning("no reference for task %s: %s", getattr(task, "id", "?"), describe_exception(exc))
        return None


# Bounds on what a harness_error record keeps of the exception (a hostile reply can make the
# message itself huge).
MAX_ERROR_CHARS = 2_000
MAX_TRACEBACK_CHARS = 8_000


def describe_exception(error: BaseException) -> str:
    """``Type: message``, bounded; never raises, whatever the exception's ``__str__`` does."""
    try:
        message = str(error)
    except Exception:  # a broken __str__ must not lose the sample either
        message = "<message unavailable>"
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return safe_text(text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + " [...]")


def _traceback_tail(error: BaseException) -> str:
    try:
        text = "".join(traceback.format_exception(error))
    except Exception:
        return "<traceback unavailable>"
    # The end holds the raising frame; that is the part worth keeping.
    return safe_text(text if len(text) <= MAX_TRACEBACK_CHARS else "[...]\n" + text[-MAX_TRACEBACK_CHARS:])


def harness_error_record(
    sample: PlannedSample,
    run_id: str,
    track_name: str,
    error: BaseException,
    started_at: str,
    started: float,
) -> SampleRecord:
    """Proctor itself failed on this sample: keep the failure as a result counted apart."""
    return SampleRecord(
        run_id=run_id,
        track=track_name,
        task_id=str(sample.task.id),
        trial=sample.trial,
        model=sample.label,
        subject=getattr(sample.task, "subject", None),
        reasoning_effort=sample.model.reasoning_effort,
        outcome=Outcome.HARNESS_ERROR,
        error=describe_exception(error),
        harness_traceback=_traceback_tail(error),
        started_at=started_at,
        finished_at=utc_now(),
        duration_s=time.monotonic() - started,
    )


@contextlib.asynccontextmanager
async def _local_server(model: ModelConfig) -> AsyncIterator[str]:
    """Start llama.cpp for a ``local/...`` model and yield its OpenAI-compatible base URL."""
    # Imported here: only runs with local models pay for it.
    from proctor.agent.model.local_server import local_model_server

    async with local_model_server(model.name) as base_url:
        yield base_url


async def open_clients(
    stack: contextlib.AsyncExitStack,
    labelled: list[tuple[str, ModelConfig]],
    judge: ModelConfig | None,
    guard: RunGuard,
) -> tuple[dict[str, ModelClient], ModelClient | None]:
    """Every client counts its retries into the running sample and trips ``guard`` on a refusal."""
    from proctor.agent.model.factory import make_client

    local_urls: dict[str, str] = {}

    async def client_for(model: ModelConfig, role: str) -> ModelClient:
        override = None
        if model.name.startswith("local/") and model.base_url is None:
            if model.name not in local_urls:
                local_urls[model.name] = await stack.enter_async_context(_local_server(model))
            override = local_urls[model.name]
        client = make_client(model, base_url_override=override, on_retry=guard.retry_callback(role))
        stack.push_async_callback(client.aclose)
        return GuardedClient(client, guard, role)

    clients = {label: await client_for(model, "model") for label, model in labelled}
    judge_client = await client_for(judge, "judge") if judge is not None else None
    return clients, judge_client


class Runner:
    """One invocation of `proctor run`: fresh or resumed, ends with a summary either way."""

    def __init__(
        self,
        config: RunConfig,
        *,
        progress: RunProgress,
        config_file: Path | None = None,
        handle_signals: bool = True,
        sandbox_opener: SandboxOpener | None = None,
        audit: str | None = None,
        preflight: bool = False,
        allow_endpoint_change: bool = False,
    ) -> None:
        self.config = config
        # Probe every endpoint with one tiny request before anything is spent (`proctor run`
        # does; `--no-preflight` turns it off).
        self.preflight = preflight
        self.allow_endpoint_change = allow_endpoint_change
        # "quick" or "full": audit the opened sandbox before any sample runs (`proctor run --audit`).
        self.audit = audit
        # Benchmarks inject an in-process double here; runs always use open_sandbox.
        self.sandbox_opener: SandboxOpener = sandbox_opener or open_sandbox
        self.progress = progress
        self.config_file = config_file
        self.handle_signals = handle_signals
        self.interrupted = False
        self.harness_errors: list[str] = []
        self._workers: list[asyncio.Task[None]] = []
        self.guard = RunGuard(on_any_retry=progress.model_retry)
        self._stop_announced = False

    # -- setup -------------------------------------------------------------------------
    def _prepare_store(
        self, run_dir: Path, header: dict[str, Any], store: RunStore | None = None
    ) -> tuple[RunStore, dict[str, Any]]:
        store = store or RunStore(run_dir)
        if self.config.resume and store.header_path.exists():
            previous = checked_header(store.read_header(), store.header_path)
            conflicts = resume_conflicts(previous, header)
            if conflicts:
                raise UserError(
                    f"{store.header_path}: cannot resume this run with a different config: "
                    + "; ".join(conflicts)
                )
            events = refuse_or_record(
                endpoint_changes(previous.get("endpoints"), header["endpoints"]),
                allowed=self.allow_endpoint_change,
                run_json=str(store.header_path),
                now=utc_now(),
            )
            header = {
                **header,
                "run_id": previous["run_id"],
                "created_at": previous.get("created_at"),
                "sessions": list(previous.get("sessions") or []),
                # Kept when this session opens no sandbox (nothing left to run).
                "sandbox": previous.get("sandbox"),
                "sandbox_isolates_less": previous.get("sandbox_isolates_less"),
                # The resumed config is read back from run.json with every value explicit.
                "defaults_applied": previous.get("defaults_applied", []),
                "paper_defaults": previous.get("paper_defaults", header.get("paper_defaults")),
                "hardware": previous.get("hardware"),
                "events": list(previous.get("events") or []) + events,
            }
        elif self.config.resume and store.holds_samples():
            raise UserError(
                f"{run_dir}: holds samples.jsonl but no run.json; cannot check it is the same run"
            )
        elif store.holds_samples():
            raise UserError(
                f"{run_dir}: already holds a run; pass --resume to continue it or choose another --out"
            )
        return store, header

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

    @staticmethod
    def _pinned_to_recorded_endpoints(config: RunConfig, store: RunStore) -> RunConfig:
        """A resume talks to the endpoints run.json records, not the new shell's environment."""
        if not store.header_path.exists():
            return config
        previous = store.read_header()
        return pin_recorded_endpoints(
            config, previous.get("endpoints"), model_labels(config.models), str(store.header_path)
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
            config = self.config = self._pinned_to_recorded_endpoints(config, RunStore(run_dir))
        labelled = list(zip(model_labels(config.models), config.models, strict=True))
        labels = [label for label, _ in labelled]
        uses = uses_of(config, labels)
        run_id = run_dir.name
        header = _base_header(given, run_id, labels, len(tasks), uses)
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
        if self.config_file is not None:
            header["config_file"] = str(self.config_file)
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
        store, header = self._prepare_store(run_dir, header, store)
        run_id = header["run_id"]

        loaded = store.load(repair=True)
        # An error outcome is not a result: --resume runs that sample again.
        done_keys = {sample_key(r) for r in loaded.records if r.outcome not in RERUN_ON_RESUME}
        planned = plan_samples(labels, config, tasks)
        planned_keys = {p.key for p in planned}
        pending = [p for p in planned if p.key not in done_keys]
        already = [r for r in loaded.records if sample_key(r) in planned_keys and sample_key(r) in done_keys]

        session: dict[str, Any] = {
            "started_at": utc_now(),
            "ended_at": None,
            "status": "running",
            "resumed": bool(config.resume and loaded.records),
            "planned_samples": len(planned),
            "already_done": len(already),
            "torn_bytes_removed": loaded.torn_bytes,
            # A resumed run may select other tasks; the summary covers this session's selection.
            "selection": selection.describe_selection(
                config.task_filter, config.task_ids, config.limit_tasks
            ),
        }
        if pending:
            # Before the sandbox, the store or any sample: a missing key or a dead endpoint
            # costs seconds and leaves nothing behind.
            check_keys(uses)
            if self.preflight:
                session["preflight"] = [result.as_json() for result in await preflight(uses)]
        header["sessions"].append(session)
        header.update(
            status="running", started_at=session["started_at"], ended_at=None, samples_planned=len(planned)
        )

        prices = prices_from_config(labelled)
        ran_now = 0
        header_written = False
        failure: BaseException | None = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                sandbox = await self._open_sandbox(track, pending, header)
                if sandbox is not None:
                    stack.push_async_callback(sandbox.aclose)
                # Clients first: a bad key or URL is a config error and should leave no run behind.
                clients, judge = (
                    await open_clients(stack, labelled, config.judge, self.guard) if pending else ({}, None)
                )
                if not store.locked:
                    # A fresh directory: claimed as it is created; a run that appeared in it
                    # meanwhile is another process's.
                    store.lock()
                    if store.header_path.exists() or store.holds_samples():
                        raise UserError(f"{run_dir}: another run started in this directory meanwhile")
                store.write_header(header)
                header_written = True
                writer = store.open_writer()
                stack.callback(store.close)
                self._say_paper_defaults(header.get("paper_defaults"))
                self.progress.begin(
                    total=len(planned),
                    already_done=already,
                    run_dir=str(run_dir),
                    pricing=Pricing(
                        models=prices,
                        labels=labels,
                        judge=judge_prices_from_config(config.judge),
                        judged=track.needs_judge and config.judge is not None,
                    ),
                )
                stack.callback(self.progress.end)
                ran_now = await self._run_pending(track, pending, run_id, sandbox, clients, judge, writer)
        except BaseException as exc:  # finished samples still get their header and summary
            if not header_written:
                raise
            failure = exc
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
                self.interrupted = True

        stop = self.guard.stop
        status = final_status(interrupted=self.interrupted, failure=failure, stop=stop)
        records = [r for r in store.load(repair=False).records if sample_key(r) in planned_keys]
        session.update(
            ended_at=utc_now(), status=status, ran=ran_now, harness_errors=self.harness_errors[:50]
        )
        if failure is not None and not self.interrupted:
            session["error"] = f"{type(failure).__name__}: {failure}"
        if stop is not None:
            session["stopped"] = stop.as_json()
        header.update(status=status, ended_at=session["ended_at"], stopped=session.get("stopped"))
        store.write_header(header)
        summary = summarize(
            records,
            header=header,
            prices=prices,
            judge_prices=judge_prices_from_config(config.judge),
            planned_samples=len(planned),
        )
        store.write_summary(summary)
        if failure is not None and not isinstance(failure, asyncio.CancelledError):
            raise failure
        return RunResult(
            run_dir=run_dir,
            status=status,
            summary=summary,
            planned=len(planned),
            finished=len(records),
            ran_now=ran_now,
            harness_errors=self.harness_errors,
            stop=stop,
        )

    async def _open_sandbox(
        self, track: Track, pending: list[PlannedSample], header: dict[str, Any]
    ) -> Sandbox | None:
        if not track.needs_sandbox or not pending:
            header.setdefault("sandbox", None)
            # No code runs in a sandbox this session: the host is still worth recording.
            if not header.get("hardware"):
                header["hardware"] = hardware_record(None, self._limits(), None)
            return None
        box = self.config.sandbox
        try:
            memory = parse_size(box.memory)
        except ValueError as exc:
            raise UserError(f"field 'sandbox.memory': {exc}") from None
        # Passed only when set: injected openers (benchmarks) need not know the option.
        bound: dict[str, Any] = (
            {"max_concurrent_executions": box.max_concurrent_executions}
            if box.max_concurrent_executions is not None
            else {}
        )
        if box.ray_address is not None:
            bound["ray_address"] = box.ray_address
        if box.ray_allow_unauthenticated:
            bound["ray_allow_unauthenticated"] = True
        # Likewise the runtime and engine, which only the docker backend has.
        if box.runtime != "runc" or box.docker_host is not None:
            bound.update(runtime=box.runtime, docker_host=box.docker_host)
        if box.isolation != "fresh":
            bound.update(isolation=box.isolation)
        if box.engine_path != "docker":
            bound.update(engine_path=box.engine_path)
        sandbox = await self.sandbox_opener(
            box.backend,
            image=box.image,
            pool_size=box.pool_size,
            default_limits=Limits(memory_bytes=memory, cpus=box.cpus),
            **bound,
        )
        described = sandbox.describe()
        isolates_less = bool(described.get("isolates_less", sandbox.backend != "docker"))
        header.update(sandbox=described, sandbox_isolates_less=isolates_less)
        warning = described.get("warning")
        if warning:
            # Said before any sample runs, and kept in run.json (sandbox.warning) and the summary.
            print(f"proctor: {warning}", file=sys.stderr, flush=True)
        # Each session records its own sandbox: a resumed run may have moved backend.
        header["sessions"][-1].update(
            sandbox_backend=sandbox.backend, sandbox_image_id=described.get("image_id")
        )
        self._check_memory(described, memory, header)
        if self.audit:
            await self._audit_sandbox(sandbox, header)
        limits = Limits(memory_bytes=memory, cpus=box.cpus)
        try:
            calibration = await calibrate(sandbox, limits) if box.calibrate else None
        except BaseException:
            await sandbox.aclose()
            raise
        header["hardware"] = hardware_record(described, limits, calibration)
        header["sessions"][-1]["calibration"] = calibration
        return sandbox

    def _check_memory(self, described: dict[str, Any], memory: int, header: dict[str, Any]) -> None:
        """Record whether every call that may run at once can have its memory; warn if not."""
        slots = described.get("max_concurrent_executions")
        check = memory_check(
            memory_bytes=memory,
            samples_in_flight=self.config.max_concurrency,
            execution_slots=slots if isinstance(slots, int) and not isinstance(slots, bool) else None,
            host_bytes=host_memory_bytes(),
            backend=str(described.get("backend") or self.config.sandbox.backend),
        )
        header["sandbox_memory_check"] = check
        header["sessions"][-1]["sandbox_memory_check"] = check
        if check.get("warning"):
            print(f"proctor: warning: {check['warning']}", file=sys.stderr, flush=True)

    def _limits(self) -> Limits:
        box = self.config.sandbox
        return Limits(memory_bytes=parse_size(box.memory), cpus=box.cpus)

    async def _audit_sandbox(self, sandbox: Sandbox, header: dict[str, Any]) -> None:
        """Audit the very sandbox this run will use; refuse to start when anything is broken."""
        from proctor.agent.audit import audit_sandbox
        from proctor.agent.audit.render import headline

        box = self.config.sandbox
        limits = Limits(memory_bytes=parse_size(box.memory), cpus=box.cpus)
        try:
            report = await audit_sandbox(sandbox, limits, quick=self.audit == "quick")
        except BaseException:
            await sandbox.aclose()
            raise
        header["audit"] = report.summary()
        header["sessions"][-1]["audit"] = header["audit"]
        self.progress.console.print(headline(report), markup=False, highlight=False, soft_wrap=True)
        if report.broken:
            await sandbox.aclose()
            # Through ray a check runs on every node: say on which one it failed.
            names = ", ".join(
                f"{row.id}{f' on node {row.node}' if row.node else ''} ({row.observed})"
                for row in report.broken
            )
            failed = len(report.broken)
            raise UserError(
                f"--audit {self.audit}: the sandbox failed {failed} check(s), not starting: {names}"
            )

    async def _run_pending(
        self,
        track: Track,
        pending: list[PlannedSample],
        run_id: str,
        sandbox: Sandbox | None,
        clients: dict[str, ModelClient],
        judge: ModelClient | None,
        writer: Any,
    ) -> int:
        queue: Iterator[PlannedSample] = iter(pending)
        finished = 0

        writes = ShieldedWrites(writer)

        async def worker() -> None:
            nonlocal finished
            # A refusal (credentials, quota) stops the run: no further sample starts; the ones
            # in flight finish or end as errors and are kept.
            while not self._stopping():
                sample = next(queue, None)
                if sample is None:
                    return
                started_at, started = utc_now(), time.monotonic()
                record = await self._run_one(track, sample, run_id, sandbox, clients[sample.label], judge)
                try:
                    stored = await writes.write(record)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    # The record itself could not be stored: keep the sample as the harness
                    # error it is (a bare record; it is the content that failed), with the
                    # reference every record carries unless that is what the store refused.
                    self._note_harness_error(sample, exc)
                    failed = harness_error_record(sample, run_id, track.name, exc, started_at, started)
                    try:
                        referenced = failed.model_copy(
                            update={"reference": reference_or_none(track, sample.task)}
                        )
                        stored = await writes.write(referenced)
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        stored = await writes.write(failed)
                finished += 1
                self.progress.sample_finished(stored)

        self._workers = [
            asyncio.create_task(worker())
            for _ in range(min(self.config.max_concurrency, max(len(pending), 1)))
        ]
        await drive_workers(
            self._workers, writes, handle_signals=self.handle_signals, on_signal=self._interrupt
        )
        return finished

    def _stopping(self) -> bool:
        stop = self.guard.stop
        if stop is None:
            return False
        if not self._stop_announced:
            self._stop_announced = True
            self.progress.console.print(
                # The endpoint's own message: one line, never a terminal control.
                f"proctor: {stop.status}: {one_line(stop.describe())}; no further samples start",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        return True

    def _note_harness_error(self, sample: PlannedSample, error: BaseException) -> None:
        what = f"{sample.label} {sample.task.id}#{sample.trial}"
        self.harness_errors.append(f"{what}: {describe_exception(error)}")

    def _interrupt(self, signum: int) -> None:
        """First Ctrl-C: stop cleanly (cancel in-flight samples, keep finished ones)."""
        self.interrupted = True
        loop = asyncio.get_running_loop()
        # A second Ctrl-C falls through to Python's default handler and aborts at once.
        loop.remove_signal_handler(signum)
        for task in self._workers:
            task.cancel()

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
        self.progress.sample_started()
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
                record = _fallback_model_error(sample, run_id, track, exc, started_at, started)
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
    runner = Runner(
        config,
        progress=progress,
        config_file=config_file,
        handle_signals=handle_signals,
        sandbox_opener=sandbox_opener,
        audit=audit,
        preflight=preflight,
        allow_endpoint_change=allow_endpoint_change,
    )
    return await runner.run()
