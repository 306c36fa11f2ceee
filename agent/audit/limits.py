"""Limits, measured from inside the sandbox and compared with the configured values.

Every bomb is bounded by the audit itself (a little past the configured limit), so a sandbox
without the limit shows "broken" instead of eating the host.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from proctor.agent.audit.model import (
    COMMAND_OWN_CAP,
    COMMAND_OWN_TIMEOUT,
    INSPECT,
    PROCTOR_BACKENDS,
    AuditContext,
    Check,
    Finding,
    Verdict,
    describe_exec,
    escape_text,
    mib,
    no_reply,
    run_probe,
)
from proctor.sandbox import ExecResult

KLASS = "limits"
MIB = 1024 * 1024
MANY_INODES = 1_000_000


async def cpu(ctx: AuditContext) -> Finding:
    if ctx.runtime == "runsc":
        return await cpu_from_the_host(ctx)
    workers = max(2, math.ceil(ctx.limits.cpus) + 1)
    seconds = 1.0 if ctx.quick else 2.0
    body = f"""\
import os, time
def spin(until):
    while time.monotonic() < until:
        pass
start = time.monotonic()
until = start + {seconds}
children = []
for _ in range({workers}):
    pid = os.fork()
    if pid == 0:
        spin(until)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
wall = time.monotonic() - start
used = os.times().children_user + os.times().children_system
report(cpus=used / wall, wall=wall, used=used)
"""
    result, reply = await run_probe(ctx, body, timeout=seconds + 15)
    if reply is None:
        return no_reply(result)
    measured = float(reply["cpus"])
    configured = ctx.limits.cpus
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    evidence = escape_text(
        f"{reply['used']:.2f} CPU-s over {reply['wall']:.2f} s wall with {workers} busy processes; "
        f"configured {configured:g} CPU(s); host load average {load:.1f} on {os.cpu_count()} CPUs"
    )
    observed = f"{measured:.2f} CPUs"
    if measured > configured * 1.25 + 0.05:
        return Finding(Verdict.BROKEN, observed + " (over the quota)", evidence)
    if measured > configured * 1.1:
        return Finding(Verdict.WEAK, observed + " (slightly over)", evidence)
    return Finding(Verdict.HELD, observed, evidence)


async def cpu_from_the_host(ctx: AuditContext) -> Finding:
    """The quota as the host enforces it: CPU time charged to the call container's cgroup.

    Under gVisor a program's own CPU clocks count throttled time as running, so the probe's
    figure would say nothing. The call is given a container of its own (limits that differ
    only in the output cap, which the container does not see), found by this sandbox's run ID;
    the check runs alone, so it is the only such container being started.
    """
    import asyncio

    workers = max(2, math.ceil(ctx.limits.cpus) + 1)
    seconds = 2.0 if ctx.quick else 4.0
    body = f"""\
import os, time
until = time.monotonic() + {seconds}
for _ in range({workers}):
    if os.fork() == 0:
        while time.monotonic() < until:
            pass
        os._exit(0)
for _ in range({workers}):
    os.wait()
