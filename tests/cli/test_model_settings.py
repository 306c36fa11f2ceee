"""-M KEY=VALUE, --reasoning-effort, and --model/--judge beside a config file.

Attacks: a typo'd key, a value of the wrong type, an out-of-range number, a key variable given
as the key itself, a URL that is not one, an effort the API does not know, and a --model that
would silently drop the file's base_url and key variable (the bug this replaces).
"""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from openai.types.shared.reasoning_effort import ReasoningEffort

from proctor.agent.errors import UserError
from proctor.agent.inputs.efforts import REASONING_EFFORTS
from proctor.agent.inputs.model_overrides import parse_model_settings
from proctor.agent.run.config_loader import RunFlags, load_run_config
from tests.support.cli import proctor_in_process

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "configs" / "tasks" / "frontiermath-samples.jsonl"


def config_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(f"tasks: {TASKS}\n{body}")
    return path


ONE_MODEL = """models:
  - name: openai/served
    base_url: http://127.0.0.1:8000/v1
    api_key_env: MY_KEY
    api: responses
    temperature: 0.6
    max_connections: 3
    input_price_per_mtok: 1.0
    output_price_per_mtok: 2.0
judge:
  name: openai/judge
  base_url: http://127.0.0.1:9000/v1
  api_key_env: JUDGE_KEY
"""


def test_model_flag_beside_a_file_keeps_the_files_endpoint_and_key_variable(tmp_path: Path) -> None:
    config = load_run_config(config_file(tmp_path, ONE_MODEL), RunFlags(models=["openai/other"]))
    (model,) = config.models
    assert model.name == "openai/other"
    assert (model.base_url, model.api_key_env, model.api) == (
        "http://127.0.0.1:8000/v1",
        "MY_KEY",
        "responses",
    )
    assert (model.temperature, model.max_connections) == (0.6, 3)
    # Prices belong to the model they were written for.
    assert model.input_price_per_mtok is None and model.output_price_per_mtok is None


def test_flags_override_the_files_values_and_the_file_fills_the_rest(tmp_path: Path) -> None:
    flags = RunFlags(
        models=["openai/other"],
        model_settings=["temperature=0.2", "base_url=http://127.0.0.1:8001/v1", "seed=7"],
        judge="openai/judge-2",
    )
    config = load_run_config(config_file(tmp_path, ONE_MODEL), flags)
    (model,) = config.models
    assert (model.temperature, model.seed, model.base_url) == (0.2, 7, "http://127.0.0.1:8001/v1")
    assert model.api_key_env == "MY_KEY" and model.api == "responses"
    assert config.judge is not None
    assert (config.judge.name, config.judge.base_url, config.judge.api_key_env) == (
        "openai/judge-2",
        "http://127.0.0.1:9000/v1",
        "JUDGE_KEY",
    )
    # -M is for the answering models; the judge keeps its own sampling.
    assert config.judge.temperature is None and config.judge.seed is None


def test_model_flag_naming_a_file_entry_selects_it_as_written(tmp_path: Path) -> None:
    body = """models:
  - {name: openai/a, base_url: "http://127.0.0.1:1/v1", input_price_per_mtok: 3.0}
  - {name: openai/b, base_url: "http://127.0.0.1:2/v1"}
"""
    config = load_run_config(config_file(tmp_path, body), RunFlags(models=["openai/b", "openai/a"]))
    assert [(m.name, m.base_url) for m in config.models] == [
        ("openai/b", "http://127.0.0.1:2/v1"),
        ("openai/a", "http://127.0.0.1:1/v1"),
    ]
    assert config.models[1].input_price_per_mtok == 3.0


