"""The order the suite runs in: the modules that took longest first.

xdist hands tests to its workers one or two at a time, in collection order. Collected by path,
the heaviest modules (tests/sandbox/, which sorts last) started at the end, and one worker ran
the last of them alone while the other had nothing left. Longest first is the classic way to
keep a greedy schedule's tail short. A module's tests stay together and in their order, so its
module-scoped fixtures are built as before; a module not yet recorded runs last, where short
new modules belong. Stale figures cost only some of the gain, never a test.

Record the figures from a full run's JUnit XML (the README's test command with
``--junitxml=PATH``): ``python3 -m tests.suite_order PATH``.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TypeVar

DURATIONS_FILE = Path(__file__).with_name("module_durations.json")


class _Collected(Protocol):
    @property
    def nodeid(self) -> str: ...


_Item = TypeVar("_Item", bound=_Collected)


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def recorded_seconds(path: Path = DURATIONS_FILE) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # no figures: collection order, as before
    if not isinstance(data, dict):
        return {}
    return {
        str(module): float(seconds) for module, seconds in data.items() if isinstance(seconds, int | float)
    }


def longest_modules_first(items: Sequence[_Item], seconds: dict[str, float]) -> list[_Item]:
    # sorted() is stable: a module's tests, and modules of equal figures, keep their order.
    return sorted(items, key=lambda item: -seconds.get(module_of(item.nodeid), 0.0))


def seconds_by_module(junit_xml: Path) -> dict[str, float]:
    totals: defaultdict[str, float] = defaultdict(float)
    for case in ElementTree.parse(junit_xml).iter("testcase"):
        # classname is the dotted module path (with a class after it, for tests in a class).
        parts = (case.get("classname") or "").split(".")
        while parts and not parts[-1].startswith("test_"):
            parts.pop()
        if parts:
            totals["/".join(parts) + ".py"] += float(case.get("time") or 0.0)
    return {module: round(total, 1) for module, total in sorted(totals.items(), key=lambda kv: -kv[1])}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python3 -m tests.suite_order JUNIT_XML", file=sys.stderr)
        return 2
    figures = seconds_by_module(Path(argv[0]))
    DURATIONS_FILE.write_text(json.dumps(figures, indent=1) + "\n")
    print(f"{len(figures)} modules, {sum(figures.values()):.0f} s in all, written to {DURATIONS_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
