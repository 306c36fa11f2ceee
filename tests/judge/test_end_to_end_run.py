"""`proctor run` on judged tracks: scripted model and judge endpoints, the shared runner and store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.judge.support import GOLD_DIR
from tests.judge.test_science_tasks import gold_file
from tests.support.scripted_server import Reply, ScriptedServer, Step


def write_config(
    tmp_path: Path, track: str, tasks: Path, model_url: str, judge_url: str, **extra: Any
) -> Path:
    config = {
        "track": track,
        "tasks": str(tasks),
        "models": [{"name": "openai/answerer", "base_url": model_url, "max_retries": 0}],
        "judge": {"name": "openai/grader", "base_url": judge_url, "max_retries": 0},
        "trials": 2,
        "max_concurrency": 4,
        "out": str(tmp_path / "run"),
        **extra,
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def run_proctor(config: Path, exit_code: int = 0) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    done = subprocess.run(
        # The scripts answer the tracks' prompts only; the preflight has its own tests
        # (tests/runner/test_failure_policy.py).
        [
            sys.executable,
            "-c",
            "from proctor.agent.cli import main; main()",
            "run",
            str(config),
            "--no-preflight",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == exit_code, done.stdout + done.stderr
    run_dir = config.parent / "run"
    text = (run_dir / "samples.jsonl").read_text(encoding="utf-8")
    records = [json.loads(line) for line in text.split("\n") if line]
    return records, json.loads((run_dir / "summary.json").read_text())


@pytest.mark.slow
def test_olympiad_run_counts_judge_errors_apart(tmp_path: Path) -> None:
    gold = gold_file("olympiad")
    tasks = tmp_path / "olympiad.jsonl"
    rows = gold.read_text(encoding="utf-8").splitlines()
    # Rows whose references are a plain number and a compound name, plus one expression.
    picked = [r for r in rows if json.loads(r)["answer"] in ("5.4", "Selenium dioxide (SeO2)", "0.0456M")]
    assert len(picked) == 3
    tasks.write_text("\n".join(picked) + "\n", encoding="utf-8")

    def model(request: dict[str, Any], index: int) -> Step:
        problem = request["messages"][0]["content"]
        answer = json.loads(next(r for r in picked if json.loads(r)["problem"] in problem))["answer"]
        # 5.4 -> "5.38" (pre-check); SeO2 -> a paraphrase (judge says CORRECT); 0.0456M -> judge breaks.
        final = {"5.4": "5.38", "0.0456M": "0.05 M"}.get(answer, "SeO2")
        return Reply(content=f"Reasoning...\nFINAL ANSWER: {final}")

    def judge(request: dict[str, Any], index: int) -> Step:
        prompt = request["messages"][0]["content"]
        if "The attempted answer: Reasoning...\nFINAL ANSWER: SeO2" in prompt:
            return Reply(content="Same compound.\nVERDICT: CORRECT")
        return Reply(content="I cannot decide.")

    with ScriptedServer(model) as model_server, ScriptedServer(judge) as judge_server:
        records, summary = run_proctor(
            # The pre-check is opt-in (the paper's judge grades every answer); this run opts in.
            write_config(
                tmp_path,
                "olympiad",
                tasks,
                model_server.base_url,
                judge_server.base_url,
                track_options={"precheck": True},
            ),
            # Judge errors leave samples without a result: the run is not done (exit 3).
            exit_code=3,
        )
    assert len(records) == 6 and model_server.call_count == 6
    # 2 trials x (SeO2: 1 judge call; 0.05 M: 3 calls, all unparseable, then 3 with a placeholder
    # answer, unparseable too, so the judge is blamed); 5.38 never reaches the judge.
    assert judge_server.call_count == 2 * 1 + 2 * (3 + 3)
    by_outcome: dict[str, int] = {}
    for record in records:
        by_outcome[record["outcome"]] = by_outcome.get(record["outcome"], 0) + 1
        assert record["track"] == "olympiad" and record["judge"] is not None
    assert by_outcome == {"correct": 4, "judge_error": 2}
    deciders = sorted(r["judge"]["decided_by"] for r in records if r["outcome"] == "correct")
    assert deciders == ["judge", "judge", "precheck", "precheck"]
    overall = summary["overall"]
    assert overall["errors"]["judge_error"] == 2
    assert overall["accuracy"]["mean"] == 1.0  # judge errors are not folded into the score
    assert overall["accuracy_errors_as_failures"]["mean"] < 1.0


@pytest.mark.slow
def test_research_run_reports_points_and_success_rate(tmp_path: Path) -> None:
    gold = gold_file("research")
    tasks = tmp_path / "research.jsonl"
    tasks.write_text("\n".join(gold.read_text(encoding="utf-8").splitlines()[:2]) + "\n", encoding="utf-8")
    verdicts = iter(["VERDICT: 8", "VERDICT: 3.5", "VERDICT: 7", "VERDICT: 10"])

    def judge(request: dict[str, Any], index: int) -> Step:
        return Reply(content=f"Items...\n{next(verdicts)}")

    with (
        ScriptedServer([Reply(content="An answer.")] * 4) as model_server,
        ScriptedServer(judge) as judge_server,
    ):
        records, summary = run_proctor(
            write_config(tmp_path, "research", tasks, model_server.base_url, judge_server.base_url)
        )
    assert sorted(r["score"] for r in records) == [3.5, 7.0, 8.0, 10.0]
    assert sorted(r["success"] for r in records) == [False, True, True, True]
    overall = summary["overall"]
    assert overall["points"]["mean"] == (8 + 3.5 + 7 + 10) / 4
    assert overall["accuracy"]["mean"] == 0.75
    assert GOLD_DIR.exists()
