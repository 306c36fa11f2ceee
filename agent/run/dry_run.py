"""`proctor run --dry-run`: what a run would do, worked out without spending anything.

The plan loads and selects the tasks exactly as the runner does and resolves each model's
endpoint the way its client would, but it sends no request, opens no sandbox (no container,
no bubblewrap process), starts no local model server and writes no file: the run directory is
only named. ``--resume`` reads the run directory's samples (read-only) to count what is done.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor.agent.inputs.config import PAPER_SOURCE, ModelConfig, RunConfig
from proctor.agent.inputs.selection import describe_selection
from proctor.agent.model.api_choice import choose_api
from proctor.agent.model.endpoint import DEFAULT_BASE_URL, is_local_model
from proctor.agent.results.records import RERUN_ON_RESUME
from proctor.agent.results.store import RunStore, sample_key
from proctor.agent.run.preflight import uses_of
from proctor.agent.run.resume import prepare_header
from proctor.agent.run.run_header import base_header
from proctor.agent.run.run_sandbox import sandbox_spec
from proctor.agent.run.sample_plan import default_run_dir, model_labels, plan_samples, select_tasks
from proctor.agent.text.terminal import escape_for_terminal
from proctor.agent.tracks.registry import make_track
from proctor.sandbox import SandboxSpec

# Ids listed in the plan; the rest are counted.
SHOWN_IDS = 10
JUDGED_TRACKS = ("olympiad", "research")


@dataclass(frozen=True)
class TokenBound:
    """The most tokens the answering models can spend, and what bounds it."""

    per_sample: int | None
    samples: int
    basis: str

    @property
    def tokens(self) -> int | None:
        return None if self.per_sample is None else self.per_sample * self.samples


def _endpoint(model: ModelConfig) -> str:
    if is_local_model(model.name) and model.base_url is None:
        return "local llama.cpp server on 127.0.0.1 (started by the run)"
    base = model.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    return base.rstrip("/")


def _key_state(model: ModelConfig) -> str:
    if is_local_model(model.name) and model.base_url is None:
        return "no key needed"
    # Only whether it is set: the plan is printed, the key must never be.
    state = "set" if os.environ.get(model.api_key_env) else "unset"
    return f"{model.api_key_env} {state}"


def _describe_model(label: str, model: ModelConfig, config: RunConfig, field: str) -> str:
    """One model or judge line; ``field`` (``models.0``, ``judge``) finds its paper defaults."""
    effort = f"effort {model.reasoning_effort or 'default'}"
    effort += config.paper_default_note(f"{field}.reasoning_effort")
    label += config.paper_default_note(f"{field}.name")
    settings = [effort, f"api {choose_api(model).describe()}"]
    for name in ("temperature", "top_p", "seed"):
        value = getattr(model, name)
        if value is not None:
            settings.append(f"{name} {value}")
    return f"{label} ({', '.join(settings)}) -> {_endpoint(model)}; key: {_key_state(model)}"


def token_bound(config: RunConfig, samples: int) -> TokenBound:
    """Samples x the per-sample ceiling the track enforces, when it has one."""
    budget = config.budget
    uses_cap = config.track == "frontiermath" or bool(config.track_options.get("python_tool"))
    if uses_cap:
        return TokenBound(
            budget.token_cap,
            samples,
            f"{samples:,} samples x token cap {budget.token_cap:,} (input + output)",
        )
    if budget.max_output_tokens is not None:
        return TokenBound(
            budget.max_output_tokens,
            samples,
            f"{samples:,} samples x max output tokens {budget.max_output_tokens:,} "
            "(output only; one request each, plus the prompt)",
        )
    return TokenBound(
        None, samples, "no per-sample ceiling: one request each, bounded by the model's own limit"
    )


def _max_cost(config: RunConfig, bound: TokenBound, samples_per_model: int) -> str | None:
    """Every token at the model's higher price: an upper bound, when every model has prices."""
    if bound.per_sample is None:
        return None
    total = 0.0
    for model in config.models:
        prices = [p for p in (model.input_price_per_mtok, model.output_price_per_mtok) if p is not None]
        if not prices:
            return None
        total += samples_per_model * bound.per_sample * max(prices) / 1_000_000
    return f"at most ${total:,.2f} for the answering models (every token at the higher price)"


def _already_done(run_dir: Path, planned_keys: set[tuple[str, str, int]]) -> int:
    store = RunStore(run_dir)
    if not store.samples_path.exists():
        return 0
    loaded = store.load(repair=False)
    return len(
        {
            sample_key(r)
            for r in loaded.records
            if r.outcome not in RERUN_ON_RESUME and sample_key(r) in planned_keys
        }
    )


def _check_run_dir(config: RunConfig, run_dir: Path, labels: list[str], task_count: int) -> None:
    """Refuse what the run would refuse (a directory holding another run, a resume whose config
    changed what a score means), with the runner's own check: it only reads."""
    uses = uses_of(config, labels)
    header = base_header(config, "dry-run", labels, task_count, uses)
    prepare_header(config, RunStore(run_dir), header, allow_endpoint_change=False)


