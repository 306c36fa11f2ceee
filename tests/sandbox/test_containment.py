"""A hostile program against what enforces its limits (docker backend, real engine).

The program knows our source: the launcher is its parent, docker-init is PID 1, the exit
report's format is in sandbox/docker/launcher.py. It tries to stop, kill, trace and read them,
forge the report, and outlive the call, both with its controller alive (the result must be
the truth) and with its controller SIGKILLed (the container must still stop by its deadline
plus the launcher's grace, with no cleanup run, and the next proctor command removes it).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pytest_asyncio

from proctor.sandbox import Sandbox, open_sandbox
from proctor.sandbox.docker import labels as sandbox_labels
from proctor.sandbox.docker import oci_direct
from proctor.sandbox.docker.containers import BACKSTOP_GRACE_S, CONTAINER_UID_BASE, CONTAINER_UID_SPAN
from tests.sandbox.conftest import (
    DOCKER_RUNTIMES,
    TEST_LIMITS,
    container_processes_gone,
    host_processes_of_container,
    run_proctor,
)
from tests.sandbox.test_conformance import (
    assert_call_left_nothing,
    host_processes_by_token,
    host_processes_with,
)

pytestmark = pytest.mark.docker

# Every way an unprivileged process can reach another one, tried on the launcher (its parent)
# and on docker-init (PID 1); each attempt's outcome is printed as JSON.
ATTACKS = r"""
import ctypes, errno, json, os, resource, signal
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
targets = {'launcher': os.getppid(), 'init': 1}
OWN_ENVIRONMENT = set(open('/proc/self/environ', 'rb').read().split(b'\0'))
found = {}
def attempt(name, action):
    try:
        result = action()
        found[name] = 'ok' if result in (None, 0) or (isinstance(result, int) and result > 0) else result
    except OSError as exc:
        found[name] = errno.errorcode.get(exc.errno, str(exc.errno))
def ctypes_call(result):
    return errno.errorcode.get(ctypes.get_errno(), 'ok') if result == -1 else 'ok'
for who, pid in targets.items():
    for sig in (signal.SIGSTOP, signal.SIGKILL, signal.SIGTERM, signal.SIGALRM):
        attempt(f'kill {who} {sig.name}', lambda: os.kill(pid, sig))
    found[f'ptrace attach {who}'] = ctypes_call(libc.ptrace(16, pid, None, None))
    found[f'ptrace seize {who}'] = ctypes_call(libc.ptrace(0x4206, pid, None, None))
    def pidfd_kill(pid=pid):
        fd = os.pidfd_open(pid)
        return ctypes_call(libc.syscall(424, fd, signal.SIGKILL, None, 0))
    attempt(f'pidfd_send_signal {who}', pidfd_kill)
    attempt(f'read mem {who}', lambda: open(f'/proc/{pid}/mem', 'rb').read(1))
    # gVisor lets any uid read another's environ: there it must hold nothing but the program's own.
    attempt(f'read environ {who}', lambda: 'own environment only'
            if set(open(f'/proc/{pid}/environ', 'rb').read().split(b'\0')) <= OWN_ENVIRONMENT else 'READ')
    attempt(f'list fd {who}', lambda: os.listdir(f'/proc/{pid}/fd'))
    def open_fds(pid=pid):
        refused = None
        for n in range(3):
            try:
                os.close(os.open(f'/proc/{pid}/fd/{n}', os.O_RDONLY | os.O_NONBLOCK))
                return f'opened fd {n}'
            except OSError as exc:
                refused = exc
        raise refused
    attempt(f'open fds {who}', open_fds)
    attempt(f'list root {who}', lambda: os.listdir(f'/proc/{pid}/root/'))
    attempt(f'prlimit {who}', lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (0, 0)) and None)
attempt('kill -1 SIGSTOP', lambda: os.kill(-1, signal.SIGSTOP))
attempt('setuid 0', lambda: os.setuid(0))
try:  # a core dump of itself is harmless; the point is that the hard limit holds
    resource.setrlimit(resource.RLIMIT_CORE, (1 << 20, 1 << 20))
    found['raise core limit'] = 'ok'
