"""A run directory is hostile input: whoever edited it may know our source.

Each attack is tried against the real runner (in process, real openai SDK against a scripted
server on 127.0.0.1): a hand-edited ``run.json``, run files that are symbolic links, FIFOs,
devices or directories, a planted temporary-file link, a second process resuming the same run,
a record write that fails half-way. Each must end in one line naming the file (and field), or
be harmless, and never lose or duplicate a finished sample.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from proctor.agent.errors import UserError
from proctor.agent.report.loader import load_run
from proctor.agent.results.records import Outcome, SampleRecord
from proctor.agent.results.store import LOCK, RunStore, SampleWriter, load_samples, sample_key
from proctor.agent.results.summary import wall_seconds
from proctor.agent.run.runner import execute_run
from tests.runner.conftest import make_config, quiet_progress, read_lines, write_tasks
from tests.support.scripted_server import ScriptedServer

REPO = Path(__file__).resolve().parents[2]


async def run(config: Any) -> Any:
    return await execute_run(config, progress=quiet_progress(), handle_signals=False)


async def finished_run(tmp_path: Path, server: ScriptedServer, tasks: int = 3) -> tuple[Path, Path]:
    task_file = write_tasks(tmp_path / "tasks.jsonl", tasks)
    out = tmp_path / "run"
    result = await run(make_config(task_file, out, server.base_url))
    assert result.status == "finished"
    return task_file, out


def edit_header(out: Path, change: Callable[[dict[str, Any]], None]) -> None:
    header = json.loads((out / "run.json").read_text())
    change(header)
    (out / "run.json").write_text(json.dumps(header))


HEADER_EDITS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "run_id removed": (lambda h: h.pop("run_id"), "run_id"),
    "run_id a number": (lambda h: h.__setitem__("run_id", 5), "run_id"),
    "run_id empty": (lambda h: h.__setitem__("run_id", ""), "run_id"),
    "sessions a string": (lambda h: h.__setitem__("sessions", "x"), "sessions"),
    "a session a list": (lambda h: h.__setitem__("sessions", [[1]]), "sessions.0"),
    "a session's start a number": (
        lambda h: h["sessions"][0].__setitem__("started_at", 3),
        "sessions.0.started_at",
    ),
    "events a number": (lambda h: h.__setitem__("events", 3), "events"),
    "endpoints a string": (lambda h: h.__setitem__("endpoints", "x"), "endpoints"),
    "tasks_file a string": (lambda h: h.__setitem__("tasks_file", "x"), "tasks_file"),
    "config a list": (lambda h: h.__setitem__("config", []), "config"),
    "defaults_applied numbers": (lambda h: h.__setitem__("defaults_applied", [1]), "defaults_applied.0"),
    "sandbox a string": (lambda h: h.__setitem__("sandbox", "docker"), "sandbox"),
    "hardware a list": (lambda h: h.__setitem__("hardware", []), "hardware"),
    # The config fields the resume check itself reads (it used to call .get on them).
    "the config's judge a string": (lambda h: h["config"].__setitem__("judge", "x"), "config.judge"),
    "the config's judge a number": (lambda h: h["config"].__setitem__("judge", 5), "config.judge"),
    "the config's track_options a number": (
        lambda h: h["config"].__setitem__("track_options", 5),
        "config.track_options",
    ),
}


@pytest.mark.parametrize("edit", list(HEADER_EDITS))
async def test_a_hand_edited_run_json_is_one_line_naming_the_field_before_any_request(
    tmp_path: Path, echo_server: ScriptedServer, edit: str
) -> None:
    task_file, out = await finished_run(tmp_path, echo_server)
    change, field = HEADER_EDITS[edit]
    edit_header(out, change)
    samples_before = (out / "samples.jsonl").read_bytes()
    calls = echo_server.call_count

    with pytest.raises(UserError) as caught:
        # Two trials: the resume has samples to run, so nothing but the check can stop it.
        await run(make_config(task_file, out, echo_server.base_url, trials=2, resume=True))
    message = str(caught.value)
    assert "\n" not in message and str(out / "run.json") in message and f"field '{field}" in message
    assert echo_server.call_count == calls
    assert (out / "samples.jsonl").read_bytes() == samples_before


def test_hand_edited_session_times_do_not_break_the_summary() -> None:
    header = {
        "sessions": [
            {"started_at": "yesterday", "ended_at": "today"},
            {"started_at": "2026-12-01T10:00:00+00:00", "ended_at": "2026-12-01T10:00:05"},
            {"started_at": "2026-12-01T10:00:00+00:00", "ended_at": "2026-12-01T10:00:07+00:00"},
            "not a session",
        ]
    }
    assert wall_seconds(header) == 7.0
    assert wall_seconds({"sessions": "x"}) is None


def _replace(out: Path, name: str, make: Callable[[Path], object]) -> None:
    (out / name).unlink()
    make(out / name)


def _link_outside(tmp_path: Path) -> Callable[[Path], object]:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    return lambda path: path.symlink_to(victim)


RUN_FILE_ATTACKS: dict[str, tuple[str, Callable[[Path], Callable[[Path], object]]]] = {
    "samples.jsonl links to a file outside": ("samples.jsonl", _link_outside),
    "samples.jsonl links to /dev/zero": ("samples.jsonl", lambda tmp: lambda p: p.symlink_to("/dev/zero")),
    "samples.jsonl is a FIFO": ("samples.jsonl", lambda tmp: os.mkfifo),
    "samples.jsonl is a directory": ("samples.jsonl", lambda tmp: Path.mkdir),
    "run.json is a FIFO": ("run.json", lambda tmp: os.mkfifo),
    "run.json links to a file outside": ("run.json", _link_outside),
}


@pytest.mark.parametrize("attack", list(RUN_FILE_ATTACKS))
async def test_run_files_that_are_not_regular_files_are_refused_in_one_line_without_hanging(
    tmp_path: Path, echo_server: ScriptedServer, attack: str
) -> None:
    task_file, out = await finished_run(tmp_path, echo_server)
    name, maker = RUN_FILE_ATTACKS[attack]
    _replace(out, name, maker(tmp_path))
    calls = echo_server.call_count

    with pytest.raises(UserError) as caught:
        # A FIFO would block an ordinary open forever and /dev/zero would fill the memory.
        await asyncio.wait_for(
            run(make_config(task_file, out, echo_server.base_url, trials=2, resume=True)), timeout=15
        )
    assert "\n" not in str(caught.value) and str(out) in str(caught.value)
    assert echo_server.call_count == calls
    victim = tmp_path / "victim.txt"
    if victim.exists():
        assert victim.read_text() == "precious\n"
    if "samples.jsonl" in attack:
        # The report reads the directory the same way.
        with pytest.raises(UserError):
            load_run(out)


async def test_a_planted_temporary_file_link_cannot_redirect_the_header_write(
    tmp_path: Path, echo_server: ScriptedServer
) -> None:
    task_file, out = await finished_run(tmp_path, echo_server)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    for name in ("run.json", "summary.json"):
        (out / f".{name}.tmp").symlink_to(victim)
    (out / "summary.json").unlink()
    (out / "summary.json").symlink_to(victim)

    result = await run(make_config(task_file, out, echo_server.base_url, trials=2, resume=True))
    assert result.status == "finished" and result.finished == 6
    assert victim.read_text() == "precious\n"
    # The rename replaced the link itself, never its target.
    assert not (out / "summary.json").is_symlink()
    assert json.loads((out / "summary.json").read_text())["finished_samples"] == 6


async def test_a_summary_that_cannot_be_written_is_one_line_and_the_samples_stay(
    tmp_path: Path, echo_server: ScriptedServer
) -> None:
    task_file, out = await finished_run(tmp_path, echo_server)
    (out / "summary.json").unlink()
    (out / "summary.json").mkdir()
    with pytest.raises(UserError) as caught:
        await run(make_config(task_file, out, echo_server.base_url, trials=2, resume=True))
    assert "\n" not in str(caught.value) and "summary.json: cannot write" in str(caught.value)
    assert len(load_samples(out / "samples.jsonl").records) == 6
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]  # no temporary left behind


async def test_a_run_directory_that_is_a_symlink_is_followed_because_the_user_named_it(
    tmp_path: Path, echo_server: ScriptedServer
) -> None:
    task_file = write_tasks(tmp_path / "tasks.jsonl", 2)
    real = tmp_path / "real-run"
    real.mkdir()
    link = tmp_path / "run-link"
    link.symlink_to(real)
    result = await run(make_config(task_file, link, echo_server.base_url))
    assert result.status == "finished"
    assert len(read_lines(real / "samples.jsonl")) == 2


def _record(task: str, outcome: Outcome = Outcome.CORRECT) -> SampleRecord:
    return SampleRecord(
        run_id="r",
        track="echo",
        task_id=task,
        trial=0,
        model="m",
        outcome=outcome,
        started_at="2026-12-01T00:00:00+00:00",
        finished_at="2026-12-01T00:00:01+00:00",
        duration_s=1.0,
        transcript=[{"role": "assistant", "content": "x" * 100_000}],
    )


def test_a_record_write_that_fails_half_way_leaves_no_torn_line_in_the_middle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "samples.jsonl"
    writer = SampleWriter(path)
    writer.append(_record("before"))
    real_write = os.write
    calls = {"n": 0}

    def disk_fills(fd: int, data: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))  # a short write ...
        raise OSError(errno.ENOSPC, "No space left on device")  # ... then the disk is full

    monkeypatch.setattr(os, "write", disk_fills)
    with pytest.raises(OSError):
        writer.append(_record("lost"))
    monkeypatch.setattr(os, "write", real_write)
    # The runner then records the sample as a harness error; that line must stay readable.
    writer.append(_record("lost", Outcome.HARNESS_ERROR))
    writer.append(_record("after"))
    writer.close()

    loaded = load_samples(path)
    assert [r.task_id for r in loaded.records] == ["before", "lost", "after"]
    assert loaded.torn_bytes == 0 and path.read_bytes().count(b"\n") == 3


def test_the_report_counts_a_repeated_sample_as_the_summary_does(tmp_path: Path) -> None:
    """Only an error record is superseded; a scored record stands against a later edit."""
    out = tmp_path / "run"
    out.mkdir()
    writer = SampleWriter(out / "samples.jsonl")
    wrong = _record("t").model_copy(update={"outcome": Outcome.INCORRECT})
    writer.append(wrong)
    writer.append(_record("t"))  # an appended "correct" for the same sample
    writer.append(_record("u", Outcome.MODEL_ERROR))
    writer.append(_record("u"))  # a resume ran the error again
    writer.close()

    by_store = {sample_key(r): r.outcome for r in load_samples(out / "samples.jsonl").records}
    by_report = {sample_key(r): r.outcome for r in load_run(out).samples}
    assert by_store == by_report == {("m", "t", 0): Outcome.INCORRECT, ("m", "u", 0): Outcome.CORRECT}


def test_a_second_process_cannot_resume_a_run_that_is_being_written(
    tmp_path: Path, echo_server: ScriptedServer
) -> None:
    task_file = write_tasks(tmp_path / "tasks.jsonl", 6, delay=0.3)
    out = tmp_path / "run"
    config = make_config(task_file, out, echo_server.base_url, trials=2, max_concurrency=2)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: the first process
        try:
            asyncio.run(run(config))
        finally:
            os._exit(0)
    try:
        deadline = time.monotonic() + 30
        while not (out / "samples.jsonl").exists() or not (out / "samples.jsonl").read_bytes():
            assert time.monotonic() < deadline, "the first process wrote no record"
            time.sleep(0.02)
        with pytest.raises(UserError) as caught:
            asyncio.run(run(config.model_copy(update={"resume": True})))
        assert f"pid {pid}" in str(caught.value) and "another proctor process" in str(caught.value)
    finally:
        _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status)
    keys = [(r["task_id"], r["trial"]) for r in read_lines(out / "samples.jsonl")]
    assert len(keys) == 12 and len(set(keys)) == 12
    # Released with the process (even by SIGKILL): the next resume may go ahead.
    assert (out / LOCK).exists()
    result = asyncio.run(run(config.model_copy(update={"resume": True})))
    assert result.finished == 12 and result.ran_now == 0


def test_a_killed_writer_leaves_the_directory_unlocked(tmp_path: Path, echo_server: ScriptedServer) -> None:
    task_file = write_tasks(tmp_path / "tasks.jsonl", 4, delay=0.5)
    out = tmp_path / "run"
    config = make_config(task_file, out, echo_server.base_url, max_concurrency=1)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            asyncio.run(run(config))
        finally:
            os._exit(0)
    deadline = time.monotonic() + 30
    while not (out / "run.json").exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    result = asyncio.run(run(config.model_copy(update={"resume": True})))
    assert result.status == "finished" and result.finished == 4


@pytest.mark.parametrize("planted", ["run.json", "samples.jsonl"])
def test_a_run_that_appeared_in_a_fresh_directory_before_it_was_claimed_is_refused(
    tmp_path: Path, planted: str
) -> None:
    """`proctor run` and `proctor rescore` claim a fresh directory only as they write its first
    header; a run another process started there in between is that process's, not overwritten."""
    out = tmp_path / "run"
    mine = RunStore(out)
    mine.claim()
    assert mine.locked and (out / LOCK).exists()
    mine.claim()  # already this process's: nothing more to check
    mine.unlock()
    (out / planted).write_text('{"run_id": "theirs"}\n')
    late = RunStore(out)
    try:
        with pytest.raises(UserError) as caught:
            late.claim()
    finally:
        late.unlock()
    assert str(caught.value) == f"{out}: another run started in this directory meanwhile"
    assert (out / planted).read_text() == '{"run_id": "theirs"}\n'


