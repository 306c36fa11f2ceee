"""LaTeX in the report renders as mathematics in headless Chromium, fully offline, with the
source one click away; prices stay prose, hostile LaTeX stays inert, and a page without
KaTeX shows the source and says so once.

Screenshots land in artifacts/ (gitignored).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.agent.report import latex
from proctor.agent.report.loader import load_run
from proctor.agent.report.page import render_report
from proctor.agent.results.records import JudgeRecord, ReferenceRecord, SampleRecord
from tests.report.cdp import Chromium
from tests.report.conftest import ARTIFACTS
from tests.report.run_factory import make_judged_sample
from tests.report.test_report_questions import _run

pytestmark = pytest.mark.browser
READY = "window.__proctorReport && window.__proctorReport.paintedAt !== null"

PROBLEM = "Let $f(x) = x^2$ on \\([0, 1]\\). Find \\[\\int_0^1 f(x)\\,dx.\\]"
ANSWER = "Integrating,\n$$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$\nso the answer is $\\frac13$."
REFERENCE = "\\frac{1}{3}"
REPLY = "The answer $\\frac{1}{3}$ matches the reference \\(1/3\\).\nVERDICT: CORRECT"

# FrontierScience-Olympiad wraps its math in code spans; only a span that is one formula renders.
BACKTICKED = "A mass `\\(m\\)` hangs at `$P$`; the code `x**2` and the price `$5` stay as written."
BACKTICKED_SHOWN = "A mass [math] hangs at [math]; the code `x**2` and the price `$5` stay as written."

PRICES = "3 pens cost $15, not $5-$10 and not $20 or $ 30; in symbols $3 \\cdot 5 = 15$. A \\$ sign."
PRICES_PROSE = "3 pens cost $15, not $5-$10 and not $20 or $ 30; in symbols "

# Each would run script, link out, fetch or hang if KaTeX trusted its input or expanded freely.
HOSTILE_TEX = (
    "$\\href{javascript:window.__pwned=1}{click}$ $\\url{javascript:window.__pwned=2}$ "
    "$\\htmlData{onclick=window.__pwned=3}{x}$ $\\htmlClass{a}{b}\\htmlId{c}{d}$ "
    "$\\htmlStyle{background:url(http://127.0.0.1:9/style)}{e}$ "
    "$\\includegraphics{http://127.0.0.1:9/img.png}$ "
    "$\\def\\a{\\a\\a}\\a$ "
    "$$\\def\\b#1{#1#1}\\b{\\b{\\b{\\b{\\b{\\b{\\b{\\b{\\b{\\b{\\b{\\b{\\b{\\b{x}}}}}}}}}}}}}}$$ "
    "$\\rule{100000em}{100000em}$ $\\kern100000em x$"
)


def _sample(index: int, *, user: str, answer: str, reference: str, reply: str) -> SampleRecord:
    import random

    base = make_judged_sample(random.Random(index), index, run_id="r", model="openai/model")
    judge = base.judge
    assert judge is not None
    return base.model_copy(
        update={
            "task_id": f"math-{index}",
            "transcript": [{"role": "user", "content": user}, {"role": "assistant", "content": answer}],
            "reference": ReferenceRecord(kind="answer", text=reference),
            "judge": JudgeRecord(**{**judge.model_dump(), "replies": [reply], "parse_error": None}),
        }
    )


def _samples() -> list[SampleRecord]:
    return [
        _sample(0, user=PROBLEM, answer=ANSWER, reference=REFERENCE, reply=REPLY),
        _sample(1, user="A pen costs $5 and a book costs $10.", answer=PRICES, reference="15", reply="ok"),
        _sample(2, user="Typeset this.", answer=HOSTILE_TEX, reference="x", reply=HOSTILE_TEX),
        _sample(3, user=BACKTICKED, answer="It is $m g$.", reference="m g", reply="ok"),
    ]


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    with Chromium(width=1400, height=1000) as chromium:
        yield chromium


def _open(browser: Chromium, tmp_path: Path, name: str) -> Path:
    run_dir = _run(tmp_path, _samples(), track="olympiad", judge={"name": "openai/judge"})
    page = run_dir / f"{name}.html"
    page.write_text(render_report(load_run(run_dir)), encoding="utf-8")
    browser.navigate(page.as_uri(), ready_expression=READY)
    # KaTeX is carried as inert text: opening the page does not compile it.
    assert browser.evaluate("typeof window.katex") == "undefined"
    for index in range(len(_samples())):
        browser.evaluate(f"window.__proctorReport.open({index})")
    return page


def _count(browser: Chromium, selector: str) -> int:
    return int(browser.evaluate(f"document.querySelectorAll({json.dumps(selector)}).length"))


def _offline_and_clean(browser: Chromium, page: Path) -> None:
    assert browser.console_errors() == []
    # data: URLs (KaTeX's inlined fonts) are read from the page itself, not fetched.
    assert {url for url in browser.requested_urls() if not url.startswith("data:")} <= {page.as_uri()}
    assert browser.evaluate("typeof window.__pwned") == "undefined"


def _text(browser: Chromium, selector: str) -> str:
    return str(browser.evaluate(f"document.querySelector({json.dumps(selector)}).textContent"))


def _visible(browser: Chromium, selector: str) -> bool:
    return bool(browser.evaluate(f"document.querySelector({json.dumps(selector)}).offsetParent !== null"))


@pytest.mark.katex
def test_latex_renders_offline_in_references_answers_and_judge_replies(
    browser: Chromium, tmp_path: Path
) -> None:
    page = _open(browser, tmp_path, "math")
    detail = '.detail[data-sample="0"]'
    for where, minimum in (
        (".panel.reference", 1),  # bare LaTeX, PHYBench's form
        (".msg.user", 3),  # $...$, \(...\) and \[...\]
        (".msg.assistant", 2),  # $$...$$ and $...$
        (".panel.judge", 2),  # the reply (the prompt is folded, rendered the same way)
    ):
        assert _count(browser, f"{detail} {where} .katex") >= minimum, where
    assert _count(browser, f"{detail} .msg.assistant .katex-display") == 1
    assert _count(browser, f"{detail} .katex-error") == 0
    # The first formula ran KaTeX from the page's own text; no script element was left behind.
    assert browser.evaluate("typeof window.katex.render") == "function"
    assert _count(browser, "script:not([type='application/json']):not(#katex-script)") == 1
    assert browser.evaluate("document.getElementById('katex-script').type") == "text/plain"
    # KaTeX's own MathML keeps the source for assistive technology and copying.
    annotations = browser.evaluate(
        f"Array.from(document.querySelectorAll('{detail} .panel.reference annotation'))"
        ".map(a => a.textContent)"
    )
    assert annotations == [REFERENCE]
    # The fonts came from the page itself: loaded, with no request made for them.
    assert browser.evaluate(
        "document.fonts.ready.then(() => document.fonts.check('16px KaTeX_Main'))", await_promise=True
    )
    assert "KaTeX_Main" in browser.evaluate(
        f"getComputedStyle(document.querySelector('{detail} .panel.reference .katex .mord')).fontFamily"
    )

    # The source is one click away, character for character, and back again.
    reference = f"{detail} .panel.reference"
    assert not _visible(browser, f"{reference} pre.prose")
    browser.evaluate(f"document.querySelector('{reference} button.latex-toggle').click()")
    assert _visible(browser, f"{reference} pre.prose")
    assert not _visible(browser, f"{reference} .math-view")
    assert browser.evaluate(f"document.querySelector('{reference} pre.prose').textContent") == REFERENCE
    assert (
        browser.evaluate(f"document.querySelector('{reference} button.latex-toggle').textContent")
        == "rendered"
    )
    browser.evaluate(f"document.querySelector('{reference} button.latex-toggle').click()")
    assert _visible(browser, f"{reference} .math-view")
    source = browser.evaluate(f"document.querySelector('{detail} .msg.assistant pre.prose').textContent")
    assert source == ANSWER
    assert "KaTeX 0.19.1" in browser.evaluate("document.querySelector('footer').textContent")
    assert _count(browser, "#math-notice") == 0
    browser.evaluate(f"document.querySelector('{detail}').scrollIntoView()")
    browser.screenshot(ARTIFACTS / "report-math.png")
    _offline_and_clean(browser, page)


@pytest.mark.katex
def test_a_lone_dollar_in_prose_stays_text(browser: Chromium, tmp_path: Path) -> None:
    page = _open(browser, tmp_path, "prices")
    detail = '.detail[data-sample="1"]'
    # The prompt's two prices are no formula: the prompt is plain text, as written.
    assert _count(browser, f"{detail} .msg.user .katex") == 0
    assert browser.evaluate(f"document.querySelector('{detail} .msg.user pre').textContent") == (
        "A pen costs $5 and a book costs $10."
    )
    # The answer's one formula renders; every price around it is kept as written.
    view = f"{detail} .msg.assistant .math-view"
    assert _count(browser, f"{view} .katex") == 1
    shown = browser.evaluate(
        f"Array.from(document.querySelector('{view}').childNodes)"
        ".map(n => n.nodeType === 3 ? n.data : '[math]').join('')"
    )
    assert shown == PRICES_PROSE + "[math]. A \\$ sign."
    _offline_and_clean(browser, page)


@pytest.mark.katex
def test_math_in_a_code_span_renders_when_the_whole_span_is_math(browser: Chromium, tmp_path: Path) -> None:
    page = _open(browser, tmp_path, "backticks")
    view = '.detail[data-sample="3"] .msg.user .math-view'
    assert _count(browser, f"{view} .katex") == 2
    shown = browser.evaluate(
        f"Array.from(document.querySelector('{view}').childNodes)"
        ".map(n => n.nodeType === 3 ? n.data : '[math]').join('')"
    )
    assert shown == BACKTICKED_SHOWN
    # The source, backticks included, is one click away.
    source = browser.evaluate(
        "document.querySelector('.detail[data-sample=\"3\"] .msg.user pre.prose').textContent"
    )
    assert source == BACKTICKED
    _offline_and_clean(browser, page)


@pytest.mark.katex
def test_hostile_latex_renders_inertly(browser: Chromium, tmp_path: Path) -> None:
    page = _open(browser, tmp_path, "hostile-latex")
    detail = '.detail[data-sample="2"]'
    assert _count(browser, f"{detail} .msg.assistant .katex") >= 8
    assert _count(browser, f"{detail} .panel.judge .katex") >= 8
    # Nothing links, loads, carries a handler or an inline URL; nothing ran, nothing was fetched.
    active = "[href],[src],[onclick],[onerror],[onload],a,img,iframe,object,embed,[style*='url(']"
    assert _count(browser, f"body {active}") == 0
    assert _count(browser, f"{detail} [data-onclick], {detail} #c, {detail} .a") == 0
    # The runaway macros stop at KaTeX's expansion limit and show as a parse error.
    assert _count(browser, f"{detail} .msg.assistant .katex-error") >= 2
    # Sizes are capped: the huge rule and kern stay within the panel's scrolling box.
    widest = browser.evaluate(
        f"Math.max(...Array.from(document.querySelectorAll('{detail} .msg.assistant .katex'))"
        ".map(k => k.getBoundingClientRect().width))"
    )
    assert widest < 1400
    assert browser.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    browser.evaluate(f"document.querySelector('{detail}').scrollIntoView()")
    browser.screenshot(ARTIFACTS / "report-math-hostile.png")
    _offline_and_clean(browser, page)


def test_without_katex_the_page_shows_source_and_says_so_once(
    browser: Chromium, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "no-katex"
    empty.mkdir()
    (empty / "package-lock.json").write_text(
        json.dumps({"packages": {"node_modules/katex": {"version": "0.19.1"}}}), encoding="utf-8"
    )
    monkeypatch.setattr(latex, "KATEX_DIR", empty)
    page = _open(browser, tmp_path, "no-katex")
    html = page.read_text(encoding="utf-8")
    assert html.count('id="math-notice"') == 1 and 'id="katex-script"' not in html
    notice = browser.evaluate("document.getElementById('math-notice').textContent")
    assert "KaTeX 0.19.1 is not installed" in notice and "npm ci" in notice
    assert _count(browser, ".katex") == 0 and _count(browser, "button.latex-toggle") == 0
    detail = '.detail[data-sample="0"]'
    assert (
        browser.evaluate(f"document.querySelector('{detail} .panel.reference pre').textContent") == REFERENCE
    )
    assert browser.evaluate(f"document.querySelector('{detail} .msg.assistant pre').textContent") == ANSWER
    assert _visible(browser, f"{detail} .msg.assistant pre")
    _offline_and_clean(browser, page)
