"""The docs' fidelity tables name tests that exist, so the tables cannot rot.

docs/frontiermath.md, docs/judge-tracks.md, docs/eed.md and docs/models.md each carry a table under a
"Fidelity table" heading: rule | source | Proctor's behaviour per protocol profile | test.
Every backquoted span in the test column is a reference, resolved like this:

- ``tests/dir/test_file.py``: that file exists and holds tests;
- ``tests/dir/test_file.py::name``: ``name`` (a glob, e.g. ``test_*_conversation``, or
  ``Class::method``; a ``[param id]`` suffix is ignored) matches a test function there;
- ``test_file.py`` or ``test_file.py::name``: the same, in the page's own test directory;
- ``::name``: a test in the file the table named last.

Each row names at least one test function. The behaviour columns are headed by protocol
profiles that exist (``PROFILES``), so a renamed profile shows up here too.

docs/frontiermath.md's protocol section ("The conversation and the token budget") lists each
rule as a bullet that starts with its name in bold; every such rule needs a row of the
FrontierMath fidelity table whose rule cell names it, so a rule cannot be added to the page
without saying where it comes from and which test holds it.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from proctor.agent.tracks.frontiermath.profiles import PROFILES

ROOT = Path(__file__).resolve().parent.parent
# The page, and the directory its bare file names are in.
PAGES = {
    "docs/frontiermath.md": "tests/frontiermath",
    "docs/judge-tracks.md": "tests/judge",
    "docs/eed.md": "tests/scoring",
    "docs/models.md": "tests/model",
}
HEADING = re.compile(r"^#+ .*fidelity table", re.IGNORECASE)
# Classification tables: signal | outcome | ... | test, under their own heading (the page, the
# heading, the directory its bare file names are in).
CLASSIFICATION_TABLES = {
    "docs/models.md": (re.compile(r"^#+ provider refusals", re.IGNORECASE), "tests/model"),
}
BACKQUOTED = re.compile(r"`([^`]+)`")
# The page whose protocol section's rules each need a fidelity row, and that section's heading.
PROTOCOL_PAGE = "docs/frontiermath.md"
PROTOCOL_HEADING = "## The conversation and the token budget"
RULE_BULLET = re.compile(r"^- \*\*(.+?)\*\*")


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def fidelity_table(page: str, heading: re.Pattern[str] = HEADING) -> Table:
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    start = next((i for i, line in enumerate(lines) if heading.match(line)), None)
    assert start is not None, f"{page}: no {heading.pattern!r} heading"
    table_lines: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            table_lines.append(line)
        elif table_lines or line.startswith("#"):
            break
    assert len(table_lines) >= 3, f"{page}: no table under the 'Fidelity table' heading"
    header, _, *rows = (cells(line) for line in table_lines)
    for number, row in enumerate(rows, 1):
        assert len(row) == len(header), f"{page}: row {number} has {len(row)} cells, the header {len(header)}"
    return Table(header, rows)


def collected_tests(path: Path) -> set[str]:
    """Names pytest would collect as tests in ``path``: functions and ``Class::method``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, functions) and node.name.startswith("test"):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            names.update(
                f"{node.name}::{member.name}"
                for member in node.body
                if isinstance(member, functions) and member.name.startswith("test")
            )
    return names


def resolve(reference: str, page_dir: str, last_file: Path | None) -> tuple[Path, str | None]:
    """The test file a reference names, and the test name (or None for a whole file)."""
    file_part, _, name = reference.partition("::")
    if not file_part:
        assert last_file is not None, f"`{reference}` names no file and none was named before it"
        path = last_file
    else:
        assert file_part.endswith(".py"), f"`{reference}` is not a test reference (file.py or file.py::test)"
        path = ROOT / file_part if "/" in file_part else ROOT / page_dir / file_part
    assert path.is_file(), f"`{reference}`: no file {path.relative_to(ROOT)}"
    return path, (name.split("[", 1)[0] or None)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_test_a_fidelity_table_names_exists(page: str) -> None:
    table = fidelity_table(page)
    header = [h.lower() for h in table.header]
    assert header[0] == "rule" and header[1] == "source" and header[-1] == "test", table.header
    assert len(header) >= 4, f"{page}: no column for Proctor's behaviour"
    for column in table.header[2:-1]:
        assert any(f"`{name}`" in column for name in PROFILES), f"{page}: column {column!r} names no profile"
    last_file: Path | None = None
    for row in table.rows:
        references = BACKQUOTED.findall(row[-1])
        assert references, f"{page}: the row {row[0]!r} names no test"
        named_functions = 0
        for reference in references:
            path, name = resolve(reference, PAGES[page], last_file)
            last_file = path
            tests = collected_tests(path)
            assert tests, f"{page}: `{reference}`: {path.relative_to(ROOT)} holds no tests"
            if name is not None:
                assert fnmatch.filter(sorted(tests), name), (
                    f"{page}, row {row[0]!r}: no test {name!r} in {path.relative_to(ROOT)}"
                )
                named_functions += 1
        assert named_functions, f"{page}: the row {row[0]!r} names files but no test function"


