"""The engine's seccomp allowlist (sandbox/docker/seccomp_profile.json): what it lets through, what not.

The workload cases are the allowlist's justification: each rule of the profile names the cases
here (or elsewhere) whose real workloads need it, and every case must pass under the profile,
under runc and runsc. The attack cases probe the kernel classes it leaves out; today's main,
which ran the engine's default profile, let memfd_secret, pidfd_getfd, process_vm_readv,
landlock and PTRACE_TRACEME through. The data cases keep the file, its rule table in
docs/sandbox.md and the tests it names in agreement.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from proctor.sandbox import Limits, Sandbox, open_sandbox
from proctor.sandbox.docker.seccomp import (
    DOCS_BEGIN,
    DOCS_END,
    allowed_syscalls,
    docs_table,
    engine_profile,
    load_profile,
    profile_sha256,
)
from tests.sandbox.conftest import DOCKER_RUNTIMES

REPO = Path(__file__).resolve().parents[2]
ASYNC = pytest.mark.asyncio(loop_scope="module")
# Two CPUs, so that OpenBLAS and numba start worker threads; room for two spawn-pool workers.
LIMITS = Limits(memory_bytes=1024 * 1024 * 1024, pids=128, tmpfs_bytes=128 * 1024 * 1024, cpus=2.0)


@pytest.fixture(scope="module", params=DOCKER_RUNTIMES)
def runtime(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def confined(sandbox_image: str, runtime: str) -> AsyncIterator[Sandbox]:
    # The engine's path, as before auto took runc-direct by default: runc-direct runs the
    # engine's own seccomp bytes (tests/sandbox/test_oci_direct.py compares the specs).
    opened = await open_sandbox(
        "docker",
        image=sandbox_image,
        pool_size=1,
        default_limits=LIMITS,
        runtime=runtime,
        engine_path="docker",
    )
    try:
        yield opened
    finally:
        await opened.aclose()


async def _run(sandbox: Sandbox, code: str, timeout: float = 120) -> dict[str, object]:
    result = await sandbox.exec(code, timeout=timeout)
    assert result.exit_code == 0 and not result.timed_out, result
    found: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


# -- the data ------------------------------------------------------------------------------------


def test_profile_is_an_allowlist_whose_every_rule_names_tests_that_exist() -> None:
    profile = load_profile()
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    assert profile["defaultErrnoRet"] == 1  # EPERM: what Docker 20.10 answers whatever it says
    for rule in profile["syscalls"]:
        for test in rule["tests"]:
            path, _, name = test.partition("::")
            source = (REPO / path).read_text(encoding="utf-8")
            assert re.search(rf"^(async )?def {re.escape(name)}\(", source, re.M), f"{test} does not exist"
    # What the engine gets is the file itself, compact; the count is what describe() reports.
    assert json.loads(engine_profile()) == profile
    assert 150 < len(allowed_syscalls()) < 300
    assert len(profile_sha256()) == 64


# Every kernel class the issue names, and the calls that build namespaces or mounts.
NEVER_ALLOWED = (
    "memfd_secret", "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd",
    "perf_event_open", "keyctl", "add_key", "request_key", "bpf", "unshare", "setns", "mount",
    "umount2", "pivot_root", "chroot", "fsopen", "fsmount", "fsconfig", "fspick", "open_tree",
    "move_mount", "mount_setattr", "landlock_create_ruleset", "landlock_add_rule",
    "landlock_restrict_self", "pidfd_getfd", "process_vm_readv", "process_vm_writev", "kcmp",
    "io_setup", "io_submit", "seccomp", "sync", "syncfs", "splice", "vmsplice", "tee", "modify_ldt",
    "name_to_handle_at", "open_by_handle_at", "init_module", "kexec_load", "swapon", "reboot",
    "clock_settime", "adjtimex", "settimeofday", "setdomainname", "sethostname", "acct", "quotactl",
)  # fmt: skip


def test_no_rule_allows_a_kernel_class_the_sandbox_never_needs() -> None:
    allowed = set(allowed_syscalls())
    assert not allowed & set(NEVER_ALLOWED), sorted(allowed & set(NEVER_ALLOWED))
    # Calls allowed only with conditions on their arguments: never unconditionally.
    for rule in load_profile()["syscalls"]:
        if rule["action"] == "SCMP_ACT_ALLOW" and set(rule["names"]) & {
            "clone",
            "socket",
            "socketpair",
            "ptrace",
        }:
            assert rule.get("args"), rule


def test_docs_table_is_the_one_the_profile_renders() -> None:
    docs = (REPO / "docs" / "sandbox.md").read_text(encoding="utf-8")
    start, end = docs.find(DOCS_BEGIN), docs.find(DOCS_END)
    assert start >= 0 and end > start, "docs/sandbox.md has no generated allowlist table"
    assert docs[start : end + len(DOCS_END)] == docs_table(), (
        "docs/sandbox.md's allowlist table is stale: paste proctor.sandbox.docker.seccomp.docs_table()"
    )


# -- workloads: each must pass under the profile --------------------------------------------------

_SYMBOLIC = """
import json, sympy, mpmath, gmpy2, networkx as nx
x = sympy.symbols("x")
out = {
    "factor": {str(k): v for k, v in sympy.factorint(2**64 + 1).items()},
    "integral": str(sympy.integrate(sympy.sin(x) ** 2, (x, 0, sympy.pi))),
    "solve": sorted(str(r) for r in sympy.solve(x**2 - 5 * x + 6, x)),
}
mpmath.mp.dps = 40
out["zeta2"] = bool(abs(mpmath.zeta(2) - mpmath.pi ** 2 / 6) < mpmath.mpf(10) ** -35)
p = gmpy2.mpz(2) ** 127 - 1
out["mersenne"] = bool(gmpy2.is_prime(p)) and gmpy2.powmod(3, p - 1, p) == 1
g = nx.petersen_graph()
out["petersen"] = [nx.diameter(g), nx.girth(g) if hasattr(nx, "girth") else 5, g.number_of_edges()]
print(json.dumps(out))
"""


@ASYNC
@pytest.mark.slow
async def test_workload_sympy_mpmath_gmpy2_networkx(confined: Sandbox) -> None:
    found = await _run(confined, _SYMBOLIC)
    assert found == {
        "factor": {"274177": 1, "67280421310721": 1},
        "integral": "pi/2",
        "solve": ["2", "3"],
        "zeta2": True,
        "mersenne": True,
        "petersen": [2, 5, 15],
    }


_NUMERIC = """
import json, os, numpy as np, scipy.integrate, scipy.linalg, scipy.optimize, scipy.sparse.linalg
rng = np.random.default_rng(7)
a = rng.standard_normal((700, 700))
spd = a @ a.T + 700 * np.eye(700)
threads = len(os.listdir("/proc/self/task"))
c, low = scipy.linalg.cho_factor(spd)
b = rng.standard_normal(700)
x = scipy.linalg.cho_solve((c, low), b)
lap = scipy.sparse.diags([1, -2, 1], [-1, 0, 1], shape=(200, 200)).tocsc()
eig = scipy.sparse.linalg.eigsh(lap, k=1, which="LA")[0][0]
print(json.dumps({
    "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"), "threads_after_matmul": threads,
    "residual": float(np.abs(spd @ x - b).max()),
    "quad": scipy.integrate.quad(np.sin, 0, np.pi)[0],
    "root": scipy.optimize.brentq(lambda t: t ** 3 - 2, 0, 2),
    "eig": float(eig),
}))
"""


@ASYNC
@pytest.mark.slow
async def test_workload_numpy_blas_threads_and_scipy(confined: Sandbox) -> None:
    found = await _run(confined, _NUMERIC)
    assert found["blas_threads"] == "2"
    assert isinstance(found["threads_after_matmul"], int) and found["threads_after_matmul"] >= 2, found
    assert found["residual"] < 1e-8  # type: ignore[operator]
    assert found["quad"] == pytest.approx(2.0)
    assert found["root"] == pytest.approx(2 ** (1 / 3))
    assert -1e-3 < found["eig"] < 0  # type: ignore[operator]


# numba caches only functions defined in a file; the second process must load, not compile.
_JIT = """
import json, os, subprocess, sys, textwrap
os.makedirs("/tmp/jitmod", exist_ok=True)
with open("/tmp/jitmod/kernels.py", "w") as fh:
    fh.write(textwrap.dedent('''
        import numba
        @numba.njit(cache=True)
        def squares(n):
            s = 0
            for i in range(n):
                s += i * i
            return s
        @numba.njit(parallel=True, cache=True)
        def total(a):
            s = 0.0
            for i in numba.prange(a.shape[0]):
                s += a[i]
            return s
    '''))
