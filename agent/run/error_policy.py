"""When a run's errors make it unfinished business: the `--fail-on-error` policy.

Error outcomes (``records.ERROR_OUTCOMES``: model, judge, verification infrastructure, harness)
say nothing about the model; they are left out of the accuracy and `--resume` runs them again.
A run holding any of them has not measured what it set out to, so by default it exits non-zero
(as Inspect fails an eval on any sample error); the samples stay recorded. A scored failure
(a wrong answer, a refusal the provider scored against the model) is not an error and never
counts here. Users relax the rule with a count or a fraction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from proctor.agent.errors import UserError


@dataclass(frozen=True)
class ErrorPolicy:
    """Either ``count`` (that many error samples or more) or ``fraction`` (more than that share)."""

    count: int | None = None
    fraction: float | None = None

    @classmethod
    def parse(cls, text: str) -> ErrorPolicy:
        """``5`` is a count; ``0.2`` or ``20%`` a fraction of the finished samples (``1.0``: never)."""
        raw = text.strip()
        try:
            if raw.endswith("%"):
                return cls._fraction(float(raw[:-1]) / 100, text)
            if raw.isdigit():
                count = int(raw)
                if count < 1:
                    raise UserError("--fail-on-error: a count must be at least 1 (0.0 fails on any error)")
                return cls(count=count)
            return cls._fraction(float(raw), text)
        except ValueError:
            raise UserError(
                f"--fail-on-error: {text!r} is neither a count (5) nor a fraction (0.2, 20%, 1.0 never)"
            ) from None

    @classmethod
    def _fraction(cls, value: float, text: str) -> ErrorPolicy:
        if not math.isfinite(value) or not 0 <= value <= 1:
            raise UserError(f"--fail-on-error: the fraction {text!r} must be between 0 and 1 (100%)")
        return cls(fraction=value)

    def breached(self, errors: int, finished: int) -> bool:
        if self.count is not None:
            return errors >= self.count
        assert self.fraction is not None
        return finished > 0 and errors / finished > self.fraction

    def describe(self) -> str:
        if self.count == 1 or self.fraction == 0:
            return "any error sample"
        if self.count is not None:
            return f"{self.count} or more error samples"
        assert self.fraction is not None
        return f"more than {self.fraction:.0%} of the samples in error"


# Any sample without a result means the run is not done: exit 3 until --resume has run it.
DEFAULT_ERROR_POLICY = ErrorPolicy(count=1)
