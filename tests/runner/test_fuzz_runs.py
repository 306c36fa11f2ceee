"""Property-based fuzz: full runs of every track against a hostile scripted server.

Each example is a real run (runner, store, track, openai SDK, model client) against
ScriptedServer on 127.0.0.1, whose replies hypothesis draws: random Unicode with lone
surrogates, NUL and control characters, every tool-call shape (arguments as objects, null
names, missing or duplicate ids, no ``function``), content lists, refusals, no choices,
nonsense usage, HTTP 500s, bodies that are not JSON, and strings of 64 KB (10 MB in a fixed
example per track). Whatever arrives: every planned sample is in samples.jsonl, the run is
not ``failed``, nothing looks like a traceback on stderr, resume and the report read the
file, and the page renders without letting a reply's HTML out.

FrontierMath and the Olympiad python tool run against the in-process sandbox double (it
answers every exec without running code): the sandbox is not what is under test here.
Bounded and derandomized so CI runs the same examples every time (20 per track; set
PROCTOR_FUZZ_EXAMPLES to run more while hunting).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from proctor.agent.bench.loop import open_double
from proctor.agent.inputs.config import BudgetConfig, ModelConfig, RunConfig
from proctor.agent.report.loader import load_run
from proctor.agent.report.page import render_report
from proctor.agent.results.records import Outcome
from proctor.agent.results.store import load_samples
from proctor.agent.run.runner import RunResult, execute_run
from tests.runner.conftest import quiet_progress
from tests.support.hostile_replies import FRAGMENTS, CallSpec, ReplyPlan, ReplySpec, replies
from tests.support.scripted_server import ScriptedServer

FUZZ = settings(
    # No shrinking: each example is a whole run, and shrinking one takes minutes; the
    # failing example is reported as drawn.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    max_examples=int(os.environ.get("PROCTOR_FUZZ_EXAMPLES", "20")),
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TEN_MB = "\ud800\x00 big " * (10 * 1024 * 1024 // 10)
HUGE = [ReplySpec(content=TEN_MB, refusal=TEN_MB[:1000]), ReplySpec(content=TEN_MB, finish_reason="length")]
plans = st.lists(replies, min_size=1, max_size=4)
apis = st.sampled_from(["chat", "responses"])


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ReplyPlan, ReplyPlan, ScriptedServer, ScriptedServer]]:
    model_plan, judge_plan = ReplyPlan(), ReplyPlan()
    with ScriptedServer(model_plan, keep_last=1) as model, ScriptedServer(judge_plan, keep_last=1) as judge:
        yield model_plan, judge_plan, model, judge


def write_tasks(directory: Path, track: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]]
    if track == "frontiermath":
        rows = [
            {
                "id": f"fm{i}",
                "question": "What is 6 times 7?",
                "answer_type": "Python int",
                "answer": "42",
                "reference_solution": "def answer():\n    return 42\n",
            }
            for i in range(2)
        ]
    elif track == "research":
        rows = [
            {"id": f"r{i}", "question": "Explain.", "rubric": "10 points for anything."} for i in range(2)
        ]
    elif track == "phybench":
        rows = [{"id": f"p{i}", "question": "Find v.", "answer": "\\sqrt{2 g L}"} for i in range(2)]
    else:
        rows = [{"id": f"o{i}", "question": "Find g.", "answer": "9.8"} for i in range(2)]
    path = directory / "tasks.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


TRACK_OPTIONS: dict[str, dict[str, Any]] = {
    "frontiermath": {"max_turns": 3},
    "olympiad": {"python_tool": True, "max_tool_turns": 3, "judge_retries": 1, "precheck_timeout_s": 2.0},
    "research": {"judge_retries": 1},
    "phybench": {"eed_timeout_s": 3.0},
}


def fuzz_run(
    servers: tuple[ReplyPlan, ReplyPlan, ScriptedServer, ScriptedServer],
    directory: Path,
    track: str,
    model_replies: list[ReplySpec],
    judge_replies: list[ReplySpec],
    api: str,
) -> None:
    model_plan, judge_plan, model_server, judge_server = servers
    model_plan.reset(model_replies)
    judge_plan.reset(judge_replies)
    # A fresh directory per example (hypothesis reuses the function's tmp_path).
    out = directory / f"run-{len(list(directory.glob('run-*')))}"
    tasks = write_tasks(directory / "tasks", track)
    config = RunConfig(
        track=track,
        tasks=tasks,
        out=out,
        models=[ModelConfig(name="openai/fuzz", base_url=model_server.base_url, api=api, max_retries=0)],  # type: ignore[arg-type]
        judge=ModelConfig(name="openai/judge", base_url=judge_server.base_url, max_retries=0),
        trials=1,
        max_concurrency=2,
        budget=BudgetConfig(token_cap=400_000, force_submit_at=300_000),
        track_options=TRACK_OPTIONS[track],
    )
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        result: RunResult = asyncio.run(
            execute_run(config, progress=quiet_progress(), handle_signals=False, sandbox_opener=open_double)
        )
        page = render_report(load_run(out))
    assert "Traceback" not in stderr.getvalue(), stderr.getvalue()[-3000:]
    assert result.status == "finished"
    assert json.loads((out / "run.json").read_text())["status"] == "finished"
    records = load_samples(out / "samples.jsonl").records  # what --resume reads
    assert sorted(r.task_id for r in records) == sorted(
        json.loads(line)["id"] for line in tasks.read_text().splitlines()
    )
    assert result.finished == result.planned == len(records)
    # A reply's markup never leaves its <script type="application/json"> element.
    assert "<script>alert(1)" not in page
    page.encode("utf-8")
    # Every hostile shape is answered by the harness, never crashed on.
    harness = [r.error for r in records if r.outcome is Outcome.HARNESS_ERROR]
    assert not harness, harness


TRACKS = ["frontiermath", "olympiad", "research", "phybench"]


@pytest.mark.parametrize("track", TRACKS)
@FUZZ
@given(model_replies=plans, judge_replies=plans, api=apis)
def test_any_reply_leaves_every_sample_recorded(
    servers: Any,
    tmp_path_factory: pytest.TempPathFactory,
    track: str,
    model_replies: list[ReplySpec],
    judge_replies: list[ReplySpec],
    api: str,
) -> None:
    fuzz_run(servers, tmp_path_factory.mktemp(track), track, model_replies, judge_replies, api)


@pytest.mark.slow  # 8-25 s of a quick tier that must stay under 5 minutes; the full suite runs it
@pytest.mark.parametrize("track", TRACKS)
def test_ten_megabyte_replies_with_surrogates_are_recorded(servers: Any, tmp_path: Path, track: str) -> None:
    # Outside hypothesis: a falsifying example of 10 MB would be printed whole.
    fuzz_run(servers, tmp_path, track, HUGE, [ReplySpec(content=TEN_MB + "\nVERDICT: CORRECT")], "chat")
    records = load_samples(next(tmp_path.glob("run-*")) / "samples.jsonl").records
    flagged = [r for r in records if r.unencodable_text is not None]
    assert flagged and all(r.unencodable_text.count > 0 for r in flagged)  # type: ignore[union-attr]


def test_fragments_cover_the_issue_examples() -> None:
    # The issue's own examples stay in the fuzz alphabet.
    assert "\ud800" in FRAGMENTS and "\x00" in FRAGMENTS


# Token counts no model could spend, but JSON (and the SDK) carry them as Python ints: one past
# float's range overflowed the budget's calibration and the summary's means.
ABSURD_USAGE = {
    "prompt_tokens": 10**400,
    "completion_tokens": 10**309,
    "input_tokens": 10**400,
    "output_tokens": 10**309,
}


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("track", TRACKS)
def test_absurd_token_counts_leave_every_sample_recorded_and_the_budget_sane(
    servers: Any, tmp_path: Path, track: str, api: str
) -> None:
    submit = CallSpec(
        id="s", name="submit_answer", arguments=json.dumps({"code": "def answer():\n    return 42"})
    )
    model = [ReplySpec(content="\\boxed{x} FINAL ANSWER: 5", calls=[submit], usage=ABSURD_USAGE)]
    fuzz_run(
        servers, tmp_path, track, model, [ReplySpec(content="VERDICT: CORRECT", usage=ABSURD_USAGE)], api
    )
    records = load_samples(next(tmp_path.glob("run-*")) / "samples.jsonl").records
    # The absurd counts were replaced by estimates (flagged), as any count that is not sane is.
    assert records and all(r.tokens_estimated and r.total_tokens < 2**53 for r in records)
    judged = [r.judge for r in records if r.judge is not None and r.judge.decided_by == "judge"]
    assert all(j.input_tokens < 2**53 for j in judged)
