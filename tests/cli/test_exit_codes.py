"""One exit-status table (issue 38, item 5): `proctor --help` prints it, docs/runs.md lists it,
and `proctor run --help` names the run's own codes."""

from __future__ import annotations

import re
from pathlib import Path

from proctor.agent.cli import exit_codes
from tests.support.cli import proctor_in_process

DOCS = Path(__file__).resolve().parents[2] / "docs" / "runs.md"
# Every status a command exits with on purpose (each constant of exit_codes.py).
EVERY_STATUS = {0, 1, 2, 3, 4, 124, 125, 130, 137}


def docs_table() -> list[tuple[str, str]]:
    text = DOCS.read_text(encoding="utf-8")
    block = text.split("<!-- exit-table -->", 1)[1].split("<!-- /exit-table -->", 1)[0]
    rows = [line.strip().strip("|").split("|") for line in block.strip().splitlines()[2:]]
    return [(status.strip(), meaning.strip()) for status, meaning in rows]


def panel(page: str, title: str) -> str:
    """The text of one rich panel of a help page: its rows, borders stripped."""
    lines = page.splitlines()
    start = next(i for i, line in enumerate(lines) if title in line and "─" in line)
    body = []
    for line in lines[start + 1 :]:
        if line.lstrip().startswith("╰"):
            break
        body.append(line.strip().strip("│").strip())
    return "\n".join(body)


def test_every_constant_is_in_the_table() -> None:
    constants = {
        value for name, value in vars(exit_codes).items() if name.isupper() and isinstance(value, int)
    }
    assert constants == EVERY_STATUS
    listed = {int(code) for status, _ in exit_codes.EXIT_TABLE for code in status.split()}
    assert listed == EVERY_STATUS


def test_docs_runs_md_has_the_same_table() -> None:
    assert docs_table() == list(exit_codes.EXIT_TABLE)


def test_proctor_help_prints_every_status() -> None:
    completed = proctor_in_process("--help", env={"TERMINAL_WIDTH": "200"})
    assert completed.returncode == 0
    table = panel(completed.stdout, "Exit status")
    shown = {
        int(code) for line in table.splitlines() for code in re.findall(r"^(\d+(?: \d+)*)", line)[0].split()
    }
    assert shown == EVERY_STATUS, table


def test_typers_root_page_prints_the_same_table() -> None:
    # `proctor` alone (a usage error that shows the page) is drawn by typer's root group.
    completed = proctor_in_process(env={"TERMINAL_WIDTH": "200"})
    assert panel(completed.stdout, "Exit status") == panel(
        proctor_in_process("--help", env={"TERMINAL_WIDTH": "200"}).stdout, "Exit status"
    )


def test_run_help_names_the_runs_own_statuses() -> None:
    completed = proctor_in_process("run", "--help", env={"TERMINAL_WIDTH": "200"})
    words = " ".join(completed.stdout.replace("│", " ").split())
    for status, meaning in ((2, "bad input"), (3, "--fail-on-error"), (4, "refused"), (130, "interrupted")):
        assert f"{status} " in words and meaning in words, words
    assert "proctor --help" in words
