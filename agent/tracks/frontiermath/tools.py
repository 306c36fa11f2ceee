"""The two tools the model may call, their schemas, argument parsing and the python tool's replies."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from proctor.agent.model.base import ToolCall
from proctor.sandbox import ExecResult, InvalidProgram, check_program_text

PYTHON_TOOL = "python"
SUBMIT_TOOL = "submit_answer"
TOOL_NAMES = (PYTHON_TOOL, SUBMIT_TOOL)


def _function_schema(name: str, description: str, code_description: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"code": {"type": "string", "description": code_description}},
                "required": ["code"],
                "additionalProperties": False,
            },
        },
    }


def tool_schemas(python_timeout_s: float, answer_timeout_s: float) -> list[dict[str, Any]]:
    return [
        _function_schema(
            PYTHON_TOOL,
            "Run Python code in a fresh, stateless sandbox and return its stdout and stderr. Nothing is "
            "imported in advance and nothing persists between calls; use print() to see results. "
            f"Each call may run for at most {python_timeout_s:g} seconds.",
            "The complete Python program to run.",
        ),
        _function_schema(
            SUBMIT_TOOL,
            "Submit your final answer as the code of a Python function named 'answer' that takes no "
            "arguments, returns the answer, prints nothing and contains no comments. It may run for at "
            f"most {answer_timeout_s:g} seconds. Submitting ends the attempt.",
            "Python source code defining the function answer().",
        ),
    ]


def forced_tool_choice() -> dict[str, Any]:
    return {"type": "function", "function": {"name": SUBMIT_TOOL}}


@dataclass(frozen=True)
class ParsedCall:
    call: ToolCall
    code: str | None
    # Set when the call cannot be run; the text goes back to the model as the tool result.
    error: str | None


_EXAMPLE = '{"code": "print(1 + 1)"}'
# Longest arguments string a call may send (characters); a program this long is not one a
# model means to run, and parsing it would cost the whole run memory and time.
MAX_ARGUMENT_CHARS = 1_000_000


def parse_tool_call(call: ToolCall) -> ParsedCall:
    """Validate a call's name and JSON arguments; malformed calls become an explanatory error."""
    if call.problem is not None:
        return ParsedCall(call, None, call.problem)
    if call.name not in TOOL_NAMES:
        return ParsedCall(
            call,
            None,
            f"Error: unknown tool {call.name!r}. The available tools are: {', '.join(TOOL_NAMES)}.",
        )
    if len(call.arguments) > MAX_ARGUMENT_CHARS:
        return ParsedCall(
            call,
            None,
            f"Error: the arguments of this {call.name} call are {len(call.arguments):,} characters long; "
            f"the limit is {MAX_ARGUMENT_CHARS:,}. Send a shorter program.",
        )
    try:
        arguments = json.loads(call.arguments) if call.arguments.strip() else None
    except json.JSONDecodeError as exc:
        return ParsedCall(
            call,
            None,
            f"Error: the arguments of this {call.name} call are not valid JSON ({exc.msg}: line "
            f"{exc.lineno}, column {exc.colno}). Call the tool again with a JSON object such as {_EXAMPLE}.",
        )
    except (ValueError, RecursionError) as exc:
        # Valid JSON Python will not hold: nesting past the recursion limit, integers of
        # more than 4,300 digits.
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        return ParsedCall(
            call,
            None,
            f"Error: the arguments of this {call.name} call cannot be read ({reason}). Call the tool "
            f"again with a JSON object such as {_EXAMPLE}.",
        )
    if not isinstance(arguments, dict):
        return ParsedCall(
            call,
            None,
            f"Error: the arguments must be a JSON object with one field, 'code', such as {_EXAMPLE}.",
        )
    extra = sorted(set(arguments) - {"code"})
    if "code" not in arguments:
        return ParsedCall(call, None, f"Error: missing required argument 'code'. Example: {_EXAMPLE}.")
    if extra:
        return ParsedCall(
            call,
            None,
            f"Error: unexpected argument(s) {', '.join(map(repr, extra))}; the only argument is 'code'.",
        )
    if not isinstance(arguments["code"], str):
        return ParsedCall(call, None, "Error: the argument 'code' must be a string of Python source.")
    try:
        check_program_text(arguments["code"])
    except InvalidProgram as exc:
        # The code's fault, answered like any other bad argument: never run, never a crash.
        return ParsedCall(call, None, f"Error: {exc}. Call {call.name} again with valid code.")
    return ParsedCall(call, arguments["code"], None)


@dataclass(frozen=True)
class ToolReply:
    text: str
    # The model saw less than the program printed (cut here or by the sandbox).
    truncated: bool


NOTHING_PRINTED = (
    "(The code ran but printed nothing. The python tool returns only stdout and stderr, so use print() "
    "to see any value you want to inspect.)"
)


def format_python_result(
    result: ExecResult,
    *,
    timeout_s: float,
    max_chars: int,
    stderr_first: bool = False,
    max_bytes: int | None = None,
    empty_text: str = NOTHING_PRINTED,
) -> ToolReply:
    """What the model sees of one python call: output, notes on limits, capped at ``max_chars``.

    ``max_bytes``, when given, replaces the character cap: the head is kept up to that many
    UTF-8 bytes. ``empty_text`` is the reply when the call printed nothing and hit no limit.
    """
    streams = [result.stdout, result.stderr]
    if stderr_first:
        streams.reverse()
    parts = [stream.rstrip("\n") for stream in streams if stream]
    notes: list[str] = []
    if result.stdout_truncated:
        notes.append("[stdout was cut off by the sandbox's output limit]")
    if result.stderr_truncated:
        notes.append("[stderr was cut off by the sandbox's output limit]")
    if result.timed_out:
        notes.append(f"[The call was stopped: it exceeded the {timeout_s:g} s time limit.]")
    elif result.oom_killed:
        notes.append("[The program ran out of memory and was killed.]")
    elif result.exit_code not in (0, None) and not result.stderr.strip():
        notes.append(f"[The program exited with status {result.exit_code}.]")
    body = "\n".join(parts)
    truncated = result.stdout_truncated or result.stderr_truncated
    if max_bytes is not None:
        encoded = body.encode("utf-8", "surrogatepass")
        if len(encoded) > max_bytes:
            body = _cut_tail_bytes(encoded, max_bytes)
            truncated = True
    elif len(body) > max_chars:
        body = _cut_middle(body, max_chars)
        truncated = True
    if not body and not notes:
        return ToolReply(empty_text, False)
    return ToolReply("\n".join(part for part in (body, *notes) if part), truncated)


def _cut_middle(text: str, max_chars: int) -> str:
    """Keep the head and the tail (tracebacks end at the bottom) and say what was dropped."""
    head = max_chars * 2 // 3
    tail = max_chars - head
    omitted = len(text) - head - tail
    return (
        f"{text[:head]}\n[... output truncated: {omitted:,} of {len(text):,} characters omitted ...]\n"
        f"{text[len(text) - tail :] if tail else ''}"
    )


def _cut_tail_bytes(encoded: bytes, max_bytes: int) -> str:
    """Keep the first ``max_bytes`` bytes (never half a character) and say what was dropped."""
    head = encoded[:max_bytes].decode("utf-8", "ignore")
    return f"{head}\n[... output truncated: the first {max_bytes:,} of {len(encoded):,} bytes are shown ...]"
