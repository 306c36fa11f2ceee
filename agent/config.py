"""Run configuration: what `proctor run` takes from flags or from a YAML file."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator


class ModelConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # "openai/NAME" talks to OPENAI_BASE_URL (or base_url); "local/gemma3-270m" starts llama.cpp.
    name: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    api: Literal["chat", "responses"] = "chat"
    reasoning_effort: str | None = None
    temperature: float | None = None
    # Nucleus sampling and a sampling seed; sent only when set, so a provider's own
    # defaults apply otherwise (reasoning models may refuse either).
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None
    max_connections: int = Field(default=8, ge=1)
    request_timeout_s: float = Field(default=600.0, gt=0)
    max_retries: int = Field(default=6, ge=0)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    # USD per million tokens, for cost columns in reports; optional.
    input_price_per_mtok: float | None = None
    output_price_per_mtok: float | None = None


class BudgetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    token_cap: int = Field(default=1_000_000, gt=0)
    force_submit_at: int = Field(default=660_000, gt=0)
    # Per-request output ceiling; the budget lowers it further near the cap.
    max_output_tokens: int | None = Field(default=None, gt=0)


class SandboxConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    backend: Literal["auto", "docker", "local", "ray"] = "auto"
    # The Ray cluster for backend ray (host:port of its head); None: RAY_ADDRESS or a local one.
    ray_address: str | None = None
    image: str | None = None
    pool_size: int = Field(default=2, ge=0)
    timeout_s: float = Field(default=30.0, gt=0)
    answer_timeout_s: float = Field(default=30.0, gt=0)
    verify_timeout_s: float = Field(default=60.0, gt=0)
    memory: str = "1g"
    cpus: float = Field(default=1.0, gt=0)
    # Sandbox calls running at once in the whole process (queued fairly between samples);
    # None: as many as the CPUs the backend can use (the engine's for docker).
    max_concurrent_executions: int | None = Field(default=None, ge=1)
    # What the model sees of one tool result, in characters; truncation is stated.
    tool_output_chars: int = Field(default=20_000, gt=0)
    # Time a fixed pure-Python workload in the sandbox at the start of a run (~0.3 s) and
    # record it in run.json (agent/hardware.py), so runs on different machines compare.
    calibrate: bool = True


# The FrontierScience paper's protocol (docs/judge-tracks.md): reasoning models answer at "high"
# effort, GPT-5 at "high" effort judges, and scores average 20 (Olympiad) / 30 (Research) trials.
PAPER_TRIALS = {"olympiad": 20, "research": 30}
PAPER_ANSWER_EFFORT = "high"
PAPER_JUDGE = "openai/gpt-5"
PAPER_JUDGE_EFFORT = "high"


def _with_default_effort(model: ModelConfig, effort: str) -> tuple[ModelConfig, bool]:
    """``model`` at ``effort`` when it names no effort itself. Not for ``local/`` models: the
    embedded llama.cpp models are not reasoning models and the paper's setting does not apply."""
    if "reasoning_effort" in model.model_fields_set or model.name.startswith("local/"):
        return model, False
    return model.model_copy(update={"reasoning_effort": effort}), True


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    track: str = "frontiermath"
    tasks: Path
    models: list[ModelConfig]
    judge: ModelConfig | None = None
    trials: int = Field(default=1, ge=1)
    max_concurrency: int = Field(default=4, ge=1)
    out: Path | None = None
    resume: bool = False
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    prompt_template: Path | None = None
    # The FrontierMath conversation rules (agent/tracks/frontiermath/profiles.py); the name is
    # checked by the config loader.
    protocol: str = "methodology"
    # Track-specific switches, e.g. {"python_tool": true} for olympiad or
    # {"reject_invalid_submissions": true} for frontiermath.
    track_options: dict[str, Any] = Field(default_factory=dict)
    # Task selection, applied after loading: only tasks whose ``metadata`` holds every
    # key/value here (quickstart uses {"quickstart": true}), then the first ``limit_tasks``.
    task_filter: dict[str, Any] = Field(default_factory=dict)
    limit_tasks: int | None = Field(default=None, ge=1)
    # Which of the paper's defaults filled a field the config left unset, for run.json.
    _defaults_applied: list[str] = PrivateAttr(default_factory=list)

    @property
    def defaults_applied(self) -> list[str]:
        return list(self._defaults_applied)

    @model_validator(mode="after")
    def _apply_paper_defaults(self) -> RunConfig:
        """Fill what a FrontierScience config leaves unset with the paper's values. A value
        the config states (even ``reasoning_effort: null`` or ``trials: 1``) is kept."""
        if self.track not in PAPER_TRIALS:
            return self
        applied: list[str] = []
        if "trials" not in self.model_fields_set:
            self.trials = PAPER_TRIALS[self.track]
            applied.append(f"trials={self.trials}")
        models: list[ModelConfig] = []
        for index, model in enumerate(self.models):
            model, changed = _with_default_effort(model, PAPER_ANSWER_EFFORT)
            models.append(model)
            if changed:
                applied.append(f"models.{index}.reasoning_effort={PAPER_ANSWER_EFFORT}")
        self.models = models
        if self.judge is None and "judge" not in self.model_fields_set:
            self.judge = ModelConfig(name=PAPER_JUDGE, reasoning_effort=PAPER_JUDGE_EFFORT)
            applied.append(f"judge={PAPER_JUDGE}@{PAPER_JUDGE_EFFORT}")
        elif self.judge is not None:
            self.judge, changed = _with_default_effort(self.judge, PAPER_JUDGE_EFFORT)
            if changed:
                applied.append(f"judge.reasoning_effort={PAPER_JUDGE_EFFORT}")
        self._defaults_applied = applied
        return self
