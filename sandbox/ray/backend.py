"""The ray backend: the driver stays one process; each call runs on a node's sandbox worker.

``Sandbox.exec`` sends the call to the least-loaded live worker (sandbox/ray/worker.py) and
returns the ExecResult that node's docker backend produced. Calls are stateless, so a call lost
to infrastructure (its node or worker died, or it passed Proctor's own deadline without an
answer) is re-run on another node, at most once per node; each loss is recorded on the
result, ``extra["ray"]["lost"]``, which run records keep. A call whose sandbox failed on a
live node (SandboxError there) is tried on one other node only, so a program that breaks its
own sandbox is never run on every node; the second failure is raised. A program that timed out or ran out
of memory is the program's result: it comes back as a normal ExecResult and is never retried.

Ray notices a dead node only through its health checks (about 38 s by default); the cluster
is meant to run with them tuned to seconds (docs/scale.md). Proctor's deadline, the call's
own timeout plus a margin, bounds a call whatever Ray does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from proctor.sandbox.api import ExecResult, InvalidProgram, Limits, SandboxError, SandboxUnavailable
from proctor.sandbox.program import resolve_argv
from proctor.sandbox.ray.auth import TOKEN_HINT, require_token_auth
from proctor.sandbox.ray.worker import ACTOR_PREFIX, NAMESPACE, ImageRefused, import_ray, probe_address

log = logging.getLogger(__name__)

# Beyond the call's own timeout: container start, the launcher's kill grace, a loaded node.
DEADLINE_MARGIN_S = 30.0
# How long a cancelled call waits for its worker to remove the call's container.
CANCEL_WAIT_S = 15.0
IMAGE_ID_ENV = "PROCTOR_RAY_IMAGE_ID"
_CONNECT_LOCK = threading.Lock()
_CONNECTIONS = 0  # open RaySandbox objects of this process that share its one Ray connection


@dataclass
class Worker:
    """The driver's view of one node's worker actor."""

    node_id: str
    handle: Any
    capacity: int
    info: dict[str, Any]
    in_flight: int = 0
    lost: bool = False
    served: int = 0

    @property
    def load(self) -> float:
        return self.in_flight / self.capacity


@dataclass
class RayStats:
    calls: int = 0
    rerun_calls: int = 0
    lost_attempts: list[dict[str, Any]] = field(default_factory=list)


def connect(address: str | None) -> bool:
    """Join the cluster once per process; True when this call made the connection."""
    ray = import_ray()
    global _CONNECTIONS
    with _CONNECT_LOCK:
        made = False
        if not ray.is_initialized():
            probe_address(address or os.environ.get("RAY_ADDRESS"))
            ray.init(
                address=address or "auto",
                namespace=NAMESPACE,
                log_to_driver=False,
                logging_level=logging.WARNING,
                configure_logging=False,
            )
            made = True
        _CONNECTIONS += 1
        return made


def disconnect() -> None:
    ray = import_ray()
    global _CONNECTIONS
    with _CONNECT_LOCK:
        _CONNECTIONS = max(0, _CONNECTIONS - 1)
        if _CONNECTIONS == 0 and ray.is_initialized():
            ray.shutdown()


def driver_image_id(image: str | None) -> tuple[str, str]:
    """(reference, ID) of the image this driver runs: its own engine's, or ``PROCTOR_RAY_IMAGE_ID``."""
    from proctor.sandbox.docker.image import image_tag

    pinned = os.environ.get(IMAGE_ID_ENV, "").strip()
    reference = image or image_tag()
    if pinned:
        return reference, pinned
    from proctor.sandbox.docker.backend import connect_engine, resolve_image

    try:
        client = connect_engine()
    except SandboxUnavailable as exc:
        raise SandboxUnavailable(
            f"the ray backend checks every node's image against the driver's, but {exc}: "
            f"start an engine with the image here, or set {IMAGE_ID_ENV}"
        ) from None
    try:
        return resolve_image(client, reference)
    finally:
        client.close()


