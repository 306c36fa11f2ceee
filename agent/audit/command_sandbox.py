"""A sandbox Proctor did not build: any command that runs a Python program handed to it.

``--command 'docker run --rm -i IMAGE python3 -'`` (the program on stdin) or
``--command 'nsjail ... -- python3 {file}'`` (the program in a file the command names) makes
the audit run its probes through that command, exactly as a lab's harness would. The command
is split with :mod:`shlex` and started without a shell, in a session of its own; the audit
enforces each call's timeout from outside by killing that session's process group, and keeps
at most the output cap of each stream. Whatever sits behind the command (a container, a pod, a
service) is not Proctor's: the rows that need its host side are not applicable here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proctor.agent.errors import UserError
from proctor.sandbox import ExecResult, Limits

BACKEND = "command"
FILE_PLACEHOLDER = "{file}"
# After the kill, how long the streams may take to close before the audit stops reading them:
# a descendant in another session can hold a pipe open for ever.
DRAIN_S = 2.0
READ_CHUNK = 64 * 1024


def parse_command(text: str, flag: str = "--command") -> list[str]:
    """The command's argv, split as a POSIX shell would split words (no expansion, no shell)."""
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UserError(f"{flag}: cannot split {text!r}: {exc}") from None
    if not argv:
        raise UserError(f"{flag}: the command is empty")
    if shutil.which(argv[0]) is None:
        raise UserError(f"{flag}: {argv[0]!r} is not an executable on PATH")
    return argv


class _Capped:
    """Reads a stream to its end, keeping at most ``cap`` bytes and counting the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = max(0, cap)
        self.kept = bytearray()
        self.total = 0

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(READ_CHUNK):
            self.total += len(chunk)
            room = self.cap - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.kept)

    def text(self) -> str:
        return self.kept.decode("utf-8", errors="replace")


def stdin_prefix(data: str) -> str:
    # With the program itself on stdin, the program's own input is handed over in its text.
    return f"import io as _pio, sys as _psys\n_psys.stdin = _pio.StringIO({data!r})\ndel _pio, _psys\n"


def _write_program(scratch: Path, program: str) -> Path:
    path = scratch / "program.py"
    path.write_text(program, encoding="utf-8")
    # Readable by whichever uid the sandbox behind the command runs the program as.
    scratch.chmod(0o755)
    path.chmod(0o644)
    return path


def argv_program(argv: Sequence[str]) -> str:
    return f"import os\nos.execvp({argv[0]!r}, {list(argv)!r})\n"


class CommandSandbox:
    """Runs each call as one run of the command; nothing is pooled, nothing is limited by us."""

    backend = BACKEND

    def __init__(self, argv: Sequence[str], default_limits: Limits | None = None, label: str | None = None):
        self.argv = list(argv)
        self.default_limits = default_limits or Limits()
        self.label = label or shlex.join(self.argv)
        self.uses_file = any(FILE_PLACEHOLDER in arg for arg in self.argv)

    def describe(self) -> dict[str, Any]:
        return {
            "backend": BACKEND,
            "command": shlex.join(self.argv),
            "label": self.label,
            "program_via": "file" if self.uses_file else "stdin",
            "isolation": "whatever the command provides; the audit adds only a timeout and an output cap",
        }

    async def exec(
        self,
        code: str | None = None,
        *,
        argv: Sequence[str] | None = None,
        stdin: str | bytes | None = None,
        timeout: float = 30.0,
        limits: Limits | None = None,
    ) -> ExecResult:
        if (code is None) == (argv is None):
            raise ValueError("give exactly one of code and argv")
        program = code if code is not None else argv_program(argv or ())
        data = stdin.decode("utf-8", errors="replace") if isinstance(stdin, bytes) else (stdin or "")
        cap = (limits or self.default_limits).output_bytes
        with tempfile.TemporaryDirectory(prefix="proctor-command-") as scratch:
            if self.uses_file:
                path = _write_program(Path(scratch), program)
                command = [arg.replace(FILE_PLACEHOLDER, str(path)) for arg in self.argv]
                feed = data.encode()
            else:
                command = self.argv
                feed = ((stdin_prefix(data) if data else "") + program).encode()
            return await self._run(command, feed, timeout, cap)

    async def _run(self, command: list[str], feed: bytes, timeout: float, cap: int) -> ExecResult:
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group: the timeout kills all of it
        )
        out, err = _Capped(cap), _Capped(cap)
        assert process.stdin and process.stdout and process.stderr

        async def send() -> None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                process.stdin.write(feed)  # type: ignore[union-attr]
                await process.stdin.drain()  # type: ignore[union-attr]
            process.stdin.close()  # type: ignore[union-attr]

        readers = [
            asyncio.ensure_future(out.drain(process.stdout)),
            asyncio.ensure_future(err.drain(process.stderr)),
        ]
        writer = asyncio.ensure_future(send())
        timed_out = False
        try:
            await asyncio.wait_for(process.wait(), timeout)
        except TimeoutError:
            timed_out = True
        finally:
            # Always: a descendant left in the group (or a cancelled audit) is never left running.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
            _, pending = await asyncio.wait([*readers, writer], timeout=DRAIN_S)
            for task in pending:
                task.cancel()
            # Collects each reader's end (a broken pipe, a cancellation) without raising it here;
            # a cancellation of this call itself still propagates.
            await asyncio.gather(*readers, writer, return_exceptions=True)
        return ExecResult(
            None if timed_out else process.returncode,
            out.text(),
            err.text(),
            timed_out=timed_out,
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            duration_s=time.monotonic() - started,
            backend=BACKEND,
            extra={"command": shlex.join(command)},
        )

    async def aclose(self) -> None:
        return None
