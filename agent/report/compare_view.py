"""Show a :class:`Comparison` as rich tables in the terminal or as a self-contained page."""

from __future__ import annotations

import math
from html import escape

from rich.console import Console
from rich.table import Table
from rich.text import Text

from proctor.agent.report.compare import Comparison, PairedComparison, fmt_ci, fmt_pct, fmt_signed
from proctor.agent.report.page import asset, cell_text
from proctor.agent.report.svg import LinearScale, nice_ticks, open_svg, text, text_width
from proctor.agent.text.terminal import escape_for_terminal


def _arm_rows(comparison: Comparison) -> list[list[str]]:
    rows = []
    for index, arm in enumerate(comparison.arms):
        acc = arm.accuracy
        assert acc is not None
        rows.append(
            [
                arm.label + (" (baseline)" if index == 0 else ""),
                arm.run_id,
                str(len(arm.samples)),
                errors_cell(arm.error_outcomes),
                str(len(arm.task_means)),
                fmt_pct(acc.mean),
                fmt_pct(acc.se),
            ]
        )
    return rows


def errors_cell(outcomes: dict[str, int]) -> str:
    """``0``, or ``3 (model_error 2, judge_error 1)``: samples not scored, and why."""
    total = sum(outcomes.values())
    if not total:
        return "0"
    return f"{total} ({', '.join(f'{name} {count}' for name, count in outcomes.items())})"


def _paired_rows(comparison: Comparison) -> list[list[str]]:
    return [
        [
            p.arm,
            p.subject or "all tasks in common",
            str(p.difference.n),
            fmt_signed(p.difference.mean),
            "—" if math.isnan(p.difference.se) else f"{p.difference.se * 100:.1f} pp",
            fmt_ci(p.difference),
        ]
        for p in comparison.paired
    ]


def _subject_rows(comparison: Comparison) -> list[list[str]]:
    rows = []
    for subject in comparison.subjects():
        row = [subject]
        for arm in comparison.arms:
            estimate = comparison.subject_accuracy(arm, subject)
            cell = fmt_pct(estimate.mean)
            if estimate.n:
                cell += f" ± {fmt_pct(estimate.se)} (n={estimate.n})"
            row.append(cell)
        rows.append(row)
    return rows


def _subject_headers(comparison: Comparison) -> list[str]:
    return ["Subject"] + [arm.label for arm in comparison.arms]


def _task_rows(comparison: Comparison) -> list[list[str]]:
    baseline = comparison.baseline
    rows = []
    for task in comparison.tasks:
        row = [task, comparison.subject_of(task)]
        row += [fmt_pct(arm.task_means.get(task)) for arm in comparison.arms]
        for arm in comparison.arms[1:]:
            if task in arm.task_means and task in baseline.task_means:
                row.append(fmt_signed(arm.task_means[task] - baseline.task_means[task]))
            else:
                row.append("—")
        rows.append(row)
    return rows


# Columns of names rather than numbers: left-aligned.
TEXT_COLUMNS = frozenset({"Arm", "Run", "Arm − baseline", "Subset", "Task", "Subject"})
ARM_HEADERS = ["Arm", "Run", "Samples", "Errors", "Tasks", "Accuracy", "± SE"]
PAIRED_HEADERS = ["Arm − baseline", "Subset", "Tasks", "Mean diff.", "SE", "95% paired bootstrap CI (pp)"]


def _task_headers(comparison: Comparison) -> list[str]:
    return (
        ["Task", "Subject"]
        + [arm.label for arm in comparison.arms]
        + [f"{arm.label} − {comparison.baseline.label}" for arm in comparison.arms[1:]]
    )


def print_comparison(comparison: Comparison, console: Console | None = None) -> None:
    console = console or Console()
    for title, headers, rows in (
        ("Arms (accuracy over each arm's own scored samples)", ARM_HEADERS, _arm_rows(comparison)),
        (
            "Per subject (each arm's own tasks; accuracy ± SE)",
            _subject_headers(comparison),
            _subject_rows(comparison),
        ),
        ("Paired differences over tasks in common", PAIRED_HEADERS, _paired_rows(comparison)),
        ("Per task (mean success over trials)", _task_headers(comparison), _task_rows(comparison)),
    ):
        table = Table(title=title, title_justify="left")
        # Text, not str, in headers (arm names) and cells alike: arm, model, subject and task
        # names are data (a task file or an edited run directory sets them), never rich markup
        # ("[/bold]" raised MarkupError) nor terminal control (an escape is shown spelled out).
        for header in headers:
            table.add_column(
                Text(escape_for_terminal(header)), justify="left" if header in TEXT_COLUMNS else "right"
            )
        for row in rows:
            table.add_row(*(Text(escape_for_terminal(cell)) for cell in row))
        console.print(table)


