"""Channels between samples: two concurrent calls through one controller, one sending, one listening.

The statelessness rows look at one call at a time; these rows run two calls at once, as two
samples of one run would, and measure what crosses between them. Both programs are clocked on
the wall clock (shared by every container of a host) from a start time the audit chooses. The
sender sets a level in each slot of a Manchester code (a 1 is high then low, a 0 low then
high); the listener samples the channel once per slot. A bit is decided when its two samples
differ, and the channel's capacity is what the listener got beyond chance: nothing when no
sample ever changed, and nothing unless correct decisions outnumber wrong ones by more than a
coin-flipping listener's 95% margin. Graded by the bandwidth measured: held at 0 bits, weak at
most the bound docs/sandbox.md ("What concurrent samples share") documents for the channel,
broken above it.

Channels:
- ``pair.lock``: flock on an image file (the interpreter's own ``os.py``);
- ``pair.inotify``: an inotify watch on an image directory another call reads;
- ``pair.proc_locks``: an open-file-description lock on a call's own scratch file, read back
  from /proc/locks (such locks have no owning pid, so no pid namespace hides them);
- ``pair.nr_shmem``, ``pair.tasks``, ``pair.psi``, ``pair.boot_clock``: host counters still
  shared: shared memory pages in /proc/vmstat; the host's task count (sysinfo(2) and
  /proc/loadavg); CPU pressure in /proc/pressure/cpu; idle time in /proc/uptime, beside the
  boot clock.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import secrets
import time
from dataclasses import dataclass
from typing import Any

from proctor.agent.audit.model import INSPECT, AuditContext, Check, Finding, Verdict, escape_text, run_probe

KLASS = "pairs"
BITS = 48
# How long before the first slot both calls are started; again, longer, when one was late.
LEADS_S = (2.5, 8.0)


@dataclass(frozen=True)
class Channel:
    id: str
    name: str
    slot_s: float
    # The highest bandwidth graded weak rather than broken, in bit/s (docs/sandbox.md).
    bound_bps: float
    # Samples are running totals: the listener decides on each slot's increase.
    cumulative: bool = False


CHANNELS = (
    # Slots as short as the channel answers reliably: a row measures at most one bit per two
    # slots. The closed channels' bound is 0; psi and boot_clock can be measured past theirs.
    # nr_shmem and the task count are level counters the kernel updates at once: they carried
    # 84 and 117 bit/s at 2.5 ms slots on a loaded machine, and more on a quiet one, so their
    # documented bound is this clock's ceiling (200 bit/s), a lower bound of their capacity:
    # weak whenever a bit crosses (docs/sandbox.md, "What concurrent samples share").
    Channel("pair.lock", "lock", 0.005, 0.0),
    Channel("pair.inotify", "inotify", 0.01, 0.0),
    Channel("pair.proc_locks", "proc_locks", 0.005, 0.0),
    Channel("pair.nr_shmem", "nr_shmem", 0.0025, 200.0),
    Channel("pair.tasks", "tasks", 0.0025, 200.0),
    Channel("pair.psi", "psi", 0.005, 50.0, cumulative=True),
    Channel("pair.boot_clock", "boot_clock", 0.005, 50.0, cumulative=True),
)
BOUNDS_BPS = {channel.id: channel.bound_bps for channel in CHANNELS}

# One program, both roles, every channel. Its configuration arrives on stdin as JSON.
PAIR_PROGRAM = r"""
import ctypes, fcntl, json, os, signal, struct, sys, threading, time
cfg = json.loads(sys.stdin.read())
began = time.time()
chan, role, start, slot, levels = cfg["channel"], cfg["role"], cfg["start"], cfg["slot"], cfg["levels"]
libc = ctypes.CDLL(None, use_errno=True)
stdlib = os.path.dirname(os.__file__)
watched = os.path.join(stdlib, "email") if os.path.isdir(os.path.join(stdlib, "email")) else stdlib

def scratch_dir():
    for d in ("/dev/shm", "/tmp", os.getcwd()):
        if os.access(d, os.W_OK):
            return d
    return "."

def scratch_file():
    path = os.path.join(scratch_dir(), ".pair-%d" % os.getpid())
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

