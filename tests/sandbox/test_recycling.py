"""Statelessness attacks on recycled containers (docker): a reset must leave nothing behind.

Each attack plants state in one call and looks for it in the next call *in the same container*
(the tests check the container ID, so an attack can never pass vacuously because the pool
happened to hand out a fresh container). What a reset cannot clear must make the launcher
refuse the reset, and then the next call must run in another container.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from proctor.sandbox.docker import oci_direct
from proctor.sandbox.docker.backend import DockerSandbox, open_docker_sandbox
from proctor.sandbox.slots import execution_caller
from tests.sandbox.conftest import TEST_LIMITS

pytestmark = [pytest.mark.docker, pytest.mark.asyncio(loop_scope="module")]
ROOT_AND_RUNC = pytest.mark.skipif(oci_direct.available() is not None, reason=str(oci_direct.available()))

# Everything a program could observe that a previous call could have changed. Times and the
# next process ID are left out: they are counters (docs/sandbox.md, "Recycled containers").
LOOK = r"""
import json, os, stat, sys
def container():
    for line in open('/proc/self/cgroup'):
        part = line.strip().rsplit('/', 1)[-1]
        # The engine's 64-digit ID, or a runc-direct container's name (sandbox/docker/oci_direct.py).
        if len(part) == 64 or part.startswith('proctor-oci-'):
            return part
    return None
def tree(top):
    found = {}
    for root, dirs, files in os.walk(top):
        for name in sorted(dirs + files) + ['.']:
            path = os.path.join(root, name)
            try:
                info = os.lstat(path)
                link = os.readlink(path) if stat.S_ISLNK(info.st_mode) else None
                # Each container has a uid of its own: what matters is whether the program owns it.
                owner = 'self' if info.st_uid == os.getuid() else info.st_uid
                found[path] = [oct(info.st_mode), owner, info.st_size, link]
            except OSError as exc:
                found[path] = type(exc).__name__
    return found
def xattrs(path):
    try:
        return sorted(os.listxattr(path))
    except OSError as exc:
        return type(exc).__name__
mine = os.getpid()
processes = []
for pid in os.listdir('/proc'):
    if pid.isdigit() and int(pid) != mine:
        try:
            if os.stat('/proc/' + pid).st_uid != 0:
                processes.append(open('/proc/%s/cmdline' % pid, 'rb').read().decode(errors='replace'))
        except OSError:
            processes.append('vanished ' + pid)
net = {}
for kind in ('tcp', 'tcp6', 'udp', 'udp6', 'unix', 'raw'):
    try:
        net[kind] = open('/proc/net/' + kind).read().splitlines()[1:]
    except OSError as exc:
        net[kind] = type(exc).__name__
print(json.dumps({
    'container': container(),
    'trees': {top: tree(top) for top in ('/tmp', '/work', '/dev/shm', '/dev/mqueue')},
    'xattrs': {top: xattrs(top) for top in ('/tmp', '/work')},
    'ipc': {kind: open('/proc/sysvipc/' + kind).read().splitlines()[1:] for kind in ('shm', 'sem', 'msg')},
    'processes': processes,
    'net': net,
    'environ': {k: v for k, v in os.environ.items() if k != 'HOSTNAME'},  # the container's name
    'cwd': os.getcwd(),
    'umask': os.umask(0o22),
    'stream_flags': [__import__('fcntl').fcntl(fd, __import__('fcntl').F_GETFL) for fd in (0, 1, 2)],
    'pipe_sizes': [__import__('fcntl').fcntl(fd, 1032) for fd in (0, 1, 2)],
    'stdin': sys.stdin.read(),
}))
"""

PLANT = r"""
import ctypes, os, signal, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
for top in ('/tmp', '/work', '/dev/shm'):
    for name in ('-rf', 'a\nb', ' ', '.hidden', 'x' * 255):
        open(os.path.join(top, name), 'w').write('state')
    deep = os.path.join(top, 'deep')
    path = deep
    for level in range(40):
        path = os.path.join(path, 'd%d' % level)
    os.makedirs(path)
    open(os.path.join(path, 'leaf'), 'w').write('state')
    locked = os.path.join(top, 'locked')
    os.mkdir(locked)
    open(os.path.join(locked, 'inside'), 'w').write('state')
    os.chmod(locked, 0)
    os.chmod(os.path.join(top, '-rf'), 0)
    os.symlink('/etc/passwd', os.path.join(top, 'link'))
    os.mkfifo(os.path.join(top, 'fifo'))
    with open(os.path.join(top, 'sparse'), 'wb') as fh:
        fh.truncate(32 << 20)
