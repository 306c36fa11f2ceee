"""The ``proctor`` Inspect sandbox provider (docs/inspect.md): ``sandbox="proctor"``.

Inspect loads this module through the ``inspect_ai`` entry point (pyproject.toml); importing it
registers :class:`ProctorSandboxEnvironment` under the name ``proctor``. It is the only module
of Proctor that imports Inspect.

Two isolations (the config's ``isolation``, config.py):

- ``per-sample`` (the default): one hardened container for the sample's whole life
  (long_lived.py); files persist between calls, as Inspect's bash and python tools assume.
- ``fresh``: every exec runs in a new container through Proctor's own python-tool path
  (``open_sandbox`` and ``Sandbox.exec``), one sandbox shared by the task's samples; nothing
  persists between calls, so there are no files to read or write.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
from typing import Any, Literal, overload

from inspect_ai._util.error import PrerequisiteError
from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    SandboxUnavailableError,
    SandboxUserUnsupportedError,
    sandboxenv,
)
from pydantic import BaseModel

from proctor.sandbox.api import FRESH, Limits, Sandbox, SandboxError, SandboxUnavailable
from proctor.sandbox.docker.labels import new_run_id
from proctor.sandbox.inspect_provider import files
from proctor.sandbox.inspect_provider.config import (
    ProctorSandboxConfig,
    ProviderConfig,
    ProviderConfigError,
    load_config,
)
from proctor.sandbox.inspect_provider.long_lived import (
    PYTHON,
    ContainerUnavailable,
    ExecOutcome,
    LongLivedContainer,
    check_engine_and_image,
    start_container,
)
from proctor.sandbox.inspect_provider.sweep import sweep

PROVIDER = "proctor"
# One run id per Inspect process: its containers' proctor.run_id label and counter directory.
RUN_ID = new_run_id()
# write_file's bound, as Inspect's docker provider has it.
WRITE_TIMEOUT_S = 600
# A call Inspect gives no timeout still ends: a day, the bound `proctor sandbox exec` has.
FRESH_DEFAULT_TIMEOUT_S = 24 * 3600.0
# GNU timeout's words when it could not start the program (the pinned wrapper runs it).
_NOT_EXECUTABLE = re.compile(rb"timeout: failed to run command .*: Permission denied\n\Z")
# The same from Proctor's launcher (127), or from /usr/bin/env when it set cwd or env (126).
_FRESH_NOT_EXECUTABLE = re.compile(
    r"(\Asandbox: cannot run '.*'|\A/usr/bin/env: '.*'): Permission denied\n\Z"
)


def _config(config: SandboxEnvironmentConfigType | None) -> ProviderConfig:
    try:
        return load_config(config)
    except ProviderConfigError as exc:
        raise PrerequisiteError(str(exc)) from None


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


@sandboxenv(name=PROVIDER)
class ProctorSandboxEnvironment(SandboxEnvironment):
    """A sample's container (per-sample isolation)."""

    # Containers this process started and has not removed yet (task_cleanup's last chance).
    # Keyed by task: one task's cleanup never touches another task's containers or sandbox.
    _live: dict[str, tuple[str, LongLivedContainer]] = {}  # noqa: RUF012 -- class-wide by design
    # isolation fresh: one Proctor sandbox per config, shared by the task's samples.
    _fresh: dict[tuple[Any, ...], tuple[Sandbox, Limits]] = {}  # noqa: RUF012
    _fresh_lock: asyncio.Lock | None = None

    def __init__(self, container: LongLivedContainer, config: ProviderConfig) -> None:
        super().__init__()
        self.container = container
        self.config = config

    # -- lifecycle ------------------------------------------------------------------------------

    @classmethod
    def config_files(cls) -> list[str]:
        return ["proctor.yaml", "proctor.yml"]

    @classmethod
    def default_concurrency(cls) -> int | None:
        # As Inspect's docker provider: two samples' sandboxes per CPU.
        return 2 * (os.cpu_count() or 1)

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return ProctorSandboxConfig(**config)

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        # A bad config or a missing engine or image is one line before any sample starts.
        parsed = _config(config)
        if parsed.isolation == FRESH:
            await cls._fresh_sandbox(task_name, parsed)
            return
        try:
            await asyncio.to_thread(check_engine_and_image, parsed)
        except SandboxUnavailable as exc:
            raise PrerequisiteError(f"sandbox proctor: {exc}") from None

    @classmethod
    async def sample_init(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, metadata: dict[str, str]
    ) -> dict[str, SandboxEnvironment]:
        parsed = _config(config)
        if parsed.isolation == FRESH:
            return {"default": FreshSandboxEnvironment(*await cls._fresh_sandbox(task_name, parsed), parsed)}
        try:
            container = await asyncio.to_thread(start_container, parsed, RUN_ID)
        except SandboxUnavailable as exc:
            raise PrerequisiteError(f"sandbox proctor: {exc}") from None
        cls._live[container.id] = (task_name, container)
        environment = cls(container, parsed)
        await environment._keep_path_for_login_shells()
        return {"default": environment}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        for environment in environments.values():
            if isinstance(environment, ProctorSandboxEnvironment):
                await environment.close()

    @classmethod
    async def task_cleanup(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool
    ) -> None:
        if not cleanup:
            return
        for owner, container in list(cls._live.values()):
            if owner != task_name:
                continue
            cls._live.pop(container.id, None)
            with contextlib.suppress(Exception):
                await asyncio.to_thread(container.remove)
        with contextlib.suppress(ProviderConfigError):
            key = (task_name, *load_config(config).key())
            opened = cls._fresh.pop(key, None)
            if opened is not None:
                await opened[0].aclose()

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        """``inspect sandbox cleanup proctor [ID]``: Proctor's sweep (sweep.py)."""
        report = await asyncio.to_thread(sweep, id)
        print(report.summary())

    @classmethod
    async def _fresh_sandbox(cls, task_name: str, config: ProviderConfig) -> tuple[Sandbox, Limits]:
        """The task's shared sandbox for ``config`` and the limits it was opened with."""
        from proctor.sandbox import open_sandbox

        if cls._fresh_lock is None:
            cls._fresh_lock = asyncio.Lock()
        async with cls._fresh_lock:
            key = (task_name, *config.key())
            if key not in cls._fresh:
                limits = config.limits.replace(output_bytes=SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE)
                try:
                    opened = await open_sandbox(config.spec.replace(default_limits=limits))
                    cls._fresh[key] = (opened, limits)
                except SandboxUnavailable as exc:
                    raise PrerequisiteError(f"sandbox proctor: {exc}") from None
            return cls._fresh[key]

    async def _keep_path_for_login_shells(self) -> None:
        """Inspect's bash and python tools run ``bash --login``, whose /etc/profile (Debian's)
        resets PATH, hiding the image's own (the pinned image's /opt/venv: sympy, galois...).
        A ``.profile`` in the sample's HOME (/work) puts the image's PATH back after it."""
        outcome = await self._run(
            [PYTHON, "-I", "-S", "-c", files.PROFILE_WRITER, files.container_path(".profile")],
            timeout=WRITE_TIMEOUT_S,
            output_limit=64 * 1024,
        )
        self._raise_file_failure(outcome, ".profile", "write")

    async def close(self) -> None:
        self._live.pop(self.container.id, None)
        await asyncio.to_thread(self.container.remove)

    # -- calls ----------------------------------------------------------------------------------

    def _check_user(self, user: str | None) -> None:
        if user is None or user in (str(self.container.uid), self.container.user):
            return
        raise SandboxUserUnsupportedError(
            f"the proctor sandbox runs every command as its own non-root user "
            f"(uid {self.container.uid}); user {user!r} is not available"
        )

    async def _run(
        self,
        argv: list[str],
        *,
        stdin: bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        output_limit: int,
    ) -> ExecOutcome:
        try:
            return await self.container.exec(
                argv,
                stdin=stdin,
                cwd=files.container_path(cwd or "."),
                env=env,
                timeout=timeout,
                output_limit=output_limit,
            )
        except ContainerUnavailable as exc:
            raise SandboxUnavailableError(str(exc)) from None

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        # timeout_retry is not honoured: a retry would run the program a second time.
        self._check_user(user)
        data = input.encode("utf-8") if isinstance(input, str) else input
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        outcome = await self._run(cmd, stdin=data, cwd=cwd, env=env, timeout=timeout, output_limit=limit)
        if outcome.overflowed:
            raise OutputLimitExceededError(
                limit_str=SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR,
                truncated_output=_text(outcome.stdout),
            )
        if outcome.timed_out:
            error = TimeoutError(f"Command timed out after {timeout} seconds")
            partial = _text(outcome.stdout + outcome.stderr)
            if partial:
                error.truncated_output = partial  # type: ignore[attr-defined]
            raise error
        if outcome.exit_code == 126 and _NOT_EXECUTABLE.search(outcome.stderr):
            raise PermissionError(errno.EACCES, "Permission denied", cmd[0])
        return ExecResult(
            success=outcome.exit_code == 0,
            returncode=outcome.exit_code,
            stdout=_text(outcome.stdout),
            stderr=_text(outcome.stderr),
        )

    async def write_file(self, file: str, contents: str | bytes) -> None:
        data = contents.encode("utf-8") if isinstance(contents, str) else contents
        path = files.container_path(file)
        outcome = await self._run(
            [PYTHON, "-I", "-S", "-c", files.WRITER, path],
            stdin=data,
            timeout=WRITE_TIMEOUT_S,
            output_limit=64 * 1024,
        )
        self._raise_file_failure(outcome, file, "write")

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        if files.is_directory_alias(file):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", file)
        limit = SandboxEnvironmentLimits.MAX_READ_FILE_SIZE
        outcome = await self._run(
            [PYTHON, "-I", "-S", "-c", files.READER, files.container_path(file), str(limit)],
            timeout=WRITE_TIMEOUT_S,
            output_limit=limit + 1,
        )
        if outcome.exit_code == files.TOO_LARGE or outcome.overflowed:
            raise OutputLimitExceededError(
                limit_str=SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, truncated_output=None
            )
        self._raise_file_failure(outcome, file, "read")
        return outcome.stdout.decode("utf-8") if text else outcome.stdout

    @staticmethod
    def _raise_file_failure(outcome: ExecOutcome, file: str, verb: str) -> None:
        if outcome.timed_out:
            raise TimeoutError(f"{verb} of {file} timed out after {WRITE_TIMEOUT_S} seconds")
        if outcome.exit_code == 0:
            return
        number = files.reported_errno(outcome.stderr) if outcome.exit_code == files.FAILED else None
        if number:
            raise files.file_error(number, file)
        raise RuntimeError(f"proctor sandbox: cannot {verb} {file}: {_text(outcome.stderr).strip()}")


