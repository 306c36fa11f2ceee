"""`proctor bench loop` machinery works (not a timed test: the targets are checked by the benchmark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.agent.bench.loop import SANDBOX_DOUBLE_LABEL, UsageScript, results_as_json, run_scenario
from proctor.agent.inputs.config import BudgetConfig


async def test_scenario_runs_real_loop_against_the_scripted_server_process(tmp_path: Path):
    result = await run_scenario(
        "smoke",
        samples=3,
        concurrency=2,
        turns=4,
        script=UsageScript(input_base=100, input_growth=10, output=5),
        budget=BudgetConfig(),
        workdir=tmp_path,
    )
    # Each conversation ends at max_turns without a submission; 4 model turns each.
    assert result.turns == 12
    assert result.outcomes == {"no_submission": 3}
    # Reported usage summed per conversation: sum over k=1..4 of (100 + 10k) + 5.
    assert result.max_cumulative_tokens == sum(100 + 10 * k + 5 for k in range(1, 5))
    assert result.harness_cpu_ms_per_turn > 0 and result.server_ms_per_turn > 0
    assert results_as_json([result], 8)["sandbox"] == SANDBOX_DOUBLE_LABEL


async def test_forced_turns_last_from_the_threshold_to_the_cap(tmp_path: Path):
    result = await run_scenario(
        "forced",
        samples=1,
        concurrency=1,
        turns=50,
        script=UsageScript(input_base=1000, input_growth=0, output=0),
        budget=BudgetConfig(token_cap=10_000, force_submit_at=3_000),
        workdir=tmp_path,
    )
    # 3 turns reach 3,000 tokens; from turn 4 every turn is forced (a forced turn answered
    # without a submission no longer ends the sample, issue 23), each adding 1,000 tokens, until
    # the next request would pass the 10,000-token cap: 9 turns in all.
    assert result.turns == 9 and result.outcomes == {"no_submission": 1}
    assert result.harness_gap_ms_median is not None


@pytest.mark.slow
def test_profile_option_writes_a_cpu_profile_of_the_harness(tmp_path: Path):
    """`--profile` is how the README's profile tables were made: it must hold the loop's calls."""
    import pstats

    from typer.testing import CliRunner

    from proctor.agent.cli import commands_registry  # noqa: F401  (registers every command)
    from proctor.agent.cli.app import app

    out = tmp_path / "loop.prof"
    result = CliRunner().invoke(
        app, ["bench", "loop", "--concurrency", "1", "--turns", "3", "--no-long", "--profile", str(out)]
    )
    assert result.exit_code == 0, result.output
    functions = {name for _, _, name in pstats.Stats(str(out)).stats}  # type: ignore[attr-defined]
    assert {"run", "_post_within_deadline", "prompt_tokens_floor"} <= functions
