"""A run directory anyone may have edited: every record and the header are validated first.

Each attack edits one thing in a real finished run; the re-score must stop before grading
anything with one line naming the file, the line and the field (exit 2 from the CLI), create
no output directory, and leave the original as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from proctor.agent.errors import UserError
from tests.rescore.conftest import StoredResearchRun, fixed_points_judge, read_lines, rescore
from tests.support.cli import proctor_in_process
from tests.support.scripted_server import ScriptedServer

REPO = Path(__file__).resolve().parents[2]
Lines = list[dict[str, Any]]


def edit_line(index: int, change: Callable[[dict[str, Any]], None]) -> Callable[[Lines], Lines]:
    def edit(lines: Lines) -> Lines:
        change(lines[index])
        return lines

    return edit


def _set(**values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda record: record.update(values)


def _duplicate(lines: Lines) -> Lines:
    return [*lines, dict(lines[0])]


def _transcript_content(record: dict[str, Any]) -> None:
    record["transcript"][-1]["content"] = {"text": "not a string"}


def _unanswered(**claims: Any) -> Callable[[dict[str, Any]], None]:
    """The record as a failed model call leaves it (no reply to grade), plus forged results."""

    def edit(record: dict[str, Any]) -> None:
        record.update(outcome="model_error", score=0.0, success=False, judge=None, eed=None)
        record["transcript"] = record["transcript"][:1]
        record.update(claims)

    return edit


_POINTS = {"decided_by": "judge", "verdict": "10", "points": 10.0}


# (edit of the parsed lines, expected "line N: field 'F'")
RECORD_ATTACKS = {
    "unknown outcome": (edit_line(1, _set(outcome="bogus")), "line 2: field 'outcome'"),
    "other track": (edit_line(2, _set(track="frontiermath")), "line 3: field 'track'"),
    "other run": (edit_line(0, _set(run_id="someone-else")), "line 1: field 'run_id'"),
    "unknown model": (edit_line(3, _set(model="openai/ghost")), "line 4: field 'model'"),
    "negative trial": (edit_line(0, _set(trial=-1)), "line 1: field 'trial'"),
    "trial not a number": (edit_line(0, _set(trial="zero")), "line 1: field 'trial'"),
    "repeated sample": (_duplicate, "line 7: field 'trial'"),
    "reply not text": (edit_line(4, _transcript_content), "line 5: field 'transcript.1.content'"),
    "task not in the tasks file": (edit_line(5, _set(task_id="r99")), "line 6: field 'task_id'"),
    "score not a number": (edit_line(0, _set(score="lots")), "line 1: field 'score'"),
    # Records with nothing to grade are carried over: none may bring a result it never earned.
    "correct without a reply": (edit_line(0, _unanswered(outcome="correct")), "line 1: field 'outcome'"),
    "unanswered but successful": (
        edit_line(1, _unanswered(success=True, score=10.0)),
        "line 2: field 'success'",
    ),
    "unanswered with points": (edit_line(2, _unanswered(score=9.0)), "line 3: field 'score'"),
    "unanswered with a judge verdict": (edit_line(3, _unanswered(judge=_POINTS)), "line 4: field 'judge'"),
    "unanswered with an EED score": (
        edit_line(4, _unanswered(eed={"score": 100.0})),
        "line 5: field 'eed'",
    ),
}


def write_lines(path: Path, lines: Lines, *, raw: dict[int, str] | None = None) -> None:
    texts = [json.dumps(line) for line in lines]
    for index, text in (raw or {}).items():
        texts[index] = text
    path.write_text("".join(text + "\n" for text in texts))


@pytest.mark.parametrize("attack", sorted(RECORD_ATTACKS))
async def test_an_edited_record_is_one_error_naming_file_line_and_field(
    research_run: StoredResearchRun, tmp_path: Path, attack: str
) -> None:
    samples = research_run.directory / "samples.jsonl"
    edit, expected = RECORD_ATTACKS[attack]
    write_lines(samples, edit(read_lines(samples)))
    judge_calls = research_run.judge_server.call_count
    with ScriptedServer(fixed_points_judge(7)) as judge:
        with pytest.raises(UserError) as caught:
            await rescore(
                research_run.directory, tmp_path / "out", judge="openai/j", judge_base_url=judge.base_url
            )
        assert judge.call_count == 0
    message = str(caught.value)
    assert message.startswith(f"{samples}: {expected}"), message
    assert "\n" not in message
    assert not (tmp_path / "out").exists()
    assert research_run.judge_server.call_count == judge_calls


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("{not json", "line 2: field 'record'"),
        ("[1, 2]", "line 2: field 'record'"),
        ('"just text"', "line 2: field 'record'"),
    ],
)
async def test_a_line_that_is_not_a_record_is_named(
    research_run: StoredResearchRun, tmp_path: Path, raw: str, expected: str
) -> None:
    samples = research_run.directory / "samples.jsonl"
    write_lines(samples, read_lines(samples), raw={1: raw})
    with pytest.raises(UserError, match=f"^{samples}: {expected}"):
        await rescore(
            research_run.directory, tmp_path / "out", judge="openai/j", judge_base_url="http://127.0.0.1:9/v1"
        )


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda h: h["config"]["judge"].update(max_retries="many"), "field 'config.judge.max_retries'"),
        (lambda h: h["config"].update(track="phybench"), "field 'config.track'"),
        (lambda h: h["config"].update(surprise=1), "field 'config.surprise'"),
        (lambda h: h.update(run_id=""), "field 'run_id'"),
        (lambda h: h.update(models="everyone"), "field 'models'"),
        (lambda h: h.update(config=[1]), "field 'config'"),
        (
            lambda h: h["config"].update(tasks="/nonexistent/tasks.jsonl"),
            "field 'config.tasks': no such file",
        ),
        # Read with .get when the new header is built: an AttributeError traceback before.
        (lambda h: h.update(tasks_file=["t.jsonl"]), "field 'tasks_file'"),
    ],
    ids=[
        "judge retries",
        "config track",
        "unknown config field",
        "empty run id",
        "models",
        "config list",
        "tasks gone",
        "tasks_file not an object",
    ],
)
async def test_an_edited_header_is_named(
    research_run: StoredResearchRun, tmp_path: Path, edit: Callable[[dict[str, Any]], None], expected: str
) -> None:
    path = research_run.directory / "run.json"
    header = json.loads(path.read_text())
    edit(header)
    path.write_text(json.dumps(header))
    with pytest.raises(UserError, match=f"^{path}: {expected}"):
        await rescore(
            research_run.directory, tmp_path / "out", judge="openai/j", judge_base_url="http://127.0.0.1:9/v1"
        )


async def test_a_torn_last_line_is_ignored_and_left_in_place(
    research_run: StoredResearchRun, tmp_path: Path
) -> None:
    samples = research_run.directory / "samples.jsonl"
    torn = samples.read_bytes() + b'{"run_id": "run", "track": "res'
    samples.write_bytes(torn)
    with ScriptedServer(fixed_points_judge(7)) as judge:
        result = await rescore(
            research_run.directory, tmp_path / "out", judge="openai/j", judge_base_url=judge.base_url
        )
    assert result.finished == 6
    assert samples.read_bytes() == torn, "the original's torn line was repaired"
    header = json.loads((tmp_path / "out" / "run.json").read_text())
    assert header["rescore"]["torn_bytes_ignored"] == len(b'{"run_id": "run", "track": "res')


def test_the_cli_exits_2_with_one_line_for_a_corrupted_record(
    research_run: StoredResearchRun, tmp_path: Path
) -> None:
    samples = research_run.directory / "samples.jsonl"
    lines = read_lines(samples)
    lines[2]["outcome"] = 17
    write_lines(samples, lines)
    # main() in this process (tests/support/cli.py): its one line and exit code are the subject.
    done = proctor_in_process(
        "rescore",
        str(research_run.directory),
        "--judge",
        "openai/j",
        "--judge-base-url",
        "http://127.0.0.1:9/v1",
        "--out",
        str(tmp_path / "out"),
        env={"OPENAI_API_KEY": "test"},
        cwd=REPO,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"proctor: error: {samples}: line 3: field 'outcome': "
        + done.stderr.split("field 'outcome': ", 1)[1].strip()
    ]
    assert not (tmp_path / "out").exists()
