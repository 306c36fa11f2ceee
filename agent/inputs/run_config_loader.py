"""YAML file + command-line flags -> a validated :class:`RunConfig`, or one clear error line.

Flags override the file. Relative paths in a file (``tasks``, ``prompt_template``) are read
relative to that file's directory, so a config works from any working directory; paths
given as flags are relative to the working directory, as usual on a command line.
"""

from __future__ import annotations

import difflib
import os
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import RunConfig
from proctor.agent.inputs.input_files import (
    MAX_CONFIG_BYTES,
    UniqueKeyLoader,
    check_data,
    read_text_input,
    too_deep,
    unreadable_value,
)
from proctor.agent.inputs.model_overrides import (
    apply_judge_settings,
    merge_judge,
    merge_models,
    parse_model_settings,
)
from proctor.agent.model.efforts import check_reasoning_effort
from proctor.agent.tracks.frontiermath.profiles import DEFAULT_PROTOCOL, PROFILES, unknown_protocol_message
from proctor.agent.tracks.frontiermath.prompt import load_template

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'512m', '1g', '1GiB', '1048576' -> bytes (binary multiples, as docker reads them)."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"not a size: {text!r} (use e.g. 512m or 1g)")
    number, unit = float(match.group(1)), match.group(2).lower()
    return int(number * 1024 ** "_kmgt".index(unit or "_"))


@dataclass
class RunFlags:
    """What `proctor run` was told on the command line; None means "not given"."""

    track: str | None = None
    tasks: Path | None = None
    models: list[str] = field(default_factory=list)
    judge: str | None = None
    trials: int | None = None
    max_concurrency: int | None = None
    out: Path | None = None
    resume: bool = False
    backend: str | None = None
    runtime: str | None = None
    docker_host: str | None = None
    reasoning_effort: str | None = None
    token_cap: int | None = None
    force_submit_at: int | None = None
    limit_tasks: int | str | None = None
    max_sandbox_concurrency: int | None = None
    ray_address: str | None = None
    # --ray-allow-unauthenticated; None: not given (a config file's value stands).
    ray_allow_unauthenticated: bool | None = None
    protocol: str | None = None
    # --task-id patterns, --filter KEY=VALUE items and -M KEY=VALUE items, as typed.
    task_ids: list[str] = field(default_factory=list)
    filters: list[str] = field(default_factory=list)
    model_settings: list[str] = field(default_factory=list)
    judge_settings: list[str] = field(default_factory=list)


