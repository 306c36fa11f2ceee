"""Render a loaded run as one self-contained HTML page (inline CSS, JS, SVG and data).

Tables and plots are rendered here in Python; the sample browser is built in the page by
``assets/report.js`` from JSON blocks, one per sample, parsed only when a sample is opened,
so a 1,000-sample run with long transcripts still opens quickly.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from datetime import UTC, datetime
from html import escape
from importlib import resources
from typing import Any

from proctor.agent.report import plots
from proctor.agent.report.aggregate import (
    OUTCOME_ORDER,
    GroupRow,
    effort_rows,
    outcome_counts,
    overall_rows,
    subject_rows,
)
from proctor.agent.report.latex import KatexAssets, katex_status
from proctor.agent.report.loader import RunData
from proctor.agent.results.passk import TaskTrials, grid_by_model, shown_ks, task_grid
from proctor.agent.results.records import ERROR_OUTCOMES, SampleRecord
from proctor.agent.results.summary import (
    Prices,
    model_error_groups,
    model_error_lines,
    reasoning_carry_lines,
    reasoning_not_carried,
    scoring_headline,
    summarize_group,
)
from proctor.agent.run.hardware import hardware_summary
from proctor.agent.text.encodable import safe_text

LOCAL_BACKEND_WARNING = (
    "This run used the local sandbox backend, which isolates less than Docker: programs ran in a "
    "bubblewrap sandbox on the host kernel with the host Python and libraries, not in a container "
    "built from the pinned image."
)


def esc(value: object) -> str:
    # safe_text: a lone surrogate (only possible from a hand-edited run.json) could not be
    # written as UTF-8; it is shown as its \\uXXXX spelling instead.
    return escape(safe_text("" if value is None else str(value)), quote=True)


# A word holding punctuation: browsers may break it after "-" or "/" ("openai/|model-a").
_BREAKABLE_WORD = re.compile(r"[^\s]*[^\w\s][^\s]*")


def cell_text(value: object) -> str:
    """Escaped text for a table cell that wraps only at spaces.

    Numbers never wrap (td.num is nowrap); a name is held together by a nowrap span around
    each word with punctuation in it, so "fm-0001" or "openai/model-a" cannot split.
    """
    text = safe_text("" if value is None else str(value))
    out, last = [], 0
    for match in _BREAKABLE_WORD.finditer(text):
        out.append(escape(text[last : match.start()], quote=True))
        out.append(f'<span class="nw">{escape(match.group(), quote=True)}</span>')
        last = match.end()
    out.append(escape(text[last:], quote=True))
    return "".join(out)


def json_for_script(data: Any) -> str:
    """JSON that cannot end its <script> element early: every "<" becomes \\u003c.

    Control characters are escaped by JSON itself; a lone surrogate keeps its \\uXXXX escape.
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    # U+2028/2029 are legal in JSON but end a line in older JavaScript; escaped, they cannot
    # matter to any parser.
    return safe_text(text).replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def asset(name: str) -> str:
    return resources.files("proctor.agent.report").joinpath("assets", name).read_text(encoding="utf-8")


def render_report(run: RunData) -> str:
    samples = run.samples
    force_at, cap = run.budget
    prices = run.prices
    title = f"Proctor report · {run.run_id}"
    katex, katex_missing = katex_status()
    body = [
        _header(run),
        "<main>",
        *(f'<div class="banner warn">{esc(w)}</div>' for w in _warnings(run)),
        _math_notice(katex_missing),
        _summary_section(samples, prices, run),
        _passk_section(run),
        _plots_section(run, force_at, cap),
        _samples_section(samples),
        "</main>",
        f"<footer>Generated {esc(datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC'))} by proctor view from "
        f"{esc(run.run_dir)}. Works offline: nothing on this page is fetched.{_math_credit(katex)}</footer>",
        _data_blocks(samples, force_at, cap, agentic=run.is_agentic, katex=katex),
        # Inert text until the first sample is opened (report.js runs it then): compiling KaTeX
        # is no part of opening the page.
        f'<script type="text/plain" id="katex-script">{katex.script}</script>' if katex else "",
        f"<script>{asset('report.js')}</script>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # A strict policy makes the no-network promise enforceable by the browser itself; KaTeX's
        # fonts are inlined as data: URIs.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; font-src data:\">"
        f"<title>{esc(title)}</title><style>{asset('report.css')}</style>"
        + (f'<style id="katex-style">{katex.style}</style>' if katex else "")
        + "</head><body>"
        + "".join(body)
        + "</body></html>\n"
    )


