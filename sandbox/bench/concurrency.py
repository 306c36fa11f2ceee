"""`proctor bench sandbox --concurrency 1,4,16`: the pool on each engine path against the engine.

C callers each make ``calls`` back-to-back calls of the same program; every contender uses the
same image and the same limits. The contenders take turns within each round (their order
rotates between rounds), so a burst of load from elsewhere on the machine is spread over all of
them, and each figure is reported with its spread over the rounds. Machine CPU per call is the
whole machine's busy time (/proc/stat) over the round divided by its calls: on a shared
machine it includes others' work, so compare ways within one run only.

- pool (docker): the sandbox an agent run uses (``open_sandbox("docker")``, warm pool, fresh
  container per call, the process-wide execution slots), every caller its own
  :func:`execution_caller`; stateless.
- pool (runc-direct): the same, each container started by runc from the engine's own spec
  (sandbox/docker/oci_direct.py); stateless. Measured only where it can run (root, runc).
- per-sample: the docker pool with ``isolation: per-sample``: each caller reuses its own reset
  container (residual counters, docs/sandbox.md).
- engine floor: a bare docker-SDK client, create, start, wait, logs, remove per call, with the
  pool's limits and nothing of Proctor's; stateless.
- docker run: ``docker run --rm -i`` per call, a new container each time; stateless.
- docker exec: ``docker exec -i`` into one long-lived container per caller, the way Inspect
  AI's docker sandbox runs; stateful (files and processes persist between calls).

Per-caller set-up is outside the timing: the exec way's long-lived containers, and one warm-up
call per caller through each pool (per-sample's own containers, runc-direct's spec and root).
The pools run as many calls at once as there are callers (the execution slots follow each caller
count, as ``docker run`` and ``docker exec`` are not bounded either) unless
``max_concurrent_executions`` fixes them.

Each way's CPU per call is also split by part with process accounting (sandbox/bench/cpu_parts.py):
this controller, the docker CLI, the engine, runc, the container's init, Proctor's launcher, the
image's prepare step and the program. CPU figures are read once the pools have replaced (and
removed) the containers a round used, so a pooled way pays for every container it served.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import docker

from proctor.sandbox.api import DOCKER_PATH, FRESH, PER_SAMPLE, RUNC_DIRECT, Limits, SandboxError
from proctor.sandbox.bench.calls import percentile
from proctor.sandbox.bench.cpu_parts import PARTS, ContainerTally, Reading, Seen, per_call_ms
from proctor.sandbox.factory import open_sandbox
from proctor.sandbox.slots import execution_caller, process_slots
from proctor.sandbox.spec import SandboxSpec

PROGRAMS = {"print(1)": "1\n", "print(sum(range(10**7)))": "49999995000000\n"}
POOL_DOCKER = "pool (docker)"
POOL_DIRECT = "pool (runc-direct)"
PER_SAMPLE_WAY = "per-sample"
ENGINE_FLOOR = "engine floor"
POOL_WAYS = (POOL_DOCKER, POOL_DIRECT, PER_SAMPLE_WAY)
CONTENDERS = (*POOL_WAYS, ENGINE_FLOOR, "docker exec", "docker run")


def controller_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _lockdown_flags(limits: Limits, user: str) -> list[str]:
    """The pool's container settings, as `docker run` flags, so every contender pays the same."""
    tmpfs = f"rw,nosuid,nodev,size={limits.tmpfs_bytes}"
    return [
        "--network=none",
        "--read-only",
        f"--tmpfs=/tmp:{tmpfs},mode=1777",
        f"--tmpfs=/work:{tmpfs},mode=1777",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        "--init",
        f"--pids-limit={limits.pids}",
        f"--memory={limits.memory_bytes}",
        f"--memory-swap={limits.memory_bytes}",
        f"--cpus={limits.cpus}",
        "--ipc=private",
        "--log-driver=none",
        f"--user={user}",
        "--workdir=/work",
    ]


