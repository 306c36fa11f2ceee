"""The conformance suite: every property the sandbox promises, checked against every backend.

Every case here is a coroutine over the backend-parametrized ``sandbox`` fixture (with
``backend_name`` and ``sandbox_runtime`` where a backend genuinely differs, saying why), and
nothing else is: :func:`conformance_cases` hands the whole suite to another backend's module,
so tests/ray/test_ray_cluster.py runs every case here again through Ray, a case added later
included. Tests of one backend's own machinery live beside it (test_docker_lifecycle.py).

Docker cases carry the ``docker`` mark through the backend parameter; the local backend
(bubblewrap) runs wherever bwrap is installed. Where a property cannot hold for the local
backend the test says why it skips: only the pinned image's libraries, which it does not have.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from proctor.sandbox import ExecResult, Sandbox, SandboxError
from tests.sandbox.conftest import TEST_LIMITS, container_processes_gone

pytestmark = pytest.mark.asyncio(loop_scope="session")

PINS = {
    "galois": "0.4.4",
    "gmpy2": "2.2.1",
    "mpmath": "1.3.0",
    "networkx": "3.4.2",
    "numpy": "2.1.3",
    "pyadic": "0.2.3",
    "scipy": "1.15.2",
    "sympy": "1.13.3",
}
SHORT = 2.0  # seconds: the timeout used by every case that must be killed


def host_processes_by_token(tokens: list[str]) -> dict[str, list[int]]:
    """PIDs on the host whose command line mentions each token (containers share the kernel),
    from one pass over the host's /proc."""
    found: dict[str, list[int]] = {token: [] for token in tokens}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        for token in tokens:
            if token.encode() in cmdline:
                found[token].append(int(entry.name))
    return found


def host_processes_with(token: str) -> list[int]:
    """PIDs on the host whose command line mentions ``token``."""
    return host_processes_by_token([token])[token]


def processes_gone(token: str, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while host_processes_with(token):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def conformance_cases() -> dict[str, Callable[..., Any]]:
    """Every case of this suite, by name, in file order (another backend's module runs them all)."""
    module = sys.modules[__name__]
    return {
        name: case
        for name, case in vars(module).items()
        if name.startswith("test_") and inspect.iscoroutinefunction(case)
    }


async def assert_call_left_nothing(result: ExecResult) -> None:
    """Under runsc, no host process serves the call's container any more (its sentry, which
    holds every process of the call, is gone); the token search alone sees nothing there."""
    if result.extra.get("runtime") == "runsc":
        container_id = str(result.extra["container_id"])
        assert await asyncio.to_thread(container_processes_gone, container_id, 15.0), container_id


async def run_json(sandbox: Sandbox, code: str, **kwargs: object) -> dict[str, object]:
    result = await sandbox.exec(code, **kwargs)  # type: ignore[arg-type]
    assert result.exit_code == 0, result
    return json.loads(result.stdout)


async def test_pins_are_exactly_the_listed_versions(sandbox: Sandbox, backend_name: str) -> None:
    if backend_name == "local":
        pytest.skip("the local backend runs the host's Python and libraries, not the pinned image")
    code = (
        "import importlib.metadata as m, json, sys\n"
        f"names = {sorted(PINS)!r}\n"
        "print(json.dumps({'python': list(sys.version_info[:2]),"
        " 'versions': {n: m.version(n) for n in names}}))\n"
    )
    found = await run_json(sandbox, code, timeout=30)
    assert found == {"python": [3, 11], "versions": PINS}


async def test_pinned_libraries_import_on_the_read_only_root(sandbox: Sandbox, backend_name: str) -> None:
    if backend_name == "local":
        pytest.skip("the local backend runs the host's Python and libraries, not the pinned image")
    result = await sandbox.exec("import galois, sympy\nprint(galois.GF(2**8).order)", timeout=60)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "256\n", "")


