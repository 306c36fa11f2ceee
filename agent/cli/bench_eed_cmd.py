"""`proctor bench eed`: EED pairs per second on a mixed set, and the share spent simplifying."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from proctor.agent.cli.app import bench_app
from proctor.agent.errors import UserError
from proctor.agent.scoring.latex_preprocess import MODES


@bench_app.command("eed")
def bench_eed(
    workers: Annotated[int, typer.Option("--workers", help="Worker processes in the pool.")] = 2,
    repeat: Annotated[int, typer.Option("--repeat", help="Passes over the mixed pair set.")] = 2,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Per-pair budget (pathological pairs hit it).")
    ] = 3.0,
    mode: Annotated[str, typer.Option("--mode", help="strict or fixed.")] = "strict",
    spawn: Annotated[
        bool, typer.Option("--spawn/--no-spawn", help="Also time a fresh interpreter per pair.")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
) -> None:
    """Benchmark (not a test): EED throughput with persistent workers, and where the time goes."""
    from proctor.agent.scoring.eed_bench import run_bench

    if mode not in MODES:
        raise UserError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    if workers < 1 or repeat < 1 or timeout <= 0:
        raise UserError("--workers and --repeat must be at least 1, --timeout positive")
    report = run_bench(workers=workers, repeat=repeat, timeout_s=timeout, mode=mode, compare_spawn=spawn)
    figures = report.as_dict()
    if as_json:
        print(json.dumps(figures, indent=2))
        return
    console = Console()
    table = Table(title="proctor bench eed: per category", title_justify="left")
    for column in ("category", "pairs", "mean ms in worker", "p95 ms", "statuses"):
        table.add_column(column, justify="left" if column in ("category", "statuses") else "right")
    categories = figures["categories"]
    assert isinstance(categories, dict)
    for name, stats in categories.items():
        statuses = ", ".join(f"{status} {count}" for status, count in sorted(stats["statuses"].items()))
        mean, p95 = f"{stats['mean_ms']:.1f}", f"{stats['p95_ms']:.1f}"
        table.add_row(name, str(stats["pairs"]), mean, p95, statuses)
    console.print(table)

    summary = Table(title="proctor bench eed: totals", title_justify="left", show_header=False)
    summary.add_column("figure")
    summary.add_column("value", justify="right")
    summary.add_row("pairs scored", str(report.total_pairs))
    summary.add_row("workers", str(report.workers))
    summary.add_row("pairs per second", f"{report.pairs_per_s:.2f}")
    summary.add_row("worker start-up (pool warm-up, s)", f"{report.startup_s:.2f}")
    shares = figures["share_by_step"]
    assert isinstance(shares, dict)
    for step, share in shares.items():
        summary.add_row(f"share of worker time: {step}", f"{100 * share:.1f} %")
    summary.add_row(
        "  ... of it in pairs that timed out", f"{100 * float(str(figures['timed_out_share'])):.1f} %"
    )
    if report.spawn_per_pair_s is not None and report.pool_per_pair_s is not None:
        summary.add_row("fresh interpreter per pair (s/pair)", f"{report.spawn_per_pair_s:.3f}")
        summary.add_row("warm pool, one at a time (s/pair)", f"{report.pool_per_pair_s:.3f}")
        summary.add_row("speed-up of the pool", f"{report.spawn_per_pair_s / report.pool_per_pair_s:.1f}x")
    console.print(summary)
