"""What the host-wide leftovers carry between two concurrent calls, and what a read storm costs.

Re-run: ``python3 -m proctor.sandbox.bench.host_channels`` (root, the engine and the image; about
two minutes), ``--json`` for the figures as one object, ``--channels procs,shmem`` for some.

Each channel is measured as a hostile pair would use it: two calls of one sandbox (the default
engine path) run at once; the sender sends random bits, half of them ones, one per time slot
of the host's wall clock (which every container shares), by doing something in the first half of
a "1" slot and in the second half of a "0" slot (a Manchester code: the host's own drift cancels);
the receiver samples the counter, and a slot is decoded by comparing its two halves. With ``p`` the share of
bits decoded wrongly, a slot carries ``1 - H(p)`` bits (a binary symmetric channel's capacity)
and the channel ``(1 - H(p)) / slot`` bits a second. This is a lower bound on what an attacker
gets: a better code, shorter slots or more processes may carry more.

``--read-storm`` times ``/proc/meminfo`` reads in one call, alone and while another call reads
the counter files in many processes as fast as it can; ``--hoard`` opens as many counter files
as one call may and reports what that costs the host.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from proctor.sandbox import Limits, Sandbox, SandboxSpec, open_sandbox

# sysinfo(2)'s struct on 64-bit Linux, for ctypes inside the container.
_SYSINFO = """
import ctypes
class Sysinfo(ctypes.Structure):
    _fields_ = [('uptime', ctypes.c_long), ('loads', ctypes.c_ulong * 3), ('totalram', ctypes.c_ulong),
                ('freeram', ctypes.c_ulong), ('sharedram', ctypes.c_ulong), ('bufferram', ctypes.c_ulong),
                ('totalswap', ctypes.c_ulong), ('freeswap', ctypes.c_ulong), ('procs', ctypes.c_ushort),
                ('pad', ctypes.c_ushort), ('totalhigh', ctypes.c_ulong), ('freehigh', ctypes.c_ulong),
                ('mem_unit', ctypes.c_uint), ('_f', ctypes.c_char * 8)]
libc = ctypes.CDLL(None, use_errno=True)
def sysinfo():
    found = Sysinfo()
    if libc.sysinfo(ctypes.byref(found)) != 0:
        raise OSError(ctypes.get_errno(), 'sysinfo')
    return found
"""


@dataclass(frozen=True)
class Channel:
    """One counter: how the receiver reads it, what the sender does in a "1" slot, the slot."""

    name: str
    what: str
    read: str  # source of read() -> float, after _SYSINFO
    on: str  # source of on() -> state, and off(state)
    slot_s: float
    statistic: str  # "mean" or "rate" (growth per second over the window)
    higher_is_one: bool


CHANNELS = {
    channel.name: channel
    for channel in (
        Channel(
            "procs",
            "sysinfo(2) procs: the host's task count",
            "def read():\n    return sysinfo().procs\n",
            "import os, signal\n"
            "def on():\n"
            "    pids = []\n"
            "    for _ in range(24):\n"
            "        pid = os.fork()\n"
            "        if pid == 0:\n"
            "            signal.pause()\n"
            "            os._exit(0)\n"
            "        pids.append(pid)\n"
            "    return pids\n"
            "def off(pids):\n"
            "    for pid in pids:\n"
            "        os.kill(pid, 9)\n"
            "    for pid in pids:\n"
            "        os.waitpid(pid, 0)\n",
            0.2,
            "mean",
            True,
        ),
        Channel(
            "freeram",
            "sysinfo(2) freeram (and sysconf(_SC_AVPHYS_PAGES)): the host's free memory",
            "def read():\n    info = sysinfo()\n    return info.freeram * info.mem_unit\n",
            "def on():\n    return b'\\x01' * (128 << 20)\ndef off(block):\n    del block\n",
            1.0,
            "mean",
            False,
        ),
        Channel(
            "shmem",
            "/proc/vmstat nr_shmem: the host's tmpfs and shared-memory pages",
            "def read():\n"
            "    with open('/proc/vmstat', 'rb') as fh:\n"
            "        for line in fh:\n"
            "            if line.startswith(b'nr_shmem '):\n"
            "                return int(line.split()[1])\n",
            "import os\n"
            "def on():\n"
            "    with open('/tmp/channel', 'wb') as fh:\n"
            "        fh.write(b'\\x01' * (4 << 20))\n"
            "def off(_):\n"
            "    os.unlink('/tmp/channel')\n",
            0.2,
            "mean",
            True,
        ),
        Channel(
            "psi_cpu",
            "/proc/pressure/cpu: the host's time tasks waited for a CPU",
            "def read():\n"
            "    with open('/proc/pressure/cpu', 'rb') as fh:\n"
            "        return int(fh.readline().split(b'total=')[1])\n",
            "import os\n"
            "def on():\n"
            "    pids = []\n"
            "    for _ in range(3):\n"
            "        pid = os.fork()\n"
            "        if pid == 0:\n"
            "            while True:\n"
            "                pass\n"
            "        pids.append(pid)\n"
            "    return pids\n"
            "def off(pids):\n"
            "    for pid in pids:\n"
            "        os.kill(pid, 9)\n"
            "    for pid in pids:\n"
            "        os.waitpid(pid, 0)\n",
            0.5,
            "rate",
            True,
        ),
        Channel(
            "boot_clock",
            "CLOCK_BOOTTIME - CLOCK_MONOTONIC (what /proc/uptime and btime reveal): no call can move it",
            "import time\n"
            "def read():\n"
            "    return time.clock_gettime(time.CLOCK_BOOTTIME) - time.clock_gettime(time.CLOCK_MONOTONIC)\n",
            # Suspending the host is the only thing that moves it; a call can only try to sleep.
            "import time\ndef on():\n    time.sleep(0.01)\ndef off(_):\n    pass\n",
            0.05,
            "mean",
            True,
        ),
    )
}

_RECEIVER = """
import json, time
{sysinfo}
{read}
START, SLOT, COUNT, INTERVAL = {start!r}, {slot!r}, {count!r}, {interval!r}
while time.time() < START - 0.05:
    time.sleep(0.005)
