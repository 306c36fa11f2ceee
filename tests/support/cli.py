"""`proctor ARGS` run inside the test's own process: main() itself, its streams captured.

A `proctor` subprocess costs an interpreter start and Proctor's imports (0.4 s idle, several
seconds on a loaded machine); a test of a refused flag or a bad file needs neither. This runs
the same ``main()`` the console script runs, with ``sys.argv``, stdin, stdout, stderr and the
environment swapped by click's own test isolation, and answers as ``subprocess.run`` would: the
exit code main() raised, and what it printed. An exception main() did not turn into an exit
code propagates, so a test that expected one clean line fails on it (a real process would have
printed the traceback). Tests whose subject is the process itself (the console script, lazy
imports, signals, a traceback never reaching the terminal) keep a real subprocess:
tests/test_cli_errors.py is the one that proves the one-line error from a real process.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from click.testing import CliRunner


def proctor_in_process(
    *args: str,
    stdin: str | None = None,
    env: Mapping[str, str | None] | None = None,
    cwd: str | Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``proctor *args`` through ``proctor.agent.cli.main`` in this process."""
    from proctor.agent.cli import main

    argv = ["proctor", *args]
    saved_argv, saved_cwd = sys.argv, os.getcwd()
    with CliRunner().isolation(input=stdin, env=env) as (stdout, stderr, _):
        sys.argv = argv
        try:
            if cwd is not None:
                os.chdir(cwd)
            main()
            code = 0
        except SystemExit as exc:
            code = _exit_status(exc.code)
        finally:
            sys.argv = saved_argv
            os.chdir(saved_cwd)
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(ValueError):
                    stream.flush()
        out = stdout.getvalue().decode("utf-8", "replace")
        err = stderr.getvalue().decode("utf-8", "replace")
    return subprocess.CompletedProcess(argv, code, out, err)


def _exit_status(code: object) -> int:
    """What the interpreter makes of ``SystemExit(code)``: None is 0, an int is itself, anything
    else is printed to stderr and exits 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
