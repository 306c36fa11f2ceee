"""The docker backend: every call in a locked-down container, fresh or reset clean, from a warm pool.

The docker SDK is synchronous, so its calls run on this sandbox's own worker threads. Every
container it makes is tracked from the moment it exists until it is removed: after each call
(in the background, so the caller does not wait), on cancellation and Ctrl-C (shielded, awaited),
in :meth:`DockerSandbox.aclose`, and at interpreter exit. ``proctor sandbox cleanup`` covers
the one case left: a controlling process killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import logging
import os
import shutil
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import docker
from docker.errors import APIError, DockerException, ImageNotFound

from proctor.sandbox.api import (
    AUTO_PATH,
    DOCKER_PATH,
    FRESH,
    PER_SAMPLE,
    RUNC_DIRECT,
    ExecResult,
    InvalidProgram,
    Limits,
    SandboxError,
    SandboxUnavailable,
)
from proctor.sandbox.docker import host_counters, labels, oci_direct
from proctor.sandbox.docker.containers import (
    LAUNCHER,
    ContainerGone,
    RawRun,
    StartedContainer,
    container_settings,
    container_uid,
    counter_view,
    create_started_container,
    create_started_direct,
    own_counters,
    recycle_container,
    remove_container,
    run_program,
)
from proctor.sandbox.docker.host_counters import describe_host_counters, engine_is_local
from proctor.sandbox.docker.image import image_libraries
from proctor.sandbox.docker.pool import Lease, WarmPool
from proctor.sandbox.docker.runtimes import (
    RUNC,
    RUNSC,
    Engine,
    connect_engine_for,
    default_engine_url,
    engine_down,
)
from proctor.sandbox.docker.seccomp import describe_profile
from proctor.sandbox.program import SOURCE_FD, Program, resolve_program
from proctor.sandbox.slots import ExecutionSlots, current_caller

log = logging.getLogger(__name__)
# runc-direct records an image's prepare step once a template has started this many containers:
# recording runs the entrypoint in two probe containers (about 0.18 s of CPU), which the ~4.5 ms
# each later container saves repays after some 40 more. A sandbox that serves a handful of calls
# (a one-off exec, most tests) never pays for it; an eval's run of hundreds does.
RECORD_PREPARE_AFTER = 16

T = TypeVar("T")
NOBODY = "65534:65534"
_API_TIMEOUT_S = 60
_MAX_THREADS = 32
_LIVE_SANDBOXES: weakref.WeakSet[DockerSandbox] = weakref.WeakSet()


def connect_engine() -> docker.DockerClient:
    """A client whose engine answered; :class:`SandboxUnavailable` otherwise."""
    try:
        client = docker.from_env(timeout=_API_TIMEOUT_S, max_pool_size=_MAX_THREADS)
        client.ping()
    except DockerException as exc:
        raise engine_down(None, exc) from None
    return client


def resolve_image(
    client: docker.DockerClient, image: str | None, engine_url: str | None = None
) -> tuple[str, str]:
    """(reference, image ID) of the sandbox image; SandboxUnavailable when it is not built."""
    named = image is not None
    if image is None:
        from proctor.sandbox.docker.image import find_image, image_tag

        image = image_tag()
        image_id = find_image(client, image)
    else:
        try:
            image_id = client.images.get(image).id
        except ImageNotFound:
            image_id = None
    if image_id is None:
        if named:
            # `proctor image build` makes the pinned image, not this one: it is the user's to get.
            raise SandboxUnavailable(
                f"sandbox image {image} is not in the engine at {engine_url or default_engine_url()}: "
                "pull or build it, or leave the image unset for the pinned one"
            )
        if engine_url is None or engine_url == default_engine_url():
            raise SandboxUnavailable(f"sandbox image {image} is not built: run `proctor image build`")
        raise SandboxUnavailable(
            f"sandbox image {image} is not in the engine at {engine_url}: build it with `proctor image "
            f"build`, then copy it there (`bash .ci/setup-gvisor.sh` does both for gVisor's engine)"
        )
    return image, image_id


def sandbox_user(client: docker.DockerClient, image_id: str) -> str:
    """The image's own numeric ``uid:gid`` unless that is root or a name; then nobody. Never root."""
    configured = (client.images.get(image_id).attrs.get("Config") or {}).get("User") or ""
    uid, _, gid = configured.partition(":")
    if not uid.isdigit() or int(uid) == 0 or (gid and not gid.isdigit()):
        return NOBODY
    return f"{uid}:{gid or uid}"


