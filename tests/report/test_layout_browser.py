"""Report and compare layout in headless Chromium: table cells wrap only between words, at a
narrow and a normal width, and the paired-difference plot keeps every arm label inside itself.

Screenshots land in artifacts/ (gitignored).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.agent.report.compare import compare_runs
from proctor.agent.report.compare_view import render_comparison
from proctor.agent.report.loader import load_run
from proctor.agent.report.page import render_report
from tests.report.cdp import Chromium
from tests.report.conftest import ARTIFACTS
from tests.report.test_compare import RUN_A, RUN_B, _write

pytestmark = pytest.mark.browser
READY = "window.__proctorReport && window.__proctorReport.paintedAt !== null"
NARROW, NORMAL = 640, 1400

# Every whitespace-separated word in the matched cells whose glyphs sit on more than one line:
# a word split mid-way ("frontiermat|h", "50.0|%", "openai/|model-a"). Hidden cells have no rects.
SPLIT_WORDS = """
(function (selector) {
  var split = [];
  Array.prototype.forEach.call(document.querySelectorAll(selector), function (cell) {
    if (cell.closest("tr.detail-row")) return;
    var walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT), node;
    while ((node = walker.nextNode())) {
      var word = /\\S+/g, match;
      while ((match = word.exec(node.data)) !== null) {
        var range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        var lines = {};
        Array.prototype.forEach.call(range.getClientRects(), function (rect) {
          if (rect.width > 0) lines[Math.round(rect.top)] = true;
        });
        if (Object.keys(lines).length > 1) split.push(match[0]);
      }
    }
  });
  return split;
})(%s)
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    with Chromium(width=NORMAL, height=900) as chromium:
        yield chromium


def _viewport(browser: Chromium, width: int) -> None:
    browser.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
    )


def _split_words(browser: Chromium, selector: str) -> list[str]:
    return list(browser.evaluate(SPLIT_WORDS % json.dumps(selector)))


@pytest.mark.parametrize("width", [NARROW, NORMAL])
def test_report_tables_wrap_only_between_words(browser: Chromium, small_run: Path, width: int) -> None:
    page = small_run / f"layout-{width}.html"
    html = render_report(load_run(small_run))
    assert "Cost (USD)" in html, "the fixture must have the cost column that made cells split"
    page.write_text(html, encoding="utf-8")
    _viewport(browser, width)
    browser.navigate(page.as_uri(), ready_expression=READY)
    tables = ["table.summary", "table.outcomes", "table.passk", "table.grid", "table.samples"]
    counts = {t: int(browser.evaluate(f"document.querySelectorAll('{t} td').length")) for t in tables}
    assert all(counts.values()), counts
    # Open a sample: the transcript inside the table must not change how the rows wrap.
    browser.evaluate("window.__proctorReport.open(3)")
    for table in tables:
        assert _split_words(browser, f"{table} th, {table} td") == [], (table, width)
    # Numbers never wrap at all: each numeric cell is one line.
    multiline = browser.evaluate(
        "Array.from(document.querySelectorAll('td.num')).filter(c => c.offsetParent !== null)"
        ".filter(c => c.getClientRects()[0].height > 2 * parseFloat(getComputedStyle(c).lineHeight)"
        " + 12).map(c => c.textContent)"
    )
    assert multiline == []
    # What does not fit scrolls inside its card; the page itself never widens.
    assert browser.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    browser.screenshot(ARTIFACTS / f"report-tables-{width}.png")
    _viewport(browser, NORMAL)


def test_a_split_word_is_detected(browser: Chromium, tmp_path: Path) -> None:
    """The measure above sees a mid-word split when the old rule (wrap anywhere) is applied."""
    page = tmp_path / "split.html"
    page.write_text(
        '<!DOCTYPE html><table style="width:60px"><tr><td style="overflow-wrap:anywhere">'
        "frontiermath 50.0%</td><td>openai/model-a</td></tr></table>",
        encoding="utf-8",
    )
    browser.navigate(page.as_uri(), ready_expression="document.readyState === 'complete'")
    assert {"frontiermath", "openai/model-a"} <= set(_split_words(browser, "td"))


LONG_A = "openai/gpt-4o-mini-2024-07-18-extended-preview"
LONG_B = "anthropic/claude-research-preview-with-a-very-long-deployment-name"


@pytest.mark.parametrize("models", [("model-a", "model-b"), (LONG_A, LONG_B)])
def test_difference_plot_keeps_every_arm_label_inside(
    browser: Chromium, tmp_path: Path, models: tuple[str, str]
) -> None:
    runs = [_write(tmp_path, "run-a", models[0], RUN_A), _write(tmp_path, "run-b", models[1], RUN_B)]
    comparison = compare_runs([load_run(p) for p in runs])
    page = tmp_path / "compare.html"
    page.write_text(render_comparison(comparison), encoding="utf-8")
    for width in (NARROW, NORMAL):
        _viewport(browser, width)
        browser.navigate(page.as_uri(), ready_expression="document.readyState === 'complete'")
        boxes = browser.evaluate(
            "(function () { var svg = document.querySelector('svg.plot-differences');"
            " var view = svg.viewBox.baseVal;"
            " return Array.from(svg.querySelectorAll('text[text-anchor=end]')).map(function (t) {"
            "   var b = t.getBBox();"
            "   return {text: t.textContent, x: b.x, right: b.x + b.width, viewX: view.x,"
            "           viewRight: view.x + view.width}; }); })()"
        )
        labels = [b for b in boxes if "(n=" in b["text"]]
        assert len(labels) == len([p for p in comparison.paired]) == 3
        assert any(models[1] in b["text"] for b in labels)
        for box in labels:
            assert box["x"] >= box["viewX"], box
            assert box["right"] <= box["viewRight"], box
        # The figure fits the page: the SVG scales down rather than widening the page.
        assert browser.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        # The compare page's tables follow the report's rule as well.
        assert _split_words(browser, "table th, table td") == []
    browser.evaluate("document.querySelector('svg.plot-differences').scrollIntoView()")
    browser.screenshot(ARTIFACTS / f"compare-differences-{len(models[1])}.png")
    _viewport(browser, NORMAL)
