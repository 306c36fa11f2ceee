"""Render a loaded run as one self-contained HTML page (inline CSS, JS, SVG and data).

Tables and plots are rendered here in Python; the sample browser is built in the page by
``assets/report.js`` from JSON blocks, one per sample, parsed only when a sample is opened,
so a 1,000-sample run with long transcripts still opens quickly.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from html import escape
from importlib import resources
from typing import Any

from agent.encodable import safe_text
from agent.hardware import hardware_summary
from agent.records import SampleRecord
from agent.report import plots
from agent.report.aggregate import (
    OUTCOME_ORDER,
    GroupRow,
    effort_rows,
    outcome_counts,
    overall_rows,
    subject_rows,
)
from agent.report.loader import RunData
from agent.summary import Prices, summarize_group

LOCAL_BACKEND_WARNING = (
    "This run used the local sandbox backend, which isolates less than Docker: programs ran in a "
    "bubblewrap sandbox on the host kernel with the host Python and libraries, not in a container "
    "built from the pinned image."
)


def esc(value: object) -> str:
    # safe_text: a lone surrogate (only possible from a hand-edited run.json) could not be
    # written as UTF-8; it is shown as its \\uXXXX spelling instead.
    return escape(safe_text("" if value is None else str(value)), quote=True)


def json_for_script(data: Any) -> str:
    """JSON that cannot end its <script> element early: every "<" becomes \\u003c.

    Control characters are escaped by JSON itself; a lone surrogate keeps its \\uXXXX escape.
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return safe_text(text).replace("<", "\\u003c")


def asset(name: str) -> str:
    return resources.files("agent.report").joinpath("assets", name).read_text(encoding="utf-8")


def render_report(run: RunData) -> str:
    samples = run.samples
    force_at, cap = run.budget
    prices = run.prices
    title = f"Proctor report · {run.run_id}"
    body = [
        _header(run),
        "<main>",
        *(f'<div class="banner warn">{esc(w)}</div>' for w in _warnings(run)),
        _summary_section(samples, prices, run),
        _plots_section(run, force_at, cap),
        _samples_section(samples),
        "</main>",
        f"<footer>Generated {esc(datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC'))} by proctor view from "
        f"{esc(run.run_dir)}. Works offline: nothing on this page is fetched.</footer>",
        _data_blocks(samples, force_at, cap),
        f"<script>{asset('report.js')}</script>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # A strict policy makes the no-network promise enforceable by the browser itself.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc(title)}</title><style>{asset('report.css')}</style></head><body>"
        + "".join(body)
        + "</body></html>\n"
    )