def image_entrypoint(client: docker.DockerClient, image_id: str) -> list[str]:
    """The image's ENTRYPOINT (the launcher runs it as the sandbox user, never as root)."""
    entrypoint = (client.images.get(image_id).attrs.get("Config") or {}).get("Entrypoint") or []
    return [entrypoint] if isinstance(entrypoint, str) else [str(part) for part in entrypoint]


def engine_cpus(client: docker.DockerClient) -> int:
    """How many CPUs the engine can give its containers (``docker info`` NCPU)."""
    try:
        return max(1, int(client.info().get("NCPU") or 0))
    except (DockerException, ValueError, TypeError):
        return max(1, os.cpu_count() or 1)


class DockerSandbox:
    backend = "docker"

    def __init__(
        self,
        client: docker.DockerClient,
        image: str,
        image_id: str,
        *,
        pool_size: int = 2,
        default_limits: Limits | None = None,
        user: str | None = None,
        entrypoint: list[str] | None = None,
        runtime: str = RUNC,
        engine: dict[str, Any] | None = None,
        cpus: int | None = None,
        recycle: bool = False,
        engine_path: str = DOCKER_PATH,
        engine_path_reason: str = "asked for by name",
        record_prepare_after: int = RECORD_PREPARE_AFTER,
    ) -> None:
        self.client = client
        self.runtime = runtime
        self.engine_path = engine_path
        # Why this path serves: asked for, or what sandbox.engine_path auto found (describe()).
        self.engine_path_reason = engine_path_reason
        # runc-direct: containers a template starts before its image's prepare step is recorded
        # once (sandbox/docker/prepare_once.py); 0 records it with the template.
        self.record_prepare_after = record_prepare_after
        self._started_by_template: dict[tuple[Limits, bool], int] = {}
        # runc-direct: the engine's spec per limits, and the image's root (sandbox/docker/oci_direct.py).
        self._templates: dict[tuple[Limits, bool], oci_direct.Template] = {}
        self._template_lock = threading.Lock()
        self._root_layers: tuple[str, ...] | None = None
        # Where the containers run: runtime, engine socket, runtime version (sandbox/docker/runtimes.py).
        self.engine = engine or {"runtime": runtime, "engine": default_engine_url(), "runtime_version": None}
        self.api: docker.APIClient = client.api
        self.image = image
        self.image_id = image_id
        self.user = user or sandbox_user(client, image_id)
        self.entrypoint = image_entrypoint(client, image_id) if entrypoint is None else entrypoint
        self.default_limits = default_limits or Limits()
        self.run_id = labels.new_run_id()
        self._executor = ThreadPoolExecutor(max_workers=_MAX_THREADS, thread_name_prefix="sandbox-docker")
        self._live: set[str] = set()
        self._live_lock = threading.Lock()
        self._removals: set[asyncio.Task[None]] = set()
        self._closed = False
        # Until the process-wide slots are known (follow_slots), as many calls as CPUs.
        self._cpus = cpus or os.cpu_count() or 1
        self._slots: ExecutionSlots | None = None
        self.pool: WarmPool[StartedContainer] = WarmPool(
            self._create_pooled,
            self._remove,
            pool_size,
            # Without a reset the pool still follows demand, but every call gets a fresh container.
            # gVisor lacks what the launcher checks a reset against (/dev/mqueue): never under runsc.
            reset=self._reset if recycle and runtime == RUNC else None,
            capacity=self._concurrent_calls,
        )
        _LIVE_SANDBOXES.add(self)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self.pool.start()

    def follow_slots(self, slots: ExecutionSlots) -> None:
        """Bound the pool by the process's execution slots (they may be resized later)."""
        self._slots = slots

    def _concurrent_calls(self) -> int:
        return self._slots.capacity if self._slots is not None else self._cpus

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.shield(self._close())

    async def _close(self) -> None:
        await self.pool.close()
        if self._removals:
            await asyncio.gather(*self._removals, return_exceptions=True)
        # A container still being created on a worker thread registers itself when done.
        await asyncio.to_thread(self._executor.shutdown, wait=True)
        await asyncio.to_thread(self.remove_all_live)
        if self.engine_path == RUNC_DIRECT:
            await asyncio.to_thread(oci_direct.release_owner, self.run_id)
        await asyncio.to_thread(host_counters.release_owner, self.run_id)

    async def settle(self, timeout: float = 60.0) -> bool:
        """Wait until the pool is full and no removal is pending: an idle, warm sandbox."""
        if self._removals:
            await asyncio.wait(set(self._removals), timeout=timeout)
        return await self.pool.wait_full(timeout)

    def remove_all_live(self) -> None:
        """Synchronous last resort (also run at interpreter exit)."""
        with self._live_lock:
            leftovers = list(self._live)
        for container_id in leftovers:
            try:
                remove_container(self.api, container_id)
            except DockerException as exc:
                # Closing never fails on a slow engine: the sweep removes what is left.
                log.warning("sandbox: could not remove container %s: %s", container_id[:12], exc)
            self._forget(container_id)

    def available_cpus(self) -> int:
        return engine_cpus(self.client)

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "image": self.image,
            "image_id": self.image_id,
            "user": self.user,
            "pool_size": self.pool.size,
            "pool_recycles": self.pool.recycling,
            # sandbox.isolation as it really is: per-sample is never honoured under runsc.
            "call_isolation": PER_SAMPLE if self.pool.recycling else FRESH,
            # sandbox.engine_path: who starts each container (docs/sandbox.md, "Engine paths").
            "engine_path": self.engine_path,
            "engine_path_reason": self.engine_path_reason,
            # runc-direct: who installs the seccomp filter in each container, per template
            # (sandbox/docker/seccomp_once.py); under the engine, runc compiles it in every container.
            "seccomp_install": sorted({template.seccomp for template in list(self._templates.values())}),
            "isolation": "container",
            "isolates_less": False,
            **self.engine,
            # The engine's system-call allowlist (sandbox/docker/seccomp_profile.json), by hash: the
            # same bytes for every call of this run, under runc and runsc alike.
            "seccomp_profile": describe_profile(errno_honoured=self.runtime != RUNSC),
            "notes": [
                "one container per call at a time: fresh, or recycled after the launcher emptied every "
                "writable path, IPC object and process and proved it (docs/sandbox.md)"
                if self.pool.recycling
                else "one fresh container per call, used once and destroyed",
                *(
                    [
                        "runtime runsc: gVisor's user-space kernel between the program and the host "
                        "kernel; the program's processes are bounded inside it (RLIMIT_NPROC)"
                    ]
                    if self.runtime != RUNC
                    else []
                ),
                "network none, read-only root, tmpfs /tmp and /work, cap-drop ALL, no-new-privileges",
                "every process in the container under Proctor's own seccomp allowlist "
                "(sandbox/docker/seccomp_profile.json; anything else ENOSYS), not the engine's default",
                "the program runs as an unprivileged host uid of its container's own (the image "
                "user's group) with no capabilities at all, under a seccomp filter of Proctor's own "
                "(no vsock or other unfenced socket families, no io_uring, no 32-bit system calls, "
                "no namespaces, no PTRACE_TRACEME); "
                "the launcher enforcing its limits is root and non-dumpable: it cannot be signalled, "
                "traced or read by the program",
                "init process, pids/memory (no swap)/CPU limits, wall-clock kill of the whole container",
                "the launcher kills everything a few seconds after the deadline even if the host is gone",
            ],
            "limits": self.default_limits.__dict__,
            "libraries": image_libraries(self.image),  # what the prompt may promise
            "run_id": self.run_id,
            # Which of the host's counters (memory, CPU, uptime) a call sees as its own
            # (files of its own, under runc) and which stay host-wide: sandbox/docker/host_counters.py.
            "host_counters": describe_host_counters(self.runtime == RUNC, engine_is_local(self.api)),
        }

    # -- one call --------------------------------------------------------------------------

    async def exec(
        self,
        code: str | None = None,
        *,
        argv: Sequence[str] | None = None,
        stdin: str | bytes | None = None,
        timeout: float = 30.0,
        limits: Limits | None = None,
    ) -> ExecResult:
        if self._closed:
            raise SandboxError("this sandbox has been closed")
        try:
            program = resolve_program(code, argv, "python3")
        except InvalidProgram:
            raise  # the code's fault, reported to its author: not a sandbox failure
        except ValueError as exc:
            raise SandboxError(str(exc)) from exc
        limits = limits or self.default_limits
        stdin_bytes = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
        if limits != self.default_limits:
            # Pool containers carry the default limits; other limits need a container of their own.
            container = await self._create(limits, "call")
            try:
                return await self._run_in(container, program, stdin_bytes, timeout, limits)
            except ContainerGone as exc:
                raise SandboxError(f"the docker sandbox failed: {exc}") from exc
        return await self._exec_pooled(program, stdin_bytes, timeout, limits)

    async def _exec_pooled(
        self, program: Program, stdin: bytes | None, timeout: float, limits: Limits
    ) -> ExecResult:
        caller = current_caller()
        for attempt in range(2):
            lease = await self.pool.acquire(caller)
            served_before = lease.uses  # 0 unless recycling handed out a reset container
            try:
                raw = await self._run_leased(lease, program, stdin, timeout, limits)
            except ContainerGone as exc:
                # A container died while it waited (e.g. `proctor sandbox cleanup --all` from
                # elsewhere). Nothing ran in it, so another container may run the program.
                if attempt:
                    raise SandboxError(f"the docker sandbox failed: {exc}") from exc
                # Others may have died with it: drop every idle one that did, so the second
                # attempt gets a live container or a fresh one, never another dead one.
                dropped = self.pool.drop_idle(lambda container: container.gone())
                log.warning(
                    "sandbox: warm container lost (%s; %d more idle ones gone); using another one",
                    exc,
                    dropped,
                )
                continue
            result = self._result(raw, lease.item.id)
            result.extra["container_calls_before"] = served_before
            return result
        raise AssertionError("unreachable")

    async def _run_leased(
        self,
        lease: Lease[StartedContainer],
        program: Program,
        stdin: bytes | None,
        timeout: float,
        limits: Limits,
    ) -> RawRun:
        container = lease.item
        try:
            raw = await self._blocking(
                run_program,
                self.api,
                container,
                program.argv_with(SOURCE_FD),
                stdin,
                timeout,
                limits.output_bytes,
                self.pool.recycling,
                program.source,
            )
        except BaseException as exc:
            # Cancellation and Ctrl-C included: removal is awaited (shielded) before leaving.
            await asyncio.shield(self._remove(container))
            self.pool.lost(lease)
            if isinstance(exc, (APIError, OSError)):
                raise SandboxError(f"the docker sandbox failed: {exc}") from exc
            raise
        # Reset (or removal) happens in the background: the caller has its answer now.
        self.pool.give_back(lease, raw.reusable)
        return raw

    async def _run_in(
        self,
        container: StartedContainer,
        program: Program,
        stdin: bytes | None,
        timeout: float,
        limits: Limits,
    ) -> ExecResult:
        """Run one program in ``container`` and remove the container whatever happens."""
        try:
            raw = await self._blocking(
                run_program,
                self.api,
                container,
                program.argv_with(SOURCE_FD),
                stdin,
                timeout,
                limits.output_bytes,
                False,
                program.source,
            )
        except BaseException as exc:
            # Cancellation and Ctrl-C included: removal is awaited (shielded) before leaving.
            await asyncio.shield(self._remove(container))
            if isinstance(exc, (APIError, OSError)):
                raise SandboxError(f"the docker sandbox failed: {exc}") from exc
            raise
        self._remove_in_background(container)
        return self._result(raw, container.id)

    def _result(self, raw: RawRun, container_id: str) -> ExecResult:
        return ExecResult(
            exit_code=raw.exit_code,
            stdout=raw.stdout.text(),
            stderr=raw.stderr.text(),
            timed_out=raw.timed_out,
            oom_killed=raw.oom_killed,
            stdout_truncated=raw.stdout.truncated,
            stderr_truncated=raw.stderr.truncated,
            duration_s=raw.duration_s,
            cpu_s=raw.call_cpu_us / 1e6 if raw.call_cpu_us is not None else None,
            backend=self.backend,
            image=self.image,
            # The container is gone by the time anyone reads this; the ID lets a test or the
            # audit check from the host that nothing serving it is left (gVisor hides its
            # processes from the host's /proc).
            extra={
                "image_id": self.image_id,
                "container_id": container_id,
                "runtime": self.runtime,
                # CPU by part inside the container (the launcher's own accounting), microseconds.
                **({"cpu_us": raw.cpu_us} if raw.cpu_us is not None else {}),
            },
        )

    # -- containers ------------------------------------------------------------------------

    async def _blocking(self, func: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(func, *args))

    async def _create_pooled(self) -> StartedContainer:
        return await self._create(self.default_limits, "pool")

    async def _reset(self, container: StartedContainer) -> None:
        await self._blocking(recycle_container, container)

    async def _create(self, limits: Limits, role: str) -> StartedContainer:
        try:
            return await self._blocking(self._create_blocking, limits, role)
        except (APIError, OSError, ContainerGone) as exc:
            raise SandboxError(f"could not start a sandbox container: {exc}") from exc

    def _create_blocking(self, limits: Limits, role: str) -> StartedContainer:
        if self.engine_path == RUNC_DIRECT:
            return create_started_direct(
                self._template_for(limits, role), self.run_id, on_created=self._track
            )
        return create_started_container(
            self.api,
            self.image_id,
            limits,
            labels.container_labels(self.run_id, role),
            self.user,
            on_created=self._track,
            prepare=self.entrypoint,
            runtime=self.runtime,
            # Only the pool's containers of a recycling pool are ever reset.
            recycle=self.pool.recycling and role == "pool",
        )

    def take_default_template(self) -> None:
        """runc-direct: take the engine's spec for the default limits and mount the image's root
        now, so a path that cannot serve here fails at open, before any call relies on it."""
        self._template_for(self.default_limits, "pool", starting=False)

    def _template_for(self, limits: Limits, role: str, starting: bool = True) -> oci_direct.Template:
        """The engine's spec for these limits, taken once (sandbox/docker/oci_direct.py), and the
        image's read-only root, mounted once; ``starting``: for a container about to start."""
        with self._template_lock:
            recycle = self.pool.recycling and role == "pool"
            key = (limits, recycle)
            started = self._started_by_template.get(key, 0) + starting
            self._started_by_template[key] = started
            template = self._templates.get(key)
            if template is not None:
                if starting and started == self.record_prepare_after + 1:
                    template = self._templates[key] = oci_direct.prepare_once_per_template(
                        template, self.run_id, (container_uid(), container_uid())
                    )
                return template
            uid = container_uid()
            # The engine binds the template container's own counter files; each call's container
            # then gets a copy of its own in its bundle (sandbox/docker/oci_direct.py).
            counters = own_counters(self.api, limits, RUNC, self.run_id)
            settings = container_settings(
                self.api,
                limits,
                labels.container_labels(self.run_id, "template"),
                self.user,
                self.entrypoint,
                RUNC,
                uid,
                recycle,
                counters,
            )
            try:
                spec = oci_direct.capture_spec(self.api, self.image_id, settings)
            finally:
                if counters is not None:
                    shutil.rmtree(counters, ignore_errors=True)
            if self._root_layers is None:
                self._root_layers = oci_direct.root_layers(
                    self.api, self.image_id, spec, oci_direct.image_directory(self.run_id, self.image_id)
                )
            template = oci_direct.precompile_launcher(
                oci_direct.Template(
                    spec,
                    uid,
                    self._root_layers,
                    counters=counter_view(limits) if counters is not None else None,
                ),
                self.run_id,
                LAUNCHER,
            )
            template = oci_direct.record_seccomp_once(template, self.run_id)
            if self.record_prepare_after == 0:
                template = oci_direct.prepare_once_per_template(
                    template, self.run_id, (container_uid(), container_uid())
                )
            self._templates[key] = template
            return template

    def _track(self, container_id: str) -> None:
        # Tracked from the moment it exists, so even a half-started container is removed.
        with self._live_lock:
            self._live.add(container_id)

    async def _remove(self, container: StartedContainer) -> None:
        # A call still streaming on a worker thread (cancellation) must wake up and let go;
        # that thread closes the connection itself.
        container.interrupt()
        try:
            await self._blocking(remove_container, self.api, container.id)
        except RuntimeError:
            # The executor is shut down (interpreter exiting): remove on this thread instead.
            remove_container(self.api, container.id)
        except (DockerException, OSError) as exc:
            log.warning("sandbox: could not remove container %s: %s", container.id[:12], exc)
            return
        finally:
            if not container.busy:
                container.close()
        self._forget(container.id)

    def _remove_in_background(self, container: StartedContainer) -> None:
        task = asyncio.create_task(self._remove(container), name="sandbox-remove")
        self._removals.add(task)
        task.add_done_callback(self._removals.discard)

    def _forget(self, container_id: str) -> None:
        with self._live_lock:
            self._live.discard(container_id)


