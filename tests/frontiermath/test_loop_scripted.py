"""The agent loop end to end: the real openai SDK and our client against a scripted server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from proctor.agent.inputs.config import RunConfig
from proctor.agent.model.tokens import estimate_prompt_tokens
from proctor.agent.results.records import Outcome, SampleRecord
from proctor.agent.tracks.frontiermath.profiles import METHODOLOGY
from proctor.agent.tracks.frontiermath.tasks import FrontierMathTask
from proctor.agent.tracks.frontiermath.track import FrontierMathTrack
from proctor.sandbox import Sandbox, open_sandbox
from tests.frontiermath.support import RecordingEvents, context, integer_task, run_config, scripted_client
from tests.support.scripted_server import HttpError, Reply, ReportedUsage, ScriptedServer, Step, ToolCallSpec

# Every test here runs whole scripted conversations through a real sandbox: seconds each.
pytestmark = pytest.mark.slow

FORCED = {"type": "function", "function": {"name": "submit_answer"}}


def python_call(code: str) -> ToolCallSpec:
    return ToolCallSpec("python", json.dumps({"code": code}))


def submit(code: str) -> ToolCallSpec:
    return ToolCallSpec("submit_answer", json.dumps({"code": code}))


RIGHT = "def answer():\n    return 6 * 7\n"


def warm_up(turns: int = 6) -> list[Step]:
    """Turns of a long conversation: 111k tokens each, so six of them pass the 660k threshold."""
    return [
        Reply(tool_calls=[python_call("print(1)")], usage=ReportedUsage(110_000, 1_000)) for _ in range(turns)
    ]


WRONG = "def answer():\n    return 41\n"


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    # No test here reads describe()["libraries"]: the import probe is seconds of CPU per open.
    box = await open_sandbox("local", probe_libraries=False)
    try:
        yield box
    finally:
        await box.aclose()


async def run_sample(
    script: list[Step] | Callable[[dict[str, Any], int], Step],
    sandbox: Sandbox,
    config: RunConfig | None = None,
    task: FrontierMathTask | None = None,
    events: RecordingEvents | None = None,
) -> tuple[SampleRecord, ScriptedServer]:
    config = config or run_config()
    with ScriptedServer(script) as server:
        client = scripted_client(server.base_url)
        try:
            track = FrontierMathTrack(config.track_options)
            record = await track.run_sample(
                task or integer_task(), 0, context(client, sandbox, config, events)
            )
        finally:
            await client.aclose()
    return record, server


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


async def test_right_submission_after_a_python_call(sandbox: Sandbox) -> None:
    events = RecordingEvents()
    record, server = await run_sample(
        [
            # Counts a tokenizer could give for the ~3,500-character prompt (below one token per
            # 256 characters a count is not believed: docs/models.md).
            Reply(
                content="Let me compute.",
                tool_calls=[python_call("print(6 * 7)")],
                usage=ReportedUsage(1_000, 5),
            ),
            Reply(content="It is 42.", tool_calls=[submit(RIGHT)], usage=ReportedUsage(1_200, 30, 10)),
        ],
        sandbox,
        events=events,
    )
    assert record.outcome is Outcome.CORRECT and record.success and record.score == 1.0
    assert record.total_tokens == 1_005 + 1_230 and record.reasoning_tokens == 10
    assert not record.tokens_estimated
    assert [t.cumulative_tokens for t in record.turns] == [1_005, 2_235]
    assert record.forced_submission_turn is None and not record.cap_reached
    # The model saw the python output; the grading verdict is never revealed to it.
    assert tool_messages(server.requests[1].json)[0]["content"] == "42"
    assert record.submission is not None and record.submission.code == RIGHT and record.submission.turn == 2
    assert [c.name for c in record.tool_calls] == ["python", "submit_answer"]
    assert all(c.duration_s > 0 for c in record.tool_calls)
    tool_entries = [m for m in record.transcript if m["role"] == "tool"]
    assert tool_entries[-1]["content"] == "Your answer has been submitted for grading."
    assert all("duration_s" in m for m in tool_entries)
    assert record.transcript[0]["role"] == "user" and "Python int" in record.transcript[0]["content"]
    assert events.tokens == [1_005, 1_230] and events.sandbox_started == 3  # python, answer(), compare
    assert record.sandbox_image and record.sandbox_image.startswith("local")
    first = server.requests[0].json
    assert first["tool_choice"] == "auto" and {t["function"]["name"] for t in first["tools"]} == {
        "python",
        "submit_answer",
    }


async def test_wrong_submission(sandbox: Sandbox) -> None:
    record, _ = await run_sample([Reply(tool_calls=[submit(WRONG)])], sandbox)
    assert record.outcome is Outcome.INCORRECT and not record.success and record.score == 0.0
    assert record.submission is not None and "got int 41" in (record.error or "")


async def test_never_submitting_model_is_forced_and_never_crosses_the_cap(sandbox: Sandbox) -> None:
    """The model only ever runs python; its prompt grows each turn and it uses all output allowed."""
    cap, force_at = 12_000, 3_960
    seen: list[tuple[int, int, Any]] = []

    def script(request: dict[str, Any], index: int) -> Step:
        prompt = estimate_prompt_tokens(request["messages"], request.get("tools"))
        completion = int(request["max_completion_tokens"])
        seen.append((prompt, completion, request.get("tool_choice")))
        # Disobedient even when forced: keeps calling python.
        return Reply(
            content="x" * 50,
            tool_calls=[python_call("print('still thinking')")],
            usage=ReportedUsage(prompt, min(completion, 400)),
        )

    record, server = await run_sample(script, sandbox, run_config(token_cap=cap, force_submit_at=force_at))
    # A forced turn without a submission does not end the sample: the cap does.
    assert record.outcome is Outcome.NO_SUBMISSION and record.cap_reached
    assert "token cap" in (record.error or "") or "would cross" in (record.error or "")
    cumulative = 0
    for prompt, completion, _choice in seen:
        # Never a request whose prompt alone, or prompt + allowed output, could cross the cap.
        assert cumulative + prompt + completion < cap
        cumulative += prompt + min(completion, 400)
    assert record.total_tokens == cumulative < cap
    forced = [i for i, (_, _, choice) in enumerate(seen) if choice == FORCED]
    # Forced on every turn from the threshold to the last request the cap allowed.
    assert len(forced) >= 2 and forced == list(range(forced[0], len(seen)))
    assert record.turns[forced[0] - 1].cumulative_tokens >= force_at
    assert record.turns[forced[0] - 2].cumulative_tokens < force_at if forced[0] >= 2 else True
    assert record.forced_submission_turn == forced[0] + 1
    assert all(t.forced_submission for t in record.turns[forced[0] :])
    for request in server.requests[forced[0] :]:
        # Each forced request ends with the notice (the previous turn's tool result before it).
        last = request.json["messages"][-1]
        assert last["role"] == "user" and "you must submit your answer now" in last["content"]


async def test_text_only_model_burns_tokens_until_the_cap_stops_it(sandbox: Sandbox) -> None:
    """Reported usage is large and the prompt keeps growing; forcing is disabled (threshold = cap)."""
    cap = 20_000
    requests: list[tuple[int, int]] = []

    def script(request: dict[str, Any], index: int) -> Step:
        prompt = estimate_prompt_tokens(request["messages"], request.get("tools"))
        requests.append((prompt, int(request["max_completion_tokens"])))
        return Reply(
            content="thinking " * 300, usage=ReportedUsage(prompt, int(request["max_completion_tokens"]))
        )

    config = run_config(token_cap=cap, force_submit_at=cap, max_output_tokens=1_000)
    record, _ = await run_sample(script, sandbox, config)
    assert record.outcome is Outcome.NO_SUBMISSION and record.cap_reached
    assert "token cap" in (record.error or "")
    assert all(completion <= 1_000 for _, completion in requests)
    assert record.total_tokens < cap
    # Each nudge counted as a turn and was sent back to the model.
    assert sum(1 for m in record.transcript if m.get("kind") == "nudge") == len(record.turns)
    assert all(
        m["content"] == METHODOLOGY.no_tool_call_nudge for m in record.transcript if m.get("kind") == "nudge"
    )


async def test_a_server_reporting_no_tokens_cannot_carry_a_conversation_past_the_cap(
    sandbox: Sandbox,
) -> None:
    """Usage of 0 + 0 for every reply of 27,000 characters: the text's estimate counts instead."""
    cap = 20_000

    def script(request: dict[str, Any], index: int) -> Step:
        if index >= 40:  # without the floor the conversation would go on: end it, uncapped
            return Reply(tool_calls=[submit(RIGHT)], usage=ReportedUsage(0, 0))
        return Reply(content="thinking " * 3_000, usage=ReportedUsage(0, 0))

    config = run_config(token_cap=cap, force_submit_at=cap, max_output_tokens=1_000)
    record, server = await run_sample(script, sandbox, config)
    assert record.outcome is Outcome.NO_SUBMISSION and record.cap_reached, record.outcome
    assert record.tokens_estimated
    assert len(server.requests) < 10