class FreshSandboxEnvironment(SandboxEnvironment):
    """isolation fresh: every exec in a new container, through Proctor's own python-tool path."""

    def __init__(self, sandbox: Sandbox, opened_limits: Limits, config: ProviderConfig) -> None:
        super().__init__()
        self.sandbox = sandbox
        self.opened_limits = opened_limits
        self.config = config

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        return None  # the shared sandbox closes at task_cleanup

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        if user is not None:
            raise SandboxUserUnsupportedError(
                f"the proctor sandbox (isolation fresh) runs every command as its own non-root user; "
                f"user {user!r} is not available"
            )
        if not cmd:
            raise ValueError("exec needs a command")
        argv = list(cmd)
        if cwd is not None or env:
            # A fresh container starts in /work with the image's environment; /usr/bin/env (by
            # absolute path, on the read-only root) moves it and sets the caller's variables.
            settings = [f"{key}={value}" for key, value in (env or {}).items()]
            argv = ["/usr/bin/env", f"--chdir={files.container_path(cwd or '.')}", *settings, *argv]
        wanted = self.opened_limits.replace(output_bytes=SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE)
        try:
            result = await self.sandbox.exec(
                argv=argv,
                stdin=input,
                timeout=float(timeout) if timeout is not None else FRESH_DEFAULT_TIMEOUT_S,
                # The sandbox's own limits keep its warm pool; other ones get a container each.
                limits=None if wanted == self.opened_limits else wanted,
            )
        except SandboxError as exc:
            raise SandboxUnavailableError(f"sandbox proctor: {exc}") from None
        if result.stdout_truncated or result.stderr_truncated:
            raise OutputLimitExceededError(
                limit_str=SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR, truncated_output=result.stdout
            )
        if result.timed_out or result.exit_code is None:
            raise TimeoutError(f"Command timed out after {timeout} seconds")
        if result.exit_code in (126, 127) and _FRESH_NOT_EXECUTABLE.search(result.stderr):
            raise PermissionError(errno.EACCES, "Permission denied", cmd[0])
        return ExecResult(
            success=result.exit_code == 0,
            returncode=result.exit_code,
            stdout=result.stdout,
            stderr=result.stderr,
        )

    async def write_file(self, file: str, contents: str | bytes) -> None:
        raise NotImplementedError(_NO_FILES)

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        raise NotImplementedError(_NO_FILES)


_NO_FILES = (
    "the proctor sandbox with isolation fresh runs every exec in a new container, so no file "
    "outlives a call; use isolation per-sample for tasks that read or write files"
)
