"""The sandbox's small parts, without an engine: sizes, output caps, frames, argv, pool, cleanup."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from proctor.sandbox.api import InvalidProgram
from proctor.sandbox.docker.cleanup import cleanup_local_cgroups, is_orphan
from proctor.sandbox.docker.containers import _FrameSplitter, _Stream
from proctor.sandbox.docker.labels import OWNER_HOST, OWNER_PID, container_labels
from proctor.sandbox.docker.pool import WarmPool
from proctor.sandbox.local.backend import CGROUP_PARENT, CGROUP_ROOT
from proctor.sandbox.output import CappedBuffer
from proctor.sandbox.program import MAX_CODE_BYTES, python_argv, python_program, resolve_argv, resolve_program
from proctor.sandbox.sizes import parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [("512m", 512 * 2**20), ("2g", 2 * 2**30), ("1.5GiB", 3 * 2**29), ("4096", 4096), ("64 kb", 65536)],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["12xb", "", "m", "-1m", "0"])
def test_parse_size_rejects_with_the_input_quoted(text: str) -> None:
    with pytest.raises(ValueError, match="bad size"):
        parse_size(text)


def test_capped_buffer_keeps_the_head_and_counts_the_rest() -> None:
    buffer = CappedBuffer(10)
    for chunk in (b"0123", b"456789ab", b"cdef"):
        buffer.feed(chunk)
    assert (buffer.text(), buffer.truncated, buffer.total_bytes) == ("0123456789", True, 16)


def test_capped_buffer_drop_tail_within_and_beyond_the_cap() -> None:
    short = CappedBuffer(100)
    short.feed(b"hello")
    short.feed(b"TRAILER")
    short.drop_tail(7)
    assert (short.text(), short.truncated) == ("hello", False)
    exact = CappedBuffer(5)
    exact.feed(b"hello")
    exact.feed(b"TRAILER")
    exact.drop_tail(7)
    assert (exact.text(), exact.truncated) == ("hello", False)


def test_capped_buffer_replaces_a_cut_multibyte_character() -> None:
    buffer = CappedBuffer(1)
    buffer.feed("é".encode())
    assert buffer.text() == "\ufffd" and buffer.truncated


def _frame(stream: int, payload: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


def test_frame_splitter_reassembles_frames_split_anywhere_and_finds_the_reports() -> None:
    nonce = "ab" * 16
    report = f"\0proctor-exit:{nonce}:3:0:1\0".encode()
    wire = _frame(1, b"out-") + _frame(2, b"err") + _frame(1, b"put") + _frame(1, report) + _frame(2, report)
    streams = {1: _Stream(1024, nonce), 2: _Stream(1024, nonce)}
    splitter = _FrameSplitter(streams)
    for i in range(len(wire)):  # one byte at a time: every split point at once
        assert not splitter.finished()
        splitter.feed(wire[i : i + 1])
    assert splitter.finished()
    assert streams[1].buffer.text() == "out-put" and streams[2].buffer.text() == "err"
    assert streams[1].report == (3, False, True)


def test_a_report_with_another_nonce_is_just_output() -> None:
    stream = _Stream(1024, "cd" * 16)
    forged = f"\0proctor-exit:{'ab' * 16}:0:0:1\0".encode()
    stream.feed(forged)
    assert stream.report is None and stream.buffer.text() == forged.decode()


def test_long_code_travels_on_a_descriptor_and_runs_whole_as_main() -> None:
    code = "import sys\nx = '" + "é" * 200_000 + "'\nprint(len(x), __name__, sys.argv)\n"
    program = python_program(code, sys.executable)
    assert program.source == code.encode()
    fd = os.memfd_create("test-program")
    try:
        os.write(fd, program.source)
        os.lseek(fd, 0, os.SEEK_SET)
        argv = program.argv_with(fd)
        assert sum(len(part.encode()) for part in argv) < 4096  # the code is not on the command line
        completed = subprocess.run(argv, capture_output=True, text=True, check=True, pass_fds=(fd,))
    finally:
        os.close(fd)
    assert completed.stdout == "200000 __main__ ['-c']\n"


def test_code_over_the_bound_is_refused_in_one_line_naming_it() -> None:
    with pytest.raises(InvalidProgram) as refused:
        python_program("#" * (MAX_CODE_BYTES + 1))
    assert (
        str(refused.value)
        == f"the code is {MAX_CODE_BYTES + 1:,} bytes; the sandbox accepts at most {MAX_CODE_BYTES:,} bytes"
    )
    assert python_program("#" * MAX_CODE_BYTES).source is not None


def test_an_explicit_argv_too_long_for_execve_is_refused_before_it_runs() -> None:
    with pytest.raises(InvalidProgram, match=r"^argv\[1\] is 131,072 bytes"):
        resolve_program(None, ["echo", "a" * (128 * 1024)])
    with pytest.raises(
        InvalidProgram, match=r"^argv is 1,\d{3},\d{3} bytes; a command line takes at most 1,048,576"
    ):
        resolve_program(None, ["echo"] + ["a" * 100_000] * 11)
    assert resolve_program(None, ["echo"] + ["a" * 100_000] * 10).argv[0] == "echo"


def test_short_code_runs_as_dash_c_with_main_semantics() -> None:
    argv = python_argv("import sys; print(__name__, sys.argv)", sys.executable)
    assert argv[1:3] == ["-I", "-c"]
    assert subprocess.run(argv, capture_output=True, text=True).stdout == "__main__ ['-c']\n"


def test_resolve_argv_wants_exactly_one() -> None:
    with pytest.raises(ValueError):
        resolve_argv(None, None)
    with pytest.raises(ValueError):
        resolve_argv("pass", ["true"])
    with pytest.raises(ValueError):
        resolve_argv(None, [])
    assert resolve_argv(None, ["echo", 1]) == ["echo", "1"]  # type: ignore[list-item]


def test_orphans_are_containers_whose_owner_died_on_this_host() -> None:
    mine = container_labels("run", "call")
    assert not is_orphan(mine)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert is_orphan({**mine, OWNER_PID: str(dead.pid)})
    assert not is_orphan({**mine, OWNER_PID: str(dead.pid), OWNER_HOST: "another-host"})
    assert is_orphan({**mine, OWNER_PID: "garbage"})
    assert json.loads(json.dumps(mine))[OWNER_PID] == str(os.getpid())


async def test_pool_hands_each_container_out_once_and_refills() -> None:
    made: list[str] = []
    destroyed: list[str] = []

    async def create() -> str:
        await asyncio.sleep(0.01)
        made.append(f"c{len(made)}")
        return made[-1]

    async def destroy(container_id: str) -> None:
        destroyed.append(container_id)

    pool = WarmPool(create, destroy, size=2)
    assert pool.take() is None  # not started: never waits, never invents one
    pool.start()
    assert await pool.wait_full(5)
    first, second = pool.take(), pool.take()
    assert first is not None and second is not None
    assert {first.item, second.item} == {"c0", "c1"} and pool.take() is None
    # Not reusable (no reset given): each goes, and the spare is started again.
    pool.give_back(first, reusable=True)
    pool.give_back(second, reusable=False)
    assert await pool.wait_full(5)
    assert pool.ready_count == 2 and len(made) == 4
    await pool.close()
    assert sorted(destroyed) == ["c0", "c1", "c2", "c3"]


async def test_pool_survives_failing_creation() -> None:
    attempts = 0

    async def create() -> str:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise RuntimeError("engine hiccup")
        return "ok"

    async def destroy(container_id: str) -> None:
        return None

    pool = WarmPool(create, destroy, size=1)
    pool.start()
    assert await pool.wait_full(5)
    lease = pool.take()
    assert isinstance(pool.last_error, RuntimeError) and lease is not None and lease.item == "ok"
    await pool.close()


def test_launcher_fits_in_one_argument() -> None:
    from proctor.sandbox.docker.containers import LAUNCHER

    # A NUL byte in an argument makes execve fail with EINVAL before anything runs.
    assert "\0" not in LAUNCHER and len(LAUNCHER.encode()) < 128 * 1024
    compile(LAUNCHER, "<launcher>", "exec")


async def test_pool_backs_off_while_the_engine_keeps_failing() -> None:
    attempts: list[float] = []

    async def create() -> int:
        attempts.append(time.monotonic())
        raise RuntimeError("exec /sbin/docker-init: invalid argument")

    async def destroy(item: int) -> None:
        pass

    pool: WarmPool[int] = WarmPool(create, destroy, size=1, first_retry_s=0.05, max_retry_s=0.2)
    pool.start()
    await asyncio.sleep(0.8)
    await pool.close()
    gaps = [later - earlier for earlier, later in itertools.pairwise(attempts)]
    # 0.05, 0.1, 0.2, 0.2, ...: a tight loop would make dozens of attempts in 0.8 s.
    assert 3 <= len(attempts) <= 7, attempts
    assert gaps[1] >= 0.09 and gaps[2] >= 0.18, gaps
    assert all(gap < 0.2 + 0.15 for gap in gaps), gaps
    assert isinstance(pool.last_error, RuntimeError)


class _EngineThatRacesAnExit:
    """Answers a forced removal the way dockerd does while the container is still exiting."""

    def __init__(self, refusals: int, error: str) -> None:
        self.refusals = refusals
        self.error = error
        self.requests = 0

    def remove_container(self, container_id: str, force: bool, v: bool) -> None:
        from docker.errors import APIError

        self.requests += 1
        if self.requests <= self.refusals:
            raise APIError(self.error)


_RACE = "Could not kill running container c0ffee, cannot remove - Container c0ffee is not running"


def test_a_removal_that_meets_a_container_mid_exit_is_retried_until_it_is_gone() -> None:
    from proctor.sandbox.docker.containers import remove_container

    engine = _EngineThatRacesAnExit(refusals=2, error=_RACE)
    remove_container(engine, "c0ffee")  # type: ignore[arg-type]
    assert engine.requests == 3


def test_a_removal_refused_for_another_reason_is_not_retried() -> None:
    from docker.errors import APIError

    from proctor.sandbox.docker.containers import remove_container

    engine = _EngineThatRacesAnExit(refusals=1, error="driver failed to remove root filesystem")
    with pytest.raises(APIError, match="root filesystem"):
        remove_container(engine, "c0ffee")  # type: ignore[arg-type]
    assert engine.requests == 1


def test_a_removal_that_keeps_racing_gives_up_and_says_so() -> None:
    from docker.errors import APIError

    from proctor.sandbox.docker.containers import remove_container

    engine = _EngineThatRacesAnExit(refusals=100, error=_RACE)
    with pytest.raises(APIError, match="is not running"):
        remove_container(engine, "c0ffee")  # type: ignore[arg-type]
    assert engine.requests == 5


def test_the_import_bench_takes_turns_so_load_falls_on_every_contender_alike() -> None:
    from proctor.sandbox.bench.calls import _time_alternating

    order: list[str] = []

    def contender(name: str):  # type: ignore[no-untyped-def]
        async def call() -> None:
            order.append(name)

        return call

    async def settle() -> None:
        order.append("settle")

    samples = asyncio.run(_time_alternating(2, {"a": contender("a"), "b": contender("b")}, before=settle))
    assert order == ["a", "b", "settle", "a", "settle", "b", "settle", "a", "settle", "b"]
    assert {name: len(times) for name, times in samples.items()} == {"a": 2, "b": 2}


def test_socket_buffer_bound_finds_the_v1_memory_group_and_never_a_stranger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from proctor.sandbox.docker import socket_memory

    proc, cgroups = tmp_path / "proc", tmp_path / "memory"
    container = "ab" * 32
    lines = {
        "10": f"9:pids:/docker/{container}\n4:memory:/docker/{container}\n0::/\n",
        "11": "4:memory:/docker/someone-else\n",
        "12": "0::/system.slice/docker.scope\n",
    }
    for pid, text in lines.items():
        (proc / pid).mkdir(parents=True)
        (proc / pid / "cgroup").write_text(text)
    (cgroups / "docker" / container).mkdir(parents=True)
    (cgroups / "docker" / "someone-else").mkdir(parents=True)
    monkeypatch.setattr(socket_memory, "CGROUP_V1_MEMORY", cgroups)
    assert socket_memory.limit_container(10, container, 4096, proc=proc)
    assert (cgroups / "docker" / container / socket_memory.TCP_LIMIT_FILE).read_text() == "4096"
    # A pid an engine on another host reported, here some unrelated process: left alone.
    assert not socket_memory.limit_container(11, container, 4096, proc=proc)
    assert not (cgroups / "docker" / "someone-else" / socket_memory.TCP_LIMIT_FILE).exists()
    assert not socket_memory.limit_container(12, container, 4096, proc=proc)  # v2: charged anyway
    assert not socket_memory.limit_container(13, container, 4096, proc=proc)  # not on this host


def test_a_dead_owners_cpuacct_group_is_swept_like_its_other_groups() -> None:
    parent = CGROUP_ROOT / "cpuacct" / CGROUP_PARENT
    try:
        parent.mkdir(exist_ok=True)
    except OSError:
        pytest.skip("cgroups are not writable here: the local backend makes no cpuacct group")
    # No live process has a pid past the kernel's pid_max: the owner is certainly gone.
    dead_owner = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    group = parent / f"call-{dead_owner}-{uuid.uuid4().hex[:12]}"
    group.mkdir()
    try:
        cleanup_local_cgroups()
        assert not group.exists()
    finally:
        with contextlib.suppress(OSError):
            group.rmdir()


def test_a_removal_the_engine_never_confirms_is_a_docker_error_naming_the_container() -> None:
    import requests
    from docker.errors import DockerException

    from proctor.sandbox.docker.containers import RemovalUnconfirmed, remove_container

    class SilentEngine:
        def remove_container(self, container_id: str, force: bool, v: bool) -> None:
            raise requests.exceptions.ReadTimeout("Read timed out. (read timeout=60)")

    with pytest.raises(RemovalUnconfirmed, match=r"c0ffee.*timed out") as raised:
        remove_container(SilentEngine(), "c0ffee")  # type: ignore[arg-type]
    # Every caller that tolerates a failed removal catches DockerException.
    assert isinstance(raised.value, DockerException)
