"""runc-direct (sandbox/docker/oci_direct.py): the engine's spec to the byte but for what is named, and
nothing left behind: not by a closed sandbox, not by a SIGKILLed controller after cleanup, not
by a controller killed mid-call once its launcher's backstop has run and the next sweep came.

The conformance suite runs every case on this path too (tests/sandbox/conftest.py,
``docker-runc-direct``)."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.sandbox import open_sandbox
from proctor.sandbox.docker import oci_direct
from tests.sandbox.conftest import TEST_LIMITS, run_proctor

LAYERS = (
    "/run/proctor-oci/1-x/images/y/mountpoints",
    "/var/lib/docker/overlay2/l/ABC",
    "/var/lib/docker/overlay2/l/DEF",
)
ROOT_AND_RUNC = pytest.mark.skipif(oci_direct.available() is not None, reason=str(oci_direct.available()))


def _spec(uid: int) -> dict[str, Any]:
    """The shape of a spec the engine generates (the fields call_spec may touch, and others)."""
    return {
        "process": {
            "args": ["/sbin/docker-init", "--", "python3", "-c", "L", json.dumps({"uid": uid, "gid": 1})],
            "capabilities": {"bounding": ["CAP_KILL"]},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
        },
        "root": {"path": "/var/lib/docker/overlay2/x/merged", "readonly": True},
        "hostname": "abcdef123456",
        "hooks": {"prestart": [{"path": "/proc/1/exe", "args": ["libnetwork-setkey"]}]},
        "mounts": [
            {"destination": "/tmp", "type": "tmpfs", "options": ["rw", f"uid={uid}", "gid=1", f"uid={uid}x"]},
            {
                "destination": "/etc/hostname",
                "type": "bind",
                "source": "/var/lib/docker/containers/x/hostname",
            },
            {"destination": "/proc/meminfo", "type": "bind", "source": "/var/lib/lxcfs/proc/meminfo"},
        ],
        "linux": {
            "cgroupsPath": "/docker/x",
            "seccomp": {"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"]}]},
            "maskedPaths": ["/proc/kcore"],
            "resources": {"memory": {"limit": 1 << 30}, "pids": {"limit": 256}},
            "namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "network"}],
        },
    }


@given(old=st.integers(1, 2**31 - 1), new=st.integers(1, 2**31 - 1))
def test_a_call_spec_changes_only_what_is_named(old: int, new: int) -> None:
    template = oci_direct.Template(_spec(old), old, LAYERS)
    name = "proctor-oci-1-0123456789abcdef-0123456789ab"
    spec = oci_direct.call_spec(template, name, new, Path("/b"))
    assert template.spec == _spec(old), "the template itself was changed"
    assert json.loads(spec["process"]["args"][-1])["uid"] == new
    assert spec["mounts"][0]["options"] == ["rw", f"uid={new}", "gid=1", f"uid={old}x"]
    assert spec["mounts"][1]["source"] == "/b/hostname"
    # The container's own root mount, in its own bundle: no two containers share one.
    assert spec["root"] == {"path": "/b/rootfs", "readonly": True}
    assert "hooks" not in spec and spec["hostname"] == name[-12:]
    assert spec["linux"]["cgroupsPath"] == f"/{oci_direct.CGROUP_PARENT}/{name}"
    # Put back what is named: every other byte is the engine's.
    expected = copy.deepcopy(template.spec)
    restored = copy.deepcopy(spec)
    restored["process"]["args"][-1] = expected["process"]["args"][-1]
    restored["mounts"][0]["options"] = expected["mounts"][0]["options"]
    restored["mounts"][1]["source"] = expected["mounts"][1]["source"]
    for key in ("root", "hostname"):
        restored[key] = expected[key]
    restored["hooks"] = expected["hooks"]
    restored["linux"]["cgroupsPath"] = expected["linux"]["cgroupsPath"]
    assert restored == expected


@given(
    old=st.integers(1, 2**31 - 1),
    new=st.integers(1, 2**31 - 1),
    token=st.text("0123456789abcdef", min_size=12, max_size=12),
)
def test_the_spec_rendered_once_per_template_is_the_call_spec_for_every_call(
    old: int, new: int, token: str
) -> None:
    template = oci_direct.Template(_spec(old), old, LAYERS)
    name = f"proctor-oci-1-0123456789abcdef-{token}"
    bundle = Path(f"/run/proctor-oci/1-x/bundles/{name}")
    text = oci_direct.call_spec_text(template, name, new, bundle)
    assert json.loads(text) == oci_direct.call_spec(template, name, new, bundle)


def test_a_spec_that_holds_a_stand_in_is_refused() -> None:
    spec = _spec(5)
    spec["mounts"][2]["source"] = "/proctor-oci-mark-bundle"
    template = oci_direct.Template(spec, 5, LAYERS)
    with pytest.raises(Exception, match="stand-ins"):
        template.text()


def test_a_spec_for_another_launcher_is_refused() -> None:
    spec = _spec(5)
    with pytest.raises(Exception, match="not the one generated"):
        oci_direct.rewrite_uid(spec, 6, 7)


def _leftovers(owner_pid: int, run_id: str = "") -> list[str]:
    """Everything runc-direct could leave of one controller (of one of its sandboxes, with
    ``run_id``): runc state, cgroups, its state directory, mounts."""
    owner = f"{owner_pid}-{run_id}"
    prefix = f"{oci_direct.NAME_PREFIX}{owner}"
    found = [str(p) for p in oci_direct.RUNC_ROOT.glob(f"{prefix}*")]
    found += [str(p) for p in oci_direct.CGROUP_ROOT.glob(f"*/{oci_direct.CGROUP_PARENT}/{prefix}*")]
    found += [str(p) for p in oci_direct.STATE_ROOT.glob(f"{owner}*")]
    found += [line for line in Path("/proc/self/mounts").read_text().splitlines() if f"/{owner}" in line]
    return found


@pytest.mark.docker
@ROOT_AND_RUNC
async def test_a_closed_sandbox_leaves_no_container_cgroup_bundle_or_mount(sandbox_image: str) -> None:
    box = await open_sandbox(
        "docker", image=sandbox_image, pool_size=1, default_limits=TEST_LIMITS, engine_path="runc-direct"
    )
    try:
        results = await asyncio.gather(*(box.exec(f"print({n})", timeout=30) for n in range(3)))
        assert [r.stdout for r in results] == ["0\n", "1\n", "2\n"]
        names = {r.extra["container_id"] for r in results}
        assert len(names) == 3 and all(oci_direct.is_direct(n) for n in names)
        assert box.describe()["engine_path"] == "runc-direct"
        run_id = str(box.describe()["run_id"])
        assert _leftovers(os.getpid(), run_id), "nothing to leave: the test proves nothing"
    finally:
        await box.aclose()
    # Other sandboxes of this test process (the conformance fixture) are not this one's.
    assert _leftovers(os.getpid(), run_id) == []


def _left_of_container(name: str) -> list[str]:
    """What one runc-direct container (``name``, or a pattern ending in ``*``) could leave: runc
    state, a group in any hierarchy (runc makes one in each), its bundle, its root mount."""
    found = [str(p) for p in oci_direct.RUNC_ROOT.glob(name)]
    found += [str(p) for p in oci_direct.CGROUP_ROOT.glob(f"*/{oci_direct.CGROUP_PARENT}/{name}")]
    found += [str(p) for p in oci_direct.STATE_ROOT.glob(f"*/bundles/{name}")]
    mounted = name.rstrip("*")
    found += [line for line in Path("/proc/self/mounts").read_text().splitlines() if mounted in line]
    return found


@pytest.mark.docker
@ROOT_AND_RUNC
async def test_a_calls_container_is_removed_whole_while_the_sandbox_serves_on(sandbox_image: str) -> None:
    # Removal after the answer (off the call's path) takes runc's own record of the container's
    # groups; whatever way the call ended, nothing of its container is left, every hierarchy
    # included, while the sandbox stays open. Oracle: the host's own cgroup, runc and mount views.
    box = await open_sandbox(
        "docker", image=sandbox_image, pool_size=0, default_limits=TEST_LIMITS, engine_path="runc-direct"
    )
    try:
        run_id = str(box.describe()["run_id"])
        owner = f"{oci_direct.NAME_PREFIX}{os.getpid()}-{run_id}-"
        done = await box.exec("print('done')", timeout=30)
        failed = await box.exec("import sys; sys.exit(3)", timeout=30)
        timed_out = await box.exec("import time; time.sleep(60)", timeout=2)
        assert (done.stdout, failed.exit_code, timed_out.timed_out) == ("done\n", 3, True)
        # Cancelled mid-call: once its container runs (seen in runc's state), the caller gives up.
        call = asyncio.ensure_future(box.exec("import time; time.sleep(60)", timeout=60))
        for _ in range(600):
            if any(oci_direct.RUNC_ROOT.glob(f"{owner}*")) or call.done():
                break
            await asyncio.sleep(0.05)
        assert not call.done(), "the call ended before it could be cancelled"
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await box.settle()
        names = [r.extra["container_id"] for r in (done, failed, timed_out)]
        assert all(oci_direct.is_direct(name) for name in names)
        assert {name: _left_of_container(name) for name in names} == {name: [] for name in names}
        # The cancelled call's container, whose name the caller never got: none of this sandbox's.
        assert _left_of_container(f"{owner}*") == []
        # And it serves on.
        assert (await box.exec("print(2)", timeout=30)).stdout == "2\n"
    finally:
        await box.aclose()


@pytest.mark.docker
@ROOT_AND_RUNC
async def test_each_container_loads_the_launcher_its_image_compiled_once_and_reports_cpu_by_part(
    sandbox_image: str,
) -> None:
    from proctor.sandbox.docker.containers import LAUNCHER

    box = await open_sandbox(
        "docker", image=sandbox_image, pool_size=0, default_limits=TEST_LIMITS, engine_path="runc-direct"
    )
    try:
        results = [await box.exec("print(6 * 7)") for _ in range(2)]
        assert [r.stdout for r in results] == ["42\n", "42\n"]
        (template,) = box.inner._templates.values()
        args = template.spec["process"]["args"]
        assert oci_direct.LOADER in args and LAUNCHER not in args
        # A fresh pool's containers serve one call: no picture of their fresh state is taken.
        assert json.loads(args[-1])["recycle"] is False
        for result in results:
            cpu = result.extra["cpu_us"]
            assert set(cpu) == {"launcher", "prepare", "program", "container"}
            assert all(value > 0 for value in cpu.values())
            assert cpu["container"] >= cpu["launcher"] + cpu["prepare"] + cpu["program"]
    finally:
        await box.aclose()


def _processes_with(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _wait_for(predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def _killed_controller(tmp_path: Path, sandbox_image: str, timeout_s: int) -> tuple[int, str]:
    """A `proctor sandbox exec --engine-path runc-direct` SIGKILLed while its program sleeps."""
    token = f"sleeper-{uuid.uuid4().hex}"
    program = tmp_path / "sleeper.py"
    program.write_text(f"# {token}\nimport time\nprint('asleep', flush=True)\ntime.sleep(600)\n")
    controller = subprocess.Popen(
        [
            "proctor",
            "sandbox",
            "exec",
            "--engine-path",
            "runc-direct",
            "--image",
            sandbox_image,
            "--timeout",
            str(timeout_s),
            str(program),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert _wait_for(lambda: _processes_with(token), 90), "the sandboxed program never started"
    finally:
        os.kill(controller.pid, signal.SIGKILL)
        controller.wait()
    return controller.pid, token


@pytest.mark.docker
@pytest.mark.slow
@ROOT_AND_RUNC
def test_sigkill_of_a_runc_direct_controller_then_cleanup_leaves_nothing(
    tmp_path: Path, sandbox_image: str
) -> None:
    pid, token = _killed_controller(tmp_path, sandbox_image, 600)
    assert _leftovers(pid), "nothing to clean: the test proves nothing"
    completed = run_proctor("sandbox", "cleanup", "--json")
    assert completed.returncode == 0, completed.stderr
    assert _wait_for(lambda: not _processes_with(token), 10)
    assert _leftovers(pid) == []


@pytest.mark.docker
@pytest.mark.slow
@ROOT_AND_RUNC
def test_a_killed_controllers_container_stops_by_its_deadline_and_the_sweep_removes_it(
    tmp_path: Path, sandbox_image: str
) -> None:
    pid, token = _killed_controller(tmp_path, sandbox_image, 3)
    # The launcher's own alarm (deadline + grace) ends the program with nobody watching.
    assert _wait_for(lambda: not _processes_with(token), 30), "the backstop never ended the program"
    names = [p.name for p in oci_direct.RUNC_ROOT.glob(f"{oci_direct.NAME_PREFIX}{pid}-*")]
    # The program's processes go first; the container's init (and so runc's state) a moment
    # later: CI once read "running" in between.
    assert _wait_for(lambda: all(oci_direct.state(name) in (None, "stopped") for name in names), 10), {
        name: oci_direct.state(name) for name in names
    }
    assert run_proctor("sandbox", "cleanup", "--json").returncode == 0
    assert _leftovers(pid) == []


# A controller that stops for good once the engine's template container exists (between
# capture_spec's start and its removal, where a SIGKILL leaves it): it prints the container's ID.
_HELD_AT_THE_TEMPLATE = """
import asyncio, sys, time
import proctor.sandbox.docker.containers as containers
from proctor.sandbox import open_sandbox
def held(api, container_id):
    print(container_id, flush=True)
    time.sleep(600)
