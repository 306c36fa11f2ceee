"""User-supplied protocol texts (issue 23, item 6).

Invariants: a supplied template file replaces exactly the profile text it names, is sent with
its placeholders filled and nothing else in it interpreted, and is recorded in run.json by
sha256; a template with an unknown, missing or malformed placeholder is one line naming the
file and the placeholder, before any sample runs. Proctor never uses ``str.format`` on them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.agent.errors import UserError
from proctor.agent.results.records import Outcome
from proctor.agent.run.config_loader import RunFlags, load_run_config
from proctor.agent.tracks.frontiermath.profiles import INSPECT_EXAMPLE, PROFILES
from proctor.agent.tracks.frontiermath.texts import budget_values, load_text, render
from proctor.agent.tracks.frontiermath.track import FrontierMathTrack
from proctor.sandbox import Sandbox
from tests.frontiermath.support import context, integer_task, run_config, scripted_client
from tests.support.scripted_server import Reply, ReportedUsage, ScriptedServer, ToolCallSpec

RIGHT = "def answer():\n    return 6 * 7\n"
module_loop = pytest.mark.asyncio(loop_scope="module")


def write_texts(directory: Path) -> dict[str, Path]:
    texts = {
        "usage_message": "Used {used} of {cap:,} tokens; {remaining} left; forced at {force_at}. {{kept}}\n",
        "forced_notice": "SUBMIT NOW ({used:,} >= {force_at:,})",
        "empty_output_help": "You printed nothing.\n",
        "submission_reply": "Got it.",
    }
    paths = {}
    for key, text in texts.items():
        paths[key] = directory / f"{key}.txt"
        paths[key].write_text(text, encoding="utf-8")
    return paths


@pytest.mark.slow
@module_loop
async def test_supplied_texts_are_what_the_model_sees_and_are_recorded(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    paths = write_texts(tmp_path)
    options = {"protocol_texts": {key: str(path) for key, path in paths.items()}}
    run = run_config(protocol="inspect-example", track_options=options)
    track = FrontierMathTrack(run.track_options)

    def python(code: str, used_in: int) -> Reply:
        return Reply(
            tool_calls=[ToolCallSpec("python", json.dumps({"code": code}))],
            usage=ReportedUsage(used_in, 1_000),
        )

    # Reported usage adds up to 101,000 / 402,000 / 663,000 (past the 660,000 threshold).
    script = [
        python("x = 1", 100_000),
        python("print(1)", 300_000),
        python("print(2)", 260_000),
        Reply(
            tool_calls=[ToolCallSpec("submit_answer", json.dumps({"code": RIGHT}))],
            usage=ReportedUsage(10, 10),
        ),
    ]
    with ScriptedServer(script) as server:
        client = scripted_client(server.base_url)
        try:
            record = await track.run_sample(integer_task(), 0, context(client, sandbox, run))
        finally:
            await client.aclose()
    assert len(server.requests) == 4, (record.outcome, record.error)
    last = server.requests[-1].json["messages"][1:]
    assert [(m["role"], m.get("content") or "") for m in last] == [
        ("assistant", ""),
        ("tool", ""),
        ("user", "You printed nothing."),  # the file's final newline is not sent
        ("user", "Used 101000 of 1,000,000 tokens; 899000 left; forced at 660000. {kept}"),
        ("assistant", ""),
        ("tool", "1"),
        ("user", "Used 402000 of 1,000,000 tokens; 598000 left; forced at 660000. {kept}"),
        ("assistant", ""),
        ("tool", "2"),
        ("user", "SUBMIT NOW (663,000 >= 660,000)"),
    ]
    assert record.outcome is Outcome.CORRECT
    assert [m["content"] for m in record.transcript if m.get("name") == "submit_answer"] == ["Got it."]
    # None of Proctor's own wording of these four texts reached the model.
    sent = json.dumps([r.json for r in server.requests])
    for own in (INSPECT_EXAMPLE.empty_output_help, INSPECT_EXAMPLE.submission_reply):
        assert own is not None and own not in sent
    recorded = track.effective_settings(run)["protocol_texts"]
    assert recorded == {
        key: {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        for key, path in paths.items()
    }


def test_paths_in_a_config_file_are_the_config_files(tmp_path: Path) -> None:
    (tmp_path / "texts").mkdir()
    write_texts(tmp_path / "texts")
    (tmp_path / "t.jsonl").write_text("")
    config = tmp_path / "run.yaml"
    config.write_text(
        "track: frontiermath\ntasks: t.jsonl\nmodels: [openai/m]\nprotocol: inspect-example\n"
        "track_options:\n  protocol_texts:\n    forced_notice: texts/forced_notice.txt\n"
    )
    made = load_run_config(config, RunFlags())
    assert made.track_options["protocol_texts"] == {
        "forced_notice": str(tmp_path / "texts" / "forced_notice.txt")
    }
    assert FrontierMathTrack(made.track_options).texts[0].text == "SUBMIT NOW ({used:,} >= {force_at:,})"


@pytest.mark.parametrize(
    ("key", "text", "problem"),
    [
        ("usage_message", "Used {tokens} so far", "unknown placeholder {tokens}"),
        ("usage_message", "Keep going.", "missing placeholder {used}"),
        ("forced_notice", "Submit now at {cap}.", "missing placeholder {used}"),
        ("submission_reply", "Recorded at {used}.", "unknown placeholder {used} (offered: none)"),
        # Attribute and index access, positional fields, conversions, other format specs:
        # refused as text, never evaluated.
        ("usage_message", "{used.__class__.__mro__} {used}", "unmatched '{' on line 1"),
        ("usage_message", "{used[0]} {used}", "unmatched '{'"),
        ("usage_message", "{0} {used}", "unmatched '{'"),
        ("usage_message", "{used!r}", "unmatched '{'"),
        ("usage_message", "{used:>{cap}}", "unmatched '{'"),
        ("usage_message", "{used}\nclosing } alone", "unmatched '}' on line 2"),
        ("empty_output_help", "", "is empty"),
    ],
)
def test_a_bad_template_is_one_line_naming_file_and_placeholder(
    tmp_path: Path, key: str, text: str, problem: str
) -> None:
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as caught:
        FrontierMathTrack({"protocol_texts": {key: str(path)}})
    message = str(caught.value)
    assert message.startswith(f"{path}:") and problem in message and "\n" not in message


def test_unknown_text_names_missing_files_and_non_utf8_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown text; the texts are: usage_message"):
        FrontierMathTrack({"protocol_texts": {"greeting": "x.txt"}})
    with pytest.raises(UserError, match="cannot read the forced_notice template"):
        load_text("forced_notice", tmp_path / "missing.txt")
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"\xff{used}")
    with pytest.raises(UserError, match="not UTF-8"):
        load_text("usage_message", binary)
    with pytest.raises(UserError, match="expected a mapping"):
        FrontierMathTrack({"protocol_texts": ["usage.txt"]})


@given(st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=200))
def test_text_without_braces_is_sent_unchanged(text: str) -> None:
    assert render(text, budget_values(1, 2, 3)) == text


@given(
    used=st.integers(0, 10**9),
    force_at=st.integers(1, 10**9),
    cap=st.integers(1, 10**9),
    prefix=st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=20),
)
def test_placeholders_are_filled_in_one_pass(used: int, force_at: int, cap: int, prefix: str) -> None:
    values = budget_values(used, force_at, cap)
    # A value that looks like a placeholder after substitution is not substituted again.
    assert render(prefix + "{used}{{cap}}{cap:,}", values) == f"{prefix}{used}{{cap}}{cap:,}"
    assert values["remaining"] == max(0, cap - used)


def test_the_profiles_own_texts_render_with_the_same_substitution() -> None:
    for profile in PROFILES.values():
        for template in (profile.forced_notice, profile.status_message):
            if template is not None:
                text = render(template, budget_values(1_234, 660_000, 1_000_000))
                assert "{" not in text and "1,234" in text and "660,000" in text
