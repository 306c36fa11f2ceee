"""The terminal's view of summary.json beyond accuracy: pass@k, the trials x task grid, cost.

Everything is read from the summary dict (``proctor.agent.results.summary``), so the terminal, summary.json
and the HTML report say the same. Names from records are data: they are wrapped in ``Text`` and
control characters are shown, never obeyed.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from proctor.agent.results.passk import shown_ks
from proctor.agent.text.terminal import escape_for_terminal

# The terminal shows at most this many grid rows; summary.json and the report hold them all.
GRID_ROWS_SHOWN = 40

TRIAL_MARKS = {"correct": "✓", "error": "E", "other": "✗"}


def _visible(text: object) -> Text:
    return Text(escape_for_terminal(str(text)))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


PASSK_NOTE = "pass@k: error outcomes are left out of n; tasks with fewer scored trials than k are left out"


def passk_table(summary: dict[str, Any]) -> Table | None:
    """One row per model: pass@k over its tasks, with the task count behind each k."""
    tasks = summary.get("tasks") or {}
    k_max = max((len((m.get("pass_at_k") or {}).get("k") or {}) for m in tasks.values()), default=0)
    if k_max == 0:
        return None
    ks = shown_ks(k_max)
    # Short: rich wraps a title to the table's width, and this table is narrow (the long title
    # took four lines); what the numbers mean is PASSK_NOTE, a line of its own.
    table = Table(title="pass@k (unbiased)", title_justify="left")
    table.add_column("model")
    for k in ks:
        table.add_column(f"k={k}", justify="right")
    for model, block in tasks.items():
        values = (block.get("pass_at_k") or {}).get("k") or {}
        cells = []
        for k in ks:
            value = values.get(str(k))
            cells.append("-" if not value else f"{value['mean']:.1%} ({value['tasks']})")
        table.add_row(_visible(model), *cells)
    return table


def trial_mark(outcome: str, error_outcomes: set[str]) -> str:
    if outcome == "correct":
        return TRIAL_MARKS["correct"]
    return TRIAL_MARKS["error"] if outcome in error_outcomes else TRIAL_MARKS["other"]


def grid_table(summary: dict[str, Any]) -> tuple[Table | None, int]:
    """The trials x task grid (✓ success, ✗ failure, E error) and how many rows were left out."""
    tasks = summary.get("tasks") or {}
    rows = [(model, row) for model, block in tasks.items() for row in block.get("grid") or []]
    if not rows:
        return None, 0
    errors = set(summary.get("error_outcomes") or [])
    k_max = max(len(row.get("pass_at_k") or {}) for _, row in rows)
    table = Table(title="Trials x task (✓ correct, ✗ not, E error: not scored)", title_justify="left")
    several_models = len(tasks) > 1
    if several_models:
        table.add_column("model")
    table.add_column("task")
    table.add_column("trials")
    table.add_column("correct/scored", justify="right")
    table.add_column("pass@1", justify="right")
    if k_max > 1:
        table.add_column(f"pass@{k_max}", justify="right")
    for model, row in rows[:GRID_ROWS_SHOWN]:
        marks = "".join(
            trial_mark(o, errors) for _, o in sorted(row["trials"].items(), key=lambda t: int(t[0]))
        )
        passes = row.get("pass_at_k") or {}
        cells: list[str | Text] = [_visible(model)] if several_models else []
        cells += [_visible(row["task_id"]), marks, f"{row['correct']}/{row['scored']}", _pct(passes.get("1"))]
        if k_max > 1:
            cells.append(_pct(passes.get(str(k_max))))
        table.add_row(*cells)
    return table, max(0, len(rows) - GRID_ROWS_SHOWN)


def cost_line(summary: dict[str, Any]) -> str | None:
    """Judge tokens and the cost split between answering models and judge, when there is any."""
    overall = summary.get("overall") or {}
    judge = overall.get("judge") or {}
    parts = []
    if judge.get("samples_judged"):
        parts.append(
            f"judge {judge['samples_judged']} samples, {judge['attempts']} attempts, "
            f"{judge['input_tokens']:,} in / {judge['output_tokens']:,} out tokens"
        )
    total = overall.get("total_cost_usd")
    if total is not None:
        split = []
        if overall.get("cost_usd") is not None:
            split.append(f"models ${overall['cost_usd']:.4f}")
        if judge.get("cost_usd") is not None:
            split.append(f"judge ${judge['cost_usd']:.4f}")
        parts.append(f"total cost ${total:.4f} ({' + '.join(split)})")
    elif judge.get("samples_judged"):
        parts.append("judge cost unknown (no judge prices configured)")
    return "; ".join(parts) or None
