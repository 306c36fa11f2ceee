"""`proctor bench sandbox --runtimes runc,runsc`: what each container runtime costs, side by side.

Each runtime gets its own warm pool and its own per-call sandbox, all open at once, and every
round times one call of each kind under every runtime in turn, so the machine's load (this
machine is shared) falls on all runtimes alike. Figures:

* warm pool ``print(1)`` and a new container per call, as in the main benchmark (call latency);
* ``import galois`` in a warm container (call latency);
* two system-call-heavy loops, timed inside the program (``os.stat`` of one path 20,000 times;
  open/write/close of a small file 5,000 times): gVisor intercepts every system call;
* the memory the host charges to one idle warm container (its memory cgroup), sampled while
  the pool waits: gVisor's sentry and gofer are in that cgroup.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from proctor.sandbox.api import SandboxError
from proctor.sandbox.bench.calls import IMPORT_GALOIS, PRINT_ONE, docker_spec, open_backend, percentile
from proctor.sandbox.docker import labels
from proctor.sandbox.docker.backend import DockerSandbox

STAT_LOOP = (
    "import os, time\nt = time.perf_counter()\n"
    "for _ in range(20000):\n    os.stat('/work')\nprint(time.perf_counter() - t)\n"
)
FILE_LOOP = (
    "import os, time\nt = time.perf_counter()\nfor _ in range(5000):\n"
    "    fd = os.open('/tmp/x', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
    "    os.write(fd, b'x')\n    os.close(fd)\nprint(time.perf_counter() - t)\n"
)
_HEAVY_CALLS_MAX = 10
_MEMORY_SAMPLES = 5


async def _latency(sandbox: DockerSandbox, code: str, expected: str, settle: bool) -> float:
    if settle:
        await sandbox.settle()
    started = time.perf_counter()
    result = await sandbox.exec(code, timeout=120)
    elapsed = time.perf_counter() - started
    if result.exit_code != 0 or result.stdout != expected:
        raise SandboxError(
            f"benchmark call misbehaved: exit {result.exit_code}, stderr {result.stderr[-300:]!r}"
        )
    return elapsed


async def _inside(sandbox: DockerSandbox, code: str) -> float:
    await sandbox.settle()
    result = await sandbox.exec(code, timeout=120)
    if result.exit_code != 0:
        raise SandboxError(
            f"benchmark call misbehaved: exit {result.exit_code}, stderr {result.stderr[-300:]!r}"
        )
    return float(result.stdout)


def _idle_pool_memory(sandbox: DockerSandbox) -> list[float]:
    """MiB the host charges to each of this sandbox's idle warm containers (cgroup v1 or v2)."""
    pool = sandbox.api.containers(
        filters={"label": [labels.LABEL_FILTER, f"{labels.RUN_ID}={sandbox.run_id}", f"{labels.ROLE}=pool"]}
    )
    found = []
    for summary in pool:
        container_id = summary["Id"]
        for path in (
            Path(f"/sys/fs/cgroup/memory/docker/{container_id}/memory.usage_in_bytes"),
            Path(f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/memory.current"),
        ):
            try:
                found.append(int(path.read_text()) / (1024 * 1024))
                break
            except (OSError, ValueError):
                continue
    return found


async def run_runtime_comparison(
    runtimes: list[str], calls: int = 20, image: str | None = None
) -> dict[str, Any]:
    """Interleaved figures for every runtime; SandboxUnavailable when one cannot be opened."""
    pooled: dict[str, DockerSandbox] = {}
    per_call: dict[str, DockerSandbox] = {}
    samples: dict[tuple[str, str], list[float]] = {}
    try:
        for runtime in runtimes:
            pooled[runtime] = await open_backend(docker_spec(image, 2, runtime), DockerSandbox)
            per_call[runtime] = await open_backend(docker_spec(image, 0, runtime), DockerSandbox)
        for runtime in runtimes:  # warm-up: page cache, image layers, first connections
            await _latency(pooled[runtime], PRINT_ONE, "1\n", settle=True)
            await _latency(per_call[runtime], PRINT_ONE, "1\n", settle=True)

        def add(runtime: str, way: str, value: float) -> None:
            samples.setdefault((runtime, way), []).append(value)

        for round_index in range(calls):
            heavy = round_index < min(calls, _HEAVY_CALLS_MAX)
            for runtime in runtimes:
                warm, fresh = pooled[runtime], per_call[runtime]
                add(runtime, "warm pool: print(1) (ms)", await _latency(warm, PRINT_ONE, "1\n", True) * 1000)
                add(
                    runtime,
                    "new container per call: print(1) (ms)",
                    await _latency(fresh, PRINT_ONE, "1\n", True) * 1000,
                )
                if heavy:
                    add(
                        runtime,
                        "warm pool: import galois (ms)",
                        await _latency(warm, IMPORT_GALOIS, "", True) * 1000,
                    )
                    add(runtime, "os.stat x20,000, inside (ms)", await _inside(warm, STAT_LOOP) * 1000)
                    add(
                        runtime, "open/write/close x5,000, inside (ms)", await _inside(warm, FILE_LOOP) * 1000
                    )
                if round_index < _MEMORY_SAMPLES:
                    await warm.settle()
                    for mib in await asyncio.to_thread(_idle_pool_memory, warm):
                        add(runtime, "idle warm container memory (MiB)", mib)
        described = {runtime: pooled[runtime].describe() for runtime in runtimes}
    finally:
        for sandbox in [*pooled.values(), *per_call.values()]:
            await sandbox.aclose()
    first = described[runtimes[0]]
    return {
        "calls": calls,
        "image": first["image"],
        "image_id": first["image_id"],
        "runtimes": {
            runtime: {key: described[runtime].get(key) for key in ("engine", "runtime_version")}
            for runtime in runtimes
        },
        "machine": {"cpus": os.cpu_count(), "load_average_1m": os.getloadavg()[0]},
        "rows": [
            {
                "runtime": runtime,
                "way": way,
                "samples": len(values),
                "p50": round(percentile(values, 0.5), 1),
                "p95": round(percentile(values, 0.95), 1),
            }
            for (runtime, way), values in samples.items()
        ],
    }


def print_comparison(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    runtimes = list(report["runtimes"])
    table = Table(title=f"proctor bench sandbox --runtimes {','.join(runtimes)} ({report['calls']} rounds)")
    table.add_column("way")
    for runtime in runtimes:
        table.add_column(f"{runtime} p50", justify="right")
        table.add_column(f"{runtime} p95", justify="right")
    ways: dict[str, dict[str, dict[str, Any]]] = {}
    for row in report["rows"]:
        ways.setdefault(row["way"], {})[row["runtime"]] = row
    for way, by_runtime in ways.items():
        cells = []
        for runtime in runtimes:
            row = by_runtime.get(runtime)
            cells += [f"{row['p50']:.1f}", f"{row['p95']:.1f}"] if row else ["-", "-"]
        table.add_row(way, *cells)
    console = Console()
    console.print(table)
    for runtime, where in report["runtimes"].items():
        console.print(
            f"{runtime}: engine {where['engine']}"
            + (f", {where['runtime_version']}" if where["runtime_version"] else "")
        )
    machine = report["machine"]
    console.print(f"{machine['cpus']} CPUs, load average {machine['load_average_1m']:.2f} at the end")
