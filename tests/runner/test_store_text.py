"""Item 2: the store writes whatever a model sends, and every reader reads it back.

Attacks: lone surrogates (the issue's "\\ud800", in content, keys, tool arguments, errors),
NUL and terminal control bytes, HTML that tries to end the report's <script>, 10 MB strings,
NaN and infinities, nesting deeper than any record of ours. Readers: load_samples (what
--resume uses), the report loader and page, compare.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proctor.agent.bench.loop import open_double
from proctor.agent.inputs.config import BudgetConfig, ModelConfig, RunConfig
from proctor.agent.report.compare import compare_runs
from proctor.agent.report.loader import load_run
from proctor.agent.report.page import render_report
from proctor.agent.results.records import EEDRecord, Outcome, SampleRecord, ToolCallRecord
from proctor.agent.results.store import SampleWriter, encode_record, load_samples
from proctor.agent.run.runner import execute_run
from tests.runner.conftest import quiet_progress
from tests.support.scripted_server import Reply, ScriptedServer, ToolCallSpec

HOSTILE = "a\ud800b\x00c\x1b[31md</script><script>alert(1)</script>\udfff"


def record(**changes: Any) -> SampleRecord:
    base: dict[str, Any] = dict(
        run_id="r",
        track="phybench",
        task_id="t",
        trial=0,
        model="m",
        outcome=Outcome.INCORRECT,
        started_at="2026-12-01T00:00:00+00:00",
        finished_at="2026-12-01T00:00:01+00:00",
        duration_s=1.0,
    )
    base.update(changes)
    return SampleRecord(**base)


def test_surrogates_are_spelled_out_and_flagged_everything_else_is_kept(tmp_path: Path) -> None:
    hostile = record(
        error=HOSTILE,
        transcript=[{"role": "assistant", "content": HOSTILE, "k\ud83d": 1}],
        tool_calls=[ToolCallRecord(turn=1, call_id="c", name="python", raw_arguments='{"code": "\udfff"}')],
    )
    line, stored = encode_record(hostile)
    line.decode("utf-8")  # strict: the line is valid UTF-8
    assert stored.unencodable_text is not None and stored.unencodable_text.count == 6
    assert set(stored.unencodable_text.fields) == {
        "error",
        "transcript.0.content",
        "transcript.0.<key>",
        "tool_calls.0.raw_arguments",
    }
    assert stored.error == HOSTILE.replace("\ud800", "\\ud800").replace("\udfff", "\\udfff")
    assert "\x00" in stored.error and "\x1b" in stored.error  # kept as JSON escapes, losslessly
    path = tmp_path / "samples.jsonl"
    writer = SampleWriter(path)
    assert writer.append(hostile) == stored
    writer.close()
    assert load_samples(path).records == [stored]


def test_ten_megabytes_round_trip_losslessly(tmp_path: Path) -> None:
    big = "é\x00" * (5 * 1024 * 1024)
    path = tmp_path / "samples.jsonl"
    writer = SampleWriter(path)
    writer.append(record(transcript=[{"role": "assistant", "content": big}]))
    writer.close()
    (loaded,) = load_samples(path).records
    assert loaded.transcript[0]["content"] == big and loaded.unencodable_text is None


def test_nan_infinity_and_absurd_nesting_still_read_back(tmp_path: Path) -> None:
    deep: Any = "bottom\ud800"
    for _ in range(300):
        deep = {"x": deep}
    path = tmp_path / "samples.jsonl"
    writer = SampleWriter(path)
    writer.append(
        record(
            duration_s=float("inf"),
            eed=EEDRecord(score=float("nan"), relative_distance=float("-inf")),
            transcript=[{"role": "tool", "content": deep}],
        )
    )
    writer.close()
    (loaded,) = load_samples(path).records
    assert (
        loaded.duration_s == float("inf") and loaded.eed is not None and loaded.eed.score != loaded.eed.score
    )
    # Past the depth our own records ever reach, the tail is kept as its repr (escaped).
    assert "bottom\\\\ud800" in json.dumps(loaded.transcript)


def phybench_tasks(path: Path, count: int) -> Path:
    rows = [{"id": f"p{i}", "question": "Find v.", "answer": "\\sqrt{2 g L}"} for i in range(count)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


async def test_issue_phybench_lone_surrogate_keeps_all_three_samples_and_the_report_renders(
    tmp_path: Path,
) -> None:
    reply = Reply(content="So \\boxed{\\sqrt{2 g L}} \ud800 " + HOSTILE)
    with ScriptedServer(lambda request, index: reply) as server:
        config = RunConfig(
            track="phybench",
            tasks=phybench_tasks(tmp_path / "tasks.jsonl", 3),
            out=tmp_path / "run",
            models=[ModelConfig(name="openai/m", base_url=server.base_url, max_retries=0)],
        )
        result = await execute_run(config, progress=quiet_progress(), handle_signals=False)
        again = await execute_run(
            config.model_copy(update={"resume": True}), progress=quiet_progress(), handle_signals=False
        )
    assert result.status == "finished" and result.finished == 3
    assert again.ran_now == 0 and again.finished == 3  # --resume reads the file back
    records = load_samples(tmp_path / "run" / "samples.jsonl").records
    assert {r.outcome for r in records} == {Outcome.CORRECT}
    assert all(r.unencodable_text is not None for r in records)
    run = load_run(tmp_path / "run")
    page = render_report(run)
    page.encode("utf-8")
    assert "<script>alert(1)" not in page and "\\\\ud800" in page
    assert compare_runs([run, run]) is not None


async def test_issue_frontiermath_lone_surrogate_and_odd_tool_calls_keep_the_sample(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        json.dumps(
            {
                "id": "fm",
                "question": "6*7?",
                "answer_type": "Python int",
                "answer": "42",
                "reference_solution": "def answer():\n    return 42\n",
            }
        )
        + "\n"
    )
    seen: list[dict[str, Any]] = []

    def script(request: dict[str, Any], index: int) -> Any:
        seen.append(request)
        if index == 0:
            return Reply(
                content="thinking \ud800",
                tool_calls=[
                    ToolCallSpec("python", '{"code": "print(1)"}', id="dup"),
                    ToolCallSpec("python", '{"code": "print(2)"}', id="dup"),
                    ToolCallSpec("nope", "not json", id="x"),
                ],
            )
        return Reply(tool_calls=[ToolCallSpec("submit_answer", '{"code": "def answer():\\n    return 42"}')])

    with ScriptedServer(script) as server:
        config = RunConfig(
            track="frontiermath",
            tasks=tasks,
            out=tmp_path / "run",
            models=[ModelConfig(name="openai/m", base_url=server.base_url, max_retries=0)],
            budget=BudgetConfig(token_cap=100_000, force_submit_at=90_000),
        )
        result = await execute_run(
            config, progress=quiet_progress(), handle_signals=False, sandbox_opener=open_double
        )
    assert result.status == "finished" and result.finished == 1
    (stored,) = load_samples(tmp_path / "run" / "samples.jsonl").records
    assert stored.unencodable_text is not None
    ids = [call.call_id for call in stored.tool_calls[:3]]
    assert ids[0] == "dup" and len(set(ids)) == 3
    assert stored.tool_calls[1].deviations and "duplicate id 'dup'" in stored.tool_calls[1].deviations[0]
    assert "unknown tool 'nope'" in (stored.tool_calls[2].error or "")
    # The second request answers each call of the first reply exactly once, by its id.
    messages = seen[1]["messages"]
    asked = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert asked == answered == ids
    assert "\\ud800" in json.dumps(messages)  # the surrogate went back spelled out, not raw


def test_every_line_the_writer_accepts_reads_back_at_any_nesting(tmp_path: Path) -> None:
    # pydantic writes about 250 levels but reads 200: a record nested in between used to be
    # written whole and then refused by every resume as corruption at its line number.
    path = tmp_path / "samples.jsonl"
    writer = SampleWriter(path)
    depths = list(range(150, 320, 10))
    for depth in depths:
        deep: Any = "bottom"
        for _ in range(depth):
            deep = [deep]
        writer.append(
            record(task_id=f"d{depth}", transcript=[{"role": "tool", "content": "x", "extra": deep}])
        )
    writer.close()
    loaded = load_samples(path).records
    assert [r.task_id for r in loaded] == [f"d{depth}" for depth in depths]
    # Shallow enough to read back: kept exactly; deeper: the tail past 64 levels is its repr.
    assert (
        loaded[0].transcript[0]["extra"]
        == record(transcript=[{"extra": _nested(150)}]).transcript[0]["extra"]
    )
    assert "bottom" in json.dumps(loaded[-1].transcript)


def _nested(depth: int) -> Any:
    deep: Any = "bottom"
    for _ in range(depth):
        deep = [deep]
    return deep


def test_a_record_no_reader_could_take_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    # An integer past the JSON reader's 4,300 digits (Python code can make one; no JSON reply
    # can) is refused by the writer, so the runner records a harness_error instead.
    path = tmp_path / "samples.jsonl"
    writer = SampleWriter(path)
    writer.append(record(task_id="before"))
    with pytest.raises(ValueError, match="read back"):
        writer.append(record(task_id="huge", transcript=[{"role": "tool", "content": "x", "n": 10**5000}]))
    writer.append(record(task_id="after"))
    writer.close()
    assert [r.task_id for r in load_samples(path).records] == ["before", "after"]
