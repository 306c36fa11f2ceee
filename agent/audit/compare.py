"""``--compare``: the same battery over several sandboxes, one side-by-side table.

A spec list is split at commas outside quotes (``shlex`` rules), so a command holding a comma
is written in quotes inside the list. Each item is one of Proctor's own sandboxes by name
(``docker``/``runc``, ``runsc``, ``local``), an Inspect AI provider (``inspect:NAME``, or
``inspect:NAME:CONFIG`` with its config file) or a command, optionally labelled ``label=command``::

    --compare "docker,runsc,local,defaults=docker run --rm -i IMAGE python3 -"
    --compare docker --compare "'mounted=docker run -v /a,b:/x --rm -i IMAGE python3 -'"
    --compare "runsc,inspect:local,inspect:proctor:proctor.yaml"

``--compare`` may be given several times; the lists are joined in order.
"""

from __future__ import annotations

import html
import json
import re
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from proctor.agent.audit.battery import ALL_CHECKS, AuditReport
from proctor.agent.audit.catalogue import sandboxeval_class
from proctor.agent.audit.command_sandbox import parse_command
from proctor.agent.audit.model import Verdict
from proctor.agent.audit.render import STYLES
from proctor.agent.errors import UserError

# name: (backend, runtime) of Proctor's own sandboxes.
PROCTOR_SANDBOXES: dict[str, tuple[str, str | None]] = {
    "docker": ("docker", None),
    "runc": ("docker", "runc"),
    "runsc": ("docker", "runsc"),
    "local": ("local", None),
}
# Said beside every Inspect column: how its calls were made, the pair rows' in particular.
INSPECT_NOTE = (
    "every call through the provider's exec in one sample environment; pair rows as two "
    "concurrent exec calls on it"
)
_LABEL = re.compile(r"^([A-Za-z][A-Za-z0-9_.-]{0,39})=(\S.*)$", re.DOTALL)


@dataclass(frozen=True)
class Spec:
    label: str
    backend: str
    runtime: str | None = None
    command: tuple[str, ...] = ()
    # An Inspect AI provider (backend "inspect"): its registered name and its config, if any.
    provider: str | None = None
    config: str | None = None

    def describe(self) -> str:
        """What the column is, in words."""
        if self.command:
            return shlex.join(self.command)
        if self.provider is not None:
            return f"Inspect provider {self.provider}" + (f" with {self.config}" if self.config else "")
        return f"Proctor's {self.backend} backend" + (f" (runtime {self.runtime})" if self.runtime else "")


def split_list(value: str) -> list[str]:
    """Items of one ``--compare`` value: commas outside quotes separate, one quote level goes."""
    lexer = shlex.shlex(value, posix=True)
    lexer.whitespace = ","
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return [item.strip() for item in lexer if item.strip()]
    except ValueError as exc:
        raise UserError(f"--compare: cannot split {value!r}: {exc}") from None


INSPECT_PREFIX = "inspect:"


def _inspect_spec(label: str | None, text: str) -> Spec:
    """``inspect:NAME`` or ``inspect:NAME:CONFIG``; the provider is looked up before any audit."""
    name, _, config = text[len(INSPECT_PREFIX) :].partition(":")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise UserError(f"--compare: {text!r}: name an Inspect provider inspect:NAME or inspect:NAME:CONFIG")
    return Spec(label or f"{INSPECT_PREFIX}{name}", "inspect", provider=name, config=config or None)


def parse_specs(values: list[str]) -> list[Spec]:
    specs: list[Spec] = []
    for value in values:
        for item in split_list(value):
            if item in PROCTOR_SANDBOXES:
                backend, runtime = PROCTOR_SANDBOXES[item]
                specs.append(Spec(item, backend, runtime))
                continue
            labelled = _LABEL.match(item)
            label, text = (labelled.group(1), labelled.group(2)) if labelled else (item, item)
            if label in PROCTOR_SANDBOXES and labelled:
                raise UserError(f"--compare: label {label!r} is the name of one of Proctor's sandboxes")
            if text.startswith(INSPECT_PREFIX):
                specs.append(_inspect_spec(label if labelled else None, text))
                continue
            argv = parse_command(text, "--compare")
            specs.append(Spec(label, "command", None, tuple(argv)))
    if len(specs) < 2:
        raise UserError("--compare: name at least two sandboxes (comma-separated, or the option repeated)")
    labels = [spec.label for spec in specs]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise UserError(f"--compare: {', '.join(repeated)} named twice (label a command with NAME=COMMAND)")
    return specs