def _html_table(headers: list[str], rows: list[list[str]], css: str) -> str:
    numeric = [h not in TEXT_COLUMNS for h in headers]
    # Headers (arm labels among them) and names wrap only at spaces; numbers never wrap.
    head = "".join(
        f'<th class="{"num" if numeric[i] else ""}">{cell_text(h)}</th>' for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{escape(c)}</td>' if numeric[i] else f'<td class="">{cell_text(c)}</td>'
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return (
        f'<div class="table-wrap"><table class="{css}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


# The forest plot's labels are 11 px (report.css, svg.plot text); its data area stays this wide.
LABEL_FONT_PX = 11
PLOT_AREA_WIDTH = 436
MIN_LABEL_MARGIN = 120


def _arm_label(paired: PairedComparison) -> str:
    return f"{paired.arm} · {paired.subject or 'all tasks'} (n={paired.difference.n})"


def difference_plot(comparison: Comparison) -> str:
    """A forest plot: each paired difference as a dot with its 95% CI, against a zero line."""
    rows = [p for p in comparison.paired if not math.isnan(p.difference.mean)]
    labels = [_arm_label(p) for p in rows]
    # The left margin holds the longest arm label: sized from the labels, not fixed, so no label
    # is clipped; the plotting area keeps its width and the page scales the whole figure down.
    widest = max((text_width(label, LABEL_FONT_PX) for label in labels), default=0.0)
    left = max(MIN_LABEL_MARGIN, math.ceil(widest) + 18)
    row_height, right, top = 22, 24, 28
    width = left + PLOT_AREA_WIDTH + right
    height = top + row_height * max(1, len(rows)) + 34
    lows = [p.difference.ci_low for p in rows if not math.isnan(p.difference.ci_low)]
    highs = [p.difference.ci_high for p in rows if not math.isnan(p.difference.ci_high)]
    extent = max([0.05, *(abs(v) for v in lows + highs)])
    x = LinearScale(-extent, extent, left, width - right)
    parts = [
        open_svg(
            width,
            height,
            "Paired differences, arm minus baseline, with 95% CI",
            "plot-differences",
            x.data_attr("x"),
        ),
        f'<line class="grid zero" x1="{x(0):.1f}" x2="{x(0):.1f}" y1="{top - 8}" y2="{height - 30}"/>',
    ]
    for tick in nice_ticks(-extent, extent, 6):
        parts.append(text(x(tick), height - 14, f"{tick * 100:+g} pp", anchor="middle", css="tick"))
    for index, (paired, label) in enumerate(zip(rows, labels, strict=True)):
        y = top + index * row_height + row_height / 2
        estimate = paired.difference
        parts.append(text(left - 10, y + 4, label, anchor="end", css="tick" if paired.subject else "legend"))
        if not math.isnan(estimate.ci_low):
            parts.append(
                f'<line class="ci" x1="{x(estimate.ci_low):.1f}" x2="{x(estimate.ci_high):.1f}" '
                f'y1="{y:.1f}" y2="{y:.1f}"/>'
            )
        overall = paired.subject is None
        parts.append(
            f'<circle class="{"overall" if overall else "subset"}" cx="{x(estimate.mean):.1f}" '
            f'cy="{y:.1f}" r="{5 if overall else 3.5}" data-mean="{estimate.mean:.6f}">'
            f"<title>{escape(label)}: {fmt_signed(estimate.mean)}, "
            f"95% CI {fmt_ci(estimate)} pp</title></circle>"
        )
    return "".join(parts) + "</svg>"


def render_comparison(comparison: Comparison) -> str:
    labels = ", ".join(arm.label for arm in comparison.arms)
    note = (
        "Differences are arm minus baseline (the first arm), in percentage points, over tasks both arms "
        "scored. "
        "SE is over per-task differences; the CI resamples tasks with both arms' results kept together."
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>Proctor comparison · {escape(labels)}</title>"
        f"<style>{asset('report.css')}</style></head><body>"
        '<header class="top"><h1>Proctor comparison</h1><div class="facts">'
        f"<span>arms: <b>{escape(labels)}</b>"
        f"</span><span>baseline: <b>{escape(comparison.baseline.label)}</b></span></div></header><main>"
        '<section class="card"><h2>Arms</h2>'
        f"{_html_table(ARM_HEADERS, _arm_rows(comparison), 'arms')}</section>"
        '<section class="card"><h2>Per subject</h2>'
        f"{_html_table(_subject_headers(comparison), _subject_rows(comparison), 'subjects')}</section>"
        '<section class="card"><h2>Paired differences</h2>'
        f"<figure>{difference_plot(comparison)}</figure>"
        f"{_html_table(PAIRED_HEADERS, _paired_rows(comparison), 'paired')}"
        f'<p class="muted">{escape(note)}</p></section>'
        f'<section class="card"><h2>Per task</h2>'
        f"{_html_table(_task_headers(comparison), _task_rows(comparison), 'tasks')}</section>"
        "</main></body></html>\n"
    )
