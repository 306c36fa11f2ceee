"""`proctor image build`: build (or find) the pinned sandbox image."""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated

import typer

from proctor.agent.cli.app import image_app
from proctor.agent.errors import UserError
from proctor.sandbox import SandboxError, SandboxUnavailable
from proctor.sandbox.docker.image import DEFAULT_BASE_IMAGE, build_image


@image_app.command("build")
def build(
    base: Annotated[
        str | None,
        typer.Option(
            "--base",
            help=(
                f"Base image (default {DEFAULT_BASE_IMAGE}, bootstrapped with debootstrap when absent). "
                "Another base is used if present, pulled if possible, else the bootstrapped one replaces it."
            ),
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as one JSON object.")] = False,
) -> None:
    """Build the FrontierMath sandbox image offline; a no-op when its input-hash tag exists."""

    started = time.monotonic()

    def log(line: str) -> None:
        # Progress goes to stderr so that --json leaves stdout as one parseable object;
        # the elapsed seconds show which step of a long build takes the time.
        print(f"[{time.monotonic() - started:5.0f}s] {line}", file=sys.stderr, flush=True)

    try:
        info = build_image(base, log=log)
    except SandboxUnavailable as exc:
        # The reason carries its own fix (which socket to start, or root to start dockerd).
        raise UserError(str(exc)) from None
    except SandboxError as exc:
        raise UserError(f"image build failed: {exc}") from None
    if as_json:
        print(json.dumps(info.to_dict(), sort_keys=True))
        return
    state = f"built in {info.build_seconds:.0f} s" if info.built else "already present"
    print(f"{info.tag} {info.image_id} ({state}; base {info.base or 'unknown'})")
