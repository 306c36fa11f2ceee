"""The `proctor` console command."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import typer

# typer vendors click; its usage errors are only importable from here (typer is pinned to 0.29.x).
from typer._click.exceptions import NoArgsIsHelpError, NoSuchOption, UsageError

# Commands register when the root group resolves them (commands_registry.py), not here:
# importing them all would cost `proctor --version` about 2 s.
from proctor.agent.cli.app import app
from proctor.agent.cli.flag_hints import hint_for
from proctor.agent.errors import UserError

# The variable the shell's completion script sets (agent/cli/completion_cmd.py prints it).
COMPLETE_VAR = "_PROCTOR_COMPLETE"


def complete() -> NoReturn:
    """Answer the shell's request for completions (the script `proctor completion SHELL`
    prints sets ``COMPLETE_VAR``) with typer's completion classes, imported only then."""
    from typer._completion_classes import completion_init

    completion_init()
    try:
        app(prog_name="proctor", complete_var=COMPLETE_VAR)  # answers, then exits
    except SystemExit:
        raise
    except Exception:
        # Nothing to offer rather than a traceback in the middle of the user's command line
        # (a command whose module cannot be imported here, say).
        raise SystemExit(1) from None
    raise SystemExit(1)


def main() -> None:
    if os.environ.get(COMPLETE_VAR):
        complete()
    # standalone_mode=False lets usage mistakes print as one line instead of a boxed usage page.
    # The program name is fixed: usage lines and the completion variable say "proctor" however
    # the console script was started (python -m, a wrapper, a renamed link).
    try:
        result = app(standalone_mode=False, prog_name="proctor", complete_var=COMPLETE_VAR)
    except UserError as exc:
        from proctor.agent.run.progress import one_line

        # One line, never a terminal control: the message may quote an endpoint or a file.
        print(f"proctor: error: {one_line(str(exc))}", file=sys.stderr)
        raise SystemExit(2) from None
    except NoArgsIsHelpError as exc:
        print(exc.ctx.get_help() if exc.ctx is not None else "see 'proctor --help'")
        raise SystemExit(2) from None
    except UsageError as exc:
        command = exc.ctx.command_path if exc.ctx is not None else "proctor"
        option = exc.option_name if isinstance(exc, NoSuchOption) else None
        hint = hint_for(option) if isinstance(option, str) else ""
        # With a hint, click's spelling guesses ("--max-concurrency" for "--max-connections")
        # would point elsewhere than the flag that does the job.
        message = f"No such option: {option}{hint}" if hint else exc.format_message()
        print(f"proctor: error: {message} (see '{command} --help')", file=sys.stderr)
        raise SystemExit(2) from None
    except typer.TyperException as exc:
        print(f"proctor: error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except (KeyboardInterrupt, typer.Abort):
        print("proctor: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    if isinstance(result, int) and result != 0:
        raise SystemExit(result)
