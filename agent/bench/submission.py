"""`proctor bench submission`: what judging one submission costs (answer() + verification).

The same timing script runs against this tree and, optionally, against a baseline tree (another
checkout of Proctor), in alternating rounds of one run, so both see the same machine load. Each
round is a fresh interpreter that opens its own sandbox, warms it with one submission, then times
``calls`` submissions one after another: the latency a sample sees between ``submit_answer`` and
its verdict.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from proctor.sandbox.bench.calls import percentile

# Only API that every Proctor tree has: open_sandbox, SandboxConfig, SubmissionRunner.evaluate.
_TIMING_SCRIPT = """\
import asyncio, importlib, json, sys, time
# Trees from before the proctor.* layout install `agent` and `sandbox` at the top level.
try:
    importlib.import_module("proctor.agent")
    PREFIX = "proctor."
except ImportError:
    PREFIX = ""
def load(module, name, *older):
    # Trees from before agent/ was grouped by job keep the module at an older path.
    for candidate in (module, *older):
        try:
            found = importlib.import_module(PREFIX + candidate)
        except ModuleNotFoundError:
            continue
        return getattr(found, name)
    raise SystemExit("this tree has no %s.%s" % (module, name))
SandboxConfig = load("agent" + ".inputs.config", "SandboxConfig", "agent" + ".config")
NullEvents = load("agent" + ".tracks.base", "NullEvents")
SubmissionRunner = load("agent" + ".tracks.frontiermath.submission", "SubmissionRunner")
FrontierMathTask = load("agent" + ".tracks.frontiermath.tasks", "FrontierMathTask")
open_sandbox = load("sandbox", "open_sandbox")

CODE = "def answer():\\n    return 6 * 7\\n"

async def main(backend, calls):
    task = FrontierMathTask(id="bench", question="q", answer_type="Python int", answer="42")
    sandbox = await open_sandbox(backend, pool_size=2)
    try:
        runner = SubmissionRunner(sandbox, SandboxConfig(), NullEvents())
        samples = []
        for index in range(calls + 1):
            if hasattr(sandbox, "settle"):
                await sandbox.settle()
            started = time.perf_counter()
            result = await runner.evaluate(CODE, task)
            if result.outcome.value != "correct":
                raise SystemExit("benchmark submission was judged %s: %s" % (result.outcome, result.error))
            if index:
                samples.append(time.perf_counter() - started)
        print(json.dumps(samples))
    finally:
        await sandbox.aclose()

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


class BenchFailed(RuntimeError):
    """A timing round did not produce samples (its stderr says why)."""


@dataclass
class TreeTimings:
    tree: Path
    samples: list[float] = field(default_factory=list)

    def p50(self) -> float:
        return statistics.median(self.samples)

    def p95(self) -> float:
        return percentile(self.samples, 0.95)


def time_tree(tree: Path, backend: str, calls: int) -> list[float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, "-c", _TIMING_SCRIPT, backend, str(calls)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=max(600, calls * 60),
    )
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise BenchFailed(f"timing round in {tree} failed: {tail[0]}")
    samples = json.loads(done.stdout.strip().splitlines()[-1])
    return [float(value) for value in samples]


def run_benchmark(
    current: Path, baseline: Path | None, *, backend: str, calls: int, rounds: int
) -> list[TreeTimings]:
    """Alternate rounds between the trees (baseline first in each round)."""
    trees = [TreeTimings(baseline)] if baseline is not None else []
    trees.append(TreeTimings(current))
    for _ in range(rounds):
        for timings in trees:
            timings.samples.extend(time_tree(timings.tree, backend, calls))
    return trees