except (OSError, ValueError):
    found['raise core limit'] = 'refused'
# A user namespace would give it every capability there (useless outside, and refused here).
found['unshare user namespace'] = ctypes_call(libc.unshare(0x10000000))
status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())
shown = ('CapEff', 'CapPrm', 'CapBnd', 'CapAmb', 'NoNewPrivs')
found['self'] = {k: status.get(k, 'absent').strip() for k in shown}
found['self']['no_new_privs (prctl)'] = libc.prctl(39, 0, 0, 0, 0)
found['self']['uid'] = os.getresuid()
found['self']['groups'] = os.getgroups()
print(json.dumps(found))
"""


# Every runtime, and runc with each container started by runc from the engine's spec
# (sandbox.engine_path runc-direct, sandbox/docker/oci_direct.py): "runc-direct" here.
RUNC_DIRECT = "runc-direct"
DOCKER_WAYS = [*DOCKER_RUNTIMES, pytest.param(RUNC_DIRECT, marks=pytest.mark.docker)]


def _open_args(runtime: str) -> dict[str, str]:
    if runtime == RUNC_DIRECT:
        return {"runtime": "runc", "engine_path": RUNC_DIRECT}
    # The engine's path is named: auto, the default, would take runc-direct for runc as well.
    return {"runtime": runtime, "engine_path": "docker"}


@pytest.fixture(scope="module", params=DOCKER_WAYS)
def runtime(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def docker_sandbox(sandbox_image: str, runtime: str) -> AsyncIterator[Sandbox]:
    opened = await open_sandbox(
        "docker", image=sandbox_image, pool_size=1, default_limits=TEST_LIMITS, **_open_args(runtime)
    )
    try:
        yield opened
    finally:
        await opened.aclose()


@pytest.mark.asyncio(loop_scope="module")
async def test_program_cannot_signal_trace_or_read_the_launcher_or_init(
    docker_sandbox: Sandbox, runtime: str
) -> None:
    result = await docker_sandbox.exec(ATTACKS + "raise SystemExit(5)\n", timeout=20)
    assert result.exit_code == 5 and not result.timed_out, result
    found = json.loads(result.stdout)
    for who in ("launcher", "init"):
        for name in ("SIGSTOP", "SIGKILL", "SIGTERM", "SIGALRM"):
            assert found[f"kill {who} {name}"] == "EPERM", found
        assert found[f"ptrace attach {who}"] == "EPERM", found
        assert found[f"ptrace seize {who}"] == "EPERM", found
        # gVisor has no pidfd_open (ENOSYS): the route does not exist there at all.
        assert found[f"pidfd_send_signal {who}"] in ("EPERM", *(("ENOSYS",) if runtime == "runsc" else ())), (
            found
        )
        # gVisor lists another uid's descriptors; opening any of them is what matters.
        listed = ("list fd",) if runtime == "runsc" else ()
        for name in ("read mem", "list fd", "open fds", "list root", "prlimit"):
            if name not in listed:
                assert found[f"{name} {who}"] in ("EACCES", "EPERM"), (name, who, found)
        # Under gVisor the environment is readable, and holds only what the program has itself.
        readable = ("own environment only",) if runtime == "runsc" else ()
        assert found[f"read environ {who}"] in ("EACCES", "EPERM", *readable), (who, found)
    # kill(-1) reaches only the program's own processes (it has none): nothing else to stop.
    assert found["kill -1 SIGSTOP"] in ("ok", "ESRCH"), found
    assert found["setuid 0"] == "EPERM", found
    assert found["raise core limit"] == "refused", found
    assert found["unshare user namespace"] in ("EPERM", "EINVAL", "ENOSPC"), found
    # gVisor's /proc/self/status has no CapAmb or NoNewPrivs line; prctl is what is enforced.
    absent_under_gvisor = "absent" if runtime == "runsc" else None
    assert found["self"] == {
        "CapEff": "0000000000000000",
        "CapPrm": "0000000000000000",
        "CapBnd": "0000000000000000",
        "CapAmb": absent_under_gvisor or "0000000000000000",
        "NoNewPrivs": absent_under_gvisor or "1",
        "no_new_privs (prctl)": 1,
        "uid": found["self"]["uid"],
        "groups": [],
    }
    # A host uid of the container's own (never root, never the image's shared 10001).
    uids = set(found["self"]["uid"])
    assert len(uids) == 1 and CONTAINER_UID_BASE <= uids.pop() < CONTAINER_UID_BASE + CONTAINER_UID_SPAN, (
        found
    )


HOG = """
import ctypes, json, time
libc = ctypes.CDLL(None, use_errno=True)
held = []
while len(held) < 100000:
    fd = libc.inotify_init()
    if fd < 0:
        break
    held.append(fd)
