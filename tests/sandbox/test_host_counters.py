"""Concurrent calls cannot signal each other through the host's memory counters (docker, runc).

What is attacked: the covert channel through ``/proc/meminfo``. One call holds and releases
400 MB while another, in another sample, watches ``MemAvailable``; on a host-wide meminfo the
watcher sees the sender's every allocation (about 2 bits a minute measured). With LXCFS each
container's meminfo is its own (sandbox/host_counters.py), so the watcher sees only itself,
while the host's own meminfo, read here at the same time, shows the sender did allocate.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from proctor.sandbox import Limits, Sandbox, open_sandbox
from proctor.sandbox.host_counters import RESIDUAL, VIRTUALIZED, lxcfs_mounted
from tests.conftest import IN_CI

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

MIB = 1024 * 1024
LIMITS = Limits(memory_bytes=1024 * MIB, pids=128, tmpfs_bytes=64 * MIB)
SENDER = (
    "import time\n"
    "time.sleep(1.0)\n"
    "block = bytearray(400 * 1024 * 1024)\n"
    "for i in range(0, len(block), 4096):\n"
    "    block[i] = 1\n"
    "time.sleep(2.5)\n"
    "del block\n"
    "print('sent')\n"
)
WATCHER = (
    "import json, time\n"
    "def available():\n"
    "    for line in open('/proc/meminfo'):\n"
    "        if line.startswith('MemAvailable:'):\n"
    "            return int(line.split()[1]) * 1024\n"
    "seen = []\n"
    "end = time.monotonic() + 4.5\n"
    "while time.monotonic() < end:\n"
    "    seen.append(available())\n"
    "    time.sleep(0.05)\n"
    "print(json.dumps({'min': min(seen), 'max': max(seen), 'total': open('/proc/meminfo').readline()}))\n"
)


def host_available() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no MemAvailable in the host's /proc/meminfo")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def docker_sandbox(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    if not lxcfs_mounted():
        if IN_CI:
            pytest.fail("LXCFS is not running at /var/lib/lxcfs: .ci/setup.sh starts it")
        pytest.skip("LXCFS is not running: bash .ci/setup.sh")
    image = request.getfixturevalue("sandbox_image")
    opened = await open_sandbox("docker", image=image, pool_size=2, default_limits=LIMITS)
    try:
        yield opened
    finally:
        await opened.aclose()


async def test_a_call_cannot_see_another_calls_memory_through_meminfo(docker_sandbox: Sandbox) -> None:
    host_seen: list[int] = []

    async def watch_host() -> None:
        end = time.monotonic() + 6.0
        while time.monotonic() < end:
            host_seen.append(host_available())
            await asyncio.sleep(0.05)

    sender, watcher, _ = await asyncio.gather(
        docker_sandbox.exec(SENDER, timeout=30),
        docker_sandbox.exec(WATCHER, timeout=30),
        watch_host(),
    )
    assert sender.exit_code == 0 and "sent" in sender.stdout, sender
    assert watcher.exit_code == 0, watcher
    view = json.loads(watcher.stdout.strip().splitlines()[-1])
    # The control: the host did see the sender's 400 MB come and go.
    assert max(host_seen) - min(host_seen) >= 300 * MIB, (min(host_seen), max(host_seen))
    # The watcher saw only its own container: its total is its limit, and nothing of the 400 MB.
    assert view["total"].split()[1] == str(LIMITS.memory_bytes // 1024), view
    assert view["max"] - view["min"] < 64 * MIB, view


async def test_the_sandbox_records_which_counters_are_its_own(docker_sandbox: Sandbox) -> None:
    described = docker_sandbox.describe()["host_counters"]
    assert described["virtualized_by"] == "lxcfs"
    assert set(described["virtualized"]) == set(VIRTUALIZED)
    assert described["host_wide"] == list(RESIDUAL)
    # The CPU list follows the quota, so os.cpu_count() sizes pools to the limit, not the host.
    result = await docker_sandbox.exec("import os; print(os.cpu_count())", timeout=30)
    assert result.stdout.strip() == str(max(1, int(LIMITS.cpus))), result
