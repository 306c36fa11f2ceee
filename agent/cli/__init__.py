"""The `proctor` console command."""

from __future__ import annotations

import sys

from agent.cli import commands_registry  # noqa: F401  (registers every command)
from agent.cli.app import app
from agent.errors import UserError


def main() -> None:
    try:
        app()
    except UserError as exc:
        print(f"proctor: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        print("proctor: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
