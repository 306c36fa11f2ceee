"""A Proctor run as an Inspect AI eval log, built with ``inspect_ai.log``'s own types and writer.

One log per model of the run (Inspect's log holds one model). Each record becomes an
``EvalSample`` (:mod:`proctor.agent.export.inspect_sample`: the task's question as its input,
the transcript as chat messages and as transcript events, one score named ``proctor``); error
outcomes (they say nothing about the model) become the sample's ``error`` and carry no score, so
Inspect's metrics exclude them as Proctor's accuracy does. Values Inspect's writer cannot hold
are fitted first (:mod:`proctor.agent.export.inspect_bounds`), so no sample stops the export.

Inspect runs in a child process, never in the caller's: importing inspect_ai calls
``nest_asyncio.apply()``, which patches ``asyncio`` for the whole process (its ``run``, the
event loop's ``run_until_complete``, tasks and futures). After an in-process export every later
event loop of the caller (a run through the Python API, an async test) would run on the patched
code. :func:`export_inspect` validates the run here, so bad input is still one clear line, and
the child (``python -m proctor.agent.export.inspect_log``) builds and writes the logs.
Test: ``tests/export/test_inspect_export.py::test_an_export_leaves_the_callers_asyncio_untouched``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.agent.errors import UserError
from proctor.agent.export.inspect_bounds import Fitter
from proctor.agent.export.inspect_sample import SCORER, Settings, TaskInfo, eval_sample
from proctor.agent.inputs.config import RunConfig
from proctor.agent.rescore.stored_run import validate_config
from proctor.agent.results.records import ERROR_OUTCOMES, SampleRecord
from proctor.agent.results.store import RUN_HEADER, SUMMARY, read_json, records_from, refuse_run_file
from proctor.agent.results.summary import cost_usd, prices_from_config, run_span, session_count, wall_seconds
from proctor.agent.run.sample_plan import model_labels

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog

INSTALL_HINT = "the inspect_ai package is needed for --format inspect: pip install 'proctor[inspect]'"
_STATUS = {"finished": "success", "interrupted": "cancelled", "failed": "error", "running": "started"}


# The directory holding the ``proctor`` package this process runs, for the child's import path.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def require_inspect() -> None:
    """Refuse at once when inspect_ai is missing, without importing it here (see the module doc)."""
    # The top-level name only: finding ``inspect_ai.log`` would import ``inspect_ai`` itself.
    try:
        found = importlib.util.find_spec("inspect_ai") is not None
    except ValueError:  # sys.modules holds a module without a spec under that name
        found = False
    if not found:
        raise UserError(INSTALL_HINT)


def _text(value: Any) -> str:
    """Stored content as text, whatever an edited file put there."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def task_infos(config: RunConfig) -> dict[str, TaskInfo]:
    """Task id -> its question and the reference it was graded against, when the tasks file
    still loads (else each sample falls back on what its record holds)."""
    from proctor.agent.tracks.registry import make_track

    if not config.tasks.is_file():
        return {}
    try:
        track = make_track(config.track, config.track_options)
        tasks = track.load_tasks(config.tasks)
    except (UserError, ValueError, TypeError, OSError):
        return {}
    infos: dict[str, TaskInfo] = {}
    for task in tasks:
        reference = getattr(task, "answer", None) or getattr(task, "rubric", None)
        reference = reference or getattr(task, "verification_code", None)
        question = getattr(task, "question", None)
        infos[str(task.id)] = TaskInfo(
            question=question if isinstance(question, str) else None,
            target=None if reference is None else _text(reference),
        )
    return infos


def offered_tools(config: RunConfig) -> tuple[dict[str, Any], ...]:
    """The tool schemas the run's model requests carried (none for a judged track without its
    python tool)."""
    from proctor.agent.tracks.frontiermath.tools import tool_schemas
    from proctor.agent.tracks.science_tools import python_tool_schema

    if config.track == "frontiermath":
        return tuple(tool_schemas(config.sandbox.timeout_s, config.sandbox.answer_timeout_s))
    if config.track == "olympiad" and config.track_options.get("python_tool") is True:
        return (python_tool_schema(config.sandbox.timeout_s),)
    return ()


