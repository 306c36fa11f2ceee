"""YAML + flags -> RunConfig; every bad input is one line naming the file and the field."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import BudgetConfig, RunConfig, SandboxConfig
from proctor.agent.run.config_loader import (
    MAX_LISTED_PROBLEMS,
    RunFlags,
    load_run_config,
    parse_size,
    read_config_file,
    validate_run_config,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"id": "t"}\n')
    return path


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_file_fields_load_with_relative_tasks_read_from_the_files_directory(tmp_path: Path, tasks: Path):
    sub = tmp_path / "configs"
    sub.mkdir()
    config_file = write(
        sub / "run.yaml",
        "tasks: ../tasks.jsonl\nmodels: [openai/a, {name: openai/b, "
        "reasoning_effort: low}]\ntrials: 3\nbudget: {token_cap: 9000, force_submit_at: 5000}\n",
    )
    config = load_run_config(config_file, RunFlags())
    assert config.tasks == tasks.resolve()
    assert [m.name for m in config.models] == ["openai/a", "openai/b"]
    assert config.models[1].reasoning_effort == "low"
    assert (config.trials, config.budget.token_cap, config.budget.force_submit_at) == (3, 9000, 5000)


def test_flags_override_the_file(tmp_path: Path, tasks: Path):
    config_file = write(tmp_path / "run.yaml", f"tasks: {tasks}\nmodels: [openai/a]\ntrials: 3\n")
    flags = RunFlags(
        models=["openai/x", "openai/y"],
        trials=5,
        reasoning_effort="high",
        token_cap=2000,
        force_submit_at=1000,
        backend="local",
        judge="openai/j",
        limit_tasks=2,
        resume=True,
        protocol="inspect-example",
    )
    config = load_run_config(config_file, flags)
    assert [m.name for m in config.models] == ["openai/x", "openai/y"]
    assert {m.reasoning_effort for m in config.models} == {"high"}
    assert config.trials == 5 and config.limit_tasks == 2 and config.resume
    assert config.protocol == "inspect-example"
    assert (config.budget.token_cap, config.budget.force_submit_at) == (2000, 1000)
    assert config.sandbox.backend == "local" and config.judge is not None and config.judge.name == "openai/j"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "tasks: {tasks}\nmodels: [openai/a]\ntrails: 3\n",
            "run.yaml: field 'trails': Extra inputs are not permitted",
        ),
        (
            "tasks: {tasks}\nmodels: [{{reasoning_effort: low}}]\n",
            "run.yaml: field 'models.0.name': Field required",
        ),
        (
            "tasks: {tasks}\nmodels: [openai/a]\ntrials: 0\n",
            "run.yaml: field 'trials': Input should be greater than",
        ),
        (
            "tasks: {tasks}\nmodels: [openai/a]\nsandbox: {{backend: podman}}\n",
            "run.yaml: field 'sandbox.backend'",
        ),
        (
            "tasks: {tasks}\nmodels: [openai/a]\nsandbox: {{memory: lots}}\n",
            "run.yaml: field 'sandbox.memory'",
        ),
        ("tasks: {tasks}\nmodels: [gpt-5]\n", "run.yaml: field 'models.0.name': expected PROVIDER/NAME"),
        (
            "tasks: {tasks}\nmodels: [openai/a]\nbudget: {{token_cap: 100}}\n",
            "run.yaml: field 'budget.force_submit_at': 660000 must be below budget.token_cap (100)",
        ),
        ("tasks: missing.jsonl\nmodels: [openai/a]\n", "run.yaml: field 'tasks': no such file"),
        ("models: [openai/a]\n", "run.yaml: field 'tasks': missing: a task file is needed"),
        (
            "tasks: {tasks}\nmodels: [openai/a]\nprotocol: inspect\n",
            "run.yaml: field 'protocol': unknown protocol 'inspect'; choose one of: methodology, "
            "inspect-example",
        ),
        (
            "tasks: {tasks}\nmodels: [openai/a]\ntrack: phybench\nprotocol: inspect-example\n",
            "run.yaml: field 'protocol': 'inspect-example' applies to the frontiermath track only",
        ),
        ("tasks: {tasks}\nmodels: [openai/a]\nprotocol: [methodology]\n", "run.yaml: field 'protocol'"),
        # sandbox.isolation replaced recycle_containers: the old key names the new one, either value.
        (
            "tasks: {tasks}\nmodels: [openai/a]\nsandbox: {{recycle_containers: true}}\n",
            "run.yaml: field 'sandbox': 'recycle_containers' was renamed: write 'isolation: per-sample'",
        ),
        (
            "tasks: {tasks}\nmodels: [openai/a]\nsandbox: {{recycle_containers: false, isolation: fresh}}\n",
            "run.yaml: field 'sandbox': 'recycle_containers' was renamed",
        ),
        (
            "tasks: {tasks}\nmodels: [openai/a]\nsandbox: {{isolation: recycled}}\n",
            "run.yaml: field 'sandbox.isolation': unknown sandbox isolation 'recycled': "
            "choose one of fresh, per-sample",
        ),
        (
            "tasks: {tasks}\nmodels: [openai/a]\nsandbox: {{backend: local, isolation: per-sample}}\n",
            "run.yaml: field 'sandbox': isolation per-sample needs the docker backend (backend is local)",
        ),
        (
            "tasks: {tasks}\nmodels: [openai/a]\nsandbox: {{engine_path: runc}}\n",
            "run.yaml: field 'sandbox.engine_path': unknown engine path 'runc': "
            "choose one of auto, docker, runc-direct",
        ),
        ("tasks: {tasks}\nmodels: [openai/a\n", "run.yaml: line 3: not valid YAML"),
        ("- just\n- a list\n", "run.yaml: expected a mapping"),
    ],
)
def test_bad_config_is_one_line_naming_file_and_field(tmp_path: Path, tasks: Path, text: str, message: str):
    config_file = write(tmp_path / "run.yaml", text.format(tasks=tasks))
    with pytest.raises(UserError) as caught:
        load_run_config(config_file, RunFlags())
    # The YAML line number (tests/runner/test_config_problems.py checks which) set aside.
    shown = re.sub(r"^([^:]+): line \d+: field ", r"\1: field ", str(caught.value))
    assert message in shown
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith(str(config_file))


def test_every_problem_is_listed_on_a_line_of_its_own_with_did_you_mean(tmp_path: Path, tasks: Path):
    text = (
        f"tasks: {tasks}\nmodels: [{{name: openai/a, temprature: 1}}]\ntrails: 3\n"
        "sandbox: {timeout: 3, memroy: 1g}\nmax_concurrency: 0\nbudget: {token_cap: 5, forse_submit: 1}\n"
        "zzzz: 1\n"
    )
    with pytest.raises(UserError) as caught:
        load_run_config(write(tmp_path / "run.yaml", text), RunFlags())
    lines = str(caught.value).split("\n")
    line = "\n".join(lines)
    assert len(lines) == 7 and "more problem" not in line
    for expected in (
        "field 'trails': Extra inputs are not permitted (did you mean 'trials'?)",
        "field 'sandbox.timeout': Extra inputs are not permitted (did you mean 'timeout_s'?)",
        "field 'sandbox.memroy': Extra inputs are not permitted (did you mean 'memory'?)",
        "field 'models.0.temprature': Extra inputs are not permitted (did you mean 'temperature'?)",
        "field 'budget.forse_submit': Extra inputs are not permitted (did you mean 'force_submit_at'?)",
        "field 'max_concurrency': Input should be greater than or equal to 1",
    ):
        assert sum(expected in one for one in lines) == 1, line
    # Nothing close: no guess.
    assert any(one.endswith("field 'zzzz': Extra inputs are not permitted") for one in lines)
    assert line.count("did you mean") == 5


@given(st.text(st.characters(codec="ascii", categories=("Ll", "Nd", "Pc")), min_size=1, max_size=30))
@settings(deadline=None, max_examples=60)
def test_a_guess_is_always_a_real_field_at_that_place(tmp_path_factory: pytest.TempPathFactory, key: str):
    tasks = write(tmp_path_factory.mktemp("g") / "t.jsonl", '{"id": "a", "question": "q", "answer": "1"}\n')
    for section, model in (("", RunConfig), ("sandbox", SandboxConfig), ("budget", BudgetConfig)):
        if key in model.model_fields:
            continue
        data = {"tasks": str(tasks), "models": ["openai/a"]}
        data.update({section: {key: 1}} if section else {key: 1})
        with pytest.raises(UserError) as caught:
            validate_run_config(data, "c")
        guesses = re.findall(r"did you mean '([^']*)'", str(caught.value))
        assert set(guesses) <= set(model.model_fields)


def test_a_flood_of_problems_is_listed_up_to_a_bound(tmp_path: Path, tasks: Path):
    keys = "".join(f"k{i}: 1\n" for i in range(MAX_LISTED_PROBLEMS + 7))
    with pytest.raises(UserError) as caught:
        load_run_config(
            write(tmp_path / "run.yaml", f"tasks: {tasks}\nmodels: [openai/a]\n{keys}"), RunFlags()
        )
    lines = str(caught.value).split("\n")
    assert len(lines) == MAX_LISTED_PROBLEMS + 1 and lines[-1].endswith("(and 7 more problems)")
    assert all("field '" in line for line in lines[:-1])


def test_cli_prints_the_error_line_and_exits_2_without_traceback(tmp_path: Path, tasks: Path):
    config_file = write(tmp_path / "run.yaml", f"tasks: {tasks}\nmodels: [openai/a]\nmax_concurency: 2\n")
    result = subprocess.run(["proctor", "run", str(config_file)], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"proctor: error: {config_file}: line 3: field 'max_concurency': Extra inputs are not permitted "
        "(did you mean 'max_concurrency'?)"
    )
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [("512m", 512 << 20), ("1g", 1 << 30), ("1GiB", 1 << 30), ("2048", 2048), ("1.5k", 1536)],
)
def test_sizes_parse_as_docker_reads_them(text: str, expected: int):
    assert parse_size(text) == expected


def test_resume_without_out_or_run_json_is_a_clear_error(tmp_path: Path, tasks: Path):
    # Alone, with a task file and a model, or with a config that names no run directory.
    config = tmp_path / "c.yaml"
    config.write_text(f"track: olympiad\ntasks: {tasks}\nmodels: [{{name: openai/a}}]\njudge: null\n")
    for args in ([], ["--tasks", str(tasks), "--model", "openai/a"], [str(config)]):
        result = subprocess.run(
            ["proctor", "run", *args, "--resume"], capture_output=True, text=True, cwd=tmp_path
        )
        assert result.returncode == 2, result.stderr
        assert result.stderr == "proctor: error: --resume needs --out DIR, the run directory to continue\n"
    result = subprocess.run(
        ["proctor", "run", "--resume", "--out", str(tmp_path / "nothing")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 2 and "run.json: not found; nothing to resume" in result.stderr


@pytest.mark.parametrize(
    "name",
    ["frontiermath-openai.yaml", "olympiad-judged.yaml", "research-judged.yaml", "phybench-local.yaml"],
)
def test_shipped_example_configs_validate(name: str):
    config_file = REPO / "configs" / "examples" / name
    data = read_config_file(config_file)
    tasks = (config_file.parent / data["tasks"]).resolve()
    # Every example's data ships with the repository: a fresh clone runs them as they are.
    assert tasks.exists(), tasks
    config = load_run_config(config_file, RunFlags())
    assert config.tasks == tasks and config.models


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("Solve it. The answer type is {answer_type}.\n", "lacks the {question} placeholder"),
        ("{question}\n", "lacks the {answer_type} placeholder"),
    ],
)
def test_a_frontiermath_template_without_its_placeholders_is_refused_at_load(
    tmp_path: Path, tasks: Path, template: str, message: str
):
    """Said once when the config loads, not as a harness error in every sample."""
    write(tmp_path / "mine.txt", template)
    config_file = write(
        tmp_path / "run.yaml", f"tasks: {tasks}\nmodels: [openai/a]\nprompt_template: mine.txt\n"
    )
    with pytest.raises(UserError) as caught:
        load_run_config(config_file, RunFlags())
    assert str(caught.value).startswith(f"{config_file}: line 3: field 'prompt_template': ")
    assert message in str(caught.value) and "\n" not in str(caught.value)
    write(tmp_path / "mine.txt", "Type {answer_type}; limit {token_cap}; {libraries}\n{question}\n")
    assert load_run_config(config_file, RunFlags()).prompt_template == (tmp_path / "mine.txt").resolve()