check = textwrap.dedent('''
    import json, sys
    sys.path.insert(0, "/tmp/jitmod")
    import numpy as np, kernels
    print(json.dumps({"squares": kernels.squares(1000), "total": kernels.total(np.arange(1e5)),
                      "hits": sum(kernels.squares.stats.cache_hits.values())}))
''')
def run_check():
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)
first, second = run_check(), run_check()
import galois
GF = galois.GF(2**127 - 1)
p = 2**127 - 1
a, b = GF(12345678901234567890123), GF(2**100 + 7)
print(json.dumps({
    "first": first, "second": second,
    "product": int(a * b) == (12345678901234567890123 * (2**100 + 7)) % p,
    "inverse": int(b ** -1 * b) == 1,
    "power": int(a ** (p - 2)) == pow(12345678901234567890123, p - 2, p),
    "poly": str(galois.Poly([1, 0, 1], field=galois.GF(2)) ** 2),
}))
"""


@ASYNC
@pytest.mark.slow
async def test_workload_numba_jit_cache_and_galois(confined: Sandbox) -> None:
    found = await _run(confined, _JIT, timeout=240)
    first, second = found["first"], found["second"]
    assert isinstance(first, dict) and isinstance(second, dict)
    assert first["squares"] == second["squares"] == sum(i * i for i in range(1000))
    assert first["total"] == second["total"] == sum(range(100000))
    assert first["hits"] == 0 and second["hits"] == 1, found  # compiled once, then loaded from the cache
    assert found["product"] is found["inverse"] is found["power"] is True
    assert found["poly"] == "x^4 + 1"


_POOLS = """
import json, multiprocessing as mp, os, sys
os.makedirs("/tmp/poolmod", exist_ok=True)
with open("/tmp/poolmod/work.py", "w") as fh:
    fh.write("import os\\ndef square(x):\\n    return x * x, os.getpid()\\n")
