"""Tool schemas, argument parsing, what the model sees of a python call, and the rendered prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proctor.agent.errors import UserError
from proctor.agent.model.base import ToolCall
from proctor.agent.tracks.frontiermath.prompt import DEFAULT_TEMPLATE, load_template, render_prompt
from proctor.agent.tracks.frontiermath.tools import (
    NOTHING_PRINTED,
    format_python_result,
    parse_tool_call,
    tool_schemas,
)
from proctor.sandbox import ExecResult
from tests.frontiermath.support import integer_task, run_config


def test_schemas_name_both_tools_with_one_code_argument() -> None:
    schemas = tool_schemas(30, 30)
    assert [s["function"]["name"] for s in schemas] == ["python", "submit_answer"]
    for schema in schemas:
        assert schema["function"]["parameters"]["required"] == ["code"]
    json.dumps(schemas)  # must be sendable as is


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("python", '{ "code": "python math.round(x)\n}\n\n', "not valid JSON"),
        ("python", "", "must be a JSON object"),
        ("python", "[1]", "must be a JSON object"),
        ("python", "{}", "missing required argument 'code'"),
        ("python", '{"code": "1", "timeout": 5}', "unexpected argument(s) 'timeout'"),
        ("python", '{"code": 5}', "must be a string"),
        ("bash", '{"code": "ls"}', "unknown tool 'bash'"),
    ],
)
def test_malformed_calls_become_error_messages(name: str, arguments: str, message: str) -> None:
    parsed = parse_tool_call(ToolCall("id1", name, arguments))
    assert parsed.code is None and parsed.error is not None and message in parsed.error


def test_well_formed_call_is_parsed() -> None:
    parsed = parse_tool_call(
        ToolCall("id1", "submit_answer", json.dumps({"code": "def answer():\n    return 1"}))
    )
    assert parsed.error is None and parsed.code == "def answer():\n    return 1"


def test_nothing_printed_reminds_the_model_to_print() -> None:
    reply = format_python_result(ExecResult(0, "", ""), timeout_s=30, max_chars=100)
    assert reply.text == NOTHING_PRINTED and "print()" in reply.text


def test_output_cap_keeps_head_and_tail_and_says_so() -> None:
    stdout = "".join(f"line {i}\n" for i in range(1000))
    reply = format_python_result(ExecResult(0, stdout, "Traceback: boom"), timeout_s=30, max_chars=300)
    assert reply.truncated
    assert reply.text.startswith("line 0\n") and reply.text.endswith("Traceback: boom")
    assert "output truncated" in reply.text and "characters omitted" in reply.text
    assert len(reply.text) < 400


def test_sandbox_side_truncation_and_timeouts_are_stated() -> None:
    cut = format_python_result(
        ExecResult(0, "x" * 10, "", stdout_truncated=True), timeout_s=30, max_chars=1000
    )
    assert cut.truncated and "cut off by the sandbox" in cut.text
    slow = format_python_result(ExecResult(None, "partial", "", timed_out=True), timeout_s=7, max_chars=1000)
    assert "partial" in slow.text and "7 s time limit" in slow.text
    oom = format_python_result(ExecResult(137, "", "", oom_killed=True), timeout_s=7, max_chars=1000)
    assert "out of memory" in oom.text


def test_prompt_follows_the_published_protocol_with_configured_numbers() -> None:
    task = integer_task()
    task = task.model_copy(update={"question": r"Compute $\sum_{k=1}^{n} k$ for {n} = 3."})
    config = run_config(token_cap=8_000, force_submit_at=5_000, timeout_s=12, answer_timeout_s=9)
    pins = {"galois": "0.4.4", "pyadic": "0.2.3", "sympy": "1.13.3"}
    prompt = render_prompt(load_template(None), task, config, pins)
    assert "absolute limit of 8,000 tokens" in prompt
    assert "Once you reach 5,000 tokens" in prompt
    assert "Both input tokens and output tokens count" in prompt
    assert "it returns the answer as Python int" in prompt
    assert "it contains no code comments" in prompt and "it prints nothing" in prompt
    assert "may run for at most 9 seconds" in prompt and "may run for at most 12 seconds" in prompt
    assert "galois==0.4.4" in prompt and "pyadic==0.2.3" in prompt and "sympy==1.13.3" in prompt
    assert "Explain your reasoning" in prompt and "submit_answer" in prompt
    assert "1 point" in prompt
    # The question's braces survive untouched, and nothing is left unfilled.
    assert prompt.rstrip().endswith(r"Compute $\sum_{k=1}^{n} k$ for {n} = 3.")
    assert "{answer_type}" not in prompt and "{token_cap}" not in prompt


def test_prompt_lists_exactly_the_libraries_the_sandbox_offers() -> None:
    template = load_template(None)
    offered = {"sympy": "1.13.3", "numpy": "2.1.3", "networkx": "3.6.1"}
    prompt = render_prompt(template, integer_task(), run_config(), offered)
    listed = [line.strip().removeprefix("• ") for line in prompt.splitlines() if "==" in line]
    assert listed == ["networkx==3.6.1", "numpy==2.1.3", "sympy==1.13.3"]
    assert "galois" not in prompt  # not offered: never promised
    bare = render_prompt(template, integer_task(), run_config(), {})
    assert "==" not in bare and "only the standard library" in bare
    unknown = render_prompt(template, integer_task(), run_config(), None)
    assert "galois" not in unknown and "not listed here" in unknown
    assert "{libraries}" not in prompt + bare + unknown


def test_template_can_be_overridden(tmp_path: Path) -> None:
    template = tmp_path / "mine.txt"
    template.write_text("Type: {answer_type}. Cap {token_cap}.\n{question}")
    prompt = render_prompt(load_template(template), integer_task(), run_config(token_cap=123), {})
    assert prompt == "Type: Python int. Cap 123.\nWhat is six times seven?"
    (tmp_path / "broken.txt").write_text("no placeholders")
    with pytest.raises(UserError, match=r"lacks the \{answer_type\} placeholder"):
        load_template(tmp_path / "broken.txt")
    with pytest.raises(UserError, match="cannot read prompt template"):
        load_template(tmp_path / "absent.txt")
    assert DEFAULT_TEMPLATE.is_file()


def test_output_ceiling_is_read_from_openai_style_refusals() -> None:
    from proctor.agent.tracks.frontiermath.provider_limits import output_ceiling_from_error

    message = (
        "https://api.example/v1 rejected the request (HTTP 400): max_tokens is too large: 200000. "
        "This model supports at most 16384 completion tokens, whereas you provided 200000."
    )
    assert output_ceiling_from_error(message) == 16384
    assert output_ceiling_from_error("rejected the request (HTTP 400): bad tools") is None
