"""The node side of the ray backend: one long-lived actor per node owning that node's docker backend.

A worker actor is pinned to its node and holds the node's whole ``proctor_sandbox`` resource,
so Ray places at most one worker per node and only on nodes that advertise the resource (those
with a Docker engine). Its capacity, the calls it runs at once, is that resource's amount,
sized to the node's CPUs when the node joins the cluster.

The actor selects its node's engine by setting ``DOCKER_HOST`` in its own process before it
builds the docker backend (``docker.from_env`` honours it), so the docker backend itself is
used unchanged, warm pool and all: running ``docker run`` per call as a Ray task would throw
the pool away (0.35 s+ per call instead of 15-30 ms).

Importing this module does not import Ray: the class becomes an actor only in
:func:`start_worker`, so ``sandbox`` stays importable without the optional extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proctor.sandbox.api import DOCKER_PATH, ExecResult, Limits, SandboxError, SandboxUnavailable
from proctor.sandbox.docker.runtimes import RUNC

NAMESPACE = "proctor"
ACTOR_PREFIX = "proctor-sandbox-worker-"
RESOURCE = "proctor_sandbox"
INSTALL_HINT = "the ray backend needs Ray: pip install 'proctor[ray]'"
# Distinct default limits a worker keeps a warm pool for (one per driver configuration);
# calls with other limits still run, each in a container started for it.
_MAX_POOLS = 4
_SWITCH_INTERVAL_S = 0.0005
# Control calls (describe, shutdown) must get through even when every call slot is busy.
_CONTROL_HEADROOM = 8


class ImageRefused(SandboxUnavailable):
    """This node's sandbox image is not the one the driver runs: the worker will not serve it."""


def import_ray() -> Any:
    """The ``ray`` module, or :class:`SandboxUnavailable` naming the extra that provides it."""
    try:
        import ray
    except ImportError:
        raise SandboxUnavailable(INSTALL_HINT) from None
    return ray


def probe_address(address: str | None, timeout_s: float = 5.0) -> None:
    """SandboxUnavailable at once when nothing listens at ``host:port`` (Ray would retry forever).

    ``None``, ``auto`` and other forms are left to Ray, which resolves them itself.
    """
    if not address or address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise SandboxUnavailable(f"the Ray address {address!r} is not host:port")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SandboxUnavailable(f"nothing answers at the Ray address {address} ({reason})") from None


def actor_name(node_id: str) -> str:
    return f"{ACTOR_PREFIX}{node_id}"


class SandboxWorker:
    """Runs sandbox calls on this node's engine; every call is checked against the driver's image."""

    def __init__(
        self,
        node_id: str,
        docker_host: str | None,
        image: str | None,
        capacity: int,
        pool_size: int,
    ) -> None:
        # Before any docker client exists: docker.from_env reads DOCKER_HOST when it is built.
        # When a call ends, its container's removal and the pool's refill start on this
        # process's threads while Ray still has to send the result, which needs the GIL: at
        # the default 5 ms switch interval that send waited up to 5 ms behind docker I/O code.
        sys.setswitchinterval(_SWITCH_INTERVAL_S)
        if docker_host:
            os.environ["DOCKER_HOST"] = docker_host
        else:
            os.environ.pop("DOCKER_HOST", None)
        self.node_id = node_id
        self.docker_host = docker_host
        self.image_ref = image
        self.capacity = capacity
        self.pool_size = pool_size
        self.image_id = ""
        self.swept: list[str] = []
        self._pools: dict[Limits, Any] = {}
        self._open_lock: asyncio.Lock | None = None
        self._closed = False

    async def open(self) -> dict[str, Any]:
        """Connect to this node's engine, find the image, sweep orphans, start one warm pool."""
        from proctor.sandbox.docker.backend import connect_engine, resolve_image
        from proctor.sandbox.docker.cleanup import cleanup_containers

        def connect() -> tuple[str, str, list[str]]:
            client = connect_engine()
            reference, image_id = resolve_image(client, self.image_ref)
            # Containers of a predecessor that died with its node (SIGKILL, lost raylet).
            report = cleanup_containers(client)
            client.close()
            return reference, image_id, report.removed

        self.image_ref, self.image_id, self.swept = await asyncio.to_thread(connect)
        await self._sandbox_for(Limits())
        return self.describe()

    def describe(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "docker_host": self.docker_host or "default",
            "image": self.image_ref,
            "image_id": self.image_id,
            "capacity": self.capacity,
            "pool_size": self.pool_size,
            "orphans_removed": len(self.swept),
            # Ray starts its workers at nice 15 unless RAY_worker_niceness says otherwise; a
            # sandbox worker that low waits behind every busy process for its docker I/O.
            "niceness": os.getpriority(os.PRIO_PROCESS, 0),
            "host_cpus": os.cpu_count(),
            "host_cpu_model": _cpu_model(),
            # The docker backend's default runtime: every call on this node runs under it.
            "runtime": RUNC,
            # Which kernel this node runs: an audit on the same machine can inspect the node's
            # host from its own process; one elsewhere cannot (agent/audit, docs/sandbox.md).
            "boot_id": _boot_id(),
        }

    async def exec(
        self,
        expected_image_id: str,
        default_limits: Limits,
        code: str | None,
        argv: Sequence[str] | None,
        stdin: str | bytes | None,
        timeout: float,
        limits: Limits | None,
    ) -> ExecResult:
        if expected_image_id != self.image_id:
            raise ImageRefused(
                f"node {self.node_id[:12]} refuses to serve: its image {self.image_ref} is "
                f"{self.image_id}, the driver runs {expected_image_id}; load the driver's image "
                "on this node (docker save | docker load) and restart its worker"
            )
        if self._closed:
            raise SandboxError(f"the sandbox worker on node {self.node_id[:12]} has shut down")
        started = time.perf_counter()
        sandbox = await self._sandbox_for(default_limits)
        result: ExecResult = await sandbox.exec(
            code, argv=argv, stdin=stdin, timeout=timeout, limits=limits or default_limits
        )
        # The time the call spent in this worker: the rest of the driver's wait is transport.
        result.extra["ray"] = {"node": self.node_id, "worker_s": time.perf_counter() - started}
        return result

    async def ping(self) -> str:
        """An empty call: what routing through Ray costs, with no sandbox behind it."""
        return self.node_id

    async def settle(self, timeout: float = 60.0) -> bool:
        """Wait until every pool is full and no removal is pending (benchmarks)."""
        settled = await asyncio.gather(*(pool.settle(timeout) for pool in self._pools.values()))
        return all(settled)

    async def shutdown(self) -> int:
        """Close every pool: each container this worker made is removed. Returns how many pools."""
        self._closed = True
        pools = list(self._pools.values())
        self._pools.clear()
        await asyncio.gather(*(pool.aclose() for pool in pools), return_exceptions=True)
        return len(pools)

    async def _sandbox_for(self, default_limits: Limits) -> Any:
        from proctor.sandbox.registry import opener_for
        from proctor.sandbox.spec import SandboxSpec

        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            found = self._pools.get(default_limits)
            if found is not None:
                return found
            if len(self._pools) >= _MAX_POOLS:
                # Any pool serves: limits that differ from its defaults get a container of their own.
                return next(iter(self._pools.values()))
            # Opened from a spec like every sandbox: the node's engine (DOCKER_HOST, set above),
            # the image by the ID the driver checked, the engine's path (no runc-direct probe on
            # a node), and no process bound here: the node's capacity already bounds its calls.
            spec = SandboxSpec(
                backend="docker",
                image=self.image_id,
                pool_size=self.pool_size,
                default_limits=default_limits,
                probe_libraries=False,
                engine_path=DOCKER_PATH,
            )
            sandbox = await opener_for(spec.backend)(spec)
            self._pools[default_limits] = sandbox
            return sandbox