sys.path.insert(0, "/tmp/poolmod")
import work
from multiprocessing import shared_memory
out = {}
for method in ("fork", "spawn", "forkserver"):
    with mp.get_context(method).Pool(2) as pool:
        got = pool.map(work.square, range(20))
    out[method] = [sum(v for v, _ in got), len({pid for _, pid in got} - {os.getpid()}) >= 1]
ctx = mp.get_context("fork")
queue, lock = ctx.Queue(), ctx.Lock()
child = ctx.Process(target=lambda: (lock.acquire(), queue.put("hello"), lock.release()))
child.start()
out["queue"] = queue.get(timeout=30)
child.join()
memory = shared_memory.SharedMemory(create=True, size=4096)
memory.buf[:3] = b"abc"
other = shared_memory.SharedMemory(memory.name)
out["shm"] = bytes(other.buf[:3]).decode()
other.close()
memory.close()
memory.unlink()
print(json.dumps(out))
"""


@ASYNC
@pytest.mark.slow
async def test_workload_multiprocessing_fork_and_spawn(confined: Sandbox) -> None:
    found = await _run(confined, _POOLS, timeout=180)
    expected = [sum(x * x for x in range(20)), True]
    assert found == {
        "fork": expected,
        "spawn": expected,
        "forkserver": expected,
        "queue": "hello",
        "shm": "abc",
    }


_THREADS = """
import concurrent.futures, faulthandler, json, os, resource, signal, threading, time
out = {}
counter, lock = [0], threading.Lock()
def bump():
    for _ in range(10000):
        with lock:
            counter[0] += 1
workers = [threading.Thread(target=bump) for _ in range(8)]
for t in workers: t.start()
for t in workers: t.join()
out["counter"] = counter[0]
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    out["pool"] = sum(pool.map(lambda v: v * 2, range(100)))
got = []
signal.signal(signal.SIGUSR1, lambda *_: got.append("usr1"))
os.kill(os.getpid(), signal.SIGUSR1)
signal.signal(signal.SIGALRM, lambda *_: got.append("alarm"))
signal.setitimer(signal.ITIMER_REAL, 0.05)
time.sleep(0.3)
signal.alarm(1)
signal.alarm(0)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])
threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGUSR2)).start()
out["sigtimedwait"] = signal.sigtimedwait([signal.SIGUSR2], 5).si_signo == signal.SIGUSR2
faulthandler.dump_traceback_later(30)
faulthandler.cancel_dump_traceback_later()
out["signals"] = got
start = time.monotonic()
time.sleep(0.05)
out["slept"] = time.monotonic() - start >= 0.05
out["clocks"] = all(v > 0 for v in (time.time(), time.perf_counter(), time.process_time(),
                                     time.thread_time(), time.clock_getres(time.CLOCK_MONOTONIC)))
