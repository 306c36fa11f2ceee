"""The EED benchmark's bookkeeping (its figures are recorded in docs/eed.md, not asserted here)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from proctor.agent.scoring.eed_bench import bench_pairs, run_bench


def test_the_pair_set_covers_every_category() -> None:
    categories = {pair.category for pair in bench_pairs()}
    assert categories == {"equivalent", "near-miss", "far", "gated", "pathological"}
    assert {pair.category for pair in bench_pairs(include_pathological=False)} == categories - {
        "pathological"
    }


def test_run_bench_accounts_for_every_pair_and_all_worker_time() -> None:
    # One pair per category keeps this quick: every timeout costs a worker restart.
    sample = list({pair.category: pair for pair in reversed(bench_pairs())}.values())
    report = run_bench(workers=1, repeat=1, timeout_s=1.0, compare_spawn=False, pairs=sample)
    figures = report.as_dict()
    assert report.total_pairs == len(sample) == 5
    categories = figures["categories"]
    assert isinstance(categories, dict)
    assert {name: stats["pairs"] for name, stats in categories.items()} == dict.fromkeys(
        ["equivalent", "near-miss", "far", "gated", "pathological"], 1
    )
    assert categories["gated"]["statuses"] == {"zero_gate:empty_answer": 1}
    assert categories["pathological"]["statuses"] == {"timeout": 1}
    shares = figures["share_by_step"]
    assert isinstance(shares, dict)
    # Killed attempts are attributed to their step, so the step shares cover nearly all worker time
    # (the rest is pipe and JSON overhead).
    assert 0.8 < sum(shares.values()) <= 1.0 + 1e-9
    assert shares["simplify"] > 0
    assert report.pairs_per_s > 0


@pytest.mark.parametrize("args", [["--workers", "0"], ["--mode", "loose"]])
def test_bench_command_rejects_bad_flags_in_one_line(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from proctor.agent.cli import main; main()", "bench", "eed", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