containers.remove_container = held
# The default path, auto, takes the engine's spec as it opens (runc-direct where it serves).
asyncio.run(open_sandbox('docker', image=sys.argv[1], pool_size=0))
"""


@pytest.mark.docker
@pytest.mark.slow
@ROOT_AND_RUNC
def test_the_sweep_of_any_command_removes_a_sigkilled_controllers_template_container(
    tmp_path: Path, sandbox_image: str
) -> None:
    """issue 41: runc-direct's template container (the engine's spec is taken from it) never gets
    a program, so no deadline ends its launcher; a killed controller's outlived every sweep."""
    import docker
    from docker.errors import NotFound

    from proctor.sandbox.docker import host_counters, labels

    controller = subprocess.Popen(
        [sys.executable, "-c", _HELD_AT_THE_TEMPLATE, sandbox_image], stdout=subprocess.PIPE, text=True
    )
    try:
        assert controller.stdout is not None
        template_id = controller.stdout.readline().strip()
    finally:
        os.kill(controller.pid, signal.SIGKILL)
        controller.wait()
    client = docker.from_env()

    def state() -> dict[str, Any] | None:
        try:
            return dict(client.api.inspect_container(template_id))
        except NotFound:
            return None

    found = state()
    assert found is not None, "no template container: the test proves nothing"
    assert found["Config"]["Labels"][labels.ROLE] == "template" and found["State"]["Running"]
    try:
        # Any command's sweep; this one fails at once (no such file) and sweeps on its way out.
        completed = run_proctor("sandbox", "exec", str(tmp_path / "absent.py"))
        assert completed.returncode == 2, completed
        assert _wait_for(lambda: state() is None, 10), "the template container outlived the sweep"
        assert _wait_for(lambda: _leftovers(controller.pid) == [], 10), _leftovers(controller.pid)
        # The template container's own counter files (sandbox/docker/host_counters.py) went too.
        assert not list(host_counters.COUNTERS_ROOT.glob(f"{controller.pid}-*"))
    finally:
        if state() is not None:
            client.api.remove_container(template_id, force=True)


