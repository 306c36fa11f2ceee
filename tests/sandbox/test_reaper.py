"""The supervisors' wait (sandbox/reaper.py), run on the host as its own process: a program that
makes its supervisor its tracer behaves exactly as it would untraced, for any mix of handled
and fatal signals, and the supervisor reports only the program's own end.

No engine needed: the wait is source text, run here by a tiny supervisor that forks the program
the way the docker launcher and the local init do.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proctor.sandbox.reaper import DEFAULT_SIGNALS_SOURCE, WAIT_SOURCE

SUPERVISOR = (
    "import ctypes, errno, os, signal, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    + WAIT_SOURCE
    + DEFAULT_SIGNALS_SOURCE
    + "argv = sys.argv[1:]\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    default_signals()\n"
    "    os.execv(argv[0], argv)\n"
    "print('result', wait(pid), flush=True)\n"
)
HANDLED = [signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGALRM, signal.SIGWINCH]


def program(handled: list[int], sent: list[int], traceme_at: int | None, ending: int | str) -> str:
    lines = [
        "import ctypes, os, resource, signal, sys",
        "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))",
        "libc = ctypes.CDLL(None, use_errno=True)",
    ]
    lines += [f"signal.signal({sig}, lambda s, f: print('got', s, flush=True))" for sig in handled]
    for index, sig in enumerate(sent):
        if index == traceme_at:
            lines.append("assert libc.ptrace(0, 0, None, None) == 0")
        lines.append(f"os.kill(os.getpid(), {sig})")
    if traceme_at is not None and traceme_at >= len(sent):
        lines.append("assert libc.ptrace(0, 0, None, None) == 0")
    lines.append("print('end', flush=True)")
    lines.append(f"os.kill(os.getpid(), {ending[4:]})" if isinstance(ending, str) else f"sys.exit({ending})")
    return "\n".join(lines) + "\n"


def supervise(code: str) -> tuple[str, str]:
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", SUPERVISOR, sys.executable, "-I", "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0 and done.stderr == "", done
    return done.stdout, done.stderr


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    handled=st.lists(st.sampled_from(HANDLED), unique=True),
    sent=st.lists(st.sampled_from([*HANDLED, signal.SIGCHLD, signal.SIGURG]), max_size=4),
    traceme_at=st.integers(0, 4),
    ending=st.one_of(st.integers(0, 9), st.sampled_from(["sig:15", "sig:1", "sig:10"])),
)
def test_a_traced_program_ends_exactly_as_it_would_untraced(
    handled: list[int], sent: list[int], traceme_at: int, ending: int | str
) -> None:
    untraced, _ = supervise(program(handled, sent, None, ending))
    traced, _ = supervise(program(handled, sent, traceme_at, ending))
    assert traced == untraced
    # And that end is the program's own: its exit code, or 128 + the signal it died of.
    last = untraced.splitlines()[-1]
    if "end" in untraced.splitlines():
        expected = ending if isinstance(ending, int) else 128 + int(ending[4:])
        if isinstance(ending, str) and int(ending[4:]) in handled:
            expected = 0  # a handled "fatal" signal was handled; the program then fell off the end
        assert last == f"result {expected}"
    else:
        # An unhandled signal among those sent killed it first.
        killer = next(
            sig
            for sig in sent
            if sig not in handled and sig not in (signal.SIGCHLD, signal.SIGURG, signal.SIGWINCH)
        )
        assert last == f"result {128 + killer}"