out["times"] = os.times().elapsed > 0 and resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0
out["sysconf"] = os.sysconf("SC_PHYS_PAGES") > 0 and os.cpu_count() > 0 and len(os.sched_getaffinity(0)) > 0
print(json.dumps(out))
"""


@ASYNC
async def test_workload_threads_signals_timers(confined: Sandbox) -> None:
    found = await _run(confined, _THREADS)
    assert found == {
        "counter": 80000,
        "pool": 9900,
        "sigtimedwait": True,
        "signals": ["usr1", "alarm"],
        "slept": True,
        "clocks": True,
        "times": True,
        "sysconf": True,
    }


_FILES = """
import errno, fcntl, json, mmap, os, shutil, tempfile
out = {}
with tempfile.TemporaryDirectory() as top:
    path = os.path.join(top, "data")
    with open(path, "wb") as fh:
        fh.write(b"x" * 8192)
        fh.flush()
        os.fsync(fh.fileno())
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
    with open(path, "r+b") as fh, mmap.mmap(fh.fileno(), 0) as mapped:
        mapped[:5] = b"hello"
        mapped.flush()
        mapped.madvise(mmap.MADV_DONTNEED)
    anon = mmap.mmap(-1, 1 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # resize: mremap
    anon.resize(2 << 20)
    anon[-1:] = b"z"
    out["mmap"] = open(path, "rb").read(5).decode() + anon[-1:].decode()
    fd = os.memfd_create("scratch", os.MFD_CLOEXEC)
    os.ftruncate(fd, 4096)
    with mmap.mmap(fd, 4096) as mem:
        mem[:4] = b"memf"
    out["memfd"] = os.pread(fd, 4, 0).decode()
    os.close(fd)
    shutil.copy(path, path + ".copy")
    src, dst = os.open(path, os.O_RDONLY), os.open(path + ".range", os.O_WRONLY | os.O_CREAT)
    try:
        out["copy_file_range"] = os.copy_file_range(src, dst, 8192)
    except OSError as exc:  # gVisor (2022) has no copy_file_range at all, whatever the profile
        out["copy_file_range"] = errno.errorcode[exc.errno]
    os.close(src)
    os.close(dst)
    os.symlink(path, path + ".link")
    os.link(path, path + ".hard")
    os.rename(path + ".hard", path + ".moved")
    os.mkfifo(path + ".fifo")
    os.utime(path, (1, 1))
    os.chmod(path, 0o600)
    with tempfile.NamedTemporaryFile(dir=top) as named:
        named.write(b"abc")
        named.flush()
        os.posix_fallocate(named.fileno(), 0, 4096)
    out["listing"] = sorted(entry.name for entry in os.scandir(top))
    out["access"] = os.access(path, os.R_OK) and os.stat(path).st_mtime == 1 and os.statvfs(top).f_bsize > 0
print(json.dumps(out))
"""


@ASYNC
async def test_workload_mmap_memfd_tempfile_files(confined: Sandbox, runtime: str) -> None:
    found = await _run(confined, _FILES)
    assert found.pop("copy_file_range") == (8192 if runtime == "runc" else "ENOSYS")
    assert found == {
        "mmap": "helloz",
        "memfd": "memf",
        "listing": ["data", "data.copy", "data.fifo", "data.link", "data.moved", "data.range"],
        "access": True,
    }


_SUBPROCESSES = """
import asyncio, errno, json, os, select, subprocess, sys
def output(argv):
    return subprocess.run(argv, capture_output=True, text=True).stdout.strip()
out = {"python": output([sys.executable, "-c", "print(6 * 7)"])}
out["shell"] = output(["sh", "-c", "echo $((6 * 7)) | cat"])
child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read()[::-1])"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
out["pipe"] = child.communicate(b"abc")[0].decode()
pid = os.posix_spawn("/bin/true", ["true"], os.environ)
try:
    select.select([os.pidfd_open(pid)], [], [], 10)
    out["pidfd"] = True
except OSError as exc:  # gVisor (2022) has no pidfd_open, whatever the profile
    out["pidfd"] = errno.errorcode[exc.errno]
out["posix_spawn"] = os.waitpid(pid, 0)[1] == 0
async def main():
    proc = await asyncio.create_subprocess_exec("echo", "async", stdout=asyncio.subprocess.PIPE)
    line = (await proc.communicate())[0].decode().strip()
    async def echo(reader, writer):
        writer.write(await reader.read(5))
        await writer.drain()
        writer.close()
    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
    writer.write(b" loop")
    line += (await reader.read(5)).decode()
    writer.close()
    server.close()
    return line
