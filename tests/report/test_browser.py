"""The report in headless Debian chromium: plots and transcripts appear, nothing errs or
reaches the network, hostile model text stays inert, and 1,000 samples open in under 3 s.

Screenshots land in artifacts/ (gitignored) as the test run's artifacts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.report.loader import load_run
from agent.report.page import render_report
from tests.report.cdp import Chromium
from tests.report.conftest import ARTIFACTS

pytestmark = pytest.mark.browser
READY = "window.__proctorReport && window.__proctorReport.paintedAt !== null"


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    with Chromium(width=1400, height=1000) as chromium:
        yield chromium


def _open(browser: Chromium, run_dir: Path, name: str) -> Path:
    page = run_dir / f"{name}.html"
    page.write_text(render_report(load_run(run_dir)), encoding="utf-8")
    browser.navigate(page.as_uri(), ready_expression=READY)
    return page


def _assert_offline_and_clean(browser: Chromium, page: Path) -> None:
    assert browser.console_errors() == []
    assert set(browser.requested_urls()) <= {page.as_uri()}


def _count(browser: Chromium, selector: str) -> int:
    return int(browser.evaluate(f"document.querySelectorAll({json.dumps(selector)}).length"))


def test_small_report_renders_plots_and_transcripts(browser: Chromium, small_run: Path) -> None:
    page = _open(browser, small_run, "browser-small")
    run = load_run(small_run)
    for plot in ("plot-accuracy", "plot-tokens", "plot-outcomes", "plot-durations"):
        assert _count(browser, f"svg.{plot}") == 1, plot
    assert _count(browser, "svg.plot-tokens polyline.curve") == len(run.samples)
    assert _count(browser, "tr.sample-row") == min(50, len(run.samples))
    browser.screenshot(ARTIFACTS / "report-summary.png")

    forced_samples = [i for i, s in enumerate(run.samples) if s.forced_submission_turn and s.submission]
    shapes = {any("kind" in m for m in run.samples[i].transcript): i for i in forced_samples}
    assert set(shapes) == {True, False}, "the fixture should hold both transcript shapes"
    for index in shapes.values():
        browser.evaluate(f"window.__proctorReport.open({index})")
        assert _count(browser, f'.detail[data-sample="{index}"] .forced-marker') == 1
        assert _count(browser, f'.detail[data-sample="{index}"] .badge.warn') >= 1
    forced = shapes[True]
    detail = f'.detail[data-sample="{forced}"]'
    notice = browser.evaluate(f"document.querySelector('{detail} .forced-marker .notice').textContent")
    assert "call submit_answer now" in notice
    assert _count(browser, f"{detail} .msg.assistant") >= 2
    assert _count(browser, f"{detail} pre.code .tok-keyword") >= 1
    assert _count(browser, f"{detail} .panel.submission") == 1
    assert _count(browser, f"{detail} svg.mini-tokens line.limit-force") == 1
    marker_text = browser.evaluate(f"document.querySelector('{detail} .forced-marker').textContent")
    assert f"turn {run.samples[forced].forced_submission_turn}" in marker_text
    browser.evaluate(f"document.querySelector('{detail}').scrollIntoView()")
    browser.screenshot(ARTIFACTS / "report-transcript.png")

    truncated = next(i for i, s in enumerate(run.samples) if any(c.truncated for c in s.tool_calls))
    browser.evaluate(f"window.__proctorReport.open({truncated})")
    assert _count(browser, f'.detail[data-sample="{truncated}"] .badge.trunc') >= 1
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    _assert_offline_and_clean(browser, page)


def test_filters_and_search_narrow_the_list(browser: Chromium, small_run: Path) -> None:
    _open(browser, small_run, "browser-filters")
    run = load_run(small_run)
    browser.evaluate(
        "var s = document.getElementById('filter-outcome'); s.value = 'correct';"
        "s.dispatchEvent(new Event('change'))"
    )
    correct = sum(1 for s in run.samples if s.outcome == "correct")
    outcomes = browser.evaluate(
        "Array.from(document.querySelectorAll('tr.sample-row .outcome')).map(e => e.textContent)"
    )
    assert outcomes and set(outcomes) == {"correct"} and len(outcomes) == min(50, correct)
    browser.evaluate(
        "var s = document.getElementById('filter-outcome'); s.value = '';"
        "s.dispatchEvent(new Event('change'));"
        "var q = document.getElementById('filter-search'); q.value = 'N_7 be';"
        "q.dispatchEvent(new Event('input'))"
    )
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _count(browser, "tr.sample-row") != 1:
        time.sleep(0.05)
    first_task = browser.evaluate("document.querySelector('tr.sample-row td').textContent")
    assert first_task == run.samples[7].task_id
    # Sorting by tokens (descending first for numbers) puts the biggest sample on top.
    browser.evaluate(
        "var q = document.getElementById('filter-search'); q.value = ''; q.dispatchEvent(new Event('input'))"
    )
    time.sleep(0.4)
    browser.evaluate("document.querySelector('th[data-key=tokens]').click()")
    top_tokens = browser.evaluate("document.querySelector('tr.sample-row').id")
    biggest = max(range(len(run.samples)), key=lambda i: (run.samples[i].total_tokens, -i))
    assert top_tokens == f"row-{biggest}"
    browser.evaluate("document.querySelector('th[data-key=tokens]').click()")
    smallest = min(range(len(run.samples)), key=lambda i: (run.samples[i].total_tokens, i))
    assert browser.evaluate("document.querySelector('tr.sample-row').id") == f"row-{smallest}"
    # Markup-looking queries match the escaped JSON too.
    browser.evaluate(
        "var q = document.getElementById('filter-search'); q.value = '<b>derangements</b>';"
        "q.dispatchEvent(new Event('input'))"
    )
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and "of" in browser.evaluate(
        "document.getElementById('sample-status').textContent"
    ):
        time.sleep(0.05)
    status = browser.evaluate("document.getElementById('sample-status').textContent")
    assert status == f"{len(run.samples)} samples"


def test_judged_report_shows_judge_and_eed(browser: Chromium, judged_run: Path) -> None:
    page = _open(browser, judged_run, "browser-judged")
    run = load_run(judged_run)
    assert _count(browser, ".banner.warn") >= 1  # the local backend warning
    for index in range(len(run.samples)):
        browser.evaluate(f"window.__proctorReport.open({index})")
    error = next(i for i, s in enumerate(run.samples) if s.outcome == "judge_error")
    browser.evaluate(f"window.__proctorReport.open({error})")
    detail = f'.detail[data-sample="{error}"]'
    assert _count(browser, f"{detail} .panel.judge") == 1
    assert _count(browser, f"{detail} .panel.eed") == 1
    judge_text = browser.evaluate(f"document.querySelector('{detail} .panel.judge').textContent")
    assert "no VERDICT line" in judge_text
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    browser.evaluate(f"document.querySelector('{detail}').scrollIntoView()")
    browser.screenshot(ARTIFACTS / "report-judged.png")
    _assert_offline_and_clean(browser, page)


def test_thousand_sample_report_opens_in_under_three_seconds(browser: Chromium, big_run: Path) -> None:
    page = big_run / "report.html"
    page.write_text(render_report(load_run(big_run)), encoding="utf-8")
    timings = []
    # Two loads; the better one is the figure, so one stall of this shared machine is not a verdict.
    for _ in range(2):
        browser.navigate(page.as_uri(), ready_expression=READY)
        timings.append(browser.evaluate("window.__proctorReport.paintedAt"))
    assert browser.evaluate("window.__proctorReport.samples") == 1000
    _assert_offline_and_clean(browser, page)
    browser.evaluate("window.__proctorReport.open(999)")
    assert _count(browser, '.detail[data-sample="999"] .msg') > 20
    browser.screenshot(ARTIFACTS / "report-1000-samples.png")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "report-load-time.json").write_text(
        json.dumps({"samples": 1000, "page_bytes": page.stat().st_size, "load_ms": timings}, indent=2)
    )
    print(f"1,000-sample report ({page.stat().st_size / 1e6:.0f} MB): opened in {timings} ms")
    assert min(timings) < 3000, timings
