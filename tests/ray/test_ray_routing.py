"""The ray backend's routing and failure rules, against in-process stand-ins for worker actors.

No cluster: each stand-in answers like a worker actor's handle (``exec.remote(...).future()``)
or fails like Ray does when a node or actor is lost. What is attacked: a lost call must be
re-run elsewhere and recorded, never counted against the program; a program's own timeout or
OOM must never be re-run; a node that stops answering is bounded by Proctor's deadline; an
image refusal takes the node out; a call is never sent twice to the same node.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from proctor.sandbox import ExecResult, InvalidProgram, Limits, SandboxError

ray_exceptions = pytest.importorskip("ray.exceptions")

from proctor.sandbox.ray.backend import RaySandbox, Worker  # noqa: E402
from proctor.sandbox.ray.worker import ImageRefused  # noqa: E402
from tests.support.cli import proctor_in_process  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
IMAGE_ID = "sha256:" + "a" * 64


class FakeMethod:
    def __init__(self, answer: Callable[..., concurrent.futures.Future[Any]]) -> None:
        self.answer = answer
        self.calls: list[tuple[Any, ...]] = []

    def remote(self, *args: Any) -> FakeRef:
        self.calls.append(args)
        return FakeRef(self.answer(*args))


class FakeRef:
    def __init__(self, future: concurrent.futures.Future[Any]) -> None:
        self._future = future

    def future(self) -> concurrent.futures.Future[Any]:
        return self._future


class FakeHandle:
    def __init__(self, answer: Callable[..., concurrent.futures.Future[Any]]) -> None:
        self.exec = FakeMethod(answer)


def done(value: Any = None, error: BaseException | None = None) -> concurrent.futures.Future[Any]:
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
    return future


def ran(node: str, **fields: Any) -> Callable[..., concurrent.futures.Future[Any]]:
    def answer(*args: Any) -> concurrent.futures.Future[Any]:
        result = ExecResult(exit_code=0, stdout="ok\n", stderr="", backend="docker", **fields)
        result.extra = {"image_id": IMAGE_ID, "ray": {"node": node}}
        return done(result)

    return answer


def fails(error: BaseException) -> Callable[..., concurrent.futures.Future[Any]]:
    return lambda *args: done(error=error)


def never(*args: Any) -> concurrent.futures.Future[Any]:
    return concurrent.futures.Future()


def actor_died() -> BaseException:
    return ray_exceptions.ActorDiedError()


def task_error(cause: BaseException) -> BaseException:
    return ray_exceptions.RayTaskError("exec", "traceback text", cause)


def box(*workers: tuple[str, Callable[..., Any]], margin_s: float = 30.0) -> RaySandbox:
    built = [Worker(node, FakeHandle(answer), 2, {"image_id": IMAGE_ID}) for node, answer in workers]
    return RaySandbox(None, "img", IMAGE_ID, built, [], deadline_margin_s=margin_s)


async def test_a_call_lost_with_its_node_is_rerun_on_another_and_recorded() -> None:
    sandbox = box(("dead", fails(actor_died())), ("alive", ran("alive")))
    sandbox.workers[1].served = 1  # the dead node is picked first
    result = await sandbox.exec("print(1)", timeout=5)
    assert (result.exit_code, result.stdout, result.backend) == (0, "ok\n", "ray")
    assert result.extra["ray"]["node"] == "alive"
    assert [lost["node"] for lost in result.extra["ray"]["lost"]] == ["dead"]
    assert "ActorDiedError" in result.extra["ray"]["lost"][0]["reason"]
    # The dead node is out of the rotation: the next call goes straight to the live one.
    again = await sandbox.exec("print(1)", timeout=5)
    assert again.extra["ray"]["lost"] == [] and len(sandbox.workers[0].handle.exec.calls) == 1
    assert sandbox.available_cpus() == 2


@pytest.mark.parametrize(
    "fields", [{"timed_out": True, "exit_code": None}, {"oom_killed": True, "exit_code": 137}]
)
async def test_a_program_timeout_or_oom_is_its_result_never_rerun(fields: dict[str, Any]) -> None:
    def answer(*args: Any) -> concurrent.futures.Future[Any]:
        result = ExecResult(stdout="", stderr="", backend="docker", **fields)
        result.extra = {"ray": {"node": "first"}}
        return done(result)

    other = FakeHandle(ran("second"))
    sandbox = box(("first", answer))
    sandbox.workers.append(Worker("second", other, 2, {}))
    result = await sandbox.exec("while True: pass", timeout=1)
    assert result.timed_out == fields.get("timed_out", False)
    assert result.oom_killed == fields.get("oom_killed", False)
    assert result.extra["ray"]["lost"] == [] and other.exec.calls == []


async def test_every_node_lost_is_a_sandbox_error_naming_each_and_no_node_is_tried_twice() -> None:
    sandbox = box(("n1", fails(actor_died())), ("n2", fails(ray_exceptions.NodeDiedError("gone"))))
    with pytest.raises(SandboxError, match="no ray sandbox worker could run this call") as caught:
        await sandbox.exec("print(1)", timeout=5)
    assert "n1" in str(caught.value) and "n2" in str(caught.value)
    assert [len(w.handle.exec.calls) for w in sandbox.workers] == [1, 1]


async def test_a_node_that_never_answers_is_bounded_by_proctors_deadline() -> None:
    sandbox = box(("silent", never), ("alive", ran("alive")), margin_s=0.2)
    sandbox.workers[1].served = 1
    started = asyncio.get_running_loop().time()
    result = await sandbox.exec("print(1)", timeout=0.3)
    assert asyncio.get_running_loop().time() - started < 3
    assert result.extra["ray"]["node"] == "alive"
    assert "no answer within" in result.extra["ray"]["lost"][0]["reason"]


async def test_an_image_refusal_takes_the_node_out_and_is_recorded() -> None:
    refusal = ImageRefused("node silent refuses to serve: its image differs")
    sandbox = box(("stale", fails(task_error(refusal))), ("alive", ran("alive")))
    sandbox.workers[1].served = 1
    result = await sandbox.exec("print(1)", timeout=5)
    assert result.extra["ray"]["node"] == "alive"
    assert [r["node_id"] for r in sandbox.describe()["refused_nodes"]] == ["stale"]
    assert sandbox.workers[0].lost


async def test_a_sandbox_failure_on_a_live_node_is_tried_on_one_other_node_only() -> None:
    broken = fails(task_error(SandboxError("could not start a sandbox container")))
    sandbox = box(("first", broken), ("second", ran("second")))
    sandbox.workers[1].served = 1
    result = await sandbox.exec("print(1)", timeout=5)
    assert result.extra["ray"]["node"] == "second"
    assert "could not start a sandbox container" in result.extra["ray"]["lost"][0]["reason"]
    assert not sandbox.workers[0].lost  # a live node stays in the rotation
    # A program that breaks every sandbox it meets is not run on every node: two tries, then raised.
    everywhere = box(("a", broken), ("b", broken), ("c", broken), ("d", broken))
    with pytest.raises(SandboxError, match="could not start a sandbox container"):
        await everywhere.exec("print(1)", timeout=5)
    assert sum(len(w.handle.exec.calls) for w in everywhere.workers) == 2


async def test_bad_programs_are_refused_before_any_node_is_asked() -> None:
    sandbox = box(("n1", ran("n1")))
    with pytest.raises(InvalidProgram):
        await sandbox.exec("print(1)\x00", timeout=5)
    with pytest.raises(SandboxError):
        await sandbox.exec("print(1)", argv=["python3"], timeout=5)
    assert sandbox.workers[0].handle.exec.calls == []


async def test_calls_go_to_the_least_loaded_node_with_the_drivers_image_and_limits() -> None:
    gates: list[concurrent.futures.Future[Any]] = []

    def held(*args: Any) -> concurrent.futures.Future[Any]:
        gates.append(concurrent.futures.Future())
        return gates[-1]

    sandbox = box(("n1", held), ("n2", held))
    sandbox.default_limits = Limits(memory_bytes=64 * 1024 * 1024)
    calls = [asyncio.create_task(sandbox.exec("print(1)", timeout=5)) for _ in range(4)]
    await asyncio.sleep(0.05)
    assert [w.in_flight for w in sandbox.workers] == [2, 2]
    for gate in gates:
        result = ExecResult(exit_code=0, stdout="", stderr="")
        gate.set_result(result)
    await asyncio.gather(*calls)
    sent = sandbox.workers[0].handle.exec.calls[0]
    assert sent[0] == IMAGE_ID and sent[1] == sandbox.default_limits
    assert [w.in_flight for w in sandbox.workers] == [0, 0]


def test_without_ray_the_backend_says_how_to_get_it(tmp_path: Path) -> None:
    # A `ray` that cannot be imported, first on the path: as on a machine without the extra.
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            "from proctor.agent.cli import main; main()",
            "sandbox",
            "exec",
            "--backend",
            "ray",
            "-",
        ],
        input="print(1)\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    assert completed.returncode == 2, completed.stderr
    assert completed.stderr.strip() == (
        "proctor: error: --backend ray: the ray backend needs Ray: pip install 'proctor[ray]'"
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["sandbox", "worker", "--address", "127.0.0.2:1"],
            "the ray backend needs Ray: pip install 'proctor[ray]'",
        ),
        (
            ["sandbox", "worker", "--address", "127.0.0.2:1", "--pool-size", "-1"],
            "--pool-size: -1 must be a whole number between 0 and 64",
        ),
        (["bench", "sandbox", "--backend", "local"], "--backend: 'local' is not one of docker, ray"),
    ],
)
def test_worker_and_bench_flags_fail_in_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    completed = subprocess.run(
        [sys.executable, "-c", "from proctor.agent.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    assert (completed.returncode, completed.stderr.strip()) == (2, f"proctor: error: {expected}")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["sandbox", "exec", "--backend", "ray", "--ray-address", "127.0.0.2:1", "-"],
            "--backend ray: nothing answers at the Ray address 127.0.0.2:1 (Connection refused)",
        ),
        (
            ["sandbox", "worker", "--address", "127.0.0.2:1"],
            "--address 127.0.0.2:1: nothing answers at the Ray address 127.0.0.2:1 (Connection refused)",
        ),
        (
            ["sandbox", "exec", "--backend", "ray", "--ray-address", "no-port-here", "-"],
            "--backend ray: the Ray address 'no-port-here' is not host:port",
        ),
    ],
)
def test_an_address_where_no_cluster_answers_fails_at_once_in_one_line(
    args: list[str], expected: str
) -> None:
    # Ray itself retries an unreachable GCS for minutes; the probe answers in milliseconds.
    # main() in this process (tests/support/cli.py), which has Ray imported already.
    completed = proctor_in_process(*args, stdin="print(1)\n", cwd=REPO)
    assert (completed.returncode, completed.stderr.strip()) == (2, f"proctor: error: {expected}")


async def test_a_node_view_never_moves_a_call_to_another_node_even_when_its_worker_is_lost() -> None:
    sandbox = box(("dead", fails(actor_died())), ("alive", ran("alive")))
    view = sandbox.on_node("dead")
    with pytest.raises(SandboxError, match="no ray sandbox worker could run this call"):
        await view.exec("print(1)", timeout=5)
    assert sandbox.workers[1].handle.exec.calls == []
    # Lost now: still that node's view, and still only that node.
    with pytest.raises(SandboxError, match="no ray sandbox worker could run this call"):
        await sandbox.on_node("dead").exec("print(1)", timeout=5)
    assert sandbox.workers[1].handle.exec.calls == []
    assert (await sandbox.on_node("alive").exec("print(1)", timeout=5)).extra["ray"]["node"] == "alive"
