"""An Inspect AI sandbox provider as the sandbox under audit: ``--inspect NAME``.

The provider is found in Inspect's own registry (its built-ins and every package registered
through the ``inspect_ai`` entry point) and driven through the lifecycle an eval gives it:
``task_init``, ``sample_init``, one sample environment for every call of the audit, then
``sample_cleanup`` and ``task_cleanup``. Each probe is a Python program run by that
environment's ``exec`` exactly as Inspect's own python tool runs code (``bash --login -c
'python3 -'``, the program on stdin). The provider enforces each call's timeout (Inspect takes
whole seconds: the audit rounds up) and its own output cap; the audit adds only a deadline past
which a call that never returned is a broken row. Inspect stays an optional dependency: nothing
here imports it until a provider is asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proctor.agent.audit.command_sandbox import argv_program, stdin_prefix
from proctor.agent.audit.model import INSPECT, PROBE_PRELUDE, NotRun, probe_reply
from proctor.agent.errors import UserError
from proctor.sandbox import ExecResult, Limits

# How Inspect's python tool (inspect_ai/tool/_tools/_execute.py) hands code to a sandbox.
PYTHON_TOOL_ARGV = ("bash", "--login", "-c", "python3 -")
TASK_NAME = "proctor-audit"
SAMPLE_ID = "proctor-audit"
# Past the timeout given to the provider: its own grace to kill the program (local: SIGTERM,
# then SIGKILL 2 s later) fits in this; a call still running after it never returned.
RETURN_GRACE_S = 8.0
# The first call, which asks the provider's program who it is (a loaded machine starts slowly).
IDENTITY_TIMEOUT_S = 30.0


class ProviderDidNotReturn(RuntimeError):
    """The provider's exec outlived its own timeout by the grace: the row is broken."""


def _inspect_registry() -> tuple[Any, Any]:
    """Inspect's registry lookup and its list of sandbox providers, built-ins and plug-ins."""
    try:
        import inspect_ai.util  # noqa: F401  (registers the built-in providers: docker, local)
        from inspect_ai._util.entrypoints import ensure_entry_points
        from inspect_ai._util.registry import registry_find, registry_info, registry_unqualified_name
    except ImportError:
        raise UserError(
            "--inspect: inspect_ai is not installed (pip install inspect-ai); installed providers: none"
        ) from None

    def providers() -> dict[str, type]:
        ensure_entry_points()  # the plug-ins registered through the inspect_ai entry point
        found = registry_find(lambda info: info.type == "sandboxenv")
        return {registry_unqualified_name(registry_info(kind)): kind for kind in found}  # type: ignore[misc]

    return providers, registry_info


def installed_providers() -> list[str]:
    """The names of every Inspect sandbox provider installed here (one-line error without Inspect)."""
    providers, _ = _inspect_registry()
    return sorted(providers())


def find_provider(name: str) -> type:
    """The provider's SandboxEnvironment class, or a one-line error naming the installed ones."""
    providers, _ = _inspect_registry()
    found = providers()
    if name not in found:
        raise UserError(
            f"--inspect: no Inspect sandbox provider named {name!r}; "
            f"installed: {', '.join(sorted(found)) or 'none'}"
        )
    return found[name]


def resolve_config(config: str | None) -> str | None:
    """A config naming a file is given to the provider by absolute path, as Inspect resolves it."""
    if config is None:
        return None
    path = Path(config).expanduser()
    if not path.is_file():
        raise UserError(f"--inspect-config: {config} is not a file")
    return str(path.resolve())


def output_cap() -> int:
    """The per-stream cap Inspect documents for exec (10 MiB, INSPECT_SANDBOX_MAX_EXEC_OUTPUT_SIZE)."""
    from inspect_ai.util import SandboxEnvironmentLimits

    return int(SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE)


