"""The optional python tool for the Olympiad track (``track_options: {python_tool: true}``).

The tool itself (schema, argument parsing, what the model sees of a run) is the FrontierMath
track's, reused as is so both tracks describe and report it identically. There is no
``submit_answer`` here: the final response without tool calls is the answer. The loop is
bounded by ``max_tool_turns`` (the last turn is sent with ``tool_choice="none"``) and by the
run's token cap.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from proctor.agent.model.base import ModelError, ToolCall
from proctor.agent.results.records import ToolCallRecord
from proctor.agent.tracks.frontiermath.sandbox_calls import run_in_sandbox
from proctor.agent.tracks.frontiermath.tools import (
    PYTHON_TOOL,
    format_python_result,
    parse_tool_call,
    tool_schemas,
)
from proctor.agent.tracks.science_common import ModelFailed, SampleLog
from proctor.sandbox import SandboxError


def python_tool_schema(timeout_s: float) -> dict[str, Any]:
    (schema,) = [s for s in tool_schemas(timeout_s, timeout_s) if s["function"]["name"] == PYTHON_TOOL]
    return schema


async def answer_with_python_tool(log: SampleLog, prompt: str, max_turns: int) -> str:
    """Converse until the model answers without calling a tool; return that final text."""
    config = log.ctx.config
    tools = [python_tool_schema(config.sandbox.timeout_s)]
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    log.transcript.extend(messages)
    content = ""
    for turn in range(1, max_turns + 1):
        last_turn = turn == max_turns or log.total_tokens >= config.budget.token_cap
        log.ctx.events.model_call_started(len(log.turns) + 1)
        try:
            response = await log.ctx.model.complete(
                messages,
                tools=tools,
                tool_choice="none" if last_turn else None,
                max_output_tokens=config.budget.max_output_tokens,
            )
        except ModelError as exc:
            raise ModelFailed(str(exc) or type(exc).__name__) from exc
        log.add_response(response)
        messages.append(response.as_message())
        content = response.content or ""
        if not response.tool_calls or last_turn:
            return content
        records = await asyncio.gather(*(_run_call(log, call_turn=turn, call=c) for c in response.tool_calls))
        for record in records:
            log.tool_calls.append(record)
            message = {"role": "tool", "tool_call_id": record.call_id, "content": record.result}
            messages.append(message)
            log.transcript.append({**message, "name": record.name, "duration_s": record.duration_s})
    return content


async def _run_call(log: SampleLog, *, call_turn: int, call: ToolCall) -> ToolCallRecord:
    record = ToolCallRecord(
        turn=call_turn,
        call_id=call.id,
        name=call.name,
        raw_arguments=call.arguments,
        deviations=call.deviations,
    )
    started = time.monotonic()
    parsed = parse_tool_call(call)
    sandbox = log.ctx.sandbox
    if call.problem is not None:
        record.error = record.result = call.problem
    elif call.name != PYTHON_TOOL:
        record.error = record.result = f"Error: unknown tool {call.name!r}. The only tool is {PYTHON_TOOL!r}."
    elif parsed.error is not None:
        record.error = record.result = parsed.error
    elif sandbox is None:
        record.error = record.result = "Error: no sandbox is available in this run."
    else:
        timeout = log.ctx.config.sandbox.timeout_s
        try:
            result = await run_in_sandbox(sandbox, log.ctx.events, parsed.code or "", timeout=timeout)
        except SandboxError as exc:
            record.error = f"sandbox failure: {exc}"
            record.result = f"Error: the sandbox failed to run this call ({exc}). Please try again."
        else:
            reply = format_python_result(
                result, timeout_s=timeout, max_chars=log.ctx.config.sandbox.tool_output_chars
            )
            record.result, record.truncated = reply.text, reply.truncated
            details = result.to_dict()
            details["stdout_chars"] = len(details.pop("stdout"))
            details["stderr_chars"] = len(details.pop("stderr"))
            record.sandbox = details
            log.sandbox_image = log.sandbox_image or result.image
    record.duration_s = time.monotonic() - started
    return record