async def test_reported_usage_crossing_660k_then_1m(sandbox: Sandbox) -> None:
    """Default numbers: 666k reported -> forced turn; the forced reply reports past 1M -> ends at once."""
    events = RecordingEvents()
    # The provider over-reports on the forced turn (more output than it was allowed).
    script = [*warm_up(), Reply(tool_calls=[submit(RIGHT)], usage=ReportedUsage(115_000, 230_000))]
    record, server = await run_sample(script, sandbox, run_config(), events=events)
    assert [r.json["tool_choice"] for r in server.requests] == ["auto"] * 6 + [FORCED]
    assert record.forced_submission_turn == 7
    assert record.turns[5].cumulative_tokens == 666_000
    assert record.turns[6].cumulative_tokens == 1_011_000
    # At the cap the conversation ends at once: the submission in that reply is not graded.
    assert record.outcome is Outcome.NO_SUBMISSION and record.cap_reached and record.submission is None
    assert events.sandbox_started == 6
    # The forced request itself asked for no more output than the cap leaves room for.
    forced = server.requests[-1].json
    prompt_estimate = estimate_prompt_tokens(forced["messages"], forced["tools"])
    assert prompt_estimate < 115_000
    assert 666_000 + 111_000 + int(forced["max_completion_tokens"]) < 1_000_000


