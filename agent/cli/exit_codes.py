"""Every exit status `proctor` gives, in one table: `proctor --help` prints it (root_help.py),
docs/runs.md lists it (tests/cli/test_exit_codes.py keeps the two equal), and the commands exit
with these names. Typer-free: `proctor --help` answers before typer is imported."""

from __future__ import annotations

OK = 0
# A run the harness could not finish; `validate`: a reference failed; `sandbox audit`: a
# guarantee was found broken.
FAILED = 1
# Bad input: a flag, a config, a task or run file; one line names it, and nothing ran.
BAD_INPUT = 2
# The run finished, but its error outcomes crossed --fail-on-error (default: any): it is not done.
TOO_MANY_ERRORS = 3
# An endpoint refused for good (credentials, quota): the run stopped early (agent/run/guard.py).
STOPPED = 4
# `proctor sandbox exec` exits with the program's own status, or these, as timeout(1) and
# `docker run` do: a shell script that tests a limit reads them as it would theirs.
TIMED_OUT = 124
SANDBOX_FAILED = 125
OUT_OF_MEMORY = 137
# Ctrl-C: what a shell reports for SIGINT (128 + 2).
INTERRUPTED = 130

# (status, meaning) in the order `proctor --help` and docs/runs.md show them.
EXIT_TABLE: tuple[tuple[str, str], ...] = (
    (str(OK), "done: the run finished (within --fail-on-error), the check passed"),
    (
        str(FAILED),
        "the run failed in the harness; validate: a reference failed; sandbox audit: a guarantee is broken",
    ),
    (
        str(BAD_INPUT),
        "bad input (a flag, config, task or run file, an EED expression): one line names it",
    ),
    (str(TOO_MANY_ERRORS), "run: finished, but error samples crossed --fail-on-error; --resume reruns them"),
    (str(STOPPED), "run, rescore: an endpoint refused for good (key, quota); samples kept, --resume"),
    (
        f"{TIMED_OUT} {OUT_OF_MEMORY} {SANDBOX_FAILED}",
        "sandbox exec: the program timed out, ran out of memory, the sandbox failed; otherwise "
        "the program's own status",
    ),
    (str(INTERRUPTED), "interrupted (Ctrl-C): finished samples kept; --resume continues"),
)