def discover_workers(ray: Any) -> list[Worker]:
    """Every live worker actor of the cluster, with what it reports about its node."""
    workers = []
    for name in sorted(ray.util.list_named_actors(all_namespaces=False)):
        if not name.startswith(ACTOR_PREFIX):
            continue
        try:
            handle = ray.get_actor(name, namespace=NAMESPACE)
            info = ray.get(handle.describe.remote(), timeout=30)
        except Exception as exc:  # a dying worker: leave it out
            log.warning("ray backend: worker %s does not answer: %s", name, exc)
            continue
        workers.append(Worker(info["node_id"], handle, int(info["capacity"]), info))
    return workers


class RaySandbox:
    backend = "ray"

    def __init__(
        self,
        address: str | None,
        image: str,
        image_id: str,
        workers: list[Worker],
        refused: list[dict[str, str]],
        *,
        default_limits: Limits | None = None,
        deadline_margin_s: float = DEADLINE_MARGIN_S,
        auth: dict[str, Any] | None = None,
    ) -> None:
        self.address = address
        self.auth = auth or {}
        self.image = image
        self.image_id = image_id
        self.workers = workers
        self.refused = refused
        self.default_limits = default_limits or Limits()
        self.deadline_margin_s = deadline_margin_s
        self.stats = RayStats()
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------

    def available_cpus(self) -> int:
        """The calls the cluster takes at once: the sum of the serving workers' capacities."""
        return max(1, sum(w.capacity for w in self.workers if not w.lost))

    def describe(self) -> dict[str, Any]:
        from proctor.sandbox.docker.image import image_libraries

        # Every worker runs the docker backend with its default runtime; say which, or that
        # the nodes disagree (then no single runtime describes this sandbox).
        runtimes = {w.info.get("runtime") for w in self.workers}
        return {
            "backend": self.backend,
            "image": self.image,
            "image_id": self.image_id,
            "ray_address": self.address or "auto",
            # What the cluster said to a client without a token, and whether the user allowed an
            # open cluster (--ray-allow-unauthenticated): sandbox/ray/auth.py.
            "ray_auth": self.auth,
            "isolation": "container",
            # sandbox.isolation: every call a new sandbox (per-sample is docker's only).
            "call_isolation": "fresh",
            "isolates_less": False,
            "runtime": runtimes.pop() if len(runtimes) == 1 else None,
            "notes": [
                "every call runs in a fresh container of a worker node's docker backend "
                "(the docker backend's isolation, unchanged)",
                "every node's image ID equals the driver's, or its worker refuses to serve",
                "a call lost with its node or worker is re-run on another node and recorded "
                "(extra.ray.lost); timeouts and OOM are the program's results, never re-run",
            ],
            "limits": self.default_limits.__dict__,
            "libraries": image_libraries(self.image),
            "nodes": [
                {
                    "node_id": w.node_id,
                    "hostname": w.info.get("hostname"),
                    "docker_host": w.info.get("docker_host"),
                    "capacity": w.capacity,
                    "image_id": w.info.get("image_id"),
                    "host_cpus": w.info.get("host_cpus"),
                    "host_cpu_model": w.info.get("host_cpu_model"),
                    "boot_id": w.info.get("boot_id"),
                }
                for w in self.workers
            ],
            "refused_nodes": self.refused,
            "deadline_margin_s": self.deadline_margin_s,
        }

    async def settle(self, timeout: float = 60.0) -> bool:
        """Wait until every serving worker's pools are full and idle (benchmarks and tests)."""
        live = [w for w in self.workers if not w.lost]
        settled = await asyncio.gather(
            *(asyncio.wrap_future(w.handle.settle.remote(timeout).future()) for w in live)
        )
        return all(settled)

    def subset(self, count: int) -> RaySandbox:
        """A view that routes only to the first ``count`` serving workers (throughput by node count).

        It shares this sandbox's connection: close this one, not the view.
        """
        live = [w for w in self.workers if not w.lost][:count]
        return RaySandbox(
            self.address,
            self.image,
            self.image_id,
            live,
            [],
            default_limits=self.default_limits,
            deadline_margin_s=self.deadline_margin_s,
        )

    def on_node(self, node_id: str) -> RaySandbox:
        """A view that sends every call to the worker of ``node_id`` and never elsewhere (the
        audit checks each node in turn): a call it cannot run there, the worker lost included,
        fails with SandboxError rather than moving to another node.

        It shares this sandbox's connection: close this one, not the view.
        """
        chosen = [w for w in self.workers if w.node_id == node_id]
        if not chosen:
            raise SandboxUnavailable(f"no ray sandbox worker serves node {node_id}")
        return RaySandbox(
            self.address,
            self.image,
            self.image_id,
            chosen,
            [],
            default_limits=self.default_limits,
            deadline_margin_s=self.deadline_margin_s,
        )

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(disconnect)

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
            resolve_argv(code, argv, "python3")
        except InvalidProgram:
            raise  # the code's fault, reported to its author: not a sandbox failure
        except ValueError as exc:
            raise SandboxError(str(exc)) from exc
        self.stats.calls += 1
        lost: list[dict[str, Any]] = []
        failures: list[_Lost] = []
        tried: set[str] = set()
        while True:
            worker = self._pick(tried)
            if worker is None:
                where = "; ".join(f"{a['node'][:12]}: {a['reason']}" for a in lost) or "none serves"
                raise SandboxError(f"no ray sandbox worker could run this call ({where})")
            tried.add(worker.node_id)
            started = time.monotonic()
            try:
                result = await self._call(worker, code, argv, stdin, timeout, limits)
            except _Lost as exc:
                attempt = {"node": worker.node_id, "reason": str(exc), "after_s": time.monotonic() - started}
                lost.append(attempt)
                self.stats.lost_attempts.append(attempt)
                if (
                    isinstance(exc, _SandboxFailed)
                    and sum(isinstance(a, _SandboxFailed) for a in failures) >= 1
                ):
                    # A second live node's sandbox failed too: the program may be what breaks
                    # it, so it is not run on every node of the cluster; the caller is told.
                    raise SandboxError(str(exc)) from None
                failures.append(exc)
                log.warning("ray backend: call lost on node %s (%s); re-running", worker.node_id[:12], exc)
                continue
            if lost:
                self.stats.rerun_calls += 1
            result.backend = self.backend
            result.image = self.image
            ray_record = dict(result.extra.get("ray") or {})
            ray_record["lost"] = lost
            result.extra["ray"] = ray_record
            return result

    def _pick(self, tried: set[str]) -> Worker | None:
        live = [w for w in self.workers if not w.lost and w.node_id not in tried]
        if not live:
            return None
        return min(live, key=lambda w: (w.load, w.served))

    async def _call(
        self,
        worker: Worker,
        code: str | None,
        argv: Sequence[str] | None,
        stdin: str | bytes | None,
        timeout: float,
        limits: Limits | None,
    ) -> ExecResult:
        ray = import_ray()
        from ray import exceptions as rx

        worker.in_flight += 1
        worker.served += 1
        ref = worker.handle.exec.remote(
            self.image_id, self.default_limits, code, list(argv) if argv else None, stdin, timeout, limits
        )
        try:
            return await asyncio.wait_for(asyncio.wrap_future(ref.future()), timeout + self.deadline_margin_s)
        except TimeoutError:
            # No answer long after the program's own deadline: the node is as good as lost.
            worker.lost = True
            _cancel(ray, ref)
            raise _Lost(f"no answer within {timeout + self.deadline_margin_s:g} s") from None
        except rx.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, ImageRefused):
                # Nothing ran: the node's image changed under its worker. Never use it again.
                worker.lost = True
                self.refused.append({"node_id": worker.node_id, "reason": str(cause)})
                raise _Lost(str(cause)) from None
            if isinstance(cause, InvalidProgram):
                raise cause from None
            if isinstance(cause, SandboxError):
                # The node's sandbox failed (its engine, a container lost): tried elsewhere once.
                raise _SandboxFailed(f"the sandbox failed on that node: {cause}") from None
            raise SandboxError(f"the ray sandbox worker failed: {cause!r}") from None
        except (rx.RayActorError, rx.NodeDiedError, rx.OwnerDiedError, rx.WorkerCrashedError) as exc:
            worker.lost = True
            raise _Lost(_one_line(exc)) from None
        except asyncio.CancelledError:
            # As the docker backend does, a cancelled call returns only once its container is
            # gone: the worker's exec is cancelled in turn and awaits the removal (bounded, in
            # case the node went silent at the same moment).
            _cancel(ray, ref)
            if ray.is_initialized():
                await _settled(ref, CANCEL_WAIT_S)
            raise
        finally:
            worker.in_flight -= 1