def test_a_task_path_that_is_a_fifo_nobody_writes_is_one_line_not_a_hang(tmp_path: Path) -> None:
    """A run.json can name any task path for `--resume --out DIR`; a FIFO without a writer used to
    block the open for ever. It now reads as an empty file, which the track refuses in one line."""
    from proctor.agent.tracks.registry import make_track

    fifo = tmp_path / "tasks.jsonl"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            make_track("frontiermath", {}).load_tasks(fifo)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(timeout=10)
    if worker.is_alive():
        # Release the reader so the thread ends, then fail.
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO without a writer hung")
    assert len(outcome) == 1 and isinstance(outcome[0], UserError), outcome
    assert "\n" not in str(outcome[0]) and str(fifo) in str(outcome[0])


def _on_every_record(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def edit(out: Path) -> None:
        records = read_lines(out / "samples.jsonl")
        for record in records:
            change(record)
        (out / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))

    return edit


def _tool_call(**sandbox: Any) -> list[dict[str, Any]]:
    return [
        {
            "turn": 1,
            "call_id": "c",
            "name": "python",
            "raw_arguments": "",
            "sandbox": {"exit_code": 0, **sandbox},
        }
    ]


# Numbers valid JSON carries but no run writes, on every record so sums over them overflow too.
# Each reader must give one line naming the field, or show the value: never a traceback.
NUMBER_EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "total_tokens of 400 digits": lambda r: r.update(total_tokens=10**400),
    "negative input_tokens": lambda r: r.update(input_tokens=-5),
    "a turn's cumulative tokens of 400 digits": lambda r: r.update(
        turns=[{"turn": 1, "input_tokens": 1, "output_tokens": 1, "cumulative_tokens": 10**400}]
    ),
    "a turn number of 400 digits": lambda r: r.update(
        turns=[{"turn": 10**400, "input_tokens": 1, "output_tokens": 1, "cumulative_tokens": 2}]
    ),
    "judge tokens of 400 digits": lambda r: r.update(judge={"decided_by": "judge", "input_tokens": 10**400}),
    "duration_s infinite": lambda r: r.update(duration_s="Infinity"),
    "duration_s NaN": lambda r: r.update(duration_s="NaN"),
    "duration_s 1e308 (the sum overflows)": lambda r: r.update(duration_s=1e308),
    "score 1e308 (the mean overflows)": lambda r: r.update(
        score=1e308, judge={"decided_by": "judge", "points": 1e308}
    ),
    "a tool call lasting 1e308 s": lambda r: r.update(tool_calls=[{**_tool_call()[0], "duration_s": 1e308}]),
    "a tool call lasting forever": lambda r: r.update(
        tool_calls=[{**_tool_call()[0], "duration_s": "Infinity"}]
    ),
    "answer() duration text": lambda r: r.update(
        submission={"code": "x", "answer_exec": {"duration_s": "x"}}
    ),
    "answer() duration a list": lambda r: r.update(
        submission={"code": "x", "verify_exec": {"duration_s": [1]}}
    ),
    "answer() duration of 400 digits": lambda r: r.update(
        submission={"code": "x", "answer_exec": {"duration_s": 10**400}}
    ),
}


