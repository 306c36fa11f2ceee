"""`proctor bench submission`: the submission path's latency, optionally beside a baseline tree."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from proctor.agent.bench.submission import BenchFailed, run_benchmark
from proctor.agent.cli.app import bench_app
from proctor.agent.errors import UserError

THIS_TREE = Path(__file__).resolve().parents[2]


@bench_app.command("submission")
def bench_submission(
    calls: Annotated[int, typer.Option("--calls", help="Timed submissions per round and tree.")] = 10,
    rounds: Annotated[int, typer.Option("--rounds", help="Alternating rounds per tree.")] = 3,
    backend: Annotated[str, typer.Option("--backend", help="Sandbox backend: docker or local.")] = "docker",
    baseline: Annotated[
        Path | None,
        typer.Option("--baseline-tree", help="Another Proctor checkout to time in the same run."),
    ] = None,
) -> None:
    """Time answer() + verification of an int answer, end to end, through the real sandbox."""
    if calls < 1 or rounds < 1:
        raise UserError("--calls and --rounds must be at least 1")
    if baseline is not None and not (baseline / "agent" / "tracks" / "frontiermath").is_dir():
        raise UserError(f"--baseline-tree: {baseline} is not a Proctor checkout")
    try:
        trees = run_benchmark(THIS_TREE, baseline, backend=backend, calls=calls, rounds=rounds)
    except BenchFailed as exc:
        raise UserError(str(exc)) from None
    for timings in trees:
        label = "baseline" if baseline is not None and timings.tree == baseline else "this tree"
        print(
            f"{label} ({timings.tree}): {len(timings.samples)} submissions, "
            f"p50 {timings.p50() * 1000:.0f} ms, p95 {timings.p95() * 1000:.0f} ms"
        )
    if len(trees) == 2:
        print(f"ratio of p50s (this tree / baseline): {trees[1].p50() / trees[0].p50():.2f}")
