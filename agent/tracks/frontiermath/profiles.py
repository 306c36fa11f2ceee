"""Protocol profiles: the conversation rules a FrontierMath run follows, as one small data object.

The methodology lists the rules a model is told (the prompt) but not every detail of the
harness around it; the closest public implementation (Inspect AI's FrontierMath example) fills
those details in its own way. A profile names one consistent set of choices so that a run can
reproduce either, and run.json records which one ran (``protocol`` in the header, with its
rules). The loop reads these fields; it has no per-profile branches of its own.

The message texts are Proctor's own wording of the information each rule carries.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

DEFAULT_PROTOCOL = "methodology"
# Inspect AI's python tool caps tool output at 16 KiB.
INSPECT_TOOL_OUTPUT_BYTES = 16 * 1024


@dataclass(frozen=True)
class ProtocolProfile:
    name: str
    # Where the rules come from, for run.json and the docs.
    source: str
    # Which well-formed submit_answer call of one assistant message is graded.
    submission_pick: Literal["first", "last"]
    # The tool result of the graded submission (the verdict is never revealed).
    submission_reply: str
    # The tool result of the other well-formed submit_answer calls of that message.
    other_submission_reply: str
    # The user message after a reply without a tool call; None: no such message.
    no_tool_call_nudge: str | None
    # A user message after every turn that ends without a graded submission (below the
    # forcing threshold), formatted with used, force_at and cap; None: no such message.
    status_message: str | None
    # The user message before a forced turn, formatted with used, force_at and cap.
    forced_notice: str
    # (No forcing rule here: under every profile each turn from the threshold until a valid
    # submission or the cap is forced, the notice before it; see loop.py.)
    # A python call that printed nothing: None gives the reminder as the tool result itself;
    # a text leaves the tool result empty and appends this user message after the turn's
    # tool results (only when that call's result is the turn's last one, as the source does).
    empty_output_help: str | None
    # Tool output order: stderr before stdout.
    stderr_first: bool
    # None: cap tool output at ``sandbox.tool_output_chars`` characters keeping head and tail;
    # a number: cap it at that many UTF-8 bytes keeping the head.
    tool_output_bytes: int | None

    def describe(self) -> dict[str, Any]:
        """The rules as plain data, for run.json."""
        return asdict(self)


METHODOLOGY = ProtocolProfile(
    name="methodology",
    source="FrontierMath Tier 4 methodology (the seed): prompt sections 2, 6 and 7",
    submission_pick="first",
    submission_reply="Your answer has been submitted for grading.",
    other_submission_reply=(
        "Ignored: this message already submitted an answer; only the first submission counts."
    ),
    no_tool_call_nudge=(
        "Your message did not call a tool. Continue working on the problem with the python tool, or, "
        "once you are confident in your answer, submit it with the submit_answer tool. Only an answer "
        "submitted with submit_answer is graded."
    ),
    status_message=None,
    forced_notice=(
        "You have now used {used:,} tokens, which reaches the {force_at:,}-token threshold "
        "(the absolute limit is {cap:,}). As the instructions say, you must submit your answer now: "
        "call the submit_answer tool in your next message."
    ),
    empty_output_help=None,
    stderr_first=False,
    tool_output_bytes=None,
)

INSPECT_EXAMPLE = ProtocolProfile(
    name="inspect-example",
    source="Inspect AI's examples/frontiermath (UKGovernmentBEIS/inspect_ai): conversation behaviour",
    submission_pick="last",
    submission_reply="Submission recorded. You will get no feedback on it.",
    other_submission_reply="Submission recorded. You will get no feedback on it.",
    no_tool_call_nudge=None,
    status_message=(
        "Tokens used so far: {used:,}. Submission is forced from {force_at:,} tokens; the hard limit "
        "is {cap:,} tokens. Keep working on the problem, or call submit_answer once you are "
        "confident in your answer."
    ),
    forced_notice=(
        "Tokens used so far: {used:,}, at or past the forced-submission threshold of {force_at:,} "
        "tokens (hard limit: {cap:,} tokens). Submit your answer now with the submit_answer tool."
    ),
    empty_output_help=(
        "Your python call produced no output. The tool returns only what the program writes to "
        "stdout and stderr, so print every value you want to see. For example, a program that only "
        "computes x = 5 * 12 shows nothing; add print(x) to see 60."
    ),
    stderr_first=True,
    tool_output_bytes=INSPECT_TOOL_OUTPUT_BYTES,
)

PROFILES: dict[str, ProtocolProfile] = {p.name: p for p in (METHODOLOGY, INSPECT_EXAMPLE)}


def get_profile(name: str) -> ProtocolProfile:
    """The named profile; KeyError for an unknown name (the config loader checks names first)."""
    return PROFILES[name]


def unknown_protocol_message(name: str) -> str:
    return f"unknown protocol {name!r}; choose one of: {', '.join(PROFILES)}"
