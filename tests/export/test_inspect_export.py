"""`proctor export RUN --format inspect`: a real run, written with inspect_ai's own writer, read
back with ``inspect_ai.log.read_eval_log``: samples, scores, messages and model names survive.

Attacks: transcript entries an edited file could hold (content that is not text, tool-call
arguments that are not JSON or not an object, missing ids) still convert; without inspect_ai
the command says in one line how to get it; an export leaves the caller's ``asyncio`` as it was.

inspect_ai never loads into the pytest process (tests/support/inspect_logs.py says why): logs are
read back, and Inspect's types built, in child processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from proctor.agent.errors import UserError
from proctor.agent.export.inspect_log import export_inspect
from tests.rescore.conftest import StoredResearchRun, read_lines
from tests.support.inspect_logs import chat_messages_json, inspect_installed, read_log, read_logs, run_child

# Slow: each export starts an interpreter that imports inspect_ai, and each read-back another.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not inspect_installed(), reason="pip install 'proctor[inspect]'"),
]
REPO = Path(__file__).resolve().parents[2]


def test_a_research_run_reads_back_from_its_inspect_log(
    research_run: StoredResearchRun, tmp_path: Path
) -> None:
    records = read_lines(research_run.directory / "samples.jsonl")
    (path,) = export_inspect(research_run.directory, tmp_path / "run.eval")
    log = read_log(path)

    assert log["status"] == "success"
    assert log["eval"]["model"] == "openai/student"
    assert log["eval"]["task"] == "proctor/research"
    assert log["eval"]["model_roles"] is not None
    assert log["eval"]["model_roles"]["grader"]["model"] == "openai/judge-a"
    assert log["samples"] is not None and len(log["samples"]) == len(records) == 6
    samples = {(s["id"], s["epoch"]): s for s in log["samples"]}
    for record in records:
        sample = samples[(record["task_id"], record["trial"] + 1)]
        assert [m["role"] for m in sample["messages"]] == [m["role"] for m in record["transcript"]]
        assert sample["messages"][0]["text"] == record["transcript"][0]["content"]
        assert sample["output"]["completion"] == record["transcript"][-1]["content"]
        assert sample["target"] == "Up to 10 points."
        assert sample["model_usage"]["openai/student"]["input_tokens"] == record["input_tokens"]
        assert sample["metadata"]["outcome"] == record["outcome"]
        if record["outcome"] == "judge_error":
            # An error says nothing about the model: no score, the error instead.
            assert sample["scores"] is None and sample["error"] is not None
            assert record["error"] in sample["error"]["message"]
        else:
            score = sample["scores"]["proctor"]
            assert score["value"] == ("C" if record["success"] else "I")
            assert score["metadata"]["score"] == record["score"]
            assert score["explanation"] == record["judge"]["replies"][-1]
    scores = log["results"]["scores"][0]
    assert scores["scored_samples"] == 4 and scores["unscored_samples"] == 2
    assert scores["metrics"]["accuracy"]["value"] == 0.5


def test_hostile_transcript_entries_still_convert() -> None:
    messages = chat_messages_json(
        [
            {"role": "user", "content": {"not": "text"}},
            {
                "role": "assistant",
                "content": None,
                "reasoning": "thinking",
                "tool_calls": [
                    {"id": "a", "function": {"name": "python", "arguments": "{not json"}},
                    {"function": {"name": "python", "arguments": "[1, 2]"}},
                    "not a call",
                    {"id": "c", "function": {"name": "submit_answer", "arguments": '{"code": "x"}'}},
                ],
            },
            {"role": "tool", "content": 42, "tool_call_id": None, "name": "python"},
            {"role": "moderator", "content": "who?"},
        ],
        "openai/m",
    )
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[0]["text"] == '{"not": "text"}'
    calls = messages[1]["tool_calls"]
    assert calls is not None and [c["id"] for c in calls] == ["a", "call-1", "call-2", "c"]
    assert calls[0]["parse_error"] and calls[0]["arguments"] == {"raw_arguments": "{not json"}
    assert calls[1]["arguments"] == {"raw_arguments": "[1, 2]"}
    assert calls[3]["arguments"] == {"code": "x"} and calls[3]["parse_error"] is None
    assert messages[2]["text"] == "42"


def test_without_inspect_ai_the_command_says_how_to_get_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"run_id": "run"}))
    hide = "import sys; sys.modules['inspect_ai'] = None; sys.modules['inspect_ai.log'] = None"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"{hide}; from proctor.agent.cli import main; main()",
            "export",
            str(run),
            "--format",
            "inspect",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "proctor: error: the inspect_ai package is needed for --format inspect: "
        "pip install 'proctor[inspect]'"
    ]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda h: h["config"].update(trials="many"), "field 'config.trials'"),
        (lambda h: h.pop("config"), "field 'config'"),
        (lambda h: h["config"].update(judge={"name": 5}), "field 'config.judge.name'"),
    ],
    ids=["trials not a number", "no config", "judge name not text"],
)
def test_an_edited_header_is_one_error_line(
    research_run: StoredResearchRun, tmp_path: Path, edit: Any, expected: str
) -> None:
    path = research_run.directory / "run.json"
    header = json.loads(path.read_text())
    edit(header)
    path.write_text(json.dumps(header))
    with pytest.raises(UserError, match=f"^{path}: {expected}"):
        export_inspect(research_run.directory, tmp_path / "x.eval")
    assert not (tmp_path / "x.eval").exists()


def test_an_edited_record_is_named_by_line(research_run: StoredResearchRun, tmp_path: Path) -> None:
    samples = research_run.directory / "samples.jsonl"
    lines = samples.read_text().splitlines()
    record = json.loads(lines[1])
    record["trial"] = "one"
    lines[1] = json.dumps(record)
    samples.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match=f"^{samples}: line 2: field 'trial'"):
        export_inspect(research_run.directory, tmp_path / "x.eval")


@pytest.mark.parametrize(
    "summary",
    [
        {"by_model": {"openai/student": 5}},
        {"by_model": {"openai/student": {"accuracy": {"mean": 10**400, "se": 10**400}}}},
        {"by_model": {"openai/student": {"accuracy": {"mean": 0.5, "se": "x"}}}},
    ],
    ids=["a model's block a number", "a mean of 400 digits", "se text"],
)
def test_an_edited_summary_never_breaks_the_export(
    research_run: StoredResearchRun, tmp_path: Path, summary: dict[str, Any]
) -> None:
    # summary.json is read for the metrics: a block that is not an object used to reach .get,
    # and a 400-digit mean float(), both tracebacks; such values are left out of the metrics.
    (research_run.directory / "summary.json").write_text(json.dumps(summary))
    [path] = export_inspect(research_run.directory, tmp_path / "run.eval")
    log = read_log(path)
    assert len(log["samples"] or []) == 6


# Run in a fresh interpreter, like a user's script: export through the Python API, from plain
# code and from inside a running event loop (the case where inspect_ai applies nest_asyncio),
# then compare every name in asyncio's modules, and every attribute of their classes, with
# what they were before. Any patch of the event loop, tasks, futures or the loop policy shows.
_EXPORT_THEN_CHECK_ASYNCIO = """
import asyncio, asyncio.base_events, asyncio.events, asyncio.futures, asyncio.runners
import asyncio.selector_events, asyncio.tasks, asyncio.unix_events
import json, sys
from pathlib import Path

