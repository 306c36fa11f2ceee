"""Whether a Ray cluster lets in a client that holds no token, asked of the cluster itself.

A Ray cluster without token authentication runs code for anyone who can reach its ports: on
the project's own test cluster, a client with no credential listed the engine's containers
through the Docker socket as uid 0. So the ray backend and `proctor sandbox worker` use a
cluster only when it refuses such a client, unless the user says otherwise
(``--ray-allow-unauthenticated``, recorded in run.json).

The question is put to the cluster, not to this process's settings: the driver's own
``RAY_AUTH_MODE`` says what the driver will present, not what the cluster demands. The probe
is a child process with ``RAY_AUTH_MODE=disabled`` and an empty home (no token file) that asks
the GCS for its node table: a cluster with token authentication refuses it (Unauthenticated),
one without answers. About 4 s, once per run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from proctor.sandbox.api import SandboxUnavailable

ALLOW_FLAG = "--ray-allow-unauthenticated"
TOKEN_HINT = (
    "start every node with RAY_AUTH_MODE=token and the cluster's token "
    "(RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token; `ray get-auth-token --generate` makes one)"
)


@dataclass(frozen=True)
class ClusterAuth:
    """What the GCS said to a client without a token."""

    address: str
    requires_token: bool
    detail: str

    def describe(self) -> dict[str, object]:
        return {"address": self.address, "requires_token": self.requires_token, "probe": self.detail}


# Run in a child process: Ray reads its authentication mode once per process, so only a process
# of its own can be a client that truly holds no token, whatever this one presents.
_PROBE = r"""
import json, sys
from ray._raylet import GcsClient
try:
    nodes = GcsClient(address=sys.argv[1]).get_all_node_info(timeout=10)
    print(json.dumps({"served": True, "nodes": len(nodes)}))
except Exception as exc:
    print(json.dumps({"served": False, "error": type(exc).__name__, "message": str(exc)[:500]}))
"""
_REFUSAL_MARKERS = ("unauthenticated", "invalidauthtoken", "authentication token")


def probe_cluster_auth(address: str, timeout_s: float = 90.0) -> ClusterAuth:
    """Ask the GCS at ``host:port`` for its node table as a client with no token at all."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH_") and k != "RAY_ADDRESS"}
    env["RAY_AUTH_MODE"] = "disabled"
    with tempfile.TemporaryDirectory(prefix="proctor-ray-probe-") as home:
        env["HOME"] = home  # no ~/.ray/auth_token to fall back on
        try:
            completed = subprocess.run(
                [sys.executable, "-I", "-c", _PROBE, address],
                capture_output=True,
                text=True,
                env=env,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SandboxUnavailable(
                f"cannot ask the Ray cluster at {address} whether it requires a token: "
                f"no answer within {timeout_s:.0f} s"
            ) from None
    answer = _last_json_line(completed.stdout)
    if answer is None:
        tail = (completed.stderr.strip().splitlines() or ["no output"])[-1][:200]
        raise SandboxUnavailable(
            f"cannot ask the Ray cluster at {address} whether it requires a token: {tail}"
        )
    if answer.get("served"):
        return ClusterAuth(address, False, "a client without a token was served")
    said = f"{answer.get('error', '')} {answer.get('message', '')}"
    if any(marker in said.casefold() for marker in _REFUSAL_MARKERS):
        return ClusterAuth(address, True, "a client without a token was refused")
    message = (str(answer.get("message") or "").splitlines() or [""])[0][:200]
    raise SandboxUnavailable(
        f"cannot ask the Ray cluster at {address} whether it requires a token: "
        f"{str(answer.get('error'))[:80]}: {message}"
    )


def _last_json_line(text: str) -> dict[str, object] | None:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                parsed = json.loads(line)
            except ValueError:
                continue
            if isinstance(parsed, dict):
                return parsed
    return None


def gcs_address(address: str | None) -> str | None:
    """The ``host:port`` to probe, or None for forms Ray resolves itself (``auto``, ``ray://``)."""
    chosen = address or os.environ.get("RAY_ADDRESS") or ""
    if not chosen or chosen == "auto" or "://" in chosen:
        return None
    return chosen


def require_token_auth(address: str | None, allow_unauthenticated: bool) -> dict[str, object]:
    """What run.json records about the cluster's authentication; refuses an open cluster.

    Raises SandboxUnavailable (one line) when the cluster serves a client without a token and
    the user did not pass ``--ray-allow-unauthenticated``, or when the address cannot be probed
    (``auto`` or ``ray://``) and the user did not allow it either.
    """
    target = gcs_address(address)
    if target is None:
        if allow_unauthenticated:
            return {"requires_token": None, "allowed_unauthenticated": True, "probe": "not probed"}
        raise SandboxUnavailable(
            f"the Ray address {address or 'auto'!r} cannot be checked for token authentication: "
            f"give the head's host:port, or pass {ALLOW_FLAG}"
        )
    auth = probe_cluster_auth(target)
    if not auth.requires_token and not allow_unauthenticated:
        raise SandboxUnavailable(
            f"the Ray cluster at {target} runs code for anyone who reaches it (no token authentication): "
            f"{TOKEN_HINT}, or pass {ALLOW_FLAG} to use it anyway"
        )
    return {**auth.describe(), "allowed_unauthenticated": allow_unauthenticated and not auth.requires_token}
