"""Labels carried by every sandbox container, so a crashed run's leftovers can be found."""

from __future__ import annotations

import os
import socket
import uuid

SANDBOX = "proctor.sandbox"
OWNER_PID = "proctor.owner_pid"
OWNER_HOST = "proctor.owner_host"
RUN_ID = "proctor.run_id"
ROLE = "proctor.role"
LABEL_FILTER = f"{SANDBOX}=1"


def new_run_id() -> str:
    return uuid.uuid4().hex[:16]


def container_labels(run_id: str, role: str) -> dict[str, str]:
    """``role`` is ``pool`` for warm containers, ``call`` for per-call ones and ``template`` for
    the one runc-direct takes the engine's spec from (it never runs a program)."""
    return {
        SANDBOX: "1",
        OWNER_PID: str(os.getpid()),
        OWNER_HOST: socket.gethostname(),
        RUN_ID: run_id,
        ROLE: role,
    }
