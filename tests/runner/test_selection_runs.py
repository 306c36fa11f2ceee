"""Task selection in real runs: applied before any request, recorded in run.json, and free to
change on --resume (the summary then covers exactly the tasks selected this session)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proctor.agent.errors import UserError
from proctor.agent.results.store import load_samples
from proctor.agent.run.runner import execute_run
from tests.runner.conftest import make_config, quiet_progress, write_tasks
from tests.support.scripted_server import ScriptedServer


async def run(config: Any) -> Any:
    return await execute_run(config, progress=quiet_progress(), handle_signals=False)


async def test_only_selected_tasks_reach_the_model_and_run_json_records_the_selection(
    tmp_path: Path, echo_server: ScriptedServer
) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", 8)
    out = tmp_path / "run"
    config = make_config(
        tasks,
        out,
        echo_server.base_url,
        task_filter={"subject": "geometry"},
        task_ids=["t0*"],
        limit_tasks="2-3",
    )
    result = await run(config)
    # geometry is every odd task: t01, t03, t05, t07; the range keeps the 2nd and 3rd.
    asked = sorted(body["messages"][-1]["content"] for body in echo_server.bodies())
    assert asked == ["say:a3", "say:a5"]
    assert result.planned == 2 and echo_server.call_count == 2
    header = json.loads((out / "run.json").read_text())
    assert header["selection"] == {
        "task_filter": {"subject": "geometry"},
        "task_ids": ["t0*"],
        "limit": "2-3",
        "tasks_in_file": 8,
        "selected_tasks": 2,
        "selected_ids": ["t03", "t05"],
        "selected_ids_truncated": False,
    }
    assert header["config"]["limit_tasks"] == "2-3" and header["tasks_file"]["selected_tasks"] == 2


async def test_a_selection_that_keeps_nothing_fails_before_any_request(
    tmp_path: Path, echo_server: ScriptedServer
) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    with pytest.raises(UserError, match="no task left after the selection"):
        await run(make_config(tasks, tmp_path / "run", echo_server.base_url, limit_tasks="4-5"))
    assert echo_server.call_count == 0 and not (tmp_path / "run").exists()


async def test_resume_with_another_selection_runs_only_the_new_tasks_and_summarises_the_selection(
    tmp_path: Path, echo_server: ScriptedServer
) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", 6)
    out = tmp_path / "run"
    await run(make_config(tasks, out, echo_server.base_url, limit_tasks=2))
    assert echo_server.call_count == 2
    # Widen: the two done are kept, four more run.
    widened = await run(make_config(tasks, out, echo_server.base_url, resume=True, limit_tasks=6))
    assert widened.ran_now == 4 and widened.finished == 6 and echo_server.call_count == 6
    # Narrow with a filter: nothing runs, and the summary covers the three selected tasks only.
    narrowed = await run(
        make_config(tasks, out, echo_server.base_url, resume=True, task_filter={"subject": "algebra"})
    )
    assert narrowed.ran_now == 0 and narrowed.summary["overall"]["tasks"] == 3
    assert len(load_samples(out / "samples.jsonl").records) == 6  # nothing was dropped
    sessions = json.loads((out / "run.json").read_text())["sessions"]
    assert [s["selection"] for s in sessions] == ["limit 2", "limit 6", "filter subject='algebra'"]