server = socket.socket(socket.AF_UNIX)
server.bind('/tmp/sock')
for top in ('/tmp', '/work'):
    try:
        os.setxattr(top, 'user.proctor', b'state')
    except OSError:
        pass
# The numba cache: one entry replaced by a file of our own, one added, the directory locked.
cache = os.environ['NUMBA_CACHE_DIR']
entries = [os.path.join(root, name) for root, _, names in os.walk(cache) for name in names]
os.unlink(entries[0])
open(entries[0], 'w').write('poisoned')
open(os.path.join(cache, 'extra.nbi'), 'w').write('poisoned')
os.chmod(cache, 0o500)
os.chmod('/work', 0o700)
os.chmod('/tmp', 0o755)
# POSIX message queue and System V IPC.
libc.mq_open.restype = ctypes.c_int
queue = libc.mq_open(b'/proctor-state', os.O_CREAT | os.O_RDWR, 0o600, None)
shm = libc.shmget(0x5eed, 4096, 0o1000 | 0o600)
sem = libc.semget(0x5eed, 1, 0o1000 | 0o600)
msg = libc.msgget(0x5eed, 0o1000 | 0o600)
# Processes: a setsid daemon that ignores SIGTERM, one that stopped itself, one renamed.
for kind in ('daemon', 'stopped', 'renamed'):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            if kind == 'stopped':
                os.kill(os.getpid(), signal.SIGSTOP)
            if kind == 'renamed':
                libc.prctl(15, b'kworker/0:1', 0, 0, 0)
            time.sleep(60)
        os._exit(0)