async def test_forced_turn_submission_is_graded(sandbox: Sandbox) -> None:
    script = [*warm_up(), Reply(tool_calls=[submit(RIGHT)], usage=ReportedUsage(112_000, 100))]
    record, server = await run_sample(script, sandbox)
    assert server.requests[-1].json["tool_choice"] == FORCED
    assert record.outcome is Outcome.CORRECT and record.forced_submission_turn == 7
    assert record.turns[6].forced_submission and not any(t.forced_submission for t in record.turns[:6])
    notice = server.requests[-1].json["messages"][-1]
    assert (
        notice["role"] == "user" and "666,000 tokens" in notice["content"] and "660,000" in notice["content"]
    )


async def test_an_output_only_overflow_is_asked_again_and_a_real_one_ends_as_a_refusal(
    sandbox: Sandbox,
) -> None:
    """vLLM's context message: only the requested output overflowed -> asked again with the room
    the context leaves; then the conversation itself overflows -> provider_refusal, scored 0."""

    def overflow(prompt: int) -> HttpError:
        message = (
            f"This model's maximum context length is 32768 tokens. However, you requested {prompt + 900_000} "
            f"tokens ({prompt} in the messages, 900000 in the completion). Please reduce the length."
        )
        return HttpError(
            400, body={"object": "error", "message": message, "type": "BadRequestError", "code": 400}
        )

    script: list[Step] = [
        overflow(2_000),
        Reply(tool_calls=[python_call("print(1)")], usage=ReportedUsage(2_000, 100)),
        overflow(40_000),  # the prompt alone is past the context now
    ]
    record, server = await run_sample(script, sandbox)
    assert server.requests[1].json["max_completion_tokens"] == 30_768
    assert record.outcome is Outcome.PROVIDER_REFUSAL and record.score == 0.0 and not record.success
    assert record.provider_refusal is not None and record.provider_refusal.kind == "context_overflow"
    assert "maximum context length" in record.provider_refusal.message
    assert [c.name for c in record.tool_calls] == ["python"]


