"""Attacks on the local (bubblewrap) backend: what a hostile program tries against the host.

Each test runs a program that attempts one escape and reports what happened, then the test
checks the host side too (the file is not there, the process still lives, the listener never
accepted). Network probes only ever target loopback. See docs/sandbox.md, "Local backend".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from proctor.sandbox import Limits, Sandbox, open_sandbox
from proctor.sandbox.local.backend import LocalSandbox
from tests.sandbox.conftest import TEST_LIMITS

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def local() -> AsyncIterator[Sandbox]:
    opened = await open_sandbox("local", default_limits=TEST_LIMITS, probe_libraries=False)
    try:
        yield opened
    finally:
        await opened.aclose()


async def report(sandbox: Sandbox, code: str, timeout: float = 20) -> dict[str, object]:
    result = await sandbox.exec(code, timeout=timeout)
    assert result.exit_code == 0, result
    found: dict[str, object] = json.loads(result.stdout)
    return found


# Tries a list of callables; records the errno name (or "ok") of each.
ATTEMPT = """
import errno, json, os
out = {}
def attempt(name, action):
    try:
        value = action()
        out[name] = "ok" if value is None else value
    except OSError as exc:
        out[name] = errno.errorcode.get(exc.errno, str(exc.errno))
"""


async def test_no_docker_socket_and_no_unix_socket_anywhere(local: Sandbox) -> None:
    code = ATTEMPT + (
        "import socket, stat\n"
        "for path in ('/var/run/docker.sock', '/run/docker.sock', '/run/containerd/containerd.sock'):\n"
        "    s = socket.socket(socket.AF_UNIX)\n"
        "    attempt(path, lambda: s.connect(path))\n"
        "sockets = []\n"
        "for top in os.listdir('/'):\n"
        "    if top in ('proc', 'usr'):\n"
        "        continue\n"
        "    for d, dirs, files in os.walk('/' + top):\n"
        "        for f in files:\n"
        "            try:\n"
        "                if stat.S_ISSOCK(os.lstat(os.path.join(d, f)).st_mode):\n"
        "                    sockets.append(os.path.join(d, f))\n"
        "            except OSError:\n"
        "                pass\n"
        "out['sockets'] = sockets\n"
        "out['var'] = os.path.exists('/var')\n"
        "out['run'] = os.path.exists('/run')\n"
        "print(json.dumps(out))\n"
    )
    found = await report(local, code)
    assert found["/var/run/docker.sock"] == "ENOENT"
    assert found["/run/docker.sock"] == "ENOENT"
    assert found["/run/containerd/containerd.sock"] == "ENOENT"
    assert found["sockets"] == [] and found["var"] is False and found["run"] is False


async def test_no_shadow_no_root_home_no_other_users_files(local: Sandbox, tmp_path: Path) -> None:
    # A world-readable canary in the host's /tmp: the sandbox's /tmp is its own, so it is unseen.
    canary = Path("/tmp") / f"proctor-canary-{uuid.uuid4().hex}"
    canary.write_text("secret")
    canary.chmod(0o644)
    try:
        code = ATTEMPT + (
            "for path in ('/etc/shadow', '/etc/gshadow', '/root/.bash_history', '/etc/sudoers'):\n"
            "    attempt(path, lambda: open(path).read())\n"
            f"attempt('canary', lambda: open({str(canary)!r}).read())\n"
            "out['root'] = sorted(os.listdir('/root'))\n"
            "out['pyenv'] = sorted(os.listdir('/root/.pyenv')) if os.path.isdir('/root/.pyenv') else None\n"
            "out['top'] = sorted(os.listdir('/'))\n"
            "out['etc'] = sorted(os.listdir('/etc'))\n"
            "print(json.dumps(out))\n"
        )
        found = await report(local, code)
    finally:
        canary.unlink()
    for path in ("/etc/shadow", "/etc/gshadow", "/root/.bash_history", "/etc/sudoers", "canary"):
        assert found[path] in ("ENOENT", "EACCES"), (path, found[path])
    prefix = Path(sys.base_prefix)
    if prefix.is_relative_to("/root"):
        # Only the chain of directories down to the interpreter, nothing else of /root.
        assert found["root"] == [prefix.relative_to("/root").parts[0]]
        assert found["pyenv"] in (None, ["versions"])
    else:
        assert found["root"] == []
    assert not {"home", "var", "run", "work", "opt", "srv", "mnt", "sys"} & set(found["top"])  # type: ignore[arg-type]
    assert "shadow" not in found["etc"] and "docker" not in found["etc"]  # type: ignore[operator]


async def test_dev_is_bwraps_own_and_writes_do_not_persist(local: Sandbox) -> None:
    name = f"proctor-dev-{uuid.uuid4().hex}"
    write = ATTEMPT + (
        f"attempt('write', lambda: open('/dev/{name}', 'w').write('x'))\n"
        f"attempt('mknod', lambda: os.mknod('/dev/{name}-fifo', 0o600 | 0o010000))\n"
        "attempt('kmsg', lambda: open('/dev/kmsg').read(1))\n"
        "attempt('mem', lambda: open('/dev/mem', 'rb').read(1))\n"
        "out['dev'] = sorted(os.listdir('/dev'))\n"
        "print(json.dumps(out))\n"
    )
    found = await report(local, write)
    assert found["write"] in ("EROFS", "EACCES") and found["mknod"] in ("EROFS", "EACCES", "EPERM")
    assert found["kmsg"] == "ENOENT" and found["mem"] == "ENOENT"
    allowed = {"console", "core", "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr"}
    allowed |= {"stdin", "stdout", "tty", "urandom", "zero", "mqueue"}
    assert set(found["dev"]) <= allowed, found["dev"]  # type: ignore[arg-type]
    assert not await asyncio.to_thread(os.path.exists, f"/dev/{name}")
    again = await report(local, f"import json, os\nprint(json.dumps(os.path.exists('/dev/{name}')))")
    assert again is False  # type: ignore[comparison-overlap]


async def test_host_filesystem_is_read_only_including_site_packages(local: Sandbox) -> None:
    # A .pth file in site-packages would run inside Proctor itself: the worst persistence.
    import sysconfig

    token = uuid.uuid4().hex
    site = sysconfig.get_paths()["purelib"]
    targets = [f"{site}/proctor-{token}.pth", f"/usr/lib/proctor-{token}", f"/etc/proctor-{token}"]
    targets += [f"/proctor-{token}", f"{sys.base_prefix}/bin/proctor-{token}"]
    code = ATTEMPT + (
        f"for path in {targets!r}:\n"
        "    attempt(path, lambda: open(path, 'w').write('import os'))\n"
        f"attempt('chmod', lambda: os.chmod({site!r}, 0o777))\n"
        "print(json.dumps(out))\n"
    )
    found = await report(local, code)
    for path in targets:
        assert found[path] in ("EROFS", "EACCES"), (path, found[path])
        assert not await asyncio.to_thread(os.path.exists, path)
    assert found["chmod"] in ("EROFS", "EPERM")
    again = await report(
        local, f"import json, os\nprint(json.dumps([os.path.exists(p) for p in {targets!r}]))"
    )
    assert again == [False] * len(targets)  # type: ignore[comparison-overlap]


async def test_cannot_signal_trace_or_read_host_processes(local: Sandbox) -> None:
    token = f"bystander-{uuid.uuid4().hex}"
    bystander = await asyncio.create_subprocess_exec(
        sys.executable, "-c", f"import time  # {token}\ntime.sleep(120)"
    )
    try:
        code = ATTEMPT + (
            "import ctypes, signal\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "def ptrace(pid):\n"
            "    if libc.ptrace(16, pid, None, None) != 0:\n"  # PTRACE_ATTACH
            "        raise OSError(ctypes.get_errno(), 'ptrace')\n"
            f"for pid in ({bystander.pid}, {os.getpid()}):\n"
            "    attempt(f'kill-{pid}', lambda: os.kill(pid, signal.SIGKILL))\n"
            "    attempt(f'ptrace-{pid}', lambda: ptrace(pid))\n"
            "    attempt(f'mem-{pid}', lambda: open(f'/proc/{pid}/mem', 'rb').read(1))\n"
            "seen = []\n"
            "for entry in os.listdir('/proc'):\n"
            "    if entry.isdigit():\n"
            "        try:\n"
            "            seen.append(open(f'/proc/{entry}/cmdline', 'rb').read().decode(errors='replace'))\n"
            "        except OSError:\n"
            "            pass\n"
            # Spelled backwards: the program's own command line must not contain the token.
            f"out['token_seen'] = any({token[::-1]!r}[::-1] in c for c in seen)\n"
            "out['processes'] = len(seen)\n"
            "attempt('kill-all', lambda: os.kill(-1, signal.SIGKILL) if os.fork() else os._exit(0))\n"
            "print(json.dumps(out))\n"
        )
        result = await local.exec(code, timeout=20)
        # kill(-1) from the forked child may take the program itself (its own pid namespace):
        # the output printed before that is all we need, and the bystander must live on.
        await asyncio.sleep(0.2)
        assert bystander.returncode is None, "a host process was killed from inside the sandbox"
    finally:
        with contextlib.suppress(ProcessLookupError):
            bystander.kill()
        await bystander.wait()
    found = json.loads(result.stdout.splitlines()[0]) if result.stdout else {}
    assert found, result
    for pid in (bystander.pid, os.getpid()):
        assert found[f"kill-{pid}"] in ("ESRCH", "EPERM")
        assert found[f"ptrace-{pid}"] in ("ESRCH", "EPERM")
        assert found[f"mem-{pid}"] in ("ENOENT", "EACCES")
    assert found["token_seen"] is False
    assert found["processes"] <= 5  # bwrap's init, the program, its child


async def test_loopback_listener_of_the_host_is_unreachable(local: Sandbox) -> None:
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(4)
    tcp.setblocking(False)
    port = tcp.getsockname()[1]
    abstract_name = f"\0proctor-{uuid.uuid4().hex}"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(abstract_name)
    unix.listen(4)
    unix.setblocking(False)
    try:
        code = ATTEMPT + (
            "import socket\n"
            "def tcp():\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
            "def abstract():\n"
            "    s = socket.socket(socket.AF_UNIX)\n"
            f"    s.connect({abstract_name!r})\n"
            "attempt('tcp', tcp)\n"
            "attempt('abstract', abstract)\n"
            # From /proc/net/dev: if_nameindex() needs netlink, which the filter refuses.
            "dev = open('/proc/net/dev').read().splitlines()[2:]\n"
            "out['interfaces'] = sorted(line.split(':')[0].strip() for line in dev)\n"
            "print(json.dumps(out))\n"
        )
        found = await report(local, code)
        for listener in (tcp, unix):
            with pytest.raises(BlockingIOError):
                listener.accept()
    finally:
        tcp.close()
        unix.close()
    assert found["tcp"] == "ECONNREFUSED"  # its own loopback, where nothing listens
    assert found["abstract"] == "ECONNREFUSED"
    assert found["interfaces"] == ["lo"]


async def test_no_setuid_no_nested_namespaces_no_mounts(local: Sandbox) -> None:
    code = ATTEMPT + (
        "import ctypes, subprocess\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def call(name, *args):\n"
        "    if getattr(libc, name)(*args) != 0:\n"
        "        raise OSError(ctypes.get_errno(), name)\n"
        "os.makedirs('/tmp/m', exist_ok=True)\n"
        "attempt('unshare-user', lambda: call('unshare', 0x10000000))\n"
        "attempt('unshare-mount', lambda: call('unshare', 0x00020000))\n"
        "attempt('mount', lambda: call('mount', b'none', b'/tmp/m', b'tmpfs', 0, None))\n"
        "attempt('chroot', lambda: call('chroot', b'/tmp'))\n"
        "attempt('setuid0', lambda: os.setuid(0))\n"
        "attempt('sysctl', lambda: open('/proc/sys/kernel/hostname', 'w').write('x'))\n"
        "attempt('sysrq', lambda: open('/proc/sysrq-trigger', 'w').write('h'))\n"
        "out['groups'] = os.getgroups()\n"
        "out['nosuid_usr'] = bool(os.statvfs('/usr').f_flag & os.ST_NOSUID)\n"
        "setuid = [p for p in ('/usr/bin/su', '/usr/bin/mount', '/usr/bin/passwd')\n"
        "          if os.path.exists(p) and os.stat(p).st_mode & 0o4000]\n"
        "out['setuid_found'] = setuid\n"
        "runs = {}\n"
        "for p in setuid:\n"
        "    args = [p, '-t', 'tmpfs', 'none', '/tmp/m'] if p.endswith('mount') else [p]\n"
        "    done = subprocess.run(args, input='', capture_output=True, timeout=5)\n"
        "    runs[p] = done.returncode\n"
        "out['setuid_runs'] = runs\n"
        "out['unshare_tool'] = subprocess.run(['unshare', '-r', 'true'], capture_output=True).returncode\n"
        "print(json.dumps(out))\n"
    )
    found = await report(local, code)
    refused = ("EPERM", "ENOSPC", "EINVAL", "EACCES", "EROFS", "ENOENT")
    for name in ("unshare-user", "unshare-mount", "mount", "chroot", "setuid0", "sysctl", "sysrq"):
        assert found[name] in refused, (name, found[name])
    assert found["groups"] in ([10001], [])
    assert found["nosuid_usr"] is True
    assert found["setuid_found"], "expected the host's setuid binaries to be visible (read-only)"
    assert all(code != 0 for code in found["setuid_runs"].values())  # type: ignore[attr-defined]
    assert found["unshare_tool"] != 0


def _host_credentials(pid: int) -> dict[str, list[int]]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Uid", "Gid", "Groups"):
            fields[key] = [int(part) for part in value.split()]
    return fields


def _credentials_of(token: str) -> list[dict[str, list[int]]]:
    from tests.sandbox.test_conformance import host_processes_with

    found = []
    for pid in host_processes_with(token):
        with contextlib.suppress(OSError):
            found.append(_host_credentials(pid))
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="Proctor runs unprivileged: the sandbox keeps its uid")
async def test_every_call_runs_as_its_own_unprivileged_host_uid(local: Sandbox) -> None:
    # Seen from the host, as the kernel checks it: never uid or gid 0, no groups, one uid per
    # call. (Inside, /proc/self/uid_map shows bwrap's nested namespace, so ask the host.)
    tokens = [f"whoami-{uuid.uuid4().hex}" for _ in range(2)]
    calls = [
        asyncio.ensure_future(local.exec(f"# {token}\nimport time\ntime.sleep(3)\n", timeout=20))
        for token in tokens
    ]
    seen: dict[str, list[dict[str, list[int]]]] = {token: [] for token in tokens}
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not all(seen.values()):
        for token in tokens:
            seen[token] += await asyncio.to_thread(_credentials_of, token)
        await asyncio.sleep(0.05)
    await asyncio.gather(*calls)
    uids = set()
    for token in tokens:
        assert seen[token], "the sandboxed program was never seen on the host"
        for credentials in seen[token]:
            assert 0 not in credentials["Uid"] and 0 not in credentials["Gid"], credentials
            assert credentials["Groups"] == []
            uids.update(credentials["Uid"])
    assert len(uids) == 2, "two concurrent calls shared a host uid"


async def test_stopped_double_forked_setsid_program_dies_at_the_deadline(local: Sandbox) -> None:
    token = f"stopped-{uuid.uuid4().hex}"
    code = (
        f"# {token}\n"
        "import os, signal, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "        os.kill(os.getpid(), signal.SIGSTOP)\n"
        "        time.sleep(600)\n"
        "    os._exit(0)\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('stopping', flush=True)\n"
        "os.kill(os.getpid(), signal.SIGSTOP)\n"
        "time.sleep(600)\n"
    )
    started = time.monotonic()
    result = await local.exec(code, timeout=2.0)
    assert result.timed_out and result.stdout == "stopping\n", result
    assert time.monotonic() - started < 2.0 + 5.0  # headroom for a loaded machine
    from tests.sandbox.test_conformance import processes_gone

    assert processes_gone(token, 2.0)


async def test_only_the_standard_streams_are_inherited(local: Sandbox) -> None:
    found = await report(local, "import json, os\nprint(json.dumps(sorted(os.listdir('/proc/self/fd'))))")
    assert found == ["0", "1", "2", "3"]  # 3 is the listing's own directory handle


async def test_library_probe_lists_only_what_really_imports_in_the_sandbox() -> None:
    # numpy is installed on the host, but under a 48 MiB address-space limit its import fails
    # in the sandbox (as it would in every python call there): it must not be offered.
    import importlib.metadata

    tight = await asyncio.to_thread(LocalSandbox, Limits(memory_bytes=48 * 1024 * 1024))
    roomy = await asyncio.to_thread(LocalSandbox, TEST_LIMITS)
    try:
        names = ["numpy", "mpmath", "proctor-no-such-library"]
        assert await tight.probe_libraries(names) == {"mpmath": importlib.metadata.version("mpmath")}
        found = await roomy.probe_libraries(names)
        assert found == {name: importlib.metadata.version(name) for name in ("numpy", "mpmath")}
        assert roomy.describe()["libraries"] == found
    finally:
        await tight.aclose()
        await roomy.aclose()


@pytest.mark.skipif(os.geteuid() != 0, reason="Proctor runs unprivileged: no cgroups to record an OOM kill")
async def test_an_oom_kill_by_the_memory_cgroup_is_reported_as_one(local: Sandbox) -> None:
    # RLIMIT_AS bounds the address space only: tmpfs pages are charged to the call's memory
    # cgroup but never mapped, so filling /tmp past the memory limit ends in the kernel's OOM
    # killer (SIGKILL, no MemoryError on stderr). The result must still say out of memory.
    code = (
        "block = b'x' * (1 << 20)\n"
        "with open('/tmp/fill', 'wb') as fh:\n"
        "    for _ in range(180):\n"
        "        fh.write(block)\n"
        "print('survived')\n"
    )
    limits = TEST_LIMITS.replace(memory_bytes=128 * 1024 * 1024, tmpfs_bytes=200 * 1024 * 1024)
    result = await local.exec(code, timeout=20, limits=limits)
    assert result.exit_code == 128 + 9 and result.stdout == "", result
    assert "MemoryError" not in result.stderr
    assert result.oom_killed, result


async def test_open_files_are_bounded_from_outside_not_inherited_from_proctor(local: Sandbox) -> None:
    # Whatever Proctor's own RLIMIT_NOFILE (inherited by every child it forks), the program may
    # raise its soft limit to the hard one; pids x that many files could fill the host's whole
    # file table (fs.file-max is shared by every unprivileged process on the host).
    from proctor.sandbox.api import OPEN_FILES

    code = ATTEMPT + (
        "import resource\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "out['hard'] = hard\n"
        "attempt('raise soft to hard', lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard)))\n"
        "try:\n"
        "    resource.setrlimit(resource.RLIMIT_NOFILE, (hard * 4, hard * 4))\n"
        "    out['raise hard'] = 'ok'\n"
        "except (OSError, ValueError):\n"
        "    out['raise hard'] = 'refused'\n"
        "held = []\n"
        "try:\n"
        "    while len(held) < 5000:\n"
        "        held.append(os.open('/dev/null', os.O_RDONLY))\n"
        "except OSError as exc:\n"
        "    out['stopped by'] = errno.errorcode.get(exc.errno)\n"
        "out['opened'] = len(held)\n"
        "print(json.dumps(out))\n"
    )
    found = await report(local, code)
    assert found["hard"] == OPEN_FILES and found["raise hard"] == "refused", found
    assert found["stopped by"] == "EMFILE" and int(str(found["opened"])) < OPEN_FILES, found