end = START + SLOT * COUNT + 0.05
samples = []
while True:
    now = time.time()
    if now >= end:
        break
    samples.append((now, read()))
    time.sleep(INTERVAL)
print(json.dumps(samples))
"""

# Manchester code: a bit's slot is two halves, the action in the first half for a 1 and in the
# second for a 0, so the receiver compares the two halves of one slot with each other and the
# host's own slow drift (other work on the machine) cancels out.
_SENDER = """
import time
{on}
START, SLOT, BITS = {start!r}, {slot!r}, {bits!r}
def until(moment):
    while True:
        left = moment - time.time()
        if left <= 0:
            return
        time.sleep(min(left, 0.01))
for index, bit in enumerate(BITS):
    begins = START + index * SLOT + (0 if bit else SLOT / 2)
    until(begins)
    state = on()
    until(begins + SLOT / 2 * 0.8)
    off(state)
    state = None  # nothing of the "on" state outlives its half
print('sent', len(BITS))
"""


def binary_entropy(p: float) -> float:
    if p <= 0.0 or p >= 1.0:
        return 0.0
    return -p * math.log2(p) - (1 - p) * math.log2(1 - p)


def _figure(samples: list[tuple[float, float]], begins: float, length: float, statistic: str) -> float | None:
    """One figure for the samples in the middle (30-80 %) of ``length`` seconds from ``begins``."""
    window = [(at, value) for at, value in samples if begins + 0.3 * length <= at <= begins + 0.8 * length]
    if len(window) < 2:
        return None
    if statistic == "rate":
        (first_at, first), (last_at, last) = window[0], window[-1]
        return (last - first) / max(last_at - first_at, 1e-6)
    return sum(value for _, value in window) / len(window)


def decode(
    samples: list[tuple[float, float]], start: float, slot_s: float, count: int, statistic: str
) -> list[float | None]:
    """Per slot, the first half's figure less the second's (None where a half has no samples)."""
    differences: list[float | None] = []
    for index in range(count):
        begins = start + index * slot_s
        first = _figure(samples, begins, slot_s / 2, statistic)
        second = _figure(samples, begins + slot_s / 2, slot_s / 2, statistic)
        differences.append(None if first is None or second is None else first - second)
    return differences


def grade(bits: list[int], figures: list[float | None], higher_is_one: bool, slot_s: float) -> dict[str, Any]:
    """Error rate and capacity of the decoded slots (a slot with no samples, or no difference
    between its halves, counts as wrong)."""
    errors = 0
    for bit, figure in zip(bits, figures, strict=True):
        if figure is None or figure == 0:
            errors += 1
            continue
        errors += int((figure > 0) == higher_is_one) != bit
    p = errors / len(bits)
    # A channel that decodes mostly wrong is as good as one that decodes mostly right: the
    # attacker learns the sign once, and a binary symmetric channel's capacity is the same. An
    # error count within three standard deviations of a fair coin's (chance alone leaves it only
    # about 1 time in 370) counts as no channel: with 64 bits, 20 to 44 errors.
    chance = abs(errors - len(bits) / 2) <= 1.5 * math.sqrt(len(bits))
    capacity = 0.0 if chance else (1 - binary_entropy(p)) / slot_s
    return {"bits": len(bits), "errors": errors, "error_rate": round(p, 4), "bits_per_s": round(capacity, 2)}


async def measure_channel(sandbox: Sandbox, channel: Channel, count: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    bits = [1] * (count // 2) + [0] * (count - count // 2)
    rng.shuffle(bits)
    settle = getattr(sandbox, "settle", None)
    if settle is not None:  # both warm containers ready: the calls start well before the slots
        await settle(60)
    start = round(time.time() + 2.0, 3)
    interval = min(0.005, channel.slot_s / 20)
    receiver = _RECEIVER.format(
        sysinfo=_SYSINFO, read=channel.read, start=start, slot=channel.slot_s, count=count, interval=interval
    )
    sender = _SENDER.format(on=channel.on, start=start, slot=channel.slot_s, bits=bits)
    timeout = int(2.0 + channel.slot_s * count + 30)
    sent, received = await asyncio.gather(
        sandbox.exec(sender, timeout=timeout), sandbox.exec(receiver, timeout=timeout)
    )
    if sent.exit_code != 0 or received.exit_code != 0:
        raise RuntimeError(
            f"{channel.name}: sender exit {sent.exit_code} (timed out {sent.timed_out}) "
            f"{sent.stderr[-300:]!r}; "
            f"receiver exit {received.exit_code} {received.stderr[-300:]!r}"
        )
    samples = [(float(at), float(value)) for at, value in json.loads(received.stdout)]
    figures = decode(samples, start, channel.slot_s, count, channel.statistic)
    graded = grade(bits, figures, channel.higher_is_one, channel.slot_s)
    return {"channel": channel.name, "what": channel.what, "slot_s": channel.slot_s, **graded}


# -- a read storm and a hoard of open counter files --------------------------------------------

_TIMED_READS = """
import json, time
samples = []
for _ in range({reads}):
    started = time.perf_counter()
    with open('/proc/meminfo', 'rb') as fh:
        fh.read()
    samples.append(time.perf_counter() - started)
    time.sleep(0.002)
