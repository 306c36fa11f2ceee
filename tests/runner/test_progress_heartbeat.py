"""Without a terminal, a run that ends no turn for a while still says it is working (issue 38,
item 8): a judged run printed nothing for 160 s while its judge graded.

Invariant: in plain output, while samples run, no stretch of ``heartbeat_s`` passes without a
line; with nothing running, or on a terminal (the live panel), no heartbeat is printed. The
clock is the test's own, so no test waits for real time except the one proving the thread
beats, which waits for the line itself.
"""

from __future__ import annotations

import io
import threading

from rich.console import Console

from proctor.agent.results.records import Outcome, SampleRecord
from proctor.agent.run.progress import RunProgress


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def plain(clock: FakeClock, heartbeat_s: float = 30.0) -> tuple[RunProgress, io.StringIO]:
    out = io.StringIO()
    progress = RunProgress(Console(file=out, width=200), live=False, clock=clock, heartbeat_s=heartbeat_s)
    return progress, out


def record(task_id: str) -> SampleRecord:
    return SampleRecord(
        run_id="r",
        track="olympiad",
        model="openai/m",
        task_id=task_id,
        trial=0,
        outcome=Outcome.CORRECT,
        success=True,
        score=1.0,
        started_at="2026-12-06T05:00:00+00:00",
        finished_at="2026-12-06T05:00:30+00:00",
        duration_s=30.0,
    )


def test_a_heartbeat_follows_silence_while_samples_run_and_only_then() -> None:
    clock = FakeClock()
    progress, out = plain(clock)
    progress.total = 2
    assert not progress.heartbeat()  # nothing running: nothing to say
    progress.for_sample("openai/m", "a", 0)
    progress.sample_started()
    clock.now += 29.9
    assert not progress.heartbeat()
    clock.now += 0.2
    assert progress.heartbeat()
    line = out.getvalue().splitlines()[-1]
    assert "still working: 0/2 samples finished, 1 running, the longest for 30s" in line, line
    assert not progress.heartbeat()  # a line was just printed
    clock.now += 31
    assert progress.heartbeat()
    # A finished sample's own line resets the silence.
    progress.sample_finished(record("a"))
    clock.now += 10
    assert not progress.heartbeat()


def test_the_live_panel_needs_no_heartbeat() -> None:
    clock = FakeClock()
    out = io.StringIO()
    progress = RunProgress(Console(file=out, width=200), live=True, clock=clock)
    progress.for_sample("openai/m", "a", 0)
    progress.sample_started()
    clock.now += 3600
    assert not progress.heartbeat() and out.getvalue() == ""


class Watched(io.StringIO):
    """Sets ``seen`` when a heartbeat line is written."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = threading.Event()

    def write(self, text: str) -> int:
        if "still working" in text:
            self.seen.set()
        return super().write(text)


def test_begin_starts_a_thread_that_beats_and_end_stops_it() -> None:
    out = Watched()
    progress = RunProgress(Console(file=out, width=200), live=False, heartbeat_s=0.05)
    # Other tests of the same worker may leave a progress begun and never ended: only the
    # thread this progress starts is this test's to check.
    before = set(threading.enumerate())
    progress.begin(total=1, already_done=[], run_dir="runs/x")
    ours = [t for t in threading.enumerate() if t not in before and t.name == "proctor-heartbeat"]
    assert len(ours) == 1
    progress.for_sample("openai/m", "a", 0)
    progress.sample_started()
    try:
        # The line itself is what the test waits for; the bound only stops a hung test.
        assert out.seen.wait(timeout=60), out.getvalue()
    finally:
        progress.end()
    assert not ours[0].is_alive()
