"""The rendered page: plots, tables, embedded transcripts, escaping, no network references."""

from __future__ import annotations

import html as html_lib
import json
import random
import re
import shutil
from pathlib import Path

import pytest

from proctor.agent.errors import UserError
from proctor.agent.report.latex import katex_status
from proctor.agent.report.loader import load_run
from proctor.agent.report.page import LOCAL_BACKEND_WARNING, embedded_record, json_for_script, render_report
from proctor.agent.results.records import Outcome, SampleRecord, ToolCallRecord
from tests.report.conftest import SMALL_CAP, SMALL_FORCE_AT
from tests.report.run_factory import header, make_frontiermath_sample, write_run

JSON_BLOCK = re.compile(r'<script type="application/json" id="([^"]+)">(.*?)</script>', re.S)


def _render(run_dir: Path) -> str:
    return render_report(load_run(run_dir))


def _svg(html: str, css: str) -> str:
    match = re.search(rf'<svg class="plot {css}".*?</svg>', html, re.S)
    assert match, f"plot {css} missing"
    return match.group(0)


def test_page_holds_all_four_plots_with_data(small_run: Path) -> None:
    html = _render(small_run)
    run = load_run(small_run)
    accuracy = _svg(html, "plot-accuracy")
    # One bar per (subject, model): 5 subjects x 2 models.
    assert accuracy.count('<g class="bar"') == 10
    tokens = _svg(html, "plot-tokens")
    assert tokens.count('<polyline class="curve') == sum(1 for s in run.samples if s.turns)
    outcomes = _svg(html, "plot-outcomes")
    counted = sum(int(n) for n in re.findall(r'class="outcome-bar"[^>]*data-count="(\d+)"', outcomes))
    assert counted == len(run.samples)
    durations = _svg(html, "plot-durations")
    histogram_total = sum(int(n) for n in re.findall(r'class="hist" data-count="(\d+)"', durations))
    assert histogram_total == sum(c.ran_in_sandbox for s in run.samples for c in s.tool_calls)


def test_duration_histogram_counts_only_calls_that_ran_code(tmp_path: Path) -> None:
    rng = random.Random(5)
    base = make_frontiermath_sample(rng, 0, run_id="calls", model="m", force_at=660_000, cap=10**6)
    not_run = [
        # Malformed arguments never reach the sandbox; a rejected submit carries only its outcome.
        ToolCallRecord(
            turn=1, call_id="a", name="python", raw_arguments="{", error="bad JSON", duration_s=3e-6,
        ),
        ToolCallRecord(
            turn=2, call_id="b", name="submit_answer", raw_arguments="{}", duration_s=2e-4,
            sandbox={"outcome": "invalid_submission"},
        ),
    ]  # fmt: skip
    sample = base.model_copy(update={"tool_calls": [*base.tool_calls, *not_run]})
    run_dir = write_run(
        tmp_path / "calls",
        [sample],
        header(
            "calls",
            ["m"],
            track="frontiermath",
            force_at=660_000,
            cap=10**6,
            backend="docker",
            samples=[sample],
        ),
    )
    durations = _svg(_render(run_dir), "plot-durations")
    histogram_total = sum(int(n) for n in re.findall(r'class="hist" data-count="(\d+)"', durations))
    assert histogram_total == sum(c.ran_in_sandbox for c in base.tool_calls) > 0


def test_token_limit_lines_sit_where_the_runs_budget_puts_them(small_run: Path) -> None:
    tokens = _svg(_render(small_run), "plot-tokens")
    scale = re.search(r'data-y-scale="([^"]+)"', tokens)
    assert scale
    low, high, pixel_low, pixel_high = map(float, scale.group(1).split())
    assert low == 0 and high >= SMALL_CAP

    def pixel(value: float) -> float:
        return pixel_low + (value - low) / (high - low) * (pixel_high - pixel_low)

    for css, value in (("limit-force", SMALL_FORCE_AT), ("limit-cap", SMALL_CAP)):
        line = re.search(rf'<line class="limit {css}" data-tokens="(\d+)"[^>]*y1="([\d.]+)"', tokens)
        assert line, css
        assert int(line.group(1)) == value
        assert float(line.group(2)) == pytest.approx(pixel(value), abs=0.06)
    # The force line sits below the cap line (larger y in SVG coordinates).
    assert pixel(SMALL_FORCE_AT) > pixel(SMALL_CAP)
    assert "force submit 20k" in tokens and "cap 30k" in tokens