def check_row_tests(page: str, page_dir: str, table: Table) -> None:
    """Every row's test cell names at least one test function, and each named test exists."""
    last_file: Path | None = None
    for row in table.rows:
        references = BACKQUOTED.findall(row[-1])
        assert references, f"{page}: the row {row[0]!r} names no test"
        named_functions = 0
        for reference in references:
            path, name = resolve(reference, page_dir, last_file)
            last_file = path
            tests = collected_tests(path)
            assert tests, f"{page}: `{reference}`: {path.relative_to(ROOT)} holds no tests"
            if name is not None:
                assert fnmatch.filter(sorted(tests), name), (
                    f"{page}, row {row[0]!r}: no test {name!r} in {path.relative_to(ROOT)}"
                )
                named_functions += 1
        assert named_functions or any(r.endswith(".py") for r in references), (
            f"{page}: the row {row[0]!r} names no test"
        )


@pytest.mark.parametrize("page", sorted(CLASSIFICATION_TABLES))
def test_every_test_a_classification_table_names_exists(page: str) -> None:
    heading, page_dir = CLASSIFICATION_TABLES[page]
    table = fidelity_table(page, heading)
    header = [h.lower() for h in table.header]
    assert header[-1] == "test" and "counted in accuracy" in header and "re-run on resume" in header
    check_row_tests(page, page_dir, table)


def test_the_checker_catches_a_test_that_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="no file"):
        resolve("test_nowhere.py::test_x", "tests/frontiermath", None)
    with pytest.raises(AssertionError, match="names no file"):
        resolve("::test_x", "tests/frontiermath", None)
    with pytest.raises(AssertionError, match="not a test reference"):
        resolve("agent/budget", "tests", None)
    path, name = resolve("test_protocol_profiles.py::test_x[a b]", "tests/frontiermath", None)
    assert name == "test_x" and not fnmatch.filter(sorted(collected_tests(path)), name)
    source = tmp_path / "test_sample.py"
    source.write_text("def test_a():\n    pass\n\nclass TestB:\n    async def test_c(self):\n        pass\n")
    assert collected_tests(source) == {"test_a", "TestB::test_c"}


def protocol_rules(text: str, heading: str = PROTOCOL_HEADING) -> list[str]:
    """The bold names of the rule bullets in the section under ``heading`` (to the next ``## ``)."""
    lines = text.splitlines()
    assert heading in lines, f"no {heading!r} section"
    start = lines.index(heading) + 1
    rules: list[str] = []
    for line in lines[start:]:
        if line.startswith("## "):
            break
        match = RULE_BULLET.match(line)
        if match:
            rules.append(match.group(1))
    return rules


def rules_without_a_row(rules: list[str], table: Table) -> list[str]:
    names = [row[0].lower() for row in table.rows]
    return [rule for rule in rules if not any(rule.lower() in name for name in names)]


def test_every_rule_of_the_protocol_section_has_a_fidelity_row() -> None:
    rules = protocol_rules((ROOT / PROTOCOL_PAGE).read_text(encoding="utf-8"))
    assert len(rules) >= 8, rules
    assert rules_without_a_row(rules, fidelity_table(PROTOCOL_PAGE)) == []


def test_the_rule_check_catches_a_rule_without_a_row() -> None:
    page = "\n".join(
        [
            "## Other",
            "- **Not this one**: outside the section.",
            PROTOCOL_HEADING,
            "- **Token count**: counted.",
            "- **Brand new rule**: nobody wrote its row.",
            "- a bullet without a bold name is prose, not a rule",
            "## Next",
            "- **Nor this one**: after the section.",
        ]
    )
    rules = protocol_rules(page)
    assert rules == ["Token count", "Brand new rule"]
    table = Table(["rule", "source", "test"], [["Token count: input + output", "seed", "`t.py::t`"]])
    assert rules_without_a_row(rules, table) == ["Brand new rule"]
