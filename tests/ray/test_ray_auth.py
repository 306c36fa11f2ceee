"""Ray clusters without token authentication are refused, and clients without the token are refused.

What is attacked: a client that reaches the cluster's ports but holds no token (on an open
cluster such a client ran a task as uid 0 that listed the engine's containers through the
Docker socket), and a driver or `proctor sandbox worker` pointed at a cluster that serves anyone.
Each cluster here is a head node alone (no engine, no sandbox worker): authentication is settled
before any worker is looked for.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from proctor.sandbox.api import SandboxUnavailable
from proctor.sandbox.ray_auth import ALLOW_FLAG, probe_cluster_auth, require_token_auth
from tests.ray.cluster import REPO, LocalCluster, ray_env

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray-auth")]

pytest.importorskip("ray")

# A task that, on an open cluster, runs as the node's user: what an intruder would send.
INTRUDER = (
    "import ray, sys\n"
    "ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False)\n"
    "print('RAN', ray.get(ray.remote(lambda: __import__('os').getuid()).remote(), timeout=60))\n"
)


@pytest.fixture(scope="module")
def token_cluster() -> Iterator[LocalCluster]:
    cluster = LocalCluster.start({}, authenticated=True)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def open_cluster() -> Iterator[LocalCluster]:
    cluster = LocalCluster.start({}, authenticated=False)
    try:
        yield cluster
    finally:
        cluster.stop()


def intrude(address: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", INTRUDER, address],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=REPO,
        check=False,
    )


def test_a_client_without_the_token_cannot_run_a_task(token_cluster: LocalCluster, tmp_path) -> None:
    # No token at all, and a wrong token: neither runs anything.
    wrong = tmp_path / "wrong_token"
    wrong.write_text("0" * 64)
    wrong.chmod(0o600)
    for env in (ray_env(None), ray_env(wrong)):
        env["HOME"] = str(tmp_path)  # no ~/.ray/auth_token to fall back on
        completed = intrude(token_cluster.address, env)
        assert completed.returncode != 0, completed.stdout
        assert "RAN" not in completed.stdout
    # The cluster's own clients, with the token, are served.
    served = intrude(token_cluster.address, token_cluster.env())
    assert served.returncode == 0 and "RAN" in served.stdout, served.stderr[-2000:]


def test_the_probe_tells_an_authenticated_cluster_from_an_open_one(
    token_cluster: LocalCluster, open_cluster: LocalCluster
) -> None:
    assert probe_cluster_auth(token_cluster.address).requires_token is True
    assert probe_cluster_auth(open_cluster.address).requires_token is False
    # The control: an open cluster really does run an intruder's task.
    completed = intrude(open_cluster.address, ray_env(None))
    assert completed.returncode == 0 and "RAN" in completed.stdout, completed.stderr[-2000:]


def test_the_driver_refuses_an_open_cluster_in_one_line(open_cluster: LocalCluster) -> None:
    with pytest.raises(SandboxUnavailable, match="no token authentication"):
        require_token_auth(open_cluster.address, allow_unauthenticated=False)
    recorded = require_token_auth(open_cluster.address, allow_unauthenticated=True)
    assert recorded["requires_token"] is False and recorded["allowed_unauthenticated"] is True
    for args in (
        ("sandbox", "exec", "--backend", "ray", "--ray-address", open_cluster.address, "-"),
        ("sandbox", "worker", "--address", open_cluster.address),
    ):
        completed = open_cluster.proctor(*args, stdin="print(1)\n", timeout=120)
        assert completed.returncode == 2, completed.stdout + completed.stderr
        lines = completed.stderr.strip().splitlines()
        assert len(lines) == 1 and "no token authentication" in lines[0] and ALLOW_FLAG in lines[0], lines


def test_the_flag_lets_the_driver_past_authentication_and_nothing_else(open_cluster: LocalCluster) -> None:
    args = ("sandbox", "exec", "--backend", "ray", "--ray-address", open_cluster.address, ALLOW_FLAG, "-")
    completed = open_cluster.proctor(*args, stdin="print(1)\n")
    # Past the check, the head-only cluster has no sandbox worker: that is the refusal now.
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert "no token authentication" not in completed.stderr
    assert "no ray sandbox worker" in completed.stderr


def test_an_address_that_cannot_be_probed_needs_the_flag() -> None:
    with pytest.raises(SandboxUnavailable, match=ALLOW_FLAG):
        require_token_auth("ray://127.0.0.2:10001", allow_unauthenticated=False)
    assert require_token_auth("auto", allow_unauthenticated=True)["probe"] == "not probed"
