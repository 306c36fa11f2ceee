"""Hostile sample content never stops the Inspect export: every sample is written and read back.

The issue's case first: a tool call whose JSON arguments nest 300 deep made Inspect's writer
raise ``SampleSerializationError`` and the whole export died with a traceback. Then hypothesis
over what a model, a sandbox or an edited run directory can put in a record: nesting (0 to
1,500 levels, past Python's own parser), text past the size bound, lone surrogates, NaN and
infinities, control characters, empty, long and colliding keys, odd task ids, times that are
not times. Properties: every record is a sample of the log ``read_eval_log`` reads back (same
ids and epochs), with its events; each value that had to change is the one the export's
``Fitter`` produces, and is noted in ``metadata.proctor_export`` (field, why, original size).

The rules themselves (``Fitter``) need no inspect_ai and are checked here in-process over many
more values. A sample Inspect still cannot write loses its events, then its messages, each noted
(checked in a child process by building such a sample directly).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from proctor.agent.export.inspect_bounds import (
    MAX_DEPTH,
    MAX_KEY_CHARS,
    MAX_TEXT_CHARS,
    Fitter,
    json_tokens,
    measure,
)
from proctor.agent.export.inspect_log import export_inspect
from proctor.agent.inputs.config import ModelConfig, RunConfig
from proctor.agent.results.records import (
    EEDRecord,
    JudgeRecord,
    Outcome,
    SampleRecord,
    ToolCallRecord,
)
from proctor.agent.results.store import SampleWriter, load_samples
from proctor.agent.run.run_header import recorded_config
from tests.support.inspect_logs import inspect_installed, read_log, run_child

needs_inspect = pytest.mark.skipif(not inspect_installed(), reason="pip install 'proctor[inspect]'")

SPICE = ["\ud800", "\udfff", "\x00", "\x1b[31m", "\u202e", "</script>", "\ufeff", "\n", "é", "\U0001d518"]
hostile_text = st.lists(st.one_of(st.text(max_size=6), st.sampled_from(SPICE)), max_size=5).map("".join)
keys = st.one_of(
    hostile_text, st.just(""), st.sampled_from(["a\ud800", "a\\ud800"]), st.just("k" * (MAX_KEY_CHARS + 7))
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    hostile_text,
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=12,
)


def strictly_json(value: Any) -> str:
    """Standard JSON (no NaN) that encodes as UTF-8: what any reader of Inspect's log takes."""
    text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    text.encode("utf-8")
    return text


# -- the rules, in-process ------------------------------------------------------------------


# 100 examples over every depth family (300 took 5-50 s of the quick tier).
@settings(max_examples=100, derandomize=True, database=None, deadline=None)
@given(value=values, depth=st.sampled_from([0, 1, MAX_DEPTH - 2, MAX_DEPTH, MAX_DEPTH + 3, 300]))
def test_a_fitted_value_is_plain_json_within_bounds_and_every_change_is_noted(value: Any, depth: int) -> None:
    for _ in range(depth):
        value = {"a": value}
    fit = Fitter()
    fitted = fit.value(value, "x")
    strictly_json(fitted)
    levels, chars = measure(value)
    if levels > MAX_DEPTH:
        assert isinstance(fitted, str) and fitted.startswith("[replaced by proctor export: nested")
        assert fit.notes[0]["field"] == "x" and fit.notes[0]["original_chars"] == chars
    else:
        assert measure(fitted)[0] == levels
    try:
        unchanged = fitted == value and strictly_json(value) is not None
    except (ValueError, UnicodeEncodeError):
        unchanged = False
    # A value that needed no change gets no note; one that changed gets at least one.
    assert (fit.count == 0) == unchanged
    assert len(fit.notes) == min(fit.count, 50)