began = time.monotonic()
time.sleep(8)
print(json.dumps({'held': len(held), 'from': began, 'to': time.monotonic()}))
"""
VICTIM = """
import ctypes, errno, json, os, time
libc = ctypes.CDLL(None, use_errno=True)
tries, refused, began = 0, [], time.monotonic()
while time.monotonic() - began < 8:
    fd = libc.inotify_init()
    tries += 1
    if fd < 0:
        refused.append(errno.errorcode.get(ctypes.get_errno(), '?'))
    else:
        os.close(fd)
    time.sleep(0.05)
print(json.dumps({'tries': tries, 'refused': refused, 'from': began, 'to': time.monotonic()}))
"""


@pytest.mark.asyncio(loop_scope="module")
async def test_a_call_cannot_exhaust_per_uid_kernel_quotas_of_calls_beside_it(
    docker_sandbox: Sandbox, runtime: str
) -> None:
    # inotify instances (128), message-queue bytes, queued signals, pipe pages are counted per
    # host uid. With one uid in every container, a call holding all 128 inotify instances made
    # inotify_init() fail (EMFILE) in every other container running at the time.
    if runtime == "runsc":
        pytest.skip("under gVisor each sandbox has a kernel (and uid accounting) of its own")
    hog, victim = await asyncio.gather(
        docker_sandbox.exec(HOG, timeout=40), docker_sandbox.exec(VICTIM, timeout=40)
    )
    assert hog.exit_code == 0 and victim.exit_code == 0, (hog, victim)
    held, tried = json.loads(hog.stdout), json.loads(victim.stdout)
    assert held["held"] >= 100, held  # the hog really took the per-uid quota
    # The calls overlapped (CLOCK_MONOTONIC is the host's under runc), so the test is not vacuous.
    assert max(held["from"], tried["from"]) < min(held["to"], tried["to"]), (held, tried)
    assert tried["refused"] == [], tried


FORGE = r"""
import os, sys, secrets
# The format from sandbox/docker/containers.py, with every nonce the program could guess.
for nonce in (secrets.token_hex(16), '0' * 32, 'f' * 32):
    for code, oom in ((0, 0), (0, 1), (42, 0)):
        line = ('\0proctor-exit:%s:%d:%d:1\0' % (nonce, code, oom)).encode()
        os.write(1, line)
        os.write(2, line)
