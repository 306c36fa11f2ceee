"""Reading the run being re-scored: every byte of it is validated before anything is graded.

A run directory is data that anyone may have edited. Nothing in it is executed on the host:
records are parsed by the pydantic schema, the header's config by ``RunConfig``, and any
problem is one line naming the file, the line and the field (the CLI exits 2).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import RunConfig
from proctor.agent.inputs.input_files import open_run_file
from proctor.agent.results.records import RERUN_ON_RESUME, SampleRecord
from proctor.agent.results.store import RUN_HEADER, SAMPLES, SampleKey, read_json, sample_key

RESCORABLE_TRACKS = ("frontiermath", "olympiad", "research", "phybench")
MAX_RUN_ID_CHARS = 200


@dataclass
class StoredSample:
    record: SampleRecord
    line: int


@dataclass
class StoredRun:
    directory: Path
    header: dict[str, Any]
    config: RunConfig
    samples: list[StoredSample]
    # Bytes of a torn final line (the original run crashed mid-write); ignored, never repaired.
    torn_bytes: int = 0
    model_labels: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return str(self.header["run_id"])

    @property
    def track(self) -> str:
        return str(self.header["track"])

    @property
    def header_path(self) -> Path:
        return self.directory / RUN_HEADER

    @property
    def samples_path(self) -> Path:
        return self.directory / SAMPLES


def _field_error(path: Path, where: str, message: str, line: int | None = None) -> UserError:
    at = f"line {line}: " if line is not None else ""
    return UserError(f"{path}: {at}field '{where}': {message}")


def _validation_message(error: ValidationError) -> tuple[str, str]:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return where, str(first.get("msg", "invalid"))


def validate_config(data: Any, path: Path) -> RunConfig:
    """The header's ``config`` through the same schema a run's config goes through."""
    if not isinstance(data, dict):
        raise _field_error(path, "config", "missing or not an object")
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        where, message = _validation_message(exc)
        raise _field_error(path, f"config.{where}" if where else "config", message) from None


def _header_labels(header: dict[str, Any], path: Path) -> list[str]:
    models = header.get("models")
    if not isinstance(models, list) or not models:
        raise _field_error(path, "models", "missing or not a list of models")
    labels: list[str] = []
    for index, entry in enumerate(models):
        label = entry.get("label") if isinstance(entry, dict) else None
        if not isinstance(label, str) or not label:
            raise _field_error(path, f"models.{index}.label", "missing or not text")
        labels.append(label)
    return labels


def read_header(directory: Path) -> tuple[dict[str, Any], RunConfig, list[str]]:
    path = directory / RUN_HEADER
    if not directory.is_dir():
        raise UserError(f"{directory}: not a run directory")
    if not path.is_file():
        raise UserError(f"{path}: not found; {directory} is not a run directory")
    header = read_json(path)
    run_id = header.get("run_id")
    if not isinstance(run_id, str) or not run_id.strip() or len(run_id) > MAX_RUN_ID_CHARS:
        raise _field_error(path, "run_id", "missing, empty or longer than 200 characters")
    track = header.get("track")
    if track not in RESCORABLE_TRACKS:
        raise _field_error(
            path, "track", f"{track!r} cannot be re-scored (tracks: {', '.join(RESCORABLE_TRACKS)})"
        )
    # Read with .get (its sha256) for the new run's header and the changes it lists.
    if not isinstance(header.get("tasks_file", {}), dict | None):
        raise _field_error(path, "tasks_file", "not an object (path, sha256, selected_tasks)")
    config = validate_config(header.get("config"), path)
    if config.track != track:
        raise _field_error(path, "config.track", f"{config.track!r} differs from the run's track {track!r}")
    return header, config, _header_labels(header, path)


def _parse_line(path: Path, number: int, line: bytes) -> SampleRecord:
    try:
        return SampleRecord.model_validate_json(line)
    except ValidationError as exc:
        where, message = _validation_message(exc)
        raise _field_error(path, where or "record", message, number) from None


def read_samples(path: Path, run_id: str, track: str, labels: list[str]) -> tuple[list[StoredSample], int]:
    """Every record with its line number; an error record is superseded by a later one of the
    same sample (as ``--resume`` wrote it); any other repeat is an edit, and refused."""
    try:
        with os.fdopen(open_run_file(path, os.O_RDONLY, "samples file"), "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise UserError(f"{path}: not found; the run has no samples to re-score") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read the samples file ({exc.strerror or exc})") from None
    lines = data.split(b"\n")
    torn = 0
    if lines and lines[-1].strip():
        # No final newline: a whole record is kept, anything else is the torn write of a crash.
        try:
            SampleRecord.model_validate_json(lines[-1])
        except ValidationError:
            torn = len(lines[-1])
            lines = lines[:-1]
    samples: list[StoredSample] = []
    position: dict[SampleKey, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = _parse_line(path, number, line)
        if record.track != track:
            raise _field_error(path, "track", f"{record.track!r}, but the run's track is {track!r}", number)
        if record.run_id != run_id:
            raise _field_error(path, "run_id", f"{record.run_id!r}, but the run is {run_id!r}", number)
        if record.model not in labels:
            raise _field_error(path, "model", f"{record.model!r} is not one of the run's models", number)
        if record.trial < 0:
            raise _field_error(path, "trial", "must not be negative", number)
        key = sample_key(record)
        if key in position:
            earlier = samples[position[key]]
            if earlier.record.outcome not in RERUN_ON_RESUME:
                raise _field_error(
                    path, "trial", f"sample {key} is already recorded at line {earlier.line}", number
                )
            samples[position[key]] = StoredSample(record, number)
            continue
        position[key] = len(samples)
        samples.append(StoredSample(record, number))
    return samples, torn


def load_stored_run(directory: Path) -> StoredRun:
    header, config, labels = read_header(directory)
    samples, torn = read_samples(directory / SAMPLES, header["run_id"], header["track"], labels)
    return StoredRun(directory, header, config, samples, torn, labels)