@settings(max_examples=100, derandomize=True, database=None, deadline=None)
@given(value=values)
def test_measure_and_json_tokens_agree_with_json_dumps(value: Any) -> None:
    depth, chars = measure(value)
    assert chars == len(json.dumps(value)) == len("".join(json_tokens(value)))
    assert "".join(json_tokens(value)) == json.dumps(value)

    def levels(item: Any) -> int:
        if isinstance(item, dict):
            return 1 + max((levels(v) for v in item.values()), default=0)
        if isinstance(item, list):
            return 1 + max((levels(v) for v in item), default=0)
        return 0

    assert depth == levels(value)


def test_text_and_values_past_the_size_bound_keep_a_bounded_summary() -> None:
    fit = Fitter()
    text = "é" * (MAX_TEXT_CHARS + 10)
    kept = fit.text(text, "t")
    assert len(kept) < MAX_TEXT_CHARS + 200 and kept.startswith("é" * 100) and "sha256" in kept
    many = ["y" * 1_000_000] * (MAX_TEXT_CHARS // 1_000_000 + 1)  # each text fits, all together not
    summary = fit.value({"xs": many}, "v")
    assert isinstance(summary, str) and len(summary) < 1_000 and summary.endswith("]")
    assert [n["field"] for n in fit.notes] == ["t", "v"]
    assert [n["original_chars"] for n in fit.notes] == [len(text), len(json.dumps({"xs": many}))]
    nan = fit.value([math.nan, math.inf, -math.inf], "f")
    assert nan == ["NaN", "Infinity", "-Infinity"] and fit.count == 5
    assert fit.number(math.nan, "n") is None and fit.number(1.5, "n") == 1.5


def test_keys_that_collide_once_escaped_are_both_kept() -> None:
    fit = Fitter()
    fitted = fit.value({"a\ud800": 1, "a\\ud800": 2, "k" * (MAX_KEY_CHARS + 1): 3}, "")
    assert list(fitted.values()) == [1, 2, 3]
    assert "a\\ud800" in fitted and "a\\ud800 (2)" in fitted
    assert all(len(key) < MAX_KEY_CHARS + 200 for key in fitted)


# -- the export, end to end -----------------------------------------------------------------


def write_run(directory: Path, records: list[SampleRecord]) -> None:
    """A run directory as a run leaves it: header, and records written by the store's writer."""
    directory.mkdir(parents=True)
    config = RunConfig(
        track="research",
        tasks=directory / "no-tasks-file.jsonl",
        out=directory,
        models=[ModelConfig(name="openai/m")],
        judge=ModelConfig(name="openai/judge"),
    )
    header = {
        "run_id": "hostile",
        "track": "research",
        "status": "finished",
        "created_at": "2026-12-01T00:00:00+00:00",
        "config": recorded_config(config),
    }
    (directory / "run.json").write_text(json.dumps(header))
    writer = SampleWriter(directory / "samples.jsonl")
    for record in records:
        writer.append(record)
    writer.close()


def nested_json(value: Any, depth: int) -> str:
    """``value`` inside ``depth`` objects, as text (json.dumps itself stops near 1,000 levels)."""
    return '{"a": ' * depth + json.dumps(value) + "}" * depth


def hostile_record(
    index: int,
    *,
    task_id: str,
    raw: str,
    text: str,
    result: str,
    sandbox: Any,
    number: float,
    outcome: Outcome,
    started_at: str,
) -> SampleRecord:
    call = {"id": f"c{index}", "type": "function", "function": {"name": "python", "arguments": raw}}
    return SampleRecord(
        run_id="hostile",
        track="research",
        task_id=task_id,
        trial=index,
        model="openai/m",
        subject=text,
        outcome=outcome,
        success=outcome is Outcome.CORRECT,
        error=text if outcome in (Outcome.JUDGE_ERROR, Outcome.HARNESS_ERROR) else None,
        transcript=[
            {"role": "user", "content": text},
            {"role": "assistant", "content": text, "reasoning": text, "tool_calls": [call], "usage": sandbox},
            {"role": "tool", "tool_call_id": f"c{index}", "name": "python", "content": result},
            {"role": "assistant", "content": text, "finish_reason": text},
        ],
        tool_calls=[
            ToolCallRecord(
                turn=1,
                call_id=f"c{index}",
                name="python",
                raw_arguments=raw,
                result=result,
                error=text or None,
                duration_s=number,
                sandbox={"exit_code": 1, "details": sandbox},
            )
        ],
        judge=JudgeRecord(
            decided_by="judge",
            model="openai/judge",
            prompt=text,
            replies=[text, result[:100]],
            verdict=text,
            points=number,
            answer_probe={"answer": text, "replies": [sandbox]},
        ),
        eed=EEDRecord(score=number, status=text),
        started_at=started_at,
        finished_at="2026-12-01T00:00:09+00:00",
        duration_s=number,
    )


TASK_IDS = ["t", "a/b", "..", "x\x00y", " ", "\u202e", "k" * 300, "id with space", "ünï", "a\\b"]


@st.composite
def hostile_records(draw: st.DrawFn) -> tuple[list[SampleRecord], list[dict[str, Any]]]:
    records, plans = [], []
    for index in range(draw(st.integers(1, 4))):
        value = draw(values)
        depth = draw(st.sampled_from([0, 1, MAX_DEPTH, MAX_DEPTH + 1, 300, 1_500]))
        raw = draw(st.sampled_from(["object", "not json", "array"]))
        arguments = {"code": value} if raw == "object" else value
        text_args = nested_json(arguments, depth) if raw != "not json" else "{not json " + json.dumps(value)
        # Text past the size bound is one fixed case below: 16 MB per example is minutes here.
        result_size = draw(st.sampled_from([0, 10, 2_000]))
        result = draw(hostile_text) + "x" * result_size
        plans.append(
            {"raw": text_args, "depth": depth if raw != "not json" else 0, "kind": raw, "result": result}
        )
        records.append(
            hostile_record(
                index,
                task_id=draw(st.sampled_from(TASK_IDS)),
                raw=text_args,
                text=draw(hostile_text),
                result=result,
                sandbox=draw(values),
                number=draw(st.floats(allow_nan=True, allow_infinity=True)),
                outcome=draw(st.sampled_from(list(Outcome))),
                started_at=draw(st.sampled_from(["2026-12-01T00:00:00+00:00", "not a time", ""])),
            )
        )
    return records, plans


def notes_of(sample: dict[str, Any]) -> list[dict[str, Any]]:
    report = sample["metadata"].get("proctor_export") or {"replaced": [], "count": 0}
    assert report["count"] >= len(report["replaced"])
    for note in report["replaced"]:
        assert set(note) == {"field", "reason", "original_chars"}
    notes: list[dict[str, Any]] = report["replaced"]
    return notes


@needs_inspect
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_issues_300_deep_arguments_no_longer_stop_the_export(tmp_path: Path) -> None:
    raw = nested_json({"code": "print(1)"}, 300)
    huge = "x" * (MAX_TEXT_CHARS + 5)

    def record(index: int, task_id: str, raw: str, result: str) -> SampleRecord:
        return hostile_record(
            index,
            task_id=task_id,
            raw=raw,
            text="fine",
            result=result,
            sandbox={},
            number=1.0,
            outcome=Outcome.CORRECT,
            started_at="2026-12-01T00:00:00+00:00",
        )

    write_run(
        tmp_path / "run",
        [
            record(0, "deep", raw, "1"),
            record(1, "huge", '{"code": "print(2)", "x": NaN}', huge),
            record(2, "plain", '{"code": "print(3)"}', "3"),
        ],
    )
    (path,) = export_inspect(tmp_path / "run", tmp_path / "out.eval")
    samples = {s["id"]: s for s in read_log(path)["samples"]}
    assert set(samples) == {"deep", "huge", "plain"}
    tools = {key: next(e for e in s["events"] if e["event"] == "tool") for key, s in samples.items()}
    # The call keeps the model's own text, and says why it is not an object here.
    assert tools["deep"]["arguments"] == {"raw_arguments": raw}
    assert (
        tools["deep"]["metadata"]["parse_error"] == "arguments nested 301 levels deep (at most 64 are kept)"
    )
    notes = {n["field"]: n for n in notes_of(samples["deep"])}
    assert notes["tool_calls.0.raw_arguments"]["original_chars"] == len(raw)
    assert notes["transcript.1.tool_calls.0.function.arguments"]["original_chars"] == len(raw)
    # Text past the bound keeps its head and tail, its length and hash; NaN is spelled out.
    result = tools["huge"]["result"]
    assert (
        result.startswith("x" * 1000) and result.endswith("x" * 1000) and len(result) < MAX_TEXT_CHARS + 200
    )
    assert f"({len(huge):,} characters) has sha256" in result
    notes = {n["field"]: n for n in notes_of(samples["huge"])}
    assert notes["tool_calls.0.result"]["original_chars"] == len(huge)
    assert notes["transcript.2.content"]["original_chars"] == len(huge)
    assert tools["huge"]["arguments"] == {"code": "print(2)", "x": "NaN"}
    assert (
        notes["tool_calls.0.raw_arguments.x"]["reason"] == "NaN is not a JSON number; kept as the text 'NaN'"
    )
    assert "proctor_export" not in samples["plain"]["metadata"]
    assert tools["plain"]["arguments"] == {"code": "print(3)"}


@needs_inspect
@pytest.mark.slow
@pytest.mark.timeout(1200)
@settings(
    max_examples=4,
    derandomize=True,
    database=None,
    deadline=None,
    # Each example exports in a child process and reads back in another: no shrinking (it
    # would run for many minutes); a failure shows the drawn records as they are.
    phases=[Phase.generate],
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(drawn=hostile_records())
def test_every_hostile_sample_is_exported_and_read_back(
    tmp_path_factory: pytest.TempPathFactory, drawn: tuple[list[SampleRecord], list[dict[str, Any]]]
) -> None:
    records, plans = drawn
    directory = tmp_path_factory.mktemp("hostile")
    write_run(directory / "run", records)
    stored = load_samples(directory / "run" / "samples.jsonl").records
    (path,) = export_inspect(directory / "run", directory / "out.eval")
    log = read_log(path)
    samples = {(s["metadata"]["task_id"], s["epoch"]): s for s in log["samples"]}
    # Every record is a sample, under its own task id and trial; ids are unique in the log.
    assert set(samples) == {(r.task_id, r.trial + 1) for r in stored}
    assert len({(s["id"], s["epoch"]) for s in log["samples"]}) == len(stored)
    for record, plan in zip(stored, plans, strict=True):
        sample = samples[(record.task_id, record.trial + 1)]
        notes = {n["field"]: n for n in notes_of(sample)}
        assert [e["event"] for e in sample["events"]][:3] == ["span_begin", "sample_init", "span_end"]
        tool = next(e for e in sample["events"] if e["event"] == "tool")
        assert [m["role"] for m in sample["messages"]] == ["user", "assistant", "tool", "assistant"]
        raw = record.tool_calls[0].raw_arguments
        # The arguments as the export's rules fit them: the object, or the raw text when it
        # is not an object or cannot be held as one.
        try:
            parsed = json.loads(raw)
        except (RecursionError, ValueError):
            parsed = None
        if isinstance(parsed, dict) and measure(parsed)[0] <= MAX_DEPTH:
            assert tool["arguments"] == Fitter().value(parsed, "tool_calls.0.raw_arguments")
        else:
            assert tool["arguments"] == {"raw_arguments": raw}
        if plan["depth"] > MAX_DEPTH:
            note = notes["tool_calls.0.raw_arguments"]
            assert note["original_chars"] == len(raw) and "nested" in note["reason"]
        if len(plan["result"]) > MAX_TEXT_CHARS:
            assert notes["tool_calls.0.result"]["original_chars"] == len(record.tool_calls[0].result)
            assert len(tool["result"]) < MAX_TEXT_CHARS + 200
        else:
            assert tool["result"] == record.tool_calls[0].result
        if record.outcome.value in ("judge_error", "model_error", "verify_error", "harness_error"):
            assert sample["scores"] is None and sample["events"][-1]["event"] == "error"
        else:
            assert sample["scores"]["proctor"]["value"] in ("C", "I")
            assert any(e["event"] == "score" for e in sample["events"])


# A sample whose content Inspect cannot write, built without the export's fitting: the
# value nested 300 deep sits in an event, then in a message, then in the metadata.
_DEGRADE = r"""
import json, sys
from inspect_ai.event import InfoEvent
from inspect_ai.log import EvalSample
from inspect_ai.model import ChatMessageUser
from inspect_ai.scorer import Score
from proctor.agent.export.inspect_bounds import Fitter
from proctor.agent.export.inspect_sample import holdable, write_problem

deep = "bottom"
for _ in range(300):
    deep = {"a": deep}
base = dict(id="s", epoch=1, input="q", target="t", messages=[ChatMessageUser(content="hi")],
            scores={"proctor": Score(value="C")}, metadata={"outcome": "correct"})
out = {}
for where in ("events", "messages", "metadata"):
    parts = dict(base)
    if where == "events":
        parts["events"] = [InfoEvent(data="fine", metadata={"deep": deep})]
    elif where == "messages":
        parts["events"] = [InfoEvent(data="fine")]
        parts["messages"] = [ChatMessageUser(content="hi", metadata={"deep": deep})]
    else:
        parts["metadata"] = {"outcome": "correct", "deep": deep}
    sample = EvalSample(**parts)
    assert write_problem(sample) is not None
    fit = Fitter()
    kept = holdable(sample, fit)
    assert write_problem(kept) is None
    out[where] = {
        "fields": [n["field"] for n in kept.metadata["proctor_export"]["replaced"]],
        "events": [e.event for e in kept.events],
        "messages": [m.text for m in kept.messages],
        "score": kept.scores["proctor"].value,
        "outcome": kept.metadata["outcome"],
    }
# A value one of Inspect's types refuses outright (pydantic's own depth limit): that part only.
from inspect_ai.event import ToolEvent
from proctor.agent.export.inspect_sample import guarded
fit = Fitter()
got = guarded(fit, "events", lambda: [ToolEvent(id="c", function="f", arguments={"deep": deep})],
              lambda problem: ["fallback"])
out["refused"] = {"got": got, "fields": [n["field"] for n in fit.notes], "reason": fit.notes[0]["reason"]}
print(json.dumps(out))
"""


@needs_inspect
@pytest.mark.slow
def test_a_sample_inspect_still_cannot_write_degrades_step_by_step(tmp_path: Path) -> None:
    out = run_child(_DEGRADE)
    assert out["events"]["fields"] == ["events"] and out["events"]["events"] == ["info"]
    assert out["events"]["messages"] == ["hi"]
    assert out["messages"]["fields"] == ["events", "messages"]
    assert out["messages"]["messages"][0].startswith("[proctor export: this sample's messages were left out")
    assert out["metadata"]["fields"] == ["events", "messages", "sample"]
    assert out["metadata"]["messages"] == [] and out["metadata"]["events"] == []
    refused = out.pop("refused")
    assert refused["got"] == ["fallback"] and refused["fields"] == ["events"]
    assert refused["reason"].startswith("Inspect's types refused it (ValidationError")
    for case in out.values():
        assert case["score"] == "C" and case["outcome"] == "correct"
