"""EED worker process: a long-lived interpreter that scores pairs sent over its stdin.

Protocol: newline-delimited JSON both ways. The parent sends
``{"id", "reference", "answer", "mode", "skip"}``; the worker answers with
``{"kind": "accepted", "id"}`` as soon as it has read the request,
``{"kind": "step", "id", "step"}`` before every sympy step and one
``{"kind": "result", "id", "result"}`` at the end. ``{"kind": "ready"}`` is sent once after the
imports are warm. The parent enforces time limits by killing this process, so nothing here
tries to time itself out. Run as ``python -m proctor.agent.scoring.eed_worker``.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from typing import IO, Any

MEMORY_LIMIT_ENV = "PROCTOR_EED_WORKER_MEMORY_MB"


def _die_with_parent() -> None:
    """Exit as soon as the parent is gone, even in the middle of a long simplify.

    A watchdog thread rather than prctl(PR_SET_PDEATHSIG): that signal fires when the *thread*
    that spawned us exits, and callers spawn workers from short-lived executor threads.
    """
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="eed-parent-watchdog", daemon=True).start()


def _limit_memory() -> None:
    megabytes = os.environ.get(MEMORY_LIMIT_ENV)
    if megabytes:
        limit = int(megabytes) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _send(stream: IO[bytes], message: dict[str, Any]) -> None:
    stream.write(json.dumps(message).encode() + b"\n")
    stream.flush()


def _warm_up() -> None:
    """Import and exercise the converter and simplify once, so the first real pair is not slow."""
    from proctor.agent.scoring.eed_pipeline import run_pipeline

    run_pipeline("x+1", "x+2", "strict")


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    from proctor.agent.scoring.eed_pipeline import run_pipeline

    _send(replies, {"kind": "ready", "pid": os.getpid()})
    for line in requests:
        request = json.loads(line)
        request_id = request["id"]
        # Tells the parent the request reached a live worker: a worker that dies before this line
        # (killed while idle, say) never saw the pair, so the parent re-sends it to a fresh one.
        _send(replies, {"kind": "accepted", "id": request_id})

        def report_step(step: str, request_id: Any = request_id) -> None:
            _send(replies, {"kind": "step", "id": request_id, "step": step})

        try:
            result = run_pipeline(
                request["reference"],
                request["answer"],
                request["mode"],
                skip=request.get("skip", ()),
                on_step=report_step,
            )
        except Exception as exc:  # a bug in the pipeline must not kill the worker silently
            result = {
                "status": "zero_gate:internal_error",
                "score": 0.0,
                "detail": f"{type(exc).__name__}: {exc}",
            }
        _send(replies, {"kind": "result", "id": request_id, "result": result})


def main() -> None:
    _die_with_parent()
    _limit_memory()
    # The protocol gets a private copy of stdout; file descriptor 1 then points at stderr, so
    # nothing a library prints, from Python or from C, can corrupt the message stream.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _warm_up()
    serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    main()
