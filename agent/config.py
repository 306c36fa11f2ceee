"""Run configuration: what `proctor run` takes from flags or from a YAML file."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


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

    backend: Literal["auto", "docker", "local"] = "auto"
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
    # Track-specific switches, e.g. {"python_tool": true} for olympiad or
    # {"reject_invalid_submissions": false} for frontiermath.
    track_options: dict[str, Any] = Field(default_factory=dict)
    # Task selection, applied after loading: only tasks whose ``metadata`` holds every
    # key/value here (quickstart uses {"quickstart": true}), then the first ``limit_tasks``.
    task_filter: dict[str, Any] = Field(default_factory=dict)
    limit_tasks: int | None = Field(default=None, ge=1)
