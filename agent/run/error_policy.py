"""When a run's errors make its numbers untrustworthy: the `--fail-on-error` policy.

Error outcomes (model, judge, verification infrastructure, harness) say nothing about the
model and are counted apart, so a run that is mostly errors can show a fine accuracy over the
few samples left. After the run the policy compares the error count with a threshold; crossing
it is a non-zero exit (the samples stay recorded, and `--resume` re-runs the errors).
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
        """``5`` is a count; ``0.2`` or ``20%`` a fraction of the finished samples."""
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
                f"--fail-on-error: {text!r} is neither a count (5) nor a fraction (0.2, 20%)"
            ) from None

    @classmethod
    def _fraction(cls, value: float, text: str) -> ErrorPolicy:
        if not math.isfinite(value) or not 0 <= value < 1:
            raise UserError(f"--fail-on-error: the fraction {text!r} must be at least 0 and below 1")
        return cls(fraction=value)

    def breached(self, errors: int, finished: int) -> bool:
        if self.count is not None:
            return errors >= self.count
        assert self.fraction is not None
        return finished > 0 and errors / finished > self.fraction

    def describe(self) -> str:
        if self.count is not None:
            return f"{self.count} or more error samples"
        assert self.fraction is not None
        return f"more than {self.fraction:.0%} of the samples in error"


# "Mostly errors" is never reported as a success.
DEFAULT_ERROR_POLICY = ErrorPolicy(fraction=0.5)
