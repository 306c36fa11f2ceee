"""Parent side of the EED workers: a small pool of long-lived scorer processes.

Why processes: a sympy simplify can run for ever and only killing a process stops it reliably
(SIGALRM only works in the main thread and cannot interrupt C code; threads cannot be killed).
Why long-lived: starting an interpreter and importing sympy + latex2sympy costs ~0.6 s, far more
than scoring a typical pair (see docs/eed.md for the measured numbers).

Every pair gets a hard wall-clock budget. Inside it, the steps the published scorer limits
(simplify: 30 s, equals: 10 s) get their own limit; when one runs out the worker is killed and
respawned, and the pair is re-run with that step replaced by the published fallback. When the
pair's whole budget runs out, the worker is killed and the pair's outcome is a timeout.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import select
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from proctor.agent.scoring.eed_pipeline import LIMITED_STEPS, step_category
from proctor.agent.scoring.eed_worker import MEMORY_LIMIT_ENV

WORKERS_ENV = "PROCTOR_EED_WORKERS"
DEFAULT_MEMORY_MB = 4096
STARTUP_TIMEOUT_S = 120.0  # a cold start compiles sympy's bytecode: tens of seconds, once
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class WorkerStartupError(RuntimeError):
    """A worker process could not be started or died before it was ready."""


@dataclass
class Attempt:
    """What one run of the pipeline in a worker produced."""

    kind: Literal["result", "step_timeout", "budget_timeout", "crashed"]
    result: dict[str, Any] | None = None
    step: str | None = None
    elapsed_s: float = 0.0
    step_elapsed_s: float = 0.0  # time in ``step`` when the attempt ended without a result

    def lost_timings(self) -> dict[str, float]:
        """Seconds of a killed attempt, attributed to the step that was running (rest: other)."""
        if self.kind == "result":
            return {}
        in_step = min(self.step_elapsed_s, self.elapsed_s)
        category = step_category(self.step) if self.step else "other"
        timings = {category: in_step}
        timings["other"] = timings.get("other", 0.0) + self.elapsed_s - in_step
        return timings


@dataclass
class StepLimits:
    simplify_s: float = 30.0
    equals_s: float = 10.0

    def for_step(self, step: str) -> float | None:
        if step not in LIMITED_STEPS:
            return None
        return self.equals_s if step == "equals" else self.simplify_s


class EEDWorker:
    """One scorer process, used by one caller at a time."""

    def __init__(self, memory_mb: int = DEFAULT_MEMORY_MB) -> None:
        self._memory_mb = memory_mb
        self._buffer = b""
        self._ready = False
        self._next_id = 0
        self.spawn_count = 0
        self._process = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env[MEMORY_LIMIT_ENV] = str(self._memory_mb)
        # sympy iterates over sets of symbols in places; a fixed string hash keeps every worker's
        # choices identical run to run (no difference was seen on the fidelity corpus, but cheap).
        env["PYTHONHASHSEED"] = "0"
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
        self._buffer = b""
        self._ready = False
        self.spawn_count += 1
        # stderr goes to a file, not a pipe: nobody drains it while the worker runs, and its tail
        # explains a worker that fails to start.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the process)
        return subprocess.Popen(
            [sys.executable, "-m", "proctor.agent.scoring.eed_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            start_new_session=True,  # Ctrl-C in a terminal reaches the parent, which kills us cleanly
        )

    @property
    def pid(self) -> int:
        return self._process.pid

    def alive(self) -> bool:
        return self._process.poll() is None

    def kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                # Closing stdin flushes what a write to the dead process left buffered: that
                # raises BrokenPipeError, and the process is gone either way.
                with contextlib.suppress(OSError):
                    stream.close()
        self._stderr.close()

    def _trim_stderr(self, keep_under: int = 1 << 20) -> None:
        """Keep a long-lived worker's warnings from growing the file without bound."""
        if self._stderr.seek(0, os.SEEK_END) > keep_under:
            self._stderr.truncate(0)
            self._stderr.seek(0)  # the offset is shared with the worker's descriptor

    def _stderr_tail(self, limit: int = 600) -> str:
        try:
            self._stderr.seek(0)
            text = self._stderr.read().decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""
        return text[-limit:]

    def restart(self) -> None:
        """Kill (if needed) and start a fresh process; it warms up while the caller carries on."""
        self.kill()
        self._process = self._spawn()

    def _read_message(self, timeout_s: float) -> dict[str, Any] | None:
        """Next message, or None when ``timeout_s`` passes. Raises EOFError if the process died."""
        deadline = time.monotonic() + timeout_s
        stdout = self._process.stdout
        assert stdout is not None
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            readable, _, _ = select.select([stdout], [], [], remaining)
            if not readable:
                return None
            chunk = os.read(stdout.fileno(), 65536)
            if not chunk:
                raise EOFError("EED worker exited")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        if self._ready:
            return
        for attempt in range(2):
            try:
                message = self._read_message(timeout_s)
            except EOFError:
                message = None
            if message is not None and message.get("kind") == "ready":
                self._ready = True
                return
            if attempt == 0:
                self.restart()
        self._process.kill()
        self._process.wait()
        tail = self._stderr_tail().splitlines()
        reason = tail[-1] if tail else "no error output"
        raise WorkerStartupError(
            f"the EED worker ({sys.executable} -m proctor.agent.scoring.eed_worker) did not start: {reason}"
        )

    def run(
        self,
        reference: str,
        answer: str,
        mode: str,
        skip: list[str],
        budget_s: float,
        limits: StepLimits,
    ) -> Attempt:
        """One attempt at the pair. A worker that dies before it accepts the request never saw
        the pair (it was killed while idle, or was still exiting when ``alive()`` looked): the
        request goes once more to a fresh worker instead of counting as a crash."""
        started = time.monotonic()
        for delivery in range(2):
            if not self.alive():
                self.restart()
            self.wait_ready()
            attempt = self._attempt(reference, answer, mode, skip, started + budget_s, limits, started)
            if attempt is not None:
                return attempt
            if delivery == 0:
                self.restart()
        elapsed = time.monotonic() - started
        self.restart()
        return Attempt("crashed", elapsed_s=elapsed)

    def _attempt(
        self,
        reference: str,
        answer: str,
        mode: str,
        skip: list[str],
        budget_deadline: float,
        limits: StepLimits,
        started: float,
    ) -> Attempt | None:
        """Send the request and follow it; None when the worker died before accepting it."""
        self._next_id += 1
        request = {"id": self._next_id, "reference": reference, "answer": answer, "mode": mode, "skip": skip}
        accepted = False
        step: str | None = None
        step_started = started
        step_deadline = float("inf")
        try:
            stdin = self._process.stdin
            assert stdin is not None
            stdin.write(json.dumps(request).encode() + b"\n")
            stdin.flush()
            while True:
                now = time.monotonic()
                deadline = min(budget_deadline, step_deadline)
                message = self._read_message(max(0.0, deadline - now))
                if message is None:
                    elapsed = time.monotonic() - started
                    self.restart()
                    kind: Literal["step_timeout", "budget_timeout"] = (
                        "step_timeout" if step_deadline < budget_deadline else "budget_timeout"
                    )
                    return Attempt(
                        kind, step=step, elapsed_s=elapsed, step_elapsed_s=started + elapsed - step_started
                    )
                if message.get("id") != self._next_id:
                    continue
                if message["kind"] == "accepted":
                    accepted = True
                elif message["kind"] == "step":
                    accepted = True
                    step = message["step"]
                    step_started = time.monotonic()
                    limit = limits.for_step(message["step"])
                    step_deadline = step_started + limit if limit is not None else float("inf")
                elif message["kind"] == "result":
                    self._trim_stderr()
                    return Attempt("result", result=message["result"], elapsed_s=time.monotonic() - started)
        except (EOFError, OSError, ValueError):  # died, pipe broken, or garbled message
            if not accepted:
                return None
            elapsed = time.monotonic() - started
            self.restart()
            return Attempt(
                "crashed", step=step, elapsed_s=elapsed, step_elapsed_s=started + elapsed - step_started
            )


