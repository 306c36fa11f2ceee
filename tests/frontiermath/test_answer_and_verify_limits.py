"""What answer()'s 30 s timer covers, and how a verification past its own limit ends.

The seed (§6) gives answer() 30 s. Proctor's timer starts before the first line of the
submission runs, so module-level code is inside it: a submission cannot do its work at import
and return a constant from answer(). The verification call has its own limit
(``sandbox.verify_timeout_s``, 60 s; the public implementation's scorer allows 120 s for its
verification step); a ``verify()`` that runs past it after the value was handed over is
``incorrect``, never an error that would leave the sample out of accuracy.

End to end through the loop: the real openai SDK against a scripted server, the local sandbox.
"""

from __future__ import annotations

import json

import pytest

from proctor.agent.inputs.config import SandboxConfig
from proctor.agent.results.records import Outcome, SampleRecord
from proctor.agent.tracks.frontiermath.tasks import FrontierMathTask
from proctor.agent.tracks.frontiermath.track import FrontierMathTrack
from proctor.sandbox import Sandbox
from tests.frontiermath.support import context, integer_task, run_config, scripted_client
from tests.support.scripted_server import Reply, ScriptedServer, ToolCallSpec

module_loop = pytest.mark.asyncio(loop_scope="module")
# Each test waits out a time limit in a real sandbox: seconds each.
pytestmark = pytest.mark.slow
# The public implementation's VERIFICATION_CODE_TIMEOUT (examples/frontiermath/scorer.py).
PUBLIC_VERIFY_TIMEOUT_S = 120


async def submit(code: str, sandbox: Sandbox, task: FrontierMathTask, **limits: float) -> SampleRecord:
    script = [Reply(tool_calls=[ToolCallSpec("submit_answer", json.dumps({"code": code}))])]
    with ScriptedServer(script) as server:
        client = scripted_client(server.base_url)
        try:
            return await FrontierMathTrack({}).run_sample(
                task, 0, context(client, sandbox, run_config(**limits))
            )
        finally:
            await client.aclose()


@module_loop
@pytest.mark.parametrize(
    "module_level",
    ["while True:\n    pass\n", "import time\ntime.sleep(60)\n", "x = 0\nwhile x >= 0:\n    x += 1\n"],
    ids=["busy-loop", "sleep", "counting"],
)
async def test_the_answer_timer_covers_module_level_code(module_level: str, sandbox: Sandbox) -> None:
    code = module_level + "def answer():\n    return 42\n"
    record = await submit(code, sandbox, integer_task(), answer_timeout_s=2)
    assert record.outcome is Outcome.ANSWER_TIMEOUT
    assert record.submission is not None and record.submission.verify_exec is None


@module_loop
async def test_honest_module_level_code_within_the_limit_is_graded(sandbox: Sandbox) -> None:
    code = "TABLE = [i * 7 for i in range(10)]\ndef answer():\n    return TABLE[6]\n"
    record = await submit(code, sandbox, integer_task(), answer_timeout_s=5)
    assert record.outcome is Outcome.CORRECT


@module_loop
async def test_a_verify_past_its_limit_is_incorrect_not_an_error(sandbox: Sandbox) -> None:
    task = FrontierMathTask(
        id="slow-verify",
        question="Give 42.",
        answer_type="Python int",
        verification_code="def verify(a):\n    while True:\n        pass\n",
    )
    record = await submit("def answer():\n    return 42\n", sandbox, task, verify_timeout_s=3)
    assert record.outcome is Outcome.INCORRECT


def test_the_verify_limit_is_proctors_own_and_documented() -> None:
    # Proctor's verification call is limited on its own (the answer call has its 30 s apart);
    # the public scorer's single limit covers more. The difference is stated in the fidelity table.
    assert SandboxConfig().verify_timeout_s == 60 < PUBLIC_VERIFY_TIMEOUT_S
