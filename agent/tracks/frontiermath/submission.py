"""The submission pipeline: check the code, run answer(), carry its value as data, verify it.

Two sandbox calls, two trust levels (the driver is ``sandbox_driver.py``):

1. The **answer sandbox** runs the submission, which owns that process from its first line. Its
   reply is untrusted bytes: the host parses it as JSON with a strict shape, and the value inside
   must pass the codec's schema (``value_codec.check_encoded``) before anything uses it. The time
   limit is the sandbox's wall clock, enforced from outside the process: the limit plus a small
   grace for interpreter start-up and serialisation, nothing the submission can stop.
2. The **verification sandbox** rebuilds the value with the allowlist decoder (nothing from the
   answer sandbox is ever executed) and runs the task's ``verify()`` or the typed comparison.

Failures caused by the submitted value are the submission's: wrong, unreadable, too slow or too
big to verify all score 0. Only failures of the infrastructure or of the task itself (the engine
is down, the reference does not evaluate) are ``verify_error``, counted apart and re-run.
"""

from __future__ import annotations

import functools
import json
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor.agent.inputs.config import SandboxConfig
from proctor.agent.results.records import Outcome, SubmissionRecord
from proctor.agent.tracks.base import RunEvents
from proctor.agent.tracks.frontiermath import value_codec
from proctor.agent.tracks.frontiermath.checks import check_submission_code
from proctor.agent.tracks.frontiermath.sandbox_calls import run_in_sandbox
from proctor.agent.tracks.frontiermath.sandbox_driver import MARK_REFERENCE_READY, MARK_RETURNED
from proctor.agent.tracks.frontiermath.tasks import FrontierMathTask
from proctor.sandbox import ExecResult, Limits, Sandbox, SandboxError, execution_caller

# answer()'s limit is the driver's own timer for a well-behaved submission; the sandbox kills
# the call at the limit plus this grace whatever the submission does to that timer. It covers
# interpreter start-up and serialising the value (linear in its size, bounded by the codec's cap).
ANSWER_GRACE_S = 1.5
STDERR_TAIL_CHARS = 2000
PROBE_TIMEOUT_S = 30.0
VALUE_REPR_CHARS = 100_000
# The reply carries the encoded value through the sandbox's stdout, whose cap (1 MiB by default)
# is kept so answer calls can use the warm pool; a larger value is refused by the driver as too
# large to carry. 10**999000 encodes to about 0.8 MiB.
MAX_VALUE_BYTES = Limits().output_bytes - 64 * 1024

_BOOTSTRAP = """\
import sys, types
def _proctor_load(name, source):
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile(source, '<' + name + '>', 'exec'), module.__dict__)
    return module
_proctor_load('proctor_value_codec', {codec!r})
_proctor_load('proctor_driver', {driver!r}).main()
"""


@functools.cache
def driver_program() -> str:
    """The program every submission step runs: the codec and the driver, loaded as modules."""
    here = Path(__file__).parent
    return _BOOTSTRAP.format(
        codec=(here / "value_codec.py").read_text(encoding="utf-8"),
        driver=(here / "sandbox_driver.py").read_text(encoding="utf-8"),
    )


@dataclass
class SubmissionResult:
    outcome: Outcome
    error: str | None
    record: SubmissionRecord

    @property
    def correct(self) -> bool:
        return self.outcome is Outcome.CORRECT


class DriverReplyMissing(Exception):
    """The sandboxed program ended without writing a readable result block."""


def parse_driver_reply(stdout: str, nonce: str) -> dict[str, Any]:
    start_mark = f"<<<PROCTOR-RESULT {nonce}>>>\n"
    end_mark = f"\n<<<END {nonce}>>>"
    start = stdout.rfind(start_mark)
    end = stdout.find(end_mark, start + len(start_mark)) if start >= 0 else -1
    if start < 0 or end < 0:
        raise DriverReplyMissing("no result block in the sandbox output")
    try:
        reply = json.loads(stdout[start + len(start_mark) : end])
    except (ValueError, RecursionError) as exc:
        raise DriverReplyMissing(f"the result block is not readable JSON: {type(exc).__name__}") from None
    if not isinstance(reply, dict) or not isinstance(reply.get("status"), str):
        raise DriverReplyMissing("the result block is not a JSON object with a status")
    return reply


def progress_marks(stdout: str, nonce: str) -> dict[str, float]:
    """The progress marks a step wrote before it ended (or was killed): name -> seconds.

    The answer process knows its nonce and may print look-alikes: the pattern admits only a
    plain decimal, so whatever it prints parses (or is ignored), never raises.
    """
    pattern = re.compile(
        rf"<<<PROCTOR-MARK {re.escape(nonce)} ([a-z-]{{1,40}}) ([0-9]{{1,9}}\.[0-9]{{1,6}})>>>"
    )
    return {name: float(seconds) for name, seconds in pattern.findall(stdout)}


def _tail(text: str) -> str:
    return text if len(text) <= STDERR_TAIL_CHARS else "...\n" + text[-STDERR_TAIL_CHARS:]


