"""What the Olympiad and PHYBench models are asked, word for word.

Neither seed publishes the answering prompt (the FrontierScience paper gives the judge prompts
only, the PHYBench article none), so docs/judge-tracks.md ("What the model is asked") fixes a
minimal one per track: the problem, then one instruction. These tests pin the message the
model really receives to that page, so a change to a prompt file shows as a change of protocol.
"""

from __future__ import annotations

from pathlib import Path

from proctor.agent.tracks.olympiad import OlympiadTrack
from proctor.agent.tracks.phybench import PhybenchTrack
from proctor.agent.tracks.science_tasks import ScienceTask
from tests.judge.support import REPO_ROOT, ListClient, make_ctx

DOCS = (REPO_ROOT / "docs" / "judge-tracks.md").read_text(encoding="utf-8")
PROBLEM = "A pendulum of length {L} swings; what is the period ratio?"
TASK = ScienceTask(id="p", question=PROBLEM, answer="6.7", subject="physics")


async def test_the_olympiad_model_gets_the_problem_then_the_final_answer_line() -> None:
    model = ListClient(["FINAL ANSWER: 6.7"])
    await OlympiadTrack().run_sample(TASK, 0, make_ctx(model, ListClient(["VERDICT: CORRECT"])))
    instruction = (
        "Give your final answer on the last line of your response, in the form:\nFINAL ANSWER: <your answer>"
    )
    assert model.requests[0] == [{"role": "user", "content": f"{PROBLEM}\n\n{instruction}"}]
    assert "FINAL ANSWER: <your answer>" in DOCS


async def test_the_phybench_model_gets_the_problem_then_the_boxed_instruction() -> None:
    model = ListClient([r"so $\boxed{6.7}$"])
    await PhybenchTrack().run_sample(TASK, 0, make_ctx(model, None))
    instruction = (
        "Reason step by step, then give the final answer as a single LaTeX expression "
        "inside \\boxed{} at the end of your response."
    )
    assert model.requests[0] == [{"role": "user", "content": f"{PROBLEM}\n\n{instruction}"}]
    assert (
        "reason step by step, then\n  give the final answer as a single LaTeX expression inside `\\boxed{}`"
        in DOCS
    )


def test_the_shipped_files_are_the_ones_the_tracks_read() -> None:
    prompts = Path(REPO_ROOT / "configs" / "prompts")
    assert (prompts / "science_answer.txt").read_text().startswith("{problem}\n\n")
    assert (prompts / "phybench_answer.txt").read_text().startswith("{problem}\n\n")
