"""`proctor bench loop`: harness overhead per turn against a zero-latency scripted model."""

from __future__ import annotations

import asyncio
import cProfile
import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from proctor.agent.bench.loop import (
    DEFAULT_CONNECTIONS,
    MODEL_LABEL,
    SANDBOX_DOUBLE_LABEL,
    TARGET_MS_PER_TURN,
    ScenarioResult,
    results_as_json,
    run_benchmark,
)
from proctor.agent.cli.app import bench_app


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _table(results: list[ScenarioResult]) -> Table:
    table = Table(
        title="proctor bench loop: harness time per turn (model latency excluded)", title_justify="left"
    )
    for column in (
        "scenario",
        "samples",
        "in flight",
        "turns",
        "wall s",
        "CPU ms/turn",
        "wall ms/turn",
        "wall-server ms/turn",
        "gap ms",
        "server ms/turn",
        "max tokens",
    ):
        table.add_column(column, justify="left" if column == "scenario" else "right")
    for r in results:
        table.add_row(
            r.name,
            str(r.samples),
            str(r.concurrency),
            str(r.turns),
            f"{r.wall_s:.2f}",
            _ms(r.harness_cpu_ms_per_turn),
            _ms(r.wall_ms_per_turn),
            _ms(r.harness_wall_minus_server_ms_per_turn),
            _ms(r.harness_gap_ms_median),
            _ms(r.server_ms_per_turn),
            f"{r.max_cumulative_tokens:,}",
        )
    return table


@bench_app.command("loop")
def bench_loop_command(
    concurrency: Annotated[
        list[int] | None,
        typer.Option("--concurrency", help="Samples in flight; repeatable (default 1 and 200)."),
    ] = None,
    turns: Annotated[int, typer.Option(help="Turns per conversation in the concurrency scenarios.")] = 20,
    long_conversation: Annotated[
        bool, typer.Option("--long/--no-long", help="Also run one conversation to the 1M-token cap.")
    ] = True,
    connections: Annotated[
        int, typer.Option(help="Model connection limit shared by the samples in flight.")
    ] = DEFAULT_CONNECTIONS,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as one JSON object.")] = False,
    profile: Annotated[
        Path | None,
        typer.Option(
            help="Also write a cProfile of this process, on the CPU-time clock, to this file "
            "(read it with python -m pstats); the profiler slows every call, so the times are "
            "then not the harness's own."
        ),
    ] = None,
) -> None:
    """Harness overhead per turn: runner + store + FrontierMath loop + openai client, no model latency."""
    benchmark = run_benchmark(
        concurrencies=tuple(concurrency or (1, 200)), turns=turns, long_conversation=long_conversation
    )
    if profile is None:
        results = asyncio.run(benchmark)
    else:
        # CPU time, not wall time: waiting on the model server is not the harness's cost.
        profiler = cProfile.Profile(time.process_time)
        results = profiler.runcall(asyncio.run, benchmark)
        profiler.dump_stats(profile)
    if as_json:
        print(json.dumps(results_as_json(results, connections), indent=2))
        return
    console = Console()
    # Wide enough for the table in logs and narrow terminals alike (it wraps, never truncates).
    console = Console(width=max(console.width, 150))
    console.print(_table(results))
    console.print(f"model: {MODEL_LABEL}", markup=False, highlight=False)
    console.print(f"sandbox: {SANDBOX_DOUBLE_LABEL}", markup=False, highlight=False)
    console.print(
        f"model connections: {connections} (shared by the samples in flight)", markup=False, highlight=False
    )
    for r in results:
        verdict = "meets" if r.harness_cpu_ms_per_turn <= TARGET_MS_PER_TURN else "MISSES"
        console.print(
            f"{r.name}: harness CPU {r.harness_cpu_ms_per_turn:.2f} ms/turn {verdict} the "
            f"{TARGET_MS_PER_TURN:.0f} ms target",
            markup=False,
            highlight=False,
        )
    for r in results:
        if r.accounting_us_turn_10 is not None and r.accounting_us_turn_500 is not None:
            console.print(
                f"{r.name}: token accounting per turn {r.accounting_us_turn_10:.0f} µs at turn 10, "
                f"{r.accounting_us_turn_500:.0f} µs at turn 500 "
                f"(whole harness gap, reply to next request: {_ms(r.harness_gap_ms_turn_10)} ms vs "
                f"{_ms(r.harness_gap_ms_turn_500)} ms; every request re-sends the whole history, "
                "as Chat Completions requires, so its JSON encoding is the part that grows)",
                markup=False,
                highlight=False,
            )
