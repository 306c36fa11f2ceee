"""Checks before a run spends anything: a judge where one grades, keys set, endpoints answering.

``require_judge`` and ``check_keys`` cost nothing and always run. ``preflight`` sends one tiny
request (``PREFLIGHT_MAX_OUTPUT_TOKENS``) to every model and judge endpoint at once, with a short
timeout and at most one quick retry, so a refused connection, a wrong key, a spent quota or an
unknown model fails in seconds with one line instead of after every sample's retries.
`proctor run --no-preflight` skips it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import openai

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import PAPER_SOURCE, ModelConfig, RunConfig
from proctor.agent.model.base import EndpointRefused, ModelError, Usage
from proctor.agent.model.endpoint import Endpoint, configured_base_url, is_local_model, without_secrets
from proctor.agent.model.retry import RetryPolicy
from proctor.agent.tracks.base import Track

# Long enough for a loaded endpoint to answer 16 tokens; short enough that a black hole costs
# seconds, not the run's 600 s request timeout.
PREFLIGHT_TIMEOUT_S = 20.0
# One quick retry (a blip is not a verdict on the endpoint), never the run's long backoff.
PREFLIGHT_RETRY = RetryPolicy(max_retries=1, base_delay_s=0.5, max_delay_s=1.0, max_retry_after_s=2.0)
# The Responses API's smallest allowed output ceiling; Chat Completions accepts it too.
PREFLIGHT_MAX_OUTPUT_TOKENS = 16
PREFLIGHT_PROMPT = "Proctor preflight check: reply with OK."
SKIP_HINT = "nothing was run; --no-preflight skips this check"


@dataclass(frozen=True)
class EndpointUse:
    """One model or judge of the run, as the checks and run.json name it."""

    role: str  # "model" | "judge"
    label: str
    cfg: ModelConfig
    # The judge is the paper's default, not one the run named: its errors say so.
    paper_default: bool = False

    @property
    def served_by_proctor(self) -> bool:
        """A ``local/`` model without a URL: Proctor starts its server, so there is nothing to check."""
        return is_local_model(self.cfg.name) and not self.cfg.base_url

    @property
    def base_url(self) -> str:
        return without_secrets(configured_base_url(self.cfg))

    def describe(self) -> str:
        return f"{self.role} {self.cfg.name}"

    def hint(self) -> str:
        """What to add to an error about this endpoint: for the paper's default judge, that the
        run never named it and how to name another."""
        if not self.paper_default:
            return ""
        return (
            f" (this judge is the default of the {PAPER_SOURCE}, applied because the run names "
            "no judge; name one with --judge NAME or `judge:` in the config)"
        )


def endpoint_uses(
    labelled: list[tuple[str, ModelConfig]], judge: ModelConfig | None, *, paper_judge: bool = False
) -> list[EndpointUse]:
    """The run's endpoints; ``paper_judge``: ``judge`` is the paper's default (RunConfig.paper_defaults)."""
    uses = [EndpointUse("model", label, cfg) for label, cfg in labelled]
    if judge is not None:
        uses.append(EndpointUse("judge", judge.name, judge, paper_default=paper_judge))
    return uses


def uses_of(config: RunConfig, labels: list[str]) -> list[EndpointUse]:
    """:func:`endpoint_uses` for a run config, knowing whether its judge is the paper's default."""
    return endpoint_uses(
        list(zip(labels, config.models, strict=True)),
        config.judge,
        paper_judge="judge.name" in config.paper_defaults,
    )


def require_judge(track: Track, config: RunConfig) -> None:
    """A judged track without a judge would pay for every answer and grade none of them."""
    if track.needs_judge and config.judge is None:
        raise UserError(
            f"track {config.track!r} is graded by a judge, but this run has none (judge: null); "
            "give one with --judge or `judge:` in the config"
        )


def check_keys(uses: list[EndpointUse]) -> None:
    """Every key variable a model or judge needs is set; one line naming the first that is not."""
    for use in uses:
        if not use.served_by_proctor:
            try:
                Endpoint.from_config(use.cfg, role=use.role)
            except UserError as exc:
                raise UserError(f"{exc}{use.hint()}") from None


@dataclass(frozen=True)
class PreflightResult:
    use: EndpointUse
    seconds: float
    error: str | None
    # Something worth knowing that is not a failure (a rate limit).
    note: str | None = None
    # What the endpoint reported the probe cost: it is spent, so run.json says so.
    usage: Usage | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "role": self.use.role,
            "model": self.use.cfg.name,
            "base_url": self.use.base_url,
            "seconds": round(self.seconds, 3),
            "ok": self.error is None,
            **({"error": self.error} if self.error else {}),
            **({"note": self.note} if self.note else {}),
            **(
                {
                    "input_tokens": self.usage.input_tokens,
                    "output_tokens": self.usage.output_tokens,
                    "usage_estimated": self.usage.estimated,
                }
                if self.usage is not None
                else {}
            ),
        }


def _rate_limited(error: ModelError) -> bool:
    """A plain 429 after the retry: the endpoint answered and took the key; it is only busy."""
    return not isinstance(error, EndpointRefused) and isinstance(error.__cause__, openai.RateLimitError)


async def _probe(use: EndpointUse) -> PreflightResult:
    from proctor.agent.model.factory import make_client

    # The run's own settings (effort, sampling, extra_body) go along, so a parameter the
    # endpoint refuses fails here too; only the wait for an answer is shortened.
    cfg = use.cfg.model_copy(
        update={"request_timeout_s": min(use.cfg.request_timeout_s, PREFLIGHT_TIMEOUT_S)}
    )
    started = time.monotonic()
    error: str | None = None
    note: str | None = None
    usage: Usage | None = None
    client = make_client(cfg, retry_policy=PREFLIGHT_RETRY)
    try:
        response = await client.complete(
            [{"role": "user", "content": PREFLIGHT_PROMPT}], max_output_tokens=PREFLIGHT_MAX_OUTPUT_TOKENS
        )
        usage = response.usage
    except ModelError as exc:
        if _rate_limited(exc):
            # Rate limits are the run's to wait out (it retries them); refusing to start would
            # turn a busy minute into a failed run.
            note = "rate limited (429); the run retries rate limits"
        else:
            error = str(exc) or type(exc).__name__
    except Exception as exc:  # whatever breaks, the answer is one line, not a traceback
        error = f"{type(exc).__name__}: {exc}"
    finally:
        await client.aclose()
    return PreflightResult(use, time.monotonic() - started, error, note, usage)


async def preflight(uses: list[EndpointUse]) -> list[PreflightResult]:
    """Probe every distinct endpoint at once; raise one line for the first that fails."""
    distinct: dict[str, EndpointUse] = {}
    for use in uses:
        if not use.served_by_proctor:
            distinct.setdefault(use.cfg.model_dump_json(), use)
    results = list(await asyncio.gather(*(_probe(use) for use in distinct.values())))
    failed = [result for result in results if result.error is not None]
    if failed:
        first = failed[0]
        more = f" (and {len(failed) - 1} more endpoint(s) failed)" if len(failed) > 1 else ""
        line = " ".join(str(first.error).split())
        line = line.removeprefix(f"{first.use.base_url}: ").removeprefix(f"{first.use.base_url} ").rstrip(".")
        where = f"{first.use.describe()} at {first.use.base_url}"
        raise UserError(f"preflight: {where}: {line}{first.use.hint()}{more}; {SKIP_HINT}")
    return results
