"""Reading the files a user hands Proctor (configs, task files, templates) without surprises.

Every failure is a :class:`UserError` naming the file, and the line and field where they are
knowable; nothing a file holds may reach the user as a traceback. The limits are documented
in docs/runs.md:

* size: at most ``MAX_TASK_FILE_BYTES`` for task files and ``MAX_CONFIG_BYTES`` for configs
  and templates (checked before reading);
* text: UTF-8 only (the error names the line of the first bad byte);
* nesting: at most ``MAX_NESTING`` levels of lists/objects (deeper input is refused, both by
  the parsers' own recursion limit and by :func:`check_data`);
* numbers: finite only (``NaN``, ``Infinity``, ``.inf``, ``1e999`` are refused);
* strings: valid Unicode only (no lone UTF-16 surrogates such as the JSON escape ``\\ud800``).
"""

from __future__ import annotations

import errno
import math
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from proctor.agent.errors import UserError

MAX_TASK_FILE_BYTES = 256 * 1024 * 1024
MAX_CONFIG_BYTES = 4 * 1024 * 1024
# A run's samples may be large (10 MB replies, thousands of samples); this only stops a file no
# run writes, such as a sparse terabyte, which would otherwise be read into memory whole.
MAX_SAMPLES_BYTES = 16 * 1024 * 1024 * 1024
MAX_NESTING = 64
# Values visited per file; YAML aliases can make a small file a huge tree.
MAX_VALUES = 5_000_000


NOT_A_RUN_FILE = "must be a regular file, not a symbolic link, directory, FIFO or device"


