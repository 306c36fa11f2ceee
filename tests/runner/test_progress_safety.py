"""What the terminal shows of hostile text: control characters are displayed, never obeyed,
and names are never read as rich markup (a subject "[/]" must not crash the summary)."""

from __future__ import annotations

import io

from rich.console import Console

from proctor.agent.results.records import Outcome, SampleRecord
from proctor.agent.results.summary import summarize
from proctor.agent.run.progress import RunProgress, print_final
from proctor.agent.text.terminal import escape_for_terminal as visible


def record(task_id: str, subject: str, error: str) -> SampleRecord:
    return SampleRecord(
        run_id="r",
        track="olympiad",
        task_id=task_id,
        trial=0,
        model="openai/m\x1b]0;pwned\x07",
        subject=subject,
        outcome=Outcome.MODEL_ERROR,
        error=error,
        started_at="2026-12-01T00:00:00+00:00",
        finished_at="2026-12-01T00:00:01+00:00",
        duration_s=1.0,
    )


def test_escape_sequences_and_markup_in_records_are_shown_not_obeyed() -> None:
    out = io.StringIO()
    console = Console(file=out, width=300)
    progress = RunProgress(console, live=False)
    progress.begin(total=2, already_done=[], run_dir="run")
    records = [
        record("t\x1b[2J", "[/]", "endpoint said \x1b[31mred\x1b[0m\x00"),
        record("t2", "[bold]x[/bold] \x1b[5m", "plain"),
    ]
    for item in records:
        progress.sample_started()
        progress.sample_finished(item)
    print_final(console, summarize(records, header={"sessions": []}, prices={}, planned_samples=2), "run")
    text = out.getvalue()
    assert "\x1b" not in text and "\x00" not in text
    assert "\\x1b[31mred" in text and "t\\x1b[2J#0" in text
    assert "[/]" in text and "[bold]x[/bold]" in text


def test_visible_keeps_tabs_newlines_and_printable_unicode() -> None:
    assert visible("a\tb\nc é 😀") == "a\tb\nc é 😀"
    assert visible("\x7f\x9b") == "\\x7f\\x9b"