async def _settled(ref: Any, within_s: float) -> None:
    """Wait until ``ref`` has an outcome, whatever it is, for at most ``within_s``."""
    outcome = asyncio.wrap_future(ref.future())
    await asyncio.wait({outcome}, timeout=within_s)
    if outcome.done() and not outcome.cancelled():
        outcome.exception()  # expected (the task was cancelled): retrieved, so never logged
    elif not outcome.done():
        outcome.cancel()


def _cancel(ray: Any, ref: Any) -> None:
    """Ask the worker to abandon a call (its container is removed); never starts Ray by itself."""
    if ray.is_initialized():
        with contextlib.suppress(Exception):
            ray.cancel(ref)


class _Lost(Exception):
    """The call was lost to infrastructure; nothing of it is the program's result."""


class _SandboxFailed(_Lost):
    """A live node's sandbox could not run the call (SandboxError there)."""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


async def open_ray_sandbox(
    *,
    address: str | None = None,
    image: str | None = None,
    default_limits: Limits | None = None,
    image_id: str | None = None,
    allow_unauthenticated: bool = False,
) -> RaySandbox:
    """Join the cluster, find the workers, keep those whose image matches the driver's.

    A cluster that serves a client without a token is refused unless ``allow_unauthenticated``
    (sandbox/ray/auth.py): anyone who reaches such a cluster can run code beside its workers.
    """
    ray = import_ray()
    if not ray.is_initialized():
        probe_address(address or os.environ.get("RAY_ADDRESS"))
    auth = await asyncio.to_thread(require_token_auth, address, allow_unauthenticated)
    if image_id is None:
        reference, expected_id = await asyncio.to_thread(driver_image_id, image)
    else:
        from proctor.sandbox.docker.image import image_tag

        reference, expected_id = image or image_tag(), image_id
    try:
        # On this thread: ray.init installs its signal handlers only from the main thread.
        connect(address)
    except SandboxUnavailable:
        raise
    except Exception as exc:
        hint = f" ({TOKEN_HINT} in this process too)" if auth.get("requires_token") else ""
        raise SandboxUnavailable(
            f"cannot join the Ray cluster at {address or 'auto'}: {_one_line(exc)}{hint}"
        ) from None
    try:
        found = await asyncio.to_thread(discover_workers, ray)
        workers, refused = [], []
        for worker in found:
            if worker.info.get("image_id") == expected_id:
                workers.append(worker)
            else:
                refused.append(
                    {
                        "node_id": worker.node_id,
                        "reason": f"image {worker.info.get('image')} is {worker.info.get('image_id')} "
                        f"there, the driver runs {expected_id}",
                    }
                )
                log.warning("ray backend: node %s refused: its image differs", worker.node_id[:12])
        if not workers:
            why = "; ".join(f"{r['node_id'][:12]}: {r['reason']}" for r in refused)
            raise SandboxUnavailable(
                "no ray sandbox worker serves the driver's image "
                + (f"({why})" if why else "(start one per node: proctor sandbox worker --address ADDR)")
            )
    except BaseException:
        await asyncio.to_thread(disconnect)
        raise
    return RaySandbox(
        address, reference, expected_id, workers, refused, default_limits=default_limits, auth=auth
    )