"""


@pytest.mark.asyncio(loop_scope="module")
async def test_a_forged_exit_report_is_program_output_not_the_result(docker_sandbox: Sandbox) -> None:
    exited = await docker_sandbox.exec(FORGE + "raise SystemExit(7)\n", timeout=20)
    assert (exited.exit_code, exited.timed_out, exited.oom_killed) == (7, False, False), exited
    assert exited.stdout.count("proctor-exit:") == 9 and exited.stderr.count("proctor-exit:") == 9
    spun = await docker_sandbox.exec(FORGE + "while True: pass\n", timeout=2)
    assert spun.timed_out and spun.exit_code is None and not spun.oom_killed, spun


@pytest.mark.asyncio(loop_scope="module")
async def test_program_cannot_starve_the_report_with_its_own_rlimits(docker_sandbox: Sandbox) -> None:
    code = (
        "import os, resource\n"
        "for limit in (resource.RLIMIT_NOFILE, resource.RLIMIT_FSIZE, resource.RLIMIT_NPROC):\n"
        "    resource.setrlimit(limit, (0, 0))\n"
        "os.kill(os.getpid(), 9)\n"
    )
    result = await docker_sandbox.exec(code, timeout=20)
    assert (result.exit_code, result.timed_out, result.oom_killed) == (137, False, False), result


@pytest.mark.asyncio(loop_scope="module")
async def test_non_blocking_streams_left_by_the_program_cannot_break_the_report(
    docker_sandbox: Sandbox,
) -> None:
    # stdout and stderr share their open file description (and so O_NONBLOCK) with the
    # launcher. Left non-blocking and full as the program dies, they made the launcher's report
    # fail with EAGAIN: the launcher died, exit 120 was reported instead of 5 (under runsc, a
    # "crashed gVisor" sandbox error). Several rounds, since the pipe must still be full.
    code = (
        "import fcntl, os\n"
        "for fd in (1, 2):\n"
        "    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)\n"
        "for fd in (1, 2):\n"
        "    try:\n"
        "        while True:\n"
        "            os.write(fd, b'x' * 65536)\n"
        "    except BlockingIOError:\n"
        "        pass\n"
        "os._exit(5)\n"
    )
    for _ in range(4):
        result = await docker_sandbox.exec(code, timeout=30)
        assert (result.exit_code, result.timed_out, result.oom_killed) == (5, False, False), (
            result.exit_code,
            result.stderr[-300:].replace("x", ""),
        )
        assert set(result.stdout) == set(result.stderr) == {"x"}


@pytest.mark.asyncio(loop_scope="module")
async def test_dev_shm_bounds_its_inodes_like_every_other_writable_tmpfs(
    docker_sandbox: Sandbox, runtime: str
) -> None:
    # The engine's own /dev/shm had no nr_inodes: three million empty files, each costing
    # kernel memory but no byte of the size limit. Ours is bounded like /tmp and /work.
    code = (
        "import errno, json, os\n"
        "st = {p: os.statvfs(p).f_files for p in ('/tmp', '/work', '/dev/shm')}\n"
        "made, error = 0, None\n"
        "try:\n"
        "    for i in range(40000):\n"
        "        os.close(os.open('/dev/shm/%d' % i, os.O_CREAT | os.O_WRONLY, 0o600))\n"
        "        made += 1\n"
        "except OSError as exc:\n"
        "    error = errno.errorcode.get(exc.errno, str(exc.errno))\n"
        "print(json.dumps({'inodes': st, 'made': made, 'error': error}))\n"
    )
    result = await docker_sandbox.exec(code, timeout=60)
    assert result.exit_code == 0, result
    found = json.loads(result.stdout)
    if runtime == "runsc":
        # gVisor ignores nr_inodes (docs/sandbox.md): its files live in the sentry's memory,
        # which the container's memory limit bounds. The mount is still ours, sized.
        return
    shm_bound = min(64 * 1024 * 1024, TEST_LIMITS.tmpfs_bytes) // 4096
    assert 0 < found["inodes"]["/dev/shm"] <= max(1024, shm_bound), found
    assert found["error"] == "ENOSPC" and found["made"] < found["inodes"]["/dev/shm"], found


@pytest.mark.asyncio(loop_scope="module")
async def test_late_writers_and_daemons_die_with_the_call(docker_sandbox: Sandbox) -> None:
    token = f"late-{uuid.uuid4().hex}"
    code = (
        f"# {token}\n"
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(1.5)\n"
        "        os.write(1, b'LATE\\n')\n"
        "        os._exit(0)\n"
        "    os._exit(0)\n"
        "print('parent done', flush=True)\n"
    )
    result = await docker_sandbox.exec(code, timeout=20)
    assert result.exit_code == 0 and result.stdout == "parent done\n", result
    await asyncio.sleep(2)  # past the grandchild's late write
    assert not host_processes_with(token)
    await assert_call_left_nothing(result)


# -- the controller SIGKILLed: nobody reads, nobody cleans up -----------------------------

TIMEOUT_S = 2


def _containers_by_owner(owner_pids: list[int], runtime: str = "runc") -> dict[int, list[dict[str, object]]]:
    """Each owner's containers (ID and state), from one listing for all of them."""
    from proctor.sandbox.docker.runtimes import connect_engine_for

    found: dict[int, list[dict[str, object]]] = {pid: [] for pid in owner_pids}
    if runtime == RUNC_DIRECT:
        # No engine knows them: runc's own state, under Proctor's runc root, by owner in the name.
        for path in oci_direct.RUNC_ROOT.glob(f"{oci_direct.NAME_PREFIX}*"):
            match = oci_direct.NAME.fullmatch(path.name)
            if match and int(match.group(1)) in found:
                found[int(match.group(1))].append({"Id": path.name, "State": oci_direct.state(path.name)})
        return found

    engine = connect_engine_for(runtime)
    try:
        for container in engine.client.api.containers(
            all=True, filters={"label": [sandbox_labels.LABEL_FILTER]}
        ):
            owner = (container.get("Labels") or {}).get(sandbox_labels.OWNER_PID, "")
            if owner.isdigit() and int(owner) in found:
                found[int(owner)].append(container)
    finally:
        engine.client.close()
    return found


