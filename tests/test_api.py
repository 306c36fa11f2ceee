"""`import proctor`: the documented Python API (docs/api.md) and the installed package layout.

Runs go through the real runner against scripted OpenAI-compatible servers on 127.0.0.1 (real
HTTP, the real openai SDK), on the Research track, which needs no sandbox.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

import proctor
from proctor.agent.errors import UserError
from tests.support.scripted_server import Reply, ScriptedServer, Step

REPO = Path(__file__).resolve().parents[1]


def student(request: dict[str, Any], index: int) -> Step:
    problem = str(request["messages"][-1]["content"])
    return Reply(content="Answer: " + ("ten" if "ten" in problem else "two"))


def judge(request: dict[str, Any], index: int) -> Step:
    prompt = str(request["messages"][-1]["content"])
    # The prompt quotes the answer last; award points by what the student said.
    points = 9 if prompt.rfind("Answer: ten") > prompt.rfind("Answer: two") else 3
    return Reply(content=f"Graded against the rubric.\nVERDICT: {points}")


def write_tasks(path: Path) -> Path:
    rows = [
        {"id": "r-ten", "question": "Explain why ten.", "rubric": "10 points.", "subject": "physics"},
        {"id": "r-two", "question": "Explain why two.", "rubric": "10 points.", "subject": "chemistry"},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def config_for(tmp_path: Path, model_url: str, judge_url: str, **extra: Any) -> dict[str, Any]:
    return {
        "track": "research",
        "tasks": str(write_tasks(tmp_path / "tasks.jsonl")),
        "models": [{"name": "openai/student", "base_url": model_url, "max_retries": 0}],
        "judge": {"name": "openai/judge", "base_url": judge_url, "max_retries": 0},
        "trials": 2,
        **extra,
    }


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "scripted")
    with ScriptedServer(student) as model_server, ScriptedServer(judge) as judge_server:
        yield model_server, judge_server


def check_finished(run: proctor.Run, out: Path) -> None:
    assert run.path == out and run.status == "finished"
    assert len(run.samples) == 4
    outcomes = {(s.task_id, s.trial): s.outcome.value for s in run.samples}
    assert outcomes == {("r-ten", 0): "correct", ("r-ten", 1): "correct"} | {
        ("r-two", 0): "incorrect",
        ("r-two", 1): "incorrect",
    }
    assert run.summary["finished_samples"] == 4
    assert run.summary == json.loads((out / "summary.json").read_text())


def test_run_from_a_mapping_writes_the_run_the_cli_would(tmp_path: Path, servers) -> None:
    model_server, judge_server = servers
    out = tmp_path / "run"
    run = proctor.run(config_for(tmp_path, model_server.base_url, judge_server.base_url), out=out)
    check_finished(run, out)
    # The same directory, read back, is the same run.
    again = proctor.load_run(out)
    assert again.records() == run.records() and again.header == run.header


def test_run_from_a_yaml_file_resolves_paths_against_the_file(tmp_path: Path, servers) -> None:
    model_server, judge_server = servers
    config = config_for(tmp_path, model_server.base_url, judge_server.base_url)
    config["tasks"] = "tasks.jsonl"  # relative to the YAML file, as for `proctor run FILE`
    config_file = tmp_path / "run.yaml"
    config_file.write_text(json.dumps(config))  # JSON is YAML
    out = tmp_path / "yaml-run"
    check_finished(proctor.run(config_file, out=out), out)


def test_run_works_inside_a_running_event_loop_like_a_notebook(tmp_path: Path, servers) -> None:
    model_server, judge_server = servers
    out = tmp_path / "nb-run"
    config = config_for(tmp_path, model_server.base_url, judge_server.base_url)

    async def notebook_cell() -> proctor.Run:
        return proctor.run(config, out=out)

    check_finished(asyncio.run(notebook_cell()), out)


async def test_run_async_uses_the_callers_loop(tmp_path: Path, servers) -> None:
    model_server, judge_server = servers
    out = tmp_path / "async-run"
    run = await proctor.run_async(config_for(tmp_path, model_server.base_url, judge_server.base_url), out=out)
    check_finished(run, out)


def test_bad_config_is_one_line_naming_the_field_before_any_request(tmp_path: Path, servers) -> None:
    model_server, judge_server = servers
    config = config_for(tmp_path, model_server.base_url, judge_server.base_url, trials=0)
    with pytest.raises(UserError) as caught:
        proctor.run(config, out=tmp_path / "never")
    message = str(caught.value)
    assert "trials" in message and "\n" not in message
    assert model_server.requests == [] and judge_server.requests == []
    assert not (tmp_path / "never").exists()
    with pytest.raises(TypeError, match="not int"):
        proctor.run(42)  # type: ignore[arg-type]


def test_load_run_refuses_a_damaged_line_naming_file_and_line(tmp_path: Path, servers) -> None:
    model_server, judge_server = servers
    out = tmp_path / "run"
    proctor.run(config_for(tmp_path, model_server.base_url, judge_server.base_url), out=out)
    samples = out / "samples.jsonl"
    lines = samples.read_text().splitlines()
    lines[2] = lines[2].replace('"outcome":', '"outcome": 7, "x":', 1)
    samples.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError) as caught:
        proctor.load_run(out)
    message = str(caught.value)
    assert f"{samples}: line 3: field 'outcome'" in message and "\n" not in message
    with pytest.raises(UserError, match="not a run directory"):
        proctor.load_run(tmp_path)


def test_load_run_computes_the_summary_when_the_run_never_wrote_one(tmp_path: Path, servers) -> None:
    model_server, judge_server = servers
    out = tmp_path / "run"
    written = proctor.run(config_for(tmp_path, model_server.base_url, judge_server.base_url), out=out)
    (out / "summary.json").unlink()  # as after a kill -9
    recomputed = proctor.load_run(out).summary
    assert recomputed["finished_samples"] == 4
    assert recomputed["overall"]["outcomes"] == written.summary["overall"]["outcomes"]
    assert recomputed["overall"]["outcomes"] == {"correct": 2, "incorrect": 2}
    assert recomputed["overall"]["accuracy"] == written.summary["overall"]["accuracy"]


def test_dataframe_has_one_row_per_sample(tmp_path: Path, servers) -> None:
    pandas = pytest.importorskip("pandas", reason="pandas is in the dev extra")
    model_server, judge_server = servers
    out = tmp_path / "run"
    run = proctor.run(config_for(tmp_path, model_server.base_url, judge_server.base_url), out=out)
    frame = run.to_dataframe()
    assert isinstance(frame, pandas.DataFrame) and len(frame) == 4
    by_task = frame.groupby("task_id")["success"].mean().to_dict()
    assert by_task == {"r-ten": 1.0, "r-two": 0.0}
    assert "transcript" not in frame.columns and "outcome" in frame.columns


def test_dataframe_has_turns_and_each_samples_cost_and_the_judges(tmp_path: Path, servers) -> None:
    pytest.importorskip("pandas", reason="pandas is in the dev extra")
    model_server, judge_server = servers
    config = config_for(tmp_path, model_server.base_url, judge_server.base_url)
    config["models"][0] |= {"input_price_per_mtok": 2.0, "output_price_per_mtok": 8.0}
    config["judge"] |= {"input_price_per_mtok": 1.25, "output_price_per_mtok": 10.0}
    run = proctor.run(config, out=tmp_path / "run")
    frame = run.to_dataframe().set_index(["task_id", "trial"])
    for sample in run.samples:
        row = frame.loc[(sample.task_id, sample.trial)]
        assert row["turns"] == len(sample.turns) and row["turns"] >= 1
        assert row["cost_usd"] == pytest.approx(
            (sample.input_tokens * 2.0 + sample.output_tokens * 8.0) / 1e6
        )
        assert sample.judge is not None
        expected = (sample.judge.input_tokens * 1.25 + sample.judge.output_tokens * 10.0) / 1e6
        assert row["judge_cost_usd"] == pytest.approx(expected)
    # Per sample, they add up to what the summary reports for the run.
    overall = run.summary["overall"]
    assert frame["cost_usd"].sum() == pytest.approx(overall["cost_usd"])
    assert frame["judge_cost_usd"].sum() == pytest.approx(overall["judge"]["cost_usd"])
    # Without prices, cost is unknown (None), not zero.
    unpriced = proctor.run(
        config_for(tmp_path, model_server.base_url, judge_server.base_url), out=tmp_path / "u"
    )
    frame = unpriced.to_dataframe()
    assert frame["cost_usd"].isna().all() and frame["judge_cost_usd"].isna().all()


def test_dataframe_without_pandas_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = proctor.Run(path=tmp_path, header={}, summary={}, samples=[])
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        run.to_dataframe()


def test_the_sandbox_part_imports_without_the_agent_part() -> None:
    code = (
        "import sys, proctor.sandbox, proctor\n"
        "proctor.open_sandbox\n"
        "assert not [m for m in sys.modules if m.startswith('proctor.agent')], sys.modules\n"
        "print(proctor.__version__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


@pytest.mark.slow
def test_the_wheel_installs_only_the_proctor_package(tmp_path: Path) -> None:
    """No top-level `agent` or `sandbox` in site-packages: only `proctor` (issue 15)."""
    source = tmp_path / "source"  # a copy: building writes build/ and *.egg-info beside the sources
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, source / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("proctor", "agent", "sandbox"):
        shutil.copytree(REPO / name, source / name, symlinks=True, ignore=skip)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            ".",
        ],
        capture_output=True,
        text=True,
        cwd=source,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("proctor-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        scripts = archive.read(entry_points).decode()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"proctor"}
    assert "proctor/agent/cli/__init__.py" in names and "proctor/sandbox/api.py" in names
    assert "proctor/agent/report/assets/" in "".join(names)  # package data comes along
    # KaTeX's files the report inlines come along where npm installed them, npm's tree does not.
    assert not [name for name in names if "/commander/" in name or name.endswith("katex.ts")]
    if (REPO / "agent/report/katex/node_modules/katex/dist/katex.min.js").exists():
        assert "proctor/agent/report/katex/node_modules/katex/dist/katex.min.js" in names
        assert len([name for name in names if name.endswith(".woff2")]) >= 19
    assert "proctor = proctor.agent.cli:main" in scripts


def _python_blocks(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    return [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]


@pytest.mark.slow
def test_open_sandbox_is_a_coroutine_as_the_docs_show() -> None:
    import inspect

    assert inspect.iscoroutinefunction(proctor.open_sandbox)
    assert inspect.iscoroutinefunction(proctor.Sandbox.exec)
    # Every documented call is awaited: a call without await hands back a coroutine object.
    for page in (REPO / "docs" / "api.md", REPO / "docs" / "sandbox.md"):
        for block in _python_blocks(page):
            for line in block.splitlines():
                if "open_sandbox(" in line and not line.lstrip().startswith(("from ", "import ")):
                    assert "await " in line.split("open_sandbox(")[0], f"{page.name}: {line}"
    # The API page's example runs as written (on the local backend, which needs no engine).
    [example] = [block for block in _python_blocks(REPO / "docs" / "api.md") if "open_sandbox" in block]
    done = subprocess.run(
        [sys.executable, "-c", example.replace('open_sandbox("auto")', 'open_sandbox("local")')],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "0 42", done.stdout + done.stderr
