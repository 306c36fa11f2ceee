"""The report's four plots, drawn as inline SVG from Python (no script, no network).

Colours come from CSS classes (``o-<outcome>``, ``m-<n>``) so the page's stylesheet owns
the palette and the plots stay small.
"""

from __future__ import annotations

import math
from collections import Counter

from proctor.agent.report.aggregate import OUTCOME_ORDER, GroupRow
from proctor.agent.report.svg import (
    LinearScale,
    attr,
    format_seconds,
    format_tokens,
    nice_ticks,
    open_svg,
    text,
)
from proctor.agent.results.records import SampleRecord

WIDTH = 560
HEIGHT = 300
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 56, 16, 24, 56


def _frame() -> tuple[float, float, float, float]:
    return MARGIN_LEFT, WIDTH - MARGIN_RIGHT, MARGIN_TOP, HEIGHT - MARGIN_BOTTOM


def _y_axis(scale: LinearScale, ticks: list[float], label: str, fmt: object) -> list[str]:
    left, right, _top, _bottom = _frame()
    parts = []
    for tick in ticks:
        y = scale(tick)
        parts.append(f'<line class="grid" x1="{left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(
            text(left - 6, y + 4, fmt(tick) if callable(fmt) else str(tick), anchor="end", css="tick")
        )
    parts.append(
        text(
            14,
            (MARGIN_TOP + HEIGHT - MARGIN_BOTTOM) / 2,
            label,
            anchor="middle",
            css="axis-label",
            extra=f' transform="rotate(-90 14 {(MARGIN_TOP + HEIGHT - MARGIN_BOTTOM) / 2:.1f})"',
        )
    )
    return parts


def accuracy_by_subject(rows: list[GroupRow]) -> str:
    """Bars of accuracy per subject (one bar per model), with 95% bootstrap CI error bars."""
    subjects = list(dict.fromkeys(r.subject or "(none)" for r in rows))
    models = list(dict.fromkeys(r.model for r in rows))
    left, right, top, bottom = _frame()
    y = LinearScale(0.0, 1.0, bottom, top)
    parts = [
        open_svg(WIDTH, HEIGHT, "Accuracy by subject, 95% bootstrap CI", "plot-accuracy", y.data_attr("y"))
    ]
    parts += _y_axis(y, [0, 0.25, 0.5, 0.75, 1.0], "accuracy", lambda v: f"{v:.0%}")
    if not rows:
        parts.append(text((left + right) / 2, (top + bottom) / 2, "no samples", anchor="middle", css="empty"))
        return "".join(parts) + "</svg>"
    slot = (right - left) / len(subjects)
    bar_width = min(48.0, slot * 0.8 / len(models))
    for s_index, subject in enumerate(subjects):
        centre = left + slot * (s_index + 0.5)
        label = subject if len(subject) <= 16 else subject[:15] + "…"
        parts.append(text(centre, bottom + 16, label, anchor="middle", css="tick"))
        for m_index, model in enumerate(models):
            row = next((r for r in rows if (r.subject or "(none)") == subject and r.model == model), None)
            if row is None or math.isnan(row.accuracy.mean):
                continue
            x = centre - bar_width * len(models) / 2 + m_index * bar_width
            est = row.accuracy
            title = (
                f"{subject} · {model}: {est.mean:.1%} ± {est.se:.1%} SE, "
                f"95% CI [{est.ci_low:.1%}, {est.ci_high:.1%}], n={est.n}"
            )
            parts.append(
                f'<g class="bar" data-subject="{attr(subject)}" data-model="{attr(model)}" '
                f'data-accuracy="{est.mean:.6f}" data-ci-low="{est.ci_low:.6f}" '
                f'data-ci-high="{est.ci_high:.6f}">'
                f"<title>{attr(title)}</title>"
                f'<rect class="m-{m_index % 6}" x="{x + 2:.1f}" y="{y(est.mean):.1f}" '
                f'width="{bar_width - 4:.1f}" '
                f'height="{max(0.0, bottom - y(est.mean)):.1f}"/>'
            )
            cx = x + bar_width / 2
            parts.append(
                f'<path class="errorbar" d="M{cx:.1f},{y(est.ci_low):.1f}V{y(est.ci_high):.1f}'
                f'M{cx - 5:.1f},{y(est.ci_low):.1f}h10M{cx - 5:.1f},{y(est.ci_high):.1f}h10"/></g>'
            )
    if len(models) > 1:
        for m_index, model in enumerate(models):
            lx = left + 8 + m_index * 150
            parts.append(f'<rect class="m-{m_index % 6}" x="{lx}" y="{HEIGHT - 20}" width="10" height="10"/>')
            parts.append(text(lx + 14, HEIGHT - 11, model, css="legend"))
    return "".join(parts) + "</svg>"