@dataclass
class Comparison:
    specs: list[Spec]
    reports: list[AuditReport]

    def check_ids(self) -> list[str]:
        seen = {row.id for report in self.reports for row in report.rows}
        return [check.id for check in ALL_CHECKS if check.id in seen]

    def cell(self, index: int, check_id: str) -> Any:
        for row in self.reports[index].rows:
            if row.id == check_id:
                return row
        return None

    def to_dict(self) -> dict[str, Any]:
        klass = {check.id: check.klass for check in ALL_CHECKS}
        return {
            "sandboxes": [
                {
                    "label": spec.label,
                    "backend": spec.backend,
                    "runtime": spec.runtime,
                    "command": shlex.join(spec.command) if spec.command else None,
                    "inspect_provider": spec.provider,
                    "inspect_config": spec.config,
                    "counts": report.counts(),
                    "duration_s": round(report.duration_s, 2),
                }
                for spec, report in zip(self.specs, self.reports, strict=True)
            ],
            "rows": [
                {
                    "id": check_id,
                    "class": klass[check_id],
                    "sandboxeval": sandboxeval_class(check_id),
                    "results": {
                        spec.label: (
                            {"verdict": row.verdict.value, "observed": row.observed, "evidence": row.evidence}
                            if (row := self.cell(i, check_id)) is not None
                            else None
                        )
                        for i, spec in enumerate(self.specs)
                    },
                }
                for check_id in self.check_ids()
            ],
            "reports": {
                spec.label: report.to_dict() for spec, report in zip(self.specs, self.reports, strict=True)
            },
        }


async def run_comparison(
    specs: list[Spec], audit_one: Callable[[Spec], Awaitable[AuditReport]]
) -> Comparison:
    """One sandbox after another: two audits at once would skew each other's CPU rows."""
    reports = [await audit_one(spec) for spec in specs]
    return Comparison(specs, reports)


def print_comparison(comparison: Comparison, console: Console) -> None:
    table = Table(title="sandbox audit, side by side", show_lines=False)
    table.add_column("check", overflow="fold")
    for spec in comparison.specs:
        table.add_column(Text(spec.label), overflow="fold")
    for check_id in comparison.check_ids():
        cells = []
        for index in range(len(comparison.specs)):
            row = comparison.cell(index, check_id)
            cells.append(Text("-") if row is None else Text(row.verdict.value, style=STYLES[row.verdict]))
        table.add_row(Text(check_id), *cells)
    console.print(table)
    for spec, report in zip(comparison.specs, comparison.reports, strict=True):
        counts = report.counts()
        console.print(
            Text(
                f"{spec.label}: {spec.describe()}: "
                + ", ".join(f"{counts[v.value]} {v.value}" for v in Verdict)
                + f"; {report.duration_s:.1f} s"
                + (f"; {INSPECT_NOTE}" if spec.provider is not None else "")
            )
        )


def write_json(comparison: Comparison, path: Path) -> None:
    path.write_text(json.dumps(comparison.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse}
th,td{border:1px solid #ccc;padding:3px 6px;vertical-align:top;text-align:left}
th{background:#f3f3f3}
td small{display:block;color:#555;max-width:22em;word-break:break-word}
.held{background:#e6f4e6}.weak{background:#fff3cd}.broken{background:#f8d7da}.skipped{color:#777}
"""


def render_html(comparison: Comparison) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(spec.label)}</th>" for spec in comparison.specs)
    klass = {check.id: check.klass for check in ALL_CHECKS}
    body = []
    for check_id in comparison.check_ids():
        cells = []
        for index in range(len(comparison.specs)):
            row = comparison.cell(index, check_id)
            if row is None:
                cells.append("<td>-</td>")
                continue
            cells.append(
                f'<td class="{row.verdict.value}" title="{esc(row.evidence)}">'
                f"<b>{esc(row.verdict.value)}</b><small>{esc(row.observed)}</small></td>"
            )
        body.append(
            f'<tr class="check" id="{esc(check_id)}"><td><code>{esc(check_id)}</code>'
            f"<small>{esc(klass[check_id])}; {esc(sandboxeval_class(check_id))}</small></td>"
            + "".join(cells)
            + "</tr>"
        )
    legend = "".join(
        f"<li><b>{esc(spec.label)}</b>: "
        + esc(spec.describe())
        + esc(
            "; "
            + ", ".join(f"{count} {verdict}" for verdict, count in report.counts().items())
            + f"; {report.duration_s:.1f} s"
            + (f"; {INSPECT_NOTE}" if spec.provider is not None else "")
        )
        + "</li>"
        for spec, report in zip(comparison.specs, comparison.reports, strict=True)
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        # Nothing on this page is fetched or run: the browser enforces it.
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>Proctor sandbox audit: {len(comparison.specs)} sandboxes</title>"
        f"<style>{_CSS}</style></head><body><h1>Proctor sandbox audit, side by side</h1>"
        f"<ul>{legend}</ul><table><thead><tr><th>check</th>{head}</tr></thead><tbody>"
        + "".join(body)
        + "</tbody></table></body></html>\n"
    )


def write_html(comparison: Comparison, path: Path) -> None:
    path.write_text(render_html(comparison), encoding="utf-8")