def _wait_for(predicate: Callable[[], object], within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


HOSTILE_PROGRAMS = {
    "stops-traces-and-reads": ATTACKS + "import time\ntime.sleep(600)\n",
    "forges-then-spins": FORGE + "while True: pass\n",
    "daemonises-late-writers": (
        "import os, time\n"
        "for _ in range(3):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            while True:\n"
        "                time.sleep(0.5)\n"
        "                os.write(1, b'still here\\n')\n"
        "        os._exit(0)\n"
        "time.sleep(600)\n"
    ),
    "fork-bomb": (
        "import os, time\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError:\n"
        "        time.sleep(0.5)\n"
    ),
    "thread-bomb": (
        "import threading, time\n"
        "while True:\n"
        "    try:\n"
        "        threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
        "    except RuntimeError:\n"
        "        time.sleep(0.5)\n"
    ),
}


@dataclass
class _Hostile:
    """One hostile program under a controller of its own, and what was seen of it."""

    name: str
    token: str
    controller: subprocess.Popen[bytes]
    started: float | None = None  # when it was seen handed over
    killed: bool = False  # its controller, SIGKILLed
    container_ids: list[str] = field(default_factory=list)  # runsc: its containers seen running
    stopped_at: float | None = None  # when first seen with no container running
    left_processes: list[int] = field(default_factory=list)  # with its token, at that moment


@pytest.mark.parametrize("runtime", DOCKER_WAYS)
def test_killed_controllers_containers_stop_by_their_deadline_and_are_swept(
    runtime: str, sandbox_image: str, tmp_path: Path
) -> None:
    # Every hostile program at once, each under a controller of its own that is SIGKILLed once
    # its program runs. Each is watched on its own: its bound counts from when it started.
    # The launcher's backstop: the deadline plus its grace, from when the program was handed
    # over (a little before we saw it), with headroom for a loaded two-core machine.
    bound_s = math.ceil(TIMEOUT_S + BACKSTOP_GRACE_S) + 6
    hostiles: list[_Hostile] = []
    last: dict[int, list[dict[str, object]]] = {}
    try:
        for name in sorted(HOSTILE_PROGRAMS):
            token = f"hostile-{uuid.uuid4().hex}"
            program = tmp_path / f"{name}.py"
            program.write_text(f"# {token}\n{HOSTILE_PROGRAMS[name]}")
            controller = subprocess.Popen(
                [
                    *("proctor", "sandbox", "exec", "--backend", "docker", "--image", sandbox_image),
                    *(
                        ("--runtime", "runc", "--engine-path", RUNC_DIRECT)
                        if runtime == RUNC_DIRECT
                        else ("--runtime", runtime, "--engine-path", "docker")
                    ),
                    *("--timeout", str(TIMEOUT_S), "--memory", "256m", str(program)),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            hostiles.append(_Hostile(name, token, controller))
        start_deadline = time.monotonic() + 60

        def watched() -> list[_Hostile]:
            """Killed, not yet seen stopped, and still within its bound."""
            now = time.monotonic()
            return [
                h
                for h in hostiles
                if h.killed and h.stopped_at is None and now - (h.started or now) <= bound_s + 1
            ]

        while not all(h.killed for h in hostiles) or watched():
            waiting = [h for h in hostiles if h.started is None]
            if waiting and time.monotonic() > start_deadline:
                if runtime == "runsc":
                    raise AssertionError(
                        f"the container of the hostile program {waiting[0].name} never started"
                    )
                raise AssertionError(f"the hostile program {waiting[0].name} never started")
            polled = [h for h in (*waiting, *watched()) if runtime == "runsc" or h.killed]
            if polled:
                last = _containers_by_owner([h.controller.pid for h in polled], runtime)
            if waiting and runtime == "runsc":
                # gVisor's processes never show in the host's /proc: the program has been
                # handed over once its container runs (the launcher is ready a moment after).
                for h in waiting:
                    running = [c for c in last[h.controller.pid] if c.get("State") == "running"]
                    if running:
                        h.container_ids = [str(c["Id"]) for c in running]
                        h.started = time.monotonic() + 1.5
            elif waiting:
                seen = host_processes_by_token([h.token for h in waiting])
                for h in waiting:
                    if seen[h.token]:
                        h.started = time.monotonic()
            stopped = [
                h
                for h in polled
                if h.killed and all(c.get("State") != "running" for c in last[h.controller.pid])
            ]
            if stopped:
                seen_at = time.monotonic()
                left = host_processes_by_token([h.token for h in stopped])
                for h in stopped:
                    h.stopped_at, h.left_processes = seen_at, left[h.token]
            for h in hostiles:
                # Its controller dies once the program has had time to launch its attack.
                if h.started is not None and not h.killed and time.monotonic() >= h.started + 0.3:
                    os.kill(h.controller.pid, signal.SIGKILL)
                    h.controller.wait()
                    h.killed = True
            time.sleep(0.05)
    finally:
        for h in hostiles:
            if h.controller.poll() is None:
                os.kill(h.controller.pid, signal.SIGKILL)
            h.controller.wait()
    for h in hostiles:
        assert h.started is not None and h.stopped_at is not None, (
            f"the container of {h.name} outlived its deadline: {last.get(h.controller.pid)}"
        )
        assert h.stopped_at - h.started <= bound_s + 1, (h.name, h.stopped_at - h.started)
        assert not h.left_processes, f"processes of {h.name} outlived its container: {h.left_processes}"
    for h in hostiles:  # runsc: the sentry, and so every process in it, is gone
        for container_id in h.container_ids:
            remaining_s = max(0.0, (h.stopped_at or 0.0) + 15 - time.monotonic())
            assert container_processes_gone(container_id, remaining_s), (
                h.name,
                host_processes_of_container(container_id),
            )
    # Any later proctor command removes the stopped leftovers (no cleanup command run), on
    # gVisor's engine too.
    completed = run_proctor("sandbox", "exec", str(tmp_path / "absent.py"))
    assert completed.returncode == 2, completed
    owners = {h.controller.pid: h for h in hostiles}
    remaining: dict[int, list[dict[str, object]]] = {}

    def swept() -> bool:
        remaining.clear()
        remaining.update(
            (pid, found) for pid, found in _containers_by_owner(list(owners), runtime).items() if found
        )
        return not remaining

    if not _wait_for(swept, 10):
        pid, found = next(iter(remaining.items()))
        raise AssertionError(f"the stopped container of {owners[pid].name} was not swept: {found}")


def test_the_sweep_removes_a_stopped_orphan_and_keeps_a_live_owners_container(sandbox_image: str) -> None:
    import docker
    from docker.errors import NotFound

    from proctor.sandbox.api import Limits
    from proctor.sandbox.docker.cleanup import sweep_stopped_orphans
    from proctor.sandbox.docker.containers import create_started_container, remove_container

    client = docker.from_env()
    finished = subprocess.Popen(["true"])
    finished.wait()

    def labels(owner_pid: int) -> dict[str, str]:
        made = sandbox_labels.container_labels(sandbox_labels.new_run_id(), "call")
        return {**made, sandbox_labels.OWNER_PID: str(owner_pid)}

    def exists(container_id: str) -> bool:
        try:
            client.api.inspect_container(container_id)
        except NotFound:
            return False
        return True

    def stopped(container_id: str) -> bool:
        return not exists(container_id) or not client.api.inspect_container(container_id)["State"]["Running"]

    # The orphan is only created, never started: a container of a dead owner is fair game for
    # every sweep, the other test workers' included, and one of theirs could remove it between
    # create and start. Created and never started counts as stopped, as a controller killed in
    # between would leave it.
    orphan_id = str(
        client.api.create_container(sandbox_image, command=["true"], labels=labels(finished.pid))["Id"]
    )
    live = create_started_container(client.api, sandbox_image, Limits(), labels(os.getpid()), "10001")
    try:
        live.close()  # stdin closes: the waiting launcher exits, the container stops
        assert _wait_for(lambda: stopped(live.id), 30)
        sweep_stopped_orphans(client)
        assert not exists(orphan_id)
        assert exists(live.id), "the sweep removed a live owner's container"
    finally:
        for container_id in (orphan_id, live.id):
            remove_container(client.api, container_id)


class FakeEngine:
    """Just the two calls the sweep makes, over a fixed list of container summaries."""

    def __init__(self, summaries: list[dict[str, object]]) -> None:
        self.summaries = summaries
        self.removed: list[str] = []
        self.api = self

    def containers(self, **_: object) -> list[dict[str, object]]:
        return self.summaries

    def remove_container(self, container_id: str, **_: object) -> None:
        self.removed.append(container_id)


@pytest.mark.parametrize(
    ("state", "age_s", "owner", "role", "removed"),
    [
        ("exited", 10, "dead", "call", True),
        ("created", 10, "dead", "call", True),
        ("running", 10, "dead", "call", False),  # within its deadline: its launcher's backstop ends it
        ("running", 10, "dead", "pool", False),
        ("running", 26 * 3600, "dead", "call", True),  # past any deadline
        # runc-direct's template container never gets a program, so no deadline stops it: a dead
        # owner's goes at once (issue 41: it outlived every sweep).
        ("running", 10, "dead", "template", True),
        ("running", 10, "alive", "template", False),
        ("running", 10, "other host", "template", False),
        ("exited", 10, "alive", "call", False),
        ("running", 26 * 3600, "alive", "call", False),
        ("exited", 10, "other host", "call", False),
    ],
)
def test_the_sweep_rule(state: str, age_s: float, owner: str, role: str, removed: bool) -> None:
    from proctor.sandbox.docker.cleanup import sweep_stopped_orphans

    finished = subprocess.Popen(["true"])
    finished.wait()
    made = sandbox_labels.container_labels("run", role)
    made[sandbox_labels.OWNER_PID] = str(os.getpid() if owner == "alive" else finished.pid)
    if owner == "other host":
        made[sandbox_labels.OWNER_HOST] = "another-machine"
    engine = FakeEngine([{"Id": "c1", "State": state, "Created": time.time() - age_s, "Labels": made}])
    assert sweep_stopped_orphans(engine) == (["c1"] if removed else [])  # type: ignore[arg-type]
    assert engine.removed == (["c1"] if removed else [])