from proctor.agent.export.inspect_log import export_inspect

MODULES = (asyncio, asyncio.base_events, asyncio.events, asyncio.futures, asyncio.runners,
           asyncio.selector_events, asyncio.tasks, asyncio.unix_events)

def snapshot():
    seen = {}
    for module in MODULES:
        for name, value in vars(module).items():
            seen[f"{module.__name__}.{name}"] = value
            if isinstance(value, type):
                for attr, member in vars(value).items():
                    seen[f"{module.__name__}.{name}.{attr}"] = member
    return seen

async def nothing():
    return None

asyncio.run(nothing())  # creates the loop policy, so only a patch can change a name below
before = snapshot()
run_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
export_inspect(run_dir, out / "plain.eval")

async def export_from_a_loop():
    loop = asyncio.get_running_loop()
    export_inspect(run_dir, out / "in-loop.eval")
    return loop

loop = asyncio.run(export_from_a_loop())
after = snapshot()
changed = sorted(k for k in before.keys() | after.keys() if before.get(k) is not after.get(k))
print(json.dumps({
    "changed": changed,
    "inspect_loaded": sorted(m for m in sys.modules if m.split(".")[0] == "inspect_ai")[:5],
    "loop_patched": [a for a in vars(loop) if "nest" in a.lower()],
    "written": sorted(p.name for p in out.iterdir()),
}))
"""


def test_an_export_leaves_the_callers_asyncio_untouched(
    research_run: StoredResearchRun, tmp_path: Path
) -> None:
    """Inspect runs in a child process: after an export (from plain code or from inside a
    running loop), the caller's asyncio is exactly as before and inspect_ai was never loaded."""
    out = tmp_path / "logs"
    out.mkdir()
    report = run_child(_EXPORT_THEN_CHECK_ASYNCIO, str(research_run.directory), str(out))
    assert report["written"] == ["in-loop.eval", "plain.eval"]
    # One comparison, so a failure shows every way the caller was changed at once.
    assert {key: report[key] for key in ("changed", "loop_patched", "inspect_loaded")} == {
        "changed": [],
        "loop_patched": [],
        "inspect_loaded": [],
    }
    # Both logs are real Inspect logs of the run.
    for log in read_logs([out / name for name in report["written"]]):
        assert len(log["samples"]) == 6