def _math_notice(missing: str) -> str:
    """The one note a page without KaTeX gives: its mathematics shows as LaTeX source."""
    if not missing:
        return ""
    return (
        '<div class="banner info" id="math-notice">'
        f"{esc(f'Mathematics is shown as LaTeX source, not rendered: {missing}.')}</div>"
    )


def _math_credit(katex: KatexAssets | None) -> str:
    if katex is None:
        return ""
    return (
        f" Mathematics rendered in the page by KaTeX {esc(katex.version)};"
        " each block's LaTeX source is one click away."
    )


def _warnings(run: RunData) -> list[str]:
    warnings = []
    if run.isolates_less:
        reason = run.sandbox.get("fallback_reason")
        warnings.append(LOCAL_BACKEND_WARNING + (f" Reason recorded: {reason}" if reason else ""))
    status = run.header.get("status")
    if status and status != "finished":
        warnings.append(f"Run status is {status!r}: the run did not finish, so these results are partial.")
    return warnings + run.warnings + _forgery_warnings(run.samples)


def _forgery_warnings(samples: list[SampleRecord]) -> list[str]:
    """A banner when answers imitate the judge prompt's sections (agent/judge/forgery.py)."""
    flagged = [s for s in samples if s.answer_mimics_prompt_sections]
    if not flagged:
        return []
    shown = ", ".join(f"{s.task_id} trial {s.trial}" for s in flagged[:10])
    more = f" and {len(flagged) - 10} more" if len(flagged) > 10 else ""
    return [
        f"{len(flagged)} answer(s) imitate the judge prompt's own section markers or labels "
        f"(answer_mimics_prompt_sections): {shown}{more}. The judge saw them verbatim; "
        "open those samples to audit the matched lines."
    ]


def _audit_text(audit: Any) -> str:
    """`proctor run --audit`'s outcome as recorded in run.json; "not run" without one."""
    if not isinstance(audit, dict):
        return "not run"
    counts = audit.get("counts")
    counts = counts if isinstance(counts, dict) else {}
    tally = ", ".join(f"{counts.get(k, 0)} {k}" for k in ("held", "weak", "broken", "skipped"))
    weak = [
        str(r.get("id"))
        for r in audit.get("not_held") or []
        if isinstance(r, dict) and r.get("verdict") == "weak"
    ]
    return f"{audit.get('mode', '?')}: {tally}" + (f" (weak: {', '.join(weak)})" if weak else "")