def test_every_sample_is_embedded_and_round_trips(small_run: Path) -> None:
    html = _render(small_run)
    run = load_run(small_run)
    blocks = dict(JSON_BLOCK.findall(html))
    index = json.loads(blocks["sample-index"])
    assert len(index) == len(run.samples)
    for position, sample in enumerate(run.samples):
        embedded = json.loads(blocks[f"sample-{position}"])
        assert embedded == embedded_record(sample)
        assert embedded["transcript"] == sample.model_dump(mode="json")["transcript"]
    meta = json.loads(blocks["report-meta"])
    katex = katex_status()[0]
    assert meta == {
        "force_submit_at": SMALL_FORCE_AT,
        "token_cap": SMALL_CAP,
        "agentic": True,
        "katex": katex.version if katex else None,
    }


def test_model_text_cannot_break_out_of_the_page(small_run: Path, judged_run: Path) -> None:
    for run_dir in (small_run, judged_run):
        html = _render(run_dir)
        assert "window.__pwned" in html  # the hostile text is there, as data
        assert "<script>window.__pwned" not in html
        assert "<img src=x" not in html
        # Every <script> element the page opens is one the page meant to open: the meta and
        # index blocks, one per sample, report.js, and KaTeX's where it is installed.
        opened = len(re.findall(r"<script\b", html, re.I))
        assert opened == len(load_run(run_dir).samples) + 3 + (katex_status()[0] is not None)
        for _block_id, body in JSON_BLOCK.findall(html):
            assert "</" not in body and "<!--" not in body


def test_json_for_script_escapes_closing_tags() -> None:
    text = json_for_script({"a": "</script><!-- <script>"})
    assert "<" not in text
    assert json.loads(text) == {"a": "</script><!-- <script>"}


