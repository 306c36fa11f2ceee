"""Text from a model, a task file or an endpoint never drives the terminal (agent/text/terminal.py).

Invariant: on every terminal surface, no character that a terminal obeys rather than shows is
printed as itself: the C0 controls but tab and newline, DEL, the C1 controls, and the Unicode
bidi controls (embeddings, overrides, isolates, marks). Honest text (any other character:
accents, CJK, mathematics, emoji, tab, newline) is shown unchanged.

Oracle: Unicode's own tables through :mod:`unicodedata` (general category ``Cc``, and the bidi
controls by their names), independent of the module's regex.
"""

from __future__ import annotations

import io
import unicodedata
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from proctor.agent.cli.list_cmd import _cell
from proctor.agent.results.records import Outcome, SampleRecord
from proctor.agent.results.summary import summarize
from proctor.agent.run.dry_run import render_plan
from proctor.agent.run.progress import RunProgress, print_final
from proctor.agent.text.terminal import escape_for_terminal, one_line

REPO = Path(__file__).resolve().parents[1]

BIDI_CONTROLS = frozenset(
    unicodedata.lookup(name)
    for name in (
        "ARABIC LETTER MARK",
        "LEFT-TO-RIGHT MARK",
        "RIGHT-TO-LEFT MARK",
        "LEFT-TO-RIGHT EMBEDDING",
        "RIGHT-TO-LEFT EMBEDDING",
        "POP DIRECTIONAL FORMATTING",
        "LEFT-TO-RIGHT OVERRIDE",
        "RIGHT-TO-LEFT OVERRIDE",
        "LEFT-TO-RIGHT ISOLATE",
        "RIGHT-TO-LEFT ISOLATE",
        "FIRST STRONG ISOLATE",
        "POP DIRECTIONAL ISOLATE",
    )
)


def drives_terminal(char: str) -> bool:
    return (unicodedata.category(char) == "Cc" and char not in "\t\n") or char in BIDI_CONTROLS


def shown_as(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


UNSAFE = sorted(char for char in map(chr, range(0x3000)) if drives_terminal(char))
# One of each family, as an attack would spell it: CSI clear, OSC retitle, bell, backspace,
# carriage return, the C1 CSI, and the override that reverses "txt.exe".
HOSTILE = "t\x1b[2J\x1b]0;owned\x07\x08\r\x9b31m\u202etxt.exe\u2066\u200f"
HONEST = "café 中文 ∑ x² ≤ 𝔽 😀 Ωmega\ttab"


def assert_shown_not_obeyed(output: str) -> None:
    assert [char for char in output if drives_terminal(char)] == []
    assert "\\u202e" in output and "\\x1b" in output and "\\x9b" in output


def test_the_oracle_covers_every_family() -> None:
    assert {"\x00", "\x1b", "\r", "\x7f", "\x85", "\x9b", "\u061c", "\u202e", "\u2066"} <= set(UNSAFE)
    assert not {"\t", "\n", " ", "é", "\u2028"} & set(UNSAFE)


def test_every_basic_plane_character_is_escaped_exactly_when_it_drives_a_terminal() -> None:
    for code in range(0x10000):
        char = chr(code)
        shown = escape_for_terminal(char)
        if drives_terminal(char):
            assert shown == shown_as(char), hex(code)
        else:
            assert shown == char, hex(code)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(UNSAFE), st.characters(codec="utf-8")), max_size=40))
def test_mixed_text_keeps_every_honest_character_and_shows_every_control(chars: list[str]) -> None:
    text = "".join(chars)
    expected = "".join(
        (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")
        if drives_terminal(char)
        else char
        for char in text
    )
    assert escape_for_terminal(text) == expected
    assert "\n" not in one_line(text)


def test_honest_text_is_shown_unchanged_on_every_surface() -> None:
    assert escape_for_terminal(HONEST + "\nline two") == HONEST + "\nline two"
    assert one_line(HONEST) == HONEST
    assert HONEST.replace("\t", "\\t") == _cell(HONEST)


def _record(task_id: str, model: str, error: str, subject: str) -> SampleRecord:
    return SampleRecord(
        run_id="r",
        track="olympiad",
        task_id=task_id,
        trial=0,
        model=model,
        subject=subject,
        outcome=Outcome.MODEL_ERROR,
        error=error,
        started_at="2026-12-01T00:00:00+00:00",
        finished_at="2026-12-01T00:00:01+00:00",
        duration_s=1.0,
    )


def test_progress_lines_the_live_view_and_the_summary_show_bidi_and_c1_controls_as_escapes() -> None:
    out = io.StringIO()
    console = Console(file=out, width=400, force_terminal=True, color_system=None)
    progress = RunProgress(console, live=False)
    progress.begin(total=2, already_done=[], run_dir="run")
    progress.for_sample(f"openai/m{HOSTILE}", f"task{HOSTILE}", 1)
    console.print(progress)  # the live view's frame, with the running sample's row
    records = [
        _record(f"task{HOSTILE}", f"openai/m{HOSTILE}", f"endpoint said {HOSTILE}", f"sub{HOSTILE}"),
        _record("t2", "openai/plain", HONEST, HONEST),
    ]
    for record in records:
        progress.sample_started()
        progress.sample_finished(record)
    print_final(console, summarize(records, header={"sessions": []}, prices={}, planned_samples=2), "run")
    assert_shown_not_obeyed(out.getvalue())


def test_the_dry_run_list_and_proctors_own_lines_show_controls_as_escapes() -> None:
    assert_shown_not_obeyed(render_plan([("tasks", f"file {HOSTILE}"), ("models", HOSTILE)]))
    assert_shown_not_obeyed(_cell(HOSTILE))
    assert_shown_not_obeyed(one_line(f"proctor: error: {HOSTILE}\nfinished, all correct"))


def test_one_terminal_escape_in_agent() -> None:
    """No module keeps its own, weaker, copy of the control-character class."""
    copies = [
        path.relative_to(REPO).as_posix()
        for path in sorted((REPO / "agent").rglob("*.py"))
        if "\\x7f-\\x9f" in path.read_text(encoding="utf-8")
    ]
    assert copies == ["agent/text/terminal.py"]
