"""What a run watches in its model calls: every retry, counted per sample, and refusals that stop it.

Retries happen inside the clients, which every sample of a run shares; the count of one sample
comes from a context variable the runner sets around it (child tasks of the sample inherit it).
Retries of a call that finally failed are counted too: a run that printed twelve retry lines
reports twelve retries.

A refusal no wait can fix (``EndpointRefused``: credentials refused, quota spent) trips the run's
stop: the runner starts no further sample, the samples in flight finish or are recorded as errors,
and the run ends ``stopped: auth`` / ``stopped: quota``.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from proctor.agent.model.base import ChatResponse, EndpointRefused, ModelClient


@dataclass
class SampleTally:
    """Retries one sample's calls needed, whether or not the call then succeeded."""

    model_retries: int = 0
    judge_retries: int = 0


_CURRENT_TALLY: contextvars.ContextVar[SampleTally | None] = contextvars.ContextVar(
    "proctor_sample_tally", default=None
)


@dataclass(frozen=True)
class StopReason:
    kind: str  # "auth" | "quota"
    role: str  # "model" | "judge"
    model: str
    message: str

    @property
    def status(self) -> str:
        return f"stopped: {self.kind}"

    def describe(self) -> str:
        return f"{self.role} {self.model}: {self.message}"

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "role": self.role, "model": self.model, "message": self.message}


class RunGuard:
    """One run's retry counts and stop switch."""

    def __init__(self, on_any_retry: Callable[[str], None] | None = None) -> None:
        # The progress display's own counter and retry lines.
        self._on_any_retry = on_any_retry
        self.stop: StopReason | None = None
        # Retries outside any sample (none today; kept so the totals still add up).
        self.unattributed_retries = 0

    @property
    def stopped(self) -> bool:
        return self.stop is not None

    def retry_callback(self, role: str) -> Callable[[str], None]:
        def on_retry(reason: str) -> None:
            tally = _CURRENT_TALLY.get()
            if tally is None:
                self.unattributed_retries += 1
            elif role == "judge":
                tally.judge_retries += 1
            else:
                tally.model_retries += 1
            if self._on_any_retry is not None:
                self._on_any_retry(reason if role != "judge" else f"judge: {reason}")

        return on_retry

    def refused(self, error: EndpointRefused, role: str, model: str) -> None:
        # The first refusal is the reason; later ones are its echo from samples in flight.
        if self.stop is None:
            self.stop = StopReason(kind=error.kind, role=role, model=model, message=str(error))

    @contextlib.contextmanager
    def sample(self) -> Iterator[SampleTally]:
        tally = SampleTally()
        token = _CURRENT_TALLY.set(tally)
        try:
            yield tally
        finally:
            _CURRENT_TALLY.reset(token)


class GuardedClient:
    """A client whose refusals trip the run's stop; everything else passes straight through."""

    def __init__(self, inner: ModelClient, guard: RunGuard, role: str) -> None:
        self._inner = inner
        self._guard = guard
        self._role = role
        self.model = inner.model

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        max_output_tokens: int | None = None,
    ) -> ChatResponse:
        try:
            return await self._inner.complete(
                messages, tools=tools, tool_choice=tool_choice, max_output_tokens=max_output_tokens
            )
        except EndpointRefused as error:
            self._guard.refused(error, self._role, self.model)
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()
