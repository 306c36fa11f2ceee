"""The report answers the questions people ask: pass@k per task, what a sample was graded
against, what the judge cost, and plots that fit the data. Hostile text stays inert."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from proctor.agent.report.latex import katex_status
from proctor.agent.report.loader import load_run
from proctor.agent.report.page import render_report
from proctor.agent.results.records import JudgeRecord, Outcome, ReferenceRecord, SampleRecord, TurnUsage
from proctor.agent.results.summary import summarize_group
from proctor.agent.text.capped_text import CAPPED_TEXT_CHARS, capped, text_sha256
from tests.report.run_factory import header, make_frontiermath_sample, make_judged_sample, write_run

JSON_BLOCK = re.compile(r'<script type="application/json" id="([^"]+)">(.*?)</script>', re.S)

# Every kind of payload a hostile model, judge or task file could bring.
ATTACKS = (
    "</script><script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=2">',
    '"><svg onload="window.__pwned=3">',
    "javascript:window.__pwned=4",
    "[link](javascript:window.__pwned=5)",
    '<a href="javascript:window.__pwned=6">click</a>',
    "line\u2028separator\u2029paragraph",
    "<!-- <script>",
    "&lt;script&gt; &amp;",
    "{{7*7}} ${7*7} `x`",
    "\x1b[31mred\x1b[0m \x00nul",
)
HOSTILE = " ".join(ATTACKS)


def _svg(html: str, css: str) -> str:
    match = re.search(rf'<svg class="plot {css}".*?</svg>', html, re.S)
    assert match, f"plot {css} missing"
    return match.group(0)


def _run(tmp_path: Path, samples: list[SampleRecord], *, track: str, judge: dict | None = None, **kw) -> Path:
    models = sorted({s.model for s in samples}) or ["m"]
    head = header(
        "r", models, track=track, force_at=660_000, cap=1_000_000, backend="docker", samples=samples,
        judge=judge, **kw,
    )  # fmt: skip
    return write_run(tmp_path / "run", samples, head)


def _fm(index: int, **update) -> SampleRecord:
    sample = make_frontiermath_sample(
        random.Random(index), index, run_id="r", model="m", force_at=660_000, cap=10**6
    )
    return sample.model_copy(update=update)


# ---------------------------------------------------------------- pass@k and the grid


def test_passk_table_and_grid_match_the_summary(tmp_path: Path) -> None:
    outcomes = {
        "t1": (Outcome.CORRECT, Outcome.INCORRECT, Outcome.CORRECT),
        "t2": (Outcome.INCORRECT, Outcome.MODEL_ERROR, Outcome.INCORRECT),
        "t3": (Outcome.NO_SUBMISSION, Outcome.CORRECT, Outcome.INCORRECT),
    }
    samples = [
        _fm(i, task_id=task, trial=trial, outcome=o, success=o == Outcome.CORRECT)
        for i, (task, trial, o) in enumerate(
            (task, trial, o) for task, row in outcomes.items() for trial, o in enumerate(row)
        )
    ]
    html = render_report(load_run(_run(tmp_path, samples, track="frontiermath")))
    section = re.search(r'<section class="card" id="passk">.*?</section>', html, re.S).group(0)
    expected = summarize_group(samples)["pass_at_k"]["k"]
    shown = dict(re.findall(r'data-k="(\d+)" data-pass="([\d.]+)"', section))
    assert set(shown) == {"1", "2", "3"}
    for k, value in shown.items():
        assert float(value) == pytest.approx(expected[k]["mean"], abs=1e-6)
    # t2 has two scored trials: no pass@3 for it, so pass@3 averages t1 and t3 only.
    assert expected["3"]["tasks"] == 2 and float(shown["3"]) == pytest.approx(1.0)
    grid = re.search(r'<table class="grid".*?</table>', section, re.S).group(0)
    row = re.search(r'<tr data-task="t2">(.*?)</tr>', grid, re.S).group(1)
    assert re.findall(r'data-outcome="([a-z_]+)"', row) == ["incorrect", "model_error", "incorrect"]
    assert "0 / 2" in row and ">E<" in row
    # Each cell names the sample it opens, and that sample is the one in its embedded block.
    blocks = dict(JSON_BLOCK.findall(html))
    for index, outcome in re.findall(r'data-sample="(\d+)" data-outcome="([a-z_]+)"', grid):
        assert json.loads(blocks[f"sample-{index}"])["outcome"] == outcome
    assert "Error outcomes" in section and "left out of n" in section


def test_a_big_grid_starts_folded(tmp_path: Path) -> None:
    samples = [_fm(i, task_id=f"t{i:03d}", trial=0) for i in range(60)]
    html = render_report(load_run(_run(tmp_path, samples, track="frontiermath")))
    assert re.search(r'<details class="grid">', html)  # not open
    assert "60 tasks × 1 trials" in html


# ---------------------------------------------------------------- header, cost, plots


def test_judged_run_shows_judge_not_budget_nor_empty_histogram(judged_run: Path) -> None:
    html = render_report(load_run(judged_run))
    facts = dict(re.findall(r'data-fact="([^"]+)">[^<]*<b>([^<]*)</b>', html))
    assert facts["judge"] == "openai/judge (effort high)"
    assert "budget" not in facts
    assert "plot-durations" not in html
    tokens = _svg(html, "plot-tokens")
    assert "limit-force" not in tokens and "limit-cap" not in tokens and "off scale" not in tokens
    meta = json.loads(dict(JSON_BLOCK.findall(html))["report-meta"])
    assert meta["agentic"] is False
    # The judge's tokens have their own column; the run has no prices at all.
    assert "Judge tokens" in html and "No prices are configured" in html


def _y_scale_top(svg: str) -> float:
    return float(re.search(r'data-y-scale="([^"]+)"', svg).group(1).split()[1])


def test_token_plot_scales_to_the_data_and_limits_appear_within_reach(tmp_path: Path) -> None:
    def sample(index: int, tokens: int) -> SampleRecord:
        turns = [
            TurnUsage(
                turn=1, input_tokens=tokens // 2, output_tokens=tokens - tokens // 2, cumulative_tokens=tokens
            )
        ]
        return _fm(index, task_id=f"t{index}", turns=turns, total_tokens=tokens)

    small = render_report(
        load_run(_run(tmp_path / "a", [sample(0, 4000), sample(1, 12_000)], track="frontiermath"))
    )
    svg = _svg(small, "plot-tokens")
    assert _y_scale_top(svg) == pytest.approx(12_000 * 1.06)
    assert "limit-force" not in svg and "limit-cap" not in svg
    assert "off scale: force submit 660k, cap 1M (largest sample 12k)" in svg

    middle = render_report(load_run(_run(tmp_path / "b", [sample(0, 400_000)], track="frontiermath")))
    svg = _svg(middle, "plot-tokens")  # force (660k) within 2x of 400k, the cap (1M) is not
    assert 'class="limit limit-force"' in svg and 'class="limit limit-cap"' not in svg
    assert _y_scale_top(svg) == pytest.approx(660_000 * 1.06)
    assert "off scale: cap 1M" in svg

    big = render_report(load_run(_run(tmp_path / "c", [sample(0, 700_000)], track="frontiermath")))
    svg = _svg(big, "plot-tokens")
    assert 'class="limit limit-force"' in svg and 'class="limit limit-cap"' in svg
    assert _y_scale_top(svg) == pytest.approx(1_000_000 * 1.06)


def test_judge_cost_counts_in_the_report_at_the_judges_prices(tmp_path: Path) -> None:
    rng = random.Random(1)
    samples = [make_judged_sample(rng, i, run_id="r", model="m") for i in range(6)]
    judge = {"name": "openai/judge", "input_price_per_mtok": 2.0, "output_price_per_mtok": 8.0}
    html = render_report(load_run(_run(tmp_path, samples, track="olympiad", judge=judge)))
    judged = [s.judge for s in samples if s.judge]
    cost = sum(j.input_tokens * 2.0 + j.output_tokens * 8.0 for j in judged) / 1e6
    model_cost = sum(s.input_tokens * 1.25 + s.output_tokens * 10.0 for s in samples) / 1e6
    totals = re.search(r'<p class="totals">(.*?)</p>', html).group(1)
    assert f"judge ${cost:.4f}" in totals
    total = cost + model_cost
    assert (f"cost ${total:.4f}" if total < 1 else f"cost ${total:,.2f}") in totals
    facts = dict(re.findall(r'data-fact="([^"]+)">[^<]*<b>([^<]*)</b>', html))
    assert facts["judge"] == "openai/judge · $2 in / $8 out per M tokens"


def test_edited_judge_prices_that_are_not_numbers_are_ignored(tmp_path: Path) -> None:
    rng = random.Random(2)
    samples = [make_judged_sample(rng, i, run_id="r", model="m") for i in range(2)]
    judge = {"name": "j", "input_price_per_mtok": "1e9", "output_price_per_mtok": True}
    run = load_run(_run(tmp_path, samples, track="olympiad", judge=judge, prices=False))
    assert run.judge_prices is None
    assert "No prices are configured" in render_report(run)


# ---------------------------------------------------------------- audit trail and escaping


def test_capped_text_is_exact_when_short_and_marked_when_long() -> None:
    assert capped("abc") == "abc"
    long = "a" * CAPPED_TEXT_CHARS + "b" * 10
    kept = capped(long)
    assert kept.startswith("a" * (CAPPED_TEXT_CHARS // 2)) and kept.endswith("b" * 10)
    assert f"omitted {10:,} characters" in kept and text_sha256(long) in kept
    assert len(kept) < CAPPED_TEXT_CHARS + 300
    assert text_sha256("\ud800") == text_sha256("\ud800")  # lone surrogates hash too


def _hostile_samples() -> list[SampleRecord]:
    """A judged and a FrontierMath sample with the attacks in every text a reader sees."""
    judged = make_judged_sample(random.Random(3), 0, run_id="r", model=f"model {HOSTILE}")
    judged = judged.model_copy(
        update={
            "task_id": f"task {HOSTILE}",
            "subject": f"subject {HOSTILE}",
            "outcome": Outcome.INCORRECT,
            "transcript": [
                {"role": "user", "content": f"problem {HOSTILE}"},
                {"role": "assistant", "content": f"answer {HOSTILE}"},
            ],
            "reference": ReferenceRecord(kind="answer", text=f"reference {HOSTILE}"),
            "judge": JudgeRecord(
                decided_by="judge",
                model=f"judge {HOSTILE}",
                prompt=f"prompt {HOSTILE}",
                prompt_chars=len(f"prompt {HOSTILE}"),
                replies=[f"reply {HOSTILE}\nVERDICT: INCORRECT"],
                verdict="INCORRECT",
                parse_error=f"parse {HOSTILE}",
                precheck=f"precheck {HOSTILE}",
            ),
        }
    )
    fm = _fm(1, task_id=f"fm {HOSTILE}", model=f"model {HOSTILE}")
    fm = fm.model_copy(
        update={
            "reference": ReferenceRecord(
                kind="verify", text=f"def verify(a):\n    # {HOSTILE}\n    return True\n"
            )
        }
    )
    return [judged, fm]


def test_hostile_text_everywhere_stays_data(tmp_path: Path) -> None:
    samples = _hostile_samples()
    head_judge = {"name": f"judge {HOSTILE}", "reasoning_effort": HOSTILE}
    run_dir = _run(tmp_path, samples, track="olympiad", judge=head_judge)
    html = render_report(load_run(run_dir))
    # Outside the JSON blocks, no attack survives as markup.
    static = JSON_BLOCK.sub("", html)
    for bad in (
        "<script>window",
        "<img src=x",
        "<svg onload",
        "<a href",
        'onerror="window',
        'onload="window',
    ):
        assert bad not in static, bad
    assert not re.search(r"""(?:href|src|action|xlink:href)\s*=\s*["']?\s*javascript:""", html, re.I)
    # The meta and index blocks, report.js, and KaTeX's script where it is installed.
    katex = katex_status()[0] is not None
    assert len(re.findall(r"<script\b", html, re.I)) == len(samples) + 3 + katex
    for _id, body in JSON_BLOCK.findall(html):
        assert "</" not in body and "<!--" not in body and "<" not in body
        assert "\u2028" not in body and "\u2029" not in body
    # The attacks are there, as data, and round-trip exactly.
    blocks = dict(JSON_BLOCK.findall(html))
    first = json.loads(blocks["sample-0"])
    assert first["reference"]["text"] == f"reference {HOSTILE}"
    assert first["judge"]["prompt"] == f"prompt {HOSTILE}"
    assert first["judge"]["replies"][0].startswith(f"reply {HOSTILE}")
    # Header and grid show names escaped, the CSP stays strict.
    assert "judge &lt;/script&gt;" in html
    assert "default-src 'none'" in html


