"""How a program reaches the interpreter: one argv, shared by every backend.

Short code goes on the command line (``python3 -I -c CODE``): the sandbox's root filesystem is
read-only and its tmpfs does not exist before the process starts, and stdin stays free for the
program's own input. A command line is bounded, though: one argument at 128 KiB
(MAX_ARG_STRLEN), all of them with the environment at a quarter of the stack limit (2 MiB
here), beyond which execve fails with E2BIG. So code longer than :data:`_MAX_ARG_BYTES` travels
beside the command line instead: the supervisor inside the sandbox (the docker launcher, the
local backend's init) hands it to the program on an inherited descriptor, whose number is the
last argument, and a tiny bootstrap reads it, closes it and runs it as ``__main__``.

The upper bound, :data:`MAX_CODE_BYTES`, is checked here, on the host, before anything runs:
longer code is refused with one line naming the limit (the FrontierMath tool answers the model
with it). It is far above any real program and keeps the copy the supervisor holds (charged to
the call's memory limit) small beside that limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from proctor.sandbox.api import InvalidProgram

# MAX_ARG_STRLEN is 32 pages (128 KiB); keep well under it, counted in encoded bytes.
_MAX_ARG_BYTES = 100_000
_MAX_ONE_ARGUMENT = 128 * 1024 - 1  # the kernel's MAX_ARG_STRLEN, less the NUL
# An explicit argv stays on the command line: its total must leave room for the environment
# under the 2 MiB that execve accepts. Long data belongs on stdin.
MAX_ARGV_BYTES = 1024 * 1024
MAX_CODE_BYTES = 32 * 1024 * 1024
# Where the docker launcher puts the code for the program (the local backend passes its own
# descriptor's number).
SOURCE_FD = 3
_READ_AND_RUN = (
    "import os, sys\n"
    "_fd = int(sys.argv[-1])\n"
    "_parts = []\n"
    "while True:\n"
    "    _part = os.read(_fd, 1 << 20)\n"
    "    if not _part:\n"
    "        break\n"
    "    _parts.append(_part)\n"
    "os.close(_fd)\n"
    "_src = b''.join(_parts).decode('utf-8')\n"
    "sys.argv = ['-c']\n"
    "del os, sys, _fd, _parts, _part\n"
    "exec(compile(_src, '<string>', 'exec'), {'__name__': '__main__', '__builtins__': __builtins__})\n"
)


@dataclass(frozen=True)
class Program:
    """What a backend runs: ``argv``, and the code to hand over on a descriptor when it is too
    long for the command line (``source``; then :meth:`argv_with` names the descriptor)."""

    argv: list[str]
    source: bytes | None = None

    def argv_with(self, fd: int) -> list[str]:
        return [*self.argv, str(fd)] if self.source is not None else list(self.argv)


def check_program_text(text: str, what: str = "the code", limit: int = MAX_CODE_BYTES) -> None:
    """Raise :class:`InvalidProgram` for text no interpreter can be given: a NUL byte, text that
    is not UTF-8, or more than ``limit`` bytes of it."""
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise InvalidProgram(f"{what} contains a NUL byte (line {line}, offset {nul}); remove it")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        line = text.count("\n", 0, exc.start) + 1
        raise InvalidProgram(
            f"{what} is not valid UTF-8 (line {line}, offset {exc.start}: {exc.reason})"
        ) from None
    if size > limit:
        raise InvalidProgram(f"{what} is {size:,} bytes; the sandbox accepts at most {limit:,} bytes")


def python_program(code: str, python: str = "python3") -> Program:
    """Run ``code`` as ``__main__`` in an isolated (-I) interpreter."""
    check_program_text(code)
    encoded = code.encode("utf-8")
    if len(encoded) <= _MAX_ARG_BYTES:
        return Program([python, "-I", "-c", code])
    return Program([python, "-I", "-c", _READ_AND_RUN], encoded)


def python_argv(code: str, python: str = "python3") -> list[str]:
    """The argv that runs short ``code`` (at most ``_MAX_ARG_BYTES``) from the command line."""
    program = python_program(code, python)
    if program.source is not None:
        raise InvalidProgram(
            f"the code is longer than {_MAX_ARG_BYTES:,} bytes: run it with python_program()"
        )
    return program.argv


def resolve_program(code: str | None, argv: Sequence[str] | None, python: str = "python3") -> Program:
    """Exactly one of ``code`` and ``argv``; raises ValueError otherwise (InvalidProgram, a
    ValueError, for text no interpreter can take)."""
    if (code is None) == (argv is None):
        raise ValueError("give exactly one of code and argv")
    if code is not None:
        return python_program(code, python)
    assert argv is not None
    if not argv:
        raise ValueError("argv must not be empty")
    parts = [str(part) for part in argv]
    total = 0
    for index, part in enumerate(parts):
        check_program_text(part, f"argv[{index}]", _MAX_ONE_ARGUMENT)
        total += len(part.encode("utf-8")) + 1
    if total > MAX_ARGV_BYTES:
        raise InvalidProgram(
            f"argv is {total:,} bytes; a command line takes at most {MAX_ARGV_BYTES:,}: "
            "pass long data on stdin"
        )
    return Program(parts)


def resolve_argv(code: str | None, argv: Sequence[str] | None, python: str = "python3") -> list[str]:
    """Validate like :func:`resolve_program`; the argv as a backend would start it (docker's fd)."""
    return resolve_program(code, argv, python).argv_with(SOURCE_FD)