async def test_no_state_survives_between_calls(sandbox: Sandbox) -> None:
    token = uuid.uuid4().hex
    write = (
        "import os\n"
        "for d in ('/tmp', os.getcwd(), os.path.expanduser('~')):\n"
        f"    open(os.path.join(d, 'state-{token}'), 'w').write('x')\n"
        "print('written')\n"
    )
    first = await sandbox.exec(write, timeout=10)
    assert first.stdout == "written\n", first
    check = (
        "import os, json\n"
        "dirs = ('/tmp', os.getcwd(), os.path.expanduser('~'))\n"
        f"print(json.dumps([os.path.exists(os.path.join(d, 'state-{token}')) for d in dirs]))\n"
    )
    assert await run_json(sandbox, check, timeout=10) == [False, False, False]


async def test_nothing_is_pre_imported_into_the_programs_process(sandbox: Sandbox, backend_name: str) -> None:
    """The methodology's tool "retains no state at all, and nothing is pre-imported": the
    program's interpreter holds only the standard library's start-up modules, whatever path
    (short or long program, either engine path) started it."""
    if backend_name == "local":
        # Known: the local backend runs the host's interpreter, whose site hooks (.pth files:
        # an editable install's finder, certifi) import before the program. Named, not hidden.
        pytest.xfail("local backend: the host interpreter's .pth hooks import before the program")
    probe = (
        "import json, sys\n"
        "top = sorted({name.split('.')[0] for name in sys.modules})\n"
        "extra = [name for name in top if name not in sys.stdlib_module_names and name != '__main__']\n"
        "print(json.dumps(extra))\n"
    )
    assert await run_json(sandbox, probe, timeout=20) == []
    # A program long enough to travel on a descriptor (sandbox/program.py) is no different.
    assert await run_json(sandbox, probe + "#" * 200_000 + "\n", timeout=20) == []


async def test_runs_without_capabilities(sandbox: Sandbox, sandbox_runtime: str | None) -> None:
    # no_new_privs as the kernel enforces it (PR_GET_NO_NEW_PRIVS), and the status line where
    # there is one: gVisor's /proc/self/status has no NoNewPrivs line.
    code = (
        "import ctypes, json, os\n"
        "status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(json.dumps({'uid': os.getuid(), 'euid': os.geteuid(),"
        " 'cap_eff': int(status['CapEff'].strip(), 16), 'prctl_nnp': libc.prctl(39, 0, 0, 0, 0),"
        " 'status_nnp': status.get('NoNewPrivs', 'absent').strip()}))\n"
    )
    found = await run_json(sandbox, code, timeout=10)
    assert found["cap_eff"] == 0
    assert found["prctl_nnp"] == 1
    assert found["status_nnp"] == ("absent" if sandbox_runtime == "runsc" else "1")
    # Local: bubblewrap maps the program to uid 10001 inside, a fresh unprivileged uid outside.
    assert found["uid"] != 0 and found["euid"] != 0


async def test_no_network(sandbox: Sandbox) -> None:
    # network none / an empty namespace: nothing can leave, so these probes never reach out.
    code = (
        "import json, socket, time\n"
        "out = {}\n"
        "started = time.monotonic()\n"
        "try:\n"
        "    socket.getaddrinfo('example.com', 443)\n"
        "    out['dns'] = 'resolved'\n"
        "except OSError as exc:\n"
        "    out['dns'] = type(exc).__name__\n"
        "for host, port in (('1.1.1.1', 53), ('8.8.8.8', 443)):\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=2).close()\n"
        "        out[host] = 'connected'\n"
        "    except OSError as exc:\n"
        "        out[host] = type(exc).__name__\n"
        "out['seconds'] = time.monotonic() - started\n"
        "print(json.dumps(out))\n"
    )
    found = await run_json(sandbox, code, timeout=15)
    assert found["dns"] != "resolved"
    assert found["1.1.1.1"] not in ("connected", "TimeoutError")  # refused at once, not dropped
    assert found["8.8.8.8"] not in ("connected", "TimeoutError")
    assert float(found["seconds"]) < 1.0  # type: ignore[arg-type]


async def test_infinite_loop_times_out(sandbox: Sandbox) -> None:
    result = await sandbox.exec("while True:\n    pass\n", timeout=SHORT)
    assert result.timed_out and result.exit_code is None
    assert result.duration_s <= SHORT + 2


