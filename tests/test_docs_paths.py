"""Docs cite only files that are in the repository (issue 15): every repository path named in
README.md or docs/*.md exists in this checkout. Image names that look like paths are not files."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PATH = re.compile(r"(?<![\w./-])((?:agent|sandbox|tests|configs|images|docs|proctor|\.ci)/[\w./-]+)")
IMAGE_NAMES = ("proctor/frontiermath-python", "proctor/debian-base")


def cited_paths(text: str) -> set[str]:
    found = set()
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".,:;)")
        if not path.startswith(IMAGE_NAMES):
            found.add(path)
    return found


def test_every_path_the_docs_cite_exists() -> None:
    missing = [
        f"{doc.relative_to(REPO)}: {path}"
        for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
        for path in sorted(cited_paths(doc.read_text(encoding="utf-8")))
        if not (REPO / path).exists()
    ]
    assert missing == []


def test_the_check_sees_a_missing_file() -> None:
    assert cited_paths("see `configs/tasks/nowhere.jsonl` and proctor/frontiermath-python:abc") == {
        "configs/tasks/nowhere.jsonl"
    }
