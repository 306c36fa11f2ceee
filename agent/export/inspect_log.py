"""A Proctor run as an Inspect AI eval log, built with ``inspect_ai.log``'s own types and writer.

One log per model of the run (Inspect's log holds one model). Each record becomes an
``EvalSample``: id = task id, epoch = trial + 1, the transcript as chat messages, the final
reply as the output, and one score named ``proctor``: ``C``/``I`` (success), the points or EED
score in ``metadata``. Error outcomes (they say nothing about the model) become the sample's
``error`` and carry no score, so Inspect's metrics exclude them as Proctor's accuracy does.

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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import RunConfig
from proctor.agent.rescore.stored_run import validate_config
from proctor.agent.results.records import ERROR_OUTCOMES, SampleRecord
from proctor.agent.results.store import RUN_HEADER, SUMMARY, read_json, records_from, refuse_run_file

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample
    from inspect_ai.model import ChatMessage

INSTALL_HINT = "the inspect_ai package is needed for --format inspect: pip install 'proctor[inspect]'"
SCORER = "proctor"
CORRECT, INCORRECT = "C", "I"
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


def _tool_calls(entries: Any) -> list[Any]:
    from inspect_ai.tool import ToolCall

    calls = []
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        function = entry.get("function") if isinstance(entry, dict) else None
        function = function if isinstance(function, dict) else {}
        raw = _text(function.get("arguments"))
        try:
            arguments = json.loads(raw)
            parse_error = None
        except (ValueError, RecursionError):
            arguments, parse_error = None, "arguments are not JSON"
        if not isinstance(arguments, dict):
            arguments, parse_error = {"raw_arguments": raw}, parse_error or "arguments are not an object"
        call_id = _text(entry.get("id")) if isinstance(entry, dict) else ""
        calls.append(
            ToolCall(
                id=call_id or f"call-{index}",
                function=_text(function.get("name")) or "unknown",
                arguments=arguments,
                parse_error=parse_error,
            )
        )
    return calls


def chat_messages(transcript: Iterable[Mapping[str, Any]], model: str) -> list[ChatMessage]:
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
        ContentReasoning,
        ContentText,
    )

    messages: list[ChatMessage] = []
    for entry in transcript:
        role, content = entry.get("role"), _text(entry.get("content"))
        if role == "assistant":
            reasoning = entry.get("reasoning")
            body: Any = content
            if reasoning:
                body = [ContentReasoning(reasoning=_text(reasoning)), ContentText(text=content)]
            messages.append(
                ChatMessageAssistant(
                    content=body, tool_calls=_tool_calls(entry.get("tool_calls")) or None, model=model
                )
            )
        elif role == "tool":
            messages.append(
                ChatMessageTool(
                    content=content,
                    tool_call_id=_text(entry.get("tool_call_id")) or None,
                    function=_text(entry.get("name")) or None,
                )
            )
        elif role == "system":
            messages.append(ChatMessageSystem(content=content))
        else:
            messages.append(ChatMessageUser(content=content))
    return messages


def _final_reply(record: SampleRecord) -> tuple[str, str | None]:
    """The model's last reply, and the answer it submitted (FrontierMath: the answer() source)."""
    reply = ""
    for entry in reversed(record.transcript):
        if entry.get("role") == "assistant":
            reply = _text(entry.get("content"))
            break
    if record.submission is not None:
        return reply, record.submission.code
    if record.eed is not None and record.eed.extracted_answer is not None:
        return reply, record.eed.extracted_answer
    return reply, reply or None


def _explanation(record: SampleRecord) -> str | None:
    if record.judge is not None:
        return record.judge.replies[-1] if record.judge.replies else record.judge.precheck
    if record.submission is not None:
        return record.submission.verification
    if record.eed is not None:
        return f"EED {record.eed.score:g} ({record.eed.status})"
    return record.error


def _score_metadata(record: SampleRecord) -> dict[str, Any]:
    data: dict[str, Any] = {"outcome": record.outcome.value, "score": record.score, "success": record.success}
    if record.judge is not None:
        data["judge"] = record.judge.model_dump(exclude={"replies"})
    if record.eed is not None:
        data["eed"] = record.eed.model_dump()
    if record.rescore is not None:
        data["rescore"] = record.rescore.model_dump(mode="json")
    return data