os.environ['PROCTOR_STATE'] = 'state'
os.umask(0)
# Status flags of the standard streams live in the open file description, which stdout and
# stderr share with the launcher: left non-blocking, they would fail the next program's writes.
import fcntl
for fd in (1, 2):
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK | os.O_APPEND)
fcntl.fcntl(1, 1031, 4096)  # F_SETPIPE_SZ: the pipe itself outlives the call
fcntl.fcntl(2, 1031, 1 << 20)
time.sleep(0.2)
container = open('/proc/self/cgroup').read().strip().rsplit('/', 1)[-1]
print(json.dumps({'ipc': [shm, sem, msg], 'queue': queue, 'container': container}))
"""


# runc-direct's containers rebuild the entrypoint's tree recorded once per template
# (sandbox/docker/prepare_once.py) where the docker path's run the entrypoint: the reset must prove the
# fresh state on both.
@pytest_asyncio.fixture(
    scope="module",
    loop_scope="module",
    params=["docker", pytest.param("runc-direct", marks=ROOT_AND_RUNC)],
)
async def recycling(sandbox_image: str, request: pytest.FixtureRequest) -> AsyncIterator[DockerSandbox]:
    opened = await open_docker_sandbox(
        image=sandbox_image,
        pool_size=1,
        default_limits=TEST_LIMITS,
        isolation="per-sample",
        engine_path=request.param,
    )
    assert opened.pool.recycling
    try:
        yield opened
    finally:
        await opened.aclose()


async def look(sandbox: DockerSandbox, stdin: str = "") -> dict[str, object]:
    # Settled first: the previous container's reset is over, so it is the one handed out next.
    assert await sandbox.settle(60)
    result = await sandbox.exec(LOOK, stdin=stdin, timeout=30)
    assert result.exit_code == 0, result
    found: dict[str, object] = json.loads(result.stdout)
    assert found["container"], "the container is not known: a same-container check would be vacuous"
    return found


async def fresh_look(sandbox: DockerSandbox) -> dict[str, object]:
    """What a never-used container shows (a pool of 1 whose every container was just made)."""
    per_call = await sandbox.exec(LOOK, timeout=30, limits=TEST_LIMITS.replace(pids=127))
    assert per_call.exit_code == 0, per_call
    found: dict[str, object] = json.loads(per_call.stdout)
    return found


def without_container(found: dict[str, object]) -> dict[str, object]:
    return {key: value for key, value in found.items() if key != "container"}


async def test_a_recycled_container_shows_nothing_of_the_previous_call(recycling: DockerSandbox) -> None:
    fresh = await fresh_look(recycling)
    planter = await recycling.exec("import json\n" + PLANT, timeout=30)
    assert planter.exit_code == 0, planter
    planted = json.loads(planter.stdout)
    assert all(ident >= 0 for ident in planted["ipc"]) and planted["queue"] >= 0, planted
    before = await look(recycling)  # the container the planter used, after its reset
    after = await look(recycling)
    assert planted["container"] == before["container"] == after["container"], "not a recycled container"
    assert without_container(before) == without_container(fresh)
    assert without_container(after) == without_container(fresh)


async def test_stdin_of_one_call_never_reaches_the_next(recycling: DockerSandbox) -> None:
    # The first call reads 10 bytes of its 3 MB, leaves a child that would read on, and exits.
    greedy = (
        "import os, sys, time\n"
        "print(os.read(0, 10))\n"
        "if os.fork() == 0:\n"
        "    time.sleep(0.5); os.read(0, 1 << 20); os._exit(0)\n"
    )
    assert await recycling.settle(60)
    first = await recycling.exec(greedy, stdin="s" * (3 << 20), timeout=30)
    assert first.stdout == "b'ssssssssss'\n", first
    second = await look(recycling, stdin="second call")
    assert second["stdin"] == "second call"
    third = await look(recycling)
    assert third["stdin"] == "" and third["container"] == second["container"]


async def test_forged_ready_markers_and_reports_change_nothing(recycling: DockerSandbox) -> None:
    forge = (
        "import os\n"
        "for fd in (1, 2):\n"
        "    os.write(fd, b'\\0proctor-ready\\0')\n"
        "    os.write(fd, b'\\0proctor-exit:' + b'0' * 32 + b':0:0:1\\0')\n"
        "raise SystemExit(9)\n"
    )
    for _ in range(3):
        forged = await recycling.exec(forge, timeout=30)
        assert forged.exit_code == 9 and "proctor-ready" in forged.stdout, forged
        assert (await look(recycling))["stdin"] == ""


LEAVES_KERNEL_STATE = {
    # A closed TCP connection lingers in TIME_WAIT in the container's network namespace.
    "time_wait": (
        "import socket\n"
        "server = socket.create_server(('127.0.0.1', 0))\n"
        "client = socket.create_connection(server.getsockname())\n"
        "peer, _ = server.accept()\n"
        "client.close(); peer.close(); server.close()\n"
    ),
    # Deeper than the reset's own recursion may go: the reset fails, it must not half-clean.
    "too_deep": (
        "import os\n"
        "os.chdir('/work')\n"
        "for level in range(1500):\n"
        "    os.mkdir('d'); os.chdir('d')\n"
        "open('leaf', 'w').write('state')\n"
    ),
    "oom": "x = b'x' * (1 << 30)\n",
}


@pytest.mark.parametrize("attack", sorted(LEAVES_KERNEL_STATE))
async def test_what_a_reset_cannot_clear_retires_the_container(recycling: DockerSandbox, attack: str) -> None:
    assert await recycling.settle(60)
    marker = "import os\nprint(open('/proc/self/cgroup').read().strip().rsplit('/', 1)[-1])\n"
    used = await recycling.exec(marker + LEAVES_KERNEL_STATE[attack], timeout=30)
    if attack == "oom":
        assert used.oom_killed, used
    else:
        assert used.exit_code == 0, used
    after = await look(recycling)
    assert after["container"] != used.stdout.strip()
    assert after["net"] == {kind: [] for kind in ("tcp", "tcp6", "udp", "udp6", "unix", "raw")}
    assert list(after["trees"]["/work"]) == ["/work/."]  # type: ignore[call-overload]
    # An OOM-killed call is reported once, never again by the calls after it.
    assert not (await recycling.exec("print(1)", timeout=30)).oom_killed


async def test_a_timed_out_call_retires_its_container(recycling: DockerSandbox) -> None:
    assert await recycling.settle(60)
    spun = await recycling.exec(
        "print(open('/proc/self/cgroup').read().strip().rsplit('/', 1)[-1], flush=True)\nwhile True: pass\n",
        timeout=2,
    )
    assert spun.timed_out, spun
    after = await look(recycling)
    assert after["container"] != spun.stdout.strip()


# Deep in the numba cache only, no regular file: the reset's quick comparison must notice it.
WITHOUT_REGULAR_FILES = r"""
import os
cache = os.environ['NUMBA_CACHE_DIR']
links = [os.path.join(root, name) for root, _, names in os.walk(cache) for name in names]
os.unlink(links[0])
os.symlink('/etc/passwd', links[0])
for root, dirs, _ in os.walk(cache):
    for name in dirs:
        try:
            os.setxattr(os.path.join(root, name), 'user.proctor', b'state')
        except OSError:
            pass
