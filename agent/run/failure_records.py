"""The record a sample keeps when its track or Proctor fails on it: nothing finished is lost,
and a failure that is Proctor's own is counted apart (``harness_error``) and run again on
``--resume``. Also the message of an exception, bounded, as records and run.json keep it."""

from __future__ import annotations

import logging
import time
import traceback
from typing import Any

from proctor.agent.model.base import ModelError
from proctor.agent.results.records import Outcome, ReferenceRecord, SampleRecord, utc_now
from proctor.agent.run.sample_plan import PlannedSample
from proctor.agent.text.encodable import safe_text
from proctor.agent.tracks.base import Track, model_failure

log = logging.getLogger(__name__)


def fallback_model_error(
    sample: PlannedSample, run_id: str, track: Track, error: ModelError, started_at: str, started: float
) -> SampleRecord:
    """A track let a ModelError escape; record it as the outcome it is rather than lose it: a
    provider's refusal of the conversation is scored, any other failure an error."""
    failure = model_failure(error)
    return SampleRecord(
        **_sample_fields(sample, run_id, track.name, started_at, started),
        outcome=failure.outcome,
        error=failure.error if failure.refusal is not None else f"{type(error).__name__}: {error}",
        provider_refusal=failure.refusal,
    )


def _sample_fields(
    sample: PlannedSample, run_id: str, track_name: str, started_at: str, started: float
) -> dict[str, Any]:
    """What every failure record says of its sample: which one it is, and when it ran."""
    return {
        "run_id": run_id,
        "track": track_name,
        "task_id": str(sample.task.id),
        "trial": sample.trial,
        "model": sample.label,
        "subject": getattr(sample.task, "subject", None),
        "reasoning_effort": sample.model.reasoning_effort,
        "started_at": started_at,
        "finished_at": utc_now(),
        "duration_s": time.monotonic() - started,
    }


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
        **_sample_fields(sample, run_id, track_name, started_at, started),
        outcome=Outcome.HARNESS_ERROR,
        error=describe_exception(error),
        harness_traceback=_traceback_tail(error),
    )
