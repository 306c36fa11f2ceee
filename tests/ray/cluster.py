"""A real local Ray cluster for the ray backend's tests: a head and two worker nodes on this machine.

Each node is its own ``ray start`` with its own temp dir, ports and resources. All of it binds
127.0.0.2 (Ray replaces 127.0.0.1 with the machine's eth0 address; it leaves 127.0.0.2 alone),
so no traffic leaves loopback. Every process of the cluster, and every client the tests start,
runs with Ray's token authentication (``RAY_AUTH_MODE=token``, a fresh token per cluster in a
0600 file): a client without it is refused (tests/ray/test_ray_auth.py). The head advertises
no ``proctor_sandbox``: sandbox calls run only on the two worker nodes, each of which talks to
its own Docker engine (.ci/setup-ray.sh), so a call's node is visible in which engine made its
container.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker

REPO = Path(__file__).resolve().parents[2]
NODE_IP = "127.0.0.2"
ENGINE_SOCKETS = {name: f"unix:///run/proctor-ray/{name}/docker.sock" for name in ("node1", "node2")}
# Ray notices a dead node in about 1.5 s instead of ~38 s (docs/scale.md explains the values).
HEALTH_CHECKS = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}
SANDBOX_CAPACITY = 2
# Seconds a stopping cluster has to exit on SIGTERM before SIGKILL (LocalCluster.stop says why so short).
STOP_GRACE_S = 2.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((NODE_IP, 0))
        return int(probe.getsockname()[1])


def ray_env(token_path: Path | None = None) -> dict[str, str]:
    """What every ray process (and so every worker actor) runs with: this tree's code first, and
    the cluster's token when it has one (None: no authentication at all, as an open cluster)."""
    env = {
        **os.environ,
        **HEALTH_CHECKS,
        "RAY_USAGE_STATS_ENABLED": "0",
        # Ray starts workers at nice 15; a sandbox worker at nice 15 waits behind every busy
        # process for its docker I/O (+170 ms per call measured here under load).
        "RAY_worker_niceness": "0",
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
    }
    env.pop("RAY_ADDRESS", None)
    env.pop("DOCKER_HOST", None)
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(name, None)
    if token_path is None:
        env["RAY_AUTH_MODE"] = "disabled"
    else:
        env["RAY_AUTH_MODE"] = "token"
        env["RAY_AUTH_TOKEN_PATH"] = str(token_path)
    return env


def engine(name: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=ENGINE_SOCKETS[name], timeout=60)


def engines_available() -> str | None:
    """None when both test engines answer with the image; otherwise why not."""
    from proctor.sandbox.docker.image import image_tag

    if shutil.which("ray") is None:
        return "ray is not installed (pip install 'proctor[ray]')"
    for name in ENGINE_SOCKETS:
        try:
            client = engine(name)
            client.images.get(image_tag())
        except Exception as exc:
            return f"test engine {name} is not ready ({type(exc).__name__}); run .ci/setup-ray.sh"
    return None


@dataclass
class Node:
    name: str
    temp_dir: Path
    node_id: str = ""