@pytest.mark.parametrize("attack", list(NUMBER_EDITS))
async def test_numbers_no_run_writes_are_one_line_or_shown_by_resume_view_and_compare(
    tmp_path: Path, echo_server: ScriptedServer, attack: str
) -> None:
    from proctor.agent.report.compare import compare_runs
    from proctor.agent.report.page import render_report

    task_file, out = await finished_run(tmp_path, echo_server)
    _on_every_record(NUMBER_EDITS[attack])(out)
    samples_before = (out / "samples.jsonl").read_bytes()
    messages: list[str] = []
    try:
        run_data = load_run(out)
        render_report(run_data)
        compare_runs([run_data, run_data])
    except UserError as exc:
        messages.append(str(exc))
    try:
        # Nothing left to run: the resume reads the records and writes the summary from them.
        result = await run(make_config(task_file, out, echo_server.base_url, resume=True))
        assert result.status == "finished"
        json.loads((out / "summary.json").read_text())
    except UserError as exc:
        messages.append(str(exc))
    for message in messages:
        assert "\n" not in message and "samples.jsonl" in message and "field" in message, message
    assert (out / "samples.jsonl").read_bytes() == samples_before


@pytest.mark.parametrize("trials", [10**400, 10**6])
async def test_a_run_json_asking_for_absurd_trials_is_one_line_when_resume_reuses_its_config(
    tmp_path: Path, echo_server: ScriptedServer, trials: int
) -> None:
    # `proctor run --resume --out DIR` alone takes the config from DIR/run.json; 10**400 trials
    # there used to build the sample plan until memory ran out, with nothing on the screen.
    _, out = await finished_run(tmp_path, echo_server)
    edit_header(out, lambda h: h["config"].__setitem__("trials", trials))
    samples_before = (out / "samples.jsonl").read_bytes()
    calls = echo_server.call_count
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "tests.runner.cli_with_test_tracks", "run", "--resume", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "test"},
        timeout=60,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert f"{out / 'run.json'}: field 'trials'" in lines[0]
    assert echo_server.call_count == calls
    assert (out / "samples.jsonl").read_bytes() == samples_before


