"""What the run's code ran on: the host CPU, the sandbox's limits, and a calibration figure.

The FrontierMath methodology says answer() and tool calls run on "typical commodity hardware";
a time limit only means something next to the machine it was measured on. run.json therefore
records the host CPU model and core count, the sandbox's CPU quota and memory, and the time
one fixed CPU-bound pure-Python workload takes inside the sandbox at the start of the run.
Two runs on different machines compare honestly when their calibration figures are close.

The workload never changes (its name carries a version); the figure is taken twice: by the
program itself around the loop (``inside_s``: the interpreter's speed under the CPU quota), and
by us around the whole ``Sandbox.exec`` (``outside_s``: that plus starting the sandbox and the
interpreter). The program's checksum must match, so a short-circuited or broken run is never
mistaken for a fast machine.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the report reads hardware records without loading the sandbox package
    from proctor.sandbox import ExecResult, Limits, Sandbox

WORKLOAD_NAME = "lcg-4m-v1"
WORKLOAD_ITERATIONS = 4_000_000
# The loop's result for WORKLOAD_ITERATIONS; tests recompute it on the host.
WORKLOAD_CHECKSUM = 370714
CALIBRATION_TIMEOUT_S = 60.0

# Pure Python, no imports beyond the stdlib clock and json: the interpreter's own speed.
CALIBRATION_PROGRAM = f"""
import json, time
started = time.perf_counter()
cpu_started = time.process_time()
acc = 0
for i in range({WORKLOAD_ITERATIONS}):
    acc = (acc * 31 + i) % 1000003
print(json.dumps({{
    "inside_s": time.perf_counter() - started,
    "cpu_s": time.process_time() - cpu_started,
    "checksum": acc,
}}))
"""


def calibration_workload(iterations: int = WORKLOAD_ITERATIONS) -> int:
    """The calibration loop itself, for tests and for timing it on the host."""
    acc = 0
    for i in range(iterations):
        acc = (acc * 31 + i) % 1000003
    return acc


def host_cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The first ``model name`` in /proc/cpuinfo (Linux), else what ``platform`` knows."""
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                return value.strip()[:200]
    except OSError:
        pass
    return platform.processor() or None


def host_cpus() -> dict[str, int | None]:
    """Logical CPUs of the machine, and those this process may run on (affinity, cpusets)."""
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = None
    return {"logical_cpus": os.cpu_count(), "usable_cpus": usable}


def sandbox_limits(described: dict[str, Any] | None, configured: Limits) -> dict[str, Any]:
    """CPU quota and memory as the sandbox reports them (``describe()['limits']``), else as
    configured; the source says which, since a test double may describe nothing."""
    reported = (described or {}).get("limits")
    if isinstance(reported, dict) and "cpus" in reported and "memory_bytes" in reported:
        cpus, memory, source = reported["cpus"], reported["memory_bytes"], "sandbox.describe()"
    else:
        cpus, memory, source = configured.cpus, configured.memory_bytes, "run config"
    return {
        "cpus": cpus,
        "memory_bytes": memory,
        # Both backends allow no swap: docker sets memswap = memory, the local backend sets
        # memory.memsw to the same limit where the kernel accounts swap.
        "swap_bytes": 0,
        "source": source,
    }


def parse_calibration(result: ExecResult) -> dict[str, Any]:
    """The program's own figures, or ``{"error": ...}`` saying why there are none."""
    if result.timed_out:
        return {"error": "the calibration program timed out"}
    if result.exit_code != 0:
        return {"error": f"the calibration program exited with {result.exit_code}: {result.stderr[-300:]!r}"}
    lines = result.stdout.strip().splitlines()
    try:
        data = json.loads(lines[-1]) if lines else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return {"error": f"the calibration program printed no figures: {result.stdout[-200:]!r}"}
    if data.get("checksum") != WORKLOAD_CHECKSUM:
        return {"error": f"wrong checksum {data.get('checksum')!r}: the workload did not run as written"}
    figures: dict[str, Any] = {}
    for name in ("inside_s", "cpu_s"):
        value = data.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e6:
            return {"error": f"the calibration program reported a nonsense {name}: {value!r}"}
        figures[name] = round(float(value), 4)
    return figures


