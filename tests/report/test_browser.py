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

from proctor.agent.report.loader import load_run
from proctor.agent.report.page import render_report
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
    # data: URLs (KaTeX's inlined fonts) are read from the page itself, not fetched.
    assert {url for url in browser.requested_urls() if not url.startswith("data:")} <= {page.as_uri()}


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


def _hostile_run(tmp_path: Path) -> tuple[Path, list]:
    """The render tests' hostile samples, plus a judged sample whose answer is one long formula."""
    from tests.report.test_report_questions import _hostile_samples, _run

    samples = _hostile_samples()
    formula = "\\frac{" + "a_{1}+" * 600 + "b}{c}"
    long = samples[0].model_copy(
        update={
            "task_id": "long-formula",
            "transcript": [
                {"role": "user", "content": "Give the formula."},
                {"role": "assistant", "content": f"FINAL ANSWER: ${formula}$"},
            ],
        }
    )
    samples.append(long)
    # Record text used as a lookup key must not reach Object's own members.
    samples.append(
        samples[0].model_copy(
            update={
                "task_id": "proto-keys",
                "reference": samples[0].reference.model_copy(update={"kind": "constructor"}),
                "transcript": [{"role": "user", "kind": "__proto__", "content": "hi"}],
            }
        )
    )
    return _run(tmp_path, samples, track="olympiad", judge={"name": "openai/judge"}), samples


def _text(browser: Chromium, selector: str) -> str:
    return browser.evaluate(f"document.querySelector({json.dumps(selector)}).textContent")


def test_hostile_audit_trail_is_shown_verbatim_and_inert(browser: Chromium, tmp_path: Path) -> None:
    from tests.report.test_report_questions import HOSTILE

    run_dir, samples = _hostile_run(tmp_path)
    page = _open(browser, run_dir, "browser-hostile")
    for index in range(len(samples)):
        browser.evaluate(f"window.__proctorReport.open({index})")
    judged, fm = '.detail[data-sample="0"]', '.detail[data-sample="1"]'
    # The reference, the exact judge prompt and the reply reach the reader character for character.
    assert _text(browser, f"{judged} .panel.reference pre") == f"reference {HOSTILE}"
    browser.evaluate(f"document.querySelector('{judged} details.judge-prompt').open = true")
    assert _text(browser, f"{judged} details.judge-prompt pre") == f"prompt {HOSTILE}"
    assert HOSTILE in _text(browser, f"{judged} .panel.judge")
    assert "stored whole" in _text(browser, f"{judged} details.judge-prompt summary")
    # FrontierMath: the verify() source, highlighted as code.
    assert _text(browser, f"{fm} .panel.reference h4").startswith("verify() source")
    assert HOSTILE in _text(browser, f"{fm} .panel.reference pre.code")
    proto = f'.detail[data-sample="{len(samples) - 1}"]'
    assert _text(browser, f"{proto} .panel.reference h4") == "Reference (constructor)"
    assert _text(browser, f"{proto} .msg.user .role") == "user"
    # Nothing ran, nothing links anywhere, nothing was fetched.
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    active = "[href],[src],[onerror],[onload],[onclick],iframe,object,embed,a"
    assert _count(browser, f"body {active}") == 0
    assert _count(browser, "script:not([type='application/json']):not(#katex-script)") == 1
    _assert_offline_and_clean(browser, page)


def test_latex_prose_wraps_instead_of_overflowing(browser: Chromium, tmp_path: Path) -> None:
    run_dir, samples = _hostile_run(tmp_path)
    _open(browser, run_dir, "browser-latex")
    index = next(i for i, s in enumerate(samples) if s.task_id == "long-formula")
    browser.evaluate(f"window.__proctorReport.open({index})")
    detail = f'.detail[data-sample="{index}"]'
    # Rendered (KaTeX installed), the formula is wider than its panel: it scrolls inside its own
    # block, which stays within the panel. Its source is then one click away.
    rendered = _count(browser, f"{detail} .math-view")
    assert browser.evaluate(
        f"Array.from(document.querySelectorAll('{detail} .math-view')).every(v => "
        "v.getBoundingClientRect().right <= v.closest('.msg, .panel').getBoundingClientRect().right + 1)"
    )
    answer = f"{detail} .msg.assistant"
    if rendered:
        view = f"document.querySelector('{answer} .math-view')"
        assert browser.evaluate(f"{view}.scrollWidth > {view}.clientWidth")
        assert browser.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        browser.evaluate(f"document.querySelectorAll('{detail} button.latex-toggle').forEach(b => b.click())")
    assert browser.evaluate(f"document.querySelector('{answer} pre.prose').offsetParent !== null")
    overflowing = browser.evaluate(
        f"Array.from(document.querySelectorAll('{detail} pre.prose'))"
        ".filter(p => p.scrollWidth > p.clientWidth + 1).length"
    )
    assert overflowing == 0
    assert (
        browser.evaluate("getComputedStyle(document.querySelector('pre.prose')).fontFamily").find("Mono") >= 0
    )
    assert browser.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    # Nor does hostile or long text in names widen the page: names wrap only between words
    # (tests/report/test_layout_browser.py), so the sample list scrolls sideways in its own frame.
    assert browser.evaluate(
        "var w = document.querySelector('table.samples').parentNode;"
        "getComputedStyle(w).overflowX === 'auto' && "
        "w.getBoundingClientRect().right <= w.closest('section').getBoundingClientRect().right"
    )
    browser.evaluate(f"document.querySelector('{detail}').scrollIntoView()")
    browser.screenshot(ARTIFACTS / "report-latex.png")


def test_grid_cells_open_their_sample_and_passk_shows(browser: Chromium, small_run: Path) -> None:
    _open(browser, small_run, "browser-grid")
    assert _count(browser, "table.passk td[data-k]") >= 2
    cell = browser.evaluate(
        "var c = document.querySelectorAll('table.grid td[data-sample]')[7];"
        "c.click(); c.getAttribute('data-sample')"
    )
    assert _count(browser, f'.detail[data-sample="{cell}"]') == 1
    outcome = browser.evaluate(f"document.querySelector('#row-{cell} .outcome').textContent")
    expected = browser.evaluate("document.querySelectorAll('table.grid td[data-sample]')[7].dataset.outcome")
    assert outcome == expected.replace("_", " ")


def test_a_samples_judge_retries_show_next_to_its_model_retries(browser: Chromium, tmp_path: Path) -> None:
    from tests.report.test_render import retries_run

    run_dir = retries_run(tmp_path, judge_retries=[3, 0], model_retries=[2, 0])
    page = _open(browser, run_dir, "browser-retries")
    fields = []
    for index in range(2):
        browser.evaluate(f"window.__proctorReport.open({index})")
        fields.append(
            browser.evaluate(
                "Array.from(document.querySelectorAll("
                f"'.detail[data-sample=\"{index}\"] > .fields > .field'))"
                ".map(f => [f.querySelector('.label').textContent, f.querySelector('.value').textContent])"
            )
        )
    labels = [label for label, _ in fields[0]]
    assert labels.index("judge retries") == labels.index("retries") + 1
    assert dict(fields[0])["judge retries"] == "3" and dict(fields[0])["retries"] == "2"
    # None to show: no field, as for the model's retries.
    assert "judge retries" not in dict(fields[1]) and "retries" not in dict(fields[1])
    _assert_offline_and_clean(browser, page)