@pytest.mark.parametrize(
    ("backend", "options", "message"),
    [
        ("docker", {"runtime": "runsc"}, "engine path runc-direct runs runc only, not runsc"),
        ("local", {}, "engine path runc-direct needs the docker backend (backend is local)"),
    ],
)
async def test_runc_direct_is_refused_in_one_line_where_it_cannot_serve(
    backend: str, options: dict[str, str], message: str
) -> None:
    from proctor.sandbox import SandboxUnavailable

    with pytest.raises(SandboxUnavailable) as refused:
        await open_sandbox(backend, engine_path="runc-direct", probe_libraries=False, **options)
    assert message in str(refused.value) and "\n" not in str(refused.value)


async def test_an_unknown_engine_path_or_isolation_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown engine path 'runc'"):
        await open_sandbox("docker", engine_path="runc")
    with pytest.raises(ValueError, match="unknown sandbox isolation 'recycled'"):
        await open_sandbox("docker", isolation="recycled")


# -- sandbox.engine_path auto: runc-direct where it can serve, the engine's path otherwise ------


@pytest.mark.docker
@ROOT_AND_RUNC
async def test_auto_takes_runc_direct_where_it_serves_and_says_why(sandbox_image: str) -> None:
    box = await open_sandbox("docker", image=sandbox_image, pool_size=0, default_limits=TEST_LIMITS)
    try:
        described = box.describe()
        assert described["engine_path"] == "runc-direct"
        assert described["engine_path_reason"].startswith("auto: ")
        result = await box.exec("print(6 * 7)")
        assert result.stdout == "42\n" and oci_direct.is_direct(result.extra["container_id"])
    finally:
        await box.aclose()