def test_a_sparse_terabyte_samples_file_is_one_line_without_reading_it(tmp_path: Path) -> None:
    # Costs no disk (sparse); read whole it was a MemoryError traceback in the store, and the
    # report's loader read 16 GiB of it into memory before refusing.
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r"}))
    samples = tmp_path / "samples.jsonl"
    with samples.open("wb") as handle:
        handle.truncate(1 << 40)
    for read in (lambda: load_samples(samples, repair=True), lambda: load_run(tmp_path)):
        with pytest.raises(UserError) as caught:
            read()
        message = str(caught.value)
        assert "\n" not in message and str(samples) in message
        assert "is 1,099,511,627,776 bytes; the limit is 17,179,869,184" in message
    assert samples.stat().st_size == 1 << 40  # the repair cut nothing


def test_the_samples_size_bound_is_checked_before_reading_by_the_store_and_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import proctor.agent.report.loader
    import proctor.agent.results.store

    monkeypatch.setattr(proctor.agent.results.store, "MAX_SAMPLES_BYTES", 1_000)
    monkeypatch.setattr(proctor.agent.report.loader, "MAX_SAMPLES_BYTES", 1_000)
    samples = tmp_path / "samples.jsonl"
    line = _record("t0").model_dump_json() + "\n"
    samples.write_text(line * (1_000 // len(line) + 1))
    for read in (lambda: load_samples(samples), lambda: load_run(tmp_path)):
        with pytest.raises(UserError, match=r"samples file is [\d,]+ bytes; the limit is 1,000$"):
            read()


def _model_config(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda h: h["config"].__setitem__("models", [{"name": "openai/echo-model", **fields}])


# run.json as `proctor view` reads it: each value used to reach a .get, a loop or a float().
VIEW_HEADER_EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "the config's budget a string": lambda h: h["config"].__setitem__("budget", "x"),
    "the config's budget a list": lambda h: h["config"].__setitem__("budget", [1]),
    "token_cap infinite": lambda h: h["config"].__setitem__("budget", {"token_cap": float("inf")}),
    "the config's models a number": lambda h: h["config"].__setitem__("models", 5),
    "the header's models a number": lambda h: h.__setitem__("models", True),
    "a model's price text": _model_config(input_price_per_mtok="x"),
    "a model's price a list": _model_config(output_price_per_mtok=[1]),
    "a model's price of 400 digits": _model_config(input_price_per_mtok=10**400),
    "a judge's price of 400 digits": lambda h: h["config"].__setitem__(
        "judge", {"name": "openai/j", "output_price_per_mtok": 10**400}
    ),
}


@pytest.mark.parametrize("edit", list(VIEW_HEADER_EDITS))
async def test_a_hand_edited_run_json_never_breaks_the_report(
    tmp_path: Path, echo_server: ScriptedServer, edit: str
) -> None:
    from proctor.agent.report.page import render_report

    _, out = await finished_run(tmp_path, echo_server)
    edit_header(out, VIEW_HEADER_EDITS[edit])
    run_data = load_run(out)
    page = render_report(run_data)
    # Every sample is still on the page; the bad value is ignored (defaults, no price).
    assert len(run_data.samples) == 3 and all(s.task_id in page for s in run_data.samples)
    assert run_data.budget[1] > 0


@pytest.mark.parametrize("name", ["samples.jsonl", ".proctor.lock"])
async def test_a_run_file_with_another_hard_link_is_never_written_through(
    tmp_path: Path, echo_server: ScriptedServer, name: str
) -> None:
    # A hard link is a regular file, so the symlink check let it through: --resume appended
    # records to (and the lock truncated) whatever else the inode is, e.g. a `cp -al` backup
    # of the run or a file of the user's planted by whoever edited the directory.
    task_file, out = await finished_run(tmp_path, echo_server)
    other = tmp_path / "backup-or-victim"
    if name == "samples.jsonl":
        os.link(out / name, other)
    else:
        other.write_text("precious\n")
        (out / name).unlink()
        os.link(other, out / name)
    before = other.read_bytes()
    calls = echo_server.call_count
    with pytest.raises(UserError) as caught:
        await run(make_config(task_file, out, echo_server.base_url, trials=2, resume=True))
    message = str(caught.value)
    assert "\n" not in message and str(out / name) in message and "hard link" in message
    assert other.read_bytes() == before and echo_server.call_count == calls
    # Reading is harmless: the report still reads a linked samples file.
    if name == "samples.jsonl":
        assert len(load_run(out).samples) == 3


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from proctor.agent.cli import main; main()", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )


async def test_a_planted_report_link_cannot_make_view_overwrite_another_file(
    tmp_path: Path, echo_server: ScriptedServer
) -> None:
    # `proctor view RUN` writes RUN/report.html; whoever edited RUN made that name a link to a
    # file of the reader's, and the page was written through it.
    _, out = await finished_run(tmp_path, echo_server)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (out / "report.html").symlink_to(victim)
    done = await asyncio.to_thread(_cli, "view", str(out))
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "precious\n"
    page = out / "report.html"
    assert not page.is_symlink() and "<!DOCTYPE html>" in page.read_text()


@pytest.mark.parametrize("target", ["samples.jsonl", "run.json", "summary.json"])
async def test_view_compare_and_export_never_write_over_a_run_file(
    tmp_path: Path, echo_server: ScriptedServer, target: str
) -> None:
    # `--out RUN/samples.jsonl` (a slip of tab completion) replaced every finished record with
    # the HTML page.
    _, out = await finished_run(tmp_path, echo_server)
    before = {name: (out / name).read_bytes() for name in ("samples.jsonl", "run.json", "summary.json")}
    attempts = [("view", str(out), "--out"), ("compare", str(out), str(out), "--html")]
    if target.endswith(".json"):
        attempts.append(("export", str(out), "--output"))
    for attempt in attempts:
        done = await asyncio.to_thread(_cli, *attempt, str(out / target))
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (attempt, done.stderr[-2000:])
        assert str(out / target) in lines[0] and "run directory" in lines[0]
    assert {name: (out / name).read_bytes() for name in before} == before
