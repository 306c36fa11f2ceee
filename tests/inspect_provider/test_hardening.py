"""A sample's container keeps Proctor's hardening while it lives, and honest work still runs.

Attack side: root is refused, nothing is writable beyond /work and /tmp, no capability, no
network interface but loopback, the seccomp allowlist and Proctor's denylist both in force, the
limits the config sets are the container's, an output flood ends the call and its process
group, and a cancelled call leaves nothing running. Honest side: files persist between calls,
a numerical library imports, a background process of the sample's own stays up.
Oracle: the kernel's own view (/proc/self/status) and the engine's record (docker inspect).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import docker
import pytest
import pytest_asyncio
from inspect_ai.util import OutputLimitExceededError, SandboxUnavailableError, SandboxUserUnsupportedError
from inspect_ai.util._sandbox.limits import override_max_exec_output_size

from proctor.sandbox.docker import labels
from proctor.sandbox.inspect_provider.config import ProctorSandboxConfig
from proctor.sandbox.inspect_provider.provider import ProctorSandboxEnvironment

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.docker]

CONFIG = ProctorSandboxConfig(memory="768m", cpus=1.0, pids=96, tmpfs="96m")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sample(sandbox_image: str) -> AsyncIterator[ProctorSandboxEnvironment]:
    config = CONFIG.model_copy(update={"image": sandbox_image})
    environments = await ProctorSandboxEnvironment.sample_init("hardening", config, {})
    environment = environments["default"]
    assert isinstance(environment, ProctorSandboxEnvironment)
    try:
        yield environment
    finally:
        await ProctorSandboxEnvironment.sample_cleanup("hardening", config, environments, False)


def _status(text: str, field: str) -> str:
    match = re.search(rf"^{field}:\s*(.*)$", text, re.M)
    assert match is not None, text
    return match.group(1).strip()


async def test_the_program_is_an_unprivileged_uid_under_both_seccomp_layers(
    sample: ProctorSandboxEnvironment,
) -> None:
    status = (await sample.exec(["cat", "/proc/self/status"])).stdout
    uids = _status(status, "Uid").split()
    assert len(set(uids)) == 1 and int(uids[0]) != 0 and int(uids[0]) == sample.container.uid
    for field in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(_status(status, field), 16) == 0, field
    assert _status(status, "NoNewPrivs") == "1"
    # Two filters: the engine's allowlist and Proctor's denylist the wrapper installs.
    assert _status(status, "Seccomp") == "2" and _status(status, "Seccomp_filters") == "2"
    # A user namespace needs no privilege from the kernel; Proctor's filters refuse it (EPERM).
    unshare = (
        "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
        "print(libc.unshare(0x10000000), ctypes.get_errno())"
    )
    assert (await sample.exec(["python3", "-c", unshare])).stdout.split() == ["-1", "1"]


async def test_root_and_other_users_are_refused(sample: ProctorSandboxEnvironment) -> None:
    for user in ("root", "0", "sandbox", "nobody"):
        with pytest.raises(SandboxUserUnsupportedError):
            await sample.exec(["id", "-u"], user=user)
    # The sample's own uid is who it already is.
    same = await sample.exec(["id", "-u"], user=str(sample.container.uid))
    assert same.stdout.strip() == str(sample.container.uid)


async def test_only_loopback_and_only_work_and_tmp_are_writable(sample: ProctorSandboxEnvironment) -> None:
    interfaces = (await sample.exec(["ls", "/sys/class/net"])).stdout.split()
    assert interfaces == ["lo"]
    for path in ("/etc/proctor-test", "/usr/local/bin/proctor-test", "/opt/proctor-test"):
        with pytest.raises(PermissionError):
            await sample.write_file(path, "x")
    await sample.write_file("/tmp/ok/kept.txt", "kept")
    await sample.write_file("kept.txt", "kept in /work")
    assert (await sample.exec(["cat", "/tmp/ok/kept.txt", "/work/kept.txt"])).stdout == "keptkept in /work"


async def test_files_and_processes_persist_between_calls(sample: ProctorSandboxEnvironment) -> None:
    await sample.exec(["sh", "-c", "echo 41 > state.txt"])
    bumped = await sample.exec(["python3", "-c", "n = int(open('state.txt').read()) + 1; print(n)"])
    assert bumped.stdout == "42\n"
    assert await sample.read_file("state.txt") == "41\n"
    imported = await sample.exec(["python3", "-c", "import sympy; print(sympy.factorint(2**32 + 1))"])
    assert imported.stdout.strip() == "{641: 1, 6700417: 1}", imported.stderr


async def test_the_configured_limits_are_the_containers(sample: ProctorSandboxEnvironment) -> None:
    client = docker.from_env()
    try:
        attrs = client.api.inspect_container(sample.container.id)
    finally:
        client.close()
    host = attrs["HostConfig"]
    assert host["Memory"] == host["MemorySwap"] == 768 << 20
    assert host["PidsLimit"] == 96 and host["NanoCpus"] == 10**9
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
    assert any(option.startswith("seccomp=") for option in host["SecurityOpt"])
    assert not host.get("CapAdd") and host["CapDrop"] == ["ALL"]
    container_labels = attrs["Config"]["Labels"]
    assert container_labels[labels.SANDBOX] == "1" and container_labels[labels.ROLE] == "inspect-sample"
    # The container's own counter files: its memory limit, not the host's memory.
    meminfo = (await sample.exec(["head", "-1", "/proc/meminfo"])).stdout
    assert int(meminfo.split()[1]) == 768 * 1024


async def _running(sample: ProctorSandboxEnvironment, marker: str) -> list[str]:
    probe = (
        "import os, sys\n"
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try:\n"
        "        line = open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ')\n"
        "    except OSError:\n"
        "        continue\n"
        "    if sys.argv[1].encode() in line and b'proc/' not in line:\n"
        "        print(pid, line.decode())\n"
    )
    return (await sample.exec(["python3", "-c", probe, marker])).stdout.splitlines()


async def test_an_output_flood_ends_the_call_and_its_processes(sample: ProctorSandboxEnvironment) -> None:
    with override_max_exec_output_size(4096), pytest.raises(OutputLimitExceededError) as caught:
        await sample.exec(["sh", "-c", "yes flood-marker-1 & yes flood-marker-1; wait"])
    assert caught.value.truncated_output is not None and len(caught.value.truncated_output) <= 4096
    await _until_none_running(sample, "flood-marker-1")


async def test_a_cancelled_call_leaves_nothing_running(sample: ProctorSandboxEnvironment) -> None:
    task = asyncio.ensure_future(sample.exec(["sh", "-c", "sleep 300 # cancel-marker-7; :"]))
    await _until_running(sample, "cancel-marker-7")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await _until_none_running(sample, "cancel-marker-7")


async def _until_running(sample: ProctorSandboxEnvironment, marker: str) -> None:
    for _ in range(100):
        if await _running(sample, marker):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{marker} never started")


async def _until_none_running(sample: ProctorSandboxEnvironment, marker: str) -> None:
    # The kill is sent by a detached `docker exec`: wait for its effect, bounded.
    for _ in range(100):
        if not await _running(sample, marker):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{marker} still running: {await _running(sample, marker)}")


async def test_a_background_process_of_the_sample_stays_up(sample: ProctorSandboxEnvironment) -> None:
    """The honest side of the kills above: only a call that overflowed or was cancelled loses
    its processes; one a program started and detached on purpose keeps running."""
    detached = "setsid sh -c 'sleep 120; : daemon-marker-3' > /dev/null 2>&1 & :"
    started = await sample.exec(["sh", "-c", detached])
    assert started.success
    assert await _running(sample, "daemon-marker-3")


async def test_one_tasks_cleanup_leaves_another_tasks_samples(sandbox_image: str) -> None:
    """Two tasks of one eval share the provider class: task_cleanup of one removes only its own."""
    config = CONFIG.model_copy(update={"image": sandbox_image})
    first = (await ProctorSandboxEnvironment.sample_init("task-a", config, {}))["default"]
    second = (await ProctorSandboxEnvironment.sample_init("task-b", config, {}))["default"]
    try:
        await ProctorSandboxEnvironment.task_cleanup("task-a", config, True)
        assert (await second.exec(["true"])).success
        with pytest.raises(SandboxUnavailableError):
            await first.exec(["true"])
    finally:
        await ProctorSandboxEnvironment.task_cleanup("task-b", config, True)
    with pytest.raises(SandboxUnavailableError):
        await second.exec(["true"])


async def test_login_shells_keep_the_images_libraries(sample: ProctorSandboxEnvironment) -> None:
    """Inspect's bash and python tools run `bash --login`; Debian's /etc/profile resets PATH.
    The sample's .profile puts the image's PATH back, so its venv (sympy) stays importable."""
    login = await sample.exec(["bash", "--login", "-c", "python3 -c 'import sympy; print(sympy.__name__)'"])
    assert login.stdout == "sympy\n", login.stderr