@pytest.mark.docker
async def test_auto_serves_through_the_engine_where_runc_direct_cannot_and_says_why(
    sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each reason runc-direct may not serve: a path asked for, per-sample isolation (its reset is
    proved on the engine's path), what the host lacks, and a failure met while taking the
    engine's spec (the fallback must leave no mount or directory). runsc: test_runtimes.py."""
    from proctor.sandbox.docker import backend as docker_backend

    async def opened_path(**options: Any) -> tuple[str, str, str]:
        box = await open_sandbox(
            "docker", image=sandbox_image, pool_size=0, default_limits=TEST_LIMITS, **options
        )
        try:
            result = await box.exec("print(6 * 7)")
            assert result.stdout == "42\n" and not oci_direct.is_direct(result.extra["container_id"])
            described = box.describe()
            return (
                str(described["engine_path"]),
                str(described["engine_path_reason"]),
                str(described["run_id"]),
            )
        finally:
            await box.aclose()

    path, reason, _ = await opened_path(engine_path="docker")
    assert (path, reason) == ("docker", "asked for by name")
    path, reason, _ = await opened_path(isolation="per-sample")
    assert (path, reason) == ("docker", "auto: isolation per-sample is proved on the engine's path only")

    monkeypatch.setattr(oci_direct, "available", lambda: "runc-direct needs the runc binary on PATH")
    path, reason, _ = await opened_path()
    assert (path, reason) == ("docker", "auto: runc-direct needs the runc binary on PATH")
    monkeypatch.undo()

    if oci_direct.available() is None:
        attempted: list[str] = []

        def refuse(self: docker_backend.DockerSandbox) -> None:
            attempted.append(self.run_id)
            self._template_for(self.default_limits, "pool")  # mounts the image's root, then:
            raise oci_direct.SandboxUnavailable("the engine's bundle directory was not found")

        monkeypatch.setattr(docker_backend.DockerSandbox, "take_default_template", refuse)
        path, reason, run_id = await opened_path()
        assert path == "docker" and attempted and attempted[0] != run_id
        assert (
            reason == "auto: runc-direct could not start here (the engine's bundle directory was not found)"
        )
        # The runc-direct attempt's image mount and owner directory went with it.
        assert _leftovers(os.getpid(), attempted[0]) == []