def _header(run: RunData) -> str:
    sandbox = run.sandbox
    backend = sandbox.get("backend")
    image = sandbox.get("image_id") or sandbox.get("image") or "none"
    if sandbox.get("image") and sandbox.get("image_id") and sandbox["image"] != sandbox["image_id"]:
        image = f"{sandbox['image']} ({sandbox['image_id']})"
    if not backend:
        sandbox_text = "none (no sandbox was used)"
    elif run.isolates_less:
        sandbox_text = f"{backend} (isolates less) · python {sandbox.get('python_version') or '?'}"
    else:
        sandbox_text = f"{backend} · image {image}"
    if backend:
        # sandbox.isolation as the backend honoured it; runs recorded before it had none: fresh.
        sandbox_text += f" · isolation {sandbox.get('call_isolation') or 'fresh'}"
        # describe()'s record of the engine path the sandbox took, not the spec's option: the
        # spec's auto chooses when it opens, and the report says which path and why.
        path_taken, why_taken = sandbox.get("engine_path"), sandbox.get("engine_path_reason")
        if path_taken:
            sandbox_text += f" · engine path {path_taken}" + (f" ({why_taken})" if why_taken else "")
    versions = run.header.get("versions")
    version_text = ", ".join(f"{k} {v}" for k, v in versions.items()) if isinstance(versions, dict) else "—"
    force_at, cap = run.budget
    wall = run.wall_time_s
    facts = [
        ("run", run.run_id),
        ("track", ", ".join(run.tracks) or "—"),
        ("model", ", ".join(run.models) or "—"),
    ]
    if run.judge is not None:
        facts.append(("judge", _judge_text(run.judge)))
    paper = _paper_defaults_text(run.header.get("paper_defaults"))
    if paper:
        facts.append(("paper defaults", paper))
    facts += [
        ("sandbox", sandbox_text),
        ("sandbox audit", _audit_text(run.header.get("audit"))),
        ("hardware", hardware_summary(run.header.get("hardware"))),
    ]
    if run.is_agentic:
        # The token budget is the FrontierMath protocol's; judged tracks ask once and have none.
        facts.append(("budget", f"force submit at {force_at:,} · cap {cap:,} tokens"))
    facts += [
        ("started", run.started_at or "—"),
        ("ended", run.ended_at or "—"),
        ("wall time", _wall_text(wall, run.sessions)),
        ("status", run.header.get("status") or "—"),
        ("versions", version_text),
    ]
    return (
        '<header class="top"><h1>Proctor run report</h1><div class="facts">'
        + "".join(
            f'<span class="fact" data-fact="{esc(k)}">{esc(k)}: <b>{esc(v)}</b></span>' for k, v in facts
        )
        + "</div></header>"
    )


def _paper_defaults_text(record: Any) -> str:
    """The values a judged run took from the paper unasked (run.json ``paper_defaults``); ""
    when none (or for a run recorded before they were)."""
    values = record.get("values") if isinstance(record, dict) else None
    if not isinstance(values, dict) or not values:
        return ""
    return ", ".join(f"{field}={value}" for field, value in values.items()) + " (not set by the config)"


def _judge_text(judge: dict[str, Any]) -> str:
    text = str(judge["name"])
    if judge.get("reasoning_effort"):
        text += f" (effort {judge['reasoning_effort']})"
    prices = judge.get("prices")
    if prices:
        text += f" · ${prices[0] or 0:g} in / ${prices[1] or 0:g} out per M tokens"
    return text


def _money(value: float) -> str:
    # Judge calls cost fractions of a cent; two decimals would show them as $0.00.
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def _wall_text(wall: float | None, sessions: int) -> str:
    """The run's wall time, summed over its sessions when it was resumed (the gaps between
    sessions are not the run's time)."""
    if wall is None:
        return "—"
    return _duration(wall) + (f" over {sessions} sessions" if sessions > 1 else "")


def _duration(seconds: float) -> str:
    # Records keep NaN and infinities (an edited run directory may hold them); round() refuses both.
    if not math.isfinite(seconds):
        return f"{seconds} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


def _pct(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.1%}"


