"""Task selection (agent/inputs/selection.py): --filter on any field, --task-id globs, --limit N|A-B.

Each test tries to make the selection run the wrong tasks: a boolean read as 1, a range off
by one, a typo that silently selects nothing, a glob character inside a hostile task id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import RunConfig
from proctor.agent.inputs.selection import limit_slice, normalise_limit, select, value_matches
from proctor.agent.run.config_loader import RunFlags, load_run_config, split_task_ids
from proctor.agent.tracks.frontiermath.track import FrontierMathTrack
from proctor.agent.tracks.olympiad import OlympiadTrack

REPO = Path(__file__).resolve().parents[2]
FM_TASKS = REPO / "configs" / "tasks" / "frontiermath-samples.jsonl"
OLYMPIAD_TASKS = REPO / "configs" / "data" / "frontierscience" / "olympiad" / "test.jsonl"


@dataclass
class Task:
    id: str
    subject: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def ids(tasks: list[Any]) -> list[str]:
    return [str(task.id) for task in tasks]


def pick(tasks: list[Any], **selection: Any) -> list[str]:
    options: dict[str, Any] = {"task_filter": {}, "task_ids": [], "limit": None, **selection}
    return ids(select(tasks, source="tasks.jsonl", **options))


TEN = [Task(f"t{i}", "physics" if i % 2 else "chemistry", {"level": i % 3, "flag": i < 4}) for i in range(10)]


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (3, ["t0", "t1", "t2"]),
        ("3", ["t0", "t1", "t2"]),
        ("2-4", ["t1", "t2", "t3"]),  # 1-based and inclusive, as Inspect's --limit 2-4
        ("1-1", ["t0"]),
        ("10-10", ["t9"]),
        ("9-50", ["t8", "t9"]),  # a range past the end keeps what exists
        (50, ids(TEN)),
    ],
)
def test_limit_is_a_count_or_a_one_based_inclusive_range(limit: int | str, expected: list[str]) -> None:
    assert pick(TEN, limit=normalise_limit(limit)) == expected


@pytest.mark.parametrize(
    "bad",
    [
        0,
        -1,
        "0",
        "0-3",
        "5-2",
        "3-",
        "-3",
        "1-2-3",
        "1.5",
        "ten",
        "",
        True,
        2.0,
        "\u0663",
        "1-\u0663",
        "1e3",
        "0x10",
    ],
)
def test_limits_that_mean_nothing_are_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="expected N or A-B"):
        normalise_limit(bad)


def test_a_range_wholly_past_the_end_is_an_error_not_an_empty_run() -> None:
    with pytest.raises(
        UserError, match=r"no task left after the selection: limit 11-12 \(10 task\(s\) before"
    ):
        pick(TEN, limit="11-12")
    assert limit_slice("11-12") == slice(10, 12)


def test_filter_reads_any_field_and_dotted_metadata_paths() -> None:
    assert pick(TEN, task_filter={"subject": "physics"}) == ["t1", "t3", "t5", "t7", "t9"]
    assert pick(TEN, task_filter={"metadata.level": "2"}) == ["t2", "t5", "t8"]
    assert pick(TEN, task_filter={"subject": "physics", "metadata.level": 0}) == ["t3", "t9"]
    # A bare key that is no field of the task is read in metadata (quickstart's filter).
    assert pick(TEN, task_filter={"flag": True}) == ["t0", "t1", "t2", "t3"]


def test_booleans_and_numbers_never_stand_in_for_each_other() -> None:
    # Python says True == 1; a filter must not.
    assert pick(TEN, task_filter={"metadata.flag": "true"}) == ["t0", "t1", "t2", "t3"]
    # The values that exist are listed, spelled as JSON, so true is never mistaken for 1.
    for expected in (1, "1"):
        with pytest.raises(
            UserError, match=r"no task has metadata\.flag=1; the tasks hold false \(6\), true \(4\)$"
        ):
            pick(TEN, task_filter={"metadata.flag": expected})
    assert pick(TEN, task_filter={"metadata.level": 1}) == ["t1", "t4", "t7"]
    assert not value_matches(1, True) and not value_matches(True, 1) and not value_matches(0, False)
    assert not value_matches("1", 1) and value_matches(1, "1") and value_matches(None, "null")
    assert value_matches(1.0, 1) and not value_matches([1], "[1]")


def test_a_filter_matching_nothing_lists_the_values_that_exist() -> None:
    with pytest.raises(UserError) as caught:
        pick(TEN, task_filter={"subject": "physic"})
    assert str(caught.value) == (
        "tasks.jsonl: field 'task_filter': no task has subject=physic; "
        "the tasks hold chemistry (5), physics (5)"
    )
    # Each key matches some tasks, but never together.
    with pytest.raises(
        UserError, match=r"each of subject, metadata\.flag, metadata\.level matches some task, but"
    ):
        pick(TEN, task_filter={"subject": "physics", "metadata.flag": True, "metadata.level": 2})
    # A hostile or huge task file: the list is bounded, each value cut.
    many = [Task(f"t{i}", f"s{i:03d}" + "x" * 100) for i in range(50)]
    with pytest.raises(UserError) as caught:
        pick(many, task_filter={"subject": "nope"})
    line = str(caught.value)
    assert line.count("(1)") == 20 and line.endswith(", and 30 more") and len(line) < 1500


def test_a_field_no_task_has_is_named_not_silently_empty() -> None:
    with pytest.raises(
        UserError, match=r"tasks.jsonl: field 'task_filter': no task has a field 'subjet' \(fields: "
    ):
        pick(TEN, task_filter={"subjet": "physics"})
    with pytest.raises(UserError, match="is not a field path"):
        pick(TEN, task_filter={"metadata..level": 1})
    # Walking through a value that is not a mapping finds nothing, it does not raise.
    with pytest.raises(UserError, match=r"no task has a field 'subject\.name'"):
        pick(TEN, task_filter={"subject.name": "x"})


def test_task_id_globs_select_in_file_order_and_a_pattern_matching_nothing_is_an_error() -> None:
    assert pick(TEN, task_ids=["t9", "t1"]) == ["t1", "t9"]
    assert pick(TEN, task_ids=["t[2-4]"]) == ["t2", "t3", "t4"]
    assert pick(TEN, task_ids=["t?", "t1"]) == ids(TEN)  # a task matched twice runs once
    with pytest.raises(UserError, match=r"field 'task_ids': no task id matches 'T1'"):
        pick(TEN, task_ids=["T1"])  # case-sensitive
    hostile = [Task("[x]"), Task("x"), Task("a*b"), Task("aXb")]
    assert pick(hostile, task_ids=["[[]x]"]) == ["[x]"]
    assert pick(hostile, task_ids=["a[*]b"]) == ["a*b"]
    assert pick(hostile, task_ids=["[x]"]) == ["x"]  # a glob, as documented


def test_order_is_filter_then_ids_then_limit() -> None:
    chosen = pick(TEN, task_filter={"subject": "physics"}, task_ids=["t[1-7]"], limit="2-3")
    assert chosen == ["t3", "t5"]


def test_comma_separated_task_ids_split_like_inspect() -> None:
    assert split_task_ids(["a,b", "c", " d , e "]) == ["a", "b", "c", "d", "e"]
    with pytest.raises(UserError, match="empty pattern"):
        split_task_ids([" , "])


def test_real_tracks_filter_on_their_own_fields() -> None:
    fm = FrontierMathTrack().load_tasks(FM_TASKS)
    easy = pick(fm, task_filter={"metadata.difficulty": "easy", "subject": "number theory"})
    assert easy and all(t.subject == "number theory" for t in fm if t.id in easy)
    assert pick(fm, task_filter={"quickstart": True}) == pick(fm, task_filter={"metadata.quickstart": "true"})
    olympiad = OlympiadTrack().load_tasks(OLYMPIAD_TASKS)
    chemistry = pick(olympiad, task_filter={"subject": "chemistry"})
    assert 0 < len(chemistry) < len(olympiad)
    assert pick(olympiad, task_ids=[olympiad[5].id[:8] + "*"], limit=1) == [olympiad[5].id]


def test_flags_reach_the_config_and_the_config_validates_them(tmp_path: Path) -> None:
    flags = RunFlags(
        track="frontiermath",
        tasks=FM_TASKS,
        models=["openai/m"],
        limit_tasks="2-5",
        task_ids=["nt-*"],
        filters=["subject=number theory", "metadata.quickstart=true"],
    )
    config = load_run_config(None, flags)
    assert config.limit_tasks == "2-5" and config.task_ids == ["nt-*"]
    assert config.task_filter == {"subject": "number theory", "metadata.quickstart": "true"}
    with pytest.raises(UserError, match=r"command line: field 'limit_tasks': expected N or A-B"):
        load_run_config(None, RunFlags(tasks=FM_TASKS, models=["openai/m"], limit_tasks="4-2"))
    with pytest.raises(UserError, match="--filter subject: expected FIELD=VALUE"):
        load_run_config(None, RunFlags(tasks=FM_TASKS, models=["openai/m"], filters=["subject"]))
    with pytest.raises(UserError, match="subject is filtered twice"):
        load_run_config(
            None, RunFlags(tasks=FM_TASKS, models=["openai/m"], filters=["subject=a", "subject=b"])
        )
    with pytest.raises(ValidationError):
        RunConfig(tasks=FM_TASKS, models=[{"name": "openai/m"}], task_ids=["  "])
    # A file's filter is kept and a flag adds to it.
    config_file = tmp_path / "run.yaml"
    config_file.write_text(f"tasks: {FM_TASKS}\nmodels: [openai/m]\ntask_filter: {{quickstart: true}}\n")
    merged = load_run_config(config_file, RunFlags(filters=["subject=algebra"]))
    assert merged.task_filter == {"quickstart": True, "subject": "algebra"}
