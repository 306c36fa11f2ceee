"""What a re-score changed: each task's samples whose outcome moved, from what to what.

The re-score's own summary gives the new numbers; this says which answers they came from, so
a user who fixed a task's verify() sees at once that its three samples went from verify_error
to correct, and nothing else moved.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from proctor.agent.results.records import SampleRecord
from proctor.agent.results.store import SampleKey, sample_key

# Tasks listed in the one summary line; the rest are counted.
MAX_LISTED_TASKS = 20


def outcome_moves(
    before: Iterable[SampleRecord], after: Iterable[SampleRecord]
) -> tuple[int, dict[str, Counter[tuple[str, str]]]]:
    """(samples compared, task -> Counter of (old outcome, new outcome)) for moved samples only.

    A later record of a sample supersedes an earlier one (a resumed re-score appends).
    """
    old: dict[SampleKey, SampleRecord] = {sample_key(record): record for record in before}
    new: dict[SampleKey, SampleRecord] = {sample_key(record): record for record in after}
    moves: dict[str, Counter[tuple[str, str]]] = {}
    compared = 0
    for key, record in new.items():
        previous = old.get(key)
        if previous is None:
            continue
        compared += 1
        if previous.outcome != record.outcome:
            moves.setdefault(record.task_id, Counter())[(previous.outcome.value, record.outcome.value)] += 1
    return compared, moves


def describe_moves(compared: int, moves: dict[str, Counter[tuple[str, str]]]) -> str:
    """One line: how many samples moved, and per task from which outcome to which."""
    moved = sum(sum(counter.values()) for counter in moves.values())
    if not moved:
        return f"outcomes moved: none of {compared} sample(s)"
    parts = []
    for task in sorted(moves)[:MAX_LISTED_TASKS]:
        changes = ", ".join(f"{a} → {b} {n}" for (a, b), n in sorted(moves[task].items()))
        parts.append(f"{task}: {changes}")
    more = f"; and {len(moves) - MAX_LISTED_TASKS} more task(s)" if len(moves) > MAX_LISTED_TASKS else ""
    return f"outcomes moved: {moved} of {compared} sample(s), per task: {'; '.join(parts)}{more}"