# Who the provider's programs are, next to this audit: the same kernel (boot ID), the same PID
# namespace, and whether they can signal the audit's own process (signal 0: nothing is sent).
_IDENTITY = """\
import errno, os, sys
audit_pid = int(sys.stdin.read())
def name(exc):
    return errno.errorcode.get(exc.errno, str(exc.errno))
def link(path):
    try:
        return os.readlink(path)
    except OSError as exc:
        return name(exc)
try:
    boot_id = open("/proc/sys/kernel/random/boot_id").read().strip()
except OSError as exc:
    boot_id = name(exc)
try:
    os.kill(audit_pid, 0)
    signal_result = "delivered"
except OSError as exc:
    signal_result = name(exc)
try:
    with open("/proc/%d/environ" % audit_pid, "rb") as f:
        f.read(1)
    environ = "READ"
except OSError as exc:
    environ = name(exc)
report(boot_id=boot_id, pid_ns=link("/proc/self/ns/pid"), user_ns=link("/proc/self/ns/user"),
       uid=os.getuid(), signal=signal_result, environ=environ)
"""


def _own(path: str) -> str | None:
    try:
        return os.readlink(path) if path.startswith("/proc/self/ns/") else Path(path).read_text().strip()
    except OSError:
        return None


class InspectSandbox:
    """One sample environment of an Inspect provider, every audit call through its ``exec``."""

    backend = INSPECT

    def __init__(self, provider: str, config: str | None, kind: type) -> None:
        self.provider = provider
        self.config = config
        self.kind: Any = kind
        self.environments: dict[str, Any] = {}
        self.environment: Any = None
        self.output_cap = output_cap()
        self.program: dict[str, Any] = {}
        self.host_local = False
        self.shared_host: dict[str, Any] | None = None
        self._scope = contextlib.ExitStack()
        self._task_started = False

    @classmethod
    async def open(cls, provider: str, config: str | None = None) -> InspectSandbox:
        """Find the provider, start its task and one sample, and learn who its programs are."""
        sandbox = cls(provider, resolve_config(config), find_provider(provider))
        try:
            await sandbox._start()
        except BaseException as exc:
            await sandbox.aclose()
            if isinstance(exc, Exception) and not isinstance(exc, UserError):
                first = (str(exc).strip().splitlines() or [""])[0][:300]
                raise UserError(
                    f"--inspect {provider}: the provider could not start a sample: "
                    f"{type(exc).__name__}: {first}"
                ) from None
            raise
        return sandbox

    async def _start(self) -> None:
        with contextlib.suppress(ImportError):
            # The per-run state a provider's cleanup reads (Inspect's SandboxManager opens it).
            from inspect_ai.util._sandbox.lifecycle import sandbox_lifecycle_scope

            self._scope.enter_context(sandbox_lifecycle_scope())
        await self.kind.task_init(TASK_NAME, self.config)
        self._task_started = True
        self.environments = await self.kind.sample_init(TASK_NAME, self.config, {"__sample_id__": SAMPLE_ID})
        self.environment = self.environments.get("default") or next(iter(self.environments.values()))
        await self._learn_identity()

    async def _learn_identity(self) -> None:
        try:
            result = await self.exec(
                PROBE_PRELUDE + _IDENTITY, stdin=str(os.getpid()), timeout=IDENTITY_TIMEOUT_S
            )
        except (NotRun, ProviderDidNotReturn) as exc:
            # Unknown, so treated as elsewhere: the host-side rows are not applicable.
            self.program = {"identity": f"not run: {exc}"}
            return
        reply = probe_reply(result)
        if reply is None:
            self.program = {"identity": f"did not report: exit {result.exit_code} {result.stderr[-200:]!r}"}
            return
        self.program = reply
        self.host_local = reply.get("boot_id") == _own("/proc/sys/kernel/random/boot_id")
        same_pids = self.host_local and reply.get("pid_ns") == _own("/proc/self/ns/pid")
        if same_pids and reply.get("signal") == "delivered":
            same_user = reply.get("user_ns") == _own("/proc/self/ns/user")
            self.shared_host = {
                **reply,
                "audit_pid": os.getpid(),
                "same_uid": same_user and reply.get("uid") == os.getuid(),
            }

    def describe(self) -> dict[str, Any]:
        return {
            "backend": INSPECT,
            "provider": self.provider,
            "inspect_config": self.config,
            "label": f"inspect:{self.provider}",
            "program_via": f"exec({list(PYTHON_TOOL_ARGV)}, input=program), as Inspect's python tool",
            "isolation": "whatever the provider gives; the audit hands it each timeout and adds nothing",
            # Every call of the audit goes to one sample environment, as one sample's tool calls do.
            "call_isolation": "per-sample",
            "output_cap": self.output_cap,
            "program": self.program,
            "host_local": self.host_local,
            "shared_host": self.shared_host,
        }

    async def exec(
        self,
        code: str | None = None,
        *,
        argv: Sequence[str] | None = None,
        stdin: str | bytes | None = None,
        timeout: float = 30.0,
        limits: Limits | None = None,  # the provider's own limits apply; a call cannot change them
    ) -> ExecResult:
        if (code is None) == (argv is None):
            raise ValueError("give exactly one of code and argv")
        program = code if code is not None else argv_program(argv or ())
        data = stdin.decode("utf-8", errors="replace") if isinstance(stdin, bytes) else (stdin or "")
        given = max(1, math.ceil(timeout))
        started = time.monotonic()
        try:
            ending = await asyncio.wait_for(
                self._call((stdin_prefix(data) if data else "") + program, given), given + RETURN_GRACE_S
            )
        except TimeoutError:
            raise ProviderDidNotReturn(
                f"the provider's exec had not returned {RETURN_GRACE_S:g} s after its {given} s timeout"
            ) from None
        return self._result(ending, given, time.monotonic() - started)

    async def _call(self, feed: str, timeout: int) -> Any:
        """The provider's result, or the exception that is how Inspect reports a timeout or a cut."""
        from inspect_ai.util import (
            OutputLimitExceededError,
            SandboxUnavailableError,
            SandboxUserUnsupportedError,
        )

        try:
            argv = list(PYTHON_TOOL_ARGV)
            # No retry: a probe run twice would see what its first run left.
            return await self.environment.exec(argv, input=feed, timeout=timeout, timeout_retry=False)
        except (TimeoutError, OutputLimitExceededError) as exc:
            return exc
        except (SandboxUnavailableError, SandboxUserUnsupportedError, NotImplementedError) as exc:
            raise NotRun(f"the provider's exec raised {type(exc).__name__}: {exc}") from None

    def _result(self, ending: Any, timeout: int, duration: float) -> ExecResult:
        extra: dict[str, Any] = {"provider": self.provider, "timeout_given_s": timeout}
        if isinstance(ending, TimeoutError):
            # Inspect raises at the timeout and keeps none of the output.
            return ExecResult(None, "", "", timed_out=True, duration_s=duration, backend=INSPECT, extra=extra)
        if isinstance(ending, Exception):  # OutputLimitExceededError: the cut is the flag
            kept = str(getattr(ending, "truncated_output", "") or "")
            extra["output_limit_exceeded"] = str(ending)
            # Inspect does not say which stream passed its limit: both are reported cut.
            return ExecResult(
                None,
                kept,
                "",
                stdout_truncated=True,
                stderr_truncated=True,
                duration_s=duration,
                backend=INSPECT,
                extra=extra,
            )
        return ExecResult(
            int(ending.returncode),
            str(ending.stdout),
            str(ending.stderr),
            duration_s=duration,
            backend=INSPECT,
            extra=extra,
        )

    async def aclose(self) -> None:
        """Clean the sample and the task as an eval would, even when the audit was interrupted."""
        try:
            if self.environments:
                environments, self.environments = self.environments, {}
                await self.kind.sample_cleanup(TASK_NAME, self.config, environments, False)
        finally:
            try:
                if self._task_started:
                    self._task_started = False
                    await self.kind.task_cleanup(TASK_NAME, self.config, True)
            finally:
                self._scope.close()