def _metrics(group: Any) -> dict[str, Any]:
    from inspect_ai.log import EvalMetric

    # summary.json may have been edited: a block that is not an object, or a value that is not a
    # number float() takes (text, 400 digits), is left out of the metrics, never raised on.
    metrics: dict[str, Any] = {}
    accuracy = _mapping(group).get("accuracy")
    mean = _float_or_none(_mapping(accuracy).get("mean"))
    if mean is not None:
        metrics["accuracy"] = EvalMetric(name="accuracy", value=mean)
        se = _float_or_none(_mapping(accuracy).get("se"))
        if se is not None:
            metrics["stderr"] = EvalMetric(name="stderr", value=se)
    return metrics


def _float_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def eval_log(
    header: Mapping[str, Any],
    config: RunConfig,
    label: str,
    records: list[SampleRecord],
    summary: Mapping[str, Any],
) -> EvalLog:
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalPlan,
        EvalPlanStep,
        EvalResults,
        EvalScore,
        EvalSpec,
        EvalStats,
    )
    from inspect_ai.model import ModelConfig, ModelUsage

    tasks_file = _mapping(header.get("tasks_file"))
    infos = task_infos(config)
    models = dict(zip(model_labels(config.models), config.models, strict=True))
    settings = Settings(
        model=models.get(label),
        judge=config.judge,
        max_output_tokens=config.budget.max_output_tokens,
        track=config.track,
        tools=offered_tools(config),
    )
    samples = [eval_sample(r, infos.get(r.task_id, TaskInfo()), settings) for r in records]
    run_id = _text(header.get("run_id"))
    track = _text(header.get("track"))
    by_model = _mapping(summary.get("by_model"))
    scored = [r for r in records if r.outcome not in ERROR_OUTCOMES]
    created = _text(header.get("created_at")) or (records[0].started_at if records else "")
    spec = EvalSpec(
        run_id=run_id,
        eval_id=_slug(f"{run_id}-{label}"),
        created=created,
        task=f"proctor/{track}",
        task_id=run_id,
        dataset=EvalDataset(
            name=Path(_text(tasks_file.get("path"))).name or None,
            location=_text(tasks_file.get("path")) or None,
            samples=len({r.task_id for r in records}),
        ),
        model=label,
        model_roles={"grader": ModelConfig(model=config.judge.name)} if config.judge is not None else None,
        config=EvalConfig(epochs=config.trials),
        metadata=_run_metadata(header),
    )
    model = models.get(label)
    usage = ModelUsage(
        input_tokens=sum(r.input_tokens for r in records),
        output_tokens=sum(r.output_tokens for r in records),
        total_tokens=sum(r.total_tokens for r in records),
        # At the prices the run's config set for this model (none set: no cost, not 0).
        total_cost=cost_usd(records, prices_from_config([(label, model)]) if model is not None else None),
    )
    # The whole run, not its last session: a resumed run's header holds only the latest one's.
    first_start, last_end = run_span(header)
    return EvalLog(
        status=_STATUS.get(_text(header.get("status")), "started"),  # type: ignore[arg-type]
        eval=spec,
        plan=EvalPlan(name="proctor", steps=[EvalPlanStep(solver=f"proctor/{track}")]),
        results=EvalResults(
            total_samples=len(records),
            completed_samples=len(scored),
            scores=[
                EvalScore(
                    name=SCORER,
                    scorer=SCORER,
                    scored_samples=len(scored),
                    unscored_samples=len(records) - len(scored),
                    metrics=_metrics(by_model.get(label)),
                )
            ],
        ),
        stats=EvalStats(
            started_at=first_start or created,
            completed_at=last_end or "",
            model_usage={label: usage},
        ),
        samples=samples,
    )


def _run_metadata(header: Mapping[str, Any]) -> dict[str, Any]:
    """The header's facts about the run, fitted like a sample's values (run.json may be edited)."""
    fit = Fitter()
    keys = ("track", "status", "protocol", "tasks_file", "rescored_from", "rescore", "versions")
    facts = {k: header.get(k) for k in keys if header.get(k) is not None}
    # Inspect's duration is completed_at - started_at, which counts the gaps between a resumed
    # run's sessions; the time the run actually ran is this sum.
    wall = wall_seconds(header)
    if wall is not None:
        facts["wall_time_s"] = round(wall, 3)
    facts["sessions"] = session_count(header)
    data = {"proctor_run": fit.value(facts, "run.json")}
    report = fit.report()
    return data if report is None else {**data, "proctor_export": report}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "model"