@atexit.register
def _remove_leftovers_at_exit() -> None:
    for sandbox in list(_LIVE_SANDBOXES):
        sandbox.remove_all_live()


async def open_docker_sandbox(
    *,
    image: str | None = None,
    pool_size: int = 2,
    default_limits: Limits | None = None,
    runtime: str = RUNC,
    docker_host: str | None = None,
    isolation: str = FRESH,
    engine_path: str = DOCKER_PATH,
) -> DockerSandbox:
    """Connect to an engine offering ``runtime``, find the image, start the pool.

    SandboxUnavailable when any of that can't happen (one line, naming the fix).
    """

    def connect() -> tuple[Engine, str, str, str, int]:
        engine = connect_engine_for(runtime, docker_host)
        try:
            reference, image_id = resolve_image(engine.client, image, engine.url)
            user = sandbox_user(engine.client, image_id)
            return engine, reference, image_id, user, engine_cpus(engine.client)
        except BaseException:
            engine.client.close()
            raise

    if engine_path == RUNC_DIRECT:
        if runtime != RUNC:
            raise SandboxUnavailable(f"engine path runc-direct runs runc only, not {runtime}")
        reason = oci_direct.available()
        if reason is not None:
            raise SandboxUnavailable(f"{reason}; or use engine_path docker")
    engine, reference, image_id, user, cpus = await asyncio.to_thread(connect)
    if engine_path == RUNC_DIRECT and not engine_is_local(engine.client.api):
        engine.client.close()
        raise SandboxUnavailable(
            "engine path runc-direct needs the engine on this host; or use engine_path docker"
        )
    described_engine = await asyncio.to_thread(engine.describe)

    def new_sandbox(path: str, reason: str) -> DockerSandbox:
        return DockerSandbox(
            engine.client,
            reference,
            image_id,
            pool_size=pool_size,
            default_limits=default_limits,
            user=user,
            runtime=runtime,
            engine=described_engine,
            cpus=cpus,
            recycle=isolation == PER_SAMPLE,
            engine_path=path,
            engine_path_reason=reason,
        )

    if engine_path == AUTO_PATH:
        sandbox = await _auto_engine_path(new_sandbox, runtime, isolation, engine.client.api)
    else:
        sandbox = new_sandbox(engine_path, "asked for by name")
    sandbox.start()
    return sandbox