async def test_malformed_tool_calls_get_errors_and_the_run_goes_on(sandbox: Sandbox) -> None:
    malformed = [
        ToolCallSpec("python", '{ "code": "python math.round(x)\n}\n\n'),
        ToolCallSpec("shell", '{"code": "ls"}'),
        ToolCallSpec("python", "{}"),
        ToolCallSpec("submit_answer", '{"code": "def answer(): return 1", "note": 1}'),
    ]
    record, server = await run_sample(
        [Reply(tool_calls=malformed), Reply(tool_calls=[submit(RIGHT)])], sandbox
    )
    assert record.outcome is Outcome.CORRECT
    replies = [m["content"] for m in tool_messages(server.requests[1].json)]
    assert len(replies) == 4
    assert "not valid JSON" in replies[0]
    assert "unknown tool 'shell'" in replies[1]
    assert "missing required argument 'code'" in replies[2]
    assert "unexpected argument(s) 'note'" in replies[3]
    assert all(c.error for c in record.tool_calls[:4])
    assert record.tool_calls[0].raw_arguments == '{ "code": "python math.round(x)\n}\n\n'


async def test_tool_calls_in_one_message_run_concurrently_and_reply_in_order(sandbox: Sandbox) -> None:
    events = RecordingEvents()
    calls = [python_call(f"import time\ntime.sleep(1.0)\nprint('call {i}')") for i in range(3)]
    record, server = await run_sample(
        [Reply(tool_calls=calls), Reply(tool_calls=[submit(RIGHT)])], sandbox, events=events
    )
    assert record.outcome is Outcome.CORRECT
    assert events.max_in_flight == 3
    replies = tool_messages(server.requests[1].json)
    assert [m["content"] for m in replies] == ["call 0", "call 1", "call 2"]
    sent_ids = [c["id"] for c in server.requests[1].json["messages"][1]["tool_calls"]]
    assert [m["tool_call_id"] for m in replies] == sent_ids


async def test_python_tool_is_stateless_reminds_to_print_and_caps_output(sandbox: Sandbox) -> None:
    config = run_config(tool_output_chars=200)
    calls = [python_call("x = 5"), python_call("print(x)"), python_call("print('y' * 5000)")]
    record, server = await run_sample(
        [Reply(tool_calls=calls), Reply(tool_calls=[submit(RIGHT)])], sandbox, config
    )
    silent, stateless, flood = (m["content"] for m in tool_messages(server.requests[1].json))
    assert "printed nothing" in silent and "print()" in silent
    assert "NameError" in stateless
    assert "output truncated" in flood and len(flood) < 400
    assert record.tool_calls[2].truncated and not record.tool_calls[0].truncated


REFUSING = {"reject_invalid_submissions": True}


async def test_invalid_submission_is_rejected_and_may_be_fixed_when_refusal_is_on(sandbox: Sandbox) -> None:
    script = [
        Reply(tool_calls=[submit("def answer():\n    return 42  # done\n")]),
        Reply(tool_calls=[submit(RIGHT)]),
    ]
    record, server = await run_sample(script, sandbox, run_config(track_options=REFUSING))
    rejection = tool_messages(server.requests[1].json)[0]["content"]
    assert rejection.startswith("Your submission was rejected") and "comments" in rejection
    assert record.outcome is Outcome.CORRECT