os.chmod(cache, 0o700)
os.chmod(cache, 0o755)
print(open('/proc/self/cgroup').read().strip().rsplit('/', 1)[-1])
"""


async def test_changes_without_regular_files_are_still_reset(recycling: DockerSandbox) -> None:
    fresh = await fresh_look(recycling)
    assert await recycling.settle(60)
    used = await recycling.exec(WITHOUT_REGULAR_FILES, timeout=30)
    assert used.exit_code == 0, used
    after = await look(recycling)
    assert after["container"] == used.stdout.strip()
    assert without_container(after) == without_container(fresh)


# The times a program can set on the writable roots: directly on the roots it owns, by the
# moment it last added or removed an entry on root's (/dev/shm, /dev/mqueue). Each carried a
# value of the program's choosing to the same sample's next call (issue 41).
ROOTS = ("/tmp", "/work", "/dev/shm", "/dev/mqueue")
ROOT_TIMES = (
    "import json, os\n"
    "print(json.dumps({'container': open('/proc/self/cgroup').read().strip().rsplit('/', 1)[-1],\n"
    f"                  'mtime': {{top: os.lstat(top).st_mtime_ns for top in {ROOTS!r}}}}}))\n"
)
SET_ROOT_TIMES = r"""
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
os.utime('/tmp', ns=(111_000_000_001, 222_000_000_002))
os.utime('/work', ns=(333_000_000_003, 444_000_000_004))
time.sleep(0.3)  # a moment of the program's choosing, after the call's own start
open('/dev/shm/moment', 'w').close()
os.unlink('/dev/shm/moment')
libc.mq_open.restype = ctypes.c_int
queue = libc.mq_open(b'/moment', os.O_CREAT | os.O_RDWR, 0o600, None)
assert queue >= 0 and libc.mq_unlink(b'/moment') == 0
"""


async def test_a_reset_sets_back_every_time_a_program_set_on_the_writable_roots(
    recycling: DockerSandbox,
) -> None:
    assert await recycling.settle(60)
    first = await recycling.exec(ROOT_TIMES, timeout=30)
    assert first.exit_code == 0, first
    before = json.loads(first.stdout)
    assert await recycling.settle(60)
    planted = await recycling.exec(SET_ROOT_TIMES + ROOT_TIMES, timeout=30)
    assert planted.exit_code == 0, planted
    during = json.loads(planted.stdout)
    assert during["container"] == before["container"], "not a recycled container"
    # The attack took: every root's time was the program's while it ran.
    assert all(during["mtime"][top] != before["mtime"][top] for top in ROOTS), (before, during)
    after = await look_times(recycling)
    assert after["container"] == before["container"], "not a recycled container"
    assert after["mtime"] == before["mtime"]


async def look_times(sandbox: DockerSandbox) -> dict[str, Any]:
    assert await sandbox.settle(60)
    result = await sandbox.exec(ROOT_TIMES, timeout=30)
    assert result.exit_code == 0, result
    found: dict[str, Any] = json.loads(result.stdout)
    return found


async def test_by_default_every_call_gets_a_container_no_call_used_before(sandbox_image: str) -> None:
    """Recycling is opt-in: the default pool hands each call a container that ran nothing, even
    for back-to-back calls of one caller that wrote nothing (the case a reset would skip)."""
    opened = await open_docker_sandbox(image=sandbox_image, pool_size=1, default_limits=TEST_LIMITS)
    try:
        assert not opened.pool.recycling and opened.describe()["pool_recycles"] is False
        seen = []
        for _ in range(4):
            result = await opened.exec(LOOK + "\nprint(json.dumps(container()))\n", timeout=20)
            assert result.exit_code == 0, result
            seen.append(json.loads(result.stdout.strip().splitlines()[-1]))
        assert None not in seen and len(set(seen)) == 4, seen
    finally:
        await opened.aclose()


async def test_a_recycled_container_never_serves_another_caller(recycling: DockerSandbox) -> None:
    """Counters a reset cannot undo must never link two samples: caller A's container, reset and
    idle, is never handed to caller B (B gets a container that ran nothing), while A gets its own
    back (so the test cannot pass because the pool simply stopped recycling)."""
    where = LOOK + "\nprint(json.dumps(container()))\n"

    async def container_of(caller: str) -> str:
        assert await recycling.settle(60)
        with execution_caller(caller):
            result = await recycling.exec(where, timeout=30)
        assert result.exit_code == 0, result
        found: str = json.loads(result.stdout.strip().splitlines()[-1])
        return found

    first_a = await container_of("sample-a")
    again_a = await container_of("sample-a")
    assert again_a == first_a  # recycled for its own caller
    seen_by_b = {await container_of("sample-b") for _ in range(3)}
    assert first_a not in seen_by_b