async def _docker_cli(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        "docker",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    text = out.decode("utf-8", "replace")
    if process.returncode != 0:
        raise SandboxError(f"docker {args[0]} failed: {err.decode('utf-8', 'replace').strip()[:300]}")
    return process.returncode or 0, text


async def _run_round(
    concurrency: int, calls: int, call: Callable[[int], Awaitable[str]], expected: str
) -> tuple[float, list[float]]:
    """(calls per second, latencies) of ``concurrency`` callers making ``calls`` calls each."""
    latencies: list[float] = []

    async def caller(index: int) -> None:
        for _ in range(calls):
            started = time.perf_counter()
            output = await call(index)
            latencies.append(time.perf_counter() - started)
            if output != expected:
                raise SandboxError(f"benchmark call misbehaved: printed {output[:200]!r}")

    started = time.perf_counter()
    await asyncio.gather(*(caller(index) for index in range(concurrency)))
    return concurrency * calls / (time.perf_counter() - started), latencies


async def run_concurrency_benchmark(
    concurrencies: list[int],
    calls: int = 5,
    rounds: int = 2,
    image: str | None = None,
    max_concurrent_executions: int | None = None,
    engine_paths: tuple[str, ...] = (DOCKER_PATH, RUNC_DIRECT),
) -> dict[str, Any]:
    """Measure every contender at every concurrency; SandboxUnavailable without docker or image.
    ``engine_paths``: the pool's paths to measure (runc-direct needs root on the engine's host)."""
    rss_before = controller_rss_mib()
    pools: dict[str, Any] = {}
    for way, path, isolation in (
        (POOL_DOCKER, DOCKER_PATH, FRESH),
        (POOL_DIRECT, RUNC_DIRECT, FRESH),
        (PER_SAMPLE_WAY, DOCKER_PATH, PER_SAMPLE),
    ):
        if path not in engine_paths:
            continue
        pools[way] = await open_sandbox(
            SandboxSpec(
                backend="docker",
                image=image,
                pool_size=2,
                probe_libraries=False,
                max_concurrent_executions=max_concurrent_executions,
                isolation=isolation,
                engine_path=path,
            )
        )
    contenders = tuple(way for way in CONTENDERS if way in pools or way not in POOL_WAYS)
    seen: dict[str, Seen] = {way: {} for way in pools}
    description = next(iter(pools.values())).describe()
    limits = Limits()
    user = description["user"]
    image_ref = description["image_id"]
    flags = _lockdown_flags(limits, user)
    tag = secrets.token_hex(4)
    long_lived: list[str] = []
    results: list[dict[str, Any]] = []
    rss_peak = controller_rss_mib()
    floor = docker.APIClient(timeout=300)
    try:
        for concurrency in concurrencies:
            if max_concurrent_executions is None:
                # As many calls at once as there are callers, as docker run and docker exec get:
                # the pools are then bounded by the same thing (the machine), not by slots.
                process_slots(concurrency)
            while len(long_lived) < concurrency:
                _, out = await _docker_cli(
                    "run", "-d", f"--name=proctor-bench-{tag}-{len(long_lived)}", "--label=proctor.bench=1",
                    *flags, image_ref, "sleep", "infinity",
                )  # fmt: skip
                long_lived.append(out.strip())
            for program, expected in PROGRAMS.items():
                tallies: dict[str, ContainerTally] = {way: ContainerTally(seen[way]) for way in pools}
                ways: dict[str, Callable[[int], Awaitable[str]]] = {
                    way: _pooled(box, program, tallies, way) for way, box in pools.items()
                }

                async def run(index: int, program: str = program) -> str:
                    return (
                        await _docker_cli(
                            "run", "--rm", "-i", *flags, image_ref, "python3", "-I", "-c", program
                        )
                    )[1]

                async def exec_(index: int, program: str = program) -> str:
                    argv = ["exec", "-i", f"--user={user}", long_lived[index], "python3", "-I", "-c", program]
                    return (await _docker_cli(*argv))[1]

                async def engine_floor(index: int, program: str = program) -> str:
                    return await asyncio.to_thread(_floor_call, floor, image_ref, limits, user, program)

                ways.update({ENGINE_FLOOR: engine_floor, "docker exec": exec_, "docker run": run})
                rates: dict[str, list[float]] = {way: [] for way in contenders}
                latencies: dict[str, list[float]] = {way: [] for way in contenders}
                cpu: dict[str, list[float]] = {way: [] for way in contenders}
                parts: dict[str, list[dict[str, float | None]]] = {way: [] for way in contenders}
                # Warm-up, one call per caller and pool: the page cache, the first connection,
                # the runc-direct spec and root, and each caller's own per-sample container, as
                # the exec way's long-lived container per caller is made before its timing too.
                for way in pools:
                    await asyncio.gather(*(ways[way](index) for index in range(concurrency)))
                for round_index in range(rounds):
                    shift = round_index % len(contenders)
                    order = contenders[shift:] + contenders[:shift]
                    for way in order:
                        for box in pools.values():
                            await box.settle()
                        tallies.update({name: ContainerTally(seen[name]) for name in pools})
                        busy_before = machine_busy_s()
                        reading = Reading.now(long_lived if way == "docker exec" else ())
                        rate, samples = await _run_round(concurrency, calls, ways[way], expected)
                        # CPU is read once the pool has replaced what the round used (and removed
                        # it): a pooled way pays for as many containers as it served.
                        for box in pools.values():
                            await box.settle()
                        after = Reading.now(long_lived if way == "docker exec" else ())
                        cpu[way].append((machine_busy_s() - busy_before) / (concurrency * calls))
                        parts[way].append(per_call_ms(reading, after, concurrency * calls, tallies.get(way)))
                        rates[way].append(rate)
                        latencies[way].extend(samples)
                        rss_peak = max(rss_peak, controller_rss_mib())
                results.append(_summarize(program, concurrency, contenders, rates, latencies, cpu, parts))
                results[-1]["execution_slots"] = next(iter(pools.values())).slots.capacity
                # Progress on stderr: a long run on a shared machine shows what it has so far.
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    finally:
        floor.close()
        for box in pools.values():
            await box.aclose()
        for container_id in long_lived:
            with contextlib.suppress(SandboxError):
                await _docker_cli("rm", "-f", container_id)
    return {
        "image": description["image"],
        "calls_per_caller": calls,
        "rounds": rounds,
        "contenders": list(contenders),
        # None: each caller count's own (as many calls at once as callers).
        "max_concurrent_executions": max_concurrent_executions,
        "controller_rss_mib": {
            "before": round(rss_before, 1),
            "peak": round(rss_peak, 1),
            "after": round(controller_rss_mib(), 1),
        },
        "machine": {"cpus": os.cpu_count(), "load_average_1m": round(os.getloadavg()[0], 2)},
        "results": results,
    }


def _pooled(
    box: Any, program: str, tallies: dict[str, ContainerTally], way: str
) -> Callable[[int], Awaitable[str]]:
    async def call(index: int) -> str:
        # Every caller is a sample of its own: per-sample keeps one container per caller.
        with execution_caller(("bench", index)):
            result = await box.exec(program, timeout=120)
        tallies[way].add(result.extra)
        return str(result.stdout)

    return call


def machine_busy_s() -> float:
    """Seconds of CPU the whole machine spent busy (every state of /proc/stat's first line but
    idle and iowait): other processes' work included, so figures compare within one run."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    values = [int(value) for value in fields[:8]]
    busy = sum(values) - values[3] - values[4]
    return busy / os.sysconf("SC_CLK_TCK")


def _floor_call(api: docker.APIClient, image: str, limits: Limits, user: str, program: str) -> str:
    """The engine's floor: one container through the bare SDK (create, start, wait, logs,
    remove) with the pool's limits, and nothing of Proctor's."""
    tmpfs = f"rw,nosuid,nodev,size={limits.tmpfs_bytes},mode=1777"
    host_config = api.create_host_config(
        network_mode="none",
        read_only=True,
        tmpfs={"/tmp": tmpfs, "/work": tmpfs},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        init=True,
        pids_limit=limits.pids,
        mem_limit=limits.memory_bytes,
        memswap_limit=limits.memory_bytes,
        nano_cpus=int(limits.cpus * 1e9),
        ipc_mode="private",
    )
    created = api.create_container(
        image,
        ["python3", "-I", "-c", program],
        user=user,
        working_dir="/work",
        labels={"proctor.bench": "1"},
        host_config=host_config,
        network_disabled=True,
    )
    try:
        api.start(created["Id"])
        api.wait(created["Id"], timeout=120)
        return str(api.logs(created["Id"], stdout=True, stderr=False).decode("utf-8", "replace"))
    finally:
        api.remove_container(created["Id"], force=True)


def _summarize(
    program: str,
    concurrency: int,
    contenders: tuple[str, ...],
    rates: dict[str, list[float]],
    latencies: dict[str, list[float]],
    cpu: dict[str, list[float]],
    parts: dict[str, list[dict[str, float | None]]],
) -> dict[str, Any]:
    ways: dict[str, dict[str, Any]] = {
        way: {
            "calls_per_s": round(statistics.median(rates[way]), 2),
            "calls_per_s_range": [round(min(rates[way]), 2), round(max(rates[way]), 2)],
            "p50_ms": round(percentile(latencies[way], 0.5) * 1000, 1),
            "p95_ms": round(percentile(latencies[way], 0.95) * 1000, 1),
            "machine_cpu_ms_per_call": round(statistics.median(cpu[way]) * 1000, 1),
            "cpu_ms_per_call_by_part": _median_parts(parts[way]),
        }
        for way in contenders
    }
    exec_ = rates["docker exec"]
    return {
        "program": program,
        "concurrency": concurrency,
        "ways": ways,
        # Each pool way against docker exec, round by round (the same load in each pair).
        "vs_exec_calls_per_s_per_round": {
            way: [round(r / e, 2) for r, e in zip(rates[way], exec_, strict=True)]
            for way in contenders
            if way in POOL_WAYS
        },
    }


def _median_parts(rounds: list[dict[str, float | None]]) -> dict[str, float | None]:
    """Each part's median over the rounds (None where the way cannot show that part)."""
    merged: dict[str, float | None] = {}
    for part in PARTS:
        values = [value for r in rounds if (value := r.get(part)) is not None]
        merged[part] = round(statistics.median(values), 1) if values else None
    return merged