@pytest.mark.parametrize(
    ("entries", "lent"),
    [
        # One endpoint and key for all: the flag's model uses them too.
        (
            '  - {name: openai/a, base_url: "http://127.0.0.1:1/v1", api_key_env: K, temperature: 0.1}\n'
            '  - {name: openai/b, base_url: "http://127.0.0.1:1/v1", api_key_env: K, temperature: 0.9}\n',
            {"base_url": "http://127.0.0.1:1/v1", "api_key_env": "K", "temperature": None},
        ),
        # Nothing shared (and prices are never lent): the flag's model has its defaults.
        (
            '  - {name: openai/a, base_url: "http://127.0.0.1:1/v1", input_price_per_mtok: 3.0}\n'
            '  - {name: openai/b, base_url: "http://127.0.0.1:2/v1", input_price_per_mtok: 3.0}\n'
            "  - openai/c2\n",
            {"base_url": None, "api_key_env": "OPENAI_API_KEY", "input_price_per_mtok": None},
        ),
    ],
)
def test_model_flag_replaces_a_multi_model_list(
    tmp_path: Path, entries: str, lent: dict[str, object]
) -> None:
    # The README: flags override the config. Before, this was "lists 2 models ... none is named".
    config = load_run_config(config_file(tmp_path, "models:\n" + entries), RunFlags(models=["openai/c"]))
    (model,) = config.models
    assert model.name == "openai/c"
    assert {key: getattr(model, key) for key in lent} == lent
    # Several flags: each replaces, in the flags' order; one named in the file is used as written.
    config = load_run_config(
        config_file(tmp_path, "models:\n" + entries), RunFlags(models=["openai/d", "openai/a"])
    )
    assert [m.name for m in config.models] == ["openai/d", "openai/a"]
    assert config.models[1].base_url == "http://127.0.0.1:1/v1"


def test_model_flag_replaces_the_list_on_the_command_line(tmp_path: Path) -> None:
    body = "models: [openai/a, openai/b]\n"
    completed = proctor_in_process(
        "run", str(config_file(tmp_path, body)), "--model", "openai/c", "--dry-run"
    )
    assert completed.returncode == 0, completed.stderr
    assert "openai/c" in completed.stdout and "openai/a" not in completed.stdout, completed.stdout


def test_settings_are_typed(tmp_path: Path) -> None:
    model, budget = parse_model_settings(
        ["temperature=0", "top-p=0.5", "seed=0", "reasoning_effort=xhigh", "max_tokens=512", "api=chat"]
    )
    assert model == {"temperature": 0.0, "top_p": 0.5, "seed": 0, "reasoning_effort": "xhigh", "api": "chat"}
    assert budget == {"max_output_tokens": 512}
    config = load_run_config(
        None,
        RunFlags(tasks=TASKS, models=["openai/x", "openai/y"], model_settings=["max-tokens=300", "seed=3"]),
    )
    assert config.budget.max_output_tokens == 300 and {m.seed for m in config.models} == {3}


