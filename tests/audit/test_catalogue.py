"""docs/audit.md's catalogue lists every check, and every test it names exists.

Works off whatever checks exist when it runs: a check added anywhere in the battery without a
catalogue entry (agent/audit/catalogue.py) and a regenerated page fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from proctor.agent.audit.battery import ALL_CHECKS
from proctor.agent.audit.catalogue import (
    END,
    ENTRIES,
    KERNEL_CLASSES,
    SANDBOXEVAL_CLASSES,
    START,
    render_kernel_classes,
    render_table,
)

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "audit.md"


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    }


def test_every_check_has_a_catalogue_entry_and_no_entry_is_stale() -> None:
    ids = {check.id for check in ALL_CHECKS}
    assert sorted(ids - set(ENTRIES)) == [], "checks without a catalogue entry"
    assert sorted(set(ENTRIES) - ids) == [], "catalogue entries for checks that do not exist"
    for check_id, entry in ENTRIES.items():
        assert entry.sandboxeval in SANDBOXEVAL_CLASSES, check_id
        assert entry.proves and entry.graded and entry.tests, check_id


def test_every_test_the_catalogue_names_exists() -> None:
    cache: dict[Path, set[str]] = {}
    missing = []
    for check_id, entry in ENTRIES.items():
        for test in entry.tests:
            file, _, name = test.partition("::")
            path = REPO / file
            if not path.is_file():
                missing.append(f"{check_id}: {file}")
                continue
            functions = cache.setdefault(path, _test_functions(path))
            if name.split("[")[0] not in functions:
                missing.append(f"{check_id}: {test}")
    assert missing == []


def test_every_kernel_class_the_issue_names_points_at_real_rows() -> None:
    ids = {check.id for check in ALL_CHECKS}
    for name, rows in KERNEL_CLASSES.items():
        assert set(rows) <= ids, name
    # A class without a row is said so on the page, never left out.
    assert "no row on this branch yet" in render_kernel_classes() or all(KERNEL_CLASSES.values())


def test_the_page_is_what_the_check_objects_generate() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert START in text and END in text
    generated = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert generated == (render_table() + "\n" + render_kernel_classes()).strip(), (
        "docs/audit.md is stale: regenerate with python3 -m proctor.agent.audit.catalogue"
    )
    rows = re.findall(r"^\| `([\w.]+)` \|", generated, flags=re.MULTILINE)
    assert sorted(rows) == sorted(check.id for check in ALL_CHECKS)
    assert "NOT CATALOGUED" not in generated


def test_no_check_id_is_a_prefix_of_another() -> None:
    """--only selects by prefix: one row's ID must never select another row too."""
    ids = [check.id for check in ALL_CHECKS]
    clashes = [(a, b) for a in ids for b in ids if a != b and b.startswith(a)]
    assert clashes == []