def open_run_file(path: Path, flags: int, what: str, *, error: type[UserError] = UserError) -> int:
    """A descriptor for a file of a run directory, which only ever holds regular files.

    A run directory is hostile input: a ``samples.jsonl`` that is a symbolic link would make
    Proctor append model text to whatever file it names, a FIFO would hang it and ``/dev/zero``
    would fill its memory. The last component is never followed (``O_NOFOLLOW``), opening never
    blocks (``O_NONBLOCK``), and anything but a regular file is refused in one line, as is a
    file opened for writing that has other hard links. The directory itself may be a symbolic
    link: the user named it.
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(f"{path}: {what} {NOT_A_RUN_FILE} (it is a symbolic link)") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{path}: {what} {NOT_A_RUN_FILE}")
        # A hard link is a regular file too, but writing through it (appending records,
        # truncating a torn tail or the lock) changes every other name of the inode: a `cp -al`
        # backup of the run, or a file of the user's that whoever edited the directory linked.
        if flags & (os.O_WRONLY | os.O_RDWR) and info.st_nlink > 1:
            raise error(
                f"{path}: {what} has {info.st_nlink} hard links; writing it would change the other "
                "names too (copy the run directory with cp, not cp -l, then resume the copy)"
            )
        # Reads and writes of a regular file block as usual from here on.
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_run_file_size(
    fd: int, path: Path, what: str, max_bytes: int, *, error: type[UserError] = UserError
) -> None:
    """One line when the regular file open on ``fd`` is over ``max_bytes``."""
    size = os.fstat(fd).st_size
    if size > max_bytes:
        raise error(f"{path}: {what} is {size:,} bytes; the limit is {max_bytes:,}")


def read_text_input(
    path: Path,
    what: str,
    *,
    max_bytes: int,
    error: type[UserError] = UserError,
    run_file: bool = False,
) -> str:
    """The UTF-8 text of ``path``, or one line saying why not.

    ``run_file``: the file belongs to a run directory and must be a regular file
    (:func:`open_run_file`); user-named inputs may be FIFOs (``--tasks <(...)``).
    """
    try:
        if run_file:
            with os.fdopen(open_run_file(path, os.O_RDONLY, what, error=error), "rb") as handle:
                # A run file is a regular file, so its size is known before reading: a sparse
                # file of many gigabytes is refused without filling memory up to the cap.
                check_run_file_size(handle.fileno(), path, what, max_bytes, error=error)
                data = handle.read(max_bytes + 1)
        else:
            size = path.stat().st_size
            if path.is_dir():
                raise error(f"{path}: is a directory, not a {what}")
            if size > max_bytes:
                raise error(f"{path}: {what} is {size:,} bytes; the limit is {max_bytes:,}")
            # Bounded even when stat says little: /dev/zero, a FIFO, a file still growing. Opened
            # without blocking, so a FIFO nobody writes to (a task path a hostile run.json names)
            # reads as empty instead of hanging; one with a writer (`--tasks <(...)`) reads as usual.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            os.set_blocking(fd, True)
            with os.fdopen(fd, "rb") as handle:
                data = handle.read(max_bytes + 1)
    except FileNotFoundError:
        raise error(f"{path}: cannot read {what}: no such file ({what} not found)") from None
    except OSError as exc:
        raise error(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise error(f"{path}: {what} is over {max_bytes:,} bytes; the limit is {max_bytes:,}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(
            f"{path}:{line}: {what} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def _describe(path: list[str]) -> str:
    return ".".join(path) or "(top level)"


def data_problem(value: Any) -> tuple[list[str], str] | None:
    """The first place (field path) in parsed data that breaks the rules above, and why.

    Iterative, so the check itself cannot hit the recursion limit.
    """
    stack: list[tuple[Any, list[str], int]] = [(value, [], 0)]
    visited = 0
    while stack:
        item, where, depth = stack.pop()
        visited += 1
        if visited > MAX_VALUES:
            return where, f"more than {MAX_VALUES:,} values (YAML aliases expanding?)"
        if isinstance(item, float):
            if not math.isfinite(item):
                return where, f"{item!r} is not a finite number"
        elif isinstance(item, str):
            problem = _string_problem(item)
            if problem:
                return where, problem
        elif isinstance(item, dict | list):
            if depth >= MAX_NESTING:
                return where, f"nested more than {MAX_NESTING} levels deep"
            children = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in reversed(list(children)):
                if isinstance(key, str) and (problem := _string_problem(key)):
                    return [*where, "<key>"], problem
                if isinstance(key, float) and not math.isfinite(key):
                    return [*where, "<key>"], f"{key!r} is not a finite number"
                stack.append((child, [*where, str(key)], depth + 1))
    return None


def _string_problem(text: str) -> str | None:
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"holds a lone UTF-16 surrogate (\\u{ord(text[exc.start]):04x}), which is not valid Unicode"
    return None


def check_data(value: Any, where: Callable[[list[str]], str], *, error: type[UserError] = UserError) -> None:
    """Raise ``error`` naming the field (``where`` turns a field path into a location)."""
    found = data_problem(value)
    if found is not None:
        path, problem = found
        raise error(f"{where(path)}: field '{_describe(path)}': {problem}")


class DuplicateKey(ValueError):
    """A JSON object that names the same key twice (``json`` would keep the last silently)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key!r} appears twice in one object")
        self.key = key


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for ``json``: a task file with ``"answer"`` twice is ambiguous (which
    one is graded?), so it is refused instead of keeping the last, as ``json`` would."""
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise DuplicateKey(key)
        data[key] = value
    return data


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping naming the same key twice (PyYAML keeps the
    last silently). Keys brought in by a merge (``<<: *base``) may be overridden, as YAML means."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                    seen.setdefault(key, key_node.start_mark.line + 1)
                except TypeError:  # unhashable: the base constructor says so
                    continue
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"the key {key!r} appears twice (first on line {first})",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)


def unreadable_value(exc: ValueError) -> str:
    """Why a parser refused a value it could tokenise (integers of more than 4,300 digits)."""
    return f"a value cannot be read ({str(exc).split(';')[0]})"


def too_deep(source: str) -> str:
    """The message for input the parser's own recursion limit refused."""
    return f"{source}: nested too deeply (the limit is {MAX_NESTING} levels)"
