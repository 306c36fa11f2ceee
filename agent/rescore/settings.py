"""The re-scoring run's config: the stored run's, with what the user changes laid over it.

Only what grades answers may change: the judge, the tasks file (a fixed ``verify()`` or
reference), ``track_options``, the sandbox and the concurrency. What produced the answers
(models, budget, trials, prompt) is the stored run's and is never used to call a model.

Where the judge's requests and key go is never taken from a run directory alone: a stored
judge ``base_url`` or ``api_key_env`` must be confirmed with ``--judge-base-url`` /
``--judge-key-env`` (or replaced with ``--judge`` / ``--config``), because a run directory
from someone else could otherwise send your key to their server.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import ModelConfig, RunConfig
from proctor.agent.inputs.input_files import check_data
from proctor.agent.model.endpoint import DEFAULT_BASE_URL
from proctor.agent.rescore.stored_run import StoredRun
from proctor.agent.run.config_loader import format_validation_error, parse_size, read_config_file

# The fields a --config file may change; the rest of such a file describes answering, not grading.
GRADING_FIELDS = ("judge", "tasks", "track_options", "sandbox", "max_concurrency")
JUDGED_TRACKS = ("olympiad", "research")
DEFAULT_KEY_ENV = ModelConfig.model_fields["api_key_env"].default


@dataclass
class RescoreFlags:
    """What `proctor rescore` was told on the command line; None means "not given"."""

    judge: str | None = None
    judge_base_url: str | None = None
    judge_key_env: str | None = None
    judge_effort: str | None = None
    tasks: Path | None = None
    backend: str | None = None
    max_concurrency: int | None = None


def _model_entry(value: Any) -> Any:
    return {"name": value} if isinstance(value, str) else value


def _from_config_file(path: Path, track: str, data: dict[str, Any]) -> bool:
    """Lay the file's grading fields over ``data``; whether the file names a judge."""
    file_data = read_config_file(path)
    if "track" in file_data and file_data["track"] != track:
        raise UserError(f"{path}: field 'track': {file_data['track']!r}, but the run's track is {track!r}")
    for name in GRADING_FIELDS:
        if name not in file_data:
            continue
        value = file_data[name]
        if name == "tasks" and isinstance(value, str) and not Path(value).is_absolute():
            value = str(path.parent / value)
        if name == "sandbox" and isinstance(value, dict) and isinstance(data.get("sandbox"), dict):
            # Only the fields the file names change: a file that sets the memory must not drop
            # the run's runtime (gVisor) or engine back to the defaults (sandbox/spec.py).
            value = {**data["sandbox"], **value}
        data[name] = _model_entry(value) if name == "judge" else value
    return "judge" in file_data


def _stored_endpoint(judge: Any) -> str | None:
    """The judge endpoint a run directory asks for, if it names one."""
    if not isinstance(judge, dict):
        return None
    base_url, key_env = judge.get("base_url"), judge.get("api_key_env", DEFAULT_KEY_ENV)
    if base_url is None and key_env == DEFAULT_KEY_ENV:
        return None
    return f"{base_url or 'OPENAI_BASE_URL'} with the key in ${key_env}"


def _keep_recorded_precheck(stored: StoredRun, data: dict[str, Any]) -> None:
    """Grade an Olympiad run with the pre-check setting it ran under. Runs recorded when the
    pre-check was on by default state no ``precheck`` option; today's default (off) would grade
    them another way. A config file's ``track_options`` still replaces these."""
    recorded = (stored.header.get("track_settings") or {}).get("precheck")
    options = data.get("track_options") or {}
    if stored.track == "olympiad" and isinstance(recorded, bool) and "precheck" not in options:
        data["track_options"] = {**options, "precheck": recorded}