def _accuracy_table(rows: list[GroupRow], first_column: str) -> str:
    show_points = any(r.mean_points is not None for r in rows)
    show_eed = any(r.mean_eed is not None for r in rows)
    show_cost = any(r.total_cost_usd is not None for r in rows)
    show_judge = any(r.judge_tokens for r in rows)
    head = ["Track", "Model", first_column, "Samples", "Tasks", "Accuracy", "± SE", "95% CI"]
    head += ["Mean points"] if show_points else []
    head += ["Mean EED"] if show_eed else []
    head += (
        ["Errors (not scored)", "Judge errors", "Tokens"]
        + (["Judge tokens"] if show_judge else [])
        + (["Cost (USD)"] if show_cost else [])
        + ["Sample time"]
    )
    numeric = set(head[3:])
    out = ['<div class="table-wrap"><table class="summary"><thead><tr>']
    out += [f'<th class="{"num" if h in numeric else ""}">{esc(h)}</th>' for h in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        acc = row.accuracy
        cells = [
            (row.track, ""),
            (row.model, ""),
            (row.label, ""),
            (row.samples, "num"),
            (row.tasks, "num"),
            (_pct(acc.mean), "num acc"),
            ("—" if math.isnan(acc.se) else f"{acc.se:.1%}", "num"),
            ("—" if math.isnan(acc.ci_low) else f"{acc.ci_low:.1%} – {acc.ci_high:.1%}", "num"),
        ]
        if show_points:
            cells.append(("—" if row.mean_points is None else f"{row.mean_points:.2f}", "num"))
        if show_eed:
            cells.append(("—" if row.mean_eed is None else f"{row.mean_eed:.1f}", "num"))
        cells += [(row.error_samples, "num"), (row.judge_errors, "num"), (f"{row.total_tokens:,}", "num")]
        if show_judge:
            cells.append((f"{row.judge_tokens:,}", "num"))
        if show_cost:
            cells.append(("—" if row.total_cost_usd is None else _money(row.total_cost_usd), "num"))
        cells.append((_duration(row.sample_time_s), "num"))
        out.append(
            "<tr>"
            + "".join(f'<td class="{c}">{esc(v) if "num" in c else cell_text(v)}</td>' for v, c in cells)
            + "</tr>"
        )
    out.append("</tbody></table></div>")
    return "".join(out)


def _outcome_table(samples: list[SampleRecord]) -> str:
    present = [str(o) for o in OUTCOME_ORDER if any(s.outcome == o for s in samples)]
    groups: dict[tuple[str, str], list[SampleRecord]] = {}
    for sample in samples:
        groups.setdefault((sample.track, sample.model), []).append(sample)
    out = ['<div class="table-wrap"><table class="outcomes"><thead><tr><th>Track</th><th>Model</th>']
    out += [
        f'<th class="num"><span class="outcome o-{esc(o)}">{esc(o.replace("_", " "))}</span></th>'
        for o in present
    ]
    out.append('<th class="num">Total</th></tr></thead><tbody>')
    for (track, model), members in sorted(groups.items()):
        counts = outcome_counts(members)
        out.append(f"<tr><td>{cell_text(track)}</td><td>{cell_text(model)}</td>")
        out += [f'<td class="num" data-outcome="{esc(o)}">{counts.get(o, 0)}</td>' for o in present]
        out.append(f'<td class="num">{len(members)}</td></tr>')
    out.append("</tbody></table></div>")
    return "".join(out)


def _totals(samples: list[SampleRecord], prices: Prices, run: RunData) -> str:
    """One line of run-wide totals: what finished, how long it took, what it used and cost."""
    group = summarize_group(samples, prices=prices, judge_prices=run.judge_prices)
    planned = run.header.get("samples_planned")
    facts = [
        f"{len(samples):,} of {planned:,} planned samples"
        if isinstance(planned, int)
        else f"{len(samples):,} samples"
    ]
    wall = run.wall_time_s
    facts.append(f"wall time {_duration(wall)}" if wall is not None else "wall time unknown")
    facts.append(f"{group['tokens']['total']:,} tokens")
    if group["tokens"]["estimated_samples"]:
        facts.append(f"{group['tokens']['estimated_samples']} samples with estimated token counts")
    judge = group["judge"]
    if judge["samples_judged"]:
        facts.append(
            f"judge {judge['total_tokens']:,} tokens ({judge['input_tokens']:,} in, "
            f"{judge['output_tokens']:,} out) over {judge['attempts']} attempts"
        )
    if group["total_cost_usd"] is not None:
        split = []
        if group["cost_usd"] is not None:
            split.append(f"models {_money(group['cost_usd'])}")
        if judge["cost_usd"] is not None:
            split.append(f"judge {_money(judge['cost_usd'])}")
        facts.append(f"cost {_money(group['total_cost_usd'])} ({' + '.join(split)})")
    if group["sandbox_calls"] or run.is_agentic:
        facts.append(f"{group['sandbox_calls']:,} sandbox calls ({_duration(group['sandbox_seconds'])})")
        share = group.get("sandbox_wall_share") or {}
        if share.get("overall") is not None:
            # Whether the sandbox or the model bounds the run: the calls' share of sample time.
            facts.append(
                f"sandbox {share['overall']:.0%} of the samples' wall time "
                f"(median sample {share['median_sample']:.0%}, most {share['max_sample']:.0%})"
            )
        if group["sandbox_calls"]:
            facts.append(_sandbox_cpu_fact(group))
    if run.is_agentic:
        facts.append(
            f"{group['forced_submissions']} forced submissions, {group['cap_reached']} reached the cap"
        )
    if group["model_retries"]:
        facts.append(f"{group['model_retries']} model retries")
    if group["judge_retries"]:
        facts.append(f"{group['judge_retries']} judge retries")
    if group["answer_mimics_prompt_sections"]:
        facts.append(
            f"{group['answer_mimics_prompt_sections']} answers imitating the judge prompt's sections"
        )
    return '<p class="totals">' + " · ".join(esc(f) for f in facts) + "</p>"


def _sandbox_cpu_fact(group: dict[str, Any]) -> str:
    """The sandbox's CPU beside its wall share: CPU seconds per wall second of the samples is the
    mean number of cores its calls kept busy; calls without a figure are said, never taken as 0."""
    calls, measured = group["sandbox_calls"], group["sandbox_cpu_calls"]
    if not measured:
        return "sandbox CPU not measured (no call has a figure)"
    text = f"sandbox CPU {_duration(group['sandbox_cpu_seconds'])}"
    rate = group.get("sandbox_cpu_per_wall_second") or {}
    if rate.get("overall") is not None:
        text += (
            f", {rate['overall']:.3g} CPU-s per wall-s "
            f"(median sample {rate['median_sample']:.3g}, most {rate['max_sample']:.3g})"
        )
    if measured < calls:
        text += f"; figure for {measured:,} of {calls:,} calls"
    return text


def _scoring_headline(samples: list[SampleRecord]) -> str:
    """Over how many samples accuracy is taken; marked as a warning when some are unscored."""
    outcomes = Counter(r.outcome.value for r in samples)
    errors = {o.value: outcomes[o.value] for o in sorted(ERROR_OUTCOMES)}
    scored = len(samples) - sum(errors.values())
    group = {"samples": len(samples), "scored_samples": scored, "errors": errors, "outcomes": outcomes}
    unscored = len(samples) - scored
    css = "headline warn" if unscored else "headline"
    return f'<p class="{css}" data-unscored="{unscored}"><b>{esc(scoring_headline(group))}</b></p>'


def _protocol_warnings(samples: list[SampleRecord]) -> str:
    """A model whose reasoning was not carried, and the model errors grouped by status and
    message: each a warning line, so neither passes unseen."""
    group = {
        "reasoning_not_carried": reasoning_not_carried(samples),
        "model_errors": model_error_groups(samples),
    }
    carry = "".join(
        f'<p class="headline warn" data-reasoning-not-carried="1">{esc(line)}</p>'
        for line in reasoning_carry_lines(group)
    )
    errors = "".join(
        f'<p class="headline warn" data-model-errors="1">{esc(line)}</p>' for line in model_error_lines(group)
    )
    return carry + errors


def _summary_section(samples: list[SampleRecord], prices: Prices, run: RunData) -> str:
    parts = ['<section class="card" id="summary"><h2>Summary</h2>']
    if not samples:
        parts.append('<p class="muted">This run has no finished samples yet.</p></section>')
        return "".join(parts)
    judge_prices = run.judge_prices
    parts.append(_scoring_headline(samples))
    parts.append(_protocol_warnings(samples))
    parts.append(_totals(samples, prices, run))
    parts.append(_accuracy_table(overall_rows(samples, prices, judge_prices), "Group"))
    parts.append(
        "<h3>By subject</h3>" + _accuracy_table(subject_rows(samples, prices, judge_prices), "Subject")
    )
    efforts = effort_rows(samples, prices, judge_prices)
    if efforts:
        parts.append("<h3>By reasoning effort</h3>" + _accuracy_table(efforts, "Effort"))
    parts.append("<h3>Outcomes</h3>" + _outcome_table(samples))
    note = (
        "Accuracy is over scored samples; judge, model and verifier errors are counted apart, "
        "never as wrong. "
        "SE and the 95% percentile bootstrap CI are taken over per-task means, since trials of one task "
        "are correlated."
    )
    if not prices and not judge_prices:
        note += " No prices are configured for these models, so no cost is shown."
    elif not judge_prices and run.judge is not None:
        note += " The judge has no prices configured, so cost covers the answering models only."
    elif not prices:
        note += " The answering models have no prices configured, so cost covers the judge only."
    parts.append(f'<p class="muted">{esc(note)}</p></section>')
    return "".join(parts)


# Grids with more rows than this start folded: a 500-task run should not push the plots away.
GRID_OPEN_ROWS = 40
TRIAL_MARK = {"correct": "✓", "error": "E", "other": "✗"}


def _passk_section(run: RunData) -> str:
    """pass@k per model and the trials x task grid, from the functions summary.json uses."""
    samples = run.samples
    if not samples:
        return ""
    by_model = grid_by_model(samples)
    k_max = max((len(block["pass_at_k"]["k"]) for block in by_model.values()), default=0)
    parts = [
        '<section class="card" id="passk"><h2>Per task: trials and pass@k</h2>',
        '<div class="table-wrap"><table class="passk"><thead><tr><th>Model</th><th class="num">Tasks</th>',
        *(f'<th class="num">pass@{k}</th>' for k in range(1, k_max + 1)),
        "</tr></thead><tbody>",
    ]
    for model, block in by_model.items():
        values = block["pass_at_k"]["k"]
        parts.append(
            f'<tr data-model="{esc(model)}"><td>{cell_text(model)}</td>'
            f'<td class="num">{len(block["grid"])}</td>'
        )
        for k in range(1, k_max + 1):
            value = values.get(str(k))
            if value is None:
                parts.append('<td class="num">—</td>')
                continue
            se = "" if value["se"] is None else f" ± {value['se']:.1%} SE"
            title = f"mean over {value['tasks']} tasks with at least {k} scored trials{se}"
            parts.append(
                f'<td class="num" data-k="{k}" data-pass="{value["mean"]:.6f}" title="{esc(title)}">'
                f"{esc(_pct(value['mean']))}</td>"
            )
        parts.append("</tr>")
    parts.append("</tbody></table></div>")
    parts.append(
        '<p class="muted">'
        + esc(
            "pass@k is the unbiased estimate 1 − C(n−c, k)/C(n, k) per task, n its scored trials and c "
            "the successful ones, averaged over tasks. Error outcomes (judge, model, verifier, harness "
            "errors) are left out of n exactly as accuracy leaves them out, so pass@1 is the accuracy of "
            "a one-model slice; a task with fewer than k scored trials has no pass@k and is left out of "
            "that column's mean (hover a value for its task count). Each model's trials of a task are "
            "kept apart."
        )
        + "</p>"
    )
    position = {(s.model, s.task_id, s.trial): i for i, s in enumerate(samples)}
    for model in by_model:
        parts.append(_grid_table(model, task_grid([s for s in samples if s.model == model]), position, k_max))
    parts.append("</section>")
    return "".join(parts)


def _grid_table(
    model: str, rows: list[TaskTrials], position: dict[tuple[str, str, int], int], k_max: int
) -> str:
    trials = sorted({t for row in rows for t in row.outcomes})
    errors = {o.value for o in ERROR_OUTCOMES}
    ks = shown_ks(k_max)
    some_ks = (
        "" if len(ks) == k_max else f"; pass@k for k = {', '.join(map(str, ks))}, every k in summary.json"
    )
    out = [
        f'<details class="grid"{" open" if len(rows) <= GRID_OPEN_ROWS else ""}>'
        f"<summary>Trials × task: {esc(model)} ({len(rows)} tasks × {len(trials)} trials; "
        f"✓ correct, ✗ not, E error; click a cell to open that sample{some_ks})</summary>"
        f'<div class="table-wrap"><table class="grid" data-model="{esc(model)}"><thead><tr>'
        "<th>Task</th><th>Subject</th>",
        *(f'<th class="trial">{t}</th>' for t in trials),
        '<th class="num">Correct / scored</th>',
        *(f'<th class="num">pass@{k}</th>' for k in ks),
        "</tr></thead><tbody>",
    ]
    for row in rows:
        out.append(f'<tr data-task="{esc(row.task_id)}"><td class="mono">{cell_text(row.task_id)}</td>')
        out.append(f"<td>{cell_text(row.subject)}</td>")
        for trial in trials:
            outcome = row.outcomes.get(trial)
            if outcome is None:
                out.append('<td class="trial"></td>')
                continue
            kind = "correct" if outcome == "correct" else "error" if outcome in errors else "other"
            index = position[(row.model, row.task_id, trial)]
            out.append(
                f'<td class="trial t-{kind}" data-sample="{index}" data-outcome="{esc(outcome)}" '
                f'title="trial {trial}: {esc(outcome.replace("_", " "))}">{TRIAL_MARK[kind]}</td>'
            )
        out.append(f'<td class="num">{row.c} / {row.n}</td>')
        for k in ks:
            value = row.pass_at(k)
            out.append(f'<td class="num">{"—" if value is None else esc(_pct(value))}</td>')
        out.append("</tr>")
    out.append("</tbody></table></div></details>")
    return "".join(out)


def _plots_section(run: RunData, force_at: int, cap: int) -> str:
    samples = run.samples
    executions = [c for s in samples for c in s.tool_calls if c.ran_in_sandbox]
    durations = [c.duration_s for c in executions]
    timed_out = sum(1 for c in executions if c.sandbox and c.sandbox.get("timed_out"))
    token_caption = (
        "Cumulative tokens after each turn, one line per sample, coloured by outcome; click a line to "
        "open its transcript. Scaled to the data: the dashed force-submit and cap lines of the run's "
        f"budget appear when within {plots.LIMIT_REACH:g}x of the largest sample, else a note names them."
        if run.is_agentic
        else "Tokens per sample (cumulative per turn), coloured by outcome; click a line to open its "
        "transcript."
    )
    figures = [
        (
            plots.accuracy_by_subject(subject_rows(samples, run.prices)),
            "Accuracy per subject (and model); bars are means, whiskers the 95% bootstrap CI.",
        ),
        (
            plots.token_curves(
                samples, force_at if run.is_agentic else None, cap if run.is_agentic else None
            ),
            token_caption,
        ),
        (plots.outcome_breakdown(samples), "How samples ended."),
    ]
    if executions:
        # A run without sandbox calls (a judged track) would show an empty histogram.
        figures.append(
            (
                plots.duration_histogram(durations, timed_out),
                "Wall time of the model's sandbox (python tool) calls, log-spaced bins.",
            )
        )
    return (
        '<section class="card" id="plots"><h2>Plots</h2><div class="plots">'
        + "".join(
            f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>" for svg, caption in figures
        )
        + "</div></section>"
    )


def _options(values: list[str], everything: str) -> str:
    return f'<option value="">{esc(everything)}</option>' + "".join(
        f'<option value="{esc(v)}">{esc(v.replace("_", " "))}</option>' for v in values
    )


# (index key, header, css): the sample list's columns, each sortable by clicking its header.
SAMPLE_COLUMNS = (
    ("task", "Task", ""),
    ("trial", "Trial", ""),
    ("model", "Model", ""),
    ("subject", "Subject", ""),
    ("outcome", "Outcome", ""),
    ("score", "Score", "num"),
    ("tokens", "Tokens", "num"),
    ("turns", "Turns", "num"),
    ("forced", "Forced", ""),
    ("duration", "Time", "num"),
)


def _samples_section(samples: list[SampleRecord]) -> str:
    outcomes = [str(o) for o in OUTCOME_ORDER if any(s.outcome == o for s in samples)]
    subjects = sorted({s.subject or "" for s in samples} - {""})
    models = sorted({s.model for s in samples})
    model_filter = (
        f'<label>model <select id="filter-model">{_options(models, "all models")}</select></label>'
        if len(models) > 1
        else ""
    )
    tasks = sorted({s.task_id for s in samples})
    return (
        '<section class="card" id="samples"><h2>Samples and transcripts</h2><div class="filters">'
        f'<label>outcome <select id="filter-outcome">{_options(outcomes, "all outcomes")}</select></label>'
        f'<label>subject <select id="filter-subject">{_options(subjects, "all subjects")}</select></label>'
        f"{model_filter}"
        '<label>task <input id="filter-task" list="task-ids" placeholder="task id" '
        'autocomplete="off"></label>'
        '<datalist id="task-ids">' + "".join(f'<option value="{esc(t)}">' for t in tasks) + "</datalist>"
        '<label>search <input id="filter-search" type="search" '
        'placeholder="text in transcripts, code, replies"></label>'
        '<span id="sample-status"></span></div>'
        '<div class="table-wrap"><table class="samples"><thead><tr>'
        + "".join(
            f'<th class="sortable {css}" data-key="{key}" title="sort by {esc(label.lower())}">'
            f"{esc(label)}</th>"
            for key, label, css in SAMPLE_COLUMNS
        )
        + "</tr></thead>"
        '<tbody id="sample-rows"></tbody></table></div><div id="sample-pager"></div>'
        "<noscript>The sample browser needs JavaScript; the summary and plots above do not.</noscript>"
        "</section>"
    )


def embedded_record(sample: SampleRecord) -> dict[str, Any]:
    """The record as the page needs it, without the copies that only make the file bigger.

    A tool call's ``result`` repeats its tool message in the transcript, and the sandbox's raw
    stdout/stderr repeat (or exceed) what the model was shown. The page shows what the model
    saw and marks truncation; the raw streams stay in samples.jsonl, and their sizes are kept.
    """
    record = sample.model_dump(mode="json")
    shown = {
        message.get("tool_call_id"): message.get("content")
        for message in record["transcript"]
        if message.get("role") == "tool"
    }
    for call in record["tool_calls"]:
        if call.get("call_id") in shown and shown[call["call_id"]] == call.get("result"):
            call.pop("result", None)
        sandbox = call.get("sandbox")
        if isinstance(sandbox, dict):
            for stream in ("stdout", "stderr"):
                text = sandbox.pop(stream, None)
                if isinstance(text, str):
                    sandbox[f"{stream}_chars"] = len(text)
    return record


def _data_blocks(
    samples: list[SampleRecord],
    force_at: int,
    cap: int,
    *,
    agentic: bool = True,
    katex: KatexAssets | None = None,
) -> str:
    meta = {
        "force_submit_at": force_at,
        "token_cap": cap,
        "agentic": agentic,
        "katex": katex.version if katex else None,
    }
    index = [
        {
            "i": i,
            "task": s.task_id,
            "trial": s.trial,
            "model": s.model,
            "subject": s.subject,
            "track": s.track,
            "outcome": str(s.outcome),
            "score": round(s.score, 4),
            "tokens": s.total_tokens,
            "turns": len(s.turns),
            "forced": s.forced_submission_turn,
            "mimics": s.answer_mimics_prompt_sections,
            "duration": s.duration_s,
        }
        for i, s in enumerate(samples)
    ]
    blocks = [
        f'<script type="application/json" id="report-meta">{json_for_script(meta)}</script>',
        f'<script type="application/json" id="sample-index">{json_for_script(index)}</script>',
    ]
    # One block per sample: the browser only parses the ones a reader opens (or searches).
    blocks += [
        f'<script type="application/json" id="sample-{i}">{json_for_script(embedded_record(s))}</script>'
        for i, s in enumerate(samples)
    ]
    return "".join(blocks)