# A limit line is drawn when it is within this factor of the data's largest value; farther out
# it would squash every curve into the bottom of the plot, so it is named in a note instead.
LIMIT_REACH = 2.0


def limits_in_reach(data_max: float, limits: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    """The (css, value, label) limits near enough to the data to draw; none without data."""
    if data_max <= 0:
        return []
    return [limit for limit in limits if limit[1] <= LIMIT_REACH * data_max]


def token_curves(samples: list[SampleRecord], force_submit_at: int | None, token_cap: int | None) -> str:
    """Cumulative tokens per turn, one line per sample, scaled to the data.

    The force-submit and cap lines (None: the run has no such budget) appear when within
    ``LIMIT_REACH`` of the largest cumulative count; otherwise a note names them.
    """
    left, right, top, bottom = _frame()
    max_turn = max((t.turn for s in samples for t in s.turns), default=1)
    max_tokens = max((t.cumulative_tokens for s in samples for t in s.turns), default=0)
    limits = [
        (css, value, label)
        for css, value, label in (
            ("limit-force", force_submit_at, "force submit"),
            ("limit-cap", token_cap, "cap"),
        )
        if value is not None
    ]
    drawn = limits_in_reach(max_tokens, limits)
    y_top = max(max_tokens, *(value for _, value, _ in drawn), 1) * 1.06
    x = LinearScale(0.0, float(max(1, max_turn)), left, right)
    y = LinearScale(0.0, y_top, bottom, top)
    parts = [
        open_svg(
            WIDTH,
            HEIGHT,
            "Cumulative tokens per turn, per sample",
            "plot-tokens",
            x.data_attr("x") + y.data_attr("y"),
        )
    ]
    parts += _y_axis(y, nice_ticks(0, y_top), "cumulative tokens", format_tokens)
    for tick in nice_ticks(0, max(1, max_turn), 8):
        if tick == int(tick):
            parts.append(text(x(tick), bottom + 16, f"{int(tick)}", anchor="middle", css="tick"))
    parts.append(text(right, bottom + 30, "turn", anchor="end", css="axis-label"))
    parts.append('<g class="curves">')
    for index, sample in enumerate(samples):
        if not sample.turns:
            continue
        points = [(0.0, 0.0)] + [(float(t.turn), float(t.cumulative_tokens)) for t in sample.turns]
        coords = " ".join(f"{x(px):.1f},{y(py):.1f}" for px, py in points)
        parts.append(
            f'<polyline class="curve o-{attr(sample.outcome)}" data-sample="{index}" points="{coords}">'
            f"<title>{attr(sample.task_id)} trial {sample.trial} · {attr(sample.outcome)} · "
            f"{sample.total_tokens:,} tokens</title></polyline>"
        )
    parts.append("</g>")
    present = [str(o) for o in OUTCOME_ORDER if any(s.outcome == o for s in samples)]
    lx, ly = left - 40, HEIGHT - 16.0
    for outcome in present:
        # Legend under the plot: a short stroke and the name, wrapping to a second row if needed.
        label = outcome.replace("_", " ")
        width = 26 + 6.3 * len(label)
        if lx + width > WIDTH:
            lx, ly = left - 40, ly + 13
        parts.append(
            f'<line class="legend-line o-{attr(outcome)}" x1="{lx}" x2="{lx + 14}" y1="{ly}" y2="{ly}"/>'
        )
        parts.append(text(lx + 18, ly + 4, label, css="legend"))
        lx += width
    for css, value, label in drawn:
        ly = y(value)
        parts.append(
            f'<line class="limit {css}" data-tokens="{value}" x1="{left}" x2="{right}" '
            f'y1="{ly:.1f}" y2="{ly:.1f}"/>'
        )
        parts.append(
            text(right - 4, ly - 4, f"{label} {format_tokens(value)}", anchor="end", css=f"limit-label {css}")
        )
    off_scale = [f"{limit[2]} {format_tokens(limit[1])}" for limit in limits if limit not in drawn]
    if off_scale and max_tokens > 0:
        note = f"off scale: {', '.join(off_scale)} (largest sample {format_tokens(max_tokens)})"
        parts.append(text(right - 4, top + 10, note, anchor="end", css="limit-note"))
    if not samples:
        parts.append(text((left + right) / 2, (top + bottom) / 2, "no samples", anchor="middle", css="empty"))
    return "".join(parts) + "</svg>"


def outcome_breakdown(samples: list[SampleRecord]) -> str:
    counts = Counter(str(s.outcome) for s in samples)
    present = [str(o) for o in OUTCOME_ORDER if counts.get(str(o))]
    total = max(1, sum(counts.values()))
    left, right = 130.0, WIDTH - 70.0
    row_height = 22
    height = max(80, MARGIN_TOP + row_height * len(present) + 20)
    x = LinearScale(0.0, float(max(counts.values(), default=1)), left, right)
    parts = [open_svg(WIDTH, height, "Outcome breakdown", "plot-outcomes")]
    if not present:
        parts.append(text(WIDTH / 2, height / 2, "no samples", anchor="middle", css="empty"))
    for index, outcome in enumerate(present):
        top = MARGIN_TOP + index * row_height
        count = counts[outcome]
        parts.append(
            f'<g class="outcome-bar" data-outcome="{attr(outcome)}" data-count="{count}">'
            + text(left - 8, top + 14, outcome.replace("_", " "), anchor="end", css="tick")
            + f'<rect class="o-{attr(outcome)}" x="{left}" y="{top + 3}" '
            f'width="{max(1.0, x(count) - left):.1f}" '
            f'height="{row_height - 6}"/>'
            + text(x(count) + 6, top + 15, f"{count} ({count / total:.0%})", css="value")
            + "</g>"
        )
    return "".join(parts) + "</svg>"


# Longest duration the histogram places: a day, far past any sandbox limit.
MAX_HISTOGRAM_SECONDS = 86_400.0


def duration_histogram(durations: list[float], timed_out: int = 0) -> str:
    """Sandbox call durations on log-spaced bins: calls span milliseconds to the 30 s limit."""
    left, right, top, bottom = _frame()
    parts = [open_svg(WIDTH, HEIGHT, "Sandbox call duration distribution", "plot-durations")]
    # Clamped to [1 ms, MAX_HISTOGRAM_SECONDS]: a duration from an edited record (inf, 1e308)
    # would put the bins' edges past float's range; NaN and negatives are left out.
    values = [min(max(d, 1e-3), MAX_HISTOGRAM_SECONDS) for d in durations if d >= 0]
    if not values:
        parts.append(
            text((left + right) / 2, (top + bottom) / 2, "no sandbox calls", anchor="middle", css="empty")
        )
        return "".join(parts) + "</svg>"
    low_exp = math.floor(math.log10(min(values)) * 2) / 2
    high_exp = math.ceil(math.log10(max(values)) * 2) / 2
    if high_exp <= low_exp:
        high_exp = low_exp + 0.5
    bins_per_decade = 5
    n_bins = max(1, round((high_exp - low_exp) * bins_per_decade))
    counts = [0] * n_bins
    for value in values:
        position = (math.log10(value) - low_exp) / (high_exp - low_exp) * n_bins
        counts[min(n_bins - 1, max(0, int(position)))] += 1
    x = LinearScale(low_exp, high_exp, left, right)
    y = LinearScale(0.0, max(counts) * 1.1, bottom, top)
    parts[0] = parts[0].replace(">", x.data_attr("logx") + ">", 1)
    parts += _y_axis(
        y, [t for t in nice_ticks(0, max(counts) * 1.1) if t == int(t)], "calls", lambda v: f"{int(v)}"
    )
    width = (right - left) / n_bins
    for index, count in enumerate(counts):
        lo = 10 ** (low_exp + index * (high_exp - low_exp) / n_bins)
        hi = 10 ** (low_exp + (index + 1) * (high_exp - low_exp) / n_bins)
        parts.append(
            f'<rect class="hist" data-count="{count}" x="{left + index * width + 1:.1f}" y="{y(count):.1f}" '
            f'width="{width - 2:.1f}" height="{bottom - y(count):.1f}">'
            f"<title>{format_seconds(round(lo, 4))} – {format_seconds(round(hi, 4))}: "
            f"{count} calls</title></rect>"
        )
    for exp in range(math.ceil(low_exp), math.floor(high_exp) + 1):
        parts.append(text(x(exp), bottom + 16, format_seconds(10.0**exp), anchor="middle", css="tick"))
    caption = f"{len(values)} calls, median {format_seconds(round(sorted(values)[len(values) // 2], 3))}"
    if timed_out:
        caption += f", {timed_out} timed out"
    parts.append(text((left + right) / 2, bottom + 36, caption, anchor="middle", css="axis-label"))
    return "".join(parts) + "</svg>"
