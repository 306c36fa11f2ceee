"""`proctor run --audit quick`: the run's own sandbox is audited before any sample runs.

A weakened sandbox makes the run refuse to start (one line naming the broken check, no
samples, no run.json). The real docker sandbox either passes, and then run.json and the report
header carry the audit, or fails exactly the checks this branch's base is known to fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import SandboxConfig
from proctor.agent.report.loader import load_run
from proctor.agent.report.page import render_report
from proctor.agent.run.runner import execute_run
from proctor.sandbox import Limits, Sandbox, SandboxSpec
from tests.audit.weakened import open_weakened
from tests.runner.conftest import make_config, quiet_progress
from tests.runner.test_frontiermath_runs import submitting_model, write_fm_tasks
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.docker


async def test_run_refuses_a_broken_sandbox(tmp_path: Path) -> None:
    async def weakened(spec: SandboxSpec) -> Sandbox:
        limits = spec.default_limits
        assert isinstance(limits, Limits)
        return await open_weakened("writable_root", limits, pool_size=1)

    tasks = write_fm_tasks(tmp_path / "tasks.jsonl", 1)
    out = tmp_path / "run"
    with ScriptedServer(submitting_model()) as server:
        config = make_config(
            tasks,
            out,
            server.base_url,
            track="frontiermath",
            # No sample runs: a small memory limit keeps the quick audit's memory row short
            # (it fills the limit; 4 GiB takes seconds of page faults on a loaded machine).
            sandbox=SandboxConfig(backend="docker", pool_size=1, memory="256m"),
        )
        with pytest.raises(UserError, match=r"--audit quick: the sandbox failed .*limits\.read_only_root"):
            await execute_run(
                config,
                progress=quiet_progress(),
                handle_signals=False,
                sandbox_opener=weakened,
                audit="quick",
            )
        assert server.requests == []  # no model call before the audit
    assert not (out / "samples.jsonl").exists() or not (out / "samples.jsonl").read_text().strip()
    assert not (out / "run.json").exists()


async def test_run_records_the_audit_or_refuses_for_the_known_rows(tmp_path: Path) -> None:
    tasks = write_fm_tasks(tmp_path / "tasks.jsonl", 1)
    out = tmp_path / "run"
    with ScriptedServer(submitting_model()) as server:
        config = make_config(
            tasks,
            out,
            server.base_url,
            track="frontiermath",
            sandbox=SandboxConfig(backend="docker", pool_size=1),
        )
        await execute_run(config, progress=quiet_progress(), handle_signals=False, audit="quick")
    header = json.loads((out / "run.json").read_text())
    assert header["audit"]["mode"] == "quick" and header["audit"]["passed"] is True
    assert header["sessions"][-1]["audit"]["counts"]["broken"] == 0
    page = render_report(load_run(out))
    assert "sandbox audit: <b>quick: " in page