samples.sort()
p50, p99 = samples[len(samples) // 2], samples[int(len(samples) * 0.99)]
print(json.dumps({{'p50_ms': p50 * 1e3, 'p99_ms': p99 * 1e3}}))
"""

_STORM = """
import os, time
end = time.time() + {seconds!r}
for _ in range({processes} - 1):
    if os.fork() == 0:
        break
paths = ['/proc/meminfo', '/proc/stat', '/proc/cpuinfo', '/proc/uptime', '/proc/loadavg']
reads = 0
while time.time() < end:
    for path in paths:
        with open(path, 'rb') as fh:
            fh.read()
        reads += 1
print(reads)
"""

# As many counter files open as the call's limits allow, held while the host looks; with
# ``storm`` every process also reads them in a loop while it holds them.
HOARD = """
import json, os, resource, signal, sys, time
PROCESSES = {processes}
def memory_usage():
    for path in ('/sys/fs/cgroup/memory/memory.usage_in_bytes', '/sys/fs/cgroup/memory.current'):
        try:
            return int(open(path).read())
        except OSError:
            pass
    return None
before = memory_usage()
soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
paths = ['/proc/meminfo', '/proc/stat', '/proc/cpuinfo', '/proc/uptime', '/proc/loadavg']
ready_r, ready_w = os.pipe()
children = []
for index in range(PROCESSES):
    pid = os.fork()
    if pid == 0:
        held = []
        try:
            while len(held) < soft - 8:
                held.append(open(paths[len(held) % len(paths)], 'rb'))
        except OSError:
            pass
        os.write(ready_w, len(held).to_bytes(4, 'little'))
        # A read storm too, with what it holds: every file read again and again, to the end.
        while {storm!r}:
            for fh in held[:64]:
                fh.seek(0)
                fh.read()
        signal.pause()
        os._exit(0)
    children.append(pid)
opened = sum(int.from_bytes(os.read(ready_r, 4), 'little') for _ in children)
during = memory_usage()
print(json.dumps({{'opened': opened, 'processes': len(children), 'memory_before': before,
                  'memory_during': during, 'held_from': time.time(), 'hold_s': {hold_s!r}}}), flush=True)
time.sleep({hold_s!r})
for pid in children:
    os.kill(pid, signal.SIGKILL)
"""


def lxcfs_rss_kib() -> int | None:
    """Resident memory of a running lxcfs daemon, None when none runs (what the old binds cost)."""
    found = subprocess.run(["pgrep", "-x", "lxcfs"], capture_output=True, text=True, check=False)
    pids = [int(pid) for pid in found.stdout.split()]
    if not pids:
        return None
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


async def read_storm(sandbox: Sandbox, reads: int, processes: int) -> dict[str, Any]:
    quiet = await sandbox.exec(_TIMED_READS.format(reads=reads), timeout=120)
    seconds = reads * 0.004 + 3
    storm, stormy = await asyncio.gather(
        sandbox.exec(_STORM.format(seconds=seconds, processes=processes), timeout=int(seconds) + 60),
        sandbox.exec(_TIMED_READS.format(reads=reads), timeout=120),
    )
    for result in (quiet, storm, stormy):
        if result.exit_code != 0:
            raise RuntimeError(f"read storm: exit {result.exit_code} {result.stderr[-300:]!r}")
    return {
        "alone": json.loads(quiet.stdout),
        "during_storm": json.loads(stormy.stdout),
        "storm_processes": processes,
        "storm_reads": sum(int(line) for line in storm.stdout.split()),
    }


async def hoard(sandbox: Sandbox, processes: int) -> dict[str, Any]:
    rss_before = lxcfs_rss_kib()
    code = HOARD.format(processes=processes, hold_s=3.0, storm=True)
    task = asyncio.ensure_future(sandbox.exec(code, timeout=120))
    # The hoarder prints once every process holds its files, then holds them 3 s: sample then.
    await asyncio.sleep(2.0)
    rss_during = lxcfs_rss_kib()
    result = await task
    if result.exit_code != 0:
        raise RuntimeError(f"hoard: exit {result.exit_code} {result.stderr[-300:]!r}")
    found: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[0])
    found.update(lxcfs_rss_kib_before=rss_before, lxcfs_rss_kib_during=rss_during)
    return found


async def run(args: argparse.Namespace) -> dict[str, Any]:
    spec = SandboxSpec(
        backend="docker", image=args.image, pool_size=2, default_limits=Limits(), probe_libraries=False
    )
    sandbox = await open_sandbox(spec)
    report: dict[str, Any] = {"engine_path": sandbox.describe().get("engine_path")}
    report["host_counters"] = sandbox.describe().get("host_counters")
    try:
        if args.channels:
            chosen = [CHANNELS[name] for name in args.channels]
            if args.slot_s is not None:
                chosen = [dataclasses.replace(channel, slot_s=args.slot_s) for channel in chosen]
            report["channels"] = [
                await measure_channel(sandbox, channel, args.bits, seed)
                for seed, channel in enumerate(chosen)
            ]
        if args.read_storm:
            report["read_storm"] = await read_storm(sandbox, args.reads, args.storm_processes)
        if args.hoard:
            report["hoard"] = await hoard(sandbox, args.hoard_processes)
    finally:
        await sandbox.aclose()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m proctor.sandbox.bench.host_channels", description=__doc__
    )
    parser.add_argument(
        "--channels", default=",".join(CHANNELS), help="comma-separated: " + ", ".join(CHANNELS)
    )
    parser.add_argument("--bits", type=int, default=64, help="bits sent per channel")
    parser.add_argument("--slot-s", type=float, default=None, help="slot length for every channel")
    parser.add_argument("--read-storm", action="store_true", help="time /proc/meminfo reads under a storm")
    parser.add_argument("--reads", type=int, default=1000)
    parser.add_argument("--storm-processes", type=int, default=32)
    parser.add_argument("--hoard", action="store_true", help="open as many counter files as a call may")
    parser.add_argument("--hoard-processes", type=int, default=100)
    parser.add_argument("--image", default=None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.channels.split(",") if name.strip()]
    unknown = [name for name in names if name not in CHANNELS]
    if unknown:
        parser.error(f"--channels: unknown {', '.join(unknown)} (known: {', '.join(CHANNELS)})")
    args.channels = names
    report = asyncio.run(run(args))
    if args.json:
        print(json.dumps(report, sort_keys=True))
        return 0
    for row in report.get("channels", []):
        print(
            f"{row['channel']:<11} {row['bits_per_s']:>8.2f} bit/s  errors {row['errors']}/{row['bits']}"
            f"  slot {row['slot_s']} s  ({row['what']})"
        )
    for key in ("read_storm", "hoard"):
        if key in report:
            print(f"{key}: {json.dumps(report[key], sort_keys=True)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
