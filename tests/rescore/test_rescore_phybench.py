"""PHYBench re-scored: EED recomputed from the stored boxed answers against the current tasks
file (a corrected reference), with the mode a --config file sets; no model request is made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import ModelConfig, RunConfig
from proctor.agent.run.runner import execute_run
from tests.rescore.conftest import quiet_progress, read_lines, rescore
from tests.support.scripted_server import Reply, ScriptedServer


def write_tasks(path: Path, reference: str) -> Path:
    row = {"id": "rod", "question": "Find the angular speed.", "answer": reference, "subject": "mechanics"}
    path.write_text(json.dumps(row) + "\n")
    return path


async def test_eed_is_recomputed_against_the_corrected_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    reply = r"So $\boxed{\sqrt{3g/L}}$."
    wrong = write_tasks(tmp_path / "wrong.jsonl", r"\sqrt{\frac{2 g}{L}}")
    with ScriptedServer(lambda request, index: Reply(content=reply)) as server:
        config = RunConfig(
            track="phybench",
            tasks=wrong,
            out=tmp_path / "run",
            models=[ModelConfig(name="openai/physicist", base_url=server.base_url, max_retries=0)],
        )
        assert (
            await execute_run(config, progress=quiet_progress(), handle_signals=False)
        ).status == "finished"
        (before,) = read_lines(tmp_path / "run" / "samples.jsonl")
        assert before["outcome"] == "incorrect" and before["eed"]["score"] < 100
        calls = server.call_count

        fixed = write_tasks(tmp_path / "fixed.jsonl", r"\sqrt{\frac{3 g}{L}}")
        settings = tmp_path / "rescore.yaml"
        # A whole run config may be given; only its grading fields are taken.
        settings.write_text(
            "track: phybench\nmodels: [openai/never-called]\ntasks: fixed.jsonl\n"
            "track_options: {eed_mode: fixed}\n"
        )
        result = await rescore(tmp_path / "run", tmp_path / "again", config_file=settings)
        assert server.call_count == calls
        with pytest.raises(UserError, match="the phybench track has no judge"):
            await rescore(tmp_path / "run", tmp_path / "judged", judge="openai/j")

    (after,) = read_lines(tmp_path / "again" / "samples.jsonl")
    assert after["outcome"] == "correct" and after["eed"]["score"] == 100.0
    assert after["eed"]["extracted_answer"] == r"\sqrt{3g/L}"
    # The record shows the reference it was graded against now, not the run's.
    assert before["reference"]["text"] == r"\sqrt{\frac{2 g}{L}}"
    assert after["reference"]["text"] == r"\sqrt{\frac{3 g}{L}}"
    assert after["rescore"] == {**after["rescore"], "rescored": True, "previous_outcome": "incorrect"}
    header = json.loads((tmp_path / "again" / "run.json").read_text())
    assert header["track_settings"]["eed_mode"] == "fixed"
    assert header["tasks_file"]["path"] == str(fixed.resolve())
    assert header["models"][0]["name"] == "openai/physicist"
    assert result.summary["overall"]["eed"]["mean"] == 100.0