out["asyncio"] = asyncio.run(main())
print(json.dumps(out))
"""


@ASYNC
async def test_workload_subprocess_and_asyncio(confined: Sandbox, runtime: str) -> None:
    found = await _run(confined, _SUBPROCESSES)
    assert found.pop("pidfd") is True if runtime == "runc" else found.pop("pidfd") == "ENOSYS"
    assert found == {
        "python": "42",
        "shell": "42",
        "pipe": "cba",
        "posix_spawn": True,
        "asyncio": "async loop",
    }


# -- attacks: each kernel class the profile leaves out --------------------------------------------

_NUMBERS = {
    "x86_64": {
        "memfd_secret": 447, "io_uring_setup": 425, "userfaultfd": 323, "perf_event_open": 298,
        "keyctl": 250, "add_key": 248, "bpf": 321, "unshare": 272, "clone": 56, "setns": 308,
        "fsopen": 430, "fsmount": 432, "open_tree": 428, "move_mount": 429,
        "landlock_create_ruleset": 444, "pidfd_getfd": 438, "process_vm_readv": 310,
        "process_vm_writev": 311, "ptrace": 101, "personality": 135,
    },
    "aarch64": {
        "memfd_secret": 447, "io_uring_setup": 425, "userfaultfd": 282, "perf_event_open": 241,
        "keyctl": 219, "add_key": 217, "bpf": 280, "unshare": 97, "clone": 220, "setns": 268,
        "fsopen": 430, "fsmount": 432, "open_tree": 428, "move_mount": 429,
        "landlock_create_ruleset": 444, "pidfd_getfd": 438, "process_vm_readv": 270,
        "process_vm_writev": 271, "ptrace": 117, "personality": 92,
    },
}  # fmt: skip

_PROBE = """
import ctypes, errno, json, os, signal, time
N = {numbers!r}
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, *args):
    rc = libc.syscall(N[name], *args)
    return ("SUCCEEDED", rc) if rc >= 0 else (errno.errorcode.get(ctypes.get_errno(), "?"), rc)
buf = ctypes.create_string_buffer(256)
out = {{}}
def probe(name, *args):
    outcome, rc = call(name, *args)
    out[name] = outcome
    # Only these return a descriptor (memfd_secret's is never mapped: no page leaves the direct map).
    if outcome == "SUCCEEDED" and name in ("memfd_secret", "io_uring_setup", "userfaultfd", "fsopen",
                                           "fsmount", "open_tree", "pidfd_getfd", "perf_event_open", "bpf"):
        os.close(rc)
probe("memfd_secret", 0)
probe("io_uring_setup", 4, buf)
probe("userfaultfd", 0)
probe("perf_event_open", buf, 0, -1, -1, 0)
probe("keyctl", 0, -3, 1)
probe("add_key", b"user", b"proctor", b"x", 1, -3)
probe("bpf", 0, buf, 72)
probe("unshare", 0x10000000)
probe("fsopen", b"tmpfs", 0)
probe("fsmount", -1, 0, 0)
probe("open_tree", -100, b"/tmp", 1)
probe("move_mount", -1, b"", -100, b"/tmp", 0)
probe("landlock_create_ruleset", None, 0, 1)
try:
    ns = os.open("/proc/self/ns/uts", os.O_RDONLY)
except FileNotFoundError:  # gVisor (2022) has no /proc/self/ns: setns of a descriptor still asked
    ns = os.open("/proc/self/stat", os.O_RDONLY)
probe("setns", ns, 0)
os.close(ns)
# clone with a namespace flag (CLONE_NEWUSER | SIGCHLD): a copy of this process if it worked.
rc = libc.syscall(N["clone"], 0x10000000 | 17, 0, 0, 0, 0)
if rc == 0:
    os._exit(0)
out["clone(CLONE_NEWUSER)"] = "SUCCEEDED" if rc > 0 else errno.errorcode.get(ctypes.get_errno(), "?")
if rc > 0:
    os.waitpid(rc, 0)
# A child of its own to read, steal a descriptor from, and trace: the legitimate case.
secret = ctypes.create_string_buffer(b"child-secret", 16)
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
local = ctypes.create_string_buffer(16)
mine, theirs = IoVec(ctypes.addressof(local), 16), IoVec(ctypes.addressof(secret), 16)
probe("process_vm_readv", child, ctypes.byref(mine), 1, ctypes.byref(theirs), 1, 0)
probe("process_vm_writev", child, ctypes.byref(mine), 1, ctypes.byref(theirs), 1, 0)
try:
    probe("pidfd_getfd", os.pidfd_open(child), 0, 0)
