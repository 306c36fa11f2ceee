"""Loading the shipped FrontierScience gold set and our own task format."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from proctor.agent.errors import UserError
from proctor.agent.tracks.olympiad import OlympiadTrack
from proctor.agent.tracks.research import ResearchTrack
from proctor.agent.tracks.science_tasks import load_science_tasks
from tests.judge.support import GOLD_DIR


def gold_file(split: str) -> Path:
    path = GOLD_DIR / split / "test.jsonl"
    # The gold set ships with the repository: missing means a broken checkout, never a skip.
    assert path.exists(), f"FrontierScience gold set not found at {path}"
    return path


def test_every_olympiad_gold_row_loads() -> None:
    path = gold_file("olympiad")
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    tasks = OlympiadTrack().load_tasks(path)
    assert len(tasks) == len(raw) == 100
    assert Counter(t.subject for t in tasks) == {"physics": 50, "chemistry": 40, "biology": 10}
    assert len({t.id for t in tasks}) == 100
    for task, row in zip(tasks, raw, strict=True):
        assert task.question == row["problem"] and task.answer == row["answer"]
        assert task.id == row["task_group_id"]


def test_every_research_gold_row_loads_with_distinct_ids_for_the_duplicate() -> None:
    path = gold_file("research")
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    tasks = ResearchTrack().load_tasks(path)
    assert len(tasks) == len(raw) == 60
    assert Counter(t.subject for t in tasks) == {"physics": 20, "chemistry": 20, "biology": 20}
    assert len({t.id for t in tasks}) == 60
    duplicated = [g for g, n in Counter(r["task_group_id"] for r in raw).items() if n > 1]
    assert len(duplicated) == 1
    twins = [t for t in tasks if t.metadata["task_group_id"] == duplicated[0]]
    assert [t.id for t in twins] == [duplicated[0], duplicated[0] + "#2"]
    assert twins[0].question == twins[1].question
    assert all("Points:" in t.rubric for t in tasks)
    # Loading twice gives the same ids: resume depends on it.
    assert [t.id for t in ResearchTrack().load_tasks(path)] == [t.id for t in tasks]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_own_format_jsonl_json_and_yaml(tmp_path: Path) -> None:
    row = {"id": "p1", "question": "Q?", "answer": "42", "subject": "physics", "metadata": {"src": "x"}}
    for path in (
        write(tmp_path, "t.jsonl", json.dumps(row) + "\n\n"),
        write(tmp_path, "t.json", json.dumps([row])),
        write(
            tmp_path,
            "t.yaml",
            "- id: p1\n  question: Q?\n  answer: '42'\n  subject: physics\n  metadata: {src: x}\n",
        ),
    ):
        (task,) = load_science_tasks(path, "olympiad")
        assert (task.id, task.question, task.answer, task.subject, task.metadata) == (
            "p1",
            "Q?",
            "42",
            "physics",
            {"src": "x"},
        )


def test_research_own_format_takes_rubric(tmp_path: Path) -> None:
    path = write(
        tmp_path, "r.jsonl", json.dumps({"id": "r1", "question": "Q", "rubric": "Points: 10, Item: X"})
    )
    assert load_science_tasks(path, "research")[0].rubric == "Points: 10, Item: X"


@pytest.mark.parametrize(
    ("kind", "lines", "message"),
    [
        ("olympiad", ['{"id": "a", "question": "Q"}'], r"t.jsonl:1: field 'answer': missing"),
        ("olympiad", ['{"id": "a", "question": "Q", "answer": ""}'], r"t.jsonl:1: field 'answer': empty"),
        (
            "olympiad",
            ['{"id": "a", "question": "Q", "answer": "1", "anwser": "2"}'],
            r"t.jsonl:1: field 'anwser': unknown field",
        ),
        (
            "olympiad",
            ['{"id": "a", "question": "Q", "answer": "1"}', '{"id": "a", "question": "R", "answer": "2"}'],
            r"t.jsonl:2: field 'id': duplicate id 'a' \(first at .*t.jsonl:1\)",
        ),
        (
            "olympiad",
            ['{"id": "a", "question": "Q", "answer": "1"}', "{not json"],
            r"t.jsonl:2: invalid JSON",
        ),
        (
            "olympiad",
            ['{"id": "a", "question": "Q", "rubric": "x"}'],
            r"t.jsonl:1: field 'rubric': only research",
        ),
        (
            "research",
            ['{"id": "a", "question": "Q", "answer": "x", "rubric": "y"}'],
            r"field 'rubric': give either",
        ),
        (
            "olympiad",
            ['{"problem": "Q", "answer": "1", "subject": "physics"}'],
            r"t.jsonl:1: field 'task_group_id': missing",
        ),
        (
            "olympiad",
            ['{"problem": "Q", "answer": ["1"], "subject": "physics", "task_group_id": "g"}'],
            r"t.jsonl:1: field 'answer': expected text, got list",
        ),
        ("olympiad", ["[1, 2]"], r"t.jsonl:1: expected a task object"),
        ("olympiad", ['{"prompt": "Q"}'], r"t.jsonl:1: field 'question': missing"),
        ("olympiad", ["", "  "], r"no tasks in file"),
    ],
)
def test_bad_rows_name_file_line_and_field(tmp_path: Path, kind: str, lines: list[str], message: str) -> None:
    path = write(tmp_path, "t.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(UserError, match=message):
        load_science_tasks(path, kind)  # type: ignore[arg-type]


def test_missing_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="task file not found"):
        load_science_tasks(tmp_path / "absent.jsonl", "olympiad")
