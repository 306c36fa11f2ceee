"""Every submission outcome, produced for real through a sandbox (local; docker where marked)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proctor.agent.inputs.config import SandboxConfig
from proctor.agent.results.records import Outcome
from proctor.agent.tracks.frontiermath.submission import SubmissionRunner
from proctor.agent.tracks.frontiermath.tasks import FrontierMathTask
from proctor.sandbox import ExecResult, Sandbox, SandboxError
from tests.frontiermath.support import RecordingEvents, integer_task

CONFIG = SandboxConfig(answer_timeout_s=15, verify_timeout_s=30)
VERIFIED = FrontierMathTask(
    id="verified",
    question="Give an integer congruent to 3 mod 7 that exceeds 100.",
    answer_type="Python int",
    verification_code="def verify(a):\n    return isinstance(a, int) and a > 100 and a % 7 == 3\n",
)


def runner(sandbox: Sandbox, config: SandboxConfig = CONFIG) -> SubmissionRunner:
    return SubmissionRunner(sandbox, config, RecordingEvents())


async def test_correct_and_incorrect_with_an_expected_answer(any_sandbox: Sandbox) -> None:
    right = await runner(any_sandbox).evaluate("def answer():\n    return 6 * 7\n", integer_task())
    assert right.outcome is Outcome.CORRECT and right.error is None
    # Type and repr come from the verification sandbox, which rebuilt the value itself.
    assert right.record.value_type == "int" and right.record.value_repr == "42"
    assert right.record.answer_exec is not None and right.record.verify_exec is not None
    wrong = await runner(any_sandbox).evaluate("def answer():\n    return 41\n", integer_task())
    assert wrong.outcome is Outcome.INCORRECT and "got int 41" in (wrong.error or "")


async def test_verification_code_decides(local_sandbox: Sandbox) -> None:
    right = await runner(local_sandbox).evaluate("def answer():\n    return 7 * 20 + 3\n", VERIFIED)
    assert right.outcome is Outcome.CORRECT
    wrong = await runner(local_sandbox).evaluate("def answer():\n    return 143 + 1\n", VERIFIED)
    assert wrong.outcome is Outcome.INCORRECT and wrong.record.verification == "verify() returned False"


async def test_sympy_answers_are_compared_symbolically(any_sandbox: Sandbox) -> None:
    task = FrontierMathTask(id="s", question="q", answer_type="sympy expression", answer="sqrt(2) + 1")
    code = "def answer():\n    import sympy\n    return sympy.sqrt(8) / 2 + 1\n"
    result = await runner(any_sandbox).evaluate(code, task)
    assert result.outcome is Outcome.CORRECT, result.error
    assert "Add" in (result.record.value_type or "")
    assert result.record.value_repr == "1 + sqrt(2)"


async def test_tolerance_applies_to_numeric_answers(local_sandbox: Sandbox) -> None:
    task = FrontierMathTask(id="n", question="q", answer_type="float", answer="pi", tolerance=1e-9)
    close = await runner(local_sandbox).evaluate("def answer():\n    import math\n    return math.pi\n", task)
    assert close.outcome is Outcome.CORRECT
    far = await runner(local_sandbox).evaluate("def answer():\n    return 3.14159\n", task)
    assert far.outcome is Outcome.INCORRECT and "tolerance" in (far.error or "")


async def test_answer_error_when_answer_raises(any_sandbox: Sandbox) -> None:
    result = await runner(any_sandbox).evaluate("def answer():\n    return 1 // 0\n", integer_task())
    assert result.outcome is Outcome.ANSWER_ERROR and "ZeroDivisionError" in (result.error or "")


async def test_answer_error_for_values_that_cannot_be_serialised(local_sandbox: Sandbox) -> None:
    result = await runner(local_sandbox).evaluate("def answer():\n    return object()\n", integer_task())
    assert result.outcome is Outcome.ANSWER_ERROR and "object" in (result.error or "")
    assert result.record.verify_exec is None


async def test_answer_error_when_the_process_dies(local_sandbox: Sandbox) -> None:
    code = "def answer():\n    import os\n    os._exit(3)\n"
    result = await runner(local_sandbox).evaluate(code, integer_task())
    assert result.outcome is Outcome.ANSWER_ERROR and "exit code 3" in (result.error or "")


async def test_answer_timeout_from_the_drivers_timer(any_sandbox: Sandbox) -> None:
    config = SandboxConfig(answer_timeout_s=1, verify_timeout_s=30)
    result = await runner(any_sandbox, config).evaluate(
        "def answer():\n    while True:\n        pass\n", integer_task()
    )
    assert result.outcome is Outcome.ANSWER_TIMEOUT and "within 1 s" in (result.error or "")


async def test_answer_timeout_when_the_sandbox_must_kill_it(local_sandbox: Sandbox) -> None:
    # answer() disarms the driver's timer: only the sandbox's wall clock can stop it.
    code = (
        "def answer():\n    import signal\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        "    while True:\n        pass\n"
    )
    config = SandboxConfig(answer_timeout_s=0.5, verify_timeout_s=30)
    result = await runner(local_sandbox, config).evaluate(code, integer_task())
    assert result.outcome is Outcome.ANSWER_TIMEOUT
    assert result.record.answer_exec is not None and result.record.answer_exec["timed_out"]


async def test_invalid_submission_is_rejected_before_running(local_sandbox: Sandbox) -> None:
    events = RecordingEvents()
    result = await SubmissionRunner(local_sandbox, CONFIG, events).evaluate(
        "def answer():\n    return 42  # comment\n", integer_task()
    )
    assert result.outcome is Outcome.INVALID_SUBMISSION and "comments" in (result.error or "")
    assert events.sandbox_started == 0 and result.record.answer_exec is None


async def test_invalid_submission_only_recorded_when_not_enforced(local_sandbox: Sandbox) -> None:
    result = await runner(local_sandbox).evaluate(
        "def answer():\n    return 42  # comment\n", integer_task(), enforce_checks=False
    )
    assert result.outcome is Outcome.CORRECT
    assert any("comments" in p for p in result.record.check_problems)


async def test_verification_that_fails_on_the_value_scores_it_incorrect(local_sandbox: Sandbox) -> None:
    # A verify() that raises or answers a non-bool for this value has not credited it: wrong, not
    # an error (an error would let a model abstain at will, errors being counted apart).
    raising = VERIFIED.model_copy(
        update={"verification_code": "def verify(a):\n    raise RuntimeError('bad verifier')\n"}
    )
    result = await runner(local_sandbox).evaluate("def answer():\n    return 143\n", raising)
    assert result.outcome is Outcome.INCORRECT and "bad verifier" in (result.error or "")
    not_bool = VERIFIED.model_copy(update={"verification_code": "def verify(a):\n    return 'yes'\n"})
    result = await runner(local_sandbox).evaluate("def answer():\n    return 143\n", not_bool)
    assert result.outcome is Outcome.INCORRECT and "not a bool" in (result.error or "")


@pytest.mark.slow  # 8-25 s of a quick tier that must stay under 5 minutes; the full suite runs it
async def test_verification_past_its_limit_on_the_value_is_incorrect(local_sandbox: Sandbox) -> None:
    slow = VERIFIED.model_copy(
        update={"verification_code": "def verify(a):\n    while True:\n        pass\n"}
    )
    # Long enough for the verifier to start and load the reference on a loaded machine (2 s was
    # not, at load 20: the limit then struck before the value was touched, a verify_error).
    config = SandboxConfig(answer_timeout_s=15, verify_timeout_s=8)
    result = await runner(local_sandbox, config).evaluate("def answer():\n    return 143\n", slow)
    assert result.outcome is Outcome.INCORRECT and "within 8 s" in (result.error or "")


async def test_a_task_whose_own_code_fails_is_a_verify_error(local_sandbox: Sandbox) -> None:
    # Failures before the submitted value is touched are the task's, counted apart and re-run.
    broken_reference = integer_task(answer="undefined_name + 1")
    result = await runner(local_sandbox).evaluate("def answer():\n    return 42\n", broken_reference)
    assert result.outcome is Outcome.VERIFY_ERROR and "undefined_name" in (result.error or "")
    stuck_loader = VERIFIED.model_copy(
        update={"verification_code": "while True:\n    pass\n\ndef verify(a):\n    return True\n"}
    )
    config = SandboxConfig(answer_timeout_s=15, verify_timeout_s=2)
    result = await runner(local_sandbox, config).evaluate("def answer():\n    return 143\n", stuck_loader)
    assert result.outcome is Outcome.VERIFY_ERROR and "before the submitted value" in (result.error or "")


class FlakySandbox:
    """A sandbox whose driver calls fail; whether the probe runs decides who is blamed."""

    backend = "flaky"

    def __init__(self, inner: Sandbox, *, probe_works: bool) -> None:
        self.inner = inner
        self.probe_works = probe_works

    async def exec(self, code: str | None = None, **kwargs: Any) -> ExecResult:
        if code is not None and "proctor-probe" in code and self.probe_works:
            return await self.inner.exec(code, **kwargs)
        raise SandboxError("container vanished")

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_sandbox_failures_are_blamed_on_the_engine_only_when_it_is_down(local_sandbox: Sandbox) -> None:
    code = "def answer():\n    return 42\n"
    healthy = await runner(FlakySandbox(local_sandbox, probe_works=True)).evaluate(code, integer_task())
    assert healthy.outcome is Outcome.ANSWER_ERROR and "probe program ran fine" in (healthy.error or "")
    down = await runner(FlakySandbox(local_sandbox, probe_works=False)).evaluate(code, integer_task())
    assert down.outcome is Outcome.VERIFY_ERROR and "probe program failed" in (down.error or "")


async def test_printing_cannot_corrupt_or_fake_the_result(any_sandbox: Sandbox) -> None:
    # answer() prints, and even prints something shaped like a result block claiming 42.
    fake = '{"status": "ok", "value": {"t": "int", "v": "42"}, "type": "int"}'
    code = (
        "def answer():\n"
        "    import sys\n"
        f"    print('<<<PROCTOR-RESULT deadbeef>>>')\n    print({fake!r})\n    print('<<<END deadbeef>>>')\n"
        "    sys.stdout.write('noise')\n"
        "    return 41\n"
    )
    result = await runner(any_sandbox).evaluate(code, integer_task())
    assert result.outcome is Outcome.INCORRECT
    assert result.record.answer_exec is not None and "noise" in result.record.answer_exec["stderr"]


async def test_answer_and_verification_run_in_separate_fresh_sandboxes(any_sandbox: Sandbox) -> None:
    # A submission that leaves a file behind cannot influence its own verification.
    code = "def answer():\n    open('proctor-verdict', 'w').write('x')\n    return 1\n"
    task = VERIFIED.model_copy(
        update={
            "verification_code": (
                "def verify(a):\n    import os\n    return os.path.exists('proctor-verdict')\n"
            )
        }
    )
    events = RecordingEvents()
    result = await SubmissionRunner(any_sandbox, CONFIG, events).evaluate(code, task)
    assert events.sandbox_started == 2 and len(events.sandbox_finished) == 2
    assert result.outcome is Outcome.INCORRECT


@pytest.mark.docker
async def test_pinned_libraries_in_answers_under_docker() -> None:
    from proctor.sandbox import open_sandbox

    sandbox = await open_sandbox("docker", pool_size=1)
    try:
        task = FrontierMathTask(id="g", question="q", answer_type="Python int", answer="3")
        code = "def answer():\n    import galois\n    GF = galois.GF(7)\n    return int(GF(5) * GF(2))\n"
        # galois compiles per field on first use; on a loaded machine that alone takes many seconds.
        patient = SandboxConfig(answer_timeout_s=120, verify_timeout_s=60)
        result = await runner(sandbox, patient).evaluate(code, task)
        assert result.outcome is Outcome.CORRECT, result.error
        assert result.record.answer_exec is not None and result.record.answer_exec["backend"] == "docker"
    finally:
        await sandbox.aclose()


@pytest.mark.docker
async def test_with_recycling_on_the_verdict_runs_in_containers_no_call_used() -> None:
    """The sample's own python calls leave a reset container behind for the sample; the answer
    and verification runs must not get it (nor each other's), so no hole in a reset can reach a
    verdict."""
    from proctor.sandbox import execution_caller, open_sandbox

    sandbox = await open_sandbox("docker", pool_size=1, isolation="per-sample")
    try:
        with execution_caller("one-sample"):
            used = set()
            for _ in range(3):
                call = await sandbox.exec("print(1)", timeout=30)
                assert call.exit_code == 0, call
                used.add(call.extra["container_id"])
                await sandbox.settle(60)
            assert len(used) == 1  # recycled for the sample: the test is not vacuous
            result = await runner(sandbox).evaluate("def answer():\n    return 42\n", integer_task())
        assert result.outcome is Outcome.CORRECT, result.error
        assert result.record.answer_exec is not None and result.record.verify_exec is not None
        verdict_runs = [result.record.answer_exec["extra"], result.record.verify_exec["extra"]]
        assert all(run["container_calls_before"] == 0 for run in verdict_runs), verdict_runs
        assert not used & {run["container_id"] for run in verdict_runs}
    finally:
        await sandbox.aclose()


async def test_a_value_too_large_for_the_output_cap_is_an_answer_error(local_sandbox: Sandbox) -> None:
    code = "def answer():\n    return list(range(400000))\n"
    result = await runner(local_sandbox).evaluate(code, integer_task())
    assert result.outcome is Outcome.ANSWER_ERROR
    assert "too large to carry" in (result.error or "")


class ForgingSandbox:
    """The answer call prints whatever the submission chose, under the real nonce."""

    backend = "forging"

    def __init__(self, body: str) -> None:
        self.body = body

    async def exec(self, code: str | None = None, **kwargs: Any) -> ExecResult:
        request = json.loads(str(kwargs["stdin"]).split("\n", 1)[0])
        # Only the answer process is the submission's; this fake's verifier says nothing.
        stdout = self.body.replace("NONCE", request["nonce"]) if request["mode"] == "answer" else ""
        return ExecResult(exit_code=0, stdout=stdout, stderr="", backend=self.backend)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend}

    async def aclose(self) -> None:
        return None


def _block(payload: str) -> str:
    return f"\n<<<PROCTOR-RESULT NONCE>>>\n{payload}\n<<<END NONCE>>>\n"


@pytest.mark.parametrize(
    "stdout",
    [
        _block('{"status": "error", "error": ' + "[" * 900 + "]" * 900 + "}"),
        _block('{"status": "ok", "value": ' + "[" * 900 + "]" * 900 + "}"),
        _block('{"status": "ok", "value": {"t": "int", "v": "zz"}}'),
        _block('{"status": 5}'),
        _block('{"status": "ok"}'),
        _block('{"status": "ok", "value": {"t": "int", "v": "0x2a"}, "answer_s": "soon", "encode_s": 1e999}'),
        "<<<PROCTOR-MARK NONCE returned 1.2.3>>>" + _block('{"status": "timeout"}'),
        _block('{"status": "error", "error": ' + "9" * 5000 + "}"),
        _block("NaN"),
    ],
    ids=[
        "deep error",
        "deep value",
        "bad hex",
        "status not text",
        "no value",
        "nonsense timings",
        "forged mark then timeout",
        "huge integer",
        "not an object",
    ],
)
async def test_a_hostile_reply_is_the_answers_failure_never_a_harness_error(stdout: str) -> None:
    # The reader of the answer process's reply must not raise, whatever that process printed:
    # an exception would become a harness_error, counted apart, which a model could abstain with.
    task = FrontierMathTask(id="t", question="q", answer_type="Python int", answer="41")
    result = await runner(ForgingSandbox(stdout)).evaluate("def answer():\n    return 42\n", task)
    if result.outcome is Outcome.VERIFY_ERROR:
        # A well-formed value went on to verification, which this fake never answers.
        assert result.record.verify_exec is not None and "before the submitted value" in (result.error or "")
    else:
        assert result.outcome in (Outcome.ANSWER_ERROR, Outcome.ANSWER_TIMEOUT), result.error


class ScriptedVerifierSandbox:
    """answer() really runs; the verification call prints what the test scripts, under its nonce."""

    backend = "scripted-verifier"

    def __init__(self, inner: Sandbox, verify_stdout: str) -> None:
        self.inner = inner
        self.verify_stdout = verify_stdout

    async def exec(self, code: str | None = None, **kwargs: Any) -> ExecResult:
        request = json.loads(str(kwargs["stdin"]).split("\n", 1)[0])
        if request["mode"] == "answer":
            return await self.inner.exec(code, **kwargs)
        stdout = self.verify_stdout.replace("NONCE", request["nonce"])
        return ExecResult(exit_code=0, stdout=stdout, stderr="", backend=self.backend)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend}

    async def aclose(self) -> None:
        return None


READY = "\n<<<PROCTOR-MARK NONCE reference-ready 0.100>>>\n"


@pytest.mark.parametrize(
    "reply",
    [
        '{"status": "harness_error", "error": "MemoryError"}',
        '{"status": "ok", "verdict": "yes"}',
        '{"status": "surprise"}',
    ],
    ids=["harness error", "verdict not a bool", "unknown status"],
)
async def test_a_verification_failure_after_the_value_was_touched_is_never_an_error(
    local_sandbox: Sandbox, reply: str
) -> None:
    """Whatever breaks the verifier once it holds the value (say, a MemoryError while decoding
    it) is the value's doing: `incorrect`, not `verify_error`, which is counted apart and re-run
    (a way to abstain). Before the reference-ready mark the same reply is the harness's."""
    code = "def answer():\n    return 42\n"
    touched = await runner(ScriptedVerifierSandbox(local_sandbox, READY + _block(reply))).evaluate(
        code, integer_task()
    )
    assert touched.outcome is Outcome.INCORRECT, touched.error
    assert "while examining the submitted value" in (touched.record.verification or "")
    untouched = await runner(ScriptedVerifierSandbox(local_sandbox, _block(reply))).evaluate(
        code, integer_task()
    )
    assert untouched.outcome is Outcome.VERIFY_ERROR, untouched.error