except OSError as exc:  # gVisor (2022): no pidfd_open, so no pidfd_getfd to reach
    out["pidfd_getfd"] = "pidfd_open " + errno.errorcode[exc.errno]
out["ptrace attach own child"] = call("ptrace", 16, child, 0, 0)[0]
if out["ptrace attach own child"] == "SUCCEEDED":
    os.waitpid(child, os.WUNTRACED)
    out["ptrace detach own child"] = call("ptrace", 17, child, 0, 0)[0]
os.kill(child, signal.SIGKILL)
os.waitpid(child, 0)
out["personality(ADDR_NO_RANDOMIZE)"] = call("personality", 0x0040000)[0]
out["personality(query)"] = call("personality", ctypes.c_ulong(0xFFFFFFFF))[0]
# Last: PTRACE_TRACEME from the program's main process would make the launcher its tracer.
out["ptrace(PTRACE_TRACEME)"] = call("ptrace", 0, 0, 0, 0)[0]
print(json.dumps(out), flush=True)
os._exit(0)
"""


def _probe() -> str:
    return _PROBE.format(numbers=_NUMBERS[platform.machine()])


# What a refused call answers: ENOSYS (the launcher's filter, the allowlist's ENOSYS rule, runc
# for calls newer than its libseccomp) or EPERM (the allowlist's default, namespaces, TRACEME).
# gVisor refuses with EPERM where its build ignores a profile's errno, or ENOSYS for calls it
# does not implement at all.
REFUSED = ("ENOSYS", "EPERM")


@ASYNC
async def test_kernel_classes_outside_the_allowlist_are_refused(confined: Sandbox) -> None:
    found = await _run(confined, _probe(), timeout=60)
    for name in (
        "memfd_secret", "io_uring_setup", "userfaultfd", "perf_event_open", "keyctl", "add_key", "bpf",
        "fsopen", "fsmount", "open_tree", "move_mount", "landlock_create_ruleset",
        "process_vm_readv", "process_vm_writev", "pidfd_getfd",
    ):  # fmt: skip
        assert found[name] in (*REFUSED, "pidfd_open ENOSYS"), (name, found)


@ASYNC
async def test_namespaces_and_mounts_are_refused(confined: Sandbox) -> None:
    found = await _run(confined, _probe(), timeout=60)
    for name in ("unshare", "setns", "clone(CLONE_NEWUSER)"):
        assert found[name] == "EPERM", (name, found)


@ASYNC
async def test_ptrace_traceme_is_refused_but_a_child_may_be_traced(confined: Sandbox) -> None:
    found = await _run(confined, _probe(), timeout=60)
    assert found["ptrace(PTRACE_TRACEME)"] == "EPERM", found
    assert found["ptrace attach own child"] == "SUCCEEDED", found
    assert found["ptrace detach own child"] == "SUCCEEDED", found


@ASYNC
async def test_personality_other_than_linux_is_refused(confined: Sandbox, runtime: str) -> None:
    found = await _run(confined, _probe(), timeout=60)
    # The query passes the filter; gVisor's own personality() then answers EINVAL to it.
    assert found["personality(query)"] == ("SUCCEEDED" if runtime == "runc" else "EINVAL"), found
    assert found["personality(ADDR_NO_RANDOMIZE)"] in REFUSED, found


@ASYNC
async def test_describe_records_the_profiles_hash_and_size(confined: Sandbox, runtime: str) -> None:
    recorded = confined.describe()["seccomp_profile"]
    assert recorded["sha256"] == hashlib.sha256((REPO / recorded["file"]).read_bytes()).hexdigest()
    assert recorded["sha256"] == profile_sha256()
    assert recorded["allowed_syscalls"] == len(allowed_syscalls())
    sent = engine_profile(errno_honoured=runtime != "runsc")
    assert recorded["sent_sha256"] == hashlib.sha256(sent.encode()).hexdigest()
    # Under runc the engine gets the file itself; under runsc only the ENOSYS rule differs.
    differs = [
        a for a, b in zip(json.loads(sent)["syscalls"], load_profile()["syscalls"], strict=True) if a != b
    ]
    assert differs == ([] if runtime == "runc" else [json.loads(sent)["syscalls"][-1]])
