"""The third property: the same value gets the same verdict on a quiet machine and a busy one.

By construction: the verification side has no timer in its verdict path (the evaluated-form check
rebuilds every node without one; only the sandbox's own limit can end the step, and that makes any
value incorrect). So the proof does not race a clock: it runs each verdict once as it is, once
with every clock the verdict could read made to run 10,000 times fast (``signal.setitimer``'s
intervals shrunk, ``time.monotonic`` leaping), which is what a machine 10,000 times slower looks
like to a timer, and once with every core busy; the verdicts must be identical. Under the old
per-node timer (0.25 s) the first honest value below was refused as soon as the clock ran fast.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.frontiermath.verdicts import answer_value, compare_reply, credited, verify_reply

SIMPLIFY = "def verify(a):\n    return sympy.simplify(a - (REF)) == 0\n"
EQ = "def verify(a):\n    return bool(sympy.Eq(a, REF))\n"

# (answer()'s body, the reference, the idiom): honest values, each credited on a quiet machine.
HONEST = [
    ("return sympy.sqrt(2 * 10**700 + 1)", "sqrt(2 * 10**700 + 1)", EQ),
    ("return sympy.sin(1) + sympy.log(3) + sympy.sqrt(5)", "sin(1) + log(3) + sqrt(5)", SIMPLIFY),
    (
        "return sympy.root(-27, 3) + sympy.CRootOf(x**5 - x + 1, 0)",
        "3*(-1)**Rational(1, 3) + CRootOf(Symbol('x')**5 - Symbol('x') + 1, 0)",
        EQ,
    ),
    ("return sympy.factor(6*x + 12)", "6*Symbol('x') + 12", SIMPLIFY),
]


def verdicts_of(encoded: list[Any]) -> list[bool]:
    """Each value's verdict under its verify() idiom, then under the typed comparison."""
    cases = list(zip(encoded, HONEST, strict=True))
    by_verify = [credited(verify_reply(value, idiom.replace("REF", ref))) for value, (_, ref, idiom) in cases]
    return by_verify + [credited(compare_reply(value, ref)) for value, (_, ref, _) in cases]


def verdicts() -> list[bool]:
    return verdicts_of([answer_value(body) for body, _, _ in HONEST])


@contextmanager
def clocks_running_fast(monkeypatch: pytest.MonkeyPatch, factor: float = 1e4) -> Iterator[None]:
    """Every timer the verdict could set fires ``factor`` times sooner; monotonic time leaps."""
    real_setitimer = signal.setitimer
    leaps = itertools.count()
    real_monotonic = time.monotonic

    def fast_setitimer(which: int, seconds: float, interval: float = 0.0) -> Any:
        return real_setitimer(which, seconds / factor if seconds else 0.0, interval / factor)

    def leaping_monotonic() -> float:
        return real_monotonic() + 1000.0 * next(leaps)

    monkeypatch.setattr(signal, "setitimer", fast_setitimer)
    monkeypatch.setattr(time, "monotonic", leaping_monotonic)
    try:
        yield
    finally:
        monkeypatch.undo()


def _spin(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


@contextmanager
def every_core_busy(seconds: float) -> Iterator[None]:
    """Two busy processes per core for the duration (ended by their own pid, never by name)."""
    context = multiprocessing.get_context("fork")
    spinners = [
        context.Process(target=_spin, args=(time.time() + seconds,), daemon=True)
        for _ in range(2 * (os.cpu_count() or 1))
    ]
    for spinner in spinners:
        spinner.start()
    try:
        yield
    finally:
        for spinner in spinners:
            if spinner.pid is not None and spinner.is_alive():
                os.kill(spinner.pid, signal.SIGKILL)
            spinner.join()


def test_the_honest_values_are_credited_on_a_quiet_machine() -> None:
    assert verdicts() == [True] * (2 * len(HONEST))


def test_the_verdict_does_not_read_a_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    quiet = verdicts()
    # Only the verification side's clocks: answer()'s budget is a timer by design.
    encoded = [answer_value(body) for body, _, _ in HONEST]
    with clocks_running_fast(monkeypatch):
        fast = verdicts_of(encoded)
    assert fast == quiet


def test_the_verdict_is_the_same_with_every_core_busy() -> None:
    quiet = verdicts()
    with every_core_busy(seconds=60):
        busy = verdicts()
    assert busy == quiet