def _stop_reason(record: SampleRecord) -> Literal["stop", "model_length", "content_filter"]:
    """Inspect's own name for a provider's refusal (a scored sample there too)."""
    refusal = record.provider_refusal
    if refusal is None:
        return "stop"
    return "model_length" if refusal.kind == "context_overflow" else "content_filter"


def eval_sample(record: SampleRecord, target: str) -> EvalSample:
    from inspect_ai._util.error import EvalError
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelOutput, ModelUsage
    from inspect_ai.scorer import Score

    reply, answer = _final_reply(record)
    messages = chat_messages(record.transcript, record.model)
    first_user = next((m for m in messages if m.role == "user"), None)
    is_error = record.outcome in ERROR_OUTCOMES
    scores = None
    if not is_error:
        scores = {
            SCORER: Score(
                value=CORRECT if record.success else INCORRECT,
                answer=answer,
                explanation=_explanation(record),
                metadata=_score_metadata(record),
            )
        }
    usage = ModelUsage(
        input_tokens=record.input_tokens,
        output_tokens=record.output_tokens,
        total_tokens=record.total_tokens,
        reasoning_tokens=record.reasoning_tokens or None,
    )
    judge_usage: dict[str, Any] = {}
    if record.judge is not None and record.judge.model:
        judge_usage["grader"] = ModelUsage(
            input_tokens=record.judge.input_tokens,
            output_tokens=record.judge.output_tokens,
            total_tokens=record.judge.input_tokens + record.judge.output_tokens,
        )
    return EvalSample(
        id=record.task_id,
        epoch=record.trial + 1,
        input=first_user.text if first_user is not None else "",
        target=target,
        messages=messages,
        output=ModelOutput.from_content(record.model, reply, stop_reason=_stop_reason(record)),
        scores=scores,
        metadata={
            "outcome": record.outcome.value,
            "subject": record.subject,
            "reasoning_effort": record.reasoning_effort,
            "error": record.error,
            "forced_submission_turn": record.forced_submission_turn,
            "cap_reached": record.cap_reached,
            "retries": record.retries,
            "provider_refusal": (
                record.provider_refusal.model_dump(mode="json") if record.provider_refusal else None
            ),
        },
        model_usage={record.model: usage},
        role_usage=judge_usage,
        started_at=record.started_at,
        completed_at=record.finished_at,
        total_time=record.duration_s,
        working_time=record.duration_s,
        error=EvalError(
            message=record.error or record.outcome.value,
            traceback=record.harness_traceback or "",
            traceback_ansi="",
        )
        if is_error
        else None,
    )


def task_targets(config: RunConfig) -> dict[str, str]:
    """Task id -> the reference each sample was graded against, when the tasks file still loads."""
    from proctor.agent.tracks.registry import make_track

    if not config.tasks.is_file():
        return {}
    try:
        track = make_track(config.track, config.track_options)
        tasks = track.load_tasks(config.tasks)
    except (UserError, ValueError, TypeError, OSError):
        return {}
    targets: dict[str, str] = {}
    for task in tasks:
        reference = getattr(task, "answer", None) or getattr(task, "rubric", None)
        reference = reference or getattr(task, "verification_code", None)
        targets[str(task.id)] = _text(reference)
    return targets


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
    targets = task_targets(config)
    samples = [eval_sample(r, targets.get(r.task_id, "")) for r in records]
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
        metadata={
            "proctor_run": {
                key: header.get(key)
                for key in (
                    "track",
                    "status",
                    "protocol",
                    "tasks_file",
                    "rescored_from",
                    "rescore",
                    "versions",
                )
                if header.get(key) is not None
            }
        },
    )
    usage = ModelUsage(
        input_tokens=sum(r.input_tokens for r in records),
        output_tokens=sum(r.output_tokens for r in records),
        total_tokens=sum(r.total_tokens for r in records),
    )
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
            started_at=_text(header.get("started_at")) or created,
            completed_at=_text(header.get("ended_at")) or "",
            model_usage={label: usage},
        ),
        samples=samples,
    )


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