class Sender:
    def __init__(self):
        self.fd = None
        self.children = []
        self.threads = []
        self.release = None
        if chan == "lock":
            self.fd = os.open(os.__file__, os.O_RDONLY)
        elif chan == "inotify":
            self.files = sorted(os.path.join(watched, n) for n in os.listdir(watched))[:8]
        elif chan == "proc_locks":
            self.fd = scratch_file()
        elif chan == "nr_shmem":
            self.fd = scratch_file()
            self.block = b"\x5a" * (4 << 20)
        elif chan in ("psi", "boot_clock"):
            for _ in range(2):
                pid = os.fork()
                if pid == 0:
                    while True:
                        pass
                os.kill(pid, signal.SIGSTOP)
                self.children.append(pid)
    def set(self, high):
        if chan == "lock":
            fcntl.flock(self.fd, fcntl.LOCK_EX if high else fcntl.LOCK_UN)
        elif chan == "inotify" and high:
            for path in self.files:
                try:
                    with open(path, "rb") as f:
                        f.read(1)
                except OSError:
                    pass
        elif chan == "proc_locks":
            kind = fcntl.F_WRLCK if high else fcntl.F_UNLCK
            lock = struct.pack("hhqqi4x", kind, 0, cfg["magic"], 1, 0)
            fcntl.fcntl(self.fd, getattr(fcntl, "F_OFD_SETLK", 37), lock)
        elif chan == "nr_shmem":
            if high:
                os.pwrite(self.fd, self.block, 0)
            else:
                os.ftruncate(self.fd, 0)
        elif chan == "tasks":
            if high and not self.threads:
                self.release = threading.Event()
                self.threads = [threading.Thread(target=self.release.wait) for _ in range(24)]
                for t in self.threads:
                    t.start()
            elif not high and self.threads:
                self.release.set()
                for t in self.threads:
                    t.join()
                self.threads = []
        elif chan in ("psi", "boot_clock"):
            for pid in self.children:
                os.kill(pid, signal.SIGCONT if high else signal.SIGSTOP)
    def close(self):
        self.set(False)
        for pid in self.children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)

