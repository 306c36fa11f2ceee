"""`proctor bench sandbox --concurrency 1,4,16`: the warm pool against `docker run` and `docker exec`.

C callers each make ``calls`` back-to-back calls of the same program; every contender uses the
same image and the same lock-down flags. The three contenders take turns within each round
(their order rotates between rounds), so a burst of load from elsewhere on the machine is
spread over all of them, and each figure is reported with its spread over the rounds.

- pool: the sandbox an agent run uses (``open_sandbox("docker")``, warm pool, the process-wide
  execution slots at their default), every caller its own :func:`execution_caller`; stateless.
- docker run: ``docker run --rm -i`` per call, a new container each time; stateless.
- docker exec: ``docker exec -i`` into one long-lived container per caller, the way Inspect
  AI's docker sandbox runs; stateful (files and processes persist between calls).

Per-caller set-up is outside the timing for both: the exec way's long-lived containers, and
one warm-up call per caller through the pool (which, with recycling, makes its own container).
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

from proctor.sandbox.api import FRESH, Limits, SandboxError
from proctor.sandbox.bench.calls import percentile
from proctor.sandbox.factory import open_sandbox
from proctor.sandbox.slots import execution_caller

PROGRAMS = {"print(1)": "1\n", "print(sum(range(10**7)))": "49999995000000\n"}
CONTENDERS = ("pool", "docker exec", "docker run")


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
    isolation: str = FRESH,
) -> dict[str, Any]:
    """Measure every contender at every concurrency; SandboxUnavailable without docker or image."""
    rss_before = controller_rss_mib()
    pool = await open_sandbox(
        "docker",
        image=image,
        pool_size=2,
        probe_libraries=False,
        max_concurrent_executions=max_concurrent_executions,
        isolation=isolation,
    )
    description = pool.describe()
    limits = Limits()
    user = description["user"]
    image_ref = description["image_id"]
    flags = _lockdown_flags(limits, user)
    tag = secrets.token_hex(4)
    long_lived: list[str] = []
    results: list[dict[str, Any]] = []
    rss_peak = controller_rss_mib()
    try:
        for concurrency in concurrencies:
            while len(long_lived) < concurrency:
                _, out = await _docker_cli(
                    "run", "-d", f"--name=proctor-bench-{tag}-{len(long_lived)}", "--label=proctor.bench=1",
                    *flags, image_ref, "sleep", "infinity",
                )  # fmt: skip
                long_lived.append(out.strip())
            for program, expected in PROGRAMS.items():

                async def pooled(index: int, program: str = program) -> str:
                    with execution_caller(("bench", index)):
                        result = await pool.exec(program, timeout=120)
                    return result.stdout

                async def run(index: int, program: str = program) -> str:
                    return (
                        await _docker_cli(
                            "run", "--rm", "-i", *flags, image_ref, "python3", "-I", "-c", program
                        )
                    )[1]

                async def exec_(index: int, program: str = program) -> str:
                    argv = ["exec", "-i", f"--user={user}", long_lived[index], "python3", "-I", "-c", program]
                    return (await _docker_cli(*argv))[1]

                ways: dict[str, Callable[[int], Awaitable[str]]] = {
                    "pool": pooled,
                    "docker exec": exec_,
                    "docker run": run,
                }
                rates: dict[str, list[float]] = {way: [] for way in CONTENDERS}
                latencies: dict[str, list[float]] = {way: [] for way in CONTENDERS}
                # Warm-up, one call per caller: the page cache, the first connection, and (with
                # recycling) each caller's own container, as the exec way's long-lived container
                # per caller is made before its timing too.
                await asyncio.gather(*(pooled(index) for index in range(concurrency)))
                for round_index in range(rounds):
                    order = CONTENDERS[round_index % 3 :] + CONTENDERS[: round_index % 3]
                    for way in order:
                        await pool.settle()  # type: ignore[attr-defined]  # the docker backend's, through the slots
                        rate, samples = await _run_round(concurrency, calls, ways[way], expected)
                        rates[way].append(rate)
                        latencies[way].extend(samples)
                        rss_peak = max(rss_peak, controller_rss_mib())
                results.append(_summarize(program, concurrency, rates, latencies))
                # Progress on stderr: a long run on a shared machine shows what it has so far.
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    finally:
        await pool.aclose()
        for container_id in long_lived:
            with contextlib.suppress(SandboxError):
                await _docker_cli("rm", "-f", container_id)
    return {
        "image": description["image"],
        "calls_per_caller": calls,
        "rounds": rounds,
        "max_concurrent_executions": description.get("max_concurrent_executions"),
        "pool_recycles": description.get("pool_recycles"),
        "controller_rss_mib": {
            "before": round(rss_before, 1),
            "peak": round(rss_peak, 1),
            "after": round(controller_rss_mib(), 1),
        },
        "machine": {"cpus": os.cpu_count(), "load_average_1m": round(os.getloadavg()[0], 2)},
        "results": results,
    }


def _summarize(
    program: str, concurrency: int, rates: dict[str, list[float]], latencies: dict[str, list[float]]
) -> dict[str, Any]:
    ways: dict[str, dict[str, Any]] = {
        way: {
            "calls_per_s": round(statistics.median(rates[way]), 2),
            "calls_per_s_range": [round(min(rates[way]), 2), round(max(rates[way]), 2)],
            "p50_ms": round(percentile(latencies[way], 0.5) * 1000, 1),
            "p95_ms": round(percentile(latencies[way], 0.95) * 1000, 1),
        }
        for way in CONTENDERS
    }
    pool, exec_, run = ways["pool"], ways["docker exec"], ways["docker run"]
    per_round = [p / e for p, e in zip(rates["pool"], rates["docker exec"], strict=True)]
    return {
        "program": program,
        "concurrency": concurrency,
        "ways": ways,
        "pool_vs_exec_calls_per_s": round(pool["calls_per_s"] / exec_["calls_per_s"], 2),
        "pool_vs_exec_calls_per_s_per_round": [round(ratio, 2) for ratio in per_round],
        "pool_vs_run_calls_per_s": round(pool["calls_per_s"] / run["calls_per_s"], 2),
        "pool_vs_exec_p95": round(pool["p95_ms"] / exec_["p95_ms"], 2),
    }


def print_concurrency_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=(
            f"proctor bench sandbox --concurrency ({report['calls_per_caller']} calls per caller, "
            f"{report['rounds']} rounds; image {report['image']}; "
            f"pool {'recycling' if report.get('pool_recycles') else 'fresh container per call'})"
        )
    )
    columns = ["program", "callers"]
    for way in CONTENDERS:
        columns += [f"{way} calls/s", f"{way} p50/p95 ms"]
    columns += ["pool/exec calls/s", "pool/exec p95"]
    for column in columns:
        table.add_column(column, justify="left" if column == "program" else "right")
    for row in report["results"]:
        cells = [row["program"], str(row["concurrency"])]
        for way in CONTENDERS:
            figures = row["ways"][way]
            low, high = figures["calls_per_s_range"]
            cells += [
                f"{figures['calls_per_s']:.1f} ({low:.1f}-{high:.1f})",
                f"{figures['p50_ms']:.0f}/{figures['p95_ms']:.0f}",
            ]
        per_round = ", ".join(f"{ratio:.2f}" for ratio in row["pool_vs_exec_calls_per_s_per_round"])
        cells += [
            f"{row['pool_vs_exec_calls_per_s']:.2f}x ({per_round})",
            f"{row['pool_vs_exec_p95']:.2f}x",
        ]
        table.add_row(*cells)
    console = Console(width=220)
    console.print(table)
    rss = report["controller_rss_mib"]
    console.print(
        f"controller RSS {rss['before']} MiB before, {rss['peak']} MiB peak, {rss['after']} MiB after; "
        f"execution slots {report['max_concurrent_executions']}; {report['machine']['cpus']} CPUs, "
        f"load average {report['machine']['load_average_1m']} at the end"
    )
