"""Ray clusters without token authentication are refused, and clients without the token are refused.

What is attacked: a client that reaches the cluster's ports but holds no token (on an open
cluster such a client ran a task as uid 0 that listed the engine's containers through the
Docker socket), and a driver or `proctor sandbox worker` pointed at a cluster that serves anyone.
Each cluster here is a head node alone (no engine, no sandbox worker): authentication is settled
before any worker is looked for.
"""

from __future__ import annotations

import concurrent.futures
import functools
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from proctor.sandbox.api import SandboxUnavailable
from proctor.sandbox.ray.auth import ALLOW_FLAG, probe_cluster_auth, require_token_auth
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
def clusters() -> Iterator[dict[bool, LocalCluster]]:
    """Both clusters of the module, by ``authenticated``: started at once and stopped at once
    (each `ray start` spends most of its time waiting on its own processes)."""
    started: dict[bool, LocalCluster] = {}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        starting = {auth: pool.submit(LocalCluster.start, {}, authenticated=auth) for auth in (True, False)}
        try:
            for auth, future in starting.items():
                started[auth] = future.result()
            yield started
        finally:
            for future in starting.values():
                # A start that failed has stopped its own cluster; one still starting is awaited.
                if future.exception() is None:
                    pool.submit(future.result().stop)


@pytest.fixture(scope="module")
def token_cluster(clusters: dict[bool, LocalCluster]) -> LocalCluster:
    return clusters[True]


@pytest.fixture(scope="module")
def open_cluster(clusters: dict[bool, LocalCluster]) -> LocalCluster:
    return clusters[False]


# A refused client's ray.init retries the GCS 20 times a second apart (NUM_REDIS_GET_RETRIES):
# ~22 s of the same refusal. Two attempts show it as well; the refusal itself (InvalidAuthToken
# from the GCS, not a timeout) is asserted on every refused client.
REFUSED_RETRIES = {"RAY_NUM_REDIS_GET_RETRIES": "2"}
REFUSAL = "InvalidAuthToken"


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


def at_once(*calls: Callable[[], Any]) -> list[concurrent.futures.Future[Any]]:
    """Every call started on its own thread (each waits on a child process); their futures."""
    pool = concurrent.futures.ThreadPoolExecutor(len(calls))
    try:
        return [pool.submit(call) for call in calls]
    finally:
        pool.shutdown(wait=True)


def test_a_client_without_the_token_cannot_run_a_task(token_cluster: LocalCluster, tmp_path) -> None:
    # No token at all, and a wrong token: neither runs anything.
    wrong = tmp_path / "wrong_token"
    wrong.write_text("0" * 64)
    wrong.chmod(0o600)
    refused_envs = [{**ray_env(None), **REFUSED_RETRIES}, {**ray_env(wrong), **REFUSED_RETRIES}]
    for env in refused_envs:
        env["HOME"] = str(tmp_path)  # no ~/.ray/auth_token to fall back on
    # The cluster's own clients, with the token, are served (at the same time as the others).
    *refused, served = at_once(
        *(functools.partial(intrude, token_cluster.address, env) for env in refused_envs),
        functools.partial(intrude, token_cluster.address, token_cluster.env()),
    )
    for future in refused:
        completed = future.result()
        assert completed.returncode != 0, completed.stdout
        assert "RAN" not in completed.stdout
        assert REFUSAL in completed.stderr, completed.stderr[-2000:]
    assert served.result().returncode == 0 and "RAN" in served.result().stdout, served.result().stderr[-2000:]


def test_the_probe_tells_an_authenticated_cluster_from_an_open_one(
    token_cluster: LocalCluster, open_cluster: LocalCluster
) -> None:
    token_probe, open_probe, control = at_once(
        functools.partial(probe_cluster_auth, token_cluster.address),
        functools.partial(probe_cluster_auth, open_cluster.address),
        # The control: an open cluster really does run an intruder's task.
        functools.partial(intrude, open_cluster.address, ray_env(None)),
    )
    assert token_probe.result().requires_token is True
    assert open_probe.result().requires_token is False
    completed = control.result()
    assert completed.returncode == 0 and "RAN" in completed.stdout, completed.stderr[-2000:]


def test_the_driver_refuses_an_open_cluster_in_one_line(open_cluster: LocalCluster) -> None:
    commands = (
        ("sandbox", "exec", "--backend", "ray", "--ray-address", open_cluster.address, "-"),
        ("sandbox", "worker", "--address", open_cluster.address),
    )
    # Four probes of the open cluster, each in a child process of its own: all at once.
    refused, allowed, *cli = at_once(
        functools.partial(require_token_auth, open_cluster.address, allow_unauthenticated=False),
        functools.partial(require_token_auth, open_cluster.address, allow_unauthenticated=True),
        *(functools.partial(open_cluster.proctor, *a, stdin="print(1)\n", timeout=120) for a in commands),
    )
    with pytest.raises(SandboxUnavailable, match="no token authentication"):
        refused.result()
    recorded = allowed.result()
    assert recorded["requires_token"] is False and recorded["allowed_unauthenticated"] is True
    for future in cli:
        completed = future.result()
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