def test_many_trials_keep_every_k_per_model_and_a_selection_per_task(tmp_path: Path) -> None:
    samples = [
        _fm(i, task_id=f"t{i % 2}", trial=i // 2, outcome=Outcome.CORRECT if i % 3 else Outcome.INCORRECT)
        for i in range(2 * 12)
    ]
    html = render_report(load_run(_run(tmp_path, samples, track="frontiermath")))
    passk = re.search(r'<table class="passk">.*?</table>', html, re.S).group(0)
    assert re.findall(r'data-k="(\d+)"', passk) == [str(k) for k in range(1, 13)]
    grid = re.search(r'<table class="grid".*?</thead>', html, re.S).group(0)
    assert re.findall(r"pass@(\d+)", grid) == ["1", "2", "3", "4", "5", "6", "7", "8", "10", "12"]
    assert "every k in summary.json" in html


def test_a_huge_judge_prompt_and_reply_are_capped_with_their_digest() -> None:
    """The judge receives everything; the record keeps head and tail, length and SHA-256 of the whole."""
    import asyncio

    from proctor.agent.judge.grading import grade_olympiad
    from tests.judge.support import ListClient

    answer = "x" * 150_000 + "MIDDLE" + "y" * 150_000
    reply = "z" * 250_000 + "\nVERDICT: INCORRECT"
    judge = ListClient([reply], model="openai/judge")
    grade = asyncio.run(
        grade_olympiad(
            judge=judge, template="{problem} | {reference answer} | {answer}", problem="P", reference="R",
            answer=answer, final_answer=None,
        )
    )  # fmt: skip
    sent = judge.requests[0][-1]["content"]
    assert sent == f"P | R | {answer}"
    record = grade.judge
    assert grade.outcome == Outcome.INCORRECT  # parsed from the whole reply, before capping
    assert record.prompt_chars == len(sent) and record.prompt_sha256 == text_sha256(sent)
    assert record.prompt == capped(sent) and len(record.prompt) < CAPPED_TEXT_CHARS + 300
    assert record.prompt.startswith("P | R | xxx") and "MIDDLE" not in record.prompt
    assert text_sha256(sent) in record.prompt
    assert record.replies == [capped(reply)] and record.replies[0].endswith("VERDICT: INCORRECT")