async def calibrate(sandbox: Sandbox, limits: Limits) -> dict[str, Any]:
    """Time the fixed workload once in ``sandbox`` under ``limits``; never raises for a failure
    of the sandbox or the program (the record says what went wrong instead)."""
    from proctor.sandbox import SandboxError

    record: dict[str, Any] = {"workload": WORKLOAD_NAME, "iterations": WORKLOAD_ITERATIONS}
    started = time.perf_counter()
    try:
        result = await sandbox.exec(CALIBRATION_PROGRAM, timeout=CALIBRATION_TIMEOUT_S, limits=limits)
    except SandboxError as exc:
        return {**record, "error": f"the sandbox failed: {exc}"}
    outside = time.perf_counter() - started
    return {**record, **parse_calibration(result), "outside_s": round(outside, 4)}


def hardware_record(
    described: dict[str, Any] | None, configured: Limits, calibration: dict[str, Any] | None
) -> dict[str, Any]:
    """run.json's ``hardware`` block."""
    return {
        "host": {"cpu_model": host_cpu_model(), **host_cpus(), "machine": platform.machine()},
        "sandbox": sandbox_limits(described, configured) if described is not None else None,
        "calibration": calibration,
    }


def hardware_summary(hardware: dict[str, Any] | None) -> str:
    """One line for the report header: host CPU, sandbox quota, calibration."""
    if not isinstance(hardware, dict):
        return "not recorded"
    parts: list[str] = []
    host = hardware.get("host")
    if not isinstance(host, dict):
        host = {}
    cores = host.get("usable_cpus") or host.get("logical_cpus")
    parts.append(f"host {host.get('cpu_model') or 'CPU ?'} × {cores if cores is not None else '?'}")
    box = hardware.get("sandbox")
    if isinstance(box, dict):
        memory = box.get("memory_bytes")
        memory_text = f"{memory / 2**30:g} GiB" if isinstance(memory, int | float) else "?"
        swap = "no swap" if box.get("swap_bytes") == 0 else "swap ?"
        parts.append(f"sandbox {box.get('cpus', '?')} CPU, {memory_text}, {swap}")
    calibration = hardware.get("calibration")
    if isinstance(calibration, dict):
        if calibration.get("error"):
            parts.append(f"calibration failed ({str(calibration['error'])[:80]})")
        elif isinstance(calibration.get("inside_s"), int | float):
            outside = calibration.get("outside_s")
            outside_text = f", {outside:.2f} s with start-up" if isinstance(outside, int | float) else ""
            parts.append(
                f"calibration {calibration['workload']} {calibration['inside_s']:.2f} s{outside_text}"
            )
    return " · ".join(parts)


def host_memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """This machine's physical memory (``MemTotal``), else what ``sysconf`` says; None if neither."""
    try:
        for line in meminfo.read_text(encoding="ascii", errors="replace").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def _gib(value: int) -> str:
    return f"{value / 2**30:.1f} GiB"


def memory_check(
    *,
    memory_bytes: int,
    samples_in_flight: int,
    execution_slots: int | None,
    host_bytes: int | None,
    backend: str,
) -> dict[str, Any]:
    """run.json's ``sandbox_memory_check``: can every call that may run at once have its memory?

    Calls at once are the samples in flight (``max_concurrency``; a sample runs one call at a
    time), capped by the process's execution slots (``sandbox.max_concurrent_executions``, or
    the engine's CPUs). When that many calls times ``sandbox.memory`` exceeds the host's memory,
    a call can be killed by the host's OOM killer (or push the host into swap) below its own
    limit, so the hardware is not what run.json says: the record has a ``warning``, which the
    runner also prints. Ray spreads calls over its nodes, whose memory this host cannot see.
    """
    calls = min(samples_in_flight, execution_slots) if execution_slots else samples_in_flight
    record: dict[str, Any] = {
        "memory_bytes": memory_bytes,
        "calls_at_once": calls,
        "needed_bytes": calls * memory_bytes,
        "host_memory_bytes": host_bytes,
    }
    if backend == "ray":
        return {**record, "checked": False, "why": "ray runs calls on its nodes, not on this host"}
    if host_bytes is None:
        return {**record, "checked": False, "why": "this host's memory is unknown"}
    record["checked"] = True
    record["exceeds_host"] = calls * memory_bytes > host_bytes
    if record["exceeds_host"]:
        record["warning"] = (
            f"sandbox memory: {calls} call(s) at once x {_gib(memory_bytes)} = "
            f"{_gib(calls * memory_bytes)}, more than this host's {_gib(host_bytes)}; a call may be "
            "killed by the host below its own limit. Lower max_concurrency, "
            "sandbox.max_concurrent_executions or sandbox.memory"
        )
    return record
