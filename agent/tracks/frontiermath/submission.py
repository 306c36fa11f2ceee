"""The submission pipeline: check the code, run answer(), serialise its value, verify it.

Every step that touches submitted or task code runs in a fresh sandbox call through the
driver in ``sandbox_driver.py``: the host never evaluates a submitted value, not even its
sympy ``srepr``. Answer and verification run in *separate* sandboxes, so nothing the
submission does can influence its own verdict except the value it returns.
"""

from __future__ import annotations

import functools
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.config import SandboxConfig
from agent.records import Outcome, SubmissionRecord
from agent.tracks.base import RunEvents
from agent.tracks.frontiermath.checks import check_submission_code
from agent.tracks.frontiermath.sandbox_calls import run_in_sandbox
from agent.tracks.frontiermath.tasks import FrontierMathTask
from sandbox import ExecResult, Sandbox, SandboxError

# The driver enforces answer()'s limit itself; the sandbox's wall clock is only the backstop
# and must also cover interpreter start-up and the submission's imports.
STARTUP_GRACE_S = 5.0
STDERR_TAIL_CHARS = 2000
VALUE_REPR_CHARS = 100_000


@functools.cache
def driver_source() -> str:
    return Path(__file__).with_name("sandbox_driver.py").read_text(encoding="utf-8")


@dataclass
class SubmissionResult:
    outcome: Outcome
    error: str | None
    record: SubmissionRecord

    @property
    def correct(self) -> bool:
        return self.outcome is Outcome.CORRECT


class DriverReplyMissing(Exception):
    """The sandboxed program ended without writing its result block."""


def parse_driver_reply(stdout: str, nonce: str) -> dict[str, Any]:
    start_mark = f"<<<PROCTOR-RESULT {nonce}>>>\n"
    end_mark = f"\n<<<END {nonce}>>>"
    start = stdout.rfind(start_mark)
    end = stdout.find(end_mark, start + len(start_mark)) if start >= 0 else -1
    if start < 0 or end < 0:
        raise DriverReplyMissing("no result block in the sandbox output")
    try:
        reply = json.loads(stdout[start + len(start_mark) : end])
    except json.JSONDecodeError as exc:
        raise DriverReplyMissing(f"result block is not JSON: {exc}") from None
    if not isinstance(reply, dict):
        raise DriverReplyMissing("result block is not a JSON object")
    return reply


def _tail(text: str) -> str:
    return text if len(text) <= STDERR_TAIL_CHARS else "...\n" + text[-STDERR_TAIL_CHARS:]


def _died_without_reply(result: ExecResult, what: str) -> str:
    if result.oom_killed:
        return f"{what} ran out of memory and was killed"
    detail = f"{what} ended the process without a result (exit code {result.exit_code})"
    if result.stdout_truncated:
        detail += "; the output passed the sandbox's size cap (is the value too large?)"
    return f"{detail}\n{_tail(result.stderr)}" if result.stderr.strip() else detail


class SubmissionRunner:
    def __init__(self, sandbox: Sandbox, config: SandboxConfig, events: RunEvents) -> None:
        self.sandbox = sandbox
        self.config = config
        self.events = events

    async def _call_driver(self, request: dict[str, Any], timeout: float) -> tuple[ExecResult, str]:
        nonce = secrets.token_hex(16)
        payload = json.dumps({**request, "nonce": nonce})
        result = await run_in_sandbox(
            self.sandbox, self.events, driver_source(), timeout=timeout, stdin=payload
        )
        return result, nonce

    async def evaluate(
        self,
        code: str,
        task: FrontierMathTask,
        *,
        turn: int | None = None,
        enforce_checks: bool = True,
    ) -> SubmissionResult:
        record = SubmissionRecord(code=code, turn=turn, check_problems=check_submission_code(code))
        if record.check_problems and enforce_checks:
            return SubmissionResult(Outcome.INVALID_SUBMISSION, "; ".join(record.check_problems), record)
        try:
            answered = await self._run_answer(code, record)
            if isinstance(answered, SubmissionResult):
                return answered
            return await self._verify(task, record, answered)
        except SandboxError as exc:
            # The sandbox failed, not the model: an infrastructure error, counted apart.
            return SubmissionResult(Outcome.VERIFY_ERROR, f"sandbox failed: {exc}", record)

    async def _run_answer(self, code: str, record: SubmissionRecord) -> SubmissionResult | dict[str, Any]:
        """The failure, or the value in its tagged (type + serialised form) shape."""
        limit = self.config.answer_timeout_s
        request = {"mode": "answer", "code": code, "time_limit_s": limit}
        result, nonce = await self._call_driver(request, limit + STARTUP_GRACE_S)
        record.answer_exec = result.to_dict()
        timeout_text = f"answer() did not return within {limit:g} s"
        if result.timed_out:
            return SubmissionResult(Outcome.ANSWER_TIMEOUT, timeout_text, record)
        try:
            reply = parse_driver_reply(result.stdout, nonce)
        except DriverReplyMissing:
            return SubmissionResult(Outcome.ANSWER_ERROR, _died_without_reply(result, "answer()"), record)
        status = reply.get("status")
        record.value_type = reply.get("type")
        if status == "timeout":
            return SubmissionResult(Outcome.ANSWER_TIMEOUT, str(reply.get("error") or timeout_text), record)
        if status in ("error", "unserializable"):
            return SubmissionResult(Outcome.ANSWER_ERROR, str(reply.get("error")), record)
        if status != "ok" or not isinstance(reply.get("value"), dict):
            return SubmissionResult(
                Outcome.VERIFY_ERROR, f"harness error: {reply.get('error', reply)}", record
            )
        tagged: dict[str, Any] = reply["value"]
        record.value_repr = json.dumps(tagged)[:VALUE_REPR_CHARS]
        return tagged

    async def _verify(
        self, task: FrontierMathTask, record: SubmissionRecord, tagged: dict[str, Any]
    ) -> SubmissionResult:
        limit = self.config.verify_timeout_s
        request: dict[str, Any]
        if task.verification_code is not None:
            request = {"mode": "verify", "value": tagged, "verification_code": task.verification_code}
        else:
            request = {
                "mode": "compare",
                "value": tagged,
                "expected": task.answer,
                "tolerance": task.tolerance,
            }
        result, nonce = await self._call_driver(request, limit)
        record.verify_exec = result.to_dict()
        if result.timed_out:
            return SubmissionResult(
                Outcome.VERIFY_ERROR, f"verification did not finish within {limit:g} s", record
            )
        try:
            reply = parse_driver_reply(result.stdout, nonce)
        except DriverReplyMissing:
            return SubmissionResult(Outcome.VERIFY_ERROR, _died_without_reply(result, "verification"), record)
        if reply.get("status") != "ok":
            return SubmissionResult(Outcome.VERIFY_ERROR, str(reply.get("error", reply)), record)
        verdict = reply.get("verdict") is True
        record.verification = str(reply.get("detail") or f"verify() returned {verdict}")
        if verdict:
            return SubmissionResult(Outcome.CORRECT, None, record)
        return SubmissionResult(Outcome.INCORRECT, f"incorrect: {record.verification}", record)
