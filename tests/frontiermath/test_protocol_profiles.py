"""Protocol profiles: each profile's conversation, message by message, against the scripted server.

The fidelity table in docs/frontiermath.md names these tests. The scripted model is the same
for both profiles; what differs is only what the harness says and does between its replies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proctor.agent.errors import UserError
from proctor.agent.results.records import Outcome, SampleRecord
from proctor.agent.results.store import resume_conflicts
from proctor.agent.tracks.frontiermath.profiles import (
    INSPECT_EXAMPLE,
    METHODOLOGY,
    PROFILES,
    get_profile,
)
from proctor.agent.tracks.frontiermath.tools import NOTHING_PRINTED, format_python_result
from proctor.agent.tracks.frontiermath.track import FrontierMathTrack
from proctor.sandbox import ExecResult, Sandbox
from tests.frontiermath.support import context, integer_task, run_config, scripted_client
from tests.support.scripted_server import Reply, ReportedUsage, ScriptedServer, Step, ToolCallSpec

FORCED = {"type": "function", "function": {"name": "submit_answer"}}
RIGHT = "def answer():\n    return 6 * 7\n"
WRONG = "def answer():\n    return 41\n"


def python_call(code: str) -> ToolCallSpec:
    return ToolCallSpec("python", json.dumps({"code": code}))


def submit(code: str) -> ToolCallSpec:
    return ToolCallSpec("submit_answer", json.dumps({"code": code}))


# One local sandbox for the module: opening one takes seconds, and its calls share no state.
module_loop = pytest.mark.asyncio(loop_scope="module")


async def run_sample(
    script: list[Step], sandbox: Sandbox, protocol: str, **config: Any
) -> tuple[SampleRecord, ScriptedServer]:
    run = run_config(protocol=protocol, **config)
    with ScriptedServer(script) as server:
        client = scripted_client(server.base_url)
        try:
            record = await FrontierMathTrack(run.track_options).run_sample(
                integer_task(), 0, context(client, sandbox, run)
            )
        finally:
            await client.aclose()
    return record, server


def seen(request: dict[str, Any]) -> list[tuple[str, str]]:
    """The conversation as sent, after the prompt: (role, content); assistant turns by their text."""
    return [(m["role"], m.get("content") or "") for m in request["messages"][1:]]


def budget(template: str, used: int) -> str:
    return template.format(used=used, force_at=660_000, cap=1_000_000)


# One scripted model for both profiles. Reported usage after each turn:
# 101,000 / 302,000 / 553,000 / 664,000 (past the 660,000 threshold) / 785,000 / 915,100.
SHARED_SCRIPT: list[Step] = [
    Reply(content="Plan.", tool_calls=[python_call("x = 5 * 12")], usage=ReportedUsage(100_000, 1_000)),
    Reply(content="Thinking aloud.", usage=ReportedUsage(200_000, 1_000)),
    Reply(
        tool_calls=[python_call("import sys\nprint('out')\nprint('err', file=sys.stderr)")],
        usage=ReportedUsage(250_000, 1_000),
    ),
    Reply(tool_calls=[python_call("print(1)")], usage=ReportedUsage(110_000, 1_000)),
    # The first forced turn: this model disobeys and runs python again.
    Reply(tool_calls=[python_call("print(2)")], usage=ReportedUsage(120_000, 1_000)),
    Reply(tool_calls=[submit(WRONG), submit(RIGHT)], usage=ReportedUsage(130_000, 100)),
]


@module_loop
async def test_methodology_conversation_message_by_message(sandbox: Sandbox) -> None:
    record, server = await run_sample(SHARED_SCRIPT, sandbox, "methodology")
    p = METHODOLOGY
    assert [r.json["tool_choice"] for r in server.requests] == ["auto"] * 4 + [FORCED] * 2
    assert seen(server.requests[-1].json) == [
        ("assistant", "Plan."),
        ("tool", NOTHING_PRINTED),  # the reminder is the tool result itself
        ("assistant", "Thinking aloud."),
        ("user", p.no_tool_call_nudge),  # no usage report after a turn
        ("assistant", ""),
        ("tool", "out\nerr"),  # stdout first
        ("assistant", ""),
        ("tool", "1"),
        ("user", budget(p.forced_notice, 664_000)),
        ("assistant", ""),
        ("tool", "2"),
        # The forced turn brought no submission: the next turn is forced too, notice and all.
        ("user", budget(p.forced_notice, 785_000)),
    ]
    # The first of the two submissions is the one graded.
    assert record.outcome is Outcome.INCORRECT and record.submission is not None
    assert record.submission.code == WRONG and record.submission.turn == 6
    assert record.forced_submission_turn == 5 and server.call_count == 6 and not record.cap_reached
    assert [t.forced_submission for t in record.turns] == [False] * 4 + [True] * 2
    assert [m.get("kind") for m in record.transcript if m["role"] == "user"] == [
        "prompt",
        "nudge",
        "forced_submission",
        "forced_submission",
    ]


@module_loop
async def test_inspect_example_conversation_message_by_message(sandbox: Sandbox) -> None:
    record, server = await run_sample(SHARED_SCRIPT, sandbox, "inspect-example")
    p = INSPECT_EXAMPLE
    assert [r.json["tool_choice"] for r in server.requests] == ["auto"] * 4 + [FORCED] * 2
    status = p.status_message or ""
    assert seen(server.requests[-1].json) == [
        ("assistant", "Plan."),
        ("tool", ""),  # nothing printed: the result stays empty and a help message follows
        ("user", p.empty_output_help),
        ("user", budget(status, 101_000)),
        ("assistant", "Thinking aloud."),
        ("user", budget(status, 302_000)),  # no nudge: the usage report instead
        ("assistant", ""),
        ("tool", "err\nout"),  # stderr first
        ("user", budget(status, 553_000)),
        ("assistant", ""),
        ("tool", "1"),
        ("user", budget(p.forced_notice, 664_000)),  # the notice replaces the usage report
        ("assistant", ""),
        ("tool", "2"),
        ("user", budget(p.forced_notice, 785_000)),  # forcing goes on, turn after turn
    ]
    # The last of the two submissions is the one graded.
    assert record.outcome is Outcome.CORRECT and record.submission is not None
    assert record.submission.code == RIGHT and record.forced_submission_turn == 5
    submissions = [m for m in record.transcript if m.get("name") == "submit_answer"]
    assert [m["graded_submission"] for m in submissions] == [False, True]
    assert [m["content"] for m in submissions] == [p.other_submission_reply, p.submission_reply]
    assert [m.get("kind") for m in record.transcript if m["role"] == "user"] == [
        "prompt",
        "help",
        "status",
        "status",
        "status",
        "forced_submission",
        "forced_submission",
    ]


@module_loop
@pytest.mark.parametrize(
    ("protocol", "graded", "outcome"),
    [("methodology", RIGHT, Outcome.CORRECT), ("inspect-example", WRONG, Outcome.INCORRECT)],
)
async def test_which_of_several_submissions_counts(
    sandbox: Sandbox, protocol: str, graded: str, outcome: Outcome
) -> None:
    """Methodology: the first well-formed submission; inspect-example: the last one."""
    malformed = ToolCallSpec("submit_answer", '{"code": 1}')
    script: list[Step] = [Reply(tool_calls=[malformed, submit(RIGHT), submit(WRONG), malformed])]
    record, _ = await run_sample(script, sandbox, protocol)
    assert record.outcome is outcome and record.submission is not None
    assert record.submission.code == graded
    flags = [m.get("graded_submission") for m in record.transcript if m["role"] == "tool"]
    # Malformed calls are never candidates; exactly one well-formed call is graded.
    assert flags == [None, graded == RIGHT, graded == WRONG, None]


@module_loop
@pytest.mark.parametrize("protocol", ["methodology", "inspect-example"])
async def test_forcing_lasts_until_the_cap(sandbox: Sandbox, protocol: str) -> None:
    """A text-only model that never submits: 3,500 tokens a turn, forcing from 10,000, cap 20,000.

    Under every profile a forced turn without a submission is followed by another forced turn,
    with the notice before it, until the next prompt would not fit under the cap.
    """
    profile = get_profile(protocol)
    script: list[Step] = [Reply(content=f"turn {i}", usage=ReportedUsage(3_000, 500)) for i in range(8)]
    record, server = await run_sample(script, sandbox, protocol, token_cap=20_000, force_submit_at=10_000)
    choices = [r.json["tool_choice"] for r in server.requests]
    assert record.outcome is Outcome.NO_SUBMISSION and record.forced_submission_turn == 4
    assert choices == ["auto"] * 3 + [FORCED] * 2 and record.cap_reached
    assert record.total_tokens < 20_000
    last = server.requests[-1].json["messages"]
    notices = [m["content"] for m in last if m["role"] == "user"][1:]
    forced = [profile.forced_notice.format(used=u, force_at=10_000, cap=20_000) for u in (10_500, 14_000)]
    if profile.status_message is not None:
        # The usage report after each turn below the threshold; the notice takes its place above.
        status = [profile.status_message.format(used=u, force_at=10_000, cap=20_000) for u in (3_500, 7_000)]
        assert notices == [*status, *forced]
    else:
        # The reminder to use a tool after each text-only reply below the threshold; from it on,
        # only the forced notice (a reminder to keep working would contradict "submit now").
        nudge = profile.no_tool_call_nudge
        assert notices == [nudge, nudge, *forced]


@module_loop
@pytest.mark.parametrize("protocol", ["methodology", "inspect-example"])
async def test_tool_output_cap_through_the_loop(sandbox: Sandbox, protocol: str) -> None:
    flood = "print('é' * 20_000)"  # 40,000 UTF-8 bytes, 20,000 characters
    script: list[Step] = [Reply(tool_calls=[python_call(flood)]), Reply(tool_calls=[submit(RIGHT)])]
    record, server = await run_sample(script, sandbox, protocol, tool_output_chars=1_000)
    shown = next(m["content"] for m in server.requests[1].json["messages"] if m["role"] == "tool")
    assert record.tool_calls[0].truncated and "output truncated" in shown
    if protocol == "inspect-example":
        # 16 KiB of the head, whatever tool_output_chars says.
        assert shown.startswith("é" * 8_192) and "é" * 8_193 not in shown
    else:
        assert len(shown) < 1_200 and shown.startswith("é" * 600) and "é\n" in shown


def test_stream_order_and_byte_cap_in_the_formatter() -> None:
    both = ExecResult(1, "the result\n", "a warning\n")
    assert format_python_result(both, timeout_s=30, max_chars=100).text == "the result\na warning"
    stderr_first = format_python_result(both, timeout_s=30, max_chars=100, stderr_first=True)
    assert stderr_first.text == "a warning\nthe result"
    # A byte cap never splits a character, and says how much was shown.
    euro = ExecResult(0, "€" * 10, "")  # three bytes each
    cut = format_python_result(euro, timeout_s=30, max_chars=1_000, max_bytes=10)
    assert cut.truncated and cut.text.startswith("€€€\n") and "first 10 of 30 bytes" in cut.text
    exact = format_python_result(euro, timeout_s=30, max_chars=1_000, max_bytes=30)
    assert exact.text == "€" * 10 and not exact.truncated
    # Empty output: the profile chooses the reply; a time-out is never "empty".
    silent = ExecResult(0, "", "")
    assert format_python_result(silent, timeout_s=30, max_chars=100, empty_text="").text == ""
    slow = ExecResult(None, "", "", timed_out=True)
    assert "time limit" in format_python_result(slow, timeout_s=30, max_chars=100, empty_text="").text


def test_profiles_are_plain_data_with_every_template_filled() -> None:
    assert set(PROFILES) == {"methodology", "inspect-example"}
    for profile in PROFILES.values():
        described = profile.describe()
        assert json.loads(json.dumps(described)) == described
        for template in (profile.forced_notice, profile.status_message):
            if template is not None:
                text = template.format(used=1, force_at=2, cap=3)
                assert "{" not in text and "1" in text and "2" in text and "3" in text


def test_resuming_with_another_protocol_is_refused() -> None:
    old = {"config": {"protocol": "methodology"}}
    assert resume_conflicts(old, {"config": {"protocol": "inspect-example"}}) == [
        "protocol was 'methodology', now 'inspect-example'"
    ]
    # A run recorded before profiles existed ran the methodology's rules.
    assert resume_conflicts({"config": {}}, {"config": {"protocol": "methodology"}}) == []
    assert resume_conflicts({"config": {}}, {"config": {"protocol": "inspect-example"}})


def test_a_run_from_before_profiles_that_refused_by_default_is_not_resumed_under_grading() -> None:
    current = {"track": "frontiermath", "protocol": {}, "config": {"protocol": "methodology"}}
    old = {"track": "frontiermath", "config": {"track_options": {}}}
    assert any("refused by default" in c for c in resume_conflicts(old, current))
    # Said explicitly then, so nothing changed; and runs recorded with profiles are fine.
    grading = {"reject_invalid_submissions": False}
    explicit = {"track": "frontiermath", "config": {"track_options": grading}}
    assert (
        resume_conflicts(
            explicit, {**current, "config": {"protocol": "methodology", "track_options": grading}}
        )
        == []
    )
    assert resume_conflicts({**current, "config": {"protocol": "methodology"}}, current) == []


@module_loop
@pytest.mark.parametrize("protocol", ["methodology", "inspect-example"])
async def test_a_user_prompt_template_is_sent_as_written_under_either_profile(
    sandbox: Sandbox, protocol: str, tmp_path: Path
) -> None:
    template = tmp_path / "mine.txt"
    template.write_text(
        "Q: {question}\nType: {answer_type}. Limits {force_submit_at}/{token_cap}; "
        "answer() {answer_timeout} s, python {python_timeout} s. {unknown} stays.\n{libraries}\n"
    )
    record, server = await run_sample(
        [Reply(content="no tools")],
        sandbox,
        protocol,
        prompt_template=template,
        track_options={"max_turns": 1},
        answer_timeout_s=7,
    )
    sent = server.requests[0].json["messages"][0]["content"]
    assert sent.startswith(
        "Q: What is six times seven?\nType: Python int. Limits 660,000/1,000,000; answer() 7 s, python 10 s. "
        "{unknown} stays.\n     • "
    )
    assert record.outcome is Outcome.NO_SUBMISSION


def test_refusal_is_off_by_default_and_only_a_real_boolean_turns_it_on() -> None:
    assert FrontierMathTrack().reject_invalid is False
    assert FrontierMathTrack({"reject_invalid_submissions": True}).reject_invalid is True
    for value in ("false", "true", 1, None):
        with pytest.raises(UserError, match=r"^field 'track_options.reject_invalid_submissions': expected"):
            FrontierMathTrack({"reject_invalid_submissions": value})
