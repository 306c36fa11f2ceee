"""Re-score a stored run into a new run directory, resumably; the original is only ever read.

Each planned sample is one stored record. Records that hold an answer are graded again with
the track's own grading code (judge, EED, or the FrontierMath submission pipeline in the
sandbox); the others are carried over as they were, marked as not re-scored. Every finished
record goes through the store's writer (one write, flush, fsync), so an interrupted re-score
loses nothing finished, and ``--resume`` grades only what is left or ended in an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import RunConfig
from proctor.agent.model.base import ModelClient
from proctor.agent.rescore.regrade import NotRescored, RegradeContext, Regrader, regrader_for
from proctor.agent.rescore.settings import describe_changes, judge_endpoint
from proctor.agent.rescore.stored_run import StoredRun, StoredSample
from proctor.agent.results.records import RERUN_ON_RESUME, Outcome, RescoreNote, SampleRecord, utc_now
from proctor.agent.results.store import (
    RunStore,
    SampleKey,
    checked_header,
    file_sha256,
    sample_key,
)
from proctor.agent.results.summary import prices_from_config, summarize
from proctor.agent.run.clients import open_clients
from proctor.agent.run.config_loader import check_run_dir
from proctor.agent.run.failure_records import describe_exception, reference_or_none
from proctor.agent.run.progress import RunProgress
from proctor.agent.run.run_header import environment_info
from proctor.agent.run.run_sandbox import sandbox_spec
from proctor.agent.run.sample_plan import model_labels
from proctor.agent.run.sample_workers import ShieldedWrites
from proctor.agent.run.session import SampleSession, SessionPlan, plan_session
from proctor.agent.tracks.registry import make_track
from proctor.sandbox import Sandbox, execution_caller, open_sandbox


@dataclass(frozen=True)
class PlannedRegrade:
    stored: StoredSample
    task: Any
    answer: Any  # the stored answer, or NotRescored

    @property
    def key(self) -> SampleKey:
        return sample_key(self.stored.record)


@dataclass
class RescoreResult:
    run_dir: Path
    status: str  # finished | interrupted | failed
    summary: dict[str, Any]
    planned: int
    finished: int
    rescored_now: int
    harness_errors: list[str] = field(default_factory=list)


def default_out(source: Path, now: dt.datetime | None = None) -> Path:
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    return source.parent / f"{source.name}-rescore-{stamp}"


def _inside(path: Path, directory: Path) -> bool:
    """Whether ``path`` is ``directory`` or lies below it (symlinks and ``..`` resolved)."""
    try:
        return path.resolve().is_relative_to(directory.resolve())
    except OSError:
        return False


def _note(record: SampleRecord, *, rescored: bool, reason: str | None = None) -> RescoreNote:
    return RescoreNote(
        rescored=rescored,
        reason=reason,
        previous_outcome=record.outcome,
        previous_score=record.score,
        previous_success=record.success,
        previous_error=record.error,
        previous_judge_model=record.judge.model if record.judge is not None else None,
    )


def _claimed_verdict(record: SampleRecord) -> tuple[str, str] | None:
    """The field and value by which a record holding no answer still claims a result, if any.

    A record is carried over only when it holds nothing to grade (no submission, no reply), so it
    cannot have earned anything: an edited one that says ``correct``, ``success: true``, points
    or an EED score would otherwise enter the new summary without ever being graded.
    """
    if record.outcome is Outcome.CORRECT:
        return "outcome", "'correct'"
    if record.success:
        return "success", "true"
    if record.score != 0.0:
        return "score", repr(record.score)
    if record.judge is not None and (record.judge.points is not None or record.judge.verdict is not None):
        return "judge", "a verdict"
    if record.eed is not None:
        return "eed", "a score"
    return None


def plan_regrades(stored: StoredRun, regrader: Regrader, tasks: dict[str, Any]) -> list[PlannedRegrade]:
    """Validate every stored record before anything is graded: bad data stops the run here."""
    planned: list[PlannedRegrade] = []
    for sample in stored.samples:
        answer = regrader.stored_answer(sample.record, stored.samples_path, sample.line)
        claimed = _claimed_verdict(sample.record) if isinstance(answer, NotRescored) else None
        if claimed is not None:
            where, value = claimed
            raise UserError(
                f"{stored.samples_path}: line {sample.line}: field '{where}': {value}, but the record "
                f"holds no answer to grade ({answer.reason}); a result that was never graded "
                "cannot be carried over"
            )
        task = tasks.get(sample.record.task_id)
        if task is None and not isinstance(answer, NotRescored):
            raise UserError(
                f"{stored.samples_path}: line {sample.line}: field 'task_id': "
                f"{sample.record.task_id!r} is not in the tasks file (give --tasks FILE)"
            )
        planned.append(PlannedRegrade(sample, task, answer))
    return planned


class Rescorer(SampleSession[PlannedRegrade]):
    """One invocation of `proctor rescore`: fresh or resumed, ends with a summary either way.

    The session's lifecycle (claim, header, workers, Ctrl-C, final status, summary) is
    :class:`SampleSession`'s, shared with `proctor run`; this class says how a stored sample is
    graded again. A judge that refuses the key or is out of quota stops it as it stops a run."""

    def __init__(
        self,
        stored: StoredRun,
        config: RunConfig,
        out: Path,
        *,
        resume: bool,
        progress: RunProgress,
        config_file: Path | None = None,
        handle_signals: bool = True,
    ) -> None:
        super().__init__(progress, max_concurrency=config.max_concurrency, handle_signals=handle_signals)
        self.stored = stored
        self.config = config
        self.out = out
        self._store: RunStore | None = None
        self.resume = resume
        self.config_file = config_file
        self.run_id = out.name
        # Set once the re-score is planned and opened (_run(), open_resources()).
        self._regrader: Regrader | None = None
        self._context: RegradeContext | None = None
        # Samples graded again by this session (the rest of what it wrote was carried over).
        self.regraded = 0

    def _header(self, track_settings: dict[str, Any], tasks_sha256: str, selected: int) -> dict[str, Any]:
        stored, config = self.stored, self.config
        return {
            "run_id": self.out.name,
            "track": stored.track,
            "status": "running",
            "created_at": utc_now(),
            "config": config.model_dump(mode="json"),
            "config_file": str(self.config_file) if self.config_file else None,
            "tasks_file": {"path": str(config.tasks), "sha256": tasks_sha256, "selected_tasks": selected},
            "prompt_template_sha256": stored.header.get("prompt_template_sha256"),
            "protocol": stored.header.get("protocol"),
            "models": stored.header.get("models"),
            "track_settings": track_settings,
            "defaults_applied": config.defaults_applied,
            "rescored_from": {
                "path": str(stored.directory.resolve()),
                "run_id": stored.run_id,
                "samples_sha256": file_sha256(stored.samples_path),
                "tasks_sha256": (stored.header.get("tasks_file") or {}).get("sha256"),
            },
            "rescore": {
                "changes": describe_changes(stored, config, tasks_sha256),
                "judge": None if config.judge is None else config.judge.name,
                "judge_endpoint": judge_endpoint(config),
                "torn_bytes_ignored": stored.torn_bytes,
            },
            "sessions": [],
            **environment_info(),
        }

    def _prepare_store(self, header: dict[str, Any]) -> tuple[RunStore, dict[str, Any]]:
        store = RunStore(self.out)
        self._store = store
        if self.out.is_dir():
            # Before anything is read: a second process must not resume what this one writes.
            store.lock()
        if self.resume and store.header_path.exists():
            previous = checked_header(store.read_header(), store.header_path)
            conflicts = self._resume_conflicts(previous, header)
            if conflicts:
                raise UserError(f"{store.header_path}: cannot resume this re-score: " + "; ".join(conflicts))
            header = {
                **header,
                "run_id": previous["run_id"],
                "created_at": previous.get("created_at"),
                "sessions": [s for s in previous.get("sessions") or [] if isinstance(s, dict)]
                if isinstance(previous.get("sessions"), list)
                else [],
                "sandbox": previous.get("sandbox"),
                "sandbox_isolates_less": previous.get("sandbox_isolates_less"),
                "sandbox_spec": previous.get("sandbox_spec"),
            }
        else:
            store.refuse_samples_without_header(self.resume, "re-score")
        return store, header

    @staticmethod
    def _resume_conflicts(previous: dict[str, Any], current: dict[str, Any]) -> list[str]:
        old_from = previous.get("rescored_from")
        if not isinstance(old_from, dict):
            return ["it is not a re-scored run (no rescored_from in run.json)"]
        conflicts: list[str] = []
        new_from = current["rescored_from"]
        for name in ("run_id", "samples_sha256"):
            if old_from.get(name) != new_from[name]:
                conflicts.append(f"rescored_from.{name} was {old_from.get(name)!r}, now {new_from[name]!r}")
        old_config, new_config = previous.get("config") or {}, current["config"]
        for name in ("track_options", "judge"):
            if (old_config or {}).get(name) != new_config.get(name):
                conflicts.append(f"{name} changed")
        if (previous.get("tasks_file") or {}).get("sha256") != current["tasks_file"]["sha256"]:
            conflicts.append("the tasks file changed")
        return conflicts

    async def run(self) -> RescoreResult:
        try:
            return await self._run()
        finally:
            if self._store is not None:
                self._store.unlock()

    async def _run(self) -> RescoreResult:
        config, stored = self.config, self.stored
        if _inside(self.out, stored.directory):
            raise UserError(
                f"--out {self.out}: lies in the run being re-scored; the original is never modified"
            )
        check_run_dir(self.out, "--out")
        track = make_track(stored.track, config.track_options)
        regrader = self._regrader = regrader_for(track)
        tasks = {str(task.id): task for task in track.load_tasks(config.tasks)}
        planned = plan_regrades(stored, regrader, tasks)
        header = self._header(track.effective_settings(config), file_sha256(config.tasks), len(tasks))
        store, header = self._prepare_store(header)
        self.run_id = str(header["run_id"])
        plan = plan_session(
            store,
            planned,
            # An error outcome is graded again on resume; a carried-over record never is.
            finished=lambda r: (
                r.outcome not in RERUN_ON_RESUME or (r.rescore is not None and not r.rescore.rescored)
            ),
            resume=self.resume,
        )
        end = await self.run_session(store, header, plan)
        return RescoreResult(
            self.out, end.status, end.summary, len(planned), end.finished, self.regraded, self.harness_errors
        )

    # -- what the shared session asks of a re-score ---------------------------------------
    async def open_resources(
        self, stack: contextlib.AsyncExitStack, header: dict[str, Any], pending: list[PlannedRegrade]
    ) -> None:
        regrader = self._require_regrader()
        grading = [p for p in pending if not isinstance(p.answer, NotRescored)]
        sandbox = await self._open_sandbox(regrader, grading, header, stack)
        judge = await self._open_judge(regrader, grading, stack)
        self._context = RegradeContext(judge, sandbox, self.config.sandbox, self.progress)

    def begin_progress(self, header: dict[str, Any], plan: SessionPlan[PlannedRegrade]) -> None:
        self.progress.begin(total=len(plan.planned), already_done=plan.already, run_dir=str(self.out))

    async def finish_sample(self, item: PlannedRegrade) -> SampleRecord:
        if self._context is None:
            raise RuntimeError("the re-score's judge and sandbox are opened before any sample is graded")
        return await self._regrade_one(self._require_regrader(), item, self._context)

    async def keep(self, writes: ShieldedWrites, item: PlannedRegrade, record: SampleRecord) -> SampleRecord:
        stored = await writes.write(record)
        self.regraded += 1 if record.rescore is not None and record.rescore.rescored else 0
        return stored

    def close_header(self, header: dict[str, Any], records: list[SampleRecord]) -> None:
        header["rescore"]["rescored"] = sum(
            1 for r in records if r.rescore is not None and r.rescore.rescored
        )
        header["rescore"]["carried_over"] = sum(
            1 for r in records if r.rescore is not None and not r.rescore.rescored
        )
        header["sessions"][-1]["rescored"] = self.regraded

    def summarize(self, records: list[SampleRecord], header: dict[str, Any], planned: int) -> dict[str, Any]:
        prices = prices_from_config(zip(model_labels(self.config.models), self.config.models, strict=True))
        return summarize(records, header=header, prices=prices, planned_samples=planned)

    def _require_regrader(self) -> Regrader:
        if self._regrader is None:
            raise RuntimeError("the regrader is chosen by _run() before any sample is graded")
        return self._regrader

    async def _open_sandbox(
        self,
        regrader: Regrader,
        grading: list[PlannedRegrade],
        header: dict[str, Any],
        stack: contextlib.AsyncExitStack,
    ) -> Sandbox | None:
        if not regrader.needs_sandbox or not grading:
            header.setdefault("sandbox", None)
            return None
        # The run's own spec, read back from run.json's config (sandbox/spec.py): its runtime,
        # engine, isolation, engine path and Ray options too, changed only by explicit flags.
        spec = sandbox_spec(self.config.sandbox)
        header["sandbox_spec"] = spec.record()
        header["sessions"][-1]["sandbox_spec"] = header["sandbox_spec"]
        sandbox = await open_sandbox(spec)
        stack.push_async_callback(sandbox.aclose)
        described = sandbox.describe()
        header.update(
            sandbox=described,
            sandbox_isolates_less=bool(described.get("isolates_less", sandbox.backend != "docker")),
        )
        header["sessions"][-1].update(
            sandbox_backend=sandbox.backend, sandbox_image_id=described.get("image_id")
        )
        if described.get("warning"):
            print(f"proctor: {described['warning']}", file=sys.stderr, flush=True)
        return sandbox

    async def _open_judge(
        self, regrader: Regrader, grading: list[PlannedRegrade], stack: contextlib.AsyncExitStack
    ) -> ModelClient | None:
        """Only the judge is opened: the answering models are never called."""
        if not regrader.needs_judge or not grading or self.config.judge is None:
            return None
        _, judge = await open_clients(stack, [], self.config.judge, self.guard)
        return judge

    async def _regrade_one(
        self, regrader: Regrader, item: PlannedRegrade, context: RegradeContext
    ) -> SampleRecord:
        original = item.stored.record
        if isinstance(item.answer, NotRescored):
            note = _note(original, rescored=False, reason=item.answer.reason)
            carried: dict[str, Any] = {"run_id": self.run_id, "rescore": note}
            if original.reference is None and item.task is not None:
                # A harness error or fallback of a run before every record carried one.
                carried["reference"] = reference_or_none(regrader.track, item.task)
            return original.model_copy(update=carried)
        started = time.monotonic()
        try:
            with execution_caller(object()):
                update = await regrader.regrade(item.task, item.answer, context)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Proctor failed on this sample: recorded apart, and --resume grades it again.
            what = f"{original.model} {original.task_id}#{original.trial}"
            self.harness_errors.append(f"{what}: {describe_exception(exc)}")
            update = {
                "outcome": Outcome.HARNESS_ERROR,
                "score": 0.0,
                "success": False,
                "error": describe_exception(exc),
            }
        note = _note(original, rescored=True)
        # The conversation's own time stays; the grading's time is added to it.
        return original.model_copy(
            update={
                "run_id": self.run_id,
                "harness_traceback": None,
                **update,
                "rescore": note,
                "duration_s": original.duration_s + (time.monotonic() - started),
                "finished_at": utc_now(),
            }
        )
