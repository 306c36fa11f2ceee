"""`proctor rescore` on a judged run: a new judge or a fixed endpoint, never the answering model.

Attacks: a run directory whose run.json points the judge (and your key) at another server;
``--out`` naming the original run; the original's files must come out byte-identical.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proctor.agent.errors import UserError
from tests.rescore.conftest import StoredResearchRun, fixed_points_judge, read_lines, rescore
from tests.support.scripted_server import HttpError, ScriptedServer


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


async def test_a_new_judge_changes_the_verdicts_and_the_model_gets_no_request(
    research_run: StoredResearchRun, tmp_path: Path
) -> None:
    before = snapshot(research_run.directory)
    model_calls, judge_a_calls = research_run.model_server.call_count, research_run.judge_server.call_count
    original = {
        (r["task_id"], r["trial"]): r["outcome"] for r in read_lines(research_run.directory / "samples.jsonl")
    }
    assert original[("r1", 0)] == "correct" and original[("r3", 0)] == "judge_error"

    with ScriptedServer(fixed_points_judge(2)) as judge_b:
        result = await rescore(
            research_run.directory,
            tmp_path / "again",
            judge="openai/judge-b",
            judge_base_url=judge_b.base_url,
        )
        assert judge_b.call_count == 6  # one judge call per sample

    assert result.status == "finished" and result.rescored_now == 6
    assert research_run.model_server.call_count == model_calls, "the answering model was called"
    assert research_run.judge_server.call_count == judge_a_calls, "the old judge was called"
    records = read_lines(tmp_path / "again" / "samples.jsonl")
    assert {r["outcome"] for r in records} == {"incorrect"}
    assert {r["score"] for r in records} == {2.0}
    assert all(r["judge"]["model"] == "openai/judge-b" for r in records)
    by_key = {(r["task_id"], r["trial"]): r for r in records}
    assert by_key[("r1", 0)]["rescore"]["previous_outcome"] == "correct"
    assert by_key[("r3", 1)]["rescore"]["previous_outcome"] == "judge_error"
    # The answers themselves are the stored ones.
    assert by_key[("r1", 0)]["transcript"][-1]["content"] == "My answer, MARK-8."

    header = json.loads((tmp_path / "again" / "run.json").read_text())
    assert header["rescored_from"]["run_id"] == "run"
    assert header["rescored_from"]["path"] == str(research_run.directory.resolve())
    assert any(change.startswith("judge: openai/judge-a") for change in header["rescore"]["changes"])
    assert header["rescore"]["judge_endpoint"] == judge_b.base_url
    assert header["rescore"]["rescored"] == 6 and header["status"] == "finished"
    summary = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert summary["overall"]["accuracy"]["mean"] == 0.0 and summary["overall"]["errors"]["total"] == 0
    assert snapshot(research_run.directory) == before, "the original run was modified"


async def test_a_fixed_judge_endpoint_grades_the_judge_errors_again(
    research_run: StoredResearchRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # First the endpoint is broken: every sample ends judge_error (and the run keeps them apart).
    with ScriptedServer(lambda request, index: HttpError(500, "down")) as broken:
        monkeypatch.setenv("OPENAI_BASE_URL", broken.base_url)
        failed = await rescore(research_run.directory, tmp_path / "broken", max_concurrency=2)
        monkeypatch.delenv("OPENAI_BASE_URL")
    assert {r["outcome"] for r in read_lines(tmp_path / "broken" / "samples.jsonl")} == {"judge_error"}
    assert failed.summary["overall"]["errors"]["judge_error"] == 6

    # Then the same judge at a working endpoint, re-scoring the failed re-score.
    with ScriptedServer(fixed_points_judge(9)) as fixed:
        await rescore(tmp_path / "broken", tmp_path / "fixed", judge_base_url=fixed.base_url)
    records = read_lines(tmp_path / "fixed" / "samples.jsonl")
    assert {(r["outcome"], r["rescore"]["previous_outcome"]) for r in records} == {("correct", "judge_error")}
    assert research_run.model_server.call_count == 6


async def test_a_run_directory_cannot_send_the_key_to_a_server_it_names(
    research_run: StoredResearchRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VICTIM_SECRET", "s3cret")
    header_path = research_run.directory / "run.json"
    header = json.loads(header_path.read_text())
    with ScriptedServer(fixed_points_judge(10)) as thief:
        for endpoint in ({"base_url": thief.base_url}, {"api_key_env": "VICTIM_SECRET"}):
            header["config"]["judge"].update(endpoint)
            header_path.write_text(json.dumps(header))
            with pytest.raises(
                UserError, match=r"run\.json: field 'config\.judge': the run names the judge endpoint"
            ):
                await rescore(research_run.directory, tmp_path / "stolen")
        assert thief.call_count == 0
        assert not (tmp_path / "stolen").exists()
        # Confirming the endpoint on the command line is the user's decision, and works.
        await rescore(
            research_run.directory,
            tmp_path / "confirmed",
            judge_base_url=thief.base_url,
            judge_key_env="OPENAI_API_KEY",
        )
        assert thief.call_count == 6
        assert {r.headers.get("authorization") for r in thief.requests} == {"Bearer test"}


async def test_out_may_not_be_the_original_run(research_run: StoredResearchRun) -> None:
    before = snapshot(research_run.directory)
    link = research_run.directory.parent / "link"
    link.symlink_to(research_run.directory)
    for out in (
        research_run.directory,
        research_run.directory / ".." / research_run.directory.name,
        research_run.directory / "inside",
        link,
        link / "inside",
    ):
        with pytest.raises(
            UserError, match="lies in the run being re-scored; the original is never modified"
        ):
            await rescore(
                research_run.directory, out, judge="openai/other", judge_base_url="http://127.0.0.1:9/v1"
            )
    assert snapshot(research_run.directory) == before


async def test_a_judge_for_an_unjudged_track_is_refused(
    research_run: StoredResearchRun, tmp_path: Path
) -> None:
    header_path = research_run.directory / "run.json"
    text = header_path.read_text()
    assert '"track": "research"' in text
    with pytest.raises(UserError, match="field 'track'"):
        header_path.write_text(text.replace('"track": "research"', '"track": "echo"', 1))
        await rescore(research_run.directory, tmp_path / "x")


async def test_samples_without_an_answer_are_carried_over_and_not_sent_to_the_judge(
    research_run: StoredResearchRun, tmp_path: Path
) -> None:
    samples = research_run.directory / "samples.jsonl"
    lines = read_lines(samples)
    # As a run records it when the model endpoint failed for good: no reply in the transcript, no
    # judge, nothing earned (a record that still claims points is refused: test_rescore_bad_data).
    lines[0].update(
        outcome="model_error",
        error="model failed: 401",
        transcript=lines[0]["transcript"][:1],
        score=0.0,
        success=False,
        judge=None,
    )
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with ScriptedServer(fixed_points_judge(9)) as judge:
        first = await rescore(
            research_run.directory, tmp_path / "again", judge="openai/j", judge_base_url=judge.base_url
        )
        assert judge.call_count == 5
        # Resuming a finished re-score writes nothing again: the carried-over sample is done too.
        await rescore(
            research_run.directory,
            tmp_path / "again",
            resume=True,
            judge="openai/j",
            judge_base_url=judge.base_url,
        )
        assert judge.call_count == 5
    records = read_lines(tmp_path / "again" / "samples.jsonl")
    assert len(records) == 6 and first.rescored_now == 5
    key = (lines[0]["task_id"], lines[0]["trial"])
    (carried,) = [r for r in records if (r["task_id"], r["trial"]) == key]
    assert carried["outcome"] == "model_error"
    assert carried["rescore"]["rescored"] is False and carried["rescore"]["reason"].startswith("model_error")
    assert carried["error"] == "model failed: 401" and carried["judge"] == lines[0]["judge"]
    header = json.loads((tmp_path / "again" / "run.json").read_text())
    assert header["rescore"]["carried_over"] == 1 and header["rescore"]["rescored"] == 5


async def test_a_judge_that_refuses_the_key_stops_the_rescore_at_once(
    research_run: StoredResearchRun, tmp_path: Path
) -> None:
    """401 is not retried per sample: the first refusal stops the re-score, as it stops a run;
    what was graded is kept and `--resume` can finish the rest with a working key."""
    with ScriptedServer(lambda request, index: HttpError(401, "judge key revoked")) as refusing:
        result = await rescore(
            research_run.directory,
            tmp_path / "stopped",
            judge="openai/judge-b",
            judge_base_url=refusing.base_url,
            max_concurrency=1,
        )
        assert refusing.call_count == 1, "the refused key was tried again"
    assert result.status == "stopped: auth"
    header = json.loads((tmp_path / "stopped" / "run.json").read_text())
    assert header["status"] == "stopped: auth" and header["sessions"][-1]["stopped"]["kind"] == "auth"
    assert len(read_lines(tmp_path / "stopped" / "samples.jsonl")) <= 1


async def test_a_carried_over_harness_error_gains_the_reference_every_record_carries(
    research_run: StoredResearchRun, tmp_path: Path
) -> None:
    samples = research_run.directory / "samples.jsonl"
    lines = read_lines(samples)
    # As an older run recorded a harness error: no reference, nothing graded.
    lines[0].update(
        outcome="harness_error",
        error="RuntimeError: bug",
        reference=None,
        judge=None,
        success=False,
        score=0.0,
    )
    graded_reference = lines[1]["reference"]
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with ScriptedServer(fixed_points_judge(9)) as judge:
        out = tmp_path / "again"
        await rescore(research_run.directory, out, judge="openai/j", judge_base_url=judge.base_url)
    records = read_lines(tmp_path / "again" / "samples.jsonl")
    key = (lines[0]["task_id"], lines[0]["trial"])
    (carried,) = [r for r in records if (r["task_id"], r["trial"]) == key]
    assert carried["outcome"] == "harness_error" and carried["rescore"]["rescored"] is False
    # The same kind of reference the graded records carry, from the tasks file.
    assert carried["reference"]["kind"] == graded_reference["kind"] == "rubric"
    (task,) = [t for t in read_lines(research_run.tasks) if t["id"] == lines[0]["task_id"]]
    assert carried["reference"]["text"] == task["rubric"]


@pytest.mark.parametrize(("recorded", "options", "expected"), [(True, {}, True), (False, {}, False)])
def test_an_olympiad_run_is_rescored_with_the_precheck_setting_it_ran_under(
    tmp_path: Path, recorded: bool, options: dict[str, Any], expected: bool
) -> None:
    """A run recorded when the pre-check was on by default states no ``precheck`` option; its
    re-grade must not silently switch to today's judge-only default (or the other way)."""
    from proctor.agent.inputs.config import RunConfig
    from proctor.agent.rescore.settings import RescoreFlags, rescore_config
    from proctor.agent.rescore.stored_run import StoredRun

    tasks = tmp_path / "olympiad.jsonl"
    tasks.write_text('{"id": "t1", "question": "q", "answer": "1"}\n', encoding="utf-8")
    config = RunConfig.model_validate(
        {
            "track": "olympiad",
            "tasks": str(tasks),
            "models": [{"name": "openai/m"}],
            "judge": {"name": "openai/j"},
            "track_options": options,
        }
    )
    header = {"run_id": "r", "track": "olympiad", "track_settings": {"precheck": recorded}}
    stored = StoredRun(directory=tmp_path, header=header, config=config, samples=[])
    made = rescore_config(stored, None, RescoreFlags(judge="openai/j"))
    assert made.track_options.get("precheck") is expected
    # A stated option is the user's: it is kept whatever the run recorded.
    stated = StoredRun(
        directory=tmp_path,
        header=header,
        config=config.model_copy(update={"track_options": {"precheck": not recorded}}),
        samples=[],
    )
    assert (
        rescore_config(stated, None, RescoreFlags(judge="openai/j")).track_options["precheck"] is not recorded
    )
