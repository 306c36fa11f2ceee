"""Completion of option values, from a table, without typer (issue 38, item 4).

Completing `proctor run --tr` imported the run command and took 3.6-6.1 s, and option values
(--track, --format, --protocol, task ids) completed to nothing. The shell is now answered from
completion_table.json (agent/cli/fast_complete.py). Invariants: the table is what the app
says (rebuilt here and compared); for command and option names the answer is typer's own (the
oracle: typer's completion classes over the real app); an option's values are the constants
the command checks against, and task ids those of the task file on the same line; answering
imports neither typer nor any command. The speed itself is measured, not asserted:
`proctor bench`-style figures are in the report of issue 38.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.agent.cli import COMPLETE_VAR
from proctor.agent.cli.fast_complete import TABLE_PATH, answer, candidates
from tests.cli.test_completion import bash_complete, proctor_on_path  # noqa: F401  (a fixture)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def table() -> dict[str, object]:
    # Built in a fresh interpreter: tests in this process may register test tracks or commands.
    done = subprocess.run(
        [sys.executable, "-m", "proctor.agent.cli.completion_build"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


def test_the_committed_table_is_what_the_app_says(table: dict[str, object]) -> None:
    committed = json.loads(TABLE_PATH.read_text(encoding="utf-8"))
    assert committed == table, (
        "stale: python3 -m proctor.agent.cli.completion_build > agent/cli/completion_table.json"
    )


def _paths(command: dict[str, object], words: list[str]) -> list[list[str]]:
    found = [words]
    for name, sub in (command.get("commands") or {}).items():  # type: ignore[union-attr]
        found += _paths(sub, [*words, name])
    return found


# Typer resolves the whole command line for each of some 200 answers: seconds, hence slow.
@pytest.mark.slow
def test_names_are_typers_answer_for_every_command_and_prefix(table: dict[str, object]) -> None:
    # The oracle: typer's own completion classes on the real app (what answered before).
    from typer._completion_classes import BashComplete

    from proctor.agent.cli.app import app
    from proctor.agent.cli.commands_registry import load_all

    load_all()
    import typer

    root = typer.main.get_command(app)
    oracle = BashComplete(root, {}, "proctor", COMPLETE_VAR)
    checked = 0
    for words in _paths(table, []):
        for incomplete in ("", "-", "--r", "--t", "s"):
            expected = [item.value for item in oracle.get_completions(words, incomplete)]
            if incomplete == "" and "commands" not in _command_at(table, words):
                continue  # a leaf's positional: typer offers files' nothing, or an Enum's values
            got = [value for value, _ in candidates(words, incomplete, table)]
            assert sorted(got) == sorted(expected), (words, incomplete)
            checked += 1
    assert checked > 60


def _command_at(table: dict[str, object], words: list[str]) -> dict[str, object]:
    command = table
    for word in words:
        command = command["commands"][word]  # type: ignore[index]
    return command


@pytest.mark.parametrize(
    ("line", "expected_from"),
    [
        ("proctor run --track ", "proctor.agent.tracks.registry:track_names"),
        ("proctor run --protocol ", "proctor.agent.tracks.frontiermath.profiles:PROFILES"),
        ("proctor export --format ", "proctor.agent.cli.export_cmd:FORMATS"),
        ("proctor score eed --mode ", "proctor.agent.scoring.latex_preprocess:MODES"),
        ("proctor run --reasoning-effort ", "proctor.agent.inputs.efforts:REASONING_EFFORTS"),
        ("proctor sandbox exec --runtime ", "proctor.sandbox.docker.runtimes:RUNTIMES"),
        ("proctor run --backend ", "proctor.sandbox.factory:BACKENDS"),
        ("proctor list tasks FILE --track ", "proctor.agent.tracks.registry:track_names"),
    ],
)
def test_option_values_are_the_constants_the_command_checks(
    line: str, expected_from: str, table: dict[str, object]
) -> None:
    import importlib

    module, name = expected_from.split(":")
    source = getattr(importlib.import_module(module), name)
    expected = list(source() if callable(source) else source)
    if name == "track_names":
        # Other tests of the same worker register tracks of their own (tests/runner/echo_track.py);
        # the table holds the tracks Proctor ships, so only those are the oracle.
        from proctor.agent.tracks import registry

        expected = [track for track in expected if registry._TRACKS[track].startswith("proctor.")]
    words = line.split()[1:]
    assert [value for value, _ in candidates(words, "", table)] == [str(v) for v in expected]
    # And by prefix.
    first = str(expected[0])
    assert first in [value for value, _ in candidates(words, first[:2], table)]


def test_task_ids_come_from_the_task_file_on_the_line(tmp_path: Path, table: dict[str, object]) -> None:
    tasks = tmp_path / "tasks.jsonl"
    rows = [{"id": "alg-1"}, {"id": "alg-2"}, {"id": "geo 3"}, {"id": "x\nforged"}, {"id": 7}]
    tasks.write_text("".join(json.dumps(row) + "\n" for row in rows))
    words = ["run", "--tasks", str(tasks), "--task-id"]
    # Ids a shell word cannot hold (a space, a newline) are left out, never split into two.
    assert [value for value, _ in candidates(words, "", table)] == ["alg-1", "alg-2", "7"]
    assert [value for value, _ in candidates(words, "alg-", table)] == ["alg-1", "alg-2"]
    # Through a config file's tasks, relative to the config.
    config = tmp_path / "run.yaml"
    config.write_text("tasks: tasks.jsonl\nmodels: [openai/a]\n")
    assert [v for v, _ in candidates(["run", str(config), "--task-id"], "a", table)] == ["alg-1", "alg-2"]
    # No task file, or one that does not parse: nothing, no error.
    assert candidates(["run", "--task-id"], "", table) == []
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    assert candidates(["run", "--tasks", str(tmp_path / "bad.jsonl"), "--task-id"], "", table) == []


def test_a_path_or_number_value_is_left_to_the_shell(table: dict[str, object]) -> None:
    assert candidates(["run", "--tasks"], "", table) == []
    assert candidates(["run", "--trials"], "", table) == []
    # The option's value is taken as a value, not as a command or an option to complete.
    assert candidates(["run", "--out", "run"], "--dr", table) == [
        ("--dry-run", candidates(["run"], "--dry", table)[0][1])
    ]


def test_zsh_and_fish_get_values_in_their_formats() -> None:
    text, status = answer("zsh", {"_TYPER_COMPLETE_ARGS": "proctor run --protocol "})
    assert status == 0 and text == '_arguments \'*: :(("methodology"\n"inspect-example"))\''
    text, status = answer("zsh", {"_TYPER_COMPLETE_ARGS": "proctor run --tasks "})
    assert text == "_files"
    env = {"_TYPER_COMPLETE_ARGS": "proctor score eed --mode f", "_TYPER_COMPLETE_FISH_ACTION": "get-args"}
    assert answer("fish", env) == ("fixed", 0)
    assert answer("fish", {**env, "_TYPER_COMPLETE_FISH_ACTION": "is-args"})[1] == 0
    assert (
        answer(
            "fish", {"_TYPER_COMPLETE_ARGS": "proctor run --tasks ", "_TYPER_COMPLETE_FISH_ACTION": "is-args"}
        )[1]
        == 1
    )


def test_bash_completes_values_through_the_printed_script(proctor_on_path: dict[str, str]) -> None:  # noqa: F811
    assert bash_complete("proctor run --track o", proctor_on_path) == ["olympiad"]
    assert bash_complete("proctor run --protocol ", proctor_on_path) == ["methodology", "inspect-example"]
    assert bash_complete("proctor run --tr", proctor_on_path) == ["--track", "--trials"]


PROBE = """
import sys
from proctor.agent.cli import main
try:
    main()
except SystemExit:
    pass
heavy = ("typer", "click", "rich", "openai", "pydantic", "proctor.agent.cli.run_cmd", "yaml")
print("LOADED", sorted(name for name in heavy if name in sys.modules))
"""


def test_completing_an_option_imports_no_typer_and_no_command() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            COMPLETE_VAR: "complete_bash",
            "COMP_WORDS": "proctor run --tr",
            "COMP_CWORD": "2",
        },
    )
    lines = done.stdout.splitlines()
    assert lines[:-1] == ["--track", "--trials"] and lines[-1] == "LOADED []", done.stdout + done.stderr
