"""The `proctor` console command."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import NoReturn

from proctor.agent.cli.exit_codes import BAD_INPUT, FAILED, INTERRUPTED
from proctor.agent.errors import UserError

# Nothing else at module level: `proctor --version` and `--help` answer before typer is
# imported (root_help.py). Commands register when the root group resolves them
# (commands_registry.py): importing them all would cost `proctor --version` about 2 s.

# The variable the shell's completion script sets (agent/cli/completion_cmd.py prints it).
COMPLETE_VAR = "_PROCTOR_COMPLETE"


def complete() -> NoReturn:
    """Answer the shell's request for completions (the script `proctor completion SHELL`
    prints sets ``COMPLETE_VAR``) from the completion table, without typer or any command
    (fast_complete.py). Anything else the variable may ask (typer's ``source_bash``), or a
    table that cannot be read, goes to typer's completion classes."""
    instruction = os.environ[COMPLETE_VAR]
    if instruction.startswith("complete_"):
        from proctor.agent.cli.fast_complete import main as answer

        # An installation without the table (OSError) or with a damaged one (ValueError):
        # typer answers, slowly.
        with contextlib.suppress(OSError, ValueError):
            answer(instruction)
    complete_with_typer()


def complete_with_typer() -> NoReturn:
    """Typer's answer to the same request, its classes imported only then."""
    from typer._completion_classes import completion_init

    from proctor.agent.cli.app import app

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


def answer_without_typer(args: list[str]) -> None:
    """`proctor --version` and `proctor --help`, answered from root_help.py's texts and the
    command table alone: typer's import is a third of their time. Returns for anything else."""
    if args == ["--version"]:
        from proctor.agent.cli.root_help import proctor_version

        print(f"proctor {proctor_version()}")
        raise SystemExit(0)
    if args == ["--help"]:
        from proctor.agent.cli.root_help import print_page, static_page

        print_page(static_page())
        raise SystemExit(0)


def main() -> None:
    if os.environ.get(COMPLETE_VAR):
        complete()
    answer_without_typer(sys.argv[1:])
    import typer

    # typer vendors click; its usage errors are only importable from here (typer is pinned to 0.29.x).
    from typer._click.exceptions import NoArgsIsHelpError, NoSuchOption, UsageError

    from proctor.agent.cli.app import app
    from proctor.agent.cli.flag_hints import hint_for

    # standalone_mode=False lets usage mistakes print as one line instead of a boxed usage page.
    # The program name is fixed: usage lines and the completion variable say "proctor" however
    # the console script was started (python -m, a wrapper, a renamed link).
    try:
        result = app(standalone_mode=False, prog_name="proctor", complete_var=COMPLETE_VAR)
    except UserError as exc:
        from proctor.agent.text.terminal import one_line

        # One line per problem, never a terminal control: the message may quote an endpoint or
        # a file.
        for line in getattr(exc, "lines", (str(exc),)):
            print(f"proctor: error: {one_line(line)}", file=sys.stderr)
        raise SystemExit(BAD_INPUT) from None
    except NoArgsIsHelpError as exc:
        # Building the error drew the page already (a rich page prints as it is made, and
        # asking again printed it twice); a plain page is the error's message.
        if exc.message.strip():
            print(exc.message)
        raise SystemExit(BAD_INPUT) from None
    except UsageError as exc:
        command = exc.ctx.command_path if exc.ctx is not None else "proctor"
        option = exc.option_name if isinstance(exc, NoSuchOption) else None
        hint = hint_for(option) if isinstance(option, str) else ""
        # With a hint, click's spelling guesses ("--max-concurrency" for "--max-connections")
        # would point elsewhere than the flag that does the job.
        message = f"No such option: {option}{hint}" if hint else exc.format_message()
        print(f"proctor: error: {message} (see '{command} --help')", file=sys.stderr)
        raise SystemExit(BAD_INPUT) from None
    except typer.TyperException as exc:
        print(f"proctor: error: {exc}", file=sys.stderr)
        raise SystemExit(FAILED) from None
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except (KeyboardInterrupt, typer.Abort):
        print("proctor: interrupted", file=sys.stderr)
        raise SystemExit(INTERRUPTED) from None
    if isinstance(result, int) and result != 0:
        raise SystemExit(result)
