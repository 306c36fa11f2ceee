"""A judged run end to end (scripted model and judge over HTTP, real openai SDK): the record
keeps the exact judge prompt and the reference, and judge tokens and cost reach summary.json,
the terminal summary and the report, at the judge's own prices."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from proctor.agent.inputs.config import ModelConfig, RunConfig
from proctor.agent.report.loader import load_run
from proctor.agent.report.page import render_report
from proctor.agent.run.progress import print_final
from proctor.agent.run.runner import execute_run
from proctor.agent.text.capped_text import text_sha256
from tests.runner.conftest import quiet_progress
from tests.support.scripted_server import Reply, ReportedUsage, ScriptedServer, Step

# Hostile text in the reference, the answer and the judge's reply (rendering is checked elsewhere
# too; here it must survive the real run and the record exactly).
HOSTILE_REFERENCE = 'E = mc^2 </script><img src=x onerror="window.__pwned=1"> \u2028 end'
MODEL_USAGE = ReportedUsage(prompt_tokens=100, completion_tokens=50)
JUDGE_USAGE = ReportedUsage(prompt_tokens=1000, completion_tokens=250)
MODEL_PRICES = (1.0, 4.0)
JUDGE_PRICES = (3.0, 12.0)


def model_script(request: dict[str, Any], index: int) -> Step:
    return Reply(content="Work... FINAL ANSWER: [click](javascript:alert(1)) </script>", usage=MODEL_USAGE)


def judge_script(request: dict[str, Any], index: int) -> Step:
    prompt = request["messages"][-1]["content"]
    verdict = "CORRECT" if "TASK-ONE" in prompt else "INCORRECT"
    return Reply(content=f"Compared </script><b>carefully</b>.\nVERDICT: {verdict}", usage=JUDGE_USAGE)


def read_records(path: Path) -> list[dict[str, Any]]:
    # Split on "\n" only: str.splitlines() would also split inside a record at U+2028.
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


@pytest.fixture(scope="module")
def judged_run_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    import asyncio

    tmp = tmp_path_factory.mktemp("judged-e2e")
    tasks = tmp / "tasks.jsonl"
    tasks.write_text(
        "\n".join(
            json.dumps({"id": task_id, "question": f"{marker}: what is E?", "answer": HOSTILE_REFERENCE})
            for task_id, marker in (("o1", "TASK-ONE"), ("o2", "TASK-TWO"))
        )
        + "\n"
    )
    with ScriptedServer(model_script) as model_server, ScriptedServer(judge_script) as judge_server:
        config = RunConfig(
            track="olympiad",
            tasks=tasks,
            out=tmp / "run",
            models=[
                ModelConfig(
                    name="openai/student",
                    base_url=model_server.base_url,
                    max_retries=0,
                    input_price_per_mtok=MODEL_PRICES[0],
                    output_price_per_mtok=MODEL_PRICES[1],
                )
            ],
            judge=ModelConfig(
                name="openai/judge-x",
                base_url=judge_server.base_url,
                max_retries=0,
                input_price_per_mtok=JUDGE_PRICES[0],
                output_price_per_mtok=JUDGE_PRICES[1],
            ),
            trials=2,
        )
        result = asyncio.run(execute_run(config, progress=quiet_progress(), handle_signals=False))
        judge_bodies = judge_server.bodies()
    assert result.status == "finished"
    return tmp / "run", judge_bodies


def test_record_keeps_the_exact_judge_prompt_and_the_reference(judged_run_dir) -> None:
    run_dir, judge_bodies = judged_run_dir
    records = read_records(run_dir / "samples.jsonl")
    sent = [body["messages"][-1]["content"] for body in judge_bodies]
    assert len(records) == 4 and len(sent) == 4
    for record in records:
        judge = record["judge"]
        assert judge["prompt"] in sent  # byte for byte what went to the judge
        assert judge["prompt_chars"] == len(judge["prompt"])
        assert judge["prompt_sha256"] == text_sha256(judge["prompt"])
        assert HOSTILE_REFERENCE in judge["prompt"]
        assert judge["replies"][0].startswith("Compared </script>")
        assert record["reference"] == {"kind": "answer", "text": HOSTILE_REFERENCE, "tolerance": None}
        assert judge["model"] == "openai/judge-x"


def test_judge_tokens_and_cost_reach_summary_cli_and_report(judged_run_dir) -> None:
    run_dir, _ = judged_run_dir
    summary = json.loads((run_dir / "summary.json").read_text())
    overall = summary["overall"]
    judge = overall["judge"]
    assert (judge["samples_judged"], judge["attempts"]) == (4, 4)
    assert (judge["input_tokens"], judge["output_tokens"]) == (4 * 1000, 4 * 250)
    judge_cost = 4 * (1000 * JUDGE_PRICES[0] + 250 * JUDGE_PRICES[1]) / 1e6
    model_cost = 4 * (100 * MODEL_PRICES[0] + 50 * MODEL_PRICES[1]) / 1e6
    assert judge["cost_usd"] == pytest.approx(judge_cost)  # 0.024
    assert overall["cost_usd"] == pytest.approx(model_cost)  # 0.0012
    assert overall["total_cost_usd"] == pytest.approx(judge_cost + model_cost)
    assert overall["cost_priced"] == ["models", "judge"]
    # The answering tokens stay the model's own.
    assert overall["tokens"]["total"] == 4 * 150

    out = io.StringIO()
    print_final(Console(file=out, width=200), summary, str(run_dir))
    text = out.getvalue()
    assert "judge 4 samples, 4 attempts, 4,000 in / 1,000 out tokens" in text
    assert "total cost $0.0252 (models $0.0012 + judge $0.0240)" in text

    html = render_report(load_run(run_dir))
    facts = dict(re.findall(r'data-fact="([^"]+)">[^<]*<b>([^<]*)</b>', html))
    assert facts["judge"].startswith("openai/judge-x")
    totals = re.search(r'<p class="totals">(.*?)</p>', html).group(1)
    assert "judge 5,000 tokens" in totals
    assert "cost $0.0252 (models $0.0012 + judge $0.0240)" in totals
    # A judged run has no sandbox and no token budget: the totals do not talk about them.
    assert "sandbox calls" not in totals and "forced submissions" not in totals


def submitting_script(request: dict[str, Any], index: int) -> Step:
    from tests.support.scripted_server import ToolCallSpec

    code = "def answer():\n    return 42\n"
    return Reply(tool_calls=[ToolCallSpec("submit_answer", json.dumps({"code": code}))], usage=MODEL_USAGE)


VERIFY_SOURCE = "def verify(a):\n    # </script><img src=x onerror=alert(1)>\n    return a == 42\n"


def test_frontiermath_records_and_report_show_the_verification_code(tmp_path: Path) -> None:
    """A real FrontierMath run on the local sandbox: verify() ran, and its source is in the
    record and in the sample's view; an expected-value task shows the value and tolerance."""
    import asyncio

    from proctor.agent.inputs.config import SandboxConfig

    tasks = tmp_path / "tasks.jsonl"
    rows = [
        {"id": "v", "question": "Q1", "answer_type": "Python int", "verification_code": VERIFY_SOURCE},
        {"id": "e", "question": "Q2", "answer_type": "Python float", "answer": "41.5", "tolerance": 0.5},
    ]
    tasks.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with ScriptedServer(submitting_script) as server:
        config = RunConfig(
            track="frontiermath",
            tasks=tasks,
            out=tmp_path / "run",
            models=[ModelConfig(name="openai/student", base_url=server.base_url, max_retries=0)],
            sandbox=SandboxConfig(backend="local", pool_size=1, calibrate=False),
        )
        result = asyncio.run(execute_run(config, progress=quiet_progress(), handle_signals=False))
    assert result.status == "finished"
    records = {r["task_id"]: r for r in read_records(tmp_path / "run" / "samples.jsonl")}
    assert records["v"]["outcome"] == "correct" and records["e"]["outcome"] == "correct"
    assert records["v"]["reference"] == {"kind": "verify", "text": VERIFY_SOURCE, "tolerance": None}
    assert records["e"]["reference"] == {"kind": "expected", "text": "41.5", "tolerance": 0.5}
    html = render_report(load_run(tmp_path / "run"))
    blocks = dict(re.findall(r'<script type="application/json" id="([^"]+)">(.*?)</script>', html, re.S))
    shown = [
        json.loads(body)["reference"] for key, body in blocks.items() if re.fullmatch(r"sample-\d+", key)
    ]
    assert {"kind": "verify", "text": VERIFY_SOURCE, "tolerance": None} in shown
    assert "<img src=x" not in html
