"""`proctor sandbox audit --command` and `--compare`: sandboxes Proctor did not build.

Without docker: the adapter enforces its timeout on the command's whole process group, caps
output, hands the program over on stdin or in ``{file}``, and grades the rows it cannot show
"skipped" with a reason. With docker: Docker's defaults are graded as they deserve, and each of
four deliberately weakened ``docker run`` lines is graded broken on its own row, where a
hardened line holds. Network traffic in these tests never leaves the machine: the network rows
connect to nothing when an interface other than loopback exists (agent/audit/network.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.agent.audit import audit_sandbox
from proctor.agent.audit.battery import ALL_CHECKS
from proctor.agent.audit.command_sandbox import CommandSandbox
from proctor.agent.audit.compare import parse_specs, split_list
from proctor.sandbox import Limits
from tests.audit.test_audit import audit_in_process, rows_of
from tests.support.cli import proctor_in_process

LABEL = "proctor-audit-test-command=1"
PYTHON = shlex.quote(sys.executable)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose; it is reaped by its parent (init here).
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _dead_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


# -- the adapter, with this machine's python as the "sandbox" -----------------------------------


async def test_timeout_kills_the_commands_whole_process_group() -> None:
    sandbox = CommandSandbox([sys.executable, "-"])
    program = (
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "while True:\n    time.sleep(0.05)\n"
    )
    started = time.monotonic()
    result = await sandbox.exec(program, timeout=1.5)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 1.5 + 5
    child = int(result.stdout.split()[0])
    assert await asyncio.to_thread(_dead_within, child, 5.0), "a process of the group outlived the timeout"


async def test_output_is_capped_per_stream_and_flagged() -> None:
    sandbox = CommandSandbox([sys.executable, "-"], default_limits=Limits(output_bytes=65536))
    program = "import os\nfor _ in range(80):\n    os.write(1, b'o' * 65536)\n    os.write(2, b'e' * 65536)\n"
    result = await sandbox.exec(program, timeout=20)
    assert result.exit_code == 0
    assert len(result.stdout) == len(result.stderr) == 65536
    assert result.stdout_truncated and result.stderr_truncated


@pytest.mark.parametrize("command", [[sys.executable, "-"], [sys.executable, "{file}"]])
async def test_program_and_its_stdin_reach_the_command_either_way(command: list[str]) -> None:
    sandbox = CommandSandbox(command)
    data = "line one\n\u00e9 two, with 'quotes' and \"more\"\n"
    result = await sandbox.exec(
        "import sys\nsys.stdout.write(sys.stdin.read())\nraise SystemExit(3)\n", stdin=data
    )
    assert (result.exit_code, result.stdout) == (3, data)
    assert sandbox.describe()["program_via"] == ("file" if "{file}" in command else "stdin")


async def test_rows_a_command_cannot_show_are_not_applicable() -> None:
    """Host-side rows and the rows the adapter itself would decide are skipped with a reason;
    a row a program alone can answer runs through the command."""
    sandbox = CommandSandbox([sys.executable, "-"])
    host_side = {check.id for check in ALL_CHECKS if check.host_side}
    adapter = {check.id for check in ALL_CHECKS if "command" not in check.backends}
    assert {"limits.output", "limits.wall_clock", "enforce.sigterm", "output.flood"} <= adapter
    report = await audit_sandbox(sandbox, Limits(), only=[*sorted(host_side | adapter), "priv.non_root"])
    rows = {row.id: row for row in report.rows}
    for check_id in host_side | adapter:
        assert rows[check_id].verdict.value == "skipped", rows[check_id]
        assert rows[check_id].observed.startswith(("not applicable through --command", "applies to docker"))
    # This machine's python runs as root here: a real measurement, not a skip.
    assert rows["priv.non_root"].verdict.value in ("held", "broken")
    assert rows["priv.non_root"].evidence
    assert report.sandbox["command"] == shlex.join([sys.executable, "-"])


@pytest.mark.slow
async def test_a_program_past_the_argument_limit_is_graded() -> None:
    """On stdin it runs intact; a sandbox that hands the program over as an argument refuses it."""
    on_stdin = CommandSandbox([sys.executable, "-"])
    # A wrapper that passes the program on python's command line, as `python3 -c CODE` would.
    as_argument = CommandSandbox(["sh", "-c", f'exec {PYTHON} -c "$(cat "$1")"', "sh", "{file}"])
    verdicts = {}
    for name, sandbox in (("stdin", on_stdin), ("argument", as_argument)):
        report = await audit_sandbox(sandbox, Limits(), only=["limits.large_program"])
        verdicts[name] = (report.rows[0].verdict.value, report.rows[0].evidence)
    assert verdicts["stdin"][0] == "held", verdicts
    assert verdicts["argument"][0] == "weak" and "Argument list too long" in verdicts["argument"][1], verdicts


# -- parsing: commands hold spaces, commas and quotes --------------------------------------------

_WORD = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12
)


@given(st.lists(st.lists(_WORD, min_size=1, max_size=4), min_size=1, max_size=4))
@settings(max_examples=200, deadline=None)
def test_a_quoted_list_item_comes_back_whole(commands: list[list[str]]) -> None:
    """Any command, quoted as a shell would quote it, survives the list: commas, spaces, quotes."""
    items = [shlex.join(words) for words in commands]
    value = ",".join(shlex.quote(item) for item in items)
    assert split_list(value) == [item.strip() for item in items if item.strip()]
    for item, words in zip(split_list(value), commands, strict=False):
        if item == shlex.join(words):
            assert shlex.split(item) == words


def test_specs_name_proctors_sandboxes_and_labelled_commands() -> None:
    specs = parse_specs([f"docker,runsc,local,mine={PYTHON} -", f"'other={PYTHON} -c \"a,b\"'"])
    assert [(s.label, s.backend, s.runtime) for s in specs] == [
        ("docker", "docker", None),
        ("runsc", "docker", "runsc"),
        ("local", "local", None),
        ("mine", "command", None),
        ("other", "command", None),
    ]
    assert specs[4].command == (sys.executable, "-c", "a,b")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--command", "'unbalanced"], "--command: cannot split"),
        (["--command", "   "], "--command: the command is empty"),
        (["--command", "no-such-binary-for-proctor -"], "'no-such-binary-for-proctor' is not an executable"),
        (
            ["--command", f"{sys.executable} -", "--backend", "docker"],
            "--command: cannot be combined with --backend",
        ),
        (["--command", f"{sys.executable} -", "--image", "x"], "--command: cannot be combined with --image"),
        (["--compare", "docker"], "--compare: name at least two sandboxes"),
        (["--compare", "docker,docker"], "--compare: docker named twice"),
        (["--compare", "docker,local", "--command", "x"], "--command: cannot be combined with --compare"),
        (["--compare", "docker,'local"], "--compare: cannot split"),
    ],
)
def test_bad_command_or_list_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = proctor_in_process("sandbox", "audit", *args)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert message in result.stderr


# -- docker: Docker's own defaults, and one weakness at a time ----------------------------------


@pytest.fixture(scope="module")
def image() -> str:
    from proctor.sandbox.docker.image import image_tag

    return image_tag()


@pytest.fixture(autouse=True)
def _no_container_left() -> Iterator[None]:
    yield
    # The audit kills a command at its timeout; what `docker run` leaves behind is removed here.
    if "docker" in sys.modules or os.path.exists("/var/run/docker.sock"):
        found = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label={LABEL}"], capture_output=True, text=True, check=False
        ).stdout.split()
        if found:
            subprocess.run(["docker", "rm", "-f", *found], capture_output=True, check=False)


def _docker_run(image: str, *flags: str) -> str:
    return shlex.join(["docker", "run", "--rm", "-i", "--label", LABEL, *flags, image, "python3", "-"])


# What Docker's defaults deserve, row by row. Docker's default bridge network, writable root
# and unlimited resources: broken. The image's own user (docker run without -u): no capability
# now, but Docker's default bounding set and no_new_privs off leave a way to gain some. A plain
# `docker run` binds no counter files: /proc/meminfo is the host's, a channel between calls.
# One uid for every container: one call's inotify use refuses another's.
DOCKER_DEFAULTS = {
    **dict.fromkeys(
        (
            "net.interfaces",
            "net.tcp4",
            "net.udp4",
            "net.ipv6",
            "net.metadata",
            "net.dns",
            "limits.read_only_root",
            "limits.memory",
            "limits.pids",
            "limits.file_size",
            "enforce.fork_bomb",
            "enforce.zombie_bomb",
            "limits.tmpfs",
            "priv.setuid",
            "state.per_uid_quota",
        ),
        "broken",
    ),
    "priv.non_root": "held",
    "priv.capabilities": "weak",
    "proc.host_counters": "weak",
}


def test_the_docker_defaults_test_asserts_every_row_the_catalogue_names_it_for() -> None:
    from proctor.agent.audit.catalogue import DEFAULTS, ENTRIES

    named = {check_id for check_id, entry in ENTRIES.items() if DEFAULTS in entry.tests}
    assert named == set(DOCKER_DEFAULTS)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_docker_defaults_through_command_are_graded(tmp_path: Path, image: str) -> None:
    report = tmp_path / "defaults.json"
    # Docker's defaults bound no memory: the memory row fills until its own ceiling, a quarter
    # past the limit it expects. A small expected limit keeps that bomb small (320 MiB, not 5 GiB
    # of the host's memory), and the row's verdict is the same: nothing stopped it.
    config = tmp_path / "run.yaml"
    config.write_text("sandbox:\n  memory: 256m\n")
    # The rows docs/audit.md's catalogue names this test for, each asserted, and every row a
    # command cannot show (they run nothing). The battery's other rows asserted nothing here and
    # made the full audit take 80-110 s in CI; the default sandbox's own audits run them all.
    not_applicable = {check.id for check in ALL_CHECKS if check.host_side or "command" not in check.backends}
    only = sorted(set(DOCKER_DEFAULTS) | not_applicable)
    args = ["--command", _docker_run(image), "--limits-from", str(config), "--json", str(report)]
    for row in only:
        args += ["--only", row]
    result = audit_in_process("sandbox", "audit", *args)
    assert result.returncode == 1, result.stderr[-2000:]
    rows = rows_of(report)
    assert sorted(rows) == only
    verdicts = {name: row["verdict"] for name, row in rows.items()}
    for name, verdict in DOCKER_DEFAULTS.items():
        assert verdicts[name] == verdict, rows[name]
    assert "eth0" in rows["net.interfaces"]["evidence"]
    assert "no connection was attempted" in rows["net.tcp4"]["observed"]
    for name in not_applicable:
        assert verdicts[name] == "skipped", rows[name]
    data = json.loads(report.read_text())
    assert data["backend"] == "command" and data["sandbox"]["command"] == _docker_run(image)


# weakness: (its docker run flags, the rows it must break)
WEAKNESSES: dict[str, tuple[list[str], list[str]]] = {
    "docker_socket": (["-v", "/var/run/docker.sock:/var/run/docker.sock"], ["files.engine_socket"]),
    "host_path": (["-v", "{host_dir}:/mnt/host"], ["files.bind_mounts"]),
    "privileged": (["--privileged"], ["priv.capabilities", "priv.mount_unshare", "proc.masked"]),
    # Docker's default bridge: the rows see an interface and connect to nothing (network.py).
    "network": (["--network", "bridge"], ["net.interfaces", "net.tcp4", "net.udp4"]),
}
# Each weakness is one flag added to this hardened line (root, so that a socket or a privilege
# it is given is usable; a later flag wins over --network none).
HARDENED = [
    *("--network", "none"),
    *("--read-only", "--tmpfs", "/tmp"),
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
    "-u",
    "0",
]
ROWS = sorted({row for _, rows in WEAKNESSES.values() for row in rows})


def _audit_rows(command: str, tmp_path: Path, name: str, rows: list[str]) -> dict[str, dict[str, Any]]:
    report = tmp_path / f"{name}.json"
    args = ["sandbox", "audit", "--command", command, "--json", str(report)]
    for row in rows:
        args += ["--only", row]
    result = audit_in_process(*args)
    assert result.returncode in (0, 1), result.stderr[-2000:]
    return rows_of(report)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_one_weakness_breaks_its_own_row(tmp_path: Path, image: str) -> None:
    host_dir = tmp_path / "host-dir"
    host_dir.mkdir()
    hardened = _audit_rows(_docker_run(image, *HARDENED), tmp_path, "hardened", ROWS)
    for row in ROWS:
        assert hardened[row]["verdict"] == "held", hardened[row]
    for weakness, (flags, broken) in WEAKNESSES.items():
        extra = [flag.replace("{host_dir}", str(host_dir)) for flag in flags]
        # A weakened line is graded on the rows it must break (each a `docker run` of its own);
        # the line shown the host directory runs every row, all of which must leave it empty.
        only = ROWS if weakness == "host_path" else broken
        rows = _audit_rows(_docker_run(image, *HARDENED, *extra), tmp_path, weakness, only)
        for row in broken:
            assert rows[row]["verdict"] == "broken", (weakness, rows[row])
    assert not any(host_dir.iterdir()), "the audit wrote into the host directory it was shown"
