"""Paired comparison math, checked against numbers worked out by hand, and the CLI."""

from __future__ import annotations

import math
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.agent.errors import UserError
from proctor.agent.report.compare import compare_runs
from proctor.agent.report.compare_view import render_comparison
from proctor.agent.report.loader import load_run
from proctor.agent.report.stats import bootstrap_ci, paired_difference, standard_error
from proctor.agent.results.records import Outcome, SampleRecord
from tests.report.run_factory import header, make_frontiermath_sample, write_run

# (task, subject, outcomes per trial) for two models. Task t4 is only in A, t5 only in B,
# and B's judge error on t3 is not a result, so t3 for B is 1 of 2 scored trials... see below.
RUN_A = {
    "t1": ("algebra", [Outcome.CORRECT, Outcome.INCORRECT]),  # 0.5
    "t2": ("algebra", [Outcome.CORRECT, Outcome.CORRECT]),  # 1.0
    "t3": ("geometry", [Outcome.INCORRECT, Outcome.INCORRECT]),  # 0.0
    "t4": ("geometry", [Outcome.CORRECT]),
}
RUN_B = {
    "t1": ("algebra", [Outcome.CORRECT, Outcome.CORRECT]),  # 1.0
    "t2": ("algebra", [Outcome.CORRECT, Outcome.INCORRECT]),  # 0.5
    "t3": ("geometry", [Outcome.CORRECT, Outcome.INCORRECT, Outcome.JUDGE_ERROR]),  # 0.5
    "t5": ("geometry", [Outcome.INCORRECT]),
}


def _write(tmp_path: Path, name: str, model: str, plan: dict[str, tuple[str, list[Outcome]]]) -> Path:
    rng = random.Random(5)
    samples: list[SampleRecord] = []
    for task, (subject, outcomes) in plan.items():
        for trial, outcome in enumerate(outcomes):
            base = make_frontiermath_sample(rng, 0, run_id=name, model=model, force_at=660_000, cap=10**6)
            samples.append(
                base.model_copy(
                    update={
                        "task_id": task,
                        "trial": trial,
                        "subject": subject,
                        "outcome": outcome,
                        "success": outcome == Outcome.CORRECT,
                    }
                )
            )
    head = header(
        name, [model], track="frontiermath", force_at=660_000, cap=10**6, backend="docker", samples=samples
    )
    return write_run(tmp_path / name, samples, head)


@pytest.fixture()
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    return _write(tmp_path, "run-a", "model-a", RUN_A), _write(tmp_path, "run-b", "model-b", RUN_B)


def test_paired_differences_match_hand_computation(two_runs: tuple[Path, Path]) -> None:
    comparison = compare_runs([load_run(p) for p in two_runs])
    assert [arm.label for arm in comparison.arms] == ["model-a", "model-b"]
    overall = next(p for p in comparison.paired if p.subject is None)
    # Tasks in common t1, t2, t3; B - A = [+0.5, -0.5, +0.5].
    assert overall.difference.n == 3
    assert overall.difference.mean == pytest.approx(1 / 6)
    # sd = sqrt(((1/3)^2 + (2/3)^2 + (1/3)^2) / 2) = sqrt(1/3); SE = sd / sqrt(3) = 1/3.
    assert overall.difference.se == pytest.approx(1 / 3)
    # Resampling 3 tasks: all three -0.5 has probability 1/27 > 2.5%, all +0.5 has 8/27.
    assert (overall.difference.ci_low, overall.difference.ci_high) == (-0.5, 0.5)
    by_subject = {p.subject: p.difference for p in comparison.paired if p.subject}
    assert by_subject["algebra"].mean == pytest.approx(0.0)
    assert by_subject["algebra"].se == pytest.approx(0.5)
    assert by_subject["geometry"].mean == pytest.approx(0.5)
    # One task has no spread: its SE is undefined (shown as a dash), not zero.
    assert by_subject["geometry"].n == 1 and math.isnan(by_subject["geometry"].se)
    # Each arm's own accuracy uses all its scored samples (judge errors left out).
    arm_b = comparison.arms[1]
    assert arm_b.task_means == {"t1": 1.0, "t2": 0.5, "t3": 0.5, "t5": 0.0}
    assert comparison.tasks == ["t1", "t2", "t3", "t4", "t5"]
    # Side by side per subject, over each arm's own tasks: A algebra = mean(0.5, 1.0).
    assert comparison.subjects() == ["algebra", "geometry"]
    assert comparison.subject_accuracy(comparison.arms[0], "algebra").mean == pytest.approx(0.75)
    assert comparison.subject_accuracy(comparison.arms[1], "geometry").mean == pytest.approx(0.25)


