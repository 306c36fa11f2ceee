"""run.json records the hardware: host CPU, sandbox quota, a calibration figure (issue 11, item 4)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from proctor.agent.bench.loop import open_double
from proctor.agent.inputs.config import SandboxConfig
from proctor.agent.report.loader import load_run
from proctor.agent.report.page import render_report
from proctor.agent.run import hardware
from proctor.agent.run.config_loader import parse_size
from proctor.agent.run.hardware import (
    WORKLOAD_CHECKSUM,
    calibrate,
    calibration_workload,
    hardware_summary,
    host_cpu_model,
    parse_calibration,
)
from proctor.agent.run.runner import execute_run
from proctor.sandbox import ExecResult, Limits, SandboxError, SandboxSpec
from tests.runner.conftest import make_config, quiet_progress, write_tasks
from tests.support.scripted_server import ScriptedServer

LIMITS = Limits(memory_bytes=1024**3, cpus=1.0)


def test_the_checksum_constant_is_what_the_workload_computes() -> None:
    assert calibration_workload() == WORKLOAD_CHECKSUM
    # The program sent to the sandbox is the same loop, not a copy that could drift.
    assert f"range({hardware.WORKLOAD_ITERATIONS})" in hardware.CALIBRATION_PROGRAM


def _result(stdout: str, **changes: Any) -> ExecResult:
    return ExecResult(**{"exit_code": 0, "stdout": stdout, "stderr": "", **changes})


def _figures(**values: Any) -> str:
    return json.dumps({"inside_s": 0.3, "cpu_s": 0.29, "checksum": WORKLOAD_CHECKSUM, **values})


def test_good_figures_are_kept() -> None:
    assert parse_calibration(_result("noise\n" + _figures())) == {"inside_s": 0.3, "cpu_s": 0.29}


@pytest.mark.parametrize(
    ("stdout", "changes", "problem"),
    [
        (_figures(checksum=1), {}, "wrong checksum"),  # a short-circuited loop looks fast
        (_figures(checksum=None), {}, "wrong checksum"),
        (_figures(inside_s=-1), {}, "nonsense inside_s"),
        (_figures(inside_s=True), {}, "nonsense inside_s"),
        (_figures(cpu_s="0.1"), {}, "nonsense cpu_s"),
        (_figures(inside_s=1e300), {}, "nonsense inside_s"),
        (_figures().replace("0.3", "NaN", 1), {}, "nonsense inside_s"),
        ("1\n", {}, "printed no figures"),  # what the in-process benchmark double prints
        ("[1, 2]", {}, "printed no figures"),
        ("", {}, "printed no figures"),
        (_figures(), {"exit_code": 137, "oom_killed": True}, "exited with 137"),
        (_figures(), {"timed_out": True, "exit_code": None}, "timed out"),
    ],
)
def test_bad_figures_are_an_error_never_a_number(stdout: str, changes: dict[str, Any], problem: str) -> None:
    parsed = parse_calibration(_result(stdout, **changes))
    assert set(parsed) == {"error"} and problem in parsed["error"]


class BrokenSandbox:
    backend = "broken"

    async def exec(
        self,
        code: str | None = None,
        *,
        argv: Sequence[str] | None = None,
        stdin: str | bytes | None = None,
        timeout: float = 30.0,
        limits: Limits | None = None,
    ) -> ExecResult:
        raise SandboxError("engine went away")

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend}

    async def aclose(self) -> None:
        return None


async def test_a_failing_sandbox_is_recorded_not_raised() -> None:
    record = await calibrate(BrokenSandbox(), LIMITS)
    assert record["workload"] == hardware.WORKLOAD_NAME and "engine went away" in record["error"]


def test_cpu_model_comes_from_cpuinfo(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nvendor_id\t: X\nmodel name\t: Example CPU @ 3.0GHz\n\nprocessor\t: 1\n"
    )
    assert host_cpu_model(cpuinfo) == "Example CPU @ 3.0GHz"
    assert host_cpu_model(tmp_path / "missing") == (__import__("platform").processor() or None)


def test_summary_line_reads_any_header_without_failing() -> None:
    assert hardware_summary(None) == "not recorded"
    assert hardware_summary({"host": "junk", "sandbox": 3, "calibration": []}) == "host CPU ? × ?"
    line = hardware_summary(
        {
            "host": {"cpu_model": "AMD EPYC", "logical_cpus": 2, "usable_cpus": 2},
            "sandbox": {"cpus": 1.0, "memory_bytes": 1024**3, "swap_bytes": 0},
            "calibration": {"workload": "lcg-4m-v1", "inside_s": 0.314, "outside_s": 0.52},
        }
    )
    assert (
        line == "host AMD EPYC × 2 · sandbox 1.0 CPU, 1 GiB, no swap · "
        "calibration lcg-4m-v1 0.31 s, 0.52 s with start-up"
    )


async def test_a_run_records_hardware_and_the_report_shows_it(
    tmp_path: Path, echo_server: ScriptedServer
) -> None:
    # The in-process double prints "1": the run goes on and says calibration failed.
    config = make_config(
        write_tasks(tmp_path / "t.jsonl", 1), tmp_path / "run", echo_server.base_url, track="echo-sandbox"
    )
    result = await execute_run(
        config, progress=quiet_progress(), handle_signals=False, sandbox_opener=open_double
    )
    assert result.status == "finished"
    header = json.loads((tmp_path / "run" / "run.json").read_text())
    recorded = header["hardware"]
    assert recorded["host"]["cpu_model"] == host_cpu_model()
    assert recorded["host"]["logical_cpus"] >= 1
    # The double describes no limits: the configured ones are recorded, and said to be.
    assert recorded["sandbox"] == {
        "cpus": 1.0,
        "memory_bytes": 4 * 1024**3,  # the default: 4 GiB a call (issue 23, item 4)
        "swap_bytes": 0,
        "source": "run config",
    }
    assert "printed no figures" in recorded["calibration"]["error"]
    assert header["sessions"][-1]["calibration"] == recorded["calibration"]
    # Whether the calls at once fit in this host's memory, checked and on record.
    check = header["sandbox_memory_check"]
    assert check["memory_bytes"] == 4 * 1024**3 and check["checked"] is True
    page = render_report(load_run(tmp_path / "run"))
    assert 'data-fact="hardware"' in page and "calibration failed" in page
    assert "sandbox 1.0 CPU, 4 GiB, no swap" in page


async def test_calibration_can_be_switched_off_and_sandboxless_runs_record_the_host(
    tmp_path: Path, echo_server: ScriptedServer
) -> None:
    tasks = write_tasks(tmp_path / "t.jsonl", 1)
    off = make_config(
        tasks,
        tmp_path / "off",
        echo_server.base_url,
        track="echo-sandbox",
        sandbox=SandboxConfig(calibrate=False),
    )
    await execute_run(off, progress=quiet_progress(), handle_signals=False, sandbox_opener=open_double)
    assert json.loads((tmp_path / "off" / "run.json").read_text())["hardware"]["calibration"] is None
    none = make_config(tasks, tmp_path / "none", echo_server.base_url)
    await execute_run(none, progress=quiet_progress(), handle_signals=False)
    recorded = json.loads((tmp_path / "none" / "run.json").read_text())["hardware"]
    assert recorded["host"]["cpu_model"] == host_cpu_model()
    assert recorded["sandbox"] is None and recorded["calibration"] is None
    assert math.isfinite(recorded["host"]["logical_cpus"])


@pytest.mark.parametrize(
    "box",
    [
        SandboxConfig(calibrate=False),
        SandboxConfig(calibrate=False, isolation="per-sample", engine_path="runc-direct"),
        SandboxConfig(
            calibrate=False,
            backend="docker",
            runtime="runsc",
            docker_host="unix:///run/proctor-gvisor/docker.sock",
            image="proctor-sandbox:custom",
            pool_size=0,
            memory="256m",
            cpus=2,
            max_concurrent_executions=3,
        ),
    ],
)
async def test_a_run_opens_its_sandbox_with_the_configured_spec_and_records_it(
    tmp_path: Path, echo_server: ScriptedServer, box: SandboxConfig
) -> None:
    asked: list[SandboxSpec] = []

    async def recording_opener(spec: SandboxSpec) -> Any:
        asked.append(spec)
        return await open_double(spec)

    config = make_config(
        write_tasks(tmp_path / "t.jsonl", 1),
        tmp_path / "run",
        echo_server.base_url,
        track="echo-sandbox",
        sandbox=box,
    )
    result = await execute_run(
        config, progress=quiet_progress(), handle_signals=False, sandbox_opener=recording_opener
    )
    assert result.status == "finished"
    # Every option of the config's sandbox section reaches the opener, in one value.
    (spec,) = asked
    assert (spec.backend, spec.image, spec.pool_size) == (box.backend, box.image, box.pool_size)
    assert (spec.runtime, spec.docker_host) == (box.runtime, box.docker_host)
    assert (spec.isolation, spec.engine_path) == (box.isolation, box.engine_path)
    assert spec.max_concurrent_executions == box.max_concurrent_executions
    assert spec.default_limits == Limits(memory_bytes=parse_size(box.memory), cpus=box.cpus)
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())
    assert SandboxSpec.from_record(recorded["sandbox_spec"]) == spec
