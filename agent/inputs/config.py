"""Run configuration: what `proctor run` takes from flags or from a YAML file."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from proctor.agent.inputs.selection import normalise_limit
from proctor.agent.model.efforts import check_reasoning_effort
from proctor.sandbox import check_option_name, option_choices

SANDBOX_CHOICES = option_choices()


class ModelConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # "openai/NAME" talks to OPENAI_BASE_URL (or base_url); "local/gemma3-270m" starts llama.cpp.
    name: str
    # The endpoint's base URL; None: OPENAI_BASE_URL, else OpenAI's (a resume keeps run.json's).
    base_url: str | None = None
    # The environment variable holding the key; the key itself is never recorded.
    api_key_env: str = "OPENAI_API_KEY"
    # "auto": the Responses API for OpenAI's reasoning models on api.openai.com, Chat Completions
    # elsewhere (agent/model/api_choice.py); "chat" or "responses" forces one.
    api: Literal["auto", "chat", "responses"] = "auto"
    # One of the API's values (agent/model/efforts.py); None sends none.
    reasoning_effort: str | None = None
    # The range OpenAI's API accepts.
    temperature: float | None = Field(default=None, ge=0, le=2)
    # Nucleus sampling; sent only when set, so a provider's own default applies otherwise
    # (reasoning models may refuse it).
    top_p: float | None = Field(default=None, gt=0, le=1)
    # A sampling seed; sent only when set (reasoning models may refuse it).
    seed: int | None = None
    # Requests open at once to this model's endpoint (base URL), shared by every client of it.
    max_connections: int = Field(default=8, ge=1)
    # Seconds one request may take before it is retried or fails.
    request_timeout_s: float = Field(default=600.0, gt=0)
    # Retries of a failed request (rate limits, 5xx, timeouts) with backoff (docs/models.md).
    max_retries: int = Field(default=6, ge=0)
    # Extra JSON fields sent with every request, for provider-specific options.
    extra_body: dict[str, Any] = Field(default_factory=dict)
    # USD per million input tokens, for cost columns in reports; optional.
    input_price_per_mtok: float | None = None
    # USD per million output tokens, for cost columns in reports; optional.
    output_price_per_mtok: float | None = None

    @field_validator("reasoning_effort")
    @classmethod
    def _known_effort(cls, value: str | None) -> str | None:
        return None if value is None else check_reasoning_effort(value)


class BudgetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # Tokens (input + output, all turns) one sample may use.
    token_cap: int = Field(default=1_000_000, gt=0)
    # From this many tokens the model is told to submit its answer now.
    force_submit_at: int = Field(default=660_000, gt=0)
    # Per-request output ceiling; the budget lowers it further near the cap.
    max_output_tokens: int | None = Field(default=None, gt=0)


class SandboxConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # Where model code runs: docker, local (cgroups), ray, or auto (docker when an engine answers).
    backend: str = Field(default="auto", json_schema_extra={"enum": list(SANDBOX_CHOICES["backend"])})
    # The Ray cluster for backend ray (host:port of its head); None: RAY_ADDRESS or a local one.
    ray_address: str | None = None
    # Use a Ray cluster that serves clients holding no token (sandbox/ray/auth.py): off, so an
    # open cluster is refused in one line; recorded in run.json as sandbox.ray_auth.
    ray_allow_unauthenticated: bool = False
    # Container runtime of the docker backend: runc (default) or gVisor's runsc (docs/sandbox.md,
    # "Runtimes"); docker_host names the engine (default: the environment's, or for runsc the
    # engine .ci/setup-gvisor.sh starts when the default one lacks it).
    runtime: str = Field(default="runc", json_schema_extra={"enum": list(SANDBOX_CHOICES["runtime"])})
    # The docker engine's socket (unix:///...); None: the environment's (DOCKER_HOST or default).
    docker_host: str | None = None
    # How long a container lives (docs/sandbox.md, "Isolation: fresh or per-sample"): fresh, a
    # new container for every call (the protocol's promise and the default), or per-sample, where
    # one sample's calls reuse a container the launcher emptied and re-checked, leaving counters
    # a reset cannot undo (next PID, inode and IPC numbers) to that sample's next call.
    isolation: str = Field(default="fresh", json_schema_extra={"enum": list(SANDBOX_CHOICES["isolation"])})
    # How the docker backend starts a container (docs/sandbox.md, "Engine paths"): through the
    # engine (docker), with the OCI runtime directly from the spec the engine generated
    # (runc-direct; needs root and runc on the engine's host), or auto: runc-direct where it can
    # serve, else docker. run.json records the path taken and why (sandbox.engine_path_reason).
    engine_path: str = Field(default="auto", json_schema_extra={"enum": list(SANDBOX_CHOICES["engine_path"])})
    # Sandbox image; None: the pinned image `proctor image build` makes.
    image: str | None = None
    # Containers kept warm, ready for the next call.
    pool_size: int = Field(default=2, ge=0)
    # Wall-clock seconds one tool call may run.
    timeout_s: float = Field(default=30.0, gt=0)
    # Seconds a submitted answer() may run.
    answer_timeout_s: float = Field(default=30.0, gt=0)
    # Seconds a task's verify() may run.
    verify_timeout_s: float = Field(default=60.0, gt=0)
    # 4 GiB: what a 2025 laptop gives one process without trouble (docs/sandbox.md, "Why these
    # defaults"); a numpy sieve to 10**9 needs about 1 GB and was OOM-killed at the old 1 GiB.
    memory: str = "4g"
    # CPUs one sandbox call may use.
    cpus: float = Field(default=1.0, gt=0)
    # Sandbox calls running at once in the whole process (queued fairly between samples);
    # None: as many as the CPUs the backend can use (the engine's for docker).
    max_concurrent_executions: int | None = Field(default=None, ge=1)
    # What the model sees of one tool result, in characters; truncation is stated.
    tool_output_chars: int = Field(default=20_000, gt=0)
    # Time a fixed pure-Python workload in the sandbox at the start of a run (~0.3 s) and
    # record it in run.json (agent/run/hardware.py), so runs on different machines compare.
    calibrate: bool = True

    @field_validator("backend", "runtime", "isolation", "engine_path")
    @classmethod
    def _the_sandboxs_names(cls, value: str, info: ValidationInfo) -> str:
        # The sandbox owns these names (sandbox/spec.py; backends from its registry).
        check_option_name(str(info.field_name), value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _renamed_fields(cls, data: Any) -> Any:
        if isinstance(data, dict) and "recycle_containers" in data:
            raise ValueError("'recycle_containers' was renamed: write 'isolation: per-sample' (or 'fresh')")
        return data

    @model_validator(mode="after")
    def _runtime_needs_docker(self) -> SandboxConfig:
        if self.backend == "local" and (self.runtime != "runc" or self.docker_host is not None):
            raise ValueError("runtime and docker_host apply to the docker backend only (backend is local)")
        if self.backend in ("local", "ray") and self.isolation != "fresh":
            raise ValueError(f"isolation per-sample needs the docker backend (backend is {self.backend})")
        if self.backend in ("local", "ray") and self.engine_path == "runc-direct":
            raise ValueError(f"engine_path applies to the docker backend only (backend is {self.backend})")
        return self


# The FrontierScience paper's protocol (docs/judge-tracks.md): reasoning models answer at "high"
# effort except GPT-5.2 at "xhigh", GPT-5 at "high" effort judges, and scores average 20
# (Olympiad) / 30 (Research) trials.
PAPER_TRIALS = {"olympiad": 20, "research": 30}
PAPER_ANSWER_EFFORT = "high"
PAPER_GPT_5_2_EFFORT = "xhigh"
PAPER_JUDGE = "openai/gpt-5"
PAPER_JUDGE_EFFORT = "high"
# Research: a trial succeeds at >= 7 of 10 rubric points (figure 6 caption); the track option's
# default (agent/tracks/science_options.py) is this value.
PAPER_SUCCESS_THRESHOLD = 7.0
# Where every PAPER_* value comes from, as --dry-run, the run's first lines and run.json say it.
PAPER_SOURCE = "FrontierScience paper (docs/judge-tracks.md)"
# GPT-5.2 and its dated snapshots ("gpt-5.2-2025-12-11", "gpt-5.2-pro"), not "gpt-5.20".
_GPT_5_2 = re.compile(r"gpt-5\.2(?![0-9.])")
# Models the paper evaluated that are not reasoning models (GPT-4o) and their relatives: the paper
# gives them no effort, and OpenAI's API refuses a request that sends one.
_NON_REASONING = re.compile(r"(?:chatgpt-)?gpt-(?:4|3\.5)(?![0-9])")


def paper_answer_effort(model_name: str) -> str | None:
    """The effort the paper answered at for a model of this name (section 3): "xhigh" for
    GPT-5.2, none for a non-reasoning model such as GPT-4o, "high" for every other model.
    The name is read after its last "/" (``openai/gpt-5.2``), case-insensitively."""
    base = model_name.rsplit("/", 1)[-1].lower()
    if _GPT_5_2.match(base):
        return PAPER_GPT_5_2_EFFORT
    if _NON_REASONING.match(base):
        return None
    return PAPER_ANSWER_EFFORT


# The embedded local model (Gemma 3 270M under llama.cpp, 8,192-token context): defaults that
# finish (docs/models.md, "The local model"). The cumulative cap stays under the context, so
# no request can overflow it; a reply's useful part is tens of tokens for a tool call and a few
# hundred for a one-shot answer, and a 270M model that loops fills whatever it is given.
LOCAL_TOKEN_CAP = 8_000
LOCAL_FORCE_SUBMIT_AT = 5_000
LOCAL_MAX_OUTPUT_TOKENS = {"frontiermath": 256}
LOCAL_MAX_OUTPUT_TOKENS_OTHER = 2_048
# One llama.cpp server has one slot: queue requests here, where waiting is not a timeout.
LOCAL_MAX_CONNECTIONS = 1


def is_embedded_local(model: ModelConfig) -> bool:
    """A model Proctor serves itself: ``local/NAME`` without a URL of the user's."""
    return model.name.startswith("local/") and model.base_url is None