async def test_program_ignoring_sigterm_is_still_killed(sandbox: Sandbox) -> None:
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "print('ignoring', flush=True)\n"
        "while True:\n"
        "    time.sleep(0.01)\n"
    )
    started = time.monotonic()
    result = await sandbox.exec(code, timeout=SHORT)
    assert result.timed_out and result.stdout == "ignoring\n"
    # The kill is at the deadline; removing a gVisor container (its sentry and gofer) takes longer.
    slack = 4 if sandbox.describe().get("runtime") == "runsc" else 2
    assert time.monotonic() - started <= SHORT + slack


async def test_background_child_dies_with_the_call(sandbox: Sandbox) -> None:
    token = f"heartbeat-{uuid.uuid4().hex}"
    # A daemon (double fork + setsid) that keeps writing a heartbeat after its parent exits.
    code = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.execvp(sys.executable, [sys.executable, '-c',\n"
        '            \'import time\\nwhile True:\\n    open("/tmp/beat", "a").write("x")\\n'
        f"    time.sleep(0.05)\\n# {token}'])\n"
        "    os._exit(0)\n"
        "deadline = time.monotonic() + 10\n"
        "while not os.path.exists('/tmp/beat') and time.monotonic() < deadline:\n"
        "    time.sleep(0.02)\n"
        "print('beating' if os.path.exists('/tmp/beat') else 'no heartbeat')\n"
    )
    result = await sandbox.exec(code, timeout=10)
    assert result.exit_code == 0 and result.stdout == "beating\n", result
    assert await asyncio.to_thread(processes_gone, token, 1.0)
    await assert_call_left_nothing(result)


async def test_fork_bomb_is_contained_and_host_stays_responsive(
    sandbox: Sandbox, sandbox_runtime: str | None
) -> None:
    token = f"forkbomb-{uuid.uuid4().hex}"
    code = f"# {token}\nimport os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
    code += "        time.sleep(0.01)\n"
    before = await _call_container_ids(sandbox) if sandbox_runtime == "runsc" else set()
    bomb = asyncio.create_task(sandbox.exec(code, timeout=3.0, limits=TEST_LIMITS.replace(pids=64)))
    await asyncio.sleep(1.5)
    container_id = await _new_call_container_id(sandbox, before) if sandbox_runtime == "runsc" else None
    started = time.monotonic()
    probe = await asyncio.create_subprocess_exec(sys.executable, "-c", "print(1)", stdout=subprocess.PIPE)
    await probe.communicate()
    responsive_s = time.monotonic() - started
    try:
        result = await bomb
    except SandboxError as exc:
        # Only under runsc: gVisor's sentry leaks host threads while processes fork and exit
        # (this build: hundreds a second) until the container's pids cgroup stops it, and then
        # panics (exit 2, no launcher report). That is a sandbox failure, never the program's
        # exit code, and the host's pid space stayed bounded.
        assert sandbox_runtime == "runsc" and "gVisor sandbox crashed" in str(exc), exc
    else:
        assert result.timed_out
    assert responsive_s < 2.0
    # Nothing of the bomb is left behind once the call has returned.
    assert await asyncio.to_thread(processes_gone, token, 2.0)
    if container_id is not None:
        assert await asyncio.to_thread(container_processes_gone, container_id, 15.0), container_id


async def test_fork_bomb_hits_the_process_limit(sandbox: Sandbox) -> None:
    code = (
        "import os, time\n"
        "made = 0\n"
        "try:\n"
        "    for _ in range(1000):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "        made += 1\n"
        "except OSError as exc:\n"
        "    print(made, exc.errno)\n"
    )
    result = await sandbox.exec(code, timeout=10, limits=TEST_LIMITS.replace(pids=32))
    made, errno_value = (int(part) for part in result.stdout.split())
    assert made < 32 and errno_value == 11  # EAGAIN


async def test_memory_bomb_is_oom_killed(sandbox: Sandbox, backend_name: str) -> None:
    # Local: RLIMIT_AS turns the allocation into MemoryError, reported as oom_killed too.
    code = "blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))\n"
    result = await sandbox.exec(code, timeout=20, limits=TEST_LIMITS.replace(memory_bytes=128 * 1024 * 1024))
    assert result.oom_killed, result
    assert not result.timed_out
    assert result.exit_code != 0
    if backend_name == "local":
        assert "MemoryError" in result.stderr


async def test_filling_the_disk_is_bounded_by_the_tmpfs(sandbox: Sandbox) -> None:
    tmpfs = 32 * 1024 * 1024
    code = (
        "import errno, os\n"
        "written = 0\n"
        "chunk = b'x' * (1024 * 1024)\n"
        "try:\n"
        "    for i in range(10_000):\n"
        "        with open(f'/tmp/fill-{i}', 'wb') as fh:\n"
        "            for _ in range(4):\n"
        "                fh.write(chunk)\n"
        "                fh.flush()\n"
        "                written += len(chunk)\n"
        "except OSError as exc:\n"
        "    print(written, exc.errno)\n"
    )
    result = await sandbox.exec(code, timeout=20, limits=TEST_LIMITS.replace(tmpfs_bytes=tmpfs))
    written, errno_value = (int(part) for part in result.stdout.split())
    assert errno_value == 28  # ENOSPC
    assert written <= tmpfs


def _reset_peak_rss() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # "5" resets VmHWM, the peak-RSS counter


def _peak_rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/self/status")


async def test_output_flood_is_truncated_and_host_memory_stays_flat(sandbox: Sandbox) -> None:
    code = (
        "import sys\n"
        "chunk = 'y' * (1024 * 1024)\n"
        "for _ in range(100):\n"
        "    sys.stdout.write(chunk)\n"
        "sys.stderr.write('done')\n"
    )
    _reset_peak_rss()
    before = _peak_rss_bytes()
    result = await sandbox.exec(code, timeout=60)
    growth = _peak_rss_bytes() - before
    assert result.exit_code == 0, result
    assert result.stdout_truncated and not result.stderr_truncated
    assert len(result.stdout) == TEST_LIMITS.output_bytes and set(result.stdout) == {"y"}
    assert result.stderr == "done"
    assert growth < 50 * 1024 * 1024, f"host RSS grew by {growth / 1e6:.0f} MB"


async def test_every_byte_a_program_wrote_arrives_even_when_writes_are_short(
    sandbox: Sandbox, sandbox_runtime: str | None
) -> None:
    # gVisor often answers a large write to the stdout pipe with a short count (Linux blocks
    # until all of it is in): the program's own count is what must arrive, in order, whole.
    code = (
        "import os, sys\nwritten = 0\n"
        "for i in range(12):\n    written += os.write(1, bytes([65 + i]) * 65536)\n"
        "sys.stderr.write(str(written))\n"
    )
    results = await asyncio.gather(*(sandbox.exec(code, timeout=30) for _ in range(3)))
    for result in results:
        assert result.exit_code == 0 and not result.stdout_truncated, result
        written = int(result.stderr)
        assert len(result.stdout.encode()) == written
        # Whatever each write managed, the bytes come in the order they were written.
        assert list(result.stdout) == sorted(result.stdout)
        if sandbox_runtime != "runsc":
            assert written == 12 * 65536


async def test_root_filesystem_is_read_only(sandbox: Sandbox, sandbox_runtime: str | None) -> None:
    code = (
        "import json, os\n"
        "out = {}\n"
        "for path in ('/proctor-probe', '/usr/proctor-probe', '/etc/proctor-probe'):\n"
        "    try:\n"
        "        open(path, 'w').close()\n"
        "        out[path] = 'written'\n"
        "    except OSError as exc:\n"
        "        out[path] = exc.errno\n"
        "created = any(os.path.exists(p) for p in out)\n"
        "print(json.dumps({**out, 'created': created}))\n"
    )
    found = await run_json(sandbox, code, timeout=10)
    # EROFS; gVisor refuses the same writes with EACCES. Either way no file came to exist.
    assert found.pop("created") is False
    assert set(found.values()) == ({13} if sandbox_runtime == "runsc" else {30}), found


async def test_no_host_environment_leaks(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = uuid.uuid4().hex
    monkeypatch.setenv("PROCTOR_TEST_CANARY", secret)
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    code = "import json, os\nprint(json.dumps(dict(os.environ)))\n"
    env = await run_json(sandbox, code, timeout=10)
    assert "PROCTOR_TEST_CANARY" not in env and "OPENAI_API_KEY" not in env
    assert all(secret not in value for value in env.values())  # type: ignore[operator]


async def test_stdin_argv_and_exit_codes(sandbox: Sandbox) -> None:
    echoed = await sandbox.exec("import sys\nprint(sys.stdin.read().upper())", stdin="hello", timeout=10)
    assert (echoed.exit_code, echoed.stdout) == (0, "HELLO\n")
    failed = await sandbox.exec("import sys\nprint('bye', file=sys.stderr)\nsys.exit(3)", timeout=10)
    assert (failed.exit_code, failed.stderr, failed.timed_out) == (3, "bye\n", False)
    shell = await sandbox.exec(argv=["sh", "-c", "echo from-sh; exit 4"], timeout=10)
    assert (shell.exit_code, shell.stdout) == (4, "from-sh\n")
    killed = await sandbox.exec("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", timeout=10)
    assert killed.exit_code == 137 and not killed.oom_killed


async def test_long_program_runs_whole(sandbox: Sandbox) -> None:
    # Over Linux's 128 KiB single-argument limit: handed over on a descriptor (sandbox/program.py).
    filler = "\n".join(f"v{i} = {i}" for i in range(30_000))
    result = await sandbox.exec(filler + "\nprint(v29999 + 1)\n", timeout=30)
    assert (result.exit_code, result.stdout) == (0, "30000\n"), result.stderr[-500:]


async def test_concurrent_calls_are_isolated(sandbox: Sandbox) -> None:
    code = "import os, sys\nopen('/tmp/mine', 'a').write('x')\nprint(len(open('/tmp/mine').read()))\n"
    results = await asyncio.gather(*(sandbox.exec(code, timeout=30) for _ in range(4)))
    assert [r.stdout for r in results] == ["1\n"] * 4


async def test_describe_names_backend_and_isolation(
    sandbox: Sandbox, backend_name: str, sandbox_runtime: str | None
) -> None:
    described = sandbox.describe()
    assert described["backend"] == backend_name
    if backend_name == "local":
        assert described["isolation"] == "reduced"
        assert any("host Python" in note for note in described["notes"])
    else:
        assert str(described["image_id"]).startswith("sha256:")
        assert described["runtime"] == sandbox_runtime
        if sandbox_runtime == "runsc":
            assert str(described["runtime_version"]).startswith("runsc version")
            assert str(described["engine"]).startswith("unix://")


async def test_cpu_quota_is_enforced(sandbox: Sandbox, sandbox_runtime: str | None) -> None:
    if sandbox_runtime == "runsc":
        # gVisor's process_time() counts throttled time as running: only the host sees the quota.
        await _cpu_quota_seen_from_the_host_cgroup(sandbox)
        return
    # Busy for 1.5 s of wall time on a quarter CPU: at most ~0.4 s of CPU time, whatever
    # else the machine does (a loaded machine only gives less).
    code = (
        "import time\n"
        "wall, cpu = time.monotonic(), time.process_time()\n"
        "while time.monotonic() - wall < 1.5:\n"
        "    pass\n"
        "print(time.process_time() - cpu)\n"
    )
    result = await sandbox.exec(code, timeout=20, limits=TEST_LIMITS.replace(cpus=0.25))
    assert result.exit_code == 0, result
    assert float(result.stdout) <= 0.25 * 1.5 + 0.15


async def test_thread_pools_are_sized_to_the_cpu_quota(sandbox: Sandbox, backend_name: str) -> None:
    # Threads beyond the quota only get throttled: numba's pool and BLAS's are pinned to it.
    code = (
        "import json, os\n"
        "names = ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS', 'NUMBA_NUM_THREADS')\n"
        "seen = {name: os.environ.get(name) for name in names}\n"
        "try:\n"
        "    import numba\n"
        "    seen['numba'] = numba.config.NUMBA_NUM_THREADS\n"
        "except ImportError:\n"
        "    seen['numba'] = None\n"
        "print(json.dumps(seen))\n"
    )
    for cpus, expected in ((1.0, 1), (2.0, 2)):
        result = await sandbox.exec(code, timeout=30, limits=TEST_LIMITS.replace(cpus=cpus))
        assert result.exit_code == 0, result
        seen = json.loads(result.stdout)
        numba_threads = seen.pop("numba")
        assert set(seen.values()) == {str(expected)}, seen
        if backend_name == "docker" or numba_threads is not None:
            assert numba_threads == expected


async def _call_container_ids(sandbox: Sandbox) -> set[str]:
    """IDs of this sandbox's containers made for calls with non-default limits (role "call")."""
    import docker

    from proctor.sandbox.docker import labels

    described = sandbox.describe()
    client = docker.DockerClient(base_url=str(described["engine"]))
    run_filter = {
        "label": [labels.LABEL_FILTER, f"{labels.RUN_ID}={described['run_id']}", f"{labels.ROLE}=call"]
    }
    try:
        found = await asyncio.to_thread(client.api.containers, all=True, filters=run_filter)
    finally:
        client.close()
    return {str(summary["Id"]) for summary in found}


async def _new_call_container_id(sandbox: Sandbox, before: set[str], within_s: float = 20.0) -> str:
    """The call container that appeared after ``before`` was taken (earlier calls' containers
    may still be being removed in the background)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        new = await _call_container_ids(sandbox) - before
        if new:
            (container_id,) = new
            return container_id
        await asyncio.sleep(0.1)
    raise AssertionError("the call's container never appeared")


def _cgroup_file(controller: str, container_id: str, name: str) -> Path | None:
    """A container's cgroup v1 file (cgroupfs driver, the engines' default parent "docker")."""
    found = list(Path("/sys/fs/cgroup").glob(f"{controller}/docker/{container_id}/{name}"))
    return found[0] if found else None


def _read_int(path: Path) -> int:
    return int(path.read_text())


async def _cpu_quota_seen_from_the_host_cgroup(sandbox: Sandbox) -> None:
    """A quarter CPU, measured as the CPU time the host charges to the call's container.

    Its cgroup holds gVisor's sentry and gofer as well as the program: all of it is throttled.
    """
    code = (
        "import time\nwall = time.monotonic()\nwhile time.monotonic() - wall < 6:\n    pass\nprint('spun')\n"
    )
    # Other limits than the default: the call gets a container of its own (role "call").
    before = await _call_container_ids(sandbox)
    call = asyncio.create_task(sandbox.exec(code, timeout=30, limits=TEST_LIMITS.replace(cpus=0.25)))
    container_id = await _new_call_container_id(sandbox, before)
    usage = None
    deadline = time.monotonic() + 20
    while usage is None and time.monotonic() < deadline and not call.done():
        usage = await asyncio.to_thread(_cgroup_file, "cpuacct", container_id, "cpuacct.usage")
        await asyncio.sleep(0.1)
    assert usage is not None, "the call's cgroup never appeared"
    quota = await asyncio.to_thread(_cgroup_file, "cpu", container_id, "cpu.cfs_quota_us")
    period = await asyncio.to_thread(_cgroup_file, "cpu", container_id, "cpu.cfs_period_us")
    assert quota is not None and period is not None
    ratio = await asyncio.to_thread(_read_int, quota) / await asyncio.to_thread(_read_int, period)
    assert ratio == pytest.approx(0.25)
    await asyncio.sleep(1.0)  # past the start-up burst
    used_before, wall_before = await asyncio.to_thread(_read_int, usage), time.monotonic()
    await asyncio.sleep(2.5)
    used = await asyncio.to_thread(_read_int, usage) - used_before
    wall = time.monotonic() - wall_before
    result = await call
    assert result.exit_code == 0 and result.stdout == "spun\n", result
    share = used / 1e9 / wall
    # The CFS quota holds the whole container to a quarter of a CPU (a loaded machine only
    # gives it less); well above zero, so the program was really running.
    assert 0.05 < share <= 0.25 * 1.15 + 0.03, f"{share:.2f} of a CPU"