def test_stats_primitives() -> None:
    # variance = 4 * 0.25 / 3 = 1/3, so SE = sqrt(1/3) / sqrt(4).
    assert standard_error([1.0, 0.0, 1.0, 0.0]) == pytest.approx((1 / 3) ** 0.5 / 2)
    assert bootstrap_ci([2.0]) == (2.0, 2.0)
    low, high = bootstrap_ci([0.0, 1.0] * 50)
    assert 0.35 < low < 0.5 < high < 0.65
    assert paired_difference([]).n == 0


def test_one_arm_is_a_clear_error(two_runs: tuple[Path, Path]) -> None:
    with pytest.raises(UserError, match="at least two"):
        compare_runs([load_run(two_runs[0])])


def test_same_model_in_two_runs_is_labelled_by_run(tmp_path: Path) -> None:
    first = _write(tmp_path, "run-1", "same-model", RUN_A)
    second = _write(tmp_path, "run-2", "same-model", RUN_B)
    comparison = compare_runs([load_run(first), load_run(second)])
    assert [arm.label for arm in comparison.arms] == ["run-1 · same-model", "run-2 · same-model"]


def test_compare_cli_prints_tables_and_writes_page(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    page = tmp_path / "cmp.html"
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from proctor.agent.cli import main; main()",
            "compare",
            *map(str, two_runs),
            "--html",
            str(page),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    assert "+16.7 pp" in result.stdout and "33.3 pp" in result.stdout
    assert "[-50.0, +50.0]" in result.stdout
    html = page.read_text()
    assert "+16.7 pp" in html and "model-a" in html and "<script" not in html
    assert "Per subject" in html and "75.0% ± 25.0% (n=4)" in html
    # The forest plot: one dot per paired difference (overall + algebra + geometry), overall at +1/6.
    assert html.count("<circle ") == 3
    assert 'class="overall"' in html and 'data-mean="0.166667"' in html
    assert not re.search(r"""\b(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)
    assert render_comparison(compare_runs([load_run(p) for p in two_runs])) == html


def test_names_from_the_records_are_printed_as_text_never_as_markup(tmp_path: Path) -> None:
    # A task id, subject or model label is data (a task file or an edited run directory sets
    # it): "[/bold]" used to reach rich as markup and raise MarkupError, a traceback.
    import io

    from rich.console import Console

    from proctor.agent.report.compare_view import print_comparison

    hostile = {"[/bold]": ("[/x] algebra", [Outcome.CORRECT]), "t2\x1b[2J": ("[red]geo", [Outcome.INCORRECT])}
    runs = [
        _write(tmp_path, "run-a", "model-[/a]", hostile),
        _write(tmp_path, "run-b", "model-b[link=x]", hostile),
    ]
    out = io.StringIO()
    print_comparison(compare_runs([load_run(path) for path in runs]), Console(file=out, width=250))
    shown = out.getvalue()
    assert "[/bold]" in shown and "[/x] algebra" in shown and "[red]geo" in shown and "model-[/a]" in shown
    # Shown, not obeyed: the escape that would clear the screen is spelled out.
    assert "\x1b[2J" not in shown and "\\x1b[2J" in shown


def test_proctor_validate_prints_task_ids_and_sandbox_output_as_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The same rule for `proctor validate`'s table: a task id and a failing reference's output
    # are data; "[/x]" there raised MarkupError after every reference had already run.
    from proctor.agent.cli.validate_cmd import _print_table
    from proctor.agent.tracks.frontiermath.validation import ReferenceCheck

    checks = [
        ReferenceCheck("[/x]", Outcome.CORRECT, None, "1", 0.1),
        ReferenceCheck(
            "t2", Outcome.ANSWER_ERROR, "Traceback\nValueError: [/bold] \x1b]0;owned\x07", None, 0.2
        ),
    ]
    _print_table(checks, {"backend": "local"})
    shown = capsys.readouterr().out
    assert "[/x]" in shown and "ValueError: [/bold]" in shown and "\x1b" not in shown


def _compare_cli(*args: str) -> subprocess.CompletedProcess[str]:
    # A pipe with no COLUMNS: what `proctor compare ... | less` or a script sees.
    return subprocess.run(
        [sys.executable, "-c", "from proctor.agent.cli import main; main()", "compare", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
        cwd=Path(__file__).resolve().parents[2],
    )


def test_compare_in_a_pipe_prints_every_task_name_whole(tmp_path: Path) -> None:
    long_name = "frontiermath-" + "very-long-task-name-" * 6 + "end"
    plan = {long_name: ("a subject name that is rather long too", [Outcome.CORRECT])} | RUN_A
    first = _write(tmp_path, "run-1", "model-with-a-long-name/" + "x" * 40, plan)
    second = _write(tmp_path, "run-2", "model-b", plan)
    result = _compare_cli(str(first), str(second))
    assert result.returncode == 0, result.stderr
    assert long_name in result.stdout and "…" not in result.stdout
    assert "a subject name that is rather long too" in result.stdout


def test_compare_json_is_the_comparison_as_data(two_runs: tuple[Path, Path]) -> None:
    import json

    result = _compare_cli(*map(str, two_runs), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)  # one object, nothing else on stdout
    comparison = compare_runs([load_run(path) for path in two_runs])
    assert data["baseline"] == comparison.baseline.label
    assert [arm["label"] for arm in data["arms"]] == [arm.label for arm in comparison.arms]
    [overall] = [p for p in data["paired"] if p["subject"] is None]
    [expected] = [p for p in comparison.paired if p.subject is None]
    assert overall["difference"]["mean"] == pytest.approx(expected.difference.mean)
    assert data["arms"][0]["task_means"] == dict(sorted(comparison.arms[0].task_means.items()))
    assert {task["task_id"] for task in data["tasks"]} == set(comparison.tasks)
    # Undefined statistics (NaN) are null: the output is strict JSON.
    assert "NaN" not in result.stdout


def test_compare_shows_each_arms_error_samples(two_runs: tuple[Path, Path]) -> None:
    # Issue 38, item 10: B's judge error was left out of its accuracy without a word.
    import io

    from rich.console import Console

    from proctor.agent.report.compare import comparison_json
    from proctor.agent.report.compare_view import print_comparison

    comparison = compare_runs([load_run(p) for p in two_runs])
    # The oracle: the plans above; A has no error outcome, B one judge_error.
    assert [arm.error_outcomes for arm in comparison.arms] == [{}, {"judge_error": 1}]
    assert [arm["error_samples"] for arm in comparison_json(comparison)["arms"]] == [{}, {"judge_error": 1}]
    out = io.StringIO()
    print_comparison(comparison, Console(file=out, width=200))
    rows: dict[str, str] = {}
    for line in out.getvalue().splitlines():
        if "│ model-" in line:  # the arms table comes first: its row is the first of each name
            rows.setdefault(line.split("│")[1].strip(), line)
    assert re.search(r"│\s+0\s+│", rows["model-a (baseline)"]), rows
    assert "1 (judge_error 1)" in rows["model-b"], rows
    page = render_comparison(comparison)
    assert "<th>Errors</th>" in page or ">Errors<" in page
    assert "1 (judge_error 1)" in page