@dataclass
class ScoredPair:
    """The worker's result dict (or a timeout/crash), plus what it took to get it."""

    result: dict[str, Any]
    wall_s: float
    attempts: int
    fallbacks: list[str] = field(default_factory=list)


class EEDWorkerPool:
    """Up to ``size`` workers, started on demand; callers block while all are busy."""

    def __init__(self, size: int | None = None, memory_mb: int = DEFAULT_MEMORY_MB) -> None:
        self.size = size or default_pool_size()
        self._memory_mb = memory_mb
        self._idle: queue.LifoQueue[EEDWorker] = queue.LifoQueue()
        self._all: list[EEDWorker] = []
        self._lock = threading.Lock()
        self._closed = False
        self._executor: ThreadPoolExecutor | None = None

    @property
    def executor(self) -> ThreadPoolExecutor:
        """Threads for async callers, one per worker. A dedicated executor, so that hundreds of
        samples waiting for a worker hold none of the event loop's default threads."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=self.size, thread_name_prefix="eed")
            return self._executor

    def _acquire(self) -> EEDWorker:
        with self._lock:
            if self._closed:
                raise RuntimeError("the EED worker pool is closed")
            try:
                return self._idle.get_nowait()
            except queue.Empty:
                if len(self._all) < self.size:
                    worker = EEDWorker(self._memory_mb)
                    self._all.append(worker)
                    return worker
        return self._idle.get()

    def warm_up(self) -> None:
        """Start every worker and wait until all are ready (benchmarks exclude start-up this way)."""
        workers = [self._acquire() for _ in range(self.size)]
        for worker in workers:
            worker.wait_ready()
        for worker in workers:
            self._idle.put(worker)

    def score(
        self, reference: str, answer: str, mode: str, budget_s: float, limits: StepLimits
    ) -> ScoredPair:
        worker = self._acquire()
        try:
            return _score_with(worker, reference, answer, mode, budget_s, limits)
        finally:
            self._idle.put(worker)

    @property
    def spawn_count(self) -> int:
        return sum(worker.spawn_count for worker in self._all)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for worker in self._all:
                worker.kill()
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)


def _score_with(
    worker: EEDWorker, reference: str, answer: str, mode: str, budget_s: float, limits: StepLimits
) -> ScoredPair:
    skip: list[str] = []
    remaining = budget_s
    lost: dict[str, float] = {}  # time of killed attempts, so timings add up to the wall time
    wall = 0.0
    attempts = 0
    crashes = 0
    while True:
        attempts += 1
        attempt = worker.run(reference, answer, mode, skip, remaining, limits)
        wall += attempt.elapsed_s
        remaining = budget_s - wall
        for category, seconds in attempt.lost_timings().items():
            lost[category] = lost.get(category, 0.0) + seconds
        if attempt.kind == "result" and attempt.result is not None:
            result = dict(attempt.result)
            timings = dict(result.get("timings") or {})
            for category, seconds in lost.items():
                timings[category] = timings.get(category, 0.0) + seconds
            result["timings"] = timings
            return ScoredPair(result, wall, attempts, list(skip))
        if attempt.kind == "step_timeout" and attempt.step is not None and remaining > 0:
            skip.append(attempt.step)  # re-run with the published fallback for that step
            continue
        if attempt.kind == "crashed" and crashes == 0 and remaining > 0:
            crashes += 1  # one retry: the process may have died for reasons unrelated to this pair
            continue
        status = "zero_gate:worker_crashed" if attempt.kind == "crashed" else "timeout"
        detail = (
            f"the worker process died during step {attempt.step!r}"
            if attempt.kind == "crashed"
            else f"the {budget_s:g} s budget ran out during step {attempt.step!r}; the worker was killed"
        )
        outcome = {"status": status, "score": 0.0, "detail": detail, "timings": lost}
        return ScoredPair(outcome, wall, attempts, skip)


def default_pool_size() -> int:
    configured = os.environ.get(WORKERS_ENV)
    if configured:
        return max(1, int(configured))
    return max(1, min(2, os.cpu_count() or 1))


_default_pool: EEDWorkerPool | None = None
_default_pool_lock = threading.Lock()


def default_pool() -> EEDWorkerPool:
    """The process-wide pool the public API uses; closed automatically at exit."""
    global _default_pool
    with _default_pool_lock:
        if _default_pool is None:
            _default_pool = EEDWorkerPool()
            atexit.register(_default_pool.close)
        return _default_pool