class Listener:
    def __init__(self):
        self.absent = None
        if chan == "lock":
            self.fd = os.open(os.__file__, os.O_RDONLY)
        elif chan == "inotify":
            self.fd = libc.inotify_init1(0o4000)
            if self.fd < 0 or libc.inotify_add_watch(self.fd, watched.encode(), 0x1 | 0x20) < 0:
                self.absent = "no inotify watch: " + os.strerror(ctypes.get_errno())
        elif chan == "psi" and not os.path.exists("/proc/pressure/cpu"):
            self.absent = "no /proc/pressure/cpu"
    def sample(self):
        if self.absent:
            return 0
        if chan == "lock":
            try:
                fcntl.flock(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return 1
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            return 0
        if chan == "inotify":
            count = 0
            while True:
                try:
                    data = os.read(self.fd, 65536)
                except BlockingIOError:
                    return count
                offset = 0
                while offset + 16 <= len(data):
                    count += 1
                    offset += 16 + struct.unpack_from("iIII", data, offset)[3]
        if chan == "proc_locks":
            try:
                text = open("/proc/locks").read()
            except OSError:
                return 0
            return int(any(line.split()[-2:-1] == [str(cfg["magic"])] for line in text.splitlines()))
        if chan == "nr_shmem":
            for line in open("/proc/vmstat"):
                if line.startswith("nr_shmem "):
                    return int(line.split()[1])
            return 0
        if chan == "tasks":
            info = ctypes.create_string_buffer(256)
            libc.sysinfo(info)
            tasks = int(open("/proc/loadavg").read().split()[3].split("/")[1])
            return struct.unpack_from("H", info, 80)[0] + tasks
        if chan == "psi":
            first = open("/proc/pressure/cpu").readline()
            return int(first.rsplit("total=", 1)[1])
        if chan == "boot_clock":
            return int(float(open("/proc/uptime").read().split()[1]) * 100)
        return 0

def sleep_until(moment):
    while True:
        left = moment - time.time()
        if left <= 0:
            return
        time.sleep(min(left, 0.05))

# A channel this kernel lacks (gVisor has no /proc/vmstat and refuses OFD locks) carries nothing:
# the side that finds so says why, and stops using it.
unusable = None
def attempt(action, *args):
    global unusable
    if unusable is not None:
        return 0
    try:
        return action(*args)
    except OSError as exc:
        unusable = "%s: %s" % (type(exc).__name__, exc)
        return 0

worker = Sender() if role == "send" else Listener()
ready = time.time()
samples = []
late = ready > start
if not late:
    if role == "receive":
        sleep_until(start - slot / 2)
        samples.append(attempt(worker.sample))
    for i, level in enumerate(levels):
        if role == "send":
            sleep_until(start + i * slot)
            attempt(worker.set, bool(level))
        else:
            sleep_until(start + (i + 0.7) * slot)
            samples.append(attempt(worker.sample))
    if role == "send":
        sleep_until(start + len(levels) * slot)
        reason, unusable = unusable, None
        attempt(worker.close)
        unusable = reason or unusable
absent = getattr(worker, "absent", None) or unusable
report(began=began, ready=ready, late=late, samples=samples, absent=absent)
"""


@dataclass(frozen=True)
class Measured:
    bits: int
    correct: int
    wrong: int
    undecided: int
    carried_bits: float
    seconds: float

    @property
    def bps(self) -> float:
        return self.carried_bits / self.seconds if self.seconds > 0 else 0.0


def manchester(bits: list[int]) -> list[int]:
    """Two slots per bit: a 1 is high then low, a 0 low then high."""
    return [level for bit in bits for level in ((1, 0) if bit else (0, 1))]


def _entropy(p: float) -> float:
    return 0.0 if p <= 0.0 or p >= 1.0 else -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def decode(bits: list[int], samples: list[float], cumulative: bool, slot_s: float) -> Measured:
    """What the listener's samples (one before the first slot, then one per slot) carried of
    ``bits``: the capacity of the channel it saw, beyond what chance gives a listener."""
    values = [b - a for a, b in itertools.pairwise(samples)] if cumulative else samples[1:]
    correct = wrong = undecided = 0
    for index, bit in enumerate(bits):
        pair = values[2 * index : 2 * index + 2]
        if len(pair) < 2 or pair[0] == pair[1]:
            undecided += 1
        elif (pair[0] > pair[1]) == bool(bit):
            correct += 1
        else:
            wrong += 1
    decided = correct + wrong
    carried = 0.0
    # Either direction is information (idle time falls while the sender runs): a listener that
    # is always wrong reads the token inverted. Capacity of the binary channel it saw.
    if decided and abs(correct - wrong) > 2 * math.sqrt(decided):
        carried = decided * (1 - _entropy(wrong / decided))
    return Measured(len(bits), correct, wrong, undecided, carried, 2 * len(bits) * slot_s)


def grade(channel: Channel, measured: Measured) -> Verdict:
    if measured.carried_bits <= 0:
        return Verdict.HELD
    return Verdict.WEAK if measured.bps <= channel.bound_bps else Verdict.BROKEN


@dataclass(frozen=True)
class PairRun:
    """The two calls' replies, the bits sent, and whether they overlapped as clocked."""

    sender: dict[str, Any] | None
    listener: dict[str, Any] | None
    bits: list[int]
    dispatched: float
    returned: float
    evidence: str


async def run_pair(ctx: AuditContext, channel: Channel, lead_s: float) -> PairRun:
    """Two calls at once through ``ctx.sandbox``: one sends a fresh random token, one listens."""
    bits = [secrets.randbits(1) for _ in range(BITS)]
    levels = manchester(bits)
    dispatched = time.time()
    start = dispatched + lead_s
    common = {"channel": channel.name, "start": start, "slot": channel.slot_s, "levels": levels}
    common["magic"] = 10**9 + secrets.randbelow(10**9)
    timeout = lead_s + len(levels) * channel.slot_s + 15
    (sent, sender), (heard, listener) = await asyncio.gather(
        run_probe(ctx, PAIR_PROGRAM, timeout=timeout, stdin=json.dumps({**common, "role": "send"})),
        run_probe(ctx, PAIR_PROGRAM, timeout=timeout, stdin=json.dumps({**common, "role": "receive"})),
    )
    evidence = (
        f"sender: exit {sent.exit_code} {sent.stderr[-120:]!r}; "
        f"listener: exit {heard.exit_code} {heard.stderr[-120:]!r}"
    )
    return PairRun(sender, listener, bits, dispatched, time.time(), evidence)


def _clock_is_ours(run: PairRun) -> bool:
    """Both programs read the audit's own wall clock (a command on another machine may not)."""
    return all(
        reply is not None and run.dispatched - 1 <= float(reply.get("began", 0)) <= run.returned + 1
        for reply in (run.sender, run.listener)
    )


async def measure(ctx: AuditContext, channel: Channel) -> Finding:
    run: PairRun | None = None
    for lead in LEADS_S:
        run = await run_pair(ctx, channel, lead)
        if run.sender is None or run.listener is None:
            return Finding(
                Verdict.BROKEN,
                "a call of the pair did not report: nothing was measured",
                escape_text(run.evidence),
            )
        if not _clock_is_ours(run):
            return Finding(
                Verdict.SKIPPED,
                "the calls do not read this host's wall clock, so the pair cannot be clocked",
                escape_text(run.evidence),
            )
        if not (run.sender.get("late") or run.listener.get("late")):
            break
    assert run is not None and run.sender is not None and run.listener is not None
    if run.sender.get("late") or run.listener.get("late"):
        said = "the two calls never ran at once (one started after the other's window)"
        if ctx.backend == "command":
            return Finding(Verdict.SKIPPED, f"not applicable: the command runs one program at a time: {said}")
        if ctx.backend == INSPECT:
            return Finding(
                Verdict.SKIPPED, f"not run: the provider ran two exec calls one after the other: {said}"
            )
        return Finding(Verdict.BROKEN, f"nothing was measured: {said}", escape_text(run.evidence))
    samples = [float(value) for value in run.listener.get("samples") or []]
    measured = decode(run.bits, samples, channel.cumulative, channel.slot_s)
    absent = "; ".join(
        f"{side}: {reply['absent']}"
        for side, reply in (("sender", run.sender), ("listener", run.listener))
        if reply.get("absent")
    )
    observed = (
        f"{measured.carried_bits:.1f} of {measured.bits} bits crossed in {measured.seconds:.2f} s "
        f"({measured.bps:.1f} bit/s; bound {channel.bound_bps:g})"
    )
    if ctx.backend == INSPECT:
        observed += "; two concurrent exec calls on one sample environment"
    evidence = f"correct {measured.correct}, wrong {measured.wrong}, undecided {measured.undecided}" + (
        f"; {absent}" if absent else ""
    )
    return Finding(grade(channel, measured), observed, escape_text(evidence))


def _check(channel: Channel, tried: str) -> Check:
    async def run(ctx: AuditContext) -> Finding:
        return await measure(ctx, channel)

    expected = (
        "held: 0 bits cross"
        if channel.bound_bps == 0
        else f"held: 0 bits; weak: at most {channel.bound_bps:g} bit/s (docs/sandbox.md)"
    )
    return Check(channel.id, KLASS, tried, expected, run, timeout_s=60.0)


_PAIR = "two concurrent calls: one sends a 48-bit token "
_TRIED = {
    "pair.lock": _PAIR + "by flock on the image's os.py, the other tries the lock",
    "pair.inotify": _PAIR + "by reading image files, the other watches their directory with inotify",
    "pair.proc_locks": _PAIR + "by an OFD lock on its own file, the other reads /proc/locks",
    "pair.nr_shmem": _PAIR + "by writing 4 MiB of shared memory, the other reads nr_shmem in /proc/vmstat",
    "pair.tasks": _PAIR + "by starting 24 threads, the other reads the host's task count (sysinfo, loadavg)",
    "pair.psi": _PAIR + "by running two spinning processes, the other reads /proc/pressure/cpu",
    "pair.boot_clock": _PAIR + "by running two spinning processes, the other reads idle time in /proc/uptime",
}

CHECKS: tuple[Check, ...] = tuple(_check(channel, _TRIED[channel.id]) for channel in CHANNELS)
PAIR_IDS = frozenset(check.id for check in CHECKS)