def export_inspect(run_dir: Path, output: Path | None) -> list[Path]:
    """Write one eval log per model of the run; return the files written.

    Bad input (a missing tool, a run directory that is not one, an edited header or record)
    is refused here as one :class:`UserError` line, before Inspect is started; the logs are then
    built and written in a child process, so inspect_ai never loads into this one.
    """
    require_inspect()
    _read_run(run_dir, output)
    request = json.dumps({"run": str(run_dir), "output": None if output is None else str(output)})
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "proctor.agent.export.inspect_log", request],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    try:
        reply = json.loads(done.stdout)
    except ValueError:
        reply = None
    if not isinstance(reply, dict) or done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        reason = lines[-1] if lines else f"exit status {done.returncode}"
        raise RuntimeError(f"the Inspect export process failed: {reason}")
    if "error" in reply:
        raise UserError(str(reply["error"]))
    return [Path(path) for path in reply["written"]]


def _read_run(
    run_dir: Path, output: Path | None
) -> tuple[dict[str, Any], RunConfig, list[SampleRecord], Mapping[str, Any], list[tuple[str, Path]]]:
    """The run's header, config, records and summary, and the log file for each model label."""
    header_path = run_dir / RUN_HEADER
    if not header_path.is_file():
        raise UserError(f"{header_path}: not found; {run_dir} is not a run directory")
    header = read_json(header_path)
    config = validate_config(header.get("config"), header_path)
    records = records_from(run_dir)
    if not records:
        raise UserError(f"{run_dir}: the run has no finished samples to export")
    summary = read_json(run_dir / SUMMARY) if (run_dir / SUMMARY).is_file() else {}
    labels = sorted({r.model for r in records})
    target = output or Path(f"{_slug(_text(header.get('run_id')) or run_dir.name)}.eval")
    if target.suffix not in (".eval", ".json"):
        raise UserError(f"-o {target}: an Inspect log ends in .eval or .json")
    files: list[tuple[str, Path]] = []
    for label in labels:
        path = (
            target if len(labels) == 1 else target.with_name(f"{target.stem}.{_slug(label)}{target.suffix}")
        )
        # Never over a run directory's own files (`-o RUN/run.json` replaced the run's header).
        refuse_run_file(path, "-o")
        files.append((label, path))
    return header, config, records, summary, files


def _write_logs(run_dir: Path, output: Path | None) -> list[Path]:
    """The child's side of :func:`export_inspect`: read the run again and write its logs."""
    from inspect_ai.log import write_eval_log

    header, config, records, summary, files = _read_run(run_dir, output)
    if not summary:
        from proctor.agent.results.summary import summarize

        summary = summarize(records, header=header)
    written: list[Path] = []
    for label, path in files:
        log = eval_log(header, config, label, [r for r in records if r.model == label], summary)
        try:
            write_eval_log(log, path.resolve())
        except OSError as exc:
            raise UserError(f"-o {path}: cannot write ({exc.strerror or exc})") from None
        written.append(path)
    return written


def _child_main(request_text: str) -> None:
    # The reply gets a private copy of stdout; descriptor 1 then points at stderr, so nothing
    # inspect_ai or a library prints can corrupt the one JSON line the parent reads.
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    request = json.loads(request_text)
    output = request.get("output")
    reply: dict[str, Any]
    try:
        written = _write_logs(Path(request["run"]), None if output is None else Path(output))
        reply = {"written": [str(path) for path in written]}
    except UserError as exc:
        reply = {"error": str(exc)}
    except ImportError as exc:
        if not (exc.name or "").startswith("inspect_ai"):
            raise
        reply = {"error": INSTALL_HINT}
    replies.write(json.dumps(reply) + "\n")
    replies.flush()


if __name__ == "__main__":
    _child_main(sys.argv[1])