def _warnings(run: RunData) -> list[str]:
    warnings = []
    if run.isolates_less:
        reason = run.sandbox.get("fallback_reason")
        warnings.append(LOCAL_BACKEND_WARNING + (f" Reason recorded: {reason}" if reason else ""))
    status = run.header.get("status")
    if status and status != "finished":
        warnings.append(f"Run status is {status!r}: the run did not finish, so these results are partial.")
    return warnings + run.warnings


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
    versions = run.header.get("versions")
    version_text = ", ".join(f"{k} {v}" for k, v in versions.items()) if isinstance(versions, dict) else "—"
    force_at, cap = run.budget
    wall = run.wall_time_s
    facts = [
        ("run", run.run_id),
        ("track", ", ".join(run.tracks) or "—"),
        ("model", ", ".join(run.models) or "—"),
        ("sandbox", sandbox_text),
        ("sandbox audit", _audit_text(run.header.get("audit"))),
        ("hardware", hardware_summary(run.header.get("hardware"))),
        ("budget", f"force submit at {force_at:,} · cap {cap:,} tokens"),
        ("started", run.started_at or "—"),
        ("ended", run.ended_at or "—"),
        ("wall time", _duration(wall) if wall is not None else "—"),
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


def _duration(seconds: float) -> str:
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
    show_cost = any(r.cost_usd is not None for r in rows)
    head = ["Track", "Model", first_column, "Samples", "Tasks", "Accuracy", "± SE", "95% CI"]
    head += ["Mean points"] if show_points else []
    head += ["Mean EED"] if show_eed else []
    head += (
        ["Errors (not scored)", "Judge errors", "Tokens"]
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
        if show_cost:
            cells.append(("—" if row.cost_usd is None else f"${row.cost_usd:,.2f}", "num"))
        cells.append((_duration(row.sample_time_s), "num"))
        out.append("<tr>" + "".join(f'<td class="{c}">{esc(v)}</td>' for v, c in cells) + "</tr>")
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
        out.append(f"<tr><td>{esc(track)}</td><td>{esc(model)}</td>")
        out += [f'<td class="num" data-outcome="{esc(o)}">{counts.get(o, 0)}</td>' for o in present]
        out.append(f'<td class="num">{len(members)}</td></tr>')
    out.append("</tbody></table></div>")
    return "".join(out)


def _totals(samples: list[SampleRecord], prices: Prices, run: RunData) -> str:
    """One line of run-wide totals: what finished, how long it took, what it used and cost."""
    group = summarize_group(samples, prices=prices)
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
    if group["cost_usd"] is not None:
        facts.append(f"cost ${group['cost_usd']:,.2f}")
    facts.append(f"{group['sandbox_calls']:,} sandbox calls ({_duration(group['sandbox_seconds'])})")
    facts.append(f"{group['forced_submissions']} forced submissions, {group['cap_reached']} reached the cap")
    if group["model_retries"]:
        facts.append(f"{group['model_retries']} model retries")
    return '<p class="totals">' + " · ".join(esc(f) for f in facts) + "</p>"


def _summary_section(samples: list[SampleRecord], prices: Prices, run: RunData) -> str:
    parts = ['<section class="card" id="summary"><h2>Summary</h2>']
    if not samples:
        parts.append('<p class="muted">This run has no finished samples yet.</p></section>')
        return "".join(parts)
    parts.append(_totals(samples, prices, run))
    parts.append(_accuracy_table(overall_rows(samples, prices), "Group"))
    parts.append("<h3>By subject</h3>" + _accuracy_table(subject_rows(samples, prices), "Subject"))
    efforts = effort_rows(samples, prices)
    if efforts:
        parts.append("<h3>By reasoning effort</h3>" + _accuracy_table(efforts, "Effort"))
    parts.append("<h3>Outcomes</h3>" + _outcome_table(samples))
    note = (
        "Accuracy is over scored samples; judge, model and verifier errors are counted apart, "
        "never as wrong. "
        "SE and the 95% percentile bootstrap CI are taken over per-task means, since trials of one task "
        "are correlated."
    )
    if not prices:
        note += " No prices are configured for these models, so no cost is shown."
    parts.append(f'<p class="muted">{esc(note)}</p></section>')
    return "".join(parts)


def _plots_section(run: RunData, force_at: int, cap: int) -> str:
    samples = run.samples
    executions = [c for s in samples for c in s.tool_calls if c.ran_in_sandbox]
    durations = [c.duration_s for c in executions]
    timed_out = sum(1 for c in executions if c.sandbox and c.sandbox.get("timed_out"))
    figures = [
        (
            plots.accuracy_by_subject(subject_rows(samples, run.prices)),
            "Accuracy per subject (and model); bars are means, whiskers the 95% bootstrap CI.",
        ),
        (
            plots.token_curves(samples, force_at, cap),
            "Cumulative tokens after each turn, one line per sample, coloured by outcome; "
            "click a line to open "
            "its transcript. Dashed: the force-submit threshold and the hard cap from the run's budget.",
        ),
        (plots.outcome_breakdown(samples), "How samples ended."),
        (
            plots.duration_histogram(durations, timed_out),
            "Wall time of the model's sandbox (python tool) calls, log-spaced bins.",
        ),
    ]
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


def _data_blocks(samples: list[SampleRecord], force_at: int, cap: int) -> str:
    meta = {"force_submit_at": force_at, "token_cap": cap}
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