@pytest.mark.parametrize(
    ("item", "needle"),
    [
        ("temprature=0.5", "-M temprature=0.5: unknown model setting 'temprature' (keys: "),
        ("temperature", "-M temperature: expected KEY=VALUE"),
        ("=3", "-M =3: expected KEY=VALUE"),
        ("temperature=hot", "-M temperature=hot: temperature: "),
        ("temperature=2.5", "-M temperature=2.5: temperature: Input should be less than or equal to 2"),
        ("temperature=nan", "-M temperature=nan: temperature: "),
        ("top_p=0", "-M top_p=0: top_p: Input should be greater than 0"),
        ("seed=1.5", "-M seed=1.5: seed: "),
        ("max_tokens=0", "-M max_tokens=0: max_output_tokens: Input should be greater than 0"),
        ("max_connections=-1", "-M max_connections=-1: max_connections: "),
        (
            "reasoning_effort=extreme",
            "-M reasoning_effort=extreme: reasoning_effort: 'extreme' is not a reasoning",
        ),
        ("api=completions", "-M api=completions: api: "),
        ("base_url=127.0.0.1:8000", "-M base_url=127.0.0.1:8000: base_url must be an http(s) URL"),
        ("base_url=file:///etc/passwd", "base_url must be an http(s) URL"),
        ("api_key_env=sk-abc123", "-M api_key_env=sk-abc123: api_key_env names an environment variable"),
        ("name=openai/x", "unknown model setting 'name'"),
        ("extra_body={}", "unknown model setting 'extra_body'"),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_key(item: str, needle: str) -> None:
    with pytest.raises(UserError) as caught:
        load_run_config(None, RunFlags(tasks=TASKS, models=["openai/x"], model_settings=[item]))
    message = str(caught.value)
    assert needle in message and "\n" not in message


def test_the_same_setting_twice_is_refused_even_under_two_spellings() -> None:
    with pytest.raises(UserError, match="max_output_tokens is already set by -M max_tokens=5"):
        parse_model_settings(["max_tokens=5", "max-output-tokens=6"])
    with pytest.raises(UserError, match="api_key_env is already set"):
        parse_model_settings(["key_env=A", "api_key_env=B"])


def test_reasoning_effort_takes_only_the_apis_values(tmp_path: Path) -> None:
    sdk_values = {a for arg in typing.get_args(ReasoningEffort) for a in typing.get_args(arg)}
    assert set(REASONING_EFFORTS) == sdk_values
    assert {"none", "minimal", "low", "medium", "high", "xhigh"} <= set(REASONING_EFFORTS)
    for effort in REASONING_EFFORTS:
        config = load_run_config(None, RunFlags(tasks=TASKS, models=["openai/x"], reasoning_effort=effort))
        assert config.models[0].reasoning_effort == effort
    for bad in ("HIGH", "hi", "", "high ", "default"):
        with pytest.raises(
            UserError, match=r"^--reasoning-effort: .* is not a reasoning effort the API accepts"
        ):
            load_run_config(None, RunFlags(tasks=TASKS, models=["openai/x"], reasoning_effort=bad))
    # A config file is held to the same list.
    path = config_file(tmp_path, "models: [{name: openai/x, reasoning_effort: ultra}]\n")
    with pytest.raises(
        UserError, match=r"run.yaml: line 2: field 'models.0.reasoning_effort': 'ultra' is not"
    ):
        load_run_config(path, RunFlags())


def test_quickstart_with_a_real_model_does_not_inherit_the_local_servers_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from proctor.agent.cli.run_cmd import quickstart_config

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    config = quickstart_config("openai/real", None, None)
    (model,) = config.models
    assert model.name == "openai/real"
    assert (model.max_connections, model.max_retries, model.request_timeout_s) == (8, 6, 600.0)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["-M", "temperature=hot"], "-M temperature=hot: temperature: "),
        (["-M", "seeed=1"], "-M seeed=1: unknown model setting 'seeed'"),
        (["--reasoning-effort", "extreme"], "--reasoning-effort: 'extreme' is not a reasoning effort"),
        (["--limit", "0"], "field 'limit_tasks': expected N or A-B"),
        (["--limit", "5-2"], "field 'limit_tasks': expected N or A-B"),
        (["--filter", "nofield=1"], "field 'task_filter': no task has a field 'nofield'"),
        (["--task-id", ""], "--task-id '': an empty pattern selects nothing"),
    ],
)
def test_bad_flags_exit_2_with_one_line(
    argv: list[str], needle: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from proctor.agent.cli import main

    base = ["proctor", "run", "--tasks", str(TASKS), "--model", "openai/m", "--dry-run"]
    monkeypatch.setattr("sys.argv", [*base, *argv])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("proctor: error: ") and needle in lines[0], captured.err
    assert captured.out == ""


def test_judge_settings_reach_only_the_judge(tmp_path: Path) -> None:
    flags = RunFlags(
        judge_settings=["base_url=http://127.0.0.1:9100/v1", "api_key_env=JUDGE_2", "reasoning_effort=low"],
        model_settings=["temperature=0.3"],
    )
    config = load_run_config(config_file(tmp_path, ONE_MODEL), flags)
    assert config.judge is not None
    assert (config.judge.base_url, config.judge.api_key_env, config.judge.reasoning_effort) == (
        "http://127.0.0.1:9100/v1",
        "JUDGE_2",
        "low",
    )
    assert config.judge.temperature is None and config.models[0].temperature == 0.3
    assert config.models[0].base_url == "http://127.0.0.1:8000/v1"
    with pytest.raises(UserError, match="max_output_tokens is the run's budget, not the judge's"):
        load_run_config(config_file(tmp_path, ONE_MODEL), RunFlags(judge_settings=["max_tokens=5"]))
    with pytest.raises(UserError, match=r"--judge-setting seed=1: this run has no judge entry"):
        load_run_config(None, RunFlags(tasks=TASKS, models=["openai/m"], judge_settings=["seed=1"]))
    with pytest.raises(UserError, match="--judge-setting top_p=2: top_p: "):
        load_run_config(config_file(tmp_path, ONE_MODEL), RunFlags(judge_settings=["top_p=2"]))
