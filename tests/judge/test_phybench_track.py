"""PHYBench track: scripted model (real openai SDK) -> last \\boxed{} -> EED against the reference."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.factory import make_client
from proctor.agent.model.retry import RetryPolicy
from proctor.agent.results.records import Outcome, SampleRecord
from proctor.agent.scoring.eed import eed_score_async
from proctor.agent.tracks.phybench import PhybenchTrack
from proctor.agent.tracks.registry import make_track
from proctor.agent.tracks.science_tasks import ScienceTask
from tests.judge.support import REPO_ROOT, ListClient, make_ctx
from tests.support.scripted_server import HttpError, Reply, ReportedUsage, ScriptedServer, Step

ROD = ScienceTask(
    id="rod", question="Find the angular speed.", answer=r"\sqrt{\frac{3 g}{L}}", subject="mechanics"
)
SAMPLES = REPO_ROOT / "configs" / "tasks" / "phybench-samples.jsonl"


async def run(
    task: ScienceTask, script: list[Step], options: dict[str, object] | None = None
) -> SampleRecord:
    with ScriptedServer(script) as server:
        model = make_client(
            ModelConfig(name="openai/physicist", base_url=server.base_url),
            retry_policy=RetryPolicy(max_retries=0),
        )
        try:
            record = await PhybenchTrack(options).run_sample(task, 2, make_ctx(model, None))
        finally:
            await model.aclose()
        (body,) = server.bodies("/chat/completions")
    prompt = body["messages"][0]["content"]
    assert prompt.startswith(task.question + "\n\n") and "\\boxed{}" in prompt
    return record


async def test_equivalent_boxed_answer_scores_100() -> None:
    reply = r"Energy: $\frac{1}{2}\frac{L}{2}g = \frac{1}{6}L^2\omega^2$, so $\boxed{\sqrt{3g/L}}$."
    record = await run(ROD, [Reply(content=reply, usage=ReportedUsage(80, 300, 200))])
    assert record.outcome is Outcome.CORRECT and record.success and record.score == 100.0
    assert (
        record.eed is not None and record.eed.score == 100.0 and record.eed.extracted_answer == r"\sqrt{3g/L}"
    )
    assert record.eed.status == "equivalent" and record.error is None
    assert (record.total_tokens, record.reasoning_tokens, record.track, record.trial) == (
        380,
        200,
        "phybench",
        2,
    )


async def test_wrong_boxed_answer_gets_partial_eed_credit() -> None:
    record = await run(ROD, [Reply(content=r"\boxed{1} then \boxed{\sqrt{\frac{3g}{2L}}}")])
    assert record.outcome is Outcome.INCORRECT and not record.success
    assert record.eed is not None and record.eed.extracted_answer == r"\sqrt{\frac{3g}{2L}}"  # the last box
    assert 0 < record.score < 100 and record.score == record.eed.score
    assert record.eed.distance is not None and record.eed.distance > 0
    assert record.eed.reference_size is not None and record.eed.relative_distance is not None


async def test_no_boxed_answer_is_no_submission() -> None:
    record = await run(ROD, [Reply(content="The answer is sqrt(3g/L).")])
    assert record.outcome is Outcome.NO_SUBMISSION and record.score == 0.0
    assert record.eed is not None and record.eed.status == "no_boxed_answer"


async def test_pathological_answer_is_scorer_timeout_within_its_limit() -> None:
    # Far beyond the 1 s budget: more than 8 s with a warm worker
    # here (a smaller pair finished in 0.6 s once its worker was warm, which made this racy).
    reference = r"\sin(x)^{50}\cos(y)^{40}+\cos(x)^{50}\sin(y)^{45}+\tan(x+y)^{30}+\tan(y)^{30}"
    answer = r"\sin(x)^{49}\cos(y)^{41}+\cos(x)^{51}\sin(y)^{44}+\tan(x+y)^{31}+\tan(y)^{31}"
    task = ScienceTask(id="slow", question="Q", answer=reference)
    started = asyncio.get_running_loop().time()
    record = await run(task, [Reply(content=f"\\boxed{{{answer}}}")], {"eed_timeout_s": 1.0})
    assert asyncio.get_running_loop().time() - started < 15
    assert record.outcome is Outcome.SCORER_TIMEOUT and not record.success
    assert record.eed is not None and record.eed.status == "timeout"
    assert record.error is not None and record.error.startswith("EED timeout")


async def test_model_failure_is_model_error() -> None:
    record = await run(ROD, [HttpError(403, "forbidden")])
    assert record.outcome is Outcome.MODEL_ERROR and record.eed is None


def test_options() -> None:
    with pytest.raises(Exception, match="eed_mode"):
        make_track("phybench", {"eed_mode": "lenient"})
    assert make_track("phybench").needs_sandbox is False


async def test_shipped_samples_load_and_every_reference_converts() -> None:
    tasks = PhybenchTrack().load_tasks(SAMPLES)
    assert len(tasks) >= 5 and len({t.id for t in tasks}) == len(tasks)
    # Each reference against itself in other braces must go through sympy and come back equivalent.
    results = await asyncio.gather(*(eed_score_async(t.answer, "{" + t.answer + "}") for t in tasks))
    assert [(t.id, r.status, r.score) for t, r in zip(tasks, results, strict=True)] == [
        (t.id, "equivalent", 100.0) for t in tasks
    ]


async def test_phybench_published_row_layout(tmp_path: Path) -> None:
    path = tmp_path / "phybench.json"
    path.write_text('[{"id": 7, "tag": "MECHANICS", "content": "Q", "solution": "S", "answer": "$v$"}]')
    (task,) = PhybenchTrack().load_tasks(path)
    assert (task.id, task.question, task.answer, task.subject) == ("7", "Q", "$v$", "MECHANICS")
    record = await PhybenchTrack().run_sample(task, 0, make_ctx(ListClient(["no box here"]), None))
    assert record.outcome is Outcome.NO_SUBMISSION