def test_a_resumed_priced_run_exports_its_whole_span_wall_time_and_cost(
    research_run: StoredResearchRun, tmp_path: Path
) -> None:
    # Issue 38, item 6: the export had the resume's duration and total_cost None with prices set.
    import datetime as dt

    header_path = research_run.directory / "run.json"
    header = json.loads(header_path.read_text())
    (resume,) = header["sessions"]
    resumed_at = dt.datetime.fromisoformat(resume["started_at"])
    first = {
        "started_at": (resumed_at - dt.timedelta(hours=3)).isoformat(),
        "ended_at": (resumed_at - dt.timedelta(hours=3) + dt.timedelta(seconds=90)).isoformat(),
        "status": "interrupted",
    }
    header["sessions"] = [first, {**resume, "resumed": True}]
    header["config"]["models"][0].update(input_price_per_mtok=2.0, output_price_per_mtok=8.0)
    header_path.write_text(json.dumps(header))
    records = read_lines(research_run.directory / "samples.jsonl")
    # The oracle: every record's tokens at the config's prices.
    cost = sum(r["input_tokens"] * 2.0 / 1e6 + r["output_tokens"] * 8.0 / 1e6 for r in records)
    wall = 90 + (dt.datetime.fromisoformat(resume["ended_at"]) - resumed_at).total_seconds()

    (path,) = export_inspect(research_run.directory, tmp_path / "run.eval")
    log = read_log(path)
    # Inspect writes the times its own way (microseconds): compared as times.
    assert dt.datetime.fromisoformat(log["stats"]["started_at"]) == dt.datetime.fromisoformat(
        first["started_at"]
    )
    assert dt.datetime.fromisoformat(log["stats"]["completed_at"]) == dt.datetime.fromisoformat(
        resume["ended_at"]
    )
    (usage,) = log["stats"]["model_usage"].values()
    assert usage["total_cost"] == pytest.approx(cost) and cost > 0
    facts = log["eval"]["metadata"]["proctor_run"]
    assert facts["sessions"] == 2 and facts["wall_time_s"] == pytest.approx(wall, abs=0.001)
