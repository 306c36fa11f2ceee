"""Any bytes in ``samples.jsonl``: each reader gives records or one line, and they agree.

Hypothesis builds files from whole records, records cut at any byte (a torn write), flipped
bytes, garbage, NUL, invalid UTF-8 and blank lines, with or without a final newline. For every
file: the store's reader (what ``--resume`` and the summary use) and the report's reader either
return records or raise a one-line ``UserError``, never anything else; when both read the file,
they hold the same samples with the same outcomes; a repair (what ``--resume`` does first) leaves
a file that reads back to the same records with nothing torn, and only ever cuts the last line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proctor.agent.errors import UserError
from proctor.agent.report.loader import load_run
from proctor.agent.results.records import Outcome, SampleRecord
from proctor.agent.results.store import load_samples, sample_key


def _record(task: int, trial: int, outcome: Outcome) -> bytes:
    record = SampleRecord(
        run_id="run",
        track="echo",
        task_id=f"t{task}",
        trial=trial,
        model="m",
        outcome=outcome,
        started_at="2026-12-01T00:00:00+00:00",
        finished_at="2026-12-01T00:00:01+00:00",
        duration_s=1.0,
        transcript=[{"role": "assistant", "content": "\x00 \u202e </script> ok"}],
    )
    return record.model_dump_json().encode()


records = st.builds(
    _record,
    st.integers(0, 3),
    st.integers(0, 1),
    st.sampled_from([Outcome.CORRECT, Outcome.INCORRECT, Outcome.MODEL_ERROR, Outcome.HARNESS_ERROR]),
)


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    line = draw(records)
    how = draw(st.sampled_from(["cut", "flip", "garbage"]))
    if how == "cut":
        return line[: draw(st.integers(0, len(line) - 1))]
    if how == "flip":
        at = draw(st.integers(0, len(line) - 1))
        return line[:at] + bytes([draw(st.integers(0, 255))]) + line[at + 1 :]
    return draw(st.binary(max_size=40).filter(lambda b: b"\n" not in b))


lines = st.lists(
    st.one_of(records, records, records, damaged(), st.sampled_from([b"", b"  ", b"\x00", b"\xff\xfe"])),
    max_size=8,
)


@settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(body=lines, final_newline=st.booleans())
def test_any_samples_file_reads_to_records_or_one_line_and_every_reader_agrees(
    tmp_path: Path, body: list[bytes], final_newline: bool
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    path = run_dir / "samples.jsonl"
    data = b"\n".join(body) + (b"\n" if final_newline and body else b"")
    path.write_bytes(data)

    store_error = report_error = None
    try:
        loaded = load_samples(path)
    except UserError as exc:
        store_error = str(exc)
    try:
        report = load_run(run_dir)
    except UserError as exc:
        report_error = str(exc)
    for message in (store_error, report_error):
        assert message is None or ("\n" not in message and "samples.jsonl" in message)
    if store_error is None and report_error is None:
        assert {sample_key(r): r.outcome for r in loaded.records} == {
            sample_key(r): r.outcome for r in report.samples
        }
    if store_error is not None:
        return

    keys = [sample_key(r) for r in loaded.records]
    assert len(keys) == len(set(keys))
    path.write_bytes(data)
    repaired = load_samples(path, repair=True)
    after = path.read_bytes()
    # Only the torn tail may go; everything before the last newline stays byte for byte.
    kept = data[: data.rfind(b"\n") + 1]
    assert after.startswith(kept)
    assert after in (data, data + b"\n", kept)
    again = load_samples(path)
    assert again.torn_bytes == 0
    assert [r.model_dump() for r in again.records] == [r.model_dump() for r in repaired.records]


def test_a_torn_tail_is_the_only_thing_repair_removes(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    whole = _record(0, 0, Outcome.CORRECT) + b"\n"
    torn = _record(1, 0, Outcome.CORRECT)[:37]
    path.write_bytes(whole + torn)
    loaded = load_samples(path, repair=True)
    assert loaded.torn_bytes == len(torn) and path.read_bytes() == whole
    assert [r.task_id for r in loaded.records] == ["t0"]


@pytest.mark.parametrize("outcome", [Outcome.MODEL_ERROR, Outcome.HARNESS_ERROR])
def test_an_error_record_is_superseded_by_a_later_one_in_every_reader(
    tmp_path: Path, outcome: Outcome
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "samples.jsonl").write_bytes(
        _record(0, 0, outcome) + b"\n" + _record(0, 0, Outcome.CORRECT) + b"\n"
    )
    assert [r.outcome for r in load_samples(run_dir / "samples.jsonl").records] == [Outcome.CORRECT]
    assert [r.outcome for r in load_run(run_dir).samples] == [Outcome.CORRECT]