def rescore_config(stored: StoredRun, config_file: Path | None, flags: RescoreFlags) -> RunConfig:
    data: dict[str, Any] = stored.config.model_dump(mode="json")
    data.update(out=None, resume=False)
    _keep_recorded_precheck(stored, data)
    source = "command line"
    judge_from_user = False
    if config_file is not None:
        judge_from_user = _from_config_file(config_file, stored.track, data)
        source = str(config_file)
    if flags.judge is not None:
        data["judge"] = {"name": flags.judge}
        judge_from_user = True
    endpoint_given = flags.judge_base_url is not None or flags.judge_key_env is not None
    if not judge_from_user and not endpoint_given:
        asked = _stored_endpoint(data.get("judge"))
        if asked is not None:
            raise UserError(
                f"{stored.header_path}: field 'config.judge': the run names the judge endpoint {asked}; "
                "a run directory is not trusted to say where your key goes: confirm with "
                "--judge-base-url URL (and --judge-key-env VAR), or choose a judge with --judge"
            )
    judge_changes = {
        "base_url": flags.judge_base_url,
        "api_key_env": flags.judge_key_env,
        "reasoning_effort": flags.judge_effort,
    }
    given = {key: value for key, value in judge_changes.items() if value is not None}
    if given:
        if not isinstance(data.get("judge"), dict):
            raise UserError(
                f"--judge-{next(iter(given)).replace('_', '-')}: this run has no judge; add --judge"
            )
        data["judge"] = {**data["judge"], **given}
    if flags.tasks is not None:
        data["tasks"] = str(flags.tasks)
    if flags.backend is not None:
        data["sandbox"] = {**(data.get("sandbox") or {}), "backend": flags.backend}
    if flags.max_concurrency is not None:
        data["max_concurrency"] = flags.max_concurrency
    check_data(data, lambda _where: source)
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise UserError(format_validation_error(source, exc, RunConfig)) from None
    if judge_from_user and stored.track not in JUDGED_TRACKS:
        raise UserError(f"--judge: the {stored.track} track has no judge (it is graded without one)")
    if not config.tasks.is_file():
        if flags.tasks is not None:
            where = "--tasks"
        elif config_file is not None and str(config.tasks) != str(stored.config.tasks):
            where = f"{config_file}: field 'tasks'"
        else:
            where = f"{stored.header_path}: field 'config.tasks'"
        raise UserError(f"{where}: no such file {config.tasks} (give --tasks FILE)")
    config.tasks = config.tasks.resolve()
    try:
        parse_size(config.sandbox.memory)
    except ValueError as exc:
        raise UserError(f"{source}: field 'sandbox.memory': {exc}") from None
    return config


def judge_endpoint(config: RunConfig) -> str | None:
    """The base URL the judge's requests go to, after the environment."""
    judge = config.judge
    if judge is None or config.track not in JUDGED_TRACKS:
        return None
    if judge.name.startswith("local/") and judge.base_url is None:
        return "local llama.cpp server"
    return judge.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL


def describe_changes(stored: StoredRun, config: RunConfig, tasks_sha256: str) -> list[str]:
    """What differs from the stored run's grading, one line each, for run.json."""
    changes: list[str] = []
    old = stored.config
    if config.track in JUDGED_TRACKS:
        before = _judge_text(old.judge)
        after = _judge_text(config.judge)
        if before != after:
            changes.append(f"judge: {before} -> {after}")
    stored_sha = (stored.header.get("tasks_file") or {}).get("sha256")
    if stored_sha != tasks_sha256:
        changes.append(f"tasks file: sha256 {str(stored_sha)[:12]} -> {tasks_sha256[:12]} ({config.tasks})")
    if old.track_options != config.track_options:
        changes.append(f"track_options: {old.track_options!r} -> {config.track_options!r}")
    if config.track == "frontiermath" and old.sandbox != config.sandbox:
        changes.append(
            f"sandbox: {old.sandbox.model_dump(exclude_defaults=True)!r} -> "
            f"{config.sandbox.model_dump(exclude_defaults=True)!r}"
        )
    versions = stored.header.get("versions")
    old_version = versions.get("proctor") if isinstance(versions, dict) else None
    from proctor.agent.run.run_header import environment_info

    new_version = environment_info()["versions"]["proctor"]
    if old_version != new_version:
        changes.append(f"proctor: {old_version} -> {new_version}")
    return changes


def _judge_text(judge: ModelConfig | None) -> str:
    if judge is None:
        return "none"
    effort = f"@{judge.reasoning_effort}" if judge.reasoning_effort else ""
    where = f" at {judge.base_url}" if judge.base_url else ""
    return f"{judge.name}{effort}{where}"