@dataclass
class LocalCluster:
    root: Path
    address: str = ""
    nodes: dict[str, Node] = field(default_factory=dict)
    engines: dict[str, str | None] = field(default_factory=lambda: dict(ENGINE_SOCKETS))
    token_path: Path | None = None

    @classmethod
    def start(
        cls, engines: dict[str, str | None] | None = None, *, authenticated: bool = True
    ) -> LocalCluster:
        """Head plus one worker node per entry of ``engines`` (name -> DOCKER_HOST; None: default).

        ``authenticated=False`` starts the open cluster Ray gives by default, for the tests that
        show Proctor refusing it."""
        root = Path(tempfile.mkdtemp(prefix="pr-ray-", dir="/tmp"))
        cluster = cls(root, engines=dict(engines if engines is not None else ENGINE_SOCKETS))
        if authenticated:
            cluster.token_path = root / "auth_token"
            fd = os.open(cluster.token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as token_file:
                token_file.write(secrets.token_hex(32))
        try:
            cluster._start_head()
            cluster._start_worker_nodes()
            cluster._find_node_ids()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _ray_start(self, node: Node, *args: str) -> subprocess.Popen[str]:
        node.temp_dir.mkdir(parents=True)
        self.nodes[node.name] = node
        return subprocess.Popen(
            [
                "ray",
                "start",
                f"--node-ip-address={NODE_IP}",
                f"--temp-dir={node.temp_dir}",
                "--disable-usage-stats",
                f"--dashboard-agent-listen-port={free_port()}",
                f"--metrics-export-port={free_port()}",
                f"--runtime-env-agent-port={free_port()}",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.env(),
        )

    @staticmethod
    def _wait_started(name: str, process: subprocess.Popen[str]) -> None:
        output, _ = process.communicate(timeout=120)
        if process.returncode != 0:
            raise RuntimeError(f"ray start {name} failed: {output[-3000:]}")

    def _start_head(self) -> None:
        port = free_port()
        head = self._ray_start(
            Node("head", self.root / "head"),
            "--head",
            f"--port={port}",
            "--include-dashboard=false",
            "--num-cpus=1",
            f"--resources={json.dumps({'proctor_test_head': 1})}",
        )
        self._wait_started("head", head)
        self.address = f"{NODE_IP}:{port}"

    def _start_worker_nodes(self) -> None:
        # Both at once: each `ray start` spends most of its time waiting for its processes.
        started = {}
        for name in self.engines:
            resources = {"proctor_sandbox": SANDBOX_CAPACITY, f"proctor_test_{name}": 1}
            started[name] = self._ray_start(
                Node(name, self.root / name),
                f"--address={self.address}",
                "--num-cpus=1",
                f"--resources={json.dumps(resources)}",
            )
        for name, process in started.items():
            self._wait_started(name, process)

    def _find_node_ids(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            listed = self.run_python(
                "import json, ray\n"
                f"ray.init(address={self.address!r}, logging_level='ERROR', log_to_driver=False)\n"
                "print(json.dumps([[n['NodeID'], n['Resources']] for n in ray.nodes() if n['Alive']]))\n"
            )
            by_marker = {}
            for node_id, resources in json.loads(listed.strip().splitlines()[-1]):
                for name in self.nodes:
                    if f"proctor_test_{name}" in resources:
                        by_marker[name] = node_id
            if len(by_marker) == len(self.nodes):
                for name, node_id in by_marker.items():
                    self.nodes[name].node_id = node_id
                return
            time.sleep(1)
        raise RuntimeError("the cluster's nodes did not all register within 60 s")

    def env(self) -> dict[str, str]:
        return ray_env(self.token_path)

    def run_python(self, code: str, timeout: float = 120) -> str:
        completed = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=timeout,
            cwd=REPO,
        )
        if completed.returncode != 0:
            raise RuntimeError(completed.stderr[-3000:])
        return completed.stdout

    def proctor(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 180, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`proctor ...` from this tree, as a separate process (its own Ray driver)."""
        return subprocess.run(
            [sys.executable, "-c", "from proctor.agent.cli import main; main()", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env={**self.env(), **(env or {})},
            timeout=timeout,
            cwd=REPO,
            check=False,
        )

    def proctor_background(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", "from proctor.agent.cli import main; main()", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**self.env(), **(env or {})},
            cwd=REPO,
        )

    def start_sandbox_workers(self) -> None:
        """`proctor sandbox worker` for every worker node, all at once."""
        with concurrent.futures.ThreadPoolExecutor(len(self.engines)) as pool:
            done = list(pool.map(self.start_sandbox_worker, self.engines))
        for name, completed in zip(self.engines, done, strict=True):
            if completed.returncode != 0:
                raise RuntimeError(f"sandbox worker {name}: {completed.stdout}{completed.stderr}")

    def start_sandbox_worker(self, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
        docker_host = self.engines[name]
        host_args = ["--docker-host", docker_host] if docker_host else []
        args = ["--address", self.address, "--node-id", self.nodes[name].node_id, *host_args]
        return self.proctor("sandbox", "worker", *args, *extra)

    def raylet_pid(self, name: str) -> int:
        marker = str(self.nodes[name].temp_dir)
        for pid in ray_processes():
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if cmdline and cmdline[0].endswith(b"/raylet") and marker.encode() in b" ".join(cmdline):
                return pid
        raise LookupError(f"no raylet of node {name}")

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """End every process of this cluster by PID (SIGTERM, then SIGKILL), never by name.

        The grace is short: Ray 2.60's raylet takes ~10 s to act on SIGTERM and its gcs_server
        and autoscaler monitor did not exit on it at all (measured here), so a longer wait only
        delayed the SIGKILL every stop ended with anyway. Nothing here depends on Ray's own
        shutdown: the sandbox workers' containers are removed by the tests and fixtures."""
        self.signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while self.own_processes() and time.monotonic() < deadline:
            time.sleep(0.1)
        # Until none is left (bounded): a SIGKILLed parent's child is still found by its own
        # command line, or as the descendant it was when the list was taken.
        deadline = time.monotonic() + 10
        while (left := self.own_processes()) and time.monotonic() < deadline:
            self.signal_all(signal.SIGKILL, left)
            time.sleep(0.1)
        shutil.rmtree(self.root, ignore_errors=True)

    def signal_all(self, signum: int, pids: list[int] | None = None) -> None:
        for pid in self.own_processes() if pids is None else pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def own_processes(self) -> list[int]:
        """This cluster's processes: those naming its temp root, and all their descendants."""
        marker = str(self.root).encode()
        parents: dict[int, int] = {}
        roots = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = entry.joinpath("stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
                if marker in entry.joinpath("cmdline").read_bytes():
                    roots.add(int(entry.name))
        found = set(roots)
        grew = True
        while grew:
            grew = False
            for pid, parent in parents.items():
                if parent in found and pid not in found:
                    found.add(pid)
                    grew = True
        found.discard(os.getpid())
        return sorted(found)


def ray_processes() -> list[int]:
    """PIDs of processes that look like Ray's (raylet, gcs_server, workers, agents)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            cmdline = entry.joinpath("cmdline").read_bytes()
            if b"ray" in cmdline and (
                b"raylet" in cmdline
                or b"gcs_server" in cmdline
                or b"ray::" in cmdline
                or b"default_worker.py" in cmdline
                or b"/ray/" in cmdline
            ):
                found.append(int(entry.name))
    return found


def main() -> None:
    """Start a cluster for `proctor bench sandbox --backend ray`: nodes on both test engines and
    the default one, each with its worker; print the address; stop it on Enter."""
    cluster = LocalCluster.start({**ENGINE_SOCKETS, "node3": None})
    try:
        cluster.start_sandbox_workers()
        print(cluster.address, flush=True)
        sys.stdin.readline()
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
