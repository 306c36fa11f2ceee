"""YAML file + command-line flags -> a validated :class:`RunConfig`, or one clear error line.

Flags override the file. Relative paths in a file (``tasks``, ``prompt_template``) are read
relative to that file's directory, so a config works from any working directory; paths
given as flags are relative to the working directory, as usual on a command line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import RunConfig
from proctor.agent.inputs.config_problems import (
    MAX_LISTED_PROBLEMS,
    MISSING_HINTS,
    Problem,
    ProblemReport,
    YamlPlaces,
    overlaps,
    place,
    problems_of,
)
from proctor.agent.inputs.efforts import check_reasoning_effort
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


def format_validation_error(
    source: str, error: ValidationError, model: type[BaseModel] | None = None, prefix: str = ""
) -> str:
    """``source: field 'a.b': message; field 'c': message (did you mean 'd'?)``: every problem, one line.

    ``model`` is the one validated, so an unknown key can be matched against the real ones at
    its place; ``prefix`` names where the validated mapping sits in the file (``sandbox.``).
    """
    problems = problems_of(error, model)
    parts = [
        f"field '{place(problem.loc, prefix)}': {problem.message}"
        for problem in problems[:MAX_LISTED_PROBLEMS]
    ]
    line = f"{source}: " + "; ".join(parts)
    if len(problems) > MAX_LISTED_PROBLEMS:
        line += f" (and {len(problems) - MAX_LISTED_PROBLEMS} more problems)"
    return line


def read_config_file(path: Path) -> dict[str, Any]:
    return read_config_document(path)[0]


def read_config_document(path: Path) -> tuple[dict[str, Any], YamlPlaces]:
    """The file's fields, and where each is written (for line numbers in its problems)."""
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
        return {}, YamlPlaces(text)
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of config fields at the top level")
    check_data(data, lambda _where: str(path))
    return data, YamlPlaces(text)


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


def merge_flags(data: dict[str, Any], flags: RunFlags) -> dict[str, Any]:
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
        merged["models"] = merge_models(data.get("models"), list(flags.models))
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


def validate_run_config(
    data: dict[str, Any],
    source: str,
    places: YamlPlaces | None = None,
    file_data: dict[str, Any] | None = None,
) -> RunConfig:
    """``data`` as a RunConfig, or a UserError listing every problem, a line each (with the line
    of ``places``'s file that holds it, for what ``file_data`` -- the file's fields -- gave)."""
    problems: list[Problem] = []
    config: RunConfig | None = None
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        problems = problems_of(exc, RunConfig, missing_hints=True)
    # The checks pydantic cannot make, on every field it did not already refuse.
    flagged = [problem.loc for problem in problems]
    problems += [p for p in _field_checks(data) if not overlaps(p.loc, flagged)]
    if config is not None and config.budget.force_submit_at >= config.budget.token_cap:
        problems.append(
            Problem(
                ("budget", "force_submit_at"),
                f"{config.budget.force_submit_at} must be below budget.token_cap "
                f"({config.budget.token_cap}); set --force-submit-at too",
            )
        )
    if problems or config is None:
        report = ProblemReport(source, places, file_data)
        raise UserError(*report.lines(problems, data))
    # Absolute, so `proctor run --resume --out DIR` works from any directory.
    config.tasks = config.tasks.resolve()
    if config.prompt_template is not None:
        config.prompt_template = config.prompt_template.resolve()
    return config


def _field_checks(data: dict[str, Any]) -> list[Problem]:
    """What the loader checks beyond the fields' types, on the raw fields (each check only
    where its field has the type it reads): so they are reported beside pydantic's problems."""
    problems: list[Problem] = []
    models = data.get("models")
    if isinstance(models, list):
        if not models:
            problems.append(Problem(("models",), MISSING_HINTS["models"]))
        for index, entry in enumerate(models):
            name = entry.get("name") if isinstance(entry, dict) else None
            if isinstance(name, str) and "/" not in name:
                problems.append(
                    Problem(
                        ("models", index, "name"),
                        f"expected PROVIDER/NAME (e.g. openai/gpt-5 or local/gemma3-270m), got {name!r}",
                    )
                )
    protocol, track = data.get("protocol", DEFAULT_PROTOCOL), data.get("track", "frontiermath")
    if isinstance(protocol, str):
        if protocol not in PROFILES:
            problems.append(Problem(("protocol",), unknown_protocol_message(protocol)))
        elif protocol != DEFAULT_PROTOCOL and isinstance(track, str) and track != "frontiermath":
            problems.append(
                Problem(("protocol",), f"{protocol!r} applies to the frontiermath track only, not {track!r}")
            )
    tasks = data.get("tasks")
    if isinstance(tasks, str | Path) and not Path(tasks).is_file():
        problems.append(Problem(("tasks",), f"no such file {Path(tasks)}"))
    template = data.get("prompt_template")
    if isinstance(template, str | Path):
        template_path = Path(template).resolve()
        if not template_path.is_file():
            problems.append(Problem(("prompt_template",), f"no such file {template_path}"))
        elif track == "frontiermath":
            # Said now, not as a harness error in every sample.
            try:
                load_template(template_path)
            except UserError as exc:
                problems.append(Problem(("prompt_template",), str(exc)))
    sandbox = data.get("sandbox")
    memory = sandbox.get("memory") if isinstance(sandbox, dict) else None
    if isinstance(memory, str):
        try:
            parse_size(memory)
        except ValueError as exc:
            problems.append(Problem(("sandbox", "memory"), str(exc)))
    out = data.get("out")
    if isinstance(out, str | Path):
        problem = run_dir_problem(Path(out))
        if problem is not None:
            problems.append(Problem(("out",), problem))
    return problems


def check_run_dir(out: Path, source: str) -> None:
    """``out`` must be a directory we can create or write in; say so now, not mid-run."""
    problem = run_dir_problem(out)
    if problem is not None:
        raise UserError(f"{source}: field 'out': {problem}")


def run_dir_problem(out: Path) -> str | None:
    """Why ``out`` cannot be the run directory, or None."""
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            return f"{out} exists and is not a directory"
        if not os.access(out, os.W_OK | os.X_OK):
            return f"cannot write in {out} (permission denied)"
        return None
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot create {out}: {parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot create {out}: {parent} is not writable"
    return None


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
    places: YamlPlaces | None = None
    if config_file is not None:
        data, places = read_config_document(config_file)
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
    merged = merge_flags(data, flags)
    # Flags too: a non-UTF-8 command-line byte arrives as a lone surrogate (surrogateescape).
    check_data(merged, lambda _where: source)
    return validate_run_config(merged, source, places, data if places is not None else None)
