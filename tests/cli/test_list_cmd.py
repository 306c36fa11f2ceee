"""`proctor list tracks|tasks FILE|subjects FILE`: discovery before a run, plain lines, hostile
task files shown and never obeyed."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from proctor.agent.cli.app import app
from proctor.agent.tracks.registry import track_names
from tests.support.cli import proctor_in_process

REPO = Path(__file__).resolve().parents[2]
PHYBENCH = REPO / "configs" / "tasks" / "phybench-samples.jsonl"


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["list", *args])
    return result.exit_code, result.output


def test_tracks_lists_every_registered_track_and_how_it_is_graded() -> None:
    code, out = _run("tracks")
    assert code == 0
    lines = out.splitlines()
    assert [line.split("\t")[0] for line in lines] == track_names()
    assert "olympiad\tgraded by a judge model\tno sandbox" in lines
    assert "frontiermath\tgraded by a deterministic check\tsandbox" in lines
    # Each line reads as English ("graded by deterministic" did not).
    assert all(line.split("\t")[1].startswith("graded by a ") for line in lines)


def test_list_alone_lists_what_can_be_listed_and_exits_0() -> None:
    # Before: the help page and exit 2, as for a usage error.
    completed = proctor_in_process("list")
    assert completed.returncode == 0, completed
    lines = completed.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == [
        "proctor list tracks",
        "proctor list tasks FILE",
        "proctor list subjects FILE",
    ]
    assert all(line.split("\t")[1] for line in lines) and completed.stderr == ""


def test_tasks_and_subjects_read_the_file_with_the_tracks_loader() -> None:
    rows = [json.loads(line) for line in PHYBENCH.read_text().splitlines() if line.strip()]
    code, out = _run("tasks", str(PHYBENCH), "--track", "phybench")
    assert code == 0
    assert [line.split("\t")[0] for line in out.splitlines()] == [str(row["id"]) for row in rows]
    code, out = _run("subjects", str(PHYBENCH), "--track", "phybench")
    assert code == 0
    counts = {line.split("\t")[1]: int(line.split("\t")[0]) for line in out.splitlines()}
    assert sum(counts.values()) == len(rows) and counts["mechanics"] == 5
    assert [int(line.split("\t")[0]) for line in out.splitlines()] == sorted(counts.values(), reverse=True)


def test_a_hostile_task_file_is_shown_not_obeyed(tmp_path: Path) -> None:
    tasks = tmp_path / "t.jsonl"
    hostile = "x\x1b]0;pwned\x07\x1b[2J\u202e\tforged column\nforged line"
    tasks.write_text(json.dumps({"id": hostile, "subject": hostile, "question": "q", "answer": "1"}) + "\n")
    for command in ("tasks", "subjects"):
        code, out = _run(command, str(tasks), "--track", "phybench")
        assert code == 0, out
        assert "\x1b" not in out and "\u202e" not in out and "x\\x1b]0;pwned" in out
        [line] = out.splitlines()
        assert line.count("\t") == 1 and "\\tforged column\\nforged line" in line
