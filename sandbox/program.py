"""How a program reaches the interpreter: one argv, shared by every backend.

Code goes on the command line (``python3 -I -c CODE``) because the sandbox's root
filesystem is read-only and its tmpfs does not exist before the process starts; stdin
stays free for the program's own input. Linux caps a single argument at 128 KiB, so
longer code is split over several arguments and joined again by a tiny bootstrap.
"""

from __future__ import annotations

from collections.abc import Sequence

from proctor.sandbox.api import InvalidProgram

# MAX_ARG_STRLEN is 32 pages (128 KiB); keep well under it, counted in encoded bytes.
_MAX_ARG_BYTES = 100_000
_JOIN_AND_RUN = (
    "import sys\n"
    "_src = ''.join(sys.argv[1:])\n"
    "sys.argv = ['-c']\n"
    "del sys\n"
    "exec(compile(_src, '<string>', 'exec'), {'__name__': '__main__', '__builtins__': __builtins__})\n"
)


def check_program_text(text: str, what: str = "the code") -> None:
    """Raise :class:`InvalidProgram` for text no interpreter can be given on a command line."""
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise InvalidProgram(f"{what} contains a NUL byte (line {line}, offset {nul}); remove it")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        line = text.count("\n", 0, exc.start) + 1
        raise InvalidProgram(
            f"{what} is not valid UTF-8 (line {line}, offset {exc.start}: {exc.reason})"
        ) from None


def python_argv(code: str, python: str = "python3") -> list[str]:
    """The argv that runs ``code`` as ``__main__`` in an isolated (-I) interpreter."""
    check_program_text(code)
    if len(code.encode("utf-8")) <= _MAX_ARG_BYTES:
        return [python, "-I", "-c", code]
    return [python, "-I", "-c", _JOIN_AND_RUN, *_split(code)]


def _split(code: str) -> list[str]:
    parts: list[str] = []
    # Characters are at most 4 bytes in UTF-8, so this many characters always fit.
    step = _MAX_ARG_BYTES // 4
    for start in range(0, len(code), step):
        parts.append(code[start : start + step])
    return parts


def resolve_argv(code: str | None, argv: Sequence[str] | None, python: str = "python3") -> list[str]:
    """Exactly one of ``code`` and ``argv``; raises ValueError otherwise."""
    if (code is None) == (argv is None):
        raise ValueError("give exactly one of code and argv")
    if code is not None:
        return python_argv(code, python)
    assert argv is not None
    if not argv:
        raise ValueError("argv must not be empty")
    parts = [str(part) for part in argv]
    for index, part in enumerate(parts):
        check_program_text(part, f"argv[{index}]")
    return parts
