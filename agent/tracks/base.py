"""The contract between the shared runner and a track module."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from proctor.agent.inputs.config import RunConfig
from proctor.agent.model.base import ModelClient, ProviderRefusal
from proctor.agent.results.records import Outcome, ProviderRefusalRecord, ReferenceRecord, SampleRecord
from proctor.sandbox import Sandbox


class RunEvents(Protocol):
    """Live signals for the progress display; a track calls these as things happen.

    The runner gives each sample its own view, so ``model_call_started`` and
    ``turn_finished`` say where that sample is: a long conversation shows its turns and
    tokens while it runs, not only when it ends.
    """

    def sandbox_call_started(self) -> None: ...
    def sandbox_call_finished(self, duration_s: float) -> None: ...
    def model_retry(self, reason: str) -> None: ...
    def tokens_used(self, count: int) -> None: ...
    # The sample sent its request for ``turn`` (1-based) and waits for the model.
    def model_call_started(self, turn: int) -> None: ...
    # The model answered ``turn``; ``tokens`` is the sample's running total (input + output).
    def turn_finished(self, turn: int, tokens: int) -> None: ...


class NullEvents:
    def sandbox_call_started(self) -> None:
        pass

    def sandbox_call_finished(self, duration_s: float) -> None:
        pass

    def model_retry(self, reason: str) -> None:
        pass

    def tokens_used(self, count: int) -> None:
        pass

    def model_call_started(self, turn: int) -> None:
        pass

    def turn_finished(self, turn: int, tokens: int) -> None:
        pass


class TaskLike(Protocol):
    id: str
    subject: str | None


@dataclass
class SampleContext:
    run_id: str
    model: ModelClient
    model_name: str
    reasoning_effort: str | None
    sandbox: Sandbox | None
    config: RunConfig
    judge: ModelClient | None
    events: RunEvents


class Track(ABC):
    name: ClassVar[str]
    # Whether samples of this track need a sandbox at all (olympiad without tools does not).
    needs_sandbox: ClassVar[bool] = True
    # Whether a judge model grades this track's answers: a run without one is refused up front.
    needs_judge: ClassVar[bool] = False

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = dict(options or {})

    def effective_settings(self, config: RunConfig) -> dict[str, Any]:
        """The protocol settings this track will actually use for ``config``, defaults resolved,
        for run.json: a reader must not have to know which defaults applied at the time."""
        return {}

    @abstractmethod
    def load_tasks(self, path: Path) -> list[Any]:
        """Load and validate tasks; raise ``inputs.tasks.TaskFileError`` naming file, line and field."""

    def reference_for(self, task: Any) -> ReferenceRecord | None:
        """What a sample of ``task`` is graded against, as its record keeps it. The runner puts
        it on every record, those of samples that ended in a harness error or a fallback
        included, so an auditor sees what any sample would have been graded against."""
        return None

    @abstractmethod
    async def run_sample(self, task: Any, trial: int, ctx: SampleContext) -> SampleRecord:
        """Run one (task, trial) to a finished record. Never raises for model or judge failures."""


@dataclass(frozen=True)
class ModelFailure:
    """How a sample ends when its model call failed for good: the provider's refusal of the
    conversation is the model's outcome (scored, kept); any other failure is an error (re-run)."""

    outcome: Outcome
    error: str
    refusal: ProviderRefusalRecord | None = None


def model_failure(error: BaseException) -> ModelFailure:
    """The outcome for a model failure, found on ``error`` or the exceptions that caused it."""
    cause: BaseException | None = error
    for _ in range(8):  # a bounded walk: a cause chain is short, never trusted to be acyclic
        if cause is None:
            break
        if isinstance(cause, ProviderRefusal):
            verdict = cause.verdict
            return ModelFailure(
                Outcome.PROVIDER_REFUSAL,
                verdict.describe(),
                ProviderRefusalRecord(
                    kind=verdict.kind.value, status=verdict.status, code=verdict.code, message=verdict.message
                ),
            )
        cause = cause.__cause__
    return ModelFailure(Outcome.MODEL_ERROR, str(error) or type(error).__name__)