async def test_a_rejected_forced_submission_is_followed_by_another_forced_turn(sandbox: Sandbox) -> None:
    """Forcing lasts: the rejected submission does not end the sample; the next turn is forced too."""
    script = [
        *warm_up(),
        Reply(tool_calls=[submit("def answer(n):\n    return n\n")], usage=ReportedUsage(112_000, 100)),
        Reply(tool_calls=[submit(RIGHT)], usage=ReportedUsage(113_000, 100)),
    ]
    record, server = await run_sample(script, sandbox, run_config(track_options=REFUSING))
    assert [r.json["tool_choice"] for r in server.requests] == ["auto"] * 6 + [FORCED] * 2
    second_forced = server.requests[7].json["messages"]
    assert "must take no arguments" in second_forced[-2]["content"]  # the rejection, as a tool result
    assert second_forced[-1]["role"] == "user" and "778,100 tokens" in second_forced[-1]["content"]
    assert record.outcome is Outcome.CORRECT and record.forced_submission_turn == 7
    assert [t.forced_submission for t in record.turns] == [False] * 6 + [True] * 2


async def test_rejected_forced_submissions_until_the_cap_leave_the_last_rejection(sandbox: Sandbox) -> None:
    def script(request: dict[str, Any], index: int) -> Step:
        if index < 6:
            return warm_up(1)[0]
        return Reply(
            tool_calls=[submit("def answer(n):\n    return n\n")], usage=ReportedUsage(110_000, 1_000)
        )

    record, server = await run_sample(script, sandbox, run_config(track_options=REFUSING))
    # 666,000 / 777,000 / 888,000 tokens: forced twice; the next prompt (about 110,000 tokens,
    # as the last one) would cross the cap, so the sample ends there, never after a forced turn.
    assert [r.json["tool_choice"] for r in server.requests] == ["auto"] * 6 + [FORCED] * 2
    assert record.outcome is Outcome.INVALID_SUBMISSION and record.cap_reached
    assert "must take no arguments" in (record.error or "")
    assert record.submission is not None and record.submission.check_problems


async def test_invalid_submission_is_graded_and_its_problems_recorded_by_default(sandbox: Sandbox) -> None:
    record, server = await run_sample(
        [Reply(tool_calls=[submit("def answer():\n    return 42  # done\n")])], sandbox
    )
    assert record.outcome is Outcome.CORRECT and server.call_count == 1
    assert record.submission is not None and any("comments" in p for p in record.submission.check_problems)


@pytest.mark.parametrize(
    ("code", "problem", "outcome"),
    [
        ("def answer():\n    return 42  # done\n", "comments", Outcome.CORRECT),
        ("def answer(x=None):\n    return 42\n", "must take no arguments", Outcome.CORRECT),
        ("def answer(:\n    return 42\n", "syntax error", Outcome.ANSWER_ERROR),
        ("def solve():\n    return 42\n", "named 'answer'", Outcome.ANSWER_ERROR),
        # Past the parser's nesting limit: the submission's failure, never a harness error.
        ("def answer():\n    return " + "-" * 3000 + "42\n", "nested too deeply", Outcome.ANSWER_ERROR),
    ],
)
async def test_each_rule_violation_is_graded_by_default_and_recorded(
    sandbox: Sandbox, code: str, problem: str, outcome: Outcome
) -> None:
    """The default grades what was submitted: a violation does not refuse it, it is recorded."""
    record, server = await run_sample([Reply(tool_calls=[submit(code)])], sandbox)
    assert server.call_count == 1
    assert record.outcome is outcome, record.error
    assert record.submission is not None and record.submission.code == code
    assert any(problem in p for p in record.submission.check_problems), record.submission.check_problems
    assert record.tool_calls[0].result == METHODOLOGY.submission_reply


async def test_forced_turns_without_submit_answer_go_on_until_the_cap(sandbox: Sandbox) -> None:
    """A forced turn answered in text does not end the sample: forcing goes on until the cap."""
    refusal = Reply(content="I refuse to submit.", usage=ReportedUsage(110_000, 1_000))
    record, server = await run_sample([*warm_up(), refusal, refusal], sandbox)
    assert [r.json["tool_choice"] for r in server.requests] == ["auto"] * 6 + [FORCED] * 2
    assert record.outcome is Outcome.NO_SUBMISSION and record.forced_submission_turn == 7
    assert record.cap_reached