def runc_direct_blocker(runtime: str, isolation: str, api: docker.APIClient) -> str | None:
    """Why runc-direct cannot serve this engine, runtime and isolation, or None (engine_path auto)."""
    if runtime != RUNC:
        return f"runtime {runtime}: runc-direct runs runc only"
    if isolation != FRESH:
        # The recycled container's reset is proved on the engine's path (tests/sandbox/test_recycling.py).
        return f"isolation {isolation} is proved on the engine's path only"
    reason = oci_direct.available()
    if reason is not None:
        return reason
    if not engine_is_local(api):
        return "the engine is not on this host"
    return None


async def _auto_engine_path(
    new_sandbox: Callable[[str, str], DockerSandbox], runtime: str, isolation: str, api: docker.APIClient
) -> DockerSandbox:
    """``engine_path: auto``: runc-direct where it serves, proved by taking the engine's spec and
    the image's root before any call; the engine's path otherwise. Either way the sandbox
    records which path serves and why, so run.json and the report say it."""
    blocker = runc_direct_blocker(runtime, isolation, api)
    if blocker is None:
        direct = new_sandbox(RUNC_DIRECT, "auto: root, runc and a local engine")
        try:
            await asyncio.to_thread(direct.take_default_template)
        except Exception as exc:  # any failure leaves the engine's path, which needs none of it
            await direct.aclose()
            blocker = f"runc-direct could not start here ({_one_line(exc)})"
        else:
            return direct
    log.info("sandbox: engine path docker (%s)", blocker)
    return new_sandbox(DOCKER_PATH, f"auto: {blocker}")


def _one_line(exc: BaseException) -> str:
    """An error as one line of at most 300 characters, for describe() and run.json."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