report(done=True)
"""
    described = ctx.sandbox.describe()
    before = await asyncio.to_thread(_call_containers, described)
    own_limits = ctx.limits.replace(output_bytes=ctx.limits.output_bytes + 1)
    probe = asyncio.create_task(run_probe(ctx, body, timeout=seconds + 20, limits=own_limits))
    usage_file: Path | None = None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while usage_file is None and loop.time() < deadline and not probe.done():
        for container_id in await asyncio.to_thread(_call_containers, described) - before:
            usage_file = await asyncio.to_thread(_cpuacct_usage_file, container_id)
        await asyncio.sleep(0.1)
    if usage_file is None:
        result, _ = await probe
        return Finding(
            Verdict.BROKEN, "the call's cgroup was not found on the host", escape_text(describe_exec(result))
        )
    await asyncio.sleep(0.5)  # past the fork
    used_before, wall_before = await asyncio.to_thread(_read_ns, usage_file), loop.time()
    await asyncio.sleep(seconds - 1.0)
    used, wall = await asyncio.to_thread(_read_ns, usage_file) - used_before, loop.time() - wall_before
    result, reply = await probe
    if reply is None:
        return no_reply(result)
    measured = used / 1e9 / wall
    configured = ctx.limits.cpus
    load = os.getloadavg()[0]
    evidence = escape_text(
        f"{used / 1e9:.2f} CPU-s charged to the container's cgroup (sentry, gofer and program) over "
        f"{wall:.2f} s with {workers} busy processes; configured {configured:g} CPU(s); host load "
        f"average {load:.1f} on {os.cpu_count()} CPUs"
    )
    observed = f"{measured:.2f} CPUs, seen from the host"
    if measured > configured * 1.25 + 0.05:
        return Finding(Verdict.BROKEN, observed + " (over the quota)", evidence)
    if measured > configured * 1.1:
        return Finding(Verdict.WEAK, observed + " (slightly over)", evidence)
    return Finding(Verdict.HELD, observed, evidence)


def _call_containers(described: dict[str, object]) -> set[str]:
    import docker

    from proctor.sandbox.docker import labels

    client = docker.DockerClient(base_url=str(described.get("engine")), timeout=10)
    run = f"{labels.RUN_ID}={described.get('run_id')}"
    try:
        found = client.api.containers(filters={"label": [labels.LABEL_FILTER, run, f"{labels.ROLE}=call"]})
    finally:
        client.close()
    return {str(summary["Id"]) for summary in found}


def _cpuacct_usage_file(container_id: str) -> Path | None:
    for candidate in (
        Path(f"/sys/fs/cgroup/cpuacct/docker/{container_id}/cpuacct.usage"),
        Path(f"/sys/fs/cgroup/cpu,cpuacct/docker/{container_id}/cpuacct.usage"),
    ):
        if candidate.exists():
            return candidate
    return None


def _read_ns(path: Path) -> int:
    return int(path.read_text())


MEMORY_ROW_TIMEOUT_S = 200.0


def memory_probe_timeout(configured: int) -> float:
    """40 s plus 12 s a GiB of the limit, within the row's own bound."""
    return min(MEMORY_ROW_TIMEOUT_S - 10, 40.0 + 12.0 * configured / (1024 * MIB))