async def test_answer_error_and_timeout_outcomes_through_the_loop(sandbox: Sandbox) -> None:
    raising, _ = await run_sample(
        [Reply(tool_calls=[submit("def answer():\n    return int('x')\n")])], sandbox
    )
    assert raising.outcome is Outcome.ANSWER_ERROR and "ValueError" in (raising.error or "")
    config = run_config(answer_timeout_s=1)
    slow, _ = await run_sample(
        [Reply(tool_calls=[submit("def answer():\n    while True:\n        pass\n")])], sandbox, config
    )
    assert slow.outcome is Outcome.ANSWER_TIMEOUT


async def test_model_error_ends_the_sample_with_a_record(sandbox: Sandbox) -> None:
    record, _ = await run_sample(
        [Reply(tool_calls=[python_call("print(1)")]), HttpError(401, "invalid api key")], sandbox
    )
    assert record.outcome is Outcome.MODEL_ERROR and "invalid api key" in (record.error or "")
    assert len(record.turns) == 1 and record.tool_calls[0].result == "1"


async def test_missing_usage_is_estimated_and_flagged(sandbox: Sandbox) -> None:
    record, _ = await run_sample([Reply(tool_calls=[submit(RIGHT)], usage=None)], sandbox)
    assert record.outcome is Outcome.CORRECT
    assert record.tokens_estimated and record.turns[0].estimated and record.total_tokens > 0


async def test_configured_output_ceiling_is_sent(sandbox: Sandbox) -> None:
    config = run_config(max_output_tokens=777)
    _, server = await run_sample([Reply(tool_calls=[submit(RIGHT)])], sandbox, config)
    assert server.requests[0].json["max_completion_tokens"] == 777


async def test_model_output_maximum_is_learned_from_the_refusal(sandbox: Sandbox) -> None:
    refusal = HttpError(
        400,
        "max_completion_tokens is too large: 999000. This model supports at most 16384 completion tokens, "
        "whereas you provided 999000.",
        type="invalid_request_error",
    )
    script = [refusal, Reply(tool_calls=[python_call("print(1)")]), Reply(tool_calls=[submit(RIGHT)])]
    record, server = await run_sample(script, sandbox)
    assert record.outcome is Outcome.CORRECT
    sent = [r.json["max_completion_tokens"] for r in server.requests]
    assert sent[0] > 16_384 and sent[1:] == [16_384, 16_384]


async def test_other_refusals_are_model_errors(sandbox: Sandbox) -> None:
    record, server = await run_sample([HttpError(400, "unsupported parameter: tools")], sandbox)
    assert record.outcome is Outcome.MODEL_ERROR and "unsupported parameter" in (record.error or "")
    assert server.call_count == 1


@pytest.mark.docker
async def test_a_conversation_in_the_pinned_image() -> None:
    """The same loop against the docker backend: pinned libraries, no network, image recorded."""
    box = await open_sandbox("docker", pool_size=1)
    try:
        probe = (
            "import socket, sympy\n"
            "print(sympy.__version__, sympy.factorint(2**32 + 1))\n"
            "try:\n"
            "    socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
            "    print('network: reachable')\n"
            "except OSError:\n"
            "    print('network: none')\n"
        )
        record, server = await run_sample(
            [Reply(tool_calls=[python_call(probe)]), Reply(tool_calls=[submit(RIGHT)])],
            box,
            run_config(timeout_s=60, answer_timeout_s=60, verify_timeout_s=60),
        )
    finally:
        await box.aclose()
    assert record.outcome is Outcome.CORRECT
    output = tool_messages(server.requests[1].json)[0]["content"]
    assert "1.13.3 {641: 1, 6700417: 1}" in output and "network: none" in output
    assert record.sandbox_image and record.sandbox_image.startswith("sha256:")