def _boot_id() -> str | None:
    """This kernel's boot ID: equal on two processes exactly when they share a running kernel."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _cpu_model() -> str | None:
    """The node's CPU (recorded per node: the driver's hardware record describes only its host)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def node_capacity(ray: Any, node_id: str) -> int:
    """How many calls the node takes at once: its advertised ``proctor_sandbox`` amount."""
    for node in ray.nodes():
        if node.get("NodeID") == node_id and node.get("Alive"):
            amount = (node.get("Resources") or {}).get(RESOURCE)
            if not amount:
                raise SandboxUnavailable(
                    f"node {node_id[:12]} does not advertise {RESOURCE}: start it with "
                    f"ray start --resources '{{\"{RESOURCE}\": <CPUs>}}'"
                )
            return max(1, int(amount))
    raise SandboxUnavailable(f"no live Ray node has the ID {node_id}")


def start_worker(
    node_id: str | None = None,
    *,
    docker_host: str | None = None,
    image: str | None = None,
    pool_size: int = 2,
    ready_timeout_s: float = 120.0,
) -> dict[str, Any]:
    """Start (or find) the detached worker actor of ``node_id`` (default: the node this process
    joined) and wait until it serves. The caller must already be connected (``ray.init``)."""
    ray = import_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node = node_id or ray.get_runtime_context().get_node_id()
    name = actor_name(node)
    try:
        existing = ray.get_actor(name, namespace=NAMESPACE)
        return dict(ray.get(existing.describe.remote(), timeout=ready_timeout_s), started=False)
    except ValueError:
        pass  # no worker on this node yet
    except ray.exceptions.RayActorError:
        pass  # its worker just ended; its name is released in a moment
    capacity = node_capacity(ray, node)
    actor_class = ray.remote(SandboxWorker)
    options = actor_class.options(
        name=name,
        namespace=NAMESPACE,
        lifetime="detached",
        num_cpus=0,
        resources={RESOURCE: capacity},
        scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
        max_restarts=0,  # a lost worker is replaced by running the command again, never silently
        max_concurrency=capacity + _CONTROL_HEADROOM,
    )
    deadline = time.monotonic() + ready_timeout_s
    while True:
        try:
            handle = options.remote(node, docker_host, image, capacity, pool_size)
            break
        except ValueError:  # the name of a worker that just ended is not released yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    try:
        info = ray.get(handle.open.remote(), timeout=ready_timeout_s)
    except BaseException:
        ray.kill(handle, no_restart=True)
        raise
    return dict(info, started=True)


def stop_workers(timeout_s: float = 60.0) -> list[str]:
    """Shut every worker down (its containers removed), then end its actor. Returns node IDs."""
    ray = import_ray()
    stopped = []
    for name in ray.util.list_named_actors(all_namespaces=False):
        if not name.startswith(ACTOR_PREFIX):
            continue
        try:
            handle = ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            continue
        # A worker that cannot answer is ended all the same.
        with contextlib.suppress(Exception):
            ray.get(handle.shutdown.remote(), timeout=timeout_s)
        ray.kill(handle, no_restart=True)
        stopped.append(name.removeprefix(ACTOR_PREFIX))
    return stopped