def _with_default_effort(model: ModelConfig, effort: str | None) -> tuple[ModelConfig, bool]:
    """``model`` at ``effort`` when it names no effort itself. Not for ``local/`` models: the
    embedded llama.cpp models are not reasoning models and the paper's setting does not apply.
    An ``effort`` of None (a non-reasoning model) leaves the model as it is."""
    if effort is None or "reasoning_effort" in model.model_fields_set or model.name.startswith("local/"):
        return model, False
    return model.model_copy(update={"reasoning_effort": effort}), True


# Trials per task: the papers use 20 to 30; this only stops absurd values.
MAX_TRIALS = 10_000
# Samples one run may plan (models x tasks x trials); the plan is a list held in memory.
MAX_PLANNED_SAMPLES = 1_000_000


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # frontiermath, olympiad, research or phybench.
    track: str = "frontiermath"
    # The task file (JSONL, JSON or YAML); relative to the config file.
    tasks: Path
    # The models to evaluate (a bare "openai/NAME" is {name: ...}).
    models: list[ModelConfig]
    # The judge model of judged tracks (olympiad, research).
    judge: ModelConfig | None = None
    # Bounded so that a typo (or an edited run.json that --resume reuses) of 10**400 trials is a
    # one-line error naming the field, not a plan that fills memory before any sample starts.
    trials: int = Field(default=1, ge=1, le=MAX_TRIALS)
    # Samples in flight at once.
    max_concurrency: int = Field(default=4, ge=1)
    # The run directory; None: runs/<time>-<track>-<model>.
    out: Path | None = None
    # Continue the run in `out`: skip finished samples, re-run errors.
    resume: bool = False
    # Token budget of each sample (section `budget`).
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    # Where and how model code runs (section `sandbox`).
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    # A FrontierMath prompt template replacing the shipped one.
    prompt_template: Path | None = None
    # The FrontierMath conversation rules (agent/tracks/frontiermath/profiles.py); the name is
    # checked by the config loader.
    protocol: str = "methodology"
    # Track-specific switches, e.g. {"python_tool": true} for olympiad or
    # {"reject_invalid_submissions": true} for frontiermath.
    track_options: dict[str, Any] = Field(default_factory=dict)
    # Task selection, applied after loading and before any model call (agent/inputs/selection.py):
    # tasks whose fields hold every dotted-path key/value here (a bare key is read in
    # ``metadata``: quickstart uses {"quickstart": true}), then those whose id matches one of
    # the ``task_ids`` globs, then the first N (``limit_tasks: N``) or the A-th to B-th
    # (``"A-B"``, 1-based, inclusive).
    task_filter: dict[str, Any] = Field(default_factory=dict)
    # Task id globs (* ? [..]): only matching tasks run.
    task_ids: list[str] = Field(default_factory=list)
    # The first N selected tasks, or "A-B" (1-based, inclusive).
    limit_tasks: int | str | None = None
    # Which defaults filled a field the config left unset (the paper's, the local model's), for
    # run.json; the paper's values alone, by field path, in ``_paper_defaults``.
    _defaults_applied: list[str] = PrivateAttr(default_factory=list)
    _paper_defaults: dict[str, Any] = PrivateAttr(default_factory=dict)

    @field_validator("limit_tasks", mode="before")
    @classmethod
    def _limit(cls, value: Any) -> int | str | None:
        return normalise_limit(value)

    @field_validator("task_ids")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern.strip():
                raise ValueError("an empty task id pattern selects nothing")
        return value

    @property
    def defaults_applied(self) -> list[str]:
        return list(self._defaults_applied)

    @property
    def paper_defaults(self) -> dict[str, Any]:
        """Every value this run takes from the paper because the config left it unset, by field
        path (``trials``, ``models.0.reasoning_effort``, ``judge.name``, ``judge.reasoning_effort``,
        ``track_options.success_threshold``). Empty once the config is explicit (a resume reads
        it back from run.json, which keeps the first session's record)."""
        return dict(self._paper_defaults)

    def paper_default_note(self, field: str) -> str:
        """`` (paper default)`` when ``field`` took the paper's value; else nothing."""
        return " (paper default)" if field in self._paper_defaults else ""

    @model_validator(mode="after")
    def _apply_paper_defaults(self) -> RunConfig:
        """Fill what a FrontierScience config leaves unset with the paper's values. A value
        the config states (even ``reasoning_effort: null`` or ``trials: 1``) is kept."""
        if self.track not in PAPER_TRIALS:
            return self
        paper: dict[str, Any] = {}
        if "trials" not in self.model_fields_set:
            self.trials = PAPER_TRIALS[self.track]
            paper["trials"] = self.trials
        models: list[ModelConfig] = []
        for index, model in enumerate(self.models):
            model, changed = _with_default_effort(model, paper_answer_effort(model.name))
            models.append(model)
            if changed:
                paper[f"models.{index}.reasoning_effort"] = model.reasoning_effort
        self.models = models
        if self.judge is None and "judge" not in self.model_fields_set:
            self.judge = ModelConfig(name=PAPER_JUDGE, reasoning_effort=PAPER_JUDGE_EFFORT)
            paper["judge.name"] = PAPER_JUDGE
            paper["judge.reasoning_effort"] = PAPER_JUDGE_EFFORT
        elif self.judge is not None:
            # The paper's judge effort, unless the judge given is not a reasoning model.
            judge_effort = None if paper_answer_effort(self.judge.name) is None else PAPER_JUDGE_EFFORT
            self.judge, changed = _with_default_effort(self.judge, judge_effort)
            if changed:
                paper["judge.reasoning_effort"] = PAPER_JUDGE_EFFORT
        # Filled by the track's options, not here (track_options is a resume invariant and stays
        # as stated); recorded so that it is not applied silently either.
        if self.track == "research" and "success_threshold" not in self.track_options:
            paper["track_options.success_threshold"] = PAPER_SUCCESS_THRESHOLD
        self._paper_defaults = paper
        self._defaults_applied = [f"{field}={value}" for field, value in paper.items()]
        return self

    @model_validator(mode="after")
    def _apply_local_model_defaults(self) -> RunConfig:
        """Limits a 270M model with an 8k context finishes under, where the config states none.

        Only when every model is the embedded local one: the budget is per run, and a frontier
        model beside it keeps the protocol's 1,000,000 / 660,000. ``token_cap`` and
        ``force_submit_at`` come as a pair (one stated keeps the protocol's other).
        """
        if not self.models or not all(is_embedded_local(m) for m in self.models):
            return self
        applied: list[str] = []
        stated = self.budget.model_fields_set
        updates: dict[str, int] = {}
        if not stated & {"token_cap", "force_submit_at"}:
            updates.update(token_cap=LOCAL_TOKEN_CAP, force_submit_at=LOCAL_FORCE_SUBMIT_AT)
        if "max_output_tokens" not in stated:
            updates["max_output_tokens"] = LOCAL_MAX_OUTPUT_TOKENS.get(
                self.track, LOCAL_MAX_OUTPUT_TOKENS_OTHER
            )
        if updates:
            self.budget = BudgetConfig(**{**self.budget.model_dump(include=stated), **updates})
            applied += [f"budget.{name}={value} (local model)" for name, value in updates.items()]
        models: list[ModelConfig] = []
        for index, model in enumerate(self.models):
            if "max_connections" not in model.model_fields_set:
                model = model.model_copy(update={"max_connections": LOCAL_MAX_CONNECTIONS})
                applied.append(f"models.{index}.max_connections={LOCAL_MAX_CONNECTIONS} (local model)")
            models.append(model)
        self.models = models
        self._defaults_applied = [*self._defaults_applied, *applied]
        return self