async def memory(ctx: AuditContext) -> Finding:
    configured = ctx.limits.memory_bytes
    # Stop on our own a quarter past the limit: a sandbox without one must not take the host's.
    ceiling = configured + max(configured // 4, 64 * MIB)
    body = f"""\
import os
chunks = []
total = 0
step = 16 * 1024 * 1024
while total < {ceiling}:
    try:
        chunk = bytearray(step)
        chunk[::4096] = b"\\x01" * (step // 4096)  # touch every page, in C
    except MemoryError:
        report(stopped="MemoryError", total=total)
        raise SystemExit(0)
    chunks.append(chunk)
    total += step
    os.write(1, b"allocated %d\\n" % total)
report(stopped="ceiling", total=total)
"""
    result, reply, reached = await _fill_memory(ctx, body, configured)
    if reply is None and result.exit_code == 137 and not result.oom_killed and reached < configured // 2:
        # A SIGKILL far below the limit is not the limit's doing (the host's OOM killer under an
        # earlier row's bomb, seen once in CI at 0 MiB): it proves nothing, so the probe runs once
        # more, and only a second such kill is graded.
        result, reply, reached = await _fill_memory(ctx, body, configured)
    evidence = escape_text(
        f"{describe_exec(result)}; last report {mib(reached)}; configured {mib(configured)}; "
        f"oom_killed={result.oom_killed}"
    )
    if reply is not None and reply.get("stopped") == "ceiling":
        return Finding(Verdict.BROKEN, f"allocated {mib(reached)} without being stopped", evidence)
    if reached > configured:
        return Finding(Verdict.BROKEN, f"held {mib(reached)}, over the limit", evidence)
    if result.oom_killed or (reply is not None and reply.get("stopped") == "MemoryError"):
        how = "killed by the OOM killer" if result.oom_killed else "refused with MemoryError"
        return Finding(Verdict.HELD, f"{how} at about {mib(reached)}", evidence)
    if result.exit_code == 137 and reached >= configured // 2:
        return Finding(Verdict.HELD, f"SIGKILLed at about {mib(reached)} (not flagged as OOM)", evidence)
    return Finding(Verdict.BROKEN, "ended without reaching or reporting the limit", evidence)


async def _fill_memory(
    ctx: AuditContext, body: str, configured: int
) -> tuple[ExecResult, dict[str, Any] | None, int]:
    """The memory probe's result, its reply and the most it reported having allocated."""
    # Faulting in gigabytes takes time on a loaded host (4 GiB took over 45 s at load 20): the
    # probe's own bound grows with the limit, inside the row's.
    result, reply = await run_probe(ctx, body, timeout=memory_probe_timeout(configured))
    reached = 0
    for line in result.stdout.splitlines():
        if line.startswith("allocated "):
            reached = max(reached, int(line.split()[1]))
    return result, reply, reached


async def pids(ctx: AuditContext) -> Finding:
    configured = ctx.limits.pids
    ceiling = configured * 2 + 16
    body = f"""\
import threading
gate = threading.Event()
started = 0
error = None
while started < {ceiling}:
    try:
        threading.Thread(target=gate.wait, daemon=True).start()
    except RuntimeError as exc:
        error = str(exc)
        break
    started += 1
gate.set()
report(threads=started, error=error)
"""
    result, reply = await run_probe(ctx, body, timeout=20)
    if reply is None:
        return no_reply(result)
    started = int(reply["threads"])
    evidence = escape_text(f"started {started} threads, then: {reply['error']}; configured pids {configured}")
    if started >= ceiling:
        return Finding(Verdict.BROKEN, f"{started} threads and no limit met", evidence)
    if started >= configured:
        return Finding(Verdict.BROKEN, f"{started} threads, at or over the limit", evidence)
    return Finding(Verdict.HELD, f"stopped at {started} threads (+ launcher/init)", evidence)


async def tmpfs(ctx: AuditContext) -> Finding:
    configured = ctx.limits.tmpfs_bytes
    ceiling = configured + 32 * MIB
    files = 2000 if ctx.quick else 20000
    body = f"""\
import os, errno
out = {{}}
for path in ("/tmp", os.getcwd(), "/dev/shm"):
    if not os.path.isdir(path):
        continue
    st = os.statvfs(path)
    out[path] = {{"size": st.f_blocks * st.f_frsize, "inodes": st.f_files}}
written = 0
error = None
block = b"x" * (1024 * 1024)
# Several files, each well under the file-size limit, so the tmpfs size is what stops us.
part = 0
try:
    while written < {ceiling} and error is None:
        with open("/tmp/fill-%d" % part, "wb", buffering=0) as f:
            for _ in range(32):
                f.write(block)
                written += len(block)
        part += 1
except OSError as exc:
    error = errno.errorcode.get(exc.errno, str(exc.errno))
for i in range(part + 1):
    try:
        os.unlink("/tmp/fill-%d" % i)
    except OSError:
        pass
made = 0
inode_error = None
os.makedirs("/tmp/inodes", exist_ok=True)
try:
    for i in range({files}):
        open("/tmp/inodes/%d" % i, "w").close()
        made += 1
except OSError as exc:
    inode_error = errno.errorcode.get(exc.errno, str(exc.errno))
report(mounts=out, written=written, error=error, files=made, inode_error=inode_error)
"""
    result, reply = await run_probe(ctx, body, timeout=30)
    if reply is None:
        return no_reply(result)
    written = int(reply["written"])
    mounts: dict[str, dict[str, int]] = reply["mounts"]
    evidence = escape_text(
        f"wrote {mib(written)} to /tmp then {reply['error']}; {reply['files']} empty files then "
        f"{reply['inode_error']}; statvfs {mounts}; configured {mib(configured)}"
    )
    if reply["error"] is None:
        return Finding(Verdict.BROKEN, f"wrote {mib(written)} without being stopped", evidence)
    if written > configured:
        return Finding(Verdict.BROKEN, f"wrote {mib(written)}, over the limit", evidence)
    if reply["error"] != "ENOSPC":
        return Finding(
            Verdict.WEAK, f"stopped at {mib(written)} by {reply['error']}, not by the tmpfs size", evidence
        )
    # Without nr_inodes a tmpfs allows about one inode per two pages of RAM: bounded only by the
    # kernel memory that each file costs.
    loose = [p for p, m in mounts.items() if not m.get("inodes") or m["inodes"] > MANY_INODES]
    if loose:
        # gVisor (runsc) ignores nr_inodes, but its tmpfs lives in the sentry's own memory, which
        # the container's memory limit covers: files are charged to the call, not to nobody.
        where = " (gVisor: bounded by the memory limit instead)" if ctx.runtime == "runsc" else ""
        return Finding(
            Verdict.WEAK, f"size held at {mib(written)}; inodes not limited on {loose}{where}", evidence
        )
    return Finding(Verdict.HELD, f"stopped at {mib(written)} (ENOSPC); inodes limited", evidence)


async def file_size(ctx: AuditContext) -> Finding:
    configured = ctx.limits.file_size_bytes
    body = f"""\
import errno, resource
limit = resource.getrlimit(resource.RLIMIT_FSIZE)
out = {{"rlimit": list(limit)}}
with open("/tmp/sparse", "wb", buffering=0) as f:
    for offset in ({configured} - 1, {configured}):
        try:
            f.seek(offset)
            f.write(b"x")
            out[str(offset)] = "ok"
        except OSError as exc:
            out[str(offset)] = errno.errorcode.get(exc.errno, str(exc.errno))
report(**out)
"""
    result, reply = await run_probe(ctx, body)
    if reply is None:
        return no_reply(result)
    below, at = reply.get(str(configured - 1)), reply.get(str(configured))
    evidence = escape_text(
        f"RLIMIT_FSIZE {reply['rlimit']}; a byte at offset {configured - 1}: {below}; at {configured}: {at}"
    )
    if at == "ok":
        return Finding(Verdict.BROKEN, "wrote past the file-size limit", evidence)
    if at != "EFBIG":
        return Finding(Verdict.WEAK, f"stopped by {at}, not the file-size limit", evidence)
    return Finding(Verdict.HELD, f"EFBIG exactly at {mib(configured)}", evidence)


async def output_cap(ctx: AuditContext) -> Finding:
    cap = ctx.limits.output_bytes
    # Every byte really written: a pipe write may be short (gVisor's often are), and a probe
    # that ignored that would print less than it claims.
    body = (
        "import os\n"
        "def put(fd, data):\n    view = memoryview(data)\n"
        "    while view:\n        view = view[os.write(fd, view):]\n"
        f"block = b'o' * 65536\nfor _ in range({3 * cap // 65536 + 1}):\n"
        "    put(1, block)\n    put(2, block)\n"
    )
    result, _ = await run_probe(ctx, body, timeout=30)
    sizes = (len(result.stdout.encode()), len(result.stderr.encode()))
    evidence = escape_text(
        f"printed {mib(3 * cap)}+ per stream; kept stdout {sizes[0]} B (truncated={result.stdout_truncated}),"
        f" stderr {sizes[1]} B (truncated={result.stderr_truncated}); cap {cap} B; {describe_exec(result)}"
    )
    if max(sizes) > cap + 4096:
        return Finding(Verdict.BROKEN, f"kept {max(sizes)} bytes of one stream", evidence)
    if not (result.stdout_truncated and result.stderr_truncated):
        return Finding(Verdict.WEAK, "capped, but the truncation was not flagged", evidence)
    return Finding(Verdict.HELD, f"each stream kept at most {max(sizes)} B and flagged", evidence)


async def wall_clock(ctx: AuditContext) -> Finding:
    timeout = 1.5
    result, _ = await run_probe(ctx, "while True:\n    pass\n", timeout=timeout)
    evidence = escape_text(f"timeout {timeout} s; {describe_exec(result)}; timed_out={result.timed_out}")
    if not result.timed_out:
        return Finding(Verdict.BROKEN, "the infinite loop was not stopped as a timeout", evidence)
    if result.duration_s > timeout + 5:
        return Finding(Verdict.WEAK, f"stopped after {result.duration_s:.2f} s", evidence)
    return Finding(Verdict.HELD, f"killed after {result.duration_s:.2f} s", evidence)


async def read_only_root(ctx: AuditContext) -> Finding:
    body = """\
import errno, os, sys, glob
out = {}
targets = ["/", "/etc", "/usr", "/var/tmp", "/opt", "/root", "/var", "/run", os.path.dirname(os.__file__)]
for pattern in ("/usr/local/lib/python3*/site-packages", "/opt/*/lib/python3*/site-packages"):
    targets += glob.glob(pattern)[:1]
for d in targets:
    path = os.path.join(d, ".proctor-audit")
    try:
        with open(path, "w") as f:
            f.write("x")
        os.unlink(path)
        out[d] = "WRITABLE"
    except OSError as exc:
        out[d] = errno.errorcode.get(exc.errno, str(exc.errno))
fields = [line.split() for line in open("/proc/self/mounts")]
mounts = [f[2] + " " + f[3].split(",")[0] for f in fields if f[1] == "/"]
report(out=out, root=mounts)
"""
    result, reply = await run_probe(ctx, body)
    if reply is None:
        return no_reply(result)
    out: dict[str, str] = reply["out"]
    writable = [d for d, v in out.items() if v == "WRITABLE"]
    evidence = escape_text("; ".join(f"{d}: {v}" for d, v in out.items()) + f"; root mounted {reply['root']}")
    if writable:
        return Finding(Verdict.BROKEN, f"wrote to {', '.join(writable)}", evidence)
    if not all(v == "EROFS" for v in out.values()):
        return Finding(
            Verdict.HELD, "no write succeeded (some refused by permissions, not a read-only mount)", evidence
        )
    return Finding(Verdict.HELD, "every write refused: read-only file system", evidence)


async def numba_cache(ctx: AuditContext) -> Finding:
    body = """\
import os, errno
cache = os.environ.get("NUMBA_CACHE_DIR")
if not cache:
    report(cache=None)
    raise SystemExit(0)
os.environ["NUMBA_DEBUG_CACHE"] = "1"
targets = set()
for root, dirs, files in os.walk(cache):
    for name in files:
        path = os.path.join(root, name)
        if os.path.islink(path):
            targets.add(os.path.realpath(path))
poisoned = {}
for target in sorted(targets)[:4] + sorted({os.path.dirname(t) for t in targets})[:2]:
    try:
        if os.path.isdir(target):
            open(os.path.join(target, ".proctor-audit"), "w").close()
        else:
            open(target, "ab").close()
        poisoned[target] = "WRITABLE"
    except OSError as exc:
        poisoned[target] = errno.errorcode.get(exc.errno, str(exc.errno))
import io, contextlib
buffer = io.StringIO()
with contextlib.redirect_stdout(buffer):
    import galois
log = buffer.getvalue()
report(cache=cache, links=len(targets), poisoned=poisoned, loaded=log.count("data loaded from"),
       saved=log.count("data saved to"))
"""
    result, reply = await run_probe(ctx, body, timeout=40)
    if reply is None:
        if "No module named 'galois'" in result.stderr:
            return Finding(Verdict.SKIPPED, "galois is not installed here (not the pinned image)", "")
        return no_reply(result)
    if reply.get("cache") is None:
        return Finding(Verdict.SKIPPED, "no NUMBA_CACHE_DIR (not the pinned image)", "")
    poisoned: dict[str, str] = reply["poisoned"]
    evidence = escape_text(
        f"NUMBA_CACHE_DIR {reply['cache']} holds {reply['links']} link(s); "
        f"writes to their targets: {poisoned}; "
        f"import galois: {reply['loaded']} loaded, {reply['saved']} saved"
    )
    if any(v == "WRITABLE" for v in poisoned.values()):
        return Finding(Verdict.BROKEN, "the shared cache can be rewritten for later calls", evidence)
    if reply["links"] and not reply["loaded"] and reply["saved"]:
        # numba keys each cached kernel by the CPU features LLVM sees; gVisor's ptrace platform
        # hides some (avx512ifma, avx512_bf16, ...), so a cache built under runc on such a host
        # misses there and every import compiles again.
        return Finding(
            Verdict.WEAK,
            "the precompiled cache does not match the CPU features this runtime shows: compiled again",
            evidence,
        )
    if not reply["links"] or not reply["loaded"]:
        return Finding(Verdict.WEAK, "the precompiled cache is not used (slow imports)", evidence)
    return Finding(Verdict.HELD, f"{reply['loaded']} kernels loaded from a read-only cache", evidence)


CHECKS = [
    Check(
        "limits.cpu",
        KLASS,
        "busy-loop in more processes than CPUs; CPU-seconds / wall",
        "<= the CPU quota",
        cpu,
        quick=True,
    ),
    Check(
        "limits.memory",
        KLASS,
        "allocate and touch 16 MiB at a time, past the limit",
        "stopped at the limit",
        memory,
        quick=True,
        timeout_s=MEMORY_ROW_TIMEOUT_S,
    ),
    Check(
        "limits.pids", KLASS, "start threads until refused", "refused below the pids limit", pids, quick=True
    ),
    Check(
        "limits.tmpfs",
        KLASS,
        "fill /tmp; create thousands of empty files; statvfs /tmp, /work, /dev/shm",
        "ENOSPC at the tmpfs size; inodes bounded",
        tmpfs,
        timeout_s=35,
    ),
    Check("limits.file_size", KLASS, "write one byte at the file-size limit (sparse)", "EFBIG", file_size),
    Check(
        "limits.output",
        KLASS,
        "print three times the output cap on stdout and stderr",
        "kept <= cap, flagged",
        output_cap,
        quick=True,
        timeout_s=35,
        backends=(*PROCTOR_BACKENDS, INSPECT),
        not_applicable={"command": COMMAND_OWN_CAP},
    ),
    Check(
        "limits.wall_clock",
        KLASS,
        "an infinite loop with a 1.5 s timeout",
        "timed out soon after 1.5 s",
        wall_clock,
        quick=True,
        backends=(*PROCTOR_BACKENDS, INSPECT),
        not_applicable={"command": COMMAND_OWN_TIMEOUT},
    ),
    Check(
        "limits.read_only_root",
        KLASS,
        "write into /, /etc, /usr, /opt, /var, /run and site-packages",
        "every write refused",
        read_only_root,
        quick=True,
    ),
    Check(
        "limits.numba_cache",
        KLASS,
        "rewrite the precompiled numba cache; import galois",
        "cache read-only and hit",
        numba_cache,
        timeout_s=45,
    ),
]
