"""Defensible sandbox hardware (issue 23, item 4).

Invariants: a call gets at least 4 GiB by default, the same figure wherever a default is read
(the sandbox's ``Limits``, the run config, the report); and when the calls that can run at
once times that memory exceed the host's, the run says so on stderr and in run.json.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.agent.inputs.config import RunConfig, SandboxConfig
from proctor.agent.run.config_loader import parse_size
from proctor.agent.run.hardware import hardware_record, hardware_summary, host_memory_bytes, memory_check
from proctor.agent.run.run_sandbox import check_memory
from proctor.sandbox import Limits

GIB = 1 << 30


def test_the_default_call_has_4_gib_everywhere() -> None:
    assert Limits().memory_bytes == 4 * GIB
    assert parse_size(SandboxConfig().memory) == Limits().memory_bytes
    # run.json's hardware block and the report header show the limits as they always did.
    record = hardware_record(None, Limits(), None)
    assert record["sandbox"] is None  # no sandbox described: nothing claimed
    described = {"limits": {"cpus": 1.0, "memory_bytes": Limits().memory_bytes}}
    line = hardware_summary(hardware_record(described, Limits(), None))
    assert "sandbox 1.0 CPU, 4 GiB, no swap" in line


def test_host_memory_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24576000 kB\nMemFree:  1 kB\n")
    assert host_memory_bytes(meminfo) == 24576000 * 1024
    # Unreadable: the machine's own figure from sysconf, never a crash.
    assert (host_memory_bytes(tmp_path / "missing") or 0) > 0


@given(
    memory_mib=st.integers(16, 64 * 1024),
    samples=st.integers(1, 512),
    slots=st.none() | st.integers(1, 256),
    host_mib=st.integers(256, 1024 * 1024),
)
def test_the_check_warns_exactly_when_the_calls_at_once_need_more_than_the_host(
    memory_mib: int, samples: int, slots: int | None, host_mib: int
) -> None:
    memory, host = memory_mib << 20, host_mib << 20
    check = memory_check(
        memory_bytes=memory,
        samples_in_flight=samples,
        execution_slots=slots,
        host_bytes=host,
        backend="docker",
    )
    calls = samples if slots is None else min(samples, slots)
    assert check["calls_at_once"] == calls and check["needed_bytes"] == calls * memory
    assert check["checked"] and check["exceeds_host"] == (calls * memory > host)
    assert ("warning" in check) == (calls * memory > host)


def test_ray_and_an_unknown_host_are_recorded_as_unchecked() -> None:
    ray = memory_check(
        memory_bytes=GIB, samples_in_flight=9, execution_slots=None, host_bytes=GIB, backend="ray"
    )
    assert ray["checked"] is False and "warning" not in ray and "nodes" in ray["why"]
    unknown = memory_check(
        memory_bytes=GIB, samples_in_flight=9, execution_slots=None, host_bytes=None, backend="docker"
    )
    assert unknown["checked"] is False and "warning" not in unknown


@pytest.mark.parametrize(("concurrency", "warned"), [(1, False), (64, True)])
def test_the_runner_warns_on_stderr_and_records_in_run_json(
    concurrency: int, warned: bool, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 16 GiB host; 64 samples in flight with 64 slots want 256 GiB at the default 4 GiB.
    monkeypatch.setattr("proctor.agent.run.run_sandbox.host_memory_bytes", lambda: 16 * GIB)
    config = RunConfig.model_validate(
        {"tasks": "t.jsonl", "models": [{"name": "openai/m"}], "max_concurrency": concurrency}
    )
    header: dict[str, object] = {"sessions": [{}]}
    described = {"backend": "docker", "max_concurrent_executions": 64}
    check_memory(config, described, parse_size(config.sandbox.memory), header)  # type: ignore[arg-type]
    check = header["sandbox_memory_check"]
    assert isinstance(check, dict) and check["exceeds_host"] is warned
    assert header["sessions"] == [{"sandbox_memory_check": check}]
    err = capsys.readouterr().err
    if warned:
        assert err.startswith("proctor: warning: sandbox memory: 64 call(s) at once x 4.0 GiB = 256.0 GiB")
        assert "16.0 GiB" in err and "max_concurrency" in err and err.count("\n") == 1
    else:
        assert err == ""