def test_page_makes_no_network_references(small_run: Path, judged_run: Path) -> None:
    for run_dir in (small_run, judged_run):
        html = _render(run_dir)
        assert not re.search(r"""\b(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
        assert not re.search(r"<link\b", html, re.I)
        assert not re.search(r"<script\b[^>]*\bsrc\s*=", html, re.I)
        assert not re.search(r"@import|url\(\s*['\"]?https?:", html, re.I)
        assert "default-src 'none'" in html


def test_header_and_summary_show_the_run(small_run: Path) -> None:
    html = _render(small_run)
    for text in (
        "run-test",
        "openai/model-a",
        "openai/model-b",
        "frontiermath",
        "sha256:3f1c0ffee0ddba11",
        "proctor 0.1.0",
        "force submit at 20,000",
        "cap 30,000",
    ):
        assert text in html
    assert LOCAL_BACKEND_WARNING not in html
    assert "Cost (USD)" in html
    run = load_run(small_run)
    totals = re.search(r'<p class="totals">(.*?)</p>', html)
    assert totals
    assert f"{len(run.samples)} of {len(run.samples)} planned samples" in totals.group(1)
    assert f"{sum(s.total_tokens for s in run.samples):,} tokens" in totals.group(1)
    forced = sum(1 for s in run.samples if s.forced_submission_turn is not None)
    assert f"{forced} forced submissions" in totals.group(1)
    assert "By subject" in html


def test_local_backend_is_flagged_and_judge_errors_are_counted(judged_run: Path) -> None:
    run = load_run(judged_run)
    html = render_report(run)
    assert LOCAL_BACKEND_WARNING in html
    judge_errors = sum(1 for s in run.samples if s.outcome == "judge_error")
    assert judge_errors > 0
    overall = re.search(r'<table class="summary">.*?</table>', html, re.S).group(0)
    row = re.search(r"<tbody><tr>(.*?)</tr>", overall, re.S).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    header_cells = re.findall(r"<th[^>]*>(.*?)</th>", overall)
    assert cells[header_cells.index("Judge errors")] == str(judge_errors)
    assert "Mean EED" in header_cells
    # No prices in this run's config: no cost column, and the page says why.
    assert "Cost (USD)" not in html and "No prices are configured" in html


def _tiny_run(tmp_path: Path) -> Path:
    """Four samples whose accuracy is known: tasks t0..t3, successes 1, 0, 1, judge_error."""
    import random

    rng = random.Random(3)
    samples = []
    for index, (outcome, success) in enumerate(
        (
            (Outcome.CORRECT, True),
            (Outcome.INCORRECT, False),
            (Outcome.CORRECT, True),
            (Outcome.JUDGE_ERROR, False),
        )
    ):
        base = make_frontiermath_sample(rng, index * 2, run_id="tiny", model="m", force_at=660_000, cap=10**6)
        samples.append(
            base.model_copy(
                update={"outcome": outcome, "success": success, "task_id": f"t{index}", "subject": "algebra"}
            )
        )
    return write_run(
        tmp_path / "tiny",
        samples,
        header(
            "tiny",
            ["m"],
            track="frontiermath",
            force_at=660_000,
            cap=10**6,
            backend="docker",
            samples=samples,
        ),
    )


def test_accuracy_excludes_error_outcomes_and_matches_hand_count(tmp_path: Path) -> None:
    html = _render(_tiny_run(tmp_path))
    overall = re.search(r'<table class="summary">.*?</table>', html, re.S).group(0)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", re.search(r"<tbody><tr>(.*?)</tr>", overall, re.S).group(1))
    header_cells = re.findall(r"<th[^>]*>(.*?)</th>", overall)
    # 2 of the 3 scored samples succeeded; SE = sd([1,0,1]) / sqrt(3) = 0.57735 / 1.73205 = 0.3333.
    assert cells[header_cells.index("Accuracy")] == "66.7%"
    assert cells[header_cells.index("± SE")] == "33.3%"
    assert cells[header_cells.index("Errors (not scored)")] == "1"
    assert cells[header_cells.index("Samples")] == "4"


def test_loader_names_file_line_and_field(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such run directory"):
        load_run(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"samples\.jsonl is missing"):
        load_run(tmp_path / "empty")
    bad = tmp_path / "bad"
    bad.mkdir()
    good_line = make_frontiermath_sample(
        __import__("random").Random(1), 0, run_id="r", model="m", force_at=660_000, cap=10**6
    ).model_dump_json()
    (bad / "samples.jsonl").write_text(good_line + "\n{not json\n" + good_line + "\n")
    with pytest.raises(UserError, match=r"samples\.jsonl:2: not valid JSON"):
        load_run(bad)
    record = json.loads(good_line)
    record["outcome"] = "great"
    (bad / "samples.jsonl").write_text(good_line + "\n" + json.dumps(record) + "\n")
    with pytest.raises(UserError, match=r"samples\.jsonl:2: field outcome"):
        load_run(bad)
    (bad / "samples.jsonl").write_text(good_line + "\n")
    (bad / "run.json").write_text("{")
    with pytest.raises(UserError, match=r"run\.json:1: not valid JSON"):
        load_run(bad)


def test_a_torn_last_line_is_reported_not_fatal(tmp_path: Path) -> None:
    run_dir = tmp_path / "torn"
    run_dir.mkdir()
    line = make_frontiermath_sample(
        __import__("random").Random(2), 0, run_id="r", model="m", force_at=660_000, cap=10**6
    ).model_dump_json()
    (run_dir / "samples.jsonl").write_text(line + "\n" + line[: len(line) // 2])
    run = load_run(run_dir)
    assert len(run.samples) == 1
    assert any("unfinished last line" in w for w in run.warnings)
    html = render_report(run)
    assert "unfinished last line" in html and "run.json is missing" in html


def test_budget_defaults_to_the_protocol_when_header_is_missing(tmp_path: Path) -> None:
    run_dir = tmp_path / "nohead"
    run_dir.mkdir()
    sample: SampleRecord = make_frontiermath_sample(
        __import__("random").Random(4), 0, run_id="r", model="m", force_at=660_000, cap=10**6
    )
    (run_dir / "samples.jsonl").write_text(sample.model_dump_json() + "\n")
    run = load_run(run_dir)
    assert run.budget == (660_000, 1_000_000)
    assert run.run_id == "r"
    assert run.sandbox["backend"] == "docker"


def test_a_run_with_no_finished_samples_still_renders(tmp_path: Path) -> None:
    run_dir = tmp_path / "empty-run"
    run_dir.mkdir()
    (run_dir / "samples.jsonl").write_text("")
    (run_dir / "run.json").write_text(json.dumps({"run_id": "r0", "status": "running"}))
    html = _render(run_dir)
    assert "no finished samples yet" in html
    assert "did not finish" in html
    for css in ("plot-accuracy", "plot-tokens", "plot-outcomes"):
        assert _svg(html, css)
    # No sandbox calls: no empty histogram.
    assert "plot-durations" not in html
    blocks = dict(JSON_BLOCK.findall(html))
    assert json.loads(blocks["sample-index"]) == []


def retries_run(tmp_path: Path, judge_retries: list[int], model_retries: list[int]) -> Path:
    from tests.report.run_factory import make_judged_sample

    rng = random.Random(8)
    samples = [
        make_judged_sample(rng, index, run_id="retries", model="openai/m").model_copy(
            update={"judge_retries": judged, "retries": answered}
        )
        for index, (judged, answered) in enumerate(zip(judge_retries, model_retries, strict=True))
    ]
    return write_run(
        tmp_path / "retries",
        samples,
        header(
            "retries",
            ["openai/m"],
            track="frontierscience-olympiad",
            force_at=660_000,
            cap=10**6,
            backend="docker",
            samples=samples,
            judge={"name": "openai/judge"},
        ),
    )


def test_judge_retries_are_shown_beside_the_model_retries(tmp_path: Path) -> None:
    html = _render(retries_run(tmp_path, judge_retries=[3, 0, 4], model_retries=[1, 1, 0]))
    totals = re.search(r'<p class="totals">(.*?)</p>', html)
    assert totals
    facts = totals.group(1).split(" · ")
    # Next to each other, each with its own count (the summary's model_retries and judge_retries).
    assert facts.index("7 judge retries") == facts.index("2 model retries") + 1
    # Each sample's record reaches the page with its own count, for its detail view.
    embedded = [
        json.loads(block)
        for block in re.findall(r'<script type="application/json" id="sample-\d+">(.*?)</script>', html, re.S)
    ]
    assert [record["judge_retries"] for record in embedded] == [3, 0, 4]


def test_a_run_without_judge_retries_says_nothing_of_them(tmp_path: Path) -> None:
    html = _render(retries_run(tmp_path, judge_retries=[0, 0], model_retries=[2, 0]))
    totals = re.search(r'<p class="totals">(.*?)</p>', html)
    assert totals and "2 model retries" in totals.group(1) and "judge retries" not in totals.group(1)


@pytest.mark.parametrize(
    ("recorded", "shown"),
    [
        ({}, "isolation fresh"),  # a run recorded before sandbox.isolation existed was fresh
        ({"call_isolation": "fresh", "engine_path": "docker"}, "isolation fresh · engine path docker"),
        (
            {"call_isolation": "per-sample", "engine_path": "runc-direct"},
            "isolation per-sample · engine path runc-direct",
        ),
    ],
)
def test_header_shows_the_sandbox_isolation_and_engine_path(
    small_run: Path, tmp_path: Path, recorded: dict[str, str], shown: str
) -> None:
    run_dir = tmp_path / "copy"
    shutil.copytree(small_run, run_dir)
    header = json.loads((run_dir / "run.json").read_text())
    header["sandbox"].update(recorded)
    (run_dir / "run.json").write_text(json.dumps(header))
    fact = re.search(r'data-fact="sandbox">(.*?)</span>', _render(run_dir))
    assert fact and shown in html_lib.unescape(fact.group(1))


def test_totals_show_the_sandbox_share_of_the_samples_wall_time(small_run: Path) -> None:
    totals = re.search(r'<p class="totals">(.*?)</p>', _render(small_run))
    assert totals
    text = html_lib.unescape(totals.group(1))
    assert re.search(r"sandbox \d+% of the samples' wall time \(median sample \d+%, most \d+%\)", text), text


def _with_cpu_figures(small_run: Path, run_dir: Path, cpu_s: float, every: int) -> None:
    """A copy of ``small_run`` whose every ``every``-th sandbox result carries ``cpu_s``."""
    shutil.copytree(small_run, run_dir)
    seen = 0
    lines = []
    for line in (run_dir / "samples.jsonl").read_text().splitlines():
        record = json.loads(line)
        results = [call["sandbox"] for call in record["tool_calls"] if call.get("sandbox")]
        submission = record.get("submission") or {}
        results += [submission[key] for key in ("answer_exec", "verify_exec") if submission.get(key)]
        for result in results:
            if "exit_code" in result:
                if seen % every == 0:
                    result["cpu_s"] = cpu_s
                seen += 1
        lines.append(json.dumps(record))
    (run_dir / "samples.jsonl").write_text("\n".join(lines) + "\n")


def _totals_text(run_dir: Path) -> str:
    totals = re.search(r'<p class="totals">(.*?)</p>', _render(run_dir))
    assert totals
    return html_lib.unescape(totals.group(1))


def test_totals_show_the_sandbox_cpu_beside_its_wall_share(small_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "cpu"
    _with_cpu_figures(small_run, run_dir, 0.25, every=1)
    text = _totals_text(run_dir)
    wall = re.search(r"sandbox \d+% of the samples' wall time \([^)]*\)", text)
    cpu = re.search(
        r"sandbox CPU [^,]+, [\d.e+-]+ CPU-s per wall-s \(median sample [\d.e+-]+, most [\d.e+-]+\)", text
    )
    assert wall and cpu, text
    # Beside it, and every call has a figure, so no count of the missing ones.
    assert text.index(cpu.group(0)) > text.index(wall.group(0)) and "figure for" not in text


def test_totals_say_how_many_calls_have_a_cpu_figure(small_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "cpu"
    _with_cpu_figures(small_run, run_dir, 0.25, every=2)
    assert re.search(r"; figure for [\d,]+ of [\d,]+ calls", _totals_text(run_dir))


def test_a_run_recorded_before_cpu_figures_says_the_cpu_was_not_measured(small_run: Path) -> None:
    # The factory writes records as they were before ``cpu_s`` existed.
    assert "sandbox CPU not measured (no call has a figure)" in _totals_text(small_run)
