"""`proctor bench sandbox`: what a stateless call costs, each way it can be made.

Every figure is wall-clock latency of one complete call as the caller sees it, from the
request to the returned result. "Warm" rows wait, before each timed call, until the pool
is full and the previous container's removal has finished: that is the latency an agent
sees between model turns. The back-to-back row does not wait, so it shows what a burst of
calls costs when refills and removals compete with the call for the two cores.
"""

from __future__ import annotations

import asyncio
import math
import os
import platform
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from proctor.sandbox.api import DOCKER_PATH, ExecResult, SandboxError
from proctor.sandbox.docker.backend import DockerSandbox
from proctor.sandbox.local.backend import LocalSandbox
from proctor.sandbox.registry import opener_for
from proctor.sandbox.spec import SandboxSpec

BackendT = TypeVar("BackendT")

PRINT_ONE = "print(1)"
IMPORT_LIBS = "import galois, sympy"
# The target (<= 0.6 s p50 on a quiet machine) is for galois alone, measured beside sympy.
IMPORT_GALOIS = "import galois"
IMPORT_SYMPY = "import sympy"
# Diagnosis only, never what a program gets: with the objects galois and numba made frozen out
# of the collector's reach, the whole call shows how much of it is the interpreter's final
# garbage collections.
IMPORT_GALOIS_FROZEN = "import galois, gc; gc.freeze()"
_IMPORT_CALLS_MAX = 10
# The real interpreter, not a version-manager shim (pyenv's is a bash script: ~100 ms).
HOST_PYTHON = os.path.realpath(sys.executable)


def percentile(samples: list[float], fraction: float) -> float:
    """Nearest-rank percentile: an observed value, never an interpolation between two."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


async def _time_calls(
    calls: int, call: Callable[[], Awaitable[None]], before: Callable[[], Awaitable[Any]] | None = None
) -> list[float]:
    await call()  # warm-up: page cache, image layers, first connection
    samples = []
    for _ in range(calls):
        if before is not None:
            await before()
        started = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - started)
    return samples


async def _time_alternating(
    calls: int, contenders: dict[str, Callable[[], Awaitable[None]]], before: Callable[[], Awaitable[Any]]
) -> dict[str, list[float]]:
    """Time each contender in turn, round after round, so the machine's load falls on all alike."""
    for call in contenders.values():
        await call()  # warm-up, as in _time_calls
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(calls):
        for name, call in contenders.items():
            await before()
            started = time.perf_counter()
            await call()
            samples[name].append(time.perf_counter() - started)
    return samples


def _checked(result: ExecResult, expected_stdout: str) -> None:
    if result.exit_code != 0 or result.stdout != expected_stdout:
        raise SandboxError(f"benchmark call misbehaved: exit {result.exit_code}, stderr {result.stderr!r}")


async def _host_python_once(python: str) -> None:
    process = await asyncio.create_subprocess_exec(
        python, "-c", PRINT_ONE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, _ = await process.communicate()
    if process.returncode != 0 or stdout != b"1\n":
        raise SandboxError("host python3 -c 'print(1)' failed")


def _sandbox_call(
    sandbox: DockerSandbox | LocalSandbox, code: str, expected: str
) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        _checked(await sandbox.exec(code, timeout=60), expected)

    return call


async def open_backend(spec: SandboxSpec, kind: type[BackendT]) -> BackendT:
    """The backend ``spec`` names, opened by its registered opener like every sandbox, but without
    open_sandbox's process-wide bound: a bench measures the backend itself."""
    sandbox = await opener_for(spec.backend)(spec)
    if not isinstance(sandbox, kind):
        await sandbox.aclose()
        raise TypeError(f"backend {spec.backend} opened a {type(sandbox).__name__}, not a {kind.__name__}")
    return sandbox


def docker_spec(image: str | None, pool_size: int, runtime: str = "runc") -> SandboxSpec:
    """A docker sandbox on the engine's path (what the benches measure; never runc-direct)."""
    return SandboxSpec(
        backend="docker", image=image, pool_size=pool_size, runtime=runtime, engine_path=DOCKER_PATH
    )


async def run_benchmark(calls: int = 30, image: str | None = None) -> dict[str, Any]:
    """Measure every way; raises SandboxUnavailable when docker or the image is missing."""
    rows: dict[str, list[float]] = {}
    host_python = HOST_PYTHON
    rows["host python3 -c (floor)"] = await _time_calls(calls, lambda: _host_python_once(host_python))

    local = await open_backend(SandboxSpec(backend="local", probe_libraries=False), LocalSandbox)
    rows["local backend"] = await _time_calls(calls, _sandbox_call(local, PRINT_ONE, "1\n"))

    per_call = await open_backend(docker_spec(image, pool_size=0), DockerSandbox)
    try:
        rows["docker: new container per call"] = await _time_calls(
            calls, _sandbox_call(per_call, PRINT_ONE, "1\n"), before=per_call.settle
        )
    finally:
        await per_call.aclose()

    pooled = await open_backend(docker_spec(image, pool_size=2), DockerSandbox)
    try:
        rows["docker: warm pool"] = await _time_calls(
            calls, _sandbox_call(pooled, PRINT_ONE, "1\n"), before=pooled.settle
        )
        rows["docker: warm pool, back-to-back"] = await _time_calls(
            calls, _sandbox_call(pooled, PRINT_ONE, "1\n")
        )
        imports = await _time_alternating(
            min(calls, _IMPORT_CALLS_MAX),
            {
                "docker: warm pool, import galois": _sandbox_call(pooled, IMPORT_GALOIS, ""),
                "docker: warm pool, import sympy": _sandbox_call(pooled, IMPORT_SYMPY, ""),
                "docker: warm pool, import galois + gc.freeze() (diagnosis)": _sandbox_call(
                    pooled, IMPORT_GALOIS_FROZEN, ""
                ),
            },
            before=pooled.settle,
        )
        rows.update(imports)
        rows["docker: warm pool, import galois, sympy"] = await _time_calls(
            min(calls, _IMPORT_CALLS_MAX), _sandbox_call(pooled, IMPORT_LIBS, ""), before=pooled.settle
        )
        description = pooled.describe()
    finally:
        await pooled.aclose()

    floor = percentile(rows["host python3 -c (floor)"], 0.5)
    return {
        "calls": calls,
        "image": description["image"],
        "image_id": description["image_id"],
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_1m": os.getloadavg()[0],
            "python": platform.python_version(),
            "host_python": host_python,
        },
        "rows": [
            {
                "way": way,
                "calls": len(samples),
                "p50_ms": round(percentile(samples, 0.5) * 1000, 1),
                "p95_ms": round(percentile(samples, 0.95) * 1000, 1),
                "p50_vs_floor": round(percentile(samples, 0.5) / floor, 1),
            }
            for way, samples in rows.items()
        ],
    }


def print_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"proctor bench sandbox ({report['calls']} calls; image {report['image']})")
    for column in ("way", "calls", "p50 ms", "p95 ms", "p50 / floor"):
        table.add_column(column, justify="left" if column == "way" else "right")
    for row in report["rows"]:
        table.add_row(
            row["way"],
            str(row["calls"]),
            f"{row['p50_ms']:.1f}",
            f"{row['p95_ms']:.1f}",
            f"{row['p50_vs_floor']:.1f}x",
        )
    console = Console()
    console.print(table)
    machine = report["machine"]
    console.print(
        f"{machine['cpus']} CPUs, load average {machine['load_average_1m']:.2f} at the end, "
        f"Python {machine['python']}"
    )