def build_plan(config: RunConfig) -> list[tuple[str, str]]:
    """(label, text) rows describing what the run would do."""
    track = make_track(config.track, config.track_options)
    loaded = track.load_tasks(config.tasks)
    tasks = select_tasks(loaded, config)
    labels = model_labels(config.models)
    planned = plan_samples(labels, config, tasks)
    ids = [str(task.id) for task in tasks]
    shown = ", ".join(ids[:SHOWN_IDS]) + (
        f", ... ({len(ids) - SHOWN_IDS} more)" if len(ids) > SHOWN_IDS else ""
    )
    rows: list[tuple[str, str]] = [
        (
            "track",
            config.track + (f" (protocol {config.protocol})" if config.track == "frontiermath" else ""),
        ),
        ("tasks", f"{config.tasks}: {len(tasks)} of {len(loaded)} selected ({shown})"),
        ("selection", describe_selection(config.task_filter, config.task_ids, config.limit_tasks)),
        ("trials", f"{config.trials}{config.paper_default_note('trials')}"),
    ]
    kinds = answer_kinds_text(tasks)
    if kinds:
        rows.append(("answer kind", kinds))
    rows += [
        ("model", _describe_model(label, model, config, f"models.{index}"))
        for index, (label, model) in enumerate(zip(labels, config.models, strict=True))
    ]
    if config.judge is not None:
        rows.append(
            (
                "judge",
                _describe_model(config.judge.name, config.judge, config, "judge") + "; one call per answer",
            )
        )
    else:
        missing = " (this track is judged: the run needs one)" if config.track in JUDGED_TRACKS else ""
        rows.append(("judge", "none" + missing))
    paper = config.paper_defaults
    if paper:
        listed = ", ".join(f"{field}={value}" for field, value in paper.items())
        rows.append(
            (
                "paper defaults",
                f"{listed}: from the {PAPER_SOURCE}, because the config leaves them unset; "
                "state them in the config, or use --trials, --judge, --reasoning-effort",
            )
        )
    rows.append(
        ("samples", f"{len(planned):,} = {len(labels)} model(s) x {len(tasks)} task(s) x {config.trials}")
    )
    run_dir = config.out or default_run_dir(config)
    _check_run_dir(config, run_dir, labels, len(tasks))
    if config.resume and config.out is not None:
        done = _already_done(config.out, {p.key for p in planned})
        rows.append(("resume", f"{done:,} already done in {config.out}; {len(planned) - done:,} to run"))
    budget = config.budget
    rows.append(
        (
            "budget",
            f"token cap {budget.token_cap:,}, forced submission from {budget.force_submit_at:,}, "
            f"max output tokens per request {budget.max_output_tokens or 'unset'}",
        )
    )
    bound = token_bound(config, len(planned))
    tokens = "unbounded" if bound.tokens is None else f"{bound.tokens:,}"
    rows.append(("max tokens", f"{tokens}: {bound.basis}"))
    cost = _max_cost(config, bound, len(tasks) * config.trials)
    if cost is not None:
        rows.append(("max cost", cost))
    box = config.sandbox
    if track.needs_sandbox:
        # Described from the spec the run would open, the one value run.json would record.
        spec = sandbox_spec(box)
        calls = spec.max_concurrent_executions or "the engine's CPUs"
        sandbox = (
            f"{spec.backend} (image {spec.image or 'pinned default'}), {box.cpus} CPU, {box.memory} memory, "
            f"{box.timeout_s:g} s a call, pool {spec.pool_size}, calls at once: {calls}, "
            f"isolation {spec.isolation}"
            + (f", engine path {_path_choice_text(spec)}" if spec.backend in ("auto", "docker") else "")
        )
    else:
        sandbox = "none (this track runs no code)"
    rows.append(("sandbox", sandbox))
    rows.append(("concurrency", f"{config.max_concurrency} samples in flight"))
    rows.append(("run dir", f"{run_dir} (not created by --dry-run)"))
    return rows


def answer_kinds_text(tasks: list[Any]) -> str:
    """Each selected task's answer kind and its origin (FrontierMath tasks have one; others none)."""
    described = [
        f"{task.id}: {task.wanted_kind} ({task.answer_kind_origin})"
        for task in tasks
        if hasattr(task, "answer_kind_origin")
    ]
    return "; ".join(described)


def render_plan(rows: list[tuple[str, Any]]) -> str:
    width = max(len(label) for label, _ in rows)
    lines = ["proctor run --dry-run: nothing is sent, no sandbox is opened, nothing is written"]
    # Task ids, model names and paths come from files a hostile author may have written.
    lines += [f"  {label.ljust(width)}  {escape_for_terminal(str(text))}" for label, text in rows]
    return "\n".join(lines)


def _path_choice_text(spec: SandboxSpec) -> str:
    # auto is decided when the sandbox opens (it proves runc-direct can serve): say what it means.
    if spec.engine_path == "auto":
        return "auto (runc-direct where it can serve, else docker)"
    return spec.engine_path
