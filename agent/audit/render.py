"""The audit's three faces: a terminal table, JSON, and a standalone offline HTML page."""

from __future__ import annotations

import html
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from proctor.agent.audit.battery import AuditReport
from proctor.agent.audit.model import Verdict

COLUMNS = ("class", "check", "tried", "expected", "observed", "verdict", "evidence")
# Through ray every check runs once per node: the node is a column of its own.
NODE_COLUMNS = ("node", *COLUMNS)
STYLES = {Verdict.HELD: "green", Verdict.WEAK: "yellow", Verdict.BROKEN: "bold red", Verdict.SKIPPED: "dim"}


def headline(report: AuditReport) -> str:
    counts = report.counts()
    parts = ", ".join(f"{counts[v.value]} {v.value}" for v in Verdict)
    runtime = f", runtime {report.runtime}" if report.runtime else ""
    # describe()'s record of the path that started the audited containers: the spec's auto may
    # have chosen either.
    path_taken = report.sandbox.get("engine_path")
    if path_taken:
        runtime += f", engine path {path_taken}"
    nodes = report.sandbox.get("nodes")
    on = f" on {len(nodes)} node(s)" if isinstance(nodes, list) else ""
    return (
        f"sandbox audit ({report.mode}) of backend {report.backend}{on}{runtime}: {len(report.rows)} checks, "
        f"{parts}; {report.duration_s:.1f} s"
    )


def _by_node(report: AuditReport) -> bool:
    return any(row.node is not None for row in report.rows)


def print_table(report: AuditReport, console: Console) -> None:
    table = Table(title=Text(headline(report)), show_lines=False, expand=False)
    by_node = _by_node(report)
    for name in NODE_COLUMNS if by_node else COLUMNS:
        table.add_column(name, overflow="fold")
    for row in report.rows:
        # Text objects: evidence is escaped already and must never be read as rich markup.
        table.add_row(
            *([Text(row.node or "")] if by_node else []),
            Text(row.klass),
            Text(row.id),
            Text(row.tried),
            Text(row.expected),
            Text(row.observed),
            Text(row.verdict.value, style=STYLES[row.verdict]),
            Text(row.evidence[:160] + ("..." if len(row.evidence) > 160 else "")),
        )
    console.print(table)
    console.print(Text(headline(report)))


def write_json(report: AuditReport, path: Path) -> None:
    path.write_text(json.dumps(report.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;width:100%}
th,td{border:1px solid #ccc;padding:4px 6px;vertical-align:top;text-align:left}
th{background:#f3f3f3}
td.evidence{font-family:ui-monospace,monospace;font-size:12px;word-break:break-all}
.held{color:#116611;font-weight:bold}.weak{color:#9a6700;font-weight:bold}
.broken{color:#b00020;font-weight:bold}.skipped{color:#777}
"""


def render_html(report: AuditReport) -> str:
    esc = html.escape
    facts = [
        ("backend", report.backend),
        ("runtime", report.runtime or "engine default"),
        ("image", str(report.sandbox.get("image_id") or report.sandbox.get("image") or "-")),
        ("mode", report.mode),
        ("started", report.started_at),
        ("limits", json.dumps(report.limits, sort_keys=True)),
    ]
    by_node = _by_node(report)
    if isinstance(report.sandbox.get("ray_address"), str):
        facts.insert(1, ("ray address", str(report.sandbox["ray_address"])))
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{esc(cell)}</td>"
            for cell in (
                *([row.node or ""] if by_node else []),
                row.klass,
                row.id,
                row.tried,
                row.expected,
                row.observed,
            )
        )
        + f'<td class="{row.verdict.value}">{esc(row.verdict.value)}</td>'
        + f'<td class="evidence">{esc(row.evidence)}</td></tr>'
        for row in report.rows
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        # Nothing on this page is fetched or run: the browser enforces it.
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{esc(headline(report))}</title><style>{_CSS}</style></head><body>"
        f"<h1>Proctor sandbox audit</h1><p>{esc(headline(report))}</p><ul>"
        + "".join(f"<li>{esc(k)}: <b>{esc(v)}</b></li>" for k, v in facts)
        + "</ul><table><thead><tr>"
        + "".join(f"<th>{name}</th>" for name in (NODE_COLUMNS if by_node else COLUMNS))
        + "</tr></thead><tbody>"
        + rows
        + "</tbody></table></body></html>\n"
    )


def write_html(report: AuditReport, path: Path) -> None:
    path.write_text(render_html(report), encoding="utf-8")
