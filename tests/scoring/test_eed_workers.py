"""Worker processes: replaced after they die, killed with the pool, and gone when their parent dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from proctor.agent.scoring.eed import eed_score
from proctor.agent.scoring.worker_pool import EEDWorker, EEDWorkerPool, StepLimits, WorkerStartupError


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in state  # a zombie has already stopped running


def _wait_gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.1)
    return _gone(pid)


def test_a_worker_killed_while_idle_is_replaced() -> None:
    worker = EEDWorker()
    try:
        worker.wait_ready()
        first_pid = worker.pid
        os.kill(first_pid, signal.SIGKILL)
        assert _wait_gone(first_pid, 5)
        attempt = worker.run("x^2", r"x \cdot x", "strict", [], 30.0, StepLimits())
        assert attempt.kind == "result" and attempt.result is not None
        assert attempt.result["status"] == "equivalent"
        assert worker.pid != first_pid
    finally:
        worker.kill()


def test_a_worker_that_looks_alive_but_is_dying_gets_the_pair_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The race behind the idle-kill case: a killed multi-threaded worker can still look alive to
    ``poll()`` while its threads exit, so the pair is written to a dying process. It never
    accepted the pair, so the pair goes to a fresh worker instead of coming back ``crashed``."""
    worker = EEDWorker()
    try:
        worker.wait_ready()
        first_pid = worker.pid
        os.kill(first_pid, signal.SIGKILL)
        assert _wait_gone(first_pid, 5)
        real_alive = EEDWorker.alive
        looked = {"count": 0}

        def alive_once_wrongly(self: EEDWorker) -> bool:
            looked["count"] += 1
            return True if looked["count"] == 1 else real_alive(self)

        monkeypatch.setattr(EEDWorker, "alive", alive_once_wrongly)
        attempt = worker.run("x^2", r"x \cdot x", "strict", [], 30.0, StepLimits())
        assert attempt.kind == "result" and attempt.result is not None, attempt
        assert attempt.result["status"] == "equivalent"
        assert worker.pid != first_pid and worker.spawn_count == 2
    finally:
        worker.kill()


def test_a_worker_killed_after_accepting_a_pair_is_a_crash_not_a_silent_resend() -> None:
    worker = EEDWorker()
    try:
        worker.wait_ready()
        first_pid = worker.pid
        killer = threading.Timer(1.5, os.kill, (first_pid, signal.SIGKILL))
        killer.start()
        attempt = worker.run("(x+1)^{10000}", "(x+1)^{9999}", "strict", [], 60.0, StepLimits())
        killer.join()
        assert attempt.kind == "crashed" and attempt.step is not None, attempt
        assert worker.spawn_count == 2  # replaced once, after the crash; the pair was not re-sent
    finally:
        worker.kill()


def test_closing_the_pool_kills_its_workers() -> None:
    pool = EEDWorkerPool(size=2)
    pool.warm_up()
    pids = [worker.pid for worker in pool._all]
    assert len(pids) == 2 and not any(_gone(pid) for pid in pids)
    pool.close()
    assert all(_wait_gone(pid, 5) for pid in pids)
    with pytest.raises(RuntimeError, match="closed"):
        eed_score("x+1", "x+2", pool=pool)


def test_a_worker_stops_when_its_parent_is_killed_mid_pair(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(
        "import sys\n"
        "from proctor.agent.scoring.worker_pool import EEDWorkerPool, StepLimits\n"
        "pool = EEDWorkerPool(size=1)\n"
        "pool.warm_up()\n"
        "print(pool._all[0].pid, flush=True)\n"
        "pool.score('(x+1)^{10000}', '(x+1)^{9999}', 'strict', 600.0, StepLimits())\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        worker_pid = int(parent.stdout.readline())
        time.sleep(1.0)  # the worker is now deep in simplify((x+1)^10000)
        assert not _gone(worker_pid)
        parent.kill()
        parent.wait()
        assert _wait_gone(worker_pid, 5), "the orphaned worker kept running"
    finally:
        parent.kill()


def test_a_worker_that_cannot_start_gives_a_clear_error() -> None:
    # An address-space cap far too small for Python to import sympy makes the worker die at start.
    worker = EEDWorker(memory_mb=50)
    try:
        with pytest.raises(WorkerStartupError, match="did not start"):
            worker.wait_ready(timeout_s=30)
    finally:
        worker.kill()
