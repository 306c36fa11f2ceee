"""The run directory on disk: ``run.json`` (header), ``samples.jsonl`` (records), ``summary.json``.

``samples.jsonl`` is append-only and is the source of truth: each finished sample is one
line, written with a single ``write`` call, flushed and fsync'd before the runner moves on,
so a crash can at worst leave one torn final line, which :func:`load_samples` cuts away.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticSerializationError

from proctor.agent.errors import UserError
from proctor.agent.inputs.input_files import (
    MAX_CONFIG_BYTES,
    MAX_SAMPLES_BYTES,
    check_run_file_size,
    open_run_file,
    read_text_input,
    too_deep,
    unreadable_value,
)
from proctor.agent.results.records import RERUN_ON_RESUME, SampleRecord, TextReplacements
from proctor.agent.text.encodable import Replacements, make_encodable

RUN_HEADER = "run.json"
SAMPLES = "samples.jsonl"
SUMMARY = "summary.json"
# Held (flock) by the one process writing the run directory; the kernel drops it when that
# process dies, SIGKILL included, so a crashed run never leaves the directory locked.
LOCK = ".proctor.lock"

SampleKey = tuple[str, str, int]  # (model, task_id, trial)


def sample_key(record: SampleRecord) -> SampleKey:
    """Resume identity. The model is part of it: one run may hold several models."""
    return (record.model, record.task_id, record.trial)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_json_atomically(path: Path, data: Any) -> None:
    """Replace ``path`` with ``data`` as JSON in one step (see :func:`write_text_atomically`)."""
    write_text_atomically(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def write_text_atomically(path: Path, text: str) -> None:
    """Replace ``path`` in one step so readers never see half a file, even after a crash.

    The temporary file is created fresh (``O_EXCL``, never through a link someone left in the
    run directory) and renamed over ``path``; a rename replaces a symbolic link itself, never
    its target. A failure is one line naming the file; the temporary file is removed.
    """
    try:
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise UserError(f"{path}: cannot write ({exc.strerror or exc})") from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise UserError(f"{path}: cannot write ({exc.strerror or exc})") from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def refuse_run_file(path: Path, option: str) -> None:
    """One line when ``path`` (an output a user named: a page, an export) is one of a run
    directory's own files, which writing it would destroy: `proctor view RUN --out
    RUN/samples.jsonl` replaced every finished record with the page. Links and ``..`` are
    resolved first, so no other spelling of the name gets through."""
    resolved = path.resolve()
    run_dir = resolved.parent
    if resolved.name in (RUN_HEADER, SAMPLES, SUMMARY, LOCK) and any(
        (run_dir / name).exists() for name in (RUN_HEADER, SAMPLES)
    ):
        raise UserError(
            f"{option} {path}: is the {resolved.name} of the run directory {run_dir}; "
            "writing there would destroy it (choose another path)"
        )


def read_json(path: Path) -> dict[str, Any]:
    text = read_text_input(path, "JSON file", max_bytes=MAX_CONFIG_BYTES, run_file=True)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise UserError(too_deep(str(path))) from None
    except ValueError as exc:
        raise UserError(f"{path}: {unreadable_value(exc)}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object")
    return data


@dataclass
class LoadedSamples:
    records: list[SampleRecord]
    # Bytes cut from the end of the file: the torn last line of a crashed writer.
    torn_bytes: int = 0
    duplicates: list[SampleKey] = field(default_factory=list)


def _parse_record(path: Path, line_number: int, line: bytes) -> SampleRecord:
    try:
        return SampleRecord.model_validate_json(line)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "record"
        raise UserError(f"{path}: line {line_number}: field '{where}': {first.get('msg')}") from None


def load_samples(path: Path, *, repair: bool = False) -> LoadedSamples:
    """Read every complete record; a torn final line is ignored (and cut off when ``repair``).

    Only the last line can be torn, because every record is written by one ``write`` call
    and the file is only ever appended to; a bad line anywhere else is real corruption
    and is reported with its line number rather than silently dropped. A ``harness_error``
    record is superseded by a later record of the same sample (``--resume`` re-ran it).
    """
    try:
        fd = open_run_file(path, os.O_RDWR if repair else os.O_RDONLY, "samples file")
    except FileNotFoundError:
        return LoadedSamples(records=[])
    except OSError as exc:
        raise UserError(f"{path}: cannot read the samples file ({exc.strerror or exc})") from None
    with os.fdopen(fd, "r+b" if repair else "rb", buffering=0) as handle:
        # The same bound as the report's loader, before reading: the file is read whole, and a
        # sparse terabyte planted in a run directory was a MemoryError traceback (or, smaller,
        # the machine's memory).
        check_run_file_size(handle.fileno(), path, "samples file", MAX_SAMPLES_BYTES)
        data = handle.read()
        cut = data.rfind(b"\n") + 1
        complete, tail = data[:cut], data[cut:]
        torn = 0
        if tail.strip():
            # A tail that is a whole record minus its newline is kept; anything else was torn.
            try:
                SampleRecord.model_validate_json(tail)
                complete, tail = data + b"\n", b""
                if repair:
                    handle.seek(0, os.SEEK_END)
                    handle.write(b"\n")
                    os.fsync(handle.fileno())
            except ValidationError:
                torn = len(tail)
        elif tail:
            torn = len(tail)
        if torn and repair:
            handle.truncate(cut)
            os.fsync(handle.fileno())

    records: list[SampleRecord] = []
    position: dict[SampleKey, int] = {}
    duplicates: list[SampleKey] = []
    for number, line in enumerate(complete.split(b"\n"), start=1):
        if not line.strip():
            continue
        record = _parse_record(path, number, line)
        key = sample_key(record)
        if key in position:
            index = position[key]
            if records[index].outcome in RERUN_ON_RESUME:
                records[index] = record
                continue
            # Cannot happen with one writer; if it ever does, the first record wins.
            duplicates.append(key)
            continue
        position[key] = len(records)
        records.append(record)
    return LoadedSamples(records=records, torn_bytes=torn, duplicates=duplicates)


def _reads_back(line: bytes) -> bool:
    """Whether :func:`load_samples` will read ``line``: pydantic's JSON writer goes deeper (about
    250 levels) than its reader (200) and writes integers of any size, which the reader refuses
    past 4,300 digits. A line it refuses would sit before later records as "corruption", and
    stop every resume of the run at its line number."""
    try:
        SampleRecord.model_validate_json(line)
    except ValidationError:
        return False
    return True


def encode_record(record: SampleRecord) -> tuple[bytes, SampleRecord]:
    """The record as one JSONL line that reads back, and the record as stored (they differ only
    when text UTF-8 cannot hold had to be replaced, or a value nested past
    :data:`proctor.agent.text.encodable.MAX_DEPTH` was kept as its repr; see
    :mod:`proctor.agent.text.encodable`). Raises ``ValueError`` when even that cannot be read back,
    so the runner stores a ``harness_error`` record instead of a line no reader takes."""
    try:
        line = record.model_dump_json().encode("utf-8")
        if _reads_back(line):
            return line + b"\n", record
    except (PydanticSerializationError, UnicodeEncodeError):
        pass
    replacements = Replacements()
    data = make_encodable(record.model_dump(mode="python"), replacements)
    if replacements.count:
        data["unencodable_text"] = TextReplacements(
            count=replacements.count, fields=replacements.paths
        ).model_dump()
    stored = SampleRecord.model_validate(data)
    line = stored.model_dump_json().encode("utf-8")
    if not _reads_back(line):
        raise ValueError(
            "the record holds a value the samples file could not read back "
            "(an integer of more than 4,300 digits?)"
        )
    return line + b"\n", stored


class SampleWriter:
    """Appends finished records to ``samples.jsonl``; safe to call from worker threads.

    The lock keeps lines from interleaving; fsync makes "finished" mean "on disk". A write that
    fails part-way (disk full, an I/O error) is cut off again before the error is raised, so the
    file never holds a torn line in its middle: the records after it stay readable.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            fd = open_run_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, "samples file")
        except OSError as exc:
            raise UserError(f"{path}: cannot open the samples file ({exc.strerror or exc})") from None
        self._fd: int | None = fd

    def append(self, record: SampleRecord) -> SampleRecord:
        """Write ``record``; return it as stored (with any replaced text)."""
        line, stored = encode_record(record)
        with self._lock:
            fd = self._fd
            if fd is None:
                raise RuntimeError(f"{self.path}: the samples file is closed")
            start = os.fstat(fd).st_size
            try:
                view = memoryview(line)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            except BaseException:
                # Never leave half a line for the next record to be appended to.
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, start)
                    os.fsync(fd)
                raise
        return stored

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class _Session(BaseModel):
    """The parts of a recorded session a resume and the summary read back."""

    model_config = ConfigDict(extra="allow")

    started_at: str | None = None
    ended_at: str | None = None


class _ResumedConfig(BaseModel):
    """The fields of ``run.json``'s ``config`` that :func:`resume_conflicts` reads as mappings.

    A resume given its own config (a file or flags) never validates the recorded one as a
    ``RunConfig``; these are the values it still reads with ``.get`` or ``in``.
    """

    model_config = ConfigDict(extra="allow", strict=True)

    judge: dict[str, Any] | None = None
    track_options: dict[str, Any] | None = None


class _ResumedHeader(BaseModel):
    """The fields of ``run.json`` a resume carries over into the new header.

    ``run.json`` may have been edited by hand (or by an adversary); every field the runner reads
    back is checked here, so a bad one is one line naming it rather than a traceback half-way
    through a run, after samples were already spent.
    """

    model_config = ConfigDict(extra="allow", strict=True)

    run_id: str = Field(min_length=1, max_length=1_000)
    track: str | None = None
    created_at: str | None = None
    config: _ResumedConfig = Field(default_factory=_ResumedConfig)
    tasks_file: dict[str, Any] = Field(default_factory=dict)
    prompt_template_sha256: str | None = None
    sessions: list[_Session] = Field(default_factory=list)
    events: list[dict[str, Any]] = Field(default_factory=list)
    endpoints: list[dict[str, Any]] | None = None
    sandbox: dict[str, Any] | None = None
    sandbox_isolates_less: bool | None = None
    sandbox_spec: dict[str, Any] | None = None
    defaults_applied: list[str] = Field(default_factory=list)
    paper_defaults: dict[str, Any] | None = None
    hardware: dict[str, Any] | None = None


def checked_header(header: dict[str, Any], path: Path) -> dict[str, Any]:
    """``header`` (a parsed ``run.json``) if every field a resume reads is well formed; else one
    line naming the first bad field."""
    try:
        _ResumedHeader.model_validate(header)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "(top level)"
        raise UserError(f"{path}: field '{where}': {first.get('msg')}") from None
    return header


# Config fields that change what a score means; a resumed run must keep them all. The task
# selection (task_filter, task_ids, limit_tasks) may change: samples are keyed by task id, and
# the summary covers exactly the tasks the latest session selected (docs/runs.md, "Resume").
_RESUME_INVARIANTS = ("track", "budget", "track_options")


def resume_conflicts(previous: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Differences between two run headers that make mixing their samples meaningless."""
    conflicts: list[str] = []
    old_config, new_config = previous.get("config", {}), current.get("config", {})
    for name in _RESUME_INVARIANTS:
        if old_config.get(name) != new_config.get(name):
            conflicts.append(f"{name} was {old_config.get(name)!r}, now {new_config.get(name)!r}")
    old_tasks, new_tasks = previous.get("tasks_file", {}), current.get("tasks_file", {})
    if old_tasks.get("sha256") != new_tasks.get("sha256"):
        conflicts.append(
            f"tasks file {new_tasks.get('path')} differs from the one this run used "
            f"({old_tasks.get('path')}, sha256 {str(old_tasks.get('sha256'))[:12]}…)"
        )
    # Runs recorded before profiles existed ran the methodology's rules ...
    old_protocol = old_config.get("protocol", "methodology")
    if old_protocol != new_config.get("protocol", "methodology"):
        conflicts.append(f"protocol was {old_protocol!r}, now {new_config.get('protocol')!r}")
    # ... and refused invalid FrontierMath submissions unless told otherwise; today's default
    # grades them, so its samples would not be comparable with theirs.
    old_options = old_config.get("track_options") or {}
    if (
        previous.get("track") == "frontiermath"
        and "protocol" not in previous
        and "reject_invalid_submissions" not in old_options
    ):
        conflicts.append(
            "this run was recorded when invalid submissions were refused by default, and they are "
            "now graded; finish it with the Proctor version that started it, or start a new run"
        )
    # Olympiad runs recorded when the pre-check was on by default settled clear matches without
    # the judge; today's default sends every answer to the judge, as the paper does.
    old_settings = previous.get("track_settings") or {}
    new_settings = current.get("track_settings") or {}
    if (
        previous.get("track") == "olympiad"
        and "precheck" in old_settings
        and "precheck" in new_settings
        and old_settings["precheck"] != new_settings["precheck"]
    ):
        conflicts.append(
            f"the Olympiad pre-check was {'on' if old_settings['precheck'] else 'off'}, now "
            f"{'on' if new_settings['precheck'] else 'off'} (it is off by default since every answer "
            "goes to the judge, as in the paper); set track_options.precheck to what the run used"
        )
    if previous.get("prompt_template_sha256") != current.get("prompt_template_sha256"):
        conflicts.append("the prompt template changed")
    old_judge = (old_config.get("judge") or {}).get("name")
    new_judge = (new_config.get("judge") or {}).get("name")
    if old_judge != new_judge:
        conflicts.append(f"judge was {old_judge!r}, now {new_judge!r}")
    return conflicts


class RunStore:
    """One run directory. Create it fresh or reopen it for ``--resume``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.header_path = directory / RUN_HEADER
        self.samples_path = directory / SAMPLES
        self.summary_path = directory / SUMMARY
        self._writer: SampleWriter | None = None
        self._lock_fd: int | None = None

    @property
    def locked(self) -> bool:
        return self._lock_fd is not None

    def lock(self) -> None:
        """Claim the run directory for this process, or say which process holds it.

        Two processes appending the same run would run its samples twice and could cut each
        other's lines (resume repairs a torn tail); one of them is refused before it reads or
        writes anything. The lock is released by :meth:`unlock` or by the process's death.
        """
        if self._lock_fd is not None:
            return
        self._make_directory()
        path = self.directory / LOCK
        try:
            fd = open_run_file(path, os.O_RDWR | os.O_CREAT, "lock file")
        except OSError as exc:
            raise UserError(f"{path}: cannot open the lock file ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise UserError(
                f"{self.directory}: another proctor process{who} is writing this run directory; "
                "wait for it to end or stop it, then resume"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def claim(self) -> None:
        """Lock a run directory this process is about to write its first header into.

        A directory that already existed was locked before anything in it was read; a fresh one
        is claimed only as it is created, so a run that appeared in it meanwhile is another
        process's, and this one is refused rather than write over it.
        """
        if self.locked:
            return
        self.lock()
        if self.header_path.exists() or self.holds_samples():
            raise UserError(f"{self.directory}: another run started in this directory meanwhile")

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def holds_samples(self) -> bool:
        return self.samples_path.exists() and self.samples_path.stat().st_size > 0

    def refuse_samples_without_header(self, resume: bool, what: str) -> None:
        """Refuse a directory holding samples this session may not add to: without run.json a
        resume cannot check they are the same ``what`` (run, re-score); without --resume they
        are another run's."""
        if not self.holds_samples():
            return
        if resume:
            raise UserError(
                f"{self.directory}: holds samples.jsonl but no run.json; cannot check it is the same {what}"
            )
        raise UserError(
            f"{self.directory}: already holds a run; pass --resume to continue it or choose another --out"
        )

    def read_header(self) -> dict[str, Any]:
        return read_json(self.header_path)

    def write_header(self, header: dict[str, Any]) -> None:
        self._make_directory()
        write_json_atomically(self.header_path, header)

    def _make_directory(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            # A file in the way (FileExistsError, NotADirectoryError) or no permission.
            raise UserError(
                f"{self.directory}: cannot create the run directory ({exc.strerror or exc})"
            ) from None

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json_atomically(self.summary_path, summary)

    def load(self, *, repair: bool) -> LoadedSamples:
        return load_samples(self.samples_path, repair=repair)

    def open_writer(self) -> SampleWriter:
        self._make_directory()
        self._writer = SampleWriter(self.samples_path)
        return self._writer

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def records_from(directory: Path) -> list[SampleRecord]:
    """Every finished record of a run directory (for reports; never modifies the file)."""
    return load_samples(directory / SAMPLES).records


def keys_of(records: Iterable[SampleRecord]) -> set[SampleKey]:
    return {sample_key(record) for record in records}
