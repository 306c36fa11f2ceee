"""`proctor bench sandbox --backend ray`: what routing a call through Ray adds, and throughput by nodes.

In one run: the local docker backend's warm-pool call and the same call through the ray
backend (both measured warm: each timed call waits until the pools are full and idle), so
the difference at p50 is Ray's overhead; an empty actor call (no sandbox) is the routing
floor. Then throughput: a burst of calls through the first 1, 2, ... N worker nodes, each at
the concurrency those nodes advertise. On one machine the nodes share its cores, so this shows
that scheduling spreads the load, not a real speed-up.
"""

from __future__ import annotations

import asyncio
import os
import platform
import time
from typing import Any

from proctor.sandbox.api import SandboxError
from proctor.sandbox.bench.calls import (
    PRINT_ONE,
    _checked,
    _time_calls,
    docker_spec,
    open_backend,
    percentile,
)
from proctor.sandbox.docker.backend import DockerSandbox
from proctor.sandbox.ray.backend import RaySandbox
from proctor.sandbox.spec import SandboxSpec

BURST_PER_SLOT = 8


def _row(way: str, samples: list[float]) -> dict[str, Any]:
    return {
        "way": way,
        "calls": len(samples),
        "p50_ms": round(percentile(samples, 0.5) * 1000, 1),
        "p95_ms": round(percentile(samples, 0.95) * 1000, 1),
    }


async def _burst(sandbox: RaySandbox, calls: int, concurrency: int) -> float:
    """Calls per second for ``calls`` print(1) calls with at most ``concurrency`` in flight."""
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            _checked(await sandbox.exec(PRINT_ONE, timeout=60), "1\n")

    await sandbox.settle()
    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(calls)))
    return calls / (time.perf_counter() - started)


def _same_engine(remote: RaySandbox) -> RaySandbox:
    """A view on the worker whose engine is this process's own, when one is (a fair comparison)."""
    here = os.environ.get("DOCKER_HOST") or "default"
    for index, worker in enumerate(remote.workers):
        if worker.info.get("docker_host") == here:
            return RaySandbox(
                remote.address,
                remote.image,
                remote.image_id,
                [remote.workers[index]],
                [],
                default_limits=remote.default_limits,
            )
    return remote.subset(1)


async def run_ray_benchmark(
    calls: int = 30, address: str | None = None, image: str | None = None
) -> dict[str, Any]:
    """Raises SandboxUnavailable when docker, the image, the cluster or its workers are missing.

    The docker and ray calls alternate, each after both sandboxes have settled, so that a
    machine whose load drifts during the run weighs on both alike; the added cost is also
    given as the median of the per-pair differences.
    """
    local = await open_backend(docker_spec(image, pool_size=2), DockerSandbox)
    remote: RaySandbox | None = None
    try:
        remote = await open_backend(SandboxSpec(backend="ray", ray_address=address, image=image), RaySandbox)
        paired = _same_engine(remote)

        async def settle_both() -> None:
            await asyncio.gather(local.settle(), paired.settle())

        async def timed(sandbox: Any, outside: list[float] | None = None) -> float:
            await settle_both()
            started = time.perf_counter()
            result = await sandbox.exec(PRINT_ONE, timeout=60)
            elapsed = time.perf_counter() - started
            _checked(result, "1\n")
            if outside is not None:
                # What the call cost beyond the program's run in its container (the launcher's
                # own clock): the part routing can add to, with the program's noise taken out.
                outside.append(elapsed - result.duration_s)
            return elapsed

        await timed(local)
        await timed(paired)  # warm-up: first connection, page cache
        docker_samples, ray_samples = [], []
        docker_outside: list[float] = []
        ray_outside: list[float] = []
        for _ in range(calls):
            docker_samples.append(await timed(local, docker_outside))
            ray_samples.append(await timed(paired, ray_outside))
        differences = [r - d for r, d in zip(ray_samples, docker_samples, strict=True)]

        first = paired.workers[0]

        async def ping() -> None:
            if await asyncio.wrap_future(first.handle.ping.remote().future()) != first.node_id:
                raise SandboxError("the worker answered for another node")

        ping_samples = await _time_calls(calls, ping)
        await local.aclose()

        throughput = []
        for count in range(1, len(remote.workers) + 1):
            view = remote.subset(count)
            slots = sum(w.capacity for w in view.workers)
            burst = BURST_PER_SLOT * slots
            per_s = await _burst(view, burst, slots)
            throughput.append(
                {"nodes": count, "concurrency": slots, "calls": burst, "calls_per_s": round(per_s, 2)}
            )
        nodes = remote.describe()["nodes"]
    finally:
        await local.aclose()
        if remote is not None:
            await remote.aclose()

    return {
        "calls": calls,
        "image": remote.image,
        "image_id": remote.image_id,
        "nodes": nodes,
        "compared_on_engine": first.info.get("docker_host"),
        "rows": [
            _row("docker (this machine): warm pool", docker_samples),
            _row("ray: warm pool, worker on the same engine", ray_samples),
            _row("ray: empty actor call (routing floor)", ping_samples),
            _row("docker: beyond the program's run", docker_outside),
            _row("ray: beyond the program's run", ray_outside),
        ],
        "added_outside_run_p50_ms": round(
            (percentile(ray_outside, 0.5) - percentile(docker_outside, 0.5)) * 1000, 1
        ),
        "added_p50_ms": round((percentile(ray_samples, 0.5) - percentile(docker_samples, 0.5)) * 1000, 1),
        "added_p95_ms": round((percentile(ray_samples, 0.95) - percentile(docker_samples, 0.95)) * 1000, 1),
        "added_median_of_pairs_ms": round(percentile(differences, 0.5) * 1000, 1),
        "throughput": throughput,
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_1m": os.getloadavg()[0],
            "python": platform.python_version(),
        },
    }


def print_ray_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    latency = Table(
        title=f"proctor bench sandbox --backend ray ({report['calls']} calls; image {report['image']})"
    )
    for column in ("way", "calls", "p50 ms", "p95 ms"):
        latency.add_column(column, justify="left" if column == "way" else "right")
    for row in report["rows"]:
        latency.add_row(row["way"], str(row["calls"]), f"{row['p50_ms']:.1f}", f"{row['p95_ms']:.1f}")
    console.print(latency)
    console.print(
        f"added by ray: p50 {report['added_p50_ms']:+.1f} ms, p95 {report['added_p95_ms']:+.1f} ms, "
        f"median of paired differences {report['added_median_of_pairs_ms']:+.1f} ms, "
        f"beyond the program's run p50 {report['added_outside_run_p50_ms']:+.1f} ms "
        f"(engine {report['compared_on_engine']})"
    )
    burst = Table(title="throughput: print(1) bursts through the first N worker nodes")
    for column in ("nodes", "concurrency", "calls", "calls/s"):
        burst.add_column(column, justify="right")
    for row in report["throughput"]:
        burst.add_row(
            str(row["nodes"]), str(row["concurrency"]), str(row["calls"]), f"{row['calls_per_s']:.1f}"
        )
    console.print(burst)
    machine = report["machine"]
    console.print(
        f"{machine['cpus']} CPUs, load average {machine['load_average_1m']:.2f} at the end, "
        f"Python {machine['python']}; {len(report['nodes'])} worker node(s)"
    )
