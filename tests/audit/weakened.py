"""Deliberately weakened docker sandboxes, for tests only: the audit must call each one broken.

Each is a real DockerSandbox whose engine calls are intercepted to loosen what it creates
(``host_config`` and container options), or, for the reused pool, one long-lived container
that serves every call through ``docker exec`` without any cleaning in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
from collections.abc import Callable, Sequence
from typing import Any

from proctor.sandbox import ExecResult, Limits
from proctor.sandbox.docker.backend import DockerSandbox, connect_engine, open_docker_sandbox, resolve_image
from proctor.sandbox.docker.containers import StartedContainer, remove_container
from proctor.sandbox.docker.seccomp import RET_ALLOW
from proctor.sandbox.reaper import WAIT_SOURCE

WEAKENINGS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # name: (host_config overrides, create_container overrides)
    "network": ({"network_mode": "bridge"}, {"network_disabled": False}),
    "writable_root": ({"read_only": False}, {}),
    "no_pids_limit": ({"pids_limit": -1}, {}),
    "no_memory_limit": ({"mem_limit": 0, "memswap_limit": 0}, {}),
    # Both of Proctor's filters gone: the engine's default profile instead of the allowlist
    # (as before issue 28), and the launcher's filter swapped for allow-all (REWRITES).
    "no_program_filter": ({"security_opt": ["no-new-privileges"]}, {}),
    # The old wait, and no filter refusing PTRACE_TRACEME in front of it (the allowlist and the
    # launcher's filter both refuse it now, so the old wait would never be reached).
    "crashing_launcher": ({"security_opt": ["no-new-privileges"]}, {}),
}


def _allow_all_filters(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The launcher's own seccomp filter swapped for one that allows every system call."""
    *launcher, config = kwargs["entrypoint"]
    settings = json.loads(config)
    allow_all = struct.pack("<HBBI", 0x06, 0, 0, RET_ALLOW).hex()
    settings["seccomp"] = {machine: allow_all for machine in settings["seccomp"]}
    return {"entrypoint": [*launcher, json.dumps(settings)]}


# The launcher's wait before sandbox/reaper.py: it took any status of the program's pid for its
# end, so a stop reported because the program made the launcher its tracer crashed it.
_CRASHING_WAIT = """\
def wait(pid):
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return 128 - code if code < 0 else code
"""


def _crashing_launcher(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The launcher with its old wait (defined again after the shared one, so it wins), and its
    own filter allowing every call."""
    *head, launcher, config = _allow_all_filters(kwargs)["entrypoint"]
    assert WAIT_SOURCE in launcher
    return {"entrypoint": [*head, launcher.replace(WAIT_SOURCE, WAIT_SOURCE + _CRASHING_WAIT), config]}


# name: function of create_container's keyword arguments, giving the ones to change
REWRITES = {"no_program_filter": _allow_all_filters, "crashing_launcher": _crashing_launcher}


class _LooseningApi:
    """Delegates to the real low-level client, loosening what every created container gets."""

    def __init__(
        self,
        api: Any,
        host_overrides: dict[str, Any],
        create_overrides: dict[str, Any],
        rewrite: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self._api = api
        self._host_overrides = host_overrides
        self._create_overrides = create_overrides
        self._rewrite = rewrite

    def create_host_config(self, **kwargs: Any) -> Any:
        return self._api.create_host_config(**{**kwargs, **self._host_overrides})

    def create_container(self, *args: Any, **kwargs: Any) -> Any:
        rewritten = self._rewrite(kwargs) if self._rewrite is not None else {}
        return self._api.create_container(*args, **{**kwargs, **self._create_overrides, **rewritten})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)


async def open_weakened(weakness: str, limits: Limits, pool_size: int = 2) -> DockerSandbox | ReusedPool:
    if weakness == "reused_pool":
        inner = await open_docker_sandbox(pool_size=0, default_limits=limits)
        return ReusedPool(inner)
    host, create = WEAKENINGS.get(weakness, ({}, {}))
    rewrite = REWRITES.get(weakness)

    def build() -> DockerSandbox:
        client = connect_engine()
        reference, image_id = resolve_image(client, None)
        sandbox = DockerSandbox(client, reference, image_id, pool_size=pool_size, default_limits=limits)
        sandbox.api = _LooseningApi(sandbox.api, host, create, rewrite)  # type: ignore[assignment]
        return sandbox

    sandbox = await asyncio.to_thread(build)
    sandbox.start()
    return sandbox


class ReusedPool:
    """Every call runs in the same container, one after another, and nothing is cleaned."""

    backend = "docker"

    def __init__(self, inner: DockerSandbox) -> None:
        self.inner = inner
        self.default_limits = inner.default_limits
        self._container: StartedContainer | None = None
        self._lock = asyncio.Lock()

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "notes": ["TEST ONLY: one container reused for every call"]}

    async def _shared(self) -> StartedContainer:
        async with self._lock:
            if self._container is None:
                self._container = await self.inner._create(self.default_limits, "pool")
            return self._container

    async def exec(
        self,
        code: str | None = None,
        *,
        argv: Sequence[str] | None = None,
        stdin: str | bytes | None = None,
        timeout: float = 30.0,
        limits: Limits | None = None,
    ) -> ExecResult:
        container = await self._shared()
        text = stdin.decode() if isinstance(stdin, bytes) else (stdin or "")
        program = f"import io, sys\nsys.stdin = io.StringIO({text!r})\n" + (code or "")
        api = self.inner.api

        def run() -> tuple[int | None, bytes, bytes]:
            created = api.exec_create(
                container.id, ["python3", "-I", "-c", program], user=self.inner.user, workdir="/work"
            )
            out, err = api.exec_start(created["Id"], demux=True)
            return api.exec_inspect(created["Id"]).get("ExitCode"), out or b"", err or b""

        started = asyncio.get_running_loop().time()
        try:
            code_, out, err = await asyncio.wait_for(asyncio.to_thread(run), timeout)
        except TimeoutError:
            return ExecResult(None, "", "", timed_out=True, backend="docker")
        return ExecResult(
            code_,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
            duration_s=asyncio.get_running_loop().time() - started,
            backend="docker",
        )

    async def aclose(self) -> None:
        if self._container is not None:
            container, self._container = self._container, None
            container.close()
            with contextlib.suppress(Exception):
                await asyncio.to_thread(remove_container, self.inner.api, container.id)
        await self.inner.aclose()