# Every problem is listed; past this many (a generated file gone wrong) the rest are counted.
MAX_LISTED_PROBLEMS = 20
# A key shown in a message is cut here: the file, not the message, is the place to read it whole.
MAX_SHOWN_KEY = 80


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field holds: itself, or inside ``X | None``, ``list[X]``, ``dict[str, X]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names of the model found by following ``loc`` (field names; list indexes skipped)."""
    current = model
    for part in loc:
        if not isinstance(part, str):
            continue  # a list index or dict key: the same model continues
        info = current.model_fields.get(part)
        inner = _models_in(info.annotation) if info is not None else []
        if not inner:
            return []
        current = inner[0]
    return list(current.model_fields)


def did_you_mean(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> str:
    """`` (did you mean 'trials'?)`` for an unknown key close to a real one at that place, else ''."""
    if model is None or not loc or not isinstance(loc[-1], str):
        return ""
    close = difflib.get_close_matches(loc[-1], _fields_at(model, loc[:-1]), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _place(loc: tuple[Any, ...], prefix: str) -> str:
    parts = [str(part) for part in loc]
    if parts:
        parts[-1] = parts[-1] if len(parts[-1]) <= MAX_SHOWN_KEY else parts[-1][:MAX_SHOWN_KEY] + "…"
    return prefix + (".".join(parts) or "(top level)")


def format_validation_error(
    source: str, error: ValidationError, model: type[BaseModel] | None = None, prefix: str = ""
) -> str:
    """``source: field 'a.b': message; field 'c': message (did you mean 'd'?)``: every problem, one line.

    ``model`` is the one validated, so an unknown key can be matched against the real ones at
    its place; ``prefix`` names where the validated mapping sits in the file (``sandbox.``).
    """
    problems = error.errors()
    parts = []
    for problem in problems[:MAX_LISTED_PROBLEMS]:
        loc = tuple(problem.get("loc", ()))
        message = str(problem.get("msg", "invalid")).removeprefix("Value error, ")
        hint = did_you_mean(model, loc) if problem.get("type") == "extra_forbidden" else ""
        parts.append(f"field '{_place(loc, prefix)}': {message}{hint}")
    line = f"{source}: " + "; ".join(parts)
    if len(problems) > MAX_LISTED_PROBLEMS:
        line += f" (and {len(problems) - MAX_LISTED_PROBLEMS} more problems)"
    return line


def read_config_file(path: Path) -> dict[str, Any]:
    text = read_text_input(path, "config file", max_bytes=MAX_CONFIG_BYTES)
    try:
        # A SafeLoader that also refuses a key given twice (PyYAML keeps the last silently).
        data = yaml.load(text, Loader=UniqueKeyLoader)
    except RecursionError:
        raise UserError(too_deep(str(path))) from None
    except ValueError as exc:  # not a YAMLError: integers of more than 4,300 digits
        raise UserError(f"{path}: {unreadable_value(exc)}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{path}: {where}not valid YAML ({problem})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of config fields at the top level")
    check_data(data, lambda _where: str(path))
    return data


def _model_entry(value: Any) -> Any:
    # "openai/gpt-x" is shorthand for {"name": "openai/gpt-x"}.
    return {"name": value} if isinstance(value, str) else value


def _resolve_against(base: Path, value: Any) -> Any:
    if isinstance(value, str | Path) and not Path(value).is_absolute():
        return str(base / value)
    return value


def check_effort_flag(value: str) -> str:
    try:
        return check_reasoning_effort(value)
    except ValueError as exc:
        raise UserError(f"--reasoning-effort: {exc}") from None


def split_task_ids(values: list[str]) -> list[str]:
    """``--task-id a --task-id b,c`` -> ["a", "b", "c"] (Inspect's comma-separated form too)."""
    patterns: list[str] = []
    for value in values:
        parts = [part.strip() for part in value.split(",") if part.strip()]
        if not parts:
            raise UserError(f"--task-id {value!r}: an empty pattern selects nothing")
        patterns += parts
    return patterns


def parse_filters(items: list[str]) -> dict[str, str]:
    """``--filter KEY=VALUE`` items -> ``task_filter`` (values stay text: agent/inputs/selection.py)."""
    parsed: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(
                f"--filter {item}: expected FIELD=VALUE, e.g. subject=physics or metadata.level=3"
            )
        if key in parsed:
            raise UserError(f"--filter {item}: {key} is filtered twice")
        parsed[key] = value
    return parsed


def merge_flags(data: dict[str, Any], flags: RunFlags, source: str = "command line") -> dict[str, Any]:
    """Lay the flags over the file's raw fields (before validation, so errors name fields)."""
    merged = dict(data)
    simple = {
        "track": flags.track,
        "tasks": flags.tasks,
        "trials": flags.trials,
        "max_concurrency": flags.max_concurrency,
        "out": flags.out,
        "limit_tasks": flags.limit_tasks,
        "protocol": flags.protocol,
    }
    merged.update({name: value for name, value in simple.items() if value is not None})
    if flags.resume:
        merged["resume"] = True
    if flags.task_ids:
        merged["task_ids"] = list(flags.task_ids)
    if flags.filters:
        merged["task_filter"] = {**(merged.get("task_filter") or {}), **parse_filters(flags.filters)}
    if flags.models:
        # Beside a config file, --model merges into the file's entries (agent/inputs/model_overrides.py).
        merged["models"] = merge_models(data.get("models"), list(flags.models), source)
    if "models" in merged and isinstance(merged["models"], list):
        merged["models"] = [_model_entry(m) for m in merged["models"]]
    if flags.judge is not None:
        merged["judge"] = merge_judge(data.get("judge"), flags.judge)
    if isinstance(merged.get("judge"), str):
        merged["judge"] = _model_entry(merged["judge"])
    model_fields, budget_fields = parse_model_settings(flags.model_settings)
    if flags.reasoning_effort is not None:
        model_fields = {"reasoning_effort": check_effort_flag(flags.reasoning_effort), **model_fields}
    if model_fields and isinstance(merged.get("models"), list):
        merged["models"] = [{**m, **model_fields} if isinstance(m, dict) else m for m in merged["models"]]
    if flags.judge_settings:
        merged["judge"] = apply_judge_settings(merged.get("judge"), flags.judge_settings)
    if flags.token_cap is not None or flags.force_submit_at is not None or budget_fields:
        budget = dict(merged.get("budget") or {})
        budget.update(budget_fields)
        if flags.token_cap is not None:
            budget["token_cap"] = flags.token_cap
        if flags.force_submit_at is not None:
            budget["force_submit_at"] = flags.force_submit_at
        merged["budget"] = budget
    for name in ("backend", "runtime", "docker_host", "ray_address", "ray_allow_unauthenticated"):
        if getattr(flags, name) is not None:
            merged["sandbox"] = {**(merged.get("sandbox") or {}), name: getattr(flags, name)}
    if flags.max_sandbox_concurrency is not None:
        merged["sandbox"] = {
            **(merged.get("sandbox") or {}),
            "max_concurrent_executions": flags.max_sandbox_concurrency,
        }
    return merged


def validate_run_config(data: dict[str, Any], source: str) -> RunConfig:
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise UserError(format_validation_error(source, exc, RunConfig)) from None
    for index, model in enumerate(config.models):
        if "/" not in model.name:
            raise UserError(
                f"{source}: field 'models.{index}.name': expected PROVIDER/NAME "
                f"(e.g. openai/gpt-5 or local/gemma3-270m), got {model.name!r}"
            )
    if not config.models:
        raise UserError(f"{source}: field 'models': at least one model is needed (--model openai/NAME)")
    if config.protocol not in PROFILES:
        raise UserError(f"{source}: field 'protocol': {unknown_protocol_message(config.protocol)}")
    if config.protocol != DEFAULT_PROTOCOL and config.track != "frontiermath":
        raise UserError(
            f"{source}: field 'protocol': {config.protocol!r} applies to the frontiermath track only, "
            f"not {config.track!r}"
        )
    if config.budget.force_submit_at >= config.budget.token_cap:
        raise UserError(
            f"{source}: field 'budget.force_submit_at': {config.budget.force_submit_at} must be below "
            f"budget.token_cap ({config.budget.token_cap}); set --force-submit-at too"
        )
    if not config.tasks.is_file():
        raise UserError(f"{source}: field 'tasks': no such file {config.tasks}")
    # Absolute, so `proctor run --resume --out DIR` works from any directory.
    config.tasks = config.tasks.resolve()
    if config.prompt_template is not None:
        config.prompt_template = config.prompt_template.resolve()
    if config.prompt_template is not None and not config.prompt_template.is_file():
        raise UserError(f"{source}: field 'prompt_template': no such file {config.prompt_template}")
    if config.prompt_template is not None and config.track == "frontiermath":
        # Said now, not as a harness error in every sample.
        try:
            load_template(config.prompt_template)
        except UserError as exc:
            raise UserError(f"{source}: field 'prompt_template': {exc}") from None
    try:
        parse_size(config.sandbox.memory)
    except ValueError as exc:
        raise UserError(f"{source}: field 'sandbox.memory': {exc}") from None
    if config.out is not None:
        check_run_dir(config.out, source)
    return config


def check_run_dir(out: Path, source: str) -> None:
    """``out`` must be a directory we can create or write in; say so now, not mid-run."""
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise UserError(f"{source}: field 'out': {out} exists and is not a directory")
        if not os.access(out, os.W_OK | os.X_OK):
            raise UserError(f"{source}: field 'out': cannot write in {out} (permission denied)")
        return
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(f"{source}: field 'out': cannot create {out}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{source}: field 'out': cannot create {out}: {parent} is not writable")


def load_run_config(
    config_file: Path | None,
    flags: RunFlags,
    *,
    base: dict[str, Any] | None = None,
    source: str | None = None,
) -> RunConfig:
    """Build the run's config from a YAML file (or already-read ``base`` fields) and flags."""
    data: dict[str, Any] = dict(base or {})
    source = source or "command line"
    if config_file is not None:
        data = read_config_file(config_file)
        source = str(config_file)
        for name in ("tasks", "prompt_template"):
            if name in data:
                data[name] = _resolve_against(config_file.parent, data[name])
        options = data.get("track_options")
        texts = options.get("protocol_texts") if isinstance(options, dict) else None
        if isinstance(options, dict) and isinstance(texts, dict):
            # FrontierMath's protocol text files, like the other paths, are the config file's.
            data["track_options"] = {
                **options,
                "protocol_texts": {key: _resolve_against(config_file.parent, v) for key, v in texts.items()},
            }
    if "tasks" not in data and flags.tasks is None:
        raise UserError(f"{source}: field 'tasks': a task file is needed (--tasks FILE)")
    if "models" not in data and not flags.models:
        raise UserError(f"{source}: field 'models': at least one model is needed (--model openai/NAME)")
    merged = merge_flags(data, flags, source)
    # Flags too: a non-UTF-8 command-line byte arrives as a lone surrogate (surrogateescape).
    check_data(merged, lambda _where: source)
    return validate_run_config(merged, source)
