"""Bad input files and run directories: one line naming file, line and field; exit 2; no traceback.

The attacks: task and config files nested 100,000 levels deep (JSON, JSONL, YAML), files over
the size caps, bytes that are not UTF-8, NaN and infinities spelled every way JSON and YAML
allow (and as strings pydantic would take), lone surrogates, YAML aliases that expand into a
huge tree, and ``--out`` naming a file or a path below one.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from proctor.agent.errors import UserError
from proctor.agent.inputs.input_files import MAX_NESTING
from proctor.agent.run.config_loader import RunFlags, load_run_config
from proctor.agent.tracks.science_tasks import load_science_tasks
from tests.support.cli import proctor_in_process

REPO = Path(__file__).resolve().parents[2]
DEEP = "[" * 100_000 + "]" * 100_000
GOOD_ROW = {"id": "a", "question": "q", "answer": "1"}
# Where a run that got past the check under test would send its requests: the discard port on
# 127.0.0.1, which refuses them (tests send nothing off this machine).
NOWHERE = "http://127.0.0.1:9/v1"


def proctor(*args: str, base_url: str | None = None) -> subprocess.CompletedProcess[str]:
    # In this process (tests/support/cli.py): what is tested is main()'s answer, not a process.
    env = {"OPENAI_API_KEY": "test"}
    if base_url is not None:
        env["OPENAI_BASE_URL"] = base_url
    return proctor_in_process(*args, env=env, cwd=REPO)


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith("proctor: error: ")
    return lines[0]


def run_tasks(path: Path, *extra: str, base_url: str | None = None) -> subprocess.CompletedProcess[str]:
    return proctor(
        "run",
        "--track",
        "olympiad",
        "--tasks",
        str(path),
        "--model",
        "openai/x",
        "--judge",
        "openai/j",
        *extra,
        base_url=base_url,
    )


TASK_FILE_CASES = [
    ("deep.json", f'[{{"id": "a", "x": {DEEP}}}]', "deep.json: nested too deeply"),
    ("deep.jsonl", f'{{"id": "a", "x": {DEEP}}}\n', "deep.jsonl: nested too deeply"),
    ("deep.yaml", f"- id: a\n  x: {DEEP}\n", "deep.yaml: nested too deeply"),
    (
        "nan.jsonl",
        '{"id": "a", "question": "q", "answer": "1"}\n{"id": "b", "w": NaN}\n',
        "nan.jsonl:2: field 'w': nan",
    ),
    (
        "inf.json",
        '[{"id": "a", "question": "q", "answer": 1e999}]',
        "inf.json: entry 0 (line 1): field 'answer': inf",
    ),
    (
        "inf.yaml",
        "- id: a\n  question: q\n  answer: '1'\n  metadata: {w: -.inf}\n",
        "(line 4): field 'metadata.w': -inf",
    ),
    # A key given twice: which answer is graded? json and PyYAML would keep the last silently.
    (
        "dup.jsonl",
        '{"id": "a", "question": "q", "answer": "1"}\n'
        '{"id": "b", "question": "q", "answer": "1", "answer": "2"}\n',
        "dup.jsonl:2: field 'answer': the key 'answer' appears twice",
    ),
    (
        "dup.json",
        '[{"id": "a", "question": "q", "answer": "1", "metadata": {"w": 1, "w": 2}}]',
        "dup.json: entry 0 (line 1): field 'w': the key 'w' appears twice",
    ),
    (
        "dup.yaml",
        "- id: a\n  question: q\n  answer: '1'\n  id: b\n",
        "dup.yaml:4: invalid YAML: the key 'id' appears twice (first on line 1)",
    ),
    (
        "sur.jsonl",
        '{"id": "a", "question": "q\\ud800", "answer": "1"}\n',
        "sur.jsonl:1: field 'question': holds a lone",
    ),
]


@pytest.mark.parametrize(
    ("name", "text", "needle"), TASK_FILE_CASES, ids=[case[0] for case in TASK_FILE_CASES]
)
def test_task_files_that_break_the_rules_are_one_line(
    tmp_path: Path, name: str, text: str, needle: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert needle in one_error_line(run_tasks(path))


def test_non_utf8_task_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(json.dumps(GOOD_ROW).encode() + b'\n{"id": "b", "question": "caf\xe9"}\n')
    assert "latin1.jsonl:2: task file is not UTF-8 text (byte 0xe9" in one_error_line(run_tasks(path))


def test_out_naming_a_file_or_a_path_below_one_is_a_field_error(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(GOOD_ROW) + "\n")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    line = one_error_line(run_tasks(tasks, "--out", str(blocker)))
    assert f"field 'out': {blocker} exists and is not a directory" in line
    line = one_error_line(run_tasks(tasks, "--out", str(blocker / "sub" / "run")))
    assert f"{blocker} is not a directory" in line
    assert blocker.read_text() == "x"


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        (f"models: {DEEP}\n", "nested too deeply"),
        (
            "models: [openai/x]\ntasks: t.jsonl\nsandbox: {cpus: .nan}\n",
            "field 'sandbox.cpus': nan is not a finite",
        ),
        ("models: [{name: openai/x, temperature: 'nan'}]\ntasks: t.jsonl\n", "field 'models.0.temperature'"),
        ("models: [{name: openai/x, temperature: 'Infinity'}]\ntasks: t.jsonl\n", "finite number"),
        (
            "models: [openai/x]\ntasks: t.jsonl\nsandbox: {timeout_s: 1e999}\n",
            "field 'sandbox.timeout_s': Input should be a finite number",
        ),
        (
            "models: [openai/x]\ntasks: t.jsonl\ntrials: 1\ntrials: 20\n",
            "line 4: not valid YAML (the key 'trials' appears twice",
        ),
        (
            "{models: [openai/x], tasks: t.jsonl, budget: {token_cap: 5, token_cap: 9}}\n",
            "the key 'token_cap' appears twice",
        ),
        (
            "a: &a [x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
                for p, c in zip("abcdefg", "bcdefgh", strict=True)
            ),
            "more than 5,000,000 values",
        ),
    ],
)
def test_configs_that_break_the_rules_are_user_errors(tmp_path: Path, config: str, needle: str) -> None:
    (tmp_path / "t.jsonl").write_text(json.dumps(GOOD_ROW) + "\n")
    path = tmp_path / "run.yaml"
    path.write_text(config)
    with pytest.raises(UserError, match="^" + str(path).replace(".", r"\.")) as caught:
        load_run_config(path, RunFlags())
    assert needle in str(caught.value)
    assert "\n" not in str(caught.value)


def test_config_non_utf8_and_deep_through_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_bytes(b"models: [openai/x]\n# caf\xe9\n")
    assert f"{path}:2: config file is not UTF-8 text" in one_error_line(proctor("run", str(path)))
    path.write_text(f"models: {DEEP}\n")
    assert f"{path}: nested too deeply" in one_error_line(proctor("run", str(path)))


def test_size_caps_are_checked_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import proctor.agent.inputs.tasks

    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(GOOD_ROW) + "\n" + " " * 2000 + "\n")
    monkeypatch.setattr(proctor.agent.inputs.tasks, "MAX_TASK_FILE_BYTES", 1000)
    with pytest.raises(UserError, match=r"task file is 2,0\d\d bytes; the limit is 1,000"):
        load_science_tasks(path, "olympiad")
    config = tmp_path / "run.yaml"
    config.write_text("models: [openai/x]\n" + "#" * (5 * 1024 * 1024))
    with pytest.raises(UserError, match=r"config file is 5,242,\d{3} bytes; the limit is 4,194,304"):
        load_run_config(config, RunFlags())


def test_nesting_at_the_limit_loads_and_one_deeper_does_not(tmp_path: Path) -> None:
    def nested(depth: int) -> object:
        value: object = 1
        for _ in range(depth):
            value = [value]
        return value

    path = tmp_path / "tasks.jsonl"
    # The entry itself is one level; metadata another.
    path.write_text(json.dumps({**GOOD_ROW, "metadata": {"x": nested(MAX_NESTING - 2)}}) + "\n")
    assert load_science_tasks(path, "olympiad")[0].id == "a"
    path.write_text(json.dumps({**GOOD_ROW, "metadata": {"x": nested(MAX_NESTING - 1)}}) + "\n")
    with pytest.raises(UserError, match="nested more than 64 levels deep"):
        load_science_tasks(path, "olympiad")


def test_prompt_template_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    from proctor.agent.tracks.frontiermath.prompt import load_template

    path = tmp_path / "t.txt"
    path.write_bytes(b"{question} {answer_type}\n\xff\n")
    with pytest.raises(UserError, match=r"t\.txt:2: prompt template is not UTF-8 text"):
        load_template(path)


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        (
            "big.jsonl",
            '{"id": "a", "question": "q", "answer": ' + "9" * 5000 + "}\n",
            "big.jsonl:1: a value cannot be read",
        ),
        (
            "big.json",
            '[{"id": "a", "question": "q", "answer": ' + "9" * 5000 + "}]",
            "big.json: entry 0 (line 1): a value",
        ),
        (
            "big.yaml",
            "- id: a\n  question: q\n  answer: " + "9" * 5000 + "\n",
            "big.yaml: a value cannot be read",
        ),
    ],
    ids=["jsonl", "json", "yaml"],
)
def test_integers_python_refuses_to_read_are_user_errors(
    tmp_path: Path, name: str, text: str, needle: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UserError) as caught:
        load_science_tasks(path, "olympiad")
    assert needle in str(caught.value)
    config = tmp_path / "run.yaml"
    config.write_text("models: [openai/x]\ntrials: " + "9" * 5000 + "\n")
    with pytest.raises(UserError, match=r"run\.yaml: a value cannot be read"):
        load_run_config(config, RunFlags())


def test_a_device_as_config_is_cut_off_at_the_cap() -> None:
    with pytest.raises(UserError, match="/dev/zero: config file is over 4,194,304 bytes"):
        load_run_config(Path("/dev/zero"), RunFlags())


def test_a_non_utf8_command_line_byte_is_a_field_error(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(GOOD_ROW) + "\n")
    # What Python makes of the byte 0xff in argv (surrogateescape).
    with pytest.raises(UserError, match=r"field 'models.0.name': holds a lone UTF-16 surrogate \(\\udcff\)"):
        load_run_config(None, RunFlags(tasks=tasks, models=["openai/\udcff"], track="olympiad"))


def test_proctor_view_of_a_tampered_run_is_one_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "samples.jsonl").write_bytes(b'{"run_id": "caf\xe9"}\n')
    assert "samples.jsonl:1: samples file is not UTF-8 text" in one_error_line(proctor("view", str(run)))
    (run / "samples.jsonl").write_text(DEEP + "\n")
    assert "samples.jsonl:1: nested too deeply" in one_error_line(proctor("view", str(run)))


def test_score_pairs_file_with_unreadable_lines_scores_the_rest(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        DEEP
        + "\n"
        + '{"reference": "x", "answer": '
        + "9" * 5000
        + "}\n"
        + '{"reference": "x", "answer": "x"}\n'
    )
    done = proctor("score", "eed", "--pairs", str(pairs))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{pairs}:1: nested too deeply" in done.stderr
    assert f"{pairs}:2: a value cannot be read" in done.stderr
    assert '"line": 3' in done.stdout and '"score": 100' in done.stdout
    pairs.write_bytes(b'{"reference": "caf\xe9"}\n')
    assert "pairs.jsonl:1: pairs file is not UTF-8 text" in one_error_line(
        proctor("score", "eed", "--pairs", str(pairs))
    )


@pytest.mark.parametrize("trials", [str(10**400), "10001"])
def test_trials_past_the_bound_are_one_line_not_a_plan_that_fills_memory(tmp_path: Path, trials: str) -> None:
    # 10**400 trials used to build the sample plan (a list) until memory or patience ran out.
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(GOOD_ROW) + "\n")
    config = tmp_path / "run.yaml"
    config.write_text(f"track: olympiad\ntasks: {tasks}\nmodels: [openai/x]\ntrials: {trials}\n")
    assert f"{config}: line 4: field 'trials'" in one_error_line(
        proctor("run", str(config), base_url=NOWHERE)
    )
    line = one_error_line(
        run_tasks(tasks, "--trials", trials, "--out", str(tmp_path / "run"), base_url=NOWHERE)
    )
    assert "field 'trials'" in line and not (tmp_path / "run").exists()


def test_a_plan_past_a_million_samples_is_one_line_before_the_run_directory_exists(tmp_path: Path) -> None:
    # Each factor within its bound, the product past it: 101 tasks x 10,000 trials.
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({**GOOD_ROW, "id": f"t{i}"}) + "\n" for i in range(101)))
    line = one_error_line(
        run_tasks(tasks, "--trials", "10000", "--out", str(tmp_path / "run"), base_url=NOWHERE)
    )
    assert "field 'trials'" in line and "1,010,000 samples" in line and "at most 1,000,000" in line
    assert not (tmp_path / "run").exists()


def test_a_yaml_merge_may_still_override_the_keys_it_brings(tmp_path: Path) -> None:
    # Only keys written twice are refused; `<<: *base` then a key of its own is YAML's override.
    (tmp_path / "t.jsonl").write_text(json.dumps(GOOD_ROW) + "\n")
    path = tmp_path / "run.yaml"
    path.write_text(
        "models: [&m {name: openai/x, temperature: 0.5}, {<<: *m, name: openai/y}]\ntasks: t.jsonl\n"
    )
    config = load_run_config(path, RunFlags())
    assert [(m.name, m.temperature) for m in config.models] == [("openai/x", 0.5), ("openai/y", 0.5)]
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("- &t {id: a, question: q, answer: '1'}\n- {<<: *t, id: b}\n")
    assert [t.id for t in load_science_tasks(tasks, "olympiad")] == ["a", "b"]