def print_concurrency_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=(
            f"proctor bench sandbox --concurrency ({report['calls_per_caller']} calls per caller, "
            f"{report['rounds']} interleaved rounds; image {report['image']})"
        )
    )
    for column in (
        "program",
        "callers",
        "way",
        "calls/s (range)",
        "p50/p95 ms",
        "machine CPU ms/call",
        "vs exec",
    ):
        table.add_column(column, justify="left" if column in ("program", "way") else "right")
    for row in report["results"]:
        exec_rate = row["ways"]["docker exec"]["calls_per_s"]
        for way, figures in row["ways"].items():
            low, high = figures["calls_per_s_range"]
            per_round = row["vs_exec_calls_per_s_per_round"].get(way)
            ratio = f"{figures['calls_per_s'] / exec_rate:.2f}x" if exec_rate else "-"
            if per_round:
                ratio += f" ({', '.join(f'{r:.2f}' for r in per_round)})"
            table.add_row(
                row["program"],
                str(row["concurrency"]),
                way,
                f"{figures['calls_per_s']:.1f} ({low:.1f}-{high:.1f})",
                f"{figures['p50_ms']:.0f}/{figures['p95_ms']:.0f}",
                f"{figures['machine_cpu_ms_per_call']:.0f}",
                ratio,
            )
    console = Console(width=200)
    console.print(table)
    console.print(_parts_table(report))
    rss = report["controller_rss_mib"]
    console.print(
        f"controller RSS {rss['before']} MiB before, {rss['peak']} MiB peak, {rss['after']} MiB after; "
        f"execution slots {report['max_concurrent_executions'] or 'as many as callers'}; "
        f"{report['machine']['cpus']} CPUs, "
        f"load average {report['machine']['load_average_1m']} at the end"
    )


def _parts_table(report: dict[str, Any]) -> Any:
    """CPU per call by part (sandbox/bench/cpu_parts.py): process accounting, not /proc/stat."""
    from rich.table import Table

    table = Table(
        title="CPU ms per call by part (process accounting; - where a way cannot show the part; "
        "engine includes other clients of the same engine)"
    )
    for column in ("program", "callers", "way", *PARTS, "sum but kernel"):
        table.add_column(column, justify="left" if column in ("program", "way") else "right")
    for row in report["results"]:
        for way, figures in row["ways"].items():
            by_part = figures.get("cpu_ms_per_call_by_part") or {}
            cells = [by_part.get(part) for part in PARTS]
            # The kernel's threads are machine-wide (everyone's): shown, not summed.
            total = sum(by_part.get(part) or 0.0 for part in PARTS if part != "kernel")
            table.add_row(
                row["program"],
                str(row["concurrency"]),
                way,
                *("-" if cell is None else f"{cell:.0f}" for cell in cells),
                f"{total:.0f}",
            )
    return table
