"""A run config's problems, all at once (issue 38, item 1).

Invariant: every mistake of a config file is reported, each on a line of its own that names the
file, the YAML line that holds it and the field; a missing required field too (on the line of
the key that looks like it, else where its mapping begins). An Inspect name used as a key gets
the hint its flag gets on the command line. The oracle: the tests write each mistake on a line
they choose, and know what each must say; an honest config loads without a word.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proctor.agent.cli.flag_hints import hint_for
from proctor.agent.errors import UserError
from proctor.agent.inputs.inspect_names import INSPECT_EQUIVALENTS
from proctor.agent.run.config_loader import RunFlags, load_run_config
from tests.support.cli import proctor_in_process

LINE = re.compile(r"^(?P<file>[^:]+): line (?P<line>\d+): field '(?P<field>[^']+)': (?P<message>.*)$")


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"id": "t", "question": "q", "answer": "1"}\n')
    return path


def problems(config: Path, flags: RunFlags | None = None) -> list[dict[str, str]]:
    with pytest.raises(UserError) as caught:
        load_run_config(config, flags or RunFlags())
    lines = str(caught.value).split("\n")
    assert list(caught.value.lines) == lines
    parsed = []
    for line in lines:
        match = LINE.match(line)
        assert match is not None, f"not 'FILE: line N: field ...': {line!r}"
        assert match["file"] == str(config)
        parsed.append(match.groupdict())
    return parsed


def test_four_mistakes_one_a_missing_required_field_are_all_reported_with_their_lines(
    tmp_path: Path, tasks: Path
) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(
        "# an Inspect user's first config\n"
        "track: frontiermath\n"
        f"tasks: {tasks}\n"
        "model: openai/gpt-5\n"  # models, misspelt: the required field is missing
        "trials: many\n"
        "sandbox:\n"
        "  memroy: 1g\n"
    )
    found = {(p["line"], p["field"]): p["message"] for p in problems(config)}
    assert set(found) == {("4", "model"), ("4", "models"), ("5", "trials"), ("7", "sandbox.memroy")}
    assert "did you mean 'models'?" in found[("4", "model")]
    assert "at least one model is needed" in found[("4", "models")]
    assert "valid integer" in found[("5", "trials")]
    assert "did you mean 'memory'?" in found[("7", "sandbox.memroy")]


def test_the_cli_prints_each_problem_on_its_own_line_and_exits_2(tmp_path: Path, tasks: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(f"tasks: {tasks}\nmodel: openai/a\nepochs: 3\nlog_dir: logs\nmax_connections: 4\n")
    completed = proctor_in_process("run", str(config))
    assert completed.returncode == 2 and "Traceback" not in completed.stderr
    lines = completed.stderr.splitlines()
    assert [line.split(": field ")[0] for line in lines] == [
        f"proctor: error: {config}: line {n}" for n in (2, 2, 3, 4, 5)
    ], lines
    assert "--trials N" in lines[2] and "--out DIR" in lines[3] and "-M max_connections=N" in lines[4]
    # Never the spelling guess that points at another field.
    assert "max_concurrency" not in lines[4]


@pytest.mark.parametrize("name", sorted(INSPECT_EQUIVALENTS))
def test_a_config_key_gets_the_hint_its_flag_gets(tmp_path: Path, tasks: Path, name: str) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(f"tasks: {tasks}\nmodels: [openai/a]\n{name}: 1\n")
    (problem,) = problems(config)
    flag_form = hint_for("--" + name.replace("_", "-")).split(" is ", 1)[1].removesuffix(" here")
    assert problem["line"] == "3" and flag_form in problem["message"], problem
    assert "did you mean" not in problem["message"]


# Mistake families: (yaml line, field reported, what the message says), grouped by the top-level
# key each is written under (a file holds each key once). Each is written on a line the test
# chooses; the tasks and models lines are always there, right or wrong.
MISTAKES: dict[str, list[tuple[str, list[tuple[str, str]]]]] = {
    "trails": [("trails: 3", [("trails", "did you mean 'trials'?")])],
    "sandbox": [
        ("sandbox: {timeout: 3}", [("sandbox.timeout", "did you mean 'timeout_s'?")]),
        ("sandbox: {memory: lots}", [("sandbox.memory", "not a size")]),
        ("sandbox: {backend: podman}", [("sandbox.backend", "unknown sandbox backend 'podman'")]),
    ],
    "max_concurrency": [("max_concurrency: lots", [("max_concurrency", "valid integer")])],
    "budget": [("budget: {token_cap: 0}", [("budget.token_cap", "greater than 0")])],
    "protocol": [("protocol: inspekt", [("protocol", "unknown protocol 'inspekt'")])],
    "log_dir": [("log_dir: logs", [("log_dir", "--out DIR")])],
    "models": [
        ("models: [gpt-5]", [("models.0.name", "expected PROVIDER/NAME")]),
        # Two problems on one line: the key is unknown, and the field it meant is missing.
        ("model: openai/a", [("model", "did you mean 'models'?"), ("models", "at least one model")]),
        ("models: []", [("models", "at least one model")]),
    ],
    "tasks": [("tasks: absent.jsonl", [("tasks", "no such file")])],
}


@st.composite
def configs(draw: st.DrawFn) -> list[tuple[str, list[tuple[str, str]]]]:
    """The lines of a config, each with the problems it must be reported with."""
    lines: list[tuple[str, list[tuple[str, str]]]] = []
    for key, families in MISTAKES.items():
        if draw(st.booleans()):
            lines.append(draw(st.sampled_from(families)))
        elif key == "models":
            lines.append(("models: [openai/a]", []))
        elif key == "tasks":
            lines.append(("tasks: {tasks}", []))
    return draw(st.permutations(lines))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=configs())
def test_every_mistake_of_every_family_is_reported_on_its_own_line(
    tmp_path: Path, tasks: Path, lines: list[tuple[str, list[tuple[str, str]]]]
) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("".join(text.replace("{tasks}", str(tasks)) + "\n" for text, _ in lines))
    wanted = {
        (str(n), *problem) for n, (_, problems_here) in enumerate(lines, 1) for problem in problems_here
    }
    if not wanted:
        load_run_config(config, RunFlags())  # nothing wrong: it loads
        return
    reported = problems(config)
    assert len(reported) == len(wanted), reported
    for line, field, says in wanted:
        assert any(p["line"] == line and p["field"] == field and says in p["message"] for p in reported), (
            line,
            field,
            says,
            reported,
        )


def test_a_flags_value_has_no_line_and_a_flag_fixes_a_missing_field(tmp_path: Path, tasks: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(f"tasks: {tasks}\ntrials: 2\n")
    # The file's missing models, given by the flag: it loads.
    assert [m.name for m in load_run_config(config, RunFlags(models=["openai/a"])).models] == ["openai/a"]
    with pytest.raises(UserError) as caught:
        load_run_config(config, RunFlags(models=["gpt-5"]))
    assert str(caught.value) == (
        f"{config}: field 'models.0.name': expected PROVIDER/NAME (e.g. openai/gpt-5 or "
        "local/gemma3-270m), got 'gpt-5'"
    )


def test_an_honest_config_with_anchors_comments_and_merges_loads(tmp_path: Path, tasks: Path) -> None:
    config = tmp_path / "run.yaml"
    # Anchors, merges, comments and block style: nothing to report.
    config.write_text(
        f"tasks: {tasks}\n"
        "models:\n"
        "  - &a {name: openai/a, temperature: 0.5, max_connections: 2}\n"
        "  - {<<: *a, name: openai/b}\n"
        "trials: 2  # two each\n"
        "sandbox:\n"
        "  memory: 512m\n"
    )
    loaded = load_run_config(config, RunFlags())
    assert [(m.name, m.temperature, m.max_connections) for m in loaded.models] == [
        ("openai/a", 0.5, 2),
        ("openai/b", 0.5, 2),
    ]