def _died_without_reply(result: ExecResult, what: str) -> str:
    if result.oom_killed:
        return f"{what} ran out of memory and was killed"
    detail = f"{what} ended the process without a result (exit code {result.exit_code})"
    if result.stdout_truncated:
        detail += "; the output passed the sandbox's size cap (is the value too large?)"
    return f"{detail}\n{_tail(result.stderr)}" if result.stderr.strip() else detail


def _text(value: Any, limit: int = 20_000) -> str:
    """A reply field shown in the record: whatever it is, as bounded text."""
    try:
        text = value if isinstance(value, str) else repr(value)
    except (RecursionError, ValueError):  # nested past the stack, or an int too long to print
        text = f"<unprintable {type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


class SubmissionRunner:
    def __init__(self, sandbox: Sandbox, config: SandboxConfig, events: RunEvents) -> None:
        self.sandbox = sandbox
        self.config = config
        self.events = events

    async def _call_driver(
        self, request: dict[str, Any], timeout: float, value: Any = None
    ) -> tuple[ExecResult, str]:
        nonce = secrets.token_hex(16)
        # One line of request (json.dumps never writes a raw newline), then the value if any.
        payload = json.dumps({**request, "nonce": nonce}) + "\n"
        if value is not None:
            payload += json.dumps(value)
        # A caller of its own: with container recycling on, the runs that decide the verdict
        # get a container no python call of this sample (or any other) ever used.
        with execution_caller(("submission", nonce)):
            result = await run_in_sandbox(
                self.sandbox, self.events, driver_program(), timeout=timeout, stdin=payload
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
        except SandboxError as exc:
            return await self._sandbox_failed(exc, record, Outcome.ANSWER_ERROR, "answer()")
        if isinstance(answered, SubmissionResult):
            return answered
        try:
            return await self._verify(task, record, answered)
        except SandboxError as exc:
            return await self._sandbox_failed(exc, record, Outcome.INCORRECT, "verifying the value")

    async def _sandbox_failed(
        self, exc: SandboxError, record: SubmissionRecord, if_healthy: Outcome, during: str
    ) -> SubmissionResult:
        """Blame the infrastructure only when it is really down.

        A program can sometimes take its own sandbox down with it; if a probe program then runs
        fine, the failure was the submission's (``if_healthy``), else the engine's (``verify_error``,
        counted apart and re-run by ``--resume``).
        """
        detail = f"the sandbox failed while {during}: {exc}"
        if await self._sandbox_healthy():
            record.verification = f"{detail} (a probe program ran fine afterwards)"
            return SubmissionResult(if_healthy, record.verification, record)
        return SubmissionResult(Outcome.VERIFY_ERROR, f"{detail} (a probe program failed too)", record)

    async def _sandbox_healthy(self) -> bool:
        try:
            probe = await self.sandbox.exec("print('proctor-probe')", timeout=PROBE_TIMEOUT_S)
        except SandboxError:
            return False
        return probe.exit_code == 0 and probe.stdout.strip() == "proctor-probe"

    async def _run_answer(self, code: str, record: SubmissionRecord) -> SubmissionResult | Any:
        """The failure, or the encoded value (already checked against the codec's schema)."""
        limit = self.config.answer_timeout_s
        request = {"mode": "answer", "code": code, "time_limit_s": limit, "max_value_bytes": MAX_VALUE_BYTES}
        result, nonce = await self._call_driver(request, limit + ANSWER_GRACE_S)
        record.answer_exec = _exec_summary(result)
        try:
            return self._read_answer(result, nonce, limit, record)
        except Exception as exc:
            # Everything read here came out of the submission's process: a reply that breaks the
            # reader is the submission's failure, never a harness_error it could abstain with.
            why = f"the answer process's reply could not be read: {type(exc).__name__}"
            return SubmissionResult(Outcome.ANSWER_ERROR, why, record)

    def _read_answer(
        self, result: ExecResult, nonce: str, limit: float, record: SubmissionRecord
    ) -> SubmissionResult | Any:
        marks = progress_marks(result.stdout, nonce)
        if MARK_RETURNED in marks:
            record.reported_timing["answer_s"] = marks[MARK_RETURNED]
        if result.timed_out:
            return SubmissionResult(Outcome.ANSWER_TIMEOUT, _answer_timeout_text(limit, marks), record)
        try:
            reply = parse_driver_reply(result.stdout, nonce)
        except DriverReplyMissing as exc:
            why = _died_without_reply(result, "answer()") if not result.stdout_truncated else str(exc)
            return SubmissionResult(Outcome.ANSWER_ERROR, why, record)
        status = reply["status"]
        record.reported_timing.update(
            {
                key: seconds
                for key in ("answer_s", "encode_s")
                if (seconds := _seconds(reply.get(key))) is not None
            }
        )
        if status == "timeout":
            return SubmissionResult(Outcome.ANSWER_TIMEOUT, _answer_timeout_text(limit, marks), record)
        if status in ("error", "unserializable"):
            return SubmissionResult(Outcome.ANSWER_ERROR, _text(reply.get("error")), record)
        if status != "ok" or "value" not in reply:
            return SubmissionResult(
                Outcome.ANSWER_ERROR, f"unexpected reply status {_text(status, 100)}", record
            )
        encoded = reply["value"]
        try:
            value_codec.check_encoded(encoded, max_bytes=MAX_VALUE_BYTES)
        except value_codec.ValueCodecError as exc:
            return SubmissionResult(Outcome.ANSWER_ERROR, f"the value cannot be carried: {exc}", record)
        record.value_repr = json.dumps(encoded)[:VALUE_REPR_CHARS]
        return encoded

    async def _verify(
        self, task: FrontierMathTask, record: SubmissionRecord, encoded: Any
    ) -> SubmissionResult:
        limit = self.config.verify_timeout_s
        request: dict[str, Any]
        # Inexact values reach verify()/the comparison only when the task's answer kind is theirs
        # (a field of the task, never its prose), and a value must be in evaluated form.
        gate = {"answer_kind": task.wanted_kind}
        if task.verification_code is not None:
            request = {"mode": "verify", "verification_code": task.verification_code, **gate}
        else:
            request = {"mode": "compare", "expected": task.answer, "tolerance": task.tolerance, **gate}
        result, nonce = await self._call_driver(request, limit, encoded)
        record.verify_exec = _exec_summary(result)
        reached_value = MARK_REFERENCE_READY in progress_marks(result.stdout, nonce)
        try:
            reply = parse_driver_reply(result.stdout, nonce)
        except DriverReplyMissing:
            return self._verification_died(result, limit, reached_value, record)
        status = reply["status"]
        # The verification sandbox rebuilt the value itself: its type and repr are trustworthy.
        if isinstance(reply.get("value_type"), str):
            record.value_type = reply["value_type"]
        if isinstance(reply.get("value_repr"), str):
            record.value_repr = reply["value_repr"][:VALUE_REPR_CHARS]
        if status == "reference_error":
            return SubmissionResult(Outcome.VERIFY_ERROR, _text(reply.get("error")), record)
        if status == "decode_error":
            return SubmissionResult(
                Outcome.ANSWER_ERROR, f"the value cannot be rebuilt: {_text(reply.get('error'))}", record
            )
        if status == "candidate_error":
            record.verification = _text(reply.get("error"))
            return SubmissionResult(Outcome.INCORRECT, f"incorrect: {record.verification}", record)
        if status != "ok" or not isinstance(reply.get("verdict"), bool):
            # Before the value was touched only the task or the harness can have failed; after,
            # whatever broke, broke on the value (a value must not be able to abstain).
            if not reached_value:
                return SubmissionResult(Outcome.VERIFY_ERROR, f"harness error: {_text(reply)}", record)
            record.verification = f"verification failed while examining the submitted value: {_text(reply)}"
            return SubmissionResult(Outcome.INCORRECT, f"incorrect: {record.verification}", record)
        verdict: bool = reply["verdict"]
        record.verification = _text(reply.get("detail") or f"verify() returned {verdict}")
        record.reference_inexact = reply.get("reference_inexact") is True
        if verdict:
            return SubmissionResult(Outcome.CORRECT, None, record)
        return SubmissionResult(Outcome.INCORRECT, f"incorrect: {record.verification}", record)

    def _verification_died(
        self, result: ExecResult, limit: float, reached_value: bool, record: SubmissionRecord
    ) -> SubmissionResult:
        """Before the value was touched, a death is the task's or the sandbox's; after, the value's."""
        if result.timed_out:
            what = f"verification did not finish within {limit:g} s"
        else:
            what = _died_without_reply(result, "verification")
        if not reached_value:
            return SubmissionResult(
                Outcome.VERIFY_ERROR, f"{what} (before the submitted value was examined)", record
            )
        record.verification = f"{what} while examining the submitted value"
        return SubmissionResult(Outcome.INCORRECT, f"incorrect: {record.verification}", record)


def _seconds(value: Any) -> float | None:
    """A duration from an untrusted reply: a plain finite number of seconds, else nothing."""
    if type(value) not in (int, float):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if 0.0 <= seconds <= 1e6 else None


def _answer_timeout_text(limit: float, marks: dict[str, float]) -> str:
    returned = marks.get(MARK_RETURNED)
    if returned is None:
        return f"answer() did not return within {limit:g} s"
    return (
        f"answer() returned after {returned:.2f} s (as its own process reported), but its value "
        f"was not brought to evaluated form and serialised before the limit "
        f"({limit:g} s + {ANSWER_GRACE_S:g} s grace)"
    )


def _exec_summary(result: ExecResult) -> dict[str, Any]:
    """The ExecResult for the record, with both streams bounded (the value is recorded apart)."""
    summary = result.to_dict()
    for stream in ("stdout", "stderr"):
        text = summary[stream]
        if len(text) > VALUE_REPR_CHARS:
            summary[stream] = (
                text[:VALUE_REPR_CHARS] + f"... [{len(text) - VALUE_REPR_CHARS} more characters]"
            )
    return summary
