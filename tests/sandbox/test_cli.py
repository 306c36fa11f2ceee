"""`proctor sandbox exec|cleanup` through the real console command."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.sandbox import ExecResult, Limits
from proctor.sandbox.docker import labels as sandbox_labels
from tests.sandbox.conftest import run_proctor, runsc
from tests.sandbox.test_conformance import host_processes_with
from tests.support.cli import proctor_in_process

EXEC_RESULT_KEYS = {f.name for f in dataclasses.fields(ExecResult)}
BACKENDS = [pytest.param("docker", marks=pytest.mark.docker), "local"]


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "program.py"
    path.write_text("import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)\n")
    return path


def image_args(backend: str, request: pytest.FixtureRequest) -> list[str]:
    return ["--image", request.getfixturevalue("sandbox_image")] if backend == "docker" else []


def assert_one_line_error(completed: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert completed.returncode == 2, completed
    assert "Traceback" not in completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("proctor: error:"), completed.stderr
    for needle in needles:
        assert needle in lines[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_json_is_one_exec_result_and_exits_with_the_programs_status(
    backend: str, program: Path, request: pytest.FixtureRequest
) -> None:
    completed = run_proctor(
        "sandbox", "exec", "--backend", backend, *image_args(backend, request), "--json", str(program)
    )
    assert completed.returncode == 3, completed.stderr
    (line,) = completed.stdout.strip().splitlines()
    result = json.loads(line)
    assert set(result) == EXEC_RESULT_KEYS
    assert (result["exit_code"], result["stdout"], result["stderr"]) == (3, "out\n", "err\n")
    assert result["backend"] == backend
    # Only an explicitly chosen local backend warns, on stderr (stdout stays one JSON line).
    assert ("isolates less than docker" in completed.stderr) == (backend == "local")


@pytest.mark.parametrize("backend", BACKENDS)
def test_human_output_and_stdin_program(backend: str, request: pytest.FixtureRequest) -> None:
    completed = run_proctor(
        "sandbox",
        "exec",
        "--backend",
        backend,
        *image_args(backend, request),
        "--timeout",
        "2",
        "--memory",
        "256m",
        "--cpus",
        "1",
        "-",
        stdin="print(6 * 7, flush=True)\nwhile True: pass\n",
    )
    assert completed.returncode == 124, completed.stderr
    assert completed.stdout == "42\n"
    assert completed.stderr.strip().splitlines()[-1].startswith(f"proctor: [sandbox {backend}: timed out;")


# Programs that end by themselves, each as a shell sees it; the oracle is the host's own
# python3 running the same program (its status is what `timeout 30 python3 FILE` would give).
ENDINGS = {
    "exits_7": "import sys\nsys.exit(7)\n",
    "exits_0": "print('fine')\n",
    "raises": "raise ValueError('boom')\n",
    "kills_itself": "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n",
    "exits_255": "import os\nos._exit(255)\n",
}


def host_status(program: Path) -> int:
    completed = subprocess.run([sys.executable, "-I", str(program)], capture_output=True, timeout=60)
    return completed.returncode if completed.returncode >= 0 else 128 - completed.returncode


@pytest.mark.parametrize("backend", BACKENDS)
def test_exit_status_mirrors_the_program(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # In-process: one sandbox call per program, no interpreter start for each.
    for name, text in ENDINGS.items():
        program = tmp_path / f"{name}.py"
        program.write_text(text)
        completed = proctor_in_process(
            "sandbox", "exec", "--backend", backend, *image_args(backend, request), str(program)
        )
        assert completed.returncode == host_status(program), (name, completed)
    bomb = tmp_path / "bomb.py"
    bomb.write_text("blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))\n")
    completed = proctor_in_process(
        "sandbox", "exec", "--backend", backend, *image_args(backend, request), "--memory", "128m", str(bomb)
    )
    assert completed.returncode == 137, completed
    assert "out of memory" in completed.stderr.strip().splitlines()[-1], completed.stderr


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--memory", "12xb"], "--memory"),
        (["--memory", "1k"], "--memory"),
        (["--cpus", "0"], "--cpus"),
        (["--cpus", "1000"], "--cpus"),
        (["--timeout", "-1"], "--timeout"),
        (["--timeout", "abc"], "--timeout"),
        (["--cpus", "many"], "--cpus"),
        (["--backend", "podman"], "--backend"),
    ],
)
def test_bad_flags_give_one_line_errors(flags: list[str], needle: str, program: Path) -> None:
    # In-process (tests/support/cli.py): the subject is the flag's check, not the process;
    # the real process's one-line error is proven below and in tests/test_cli_errors.py.
    assert_one_line_error(proctor_in_process("sandbox", "exec", *flags, str(program)), needle)


def test_missing_file_gives_one_line_error(tmp_path: Path) -> None:
    missing = tmp_path / "absent.py"
    assert_one_line_error(proctor_in_process("sandbox", "exec", str(missing)), str(missing))


def test_missing_engine_with_docker_backend_gives_one_line_error(program: Path) -> None:
    completed = run_proctor(
        "sandbox",
        "exec",
        "--backend",
        "docker",
        str(program),
        env={"DOCKER_HOST": "unix:///nonexistent/proctor-test.sock"},
    )
    assert_one_line_error(
        completed,
        "--backend docker",
        "no Docker engine answers at unix:///nonexistent/proctor-test.sock",
        "start it, or point DOCKER_HOST or --docker-host at a running one",
    )
    assert "image build" not in completed.stderr


@pytest.fixture
def closed_docker_socket(tmp_path: Path) -> Iterator[str]:
    """DOCKER_HOST for a unix socket that exists but where nothing listens any more."""
    path = tmp_path / "docker.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.close()
    yield f"unix://{path}"


def assert_auto_refused(completed: subprocess.CompletedProcess[str], cause: str, fix: str) -> None:
    """Exit 2, one line naming the cause, the fix that fits it and the other way out (local),
    and the program never ran."""
    assert_one_line_error(completed, "--backend auto", cause, fix, "--backend local")
    assert completed.stdout == ""


def test_auto_without_engine_is_one_line_error_and_runs_nothing(
    program: Path, closed_docker_socket: str
) -> None:
    completed = run_proctor(
        "sandbox", "exec", "--json", str(program), env={"DOCKER_HOST": closed_docker_socket}
    )
    assert_auto_refused(completed, f"no Docker engine answers at {closed_docker_socket}", "start it")
    # Whether the image exists is not known yet: building it is not the fix for a stopped engine.
    assert "image build" not in completed.stderr


@pytest.mark.docker
def test_auto_with_missing_image_is_one_line_error_and_runs_nothing(program: Path) -> None:
    missing = f"proctor/no-such-image:{uuid.uuid4().hex[:12]}"
    completed = run_proctor("sandbox", "exec", "--image", missing, "--json", str(program))
    # A named image is the user's to pull or build: `proctor image build` makes the pinned one.
    assert_auto_refused(completed, f"sandbox image {missing} is not in the engine at", "pull or build it")
    assert "proctor image build" not in completed.stderr


# What a controller may inherit: nohup ignores SIGHUP, a background job of a non-interactive shell
# SIGINT and SIGQUIT, and a parent may leave signals blocked, SIGALRM (the supervisors' backstop)
# among them. Ignored signals and the mask survive fork and execve.
INHERITED_IGNORED = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1)
INHERITED_BLOCKED = (signal.SIGALRM, signal.SIGUSR2, signal.SIGCHLD, signal.SIGTERM)


def _as_if_started_under_nohup_with_signals_blocked() -> None:
    """preexec_fn: the controller starts with :data:`INHERITED_IGNORED` ignored and
    :data:`INHERITED_BLOCKED` blocked."""
    for sig in INHERITED_IGNORED:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, INHERITED_BLOCKED)


def _with_ctrl_c_default() -> None:
    """preexec_fn: SIGINT at its default, as at a terminal, whatever this test process inherited
    (a background job of a non-interactive shell runs with SIGINT ignored, and so would the
    controller, which then rightly never sees a Ctrl-C)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigkill_of_controller_then_cleanup_leaves_nothing(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    token = f"sleeper-{uuid.uuid4().hex}"
    program = tmp_path / "sleeper.py"
    program.write_text(f"# {token}\nimport time\nprint('asleep', flush=True)\ntime.sleep(600)\n")
    controller = subprocess.Popen(
        [
            "proctor",
            "sandbox",
            "exec",
            "--backend",
            backend,
            *image_args(backend, request),
            "--timeout",
            "600",
            str(program),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_as_if_started_under_nohup_with_signals_blocked,
    )
    try:
        assert _wait_for(lambda: host_processes_with(token), 60), "the sandboxed program never started"
    finally:
        os.kill(controller.pid, signal.SIGKILL)
        controller.wait()
    completed = run_proctor("sandbox", "cleanup", "--json")
    assert completed.returncode == 0, completed.stderr
    assert _wait_for(lambda: not host_processes_with(token), 10)
    if backend == "local":
        # The dead controller's bwrap layout directory (a synthetic /etc/passwd) went too.
        assert not list(Path(tempfile.gettempdir()).glob(f"proctor-bwrap-{controller.pid}-*"))
    if backend == "docker":
        import docker

        client = docker.from_env()
        owned = client.api.containers(
            all=True,
            filters={"label": [sandbox_labels.LABEL_FILTER, f"{sandbox_labels.OWNER_PID}={controller.pid}"]},
        )
        # Nothing of the dead controller is left. Whether this cleanup or the sweep that every other
        # concurrent `proctor` command starts removed it is a race, so `removed` may be empty.
        assert owned == []
        assert isinstance(json.loads(completed.stdout)["removed"], list)


@pytest.mark.docker
def test_cleanup_keeps_containers_of_live_runs(sandbox_image: str) -> None:
    import docker

    from proctor.sandbox.docker.containers import create_started_container, remove_container
    from proctor.sandbox.docker.labels import container_labels, new_run_id

    client = docker.from_env()
    live = create_started_container(
        client.api,
        sandbox_image,
        Limits(),
        container_labels(new_run_id(), "call"),
        "65534:65534",
    )
    try:
        completed = run_proctor("sandbox", "cleanup", "--json")
        assert completed.returncode == 0, completed.stderr
        assert live.id in json.loads(completed.stdout)["kept_live"]
        assert client.api.inspect_container(live.id)["State"]["Running"]
    finally:
        live.close()
        remove_container(client.api, live.id)


def test_cleanup_without_engine_still_answers() -> None:
    completed = run_proctor(
        "sandbox", "cleanup", env={"DOCKER_HOST": "unix:///nonexistent/proctor-test.sock"}
    )
    assert completed.returncode == 0 and "no containers checked" in completed.stdout, completed


@pytest.mark.parametrize("backend", BACKENDS)
def test_ctrl_c_mid_call_leaves_nothing_running(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    token = f"interrupted-{uuid.uuid4().hex}"
    program = tmp_path / "sleeper.py"
    program.write_text(f"# {token}\nimport time\ntime.sleep(600)\n")
    controller = subprocess.Popen(
        [
            "proctor",
            "sandbox",
            "exec",
            "--backend",
            backend,
            *image_args(backend, request),
            "--timeout",
            "600",
            str(program),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # A controller that never answers Ctrl-C prints every thread's stack on SIGABRT below.
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        preexec_fn=_with_ctrl_c_default,
    )
    try:
        assert _wait_for(lambda: host_processes_with(token), 60), "the sandboxed program never started"
        controller.send_signal(signal.SIGINT)
        # Its cleanup takes about 0.3 s of CPU; 30 s of wall time was once not enough on a CI
        # machine running the rest of the suite, two engines and a Ray cluster on 2 cores.
        try:
            _, stderr = controller.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            controller.send_signal(signal.SIGABRT)
            _, stacks = controller.communicate(timeout=30)
            raise AssertionError(f"Ctrl-C did not end the controller; where it waited:\n{stacks}") from None
    finally:
        if controller.poll() is None:
            controller.kill()
    assert controller.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1].startswith("proctor: interrupted"), stderr
    # Removal was awaited before the process exited: nothing is left, no cleanup needed.
    assert not host_processes_with(token)
    if backend == "docker":
        import docker

        owned = docker.from_env().api.containers(
            all=True, filters={"label": f"{sandbox_labels.OWNER_PID}={controller.pid}"}
        )
        assert owned == []


def test_bench_rejects_a_bad_call_count_in_one_line() -> None:
    assert_one_line_error(proctor_in_process("bench", "sandbox", "--calls", "2.5"), "--calls")


@pytest.mark.parametrize("backend", BACKENDS)
def test_program_of_a_killed_controller_still_ends_by_its_deadline(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # No cleanup here: the sandbox itself must end the program, by the backstop alarm of its
    # supervisor a few seconds after the deadline (docker: the launcher; local: the init). The
    # program and its child only sleep: no CPU time limit could end them, and a spinning
    # program once hid that a local sandbox outlived its killed controller for good.
    # The controller starts with SIGALRM blocked: under runc-direct that mask once reached the
    # launcher through runc and held its backstop back, and the program slept on.
    token = f"orphan-{uuid.uuid4().hex}"
    program = tmp_path / "sleeper.py"
    program.write_text(f"# {token}\nimport os, time\nos.fork()\ntime.sleep(600)\n")
    controller = subprocess.Popen(
        [
            "proctor",
            "sandbox",
            "exec",
            "--backend",
            backend,
            *image_args(backend, request),
            "--timeout",
            "1",
            str(program),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_as_if_started_under_nohup_with_signals_blocked,
    )
    try:
        assert _wait_for(lambda: host_processes_with(token), 60), "the sandboxed program never started"
    finally:
        os.kill(controller.pid, signal.SIGKILL)
        controller.wait()
    assert _wait_for(lambda: not host_processes_with(token), 1 + 5 + 5)


SIGNAL_REPORT = """\
import json, os, signal
ignored = [s.name for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)
           and signal.getsignal(s) == signal.SIG_IGN]
blocked = [s.name for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])]
ctrl_c = signal.getsignal(signal.SIGINT) is signal.default_int_handler
print(json.dumps({"ignored": sorted(ignored), "blocked": sorted(blocked), "ctrl_c": ctrl_c}), flush=True)
os.kill(os.getpid(), signal.SIGTERM)
print("survived SIGTERM", flush=True)
"""

ON_DOCKER = pytest.mark.docker
SIGNAL_WAYS = [
    pytest.param(["--backend", "docker", "--engine-path", "docker"], marks=ON_DOCKER, id="docker"),
    pytest.param(["--backend", "docker", "--engine-path", "runc-direct"], marks=ON_DOCKER, id="runc-direct"),
    pytest.param(["--backend", "docker", "--runtime", "runsc"], marks=runsc, id="runsc"),
    pytest.param(["--backend", "local"], id="local"),
]


@pytest.mark.parametrize("way", SIGNAL_WAYS)
def test_a_program_starts_with_default_signals_whatever_its_controller_inherited(
    way: list[str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # The same program must behave the same whoever started the controller: the local backend
    # once handed it the controller's ignored signals, and runc-direct its blocked ones.
    program = tmp_path / "signals.py"
    program.write_text(SIGNAL_REPORT)
    backend = way[1]
    completed = subprocess.run(
        ["proctor", "sandbox", "exec", *way, *image_args(backend, request), "--json", str(program)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_as_if_started_under_nohup_with_signals_blocked,
    )
    assert completed.returncode == 128 + signal.SIGTERM, completed
    result = json.loads(completed.stdout)
    report = json.loads(result["stdout"].splitlines()[0])
    # Python itself ignores SIGPIPE and SIGXFSZ at start-up and installs its SIGINT handler only
    # where SIGINT was not ignored: anything else ignored or blocked came from outside.
    assert report == {"ignored": ["SIGPIPE", "SIGXFSZ"], "blocked": [], "ctrl_c": True}, result
    assert result["exit_code"] == 128 + signal.SIGTERM and "survived" not in result["stdout"], result
