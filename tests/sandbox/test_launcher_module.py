"""The launcher is a real module (sandbox/docker/launcher.py) shipped as its own text (issue 37).

Invariants: the ``-c`` argument every container gets is the module's source, byte for byte; that
text runs with the standard library alone (no ``proctor`` in the container) and loads none of
the modules it avoids for start-up time; it holds the wait code the local backend's init runs,
verbatim; and its pure parts agree with the host's side of each exchange: the exit report the
host parses, the JSON it reads, and the entrypoint's tree it records and rebuilds.
The containers that run it are tested in test_launcher_attacks.py, test_containment.py,
test_conformance.py, test_recycling.py and test_oci_direct.py.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.sandbox.api import Limits
from proctor.sandbox.docker import containers, launcher, prepare_once
from proctor.sandbox.docker.containers import _REPORT_MAX, LAUNCHER, _Stream, container_settings
from proctor.sandbox.reaper import DEFAULT_SIGNALS_SOURCE, WAIT_SOURCE

MODULE_FILE = Path(launcher.__file__)


def _settings() -> dict[str, object]:
    # A client with a version never asks the engine anything: create_host_config is local.
    api = docker.APIClient(base_url="unix:///nonexistent/docker.sock", version="1.41")
    return container_settings(
        api, Limits(), {"proctor.sandbox": "1"}, "10001:10001", None, "runc", 0x60000001
    )


def test_every_container_runs_the_modules_own_text_byte_for_byte() -> None:
    source = MODULE_FILE.read_bytes()
    assert LAUNCHER.encode("utf-8") == source
    assert inspect.getsource(launcher) == LAUNCHER
    entrypoint = _settings()["entrypoint"]
    assert isinstance(entrypoint, list)
    assert entrypoint[:4] == ["python3", "-I", "-S", "-c"]
    assert entrypoint[4].encode("utf-8") == source
    assert json.loads(entrypoint[5])["seccomp"]  # the configuration is the argument after it


def test_the_text_fits_in_one_argument_and_has_no_nul() -> None:
    assert "\0" not in LAUNCHER and len(LAUNCHER.encode()) < 128 * 1024


# In an isolated interpreter started as the container starts it (-I -S) from a folder with no
# proctor: define the launcher's text without running main (its name is not __main__ here), and
# report what that loaded.
_ISOLATED = r"""
import sys
before = set(sys.modules)
namespace = {"__name__": "launcher_probe"}
exec(compile(sys.stdin.read(), "<launcher>", "exec"), namespace)
print(sorted(set(sys.modules) - before))
print(callable(namespace["main"]), callable(namespace["wait"]), callable(namespace["default_signals"]))
"""


def test_the_text_needs_only_the_standard_library_and_loads_none_of_the_slow_wrappers(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _ISOLATED],
        input=LAUNCHER,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", "")},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded_line, callables = done.stdout.splitlines()
    loaded = set(json.loads(loaded_line.replace("'", '"')))
    assert not {name for name in loaded if name.split(".")[0] == "proctor"}
    # What the launcher avoids for start-up time (it uses the C cores _json, _signal, _thread).
    assert not loaded & {"typing", "re", "json", "enum", "functools", "collections", "signal", "threading"}
    assert callables == "True True True"


def test_the_launcher_holds_the_local_inits_wait_code_verbatim() -> None:
    # One ptrace policy for both supervisors (sandbox/reaper.py): the local backend's init embeds
    # this text, the launcher is it.
    assert WAIT_SOURCE in LAUNCHER
    assert DEFAULT_SIGNALS_SOURCE in LAUNCHER


def test_the_host_reads_the_launchers_own_markers() -> None:
    assert containers.READY_MARKER == launcher.READY
    assert containers.HEADER_DIGITS == launcher.HEADER_DIGITS == 10


@settings(max_examples=40, deadline=None)
@given(
    nonce=st.binary(min_size=16, max_size=16).map(bytes.hex),
    code=st.integers(0, 128 + 64),
    oom=st.integers(0, 1),
    reusable=st.integers(0, 1),
    cpu=st.tuples(*[st.integers(0, 10**13)] * 3),
    output=st.binary(max_size=300),
)
def test_every_exit_report_the_launcher_writes_is_read_by_the_host_and_kept_out_of_the_output(
    nonce: str, code: int, oom: int, reusable: int, cpu: tuple[int, int, int], output: bytes
) -> None:
    report = launcher.exit_report(nonce, code, oom, reusable, *cpu)
    assert len(report) <= _REPORT_MAX  # the host watches only that many trailing bytes
    stream = _Stream(1 << 20, nonce)
    stream.feed(output)
    stream.feed(report)
    assert stream.report == (code, oom == 1, reusable == 1)
    assert stream.cpu_us == cpu
    assert stream.buffer.text() == output.decode("utf-8", errors="replace")
    # The same bytes under another call's nonce are only output: a program cannot forge one.
    other = _Stream(1 << 20, "0" * 32 if nonce != "0" * 32 else "1" * 32)
    other.feed(report)
    assert other.report is None


_JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
)
_JSON = st.recursive(
    _JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@pytest.fixture(params=["c-scanner", "json-module"])
def json_loads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    if request.param == "json-module":
        monkeypatch.setattr(launcher, "scan_json", None)  # an interpreter without _json
    else:
        assert launcher.scan_json is not None
    yield launcher.json_loads


@settings(max_examples=40, deadline=None)
@given(value=_JSON)
def test_the_launchers_json_reads_what_the_host_writes(value: object) -> None:
    scanner = launcher.scan_json
    assert scanner is not None
    try:
        for launcher.scan_json in (scanner, None):  # the C scanner, and json where there is none
            for text in (json.dumps(value), json.dumps(value).encode()):
                assert launcher.json_loads(text) == value
    finally:
        launcher.scan_json = scanner


@pytest.mark.parametrize("text", ['{"argv": []} x', "[1] [2]", '"a"\n{'])
def test_the_launchers_json_refuses_trailing_data(text: str, json_loads: object) -> None:
    assert callable(json_loads)
    with pytest.raises(ValueError):
        json_loads(text)


def test_both_json_paths_read_a_request_alike(json_loads: object) -> None:
    assert callable(json_loads)
    request = {"argv": ["python3", "-c", "print('é')"], "nonce": "ab" * 16, "backstop_s": 7, "keep": True}
    assert json_loads(json.dumps(request).encode()) == request
    assert math.isinf(json_loads("Infinity"))


# -- The entrypoint's tree: recorded by a probe container, rebuilt in every other -------------


def _listing(root: Path) -> list[tuple[str, str, int, bytes]]:
    """An independent oracle: every entry under ``root``, its kind, mode and content or target."""
    found = []
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        relative = path.relative_to(root).as_posix()
        if stat.S_ISLNK(info.st_mode):
            found.append((relative, "l", 0, os.readlink(path).encode()))
        elif stat.S_ISDIR(info.st_mode):
            found.append((relative, "d", stat.S_IMODE(info.st_mode), b""))
        else:
            found.append((relative, "f", stat.S_IMODE(info.st_mode), path.read_bytes()))
    return found


def _record_and_parse(root: Path) -> list[prepare_once.Entry]:
    lines = launcher.recorded(os.fsencode(root), [])
    answer = launcher.PREPARED + b"tree\n" + "".join(line + "\n" for line in lines).encode() + b"\0"
    parsed = prepare_once.parse_probe(answer)
    assert not isinstance(parsed, str), parsed
    return parsed


@pytest.fixture
def as_this_user(monkeypatch: pytest.MonkeyPatch) -> None:
    # recorded() accepts only the sandbox user's entries: here, whoever runs the tests.
    monkeypatch.setattr(launcher, "uid", os.getuid())
    monkeypatch.setattr(launcher, "gid", os.getgid())


_NAMES = st.text(alphabet="abcxyz019_.-é", min_size=1, max_size=6).filter(
    lambda name: name not in (".", "..")
)
_FILES = st.tuples(st.binary(max_size=64), st.sampled_from([0o600, 0o644, 0o400, 0o755]))
_TREES = st.recursive(
    st.dictionaries(_NAMES, _FILES | st.builds(lambda target: ("->", target), _NAMES), max_size=3),
    lambda inner: st.dictionaries(_NAMES, inner | _FILES, max_size=3),
    max_leaves=8,
)


def _make(root: Path, tree: dict[str, object]) -> None:
    for name, entry in tree.items():
        path = root / name
        if isinstance(entry, dict):
            path.mkdir(mode=0o700)
            _make(path, entry)
            path.chmod(0o750 if len(entry) % 2 else 0o755)
        elif isinstance(entry, tuple) and entry[0] == "->":
            path.symlink_to(str(entry[1]))
        else:
            assert isinstance(entry, tuple)
            content, mode = entry
            assert isinstance(content, bytes) and isinstance(mode, int)
            path.write_bytes(content)
            path.chmod(mode)


@settings(max_examples=15, deadline=None)
@given(tree=_TREES)
def test_a_recorded_tree_is_rebuilt_exactly(
    tree: dict[str, object], tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("prepared")
    _make(root, tree)
    before = _listing(root)
    saved = launcher.uid, launcher.gid
    launcher.uid, launcher.gid = os.getuid(), os.getgid()  # the sandbox user: whoever runs this
    try:
        entries = _record_and_parse(root)
    finally:
        launcher.uid, launcher.gid = saved
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            child.chmod(0o700)
            for inner in child.rglob("*"):
                if inner.is_dir() and not inner.is_symlink():
                    inner.chmod(0o700)
            shutil.rmtree(child)
        else:
            child.unlink()
    launcher.REPLAY = entries
    try:
        launcher.rebuild()
    finally:
        launcher.REPLAY = None
    assert _listing(root) == before


@pytest.mark.parametrize("kind", ["hard link", "fifo", "extended attribute", "another owner"])
def test_what_a_rebuild_could_not_make_the_same_is_refused_by_name(
    kind: str, tmp_path: Path, as_this_user: None
) -> None:
    (tmp_path / "kept").write_bytes(b"x")
    odd = tmp_path / "odd"
    if kind == "hard link":
        os.link(tmp_path / "kept", odd)
    elif kind == "fifo":
        os.mkfifo(odd)
    elif kind == "extended attribute":
        odd.write_bytes(b"y")
        try:
            os.setxattr(odd, "user.proctor", b"1")
        except OSError as exc:
            pytest.skip(f"this filesystem takes no user xattrs: {exc}")
    else:
        if os.getuid() != 0:
            pytest.skip("giving a file away needs root")
        odd.write_bytes(b"y")
        os.chown(odd, os.getuid() + 4242, os.getgid())
    with pytest.raises(ValueError, match="odd" if kind != "hard link" else "kept"):
        launcher.recorded(os.fsencode(tmp_path), [])
