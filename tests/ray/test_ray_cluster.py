"""The ray backend on a real local cluster: a head and two worker nodes, each node with its own engine.

One cluster serves the whole module (starting one takes ~20 s), and the tests run in file
order on one xdist worker (the ``xdist_group`` mark; pyproject sets ``--dist loadgroup``): the
conformance suite first, then spreading, a scripted FrontierMath run against docker's, image
refusal, a node killed mid-run, and last a clean shutdown. Every test is a coroutine on the
module's event loop, as the module's sandbox fixture is; blocking steps run on threads.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import tarfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from proctor.sandbox import Limits, Sandbox, SandboxUnavailable, open_sandbox
from proctor.sandbox.docker import labels
from tests.conftest import IN_CI
from tests.ray.cluster import ENGINE_SOCKETS, LocalCluster, engine, engines_available
from tests.runner.conftest import read_lines
from tests.runner.test_frontiermath_runs import write_fm_tasks
from tests.sandbox.conftest import TEST_LIMITS
from tests.sandbox.test_conformance import conformance_cases, host_processes_with
from tests.support.scripted_server import Reply, ReportedUsage, ScriptedServer, Step, ToolCallSpec

pytestmark = [
    pytest.mark.docker,
    pytest.mark.slow,
    pytest.mark.xdist_group("ray-cluster"),
    pytest.mark.asyncio(loop_scope="module"),
]

# The whole conformance suite, run again through ray and first in this module: every case of
# tests/sandbox/test_conformance.py, those added there later included. Where ray genuinely
# differs, the case says so on ``backend_name == "ray"`` and asserts what holds instead.
CONFORMANCE = conformance_cases()
globals().update(CONFORMANCE)
OTHER_IMAGE = "proctor/ray-test-other:1"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    missing = engines_available()
    if missing is not None:
        if IN_CI:
            pytest.fail(f"the ray tests' infrastructure is missing: {missing}")
        pytest.skip(missing)
    started = LocalCluster.start()
    # This process is a driver too (the module's sandbox): it presents the cluster's token.
    auth_names = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
    saved = {name: os.environ.get(name) for name in auth_names}
    os.environ.pop("RAY_AUTH_TOKEN", None)
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(started.token_path))
    reload_ray_auth()
    try:
        started.start_sandbox_workers()
        yield started
    finally:
        started.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        reload_ray_auth()
        for name in ENGINE_SOCKETS:
            remove_sandbox_containers(name)


def reload_ray_auth() -> None:
    """Make this process's Ray read RAY_AUTH_MODE and the token file again.

    Ray reads both once, when this process first loads it; an earlier test on the same xdist
    worker may have loaded it without a token, and a user's driver has its environment from the
    start. Ray's own helper for turning token mode on does the same two steps.
    """
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def remove_sandbox_containers(name: str) -> list[str]:
    """Every sandbox container left on a test engine (these engines serve only this module)."""
    client = engine(name)
    left = client.containers.list(all=True, filters={"label": labels.LABEL_FILTER})
    for container in left:
        container.remove(force=True)
    return [c.id for c in left]


def sandbox_containers(name: str) -> list[Any]:
    return engine(name).containers.list(all=True, filters={"label": labels.LABEL_FILTER})


@pytest.fixture(scope="module")
def backend_name() -> str:
    return "ray"


@pytest.fixture(scope="module")
def sandbox_runtime() -> str | None:
    """The conformance cases' runtime parameter: ray workers run the docker backend's default, runc
    (and their sandbox's describe() says so)."""
    return "runc"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox(cluster: LocalCluster) -> AsyncIterator[Sandbox]:
    opened = await open_sandbox("ray", ray_address=cluster.address, default_limits=TEST_LIMITS)
    assert opened.backend == "ray"
    try:
        yield opened
    finally:
        await opened.aclose()


def node_of(cluster: LocalCluster, node_id: str) -> str:
    return next(name for name, node in cluster.nodes.items() if node.node_id == node_id)


# -- spreading and recording ---------------------------------------------------------------


async def test_calls_spread_over_both_nodes_and_each_runs_in_its_nodes_engine(
    sandbox: Sandbox, cluster: LocalCluster
) -> None:
    described = sandbox.describe()
    # The cluster refused a client without the token before the driver joined it.
    assert described["ray_auth"]["requires_token"] is True
    assert described["ray_auth"]["allowed_unauthenticated"] is False
    assert {n["node_id"] for n in described["nodes"]} == {cluster.nodes[n].node_id for n in ENGINE_SOCKETS}
    assert described["refused_nodes"] == [] and described["isolates_less"] is False
    # The head advertises no proctor_sandbox, so the cluster takes 2 + 2 calls at once.
    assert described["max_concurrent_executions"] == 4
    code = "import socket, time\nprint(socket.gethostname(), flush=True)\ntime.sleep(3.0)\n"
    calls = [asyncio.create_task(sandbox.exec(code, timeout=30)) for _ in range(4)]
    # A container's hostname is its short ID: collect what each engine holds while the calls
    # sleep (each call's container lives for over 3 s; the engines are polled every ~0.3 s).
    running: dict[str, set[str]] = {name: set() for name in ENGINE_SOCKETS}
    while not all(call.done() for call in calls):
        for name in ENGINE_SOCKETS:
            listed = await asyncio.to_thread(engine(name).api.containers, all=True)
            running[name] |= {c["Id"][:12] for c in listed}
        await asyncio.sleep(0.1)
    results = await asyncio.gather(*calls)
    nodes = []
    for result in results:
        assert result.exit_code == 0 and result.backend == "ray", result
        assert result.extra["ray"]["lost"] == []
        assert result.extra["image_id"] == described["image_id"]
        name = node_of(cluster, result.extra["ray"]["node"])
        other = "node2" if name == "node1" else "node1"
        hostname = result.stdout.strip()
        assert hostname in running[name] and hostname not in running[other]
        nodes.append(name)
    assert sorted(nodes) == ["node1", "node1", "node2", "node2"]


async def test_a_program_timeout_is_its_result_and_is_not_rerun(sandbox: Sandbox) -> None:
    token = uuid.uuid4().hex
    started = time.monotonic()
    result = await sandbox.exec(f"# {token}\nwhile True:\n    pass\n", timeout=2.0)
    assert result.timed_out and result.exit_code is None
    assert result.extra["ray"]["lost"] == []
    assert time.monotonic() - started < 10
    oom = await sandbox.exec(
        "blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))\n",
        timeout=20,
        limits=TEST_LIMITS.replace(memory_bytes=128 * 1024 * 1024),
    )
    assert oom.oom_killed and oom.extra["ray"]["lost"] == []


async def test_sandbox_errors_come_back_as_sandbox_errors(sandbox: Sandbox) -> None:
    from proctor.sandbox import InvalidProgram, SandboxError

    with pytest.raises(InvalidProgram):
        await sandbox.exec("print('a')\x00", timeout=5)
    with pytest.raises(SandboxError):
        await sandbox.exec("print(1)", argv=["python3"], timeout=5)


# -- the docker backend's own container handling, through ray -------------------------------
# tests/sandbox/test_docker_lifecycle.py checks these on a docker sandbox of its own; every ray
# worker runs that docker backend, and here the same two properties are checked through Ray.


def container_of(token: str) -> tuple[str, str] | None:
    """(engine name, container ID) of the container running a process whose command line has ``token``."""
    for name in ENGINE_SOCKETS:
        ids = {c["Id"] for c in engine(name).api.containers()}
        for pid in host_processes_with(token):
            try:
                cgroup = Path(f"/proc/{pid}/cgroup").read_text()
            except OSError:
                continue
            for container_id in ids:
                if container_id in cgroup:
                    return name, container_id
    return None


def wait_for_container_of(token: str, within_s: float) -> tuple[str, str]:
    deadline = time.monotonic() + within_s
    while (found := container_of(token)) is None:
        assert time.monotonic() < deadline, "the program never started"
        time.sleep(0.1)
    return found


async def test_a_cancelled_call_returns_only_once_its_container_is_gone(sandbox: Sandbox) -> None:
    token = f"ray-cancelled-{uuid.uuid4().hex}"
    call = asyncio.create_task(sandbox.exec(f"# {token}\nimport time\ntime.sleep(60)\n", timeout=60))
    name, container_id = await asyncio.to_thread(wait_for_container_of, token, 60.0)
    started = time.monotonic()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    # As on docker: the node's worker had its exec cancelled in turn and removed the container
    # before the driver's call returned, so nothing of the call is left at this point.
    assert host_processes_with(token) == []
    left = await asyncio.to_thread(engine(name).api.containers, all=True)
    assert container_id not in {c["Id"] for c in left}
    assert time.monotonic() - started < 15


async def test_a_warm_container_lost_on_a_node_is_replaced(sandbox: Sandbox) -> None:
    from proctor.sandbox.docker.containers import remove_container

    assert await sandbox.settle(60)  # type: ignore[attr-defined]
    removed = set()
    for name in ENGINE_SOCKETS:
        api = engine(name).api
        warm = await asyncio.to_thread(
            api.containers, filters={"label": [labels.LABEL_FILTER, f"{labels.ROLE}=pool"]}
        )
        assert warm, f"no warm container on {name}"
        for container in warm:
            await asyncio.to_thread(remove_container, api, container["Id"])
            removed.add(container["Id"])
    results = await asyncio.gather(*(sandbox.exec("print('still served')", timeout=30) for _ in range(4)))
    for result in results:
        assert (result.exit_code, result.stdout) == (0, "still served\n"), result
        # Replaced inside the node's docker backend: no node was lost, nothing was re-run.
        assert result.extra["ray"]["lost"] == []
        assert result.extra["container_id"] not in removed


# -- the audit through ray ------------------------------------------------------------------


async def test_a_node_view_runs_every_call_on_its_node_only(sandbox: Sandbox, cluster: LocalCluster) -> None:
    node2 = cluster.nodes["node2"].node_id
    view = sandbox.on_node(node2)  # type: ignore[attr-defined]
    results = await asyncio.gather(*(view.exec("print(5)", timeout=30) for _ in range(4)))
    assert {r.extra["ray"]["node"] for r in results} == {node2}
    with pytest.raises(SandboxUnavailable, match="no ray sandbox worker serves node"):
        sandbox.on_node("f" * 56)  # type: ignore[attr-defined]


async def test_the_audit_through_ray_checks_every_node_and_each_holds(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    from proctor.agent.audit.battery import select_checks

    report = tmp_path / "audit.json"
    page = tmp_path / "audit.html"
    args = ["sandbox", "audit", "--backend", "ray", "--ray-address", cluster.address, "--quick"]
    done = await asyncio.to_thread(
        cluster.proctor, *args, "--json", str(report), "--html", str(page), timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(report.read_text())
    assert data["backend"] == "ray" and data["runtime"] == "runc" and data["passed"] is True
    assert data["sandbox"]["ray_address"] == cluster.address
    nodes = data["sandbox"]["nodes"]
    expected_nodes = sorted(cluster.nodes[n].node_id[:12] for n in ENGINE_SOCKETS)
    assert sorted(n.split()[0] for n in nodes) == expected_nodes
    quick = {check.id for check in select_checks("ray", quick=True)}
    host_side = {check.id for check in select_checks("ray", quick=True) if check.host_side}
    # Rows whose check names ray as not applicable (e.g. a container's cgroups seen from the
    # audit's host) say so on every node; every other row must hold.
    elsewhere = {check.id for check in select_checks("ray", quick=True) if "ray" not in check.backends}
    assert host_side
    for node in nodes:
        rows = {row["id"]: row for row in data["rows"] if row["node"] == node}
        assert set(rows) == quick
        assert all(rows[check_id]["verdict"] == "skipped" for check_id in elsewhere), rows
        assert all(row["verdict"] in ("held", "weak") for k, row in rows.items() if k not in elsewhere), rows
        # This cluster's nodes share the audit's kernel: the host-side checks ran, and held.
        for check_id in host_side - elsewhere:
            assert rows[check_id]["verdict"] == "held", rows[check_id]
    assert len(data["rows"]) == 2 * len(quick)
    assert "on 2 node(s)" in done.stdout and "<th>node</th>" in page.read_text()


# -- a full scripted FrontierMath run: ray against docker ----------------------------------


def computing_model(token: str, sleep_s: float) -> Any:
    """Turn 1: python that sleeps, then prints 6*7. Turn 2: submit the number in the question."""

    def script(request: dict[str, Any], index: int) -> Step:
        messages = request["messages"]
        wanted = re.search(r"SUBMIT (\d+)", messages[0]["content"])
        turns = sum(1 for m in messages if m["role"] == "assistant")
        usage = ReportedUsage(prompt_tokens=1000, completion_tokens=50)
        if turns == 0:
            code = f"import time\ntime.sleep({sleep_s})\nprint(6*7)  # {token}\n"
            return Reply(tool_calls=[ToolCallSpec("python", json.dumps({"code": code}))], usage=usage)
        code = f"def answer():\n    return {wanted.group(1) if wanted else 0}\n"
        return Reply(tool_calls=[ToolCallSpec("submit_answer", json.dumps({"code": code}))], usage=usage)

    return script


def fm_run_args(tasks: Path, out: Path, backend: str, cluster: LocalCluster) -> list[str]:
    args = ["run", "--track", "frontiermath", "--model", "openai/scripted", "--tasks", str(tasks)]
    args += ["--out", str(out), "--max-concurrency", "4", "--backend", backend]
    return args + (["--ray-address", cluster.address] if backend == "ray" else [])


def ran_calls(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls that ran code (a submit call's ``sandbox`` may hold only its outcome)."""
    return [c for c in record["tool_calls"] if "exit_code" in (c.get("sandbox") or {})]


FM_TASKS = 4  # run at --max-concurrency 4: the first python calls land on both nodes at once
EXPECTED = {f"fm-{i}": ("correct" if i % 2 or 40 + i == 42 else "incorrect") for i in range(FM_TASKS)}


@pytest.fixture(scope="module")
def docker_outcomes(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("fm-docker")
    tasks = write_fm_tasks(root / "tasks.jsonl", FM_TASKS)
    with ScriptedServer(computing_model("docker", 0.0)) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test"}
        done = cluster.proctor(*fm_run_args(tasks, root / "run", "docker", cluster), env=env, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {r["task_id"]: r["outcome"] for r in read_lines(root / "run" / "samples.jsonl")}


async def test_scripted_frontiermath_run_through_ray_matches_docker(
    cluster: LocalCluster, docker_outcomes: dict[str, str], tmp_path: Path
) -> None:
    assert docker_outcomes == EXPECTED
    tasks = write_fm_tasks(tmp_path / "tasks.jsonl", FM_TASKS)
    with ScriptedServer(computing_model("ray", 0.0)) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test"}
        # With the run's own audit first: through ray it checks every node before any sample.
        args = [*fm_run_args(tasks, tmp_path / "run", "ray", cluster), "--audit", "quick"]
        done = await asyncio.to_thread(cluster.proctor, *args, env=env, timeout=400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = read_lines(tmp_path / "run" / "samples.jsonl")
    assert {r["task_id"]: r["outcome"] for r in records} == docker_outcomes
    header = json.loads((tmp_path / "run" / "run.json").read_text())
    from proctor.agent.audit.battery import select_checks

    audit = header["audit"]
    assert audit["backend"] == "ray" and audit["passed"] is True and audit["counts"]["broken"] == 0
    assert sum(audit["counts"].values()) == len(ENGINE_SOCKETS) * len(select_checks("ray", quick=True))
    assert header["sandbox"]["backend"] == "ray" and header["sandbox_isolates_less"] is False
    assert header["sandbox"]["ray_auth"]["requires_token"] is True
    assert header["sessions"][-1]["sandbox_image_id"] == header["sandbox"]["image_id"]
    nodes = {n["node_id"] for n in header["sandbox"]["nodes"]}
    assert all(n["host_cpus"] == os.cpu_count() and n["host_cpu_model"] for n in header["sandbox"]["nodes"])
    assert nodes == {cluster.nodes[n].node_id for n in ENGINE_SOCKETS}
    used = {call["sandbox"]["extra"]["ray"]["node"] for r in records for call in ran_calls(r)}
    assert used <= nodes and used


# -- images --------------------------------------------------------------------------------


def tiny_image_tar() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        data = b"not the sandbox image\n"
        info = tarfile.TarInfo("README")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


async def test_a_driver_with_another_image_is_refused_by_every_worker(cluster: LocalCluster) -> None:
    wrong = "sha256:" + "0" * 64
    with pytest.raises(SandboxUnavailable, match="no ray sandbox worker serves the driver's image") as caught:
        from proctor.sandbox.ray.backend import open_ray_sandbox

        await open_ray_sandbox(address=cluster.address, image_id=wrong)
    message = str(caught.value)
    assert message.count("the driver runs " + wrong) == 2 and "\n" not in message


async def test_a_worker_refuses_calls_for_an_image_it_does_not_have(sandbox: Sandbox) -> None:
    import ray

    from proctor.sandbox.ray.worker import ImageRefused

    worker = sandbox.workers[0]  # type: ignore[attr-defined]
    reference = worker.handle.exec.remote("sha256:" + "1" * 64, Limits(), "print(1)", None, None, 5.0, None)
    with pytest.raises(ImageRefused, match="refuses to serve"):
        await asyncio.wrap_future(reference.future())
    assert ray.is_initialized()


async def test_a_node_whose_image_differs_is_refused_and_never_used(
    sandbox: Sandbox, cluster: LocalCluster
) -> None:
    import ray

    from proctor.sandbox.ray.worker import ACTOR_PREFIX, NAMESPACE

    node2 = cluster.nodes["node2"].node_id
    other = engine("node2")
    other.api.import_image_from_data(tiny_image_tar(), repository=OTHER_IMAGE.split(":")[0], tag="1")

    def stop_node2_worker() -> None:
        handle = ray.get_actor(ACTOR_PREFIX + node2, namespace=NAMESPACE)
        ray.get(handle.shutdown.remote(), timeout=60)
        ray.kill(handle, no_restart=True)

    await asyncio.to_thread(stop_node2_worker)
    try:
        swapped = await asyncio.to_thread(
            cluster.start_sandbox_worker, "node2", "--image", OTHER_IMAGE, "--pool-size", "0"
        )
        assert swapped.returncode == 0, swapped.stdout + swapped.stderr
        opened = await open_sandbox("ray", ray_address=cluster.address, default_limits=TEST_LIMITS)
        try:
            refused = opened.describe()["refused_nodes"]
            assert [r["node_id"] for r in refused] == [node2]
            assert OTHER_IMAGE in refused[0]["reason"]
            assert opened.describe()["max_concurrent_executions"] == 2
            results = await asyncio.gather(*(opened.exec("print(7)", timeout=30) for _ in range(4)))
            assert {r.extra["ray"]["node"] for r in results} == {cluster.nodes["node1"].node_id}
        finally:
            await opened.aclose()
    finally:
        await asyncio.to_thread(stop_node2_worker)
        other.images.remove(OTHER_IMAGE, force=True)
        restored = await asyncio.to_thread(cluster.start_sandbox_worker, "node2")
        assert restored.returncode == 0, restored.stdout + restored.stderr
    # The module's own sandbox still knows node 2's old worker: open a fresh view for later tests.


# -- a node lost mid-run -------------------------------------------------------------------


def running_in_engine(name: str, token: str) -> bool:
    """True when a process whose command line has ``token`` runs in a container of engine ``name``."""
    ids = {c["Id"] for c in engine(name).api.containers()}
    for pid in host_processes_with(token):
        try:
            cgroup = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue
        if any(container_id in cgroup for container_id in ids):
            return True
    return False


def run_and_kill_node2(cluster: LocalCluster, tmp_path: Path) -> tuple[str, int, float]:
    """A scripted FrontierMath run through ray; node 2's raylet is SIGKILLed while it runs a call."""
    token = f"ray-kill-{uuid.uuid4().hex}"
    tasks = write_fm_tasks(tmp_path / "tasks.jsonl", FM_TASKS)
    out = tmp_path / "run"
    with ScriptedServer(computing_model(token, 3.0)) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test"}
        process = cluster.proctor_background(*fm_run_args(tasks, out, "ray", cluster), env=env)
        try:
            deadline = time.monotonic() + 120
            while not running_in_engine("node2", token):
                assert process.poll() is None and time.monotonic() < deadline, process.communicate()[0]
                time.sleep(0.1)
            os.kill(cluster.raylet_pid("node2"), signal.SIGKILL)
            killed_at = time.monotonic()
            output, _ = process.communicate(timeout=180)
        finally:
            if process.poll() is None:
                process.kill()
    return output, process.returncode, killed_at


async def test_a_node_killed_mid_run_loses_no_sample_and_lost_calls_rerun_elsewhere(
    cluster: LocalCluster, docker_outcomes: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    output, returncode, killed_at = await asyncio.to_thread(run_and_kill_node2, cluster, tmp_path)
    assert returncode == 0, output[-3000:]
    records = read_lines(out / "samples.jsonl")
    assert {r["task_id"]: r["outcome"] for r in records} == docker_outcomes
    node1, node2 = cluster.nodes["node1"].node_id, cluster.nodes["node2"].node_id
    calls = [call["sandbox"] for r in records for call in ran_calls(r)]
    rerun = [c for c in calls if c["extra"]["ray"]["lost"]]
    assert rerun, "no call was lost with node 2"
    for call in rerun:
        assert [lost["node"] for lost in call["extra"]["ray"]["lost"]] == [node2]
        assert call["extra"]["ray"]["node"] == node1 and call["exit_code"] == 0
        # Noticed through Ray's tuned health checks, long before Proctor's own deadline.
        assert call["extra"]["ray"]["lost"][0]["after_s"] < 20
    assert time.monotonic() - killed_at < 90


# -- shutdown ------------------------------------------------------------------------------


async def test_clean_shutdown_leaves_no_ray_process_and_no_container(
    sandbox: Sandbox, cluster: LocalCluster
) -> None:
    await sandbox.aclose()  # this process's own connection goes first
    # Node 2 died with SIGKILL above: its containers are the documented `proctor sandbox
    # cleanup` case (owner gone). The clean path is what is checked here, on node 1.
    # The sweep of node 2's engine and the stop of node 1's worker touch nothing of each other's:
    # both at once.
    swept, stopped = await asyncio.gather(
        asyncio.to_thread(
            cluster.proctor, "sandbox", "cleanup", "--json", env={"DOCKER_HOST": ENGINE_SOCKETS["node2"]}
        ),
        asyncio.to_thread(cluster.proctor, "sandbox", "worker", "--address", cluster.address, "--stop"),
    )
    assert swept.returncode == 0, swept.stdout + swept.stderr
    assert sandbox_containers("node2") == []
    assert stopped.returncode == 0 and "stopped 1 sandbox worker(s)" in stopped.stdout, stopped.stderr
    assert sandbox_containers("node1") == []
    cluster.stop()
    assert cluster.own_processes() == []
    assert sandbox_containers("node1") == [] and sandbox_containers("node2") == []
