"""runc-direct's seccomp filter, recorded once per template (sandbox/docker/seccomp_once.py): every
container holds the engine's filter to the byte, with the same flags and status, whoever
installed it; the helper runs nothing unfiltered; and anything that cannot be proved the same
keeps runc compiling the profile, with the reason.

The oracle is the engine itself: a container dockerd starts with the same settings (its own
containerd, shim and runc), whose init's filter the kernel hands back by ptrace."""

from __future__ import annotations

import contextlib
import copy
import json
import platform
import struct
import subprocess
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.sandbox import open_sandbox
from proctor.sandbox.docker import labels, oci_direct, seccomp_once
from proctor.sandbox.docker.containers import container_settings, remove_container
from proctor.sandbox.docker.runtimes import RUNC
from tests.sandbox import bpf_oracle
from tests.sandbox.conftest import TEST_LIMITS

ROOT_AND_RUNC = pytest.mark.skipif(oci_direct.available() is not None, reason=str(oci_direct.available()))

_RET_ALLOW = struct.pack("<HBBI", 0x06, 0, 0, 0x7FFF0000)
# execve fails with EPERM; everything else is allowed.
_EXECVE = {"x86_64": 59, "aarch64": 221}.get(platform.machine(), 59)
_EXECVE_REFUSED = (
    struct.pack("<HBBI", 0x20, 0, 0, 0)  # ld [nr]
    + struct.pack("<HBBI", 0x15, 0, 1, _EXECVE)  # jeq execve
    + struct.pack("<HBBI", 0x06, 0, 0, 0x00050001)  # ret errno EPERM
    + _RET_ALLOW
)


def _spec() -> dict[str, Any]:
    return {
        "process": {"args": ["/sbin/docker-init", "--", "python3", "{}"], "noNewPrivileges": True},
        "linux": {"seccomp": {"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"]}]}},
    }


def test_a_spec_the_helper_can_serve_is_named_and_every_other_says_why() -> None:
    assert seccomp_once.why_not(_spec()) is None
    changes = {
        "no profile": lambda s: s["linux"].pop("seccomp"),
        "filter flags": lambda s: s["linux"]["seccomp"].update(flags=["SECCOMP_FILTER_FLAG_LOG"]),
        "a listener": lambda s: s["linux"]["seccomp"].update(listenerPath="/run/x.sock"),
        "a notify rule": lambda s: s["linux"]["seccomp"]["syscalls"].append(
            {"names": ["mount"], "action": "SCMP_ACT_NOTIFY"}
        ),
        "no NNP": lambda s: s["process"].pop("noNewPrivileges"),
        "NNP false": lambda s: s["process"].update(noNewPrivileges=False),
        "relative program": lambda s: s["process"].update(args=["python3", "-c", "pass"]),
        "no program": lambda s: s["process"].update(args=[]),
    }
    for name, change in changes.items():
        spec = _spec()
        change(spec)
        assert seccomp_once.why_not(spec), name


@given(
    filter_bytes=st.binary(min_size=1, max_size=64).map(lambda b: b * 8), uid=st.integers(10**6, 2**31 - 1)
)
def test_a_recorded_template_changes_the_call_spec_only_by_the_helper_and_the_profile(
    filter_bytes: bytes, uid: int
) -> None:
    spec = {
        "process": {"args": ["/sbin/docker-init", "--", "python3", json.dumps({"uid": 1000})]},
        "linux": {"seccomp": {"defaultAction": "SCMP_ACT_ERRNO"}},
        "mounts": [],
    }
    plain = oci_direct.Template(spec, 1000, ("/l/a", "/l/b"))
    recorded = replace(plain, seccomp_filter=filter_bytes, helper=Path("/h"))
    name, bundle = "proctor-oci-1-0123456789abcdef-0123456789ab", Path("/b")
    ours = oci_direct.call_spec(recorded, name, uid, bundle)
    runc = oci_direct.call_spec(plain, name, uid, bundle)
    assert ours["process"]["args"] == [seccomp_once.HELPER_PATH, filter_bytes.hex(), *runc["process"]["args"]]
    assert "seccomp" not in ours["linux"] and "seccomp" in runc["linux"]
    runc["linux"].pop("seccomp")
    ours["process"]["args"] = runc["process"]["args"]
    assert ours == runc
    assert json.loads(oci_direct.call_spec_text(recorded, name, uid, bundle)) == oci_direct.call_spec(
        recorded, name, uid, bundle
    )
    assert oci_direct.runc_compiled(recorded) == replace(plain, _text=None)


def _filter(*rows: tuple[int, int, int, int]) -> bytes:
    return b"".join(struct.pack("<HBBI", *row) for row in rows)


def _arch_checks(first: int, second: int) -> bytes:
    """Allow getpid (39) on x86_64, refuse everything else; the two foreign-architecture checks
    in the order given (as runc's stub orders them by map iteration)."""
    return _filter(
        (0x20, 0, 0, 4),  # ld arch
        (0x15, 3, 0, first),  # foreign: kill
        (0x15, 2, 0, second),
        (0x20, 0, 0, 0),  # ld nr
        (0x15, 1, 2, 39),
        (0x06, 0, 0, 0),  # kill
        (0x06, 0, 0, 0x7FFF0000),
        (0x06, 0, 0, 0x00050001),
    )


def test_the_oracle_sees_a_reordering_as_the_same_filter_and_a_changed_answer_as_another() -> None:
    i386, arm = bpf_oracle.AUDIT_ARCH_I386, bpf_oracle.AUDIT_ARCH_ARM
    assert bpf_oracle.differences(_arch_checks(i386, arm), _arch_checks(arm, i386)) == []
    changed = bytearray(_arch_checks(i386, arm))
    struct.pack_into("<HBBI", changed, 4 * 8, 0x15, 1, 2, 40)  # getpid's number moved
    assert bpf_oracle.differences(_arch_checks(i386, arm), bytes(changed))
    # An argument the filter reads is explored: only clone flags with bit 28 clear are allowed.
    flags = _filter(
        (0x20, 0, 0, 0),
        (0x15, 0, 3, 56),  # clone
        (0x20, 0, 0, 16),  # ld args[0] low
        (0x45, 1, 0, 0x10000000),
        (0x06, 0, 0, 0x7FFF0000),
        (0x06, 0, 0, 0x00050001),
    )
    looser = bytearray(flags)
    struct.pack_into("<HBBI", looser, 3 * 8, 0x45, 1, 0, 0x20000000)
    assert bpf_oracle.differences(flags, flags) == []
    assert bpf_oracle.differences(flags, bytes(looser))


# -- the helper binary itself -------------------------------------------------------------------


@pytest.fixture(scope="module")
def helper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = seccomp_once.helper_binary(tmp_path_factory.mktemp("helpers"))
    if isinstance(built, str):
        pytest.skip(built)
    return built


def _status_through(helper: Path, filter_hex: str, program: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helper), filter_hex, *program], capture_output=True, text=True, timeout=30, check=False
    )


@pytest.mark.parametrize(
    "filter_hex",
    [
        "",
        "0",
        "06000000",
        "xx" * 8,
        (_RET_ALLOW.hex()).upper(),
        _RET_ALLOW.hex()[:-2],
        _RET_ALLOW.hex() * 4097,
    ],
)
def test_the_helper_refuses_a_malformed_filter_and_runs_nothing(
    helper: Path, filter_hex: str, tmp_path: Path
) -> None:
    mark = tmp_path / "ran"
    done = _status_through(helper, filter_hex, ["/bin/touch", str(mark)])
    assert done.returncode == 127 and done.stderr.startswith("seccomp-exec:")
    assert not mark.exists()


def test_the_helper_refuses_a_relative_program(helper: Path) -> None:
    done = _status_through(helper, _RET_ALLOW.hex(), ["true"])
    assert done.returncode == 127 and "ABSOLUTE" in done.stderr


def test_the_program_runs_under_exactly_the_filter_given(helper: Path) -> None:
    allowed = _status_through(helper, _RET_ALLOW.hex(), ["/bin/grep", "^Seccomp", "/proc/self/status"])
    assert allowed.returncode == 0, allowed.stderr
    assert "Seccomp:\t2" in allowed.stdout and "Seccomp_filters:\t1" in allowed.stdout
    # The filter is in before the program: an execve it refuses runs nothing.
    refused = _status_through(helper, _EXECVE_REFUSED.hex(), ["/bin/true"])
    assert refused.returncode == 127 and "Operation not permitted" in refused.stderr


# -- runc's filter, recorded and replayed ---------------------------------------------------------


@contextlib.asynccontextmanager
async def _direct_sandbox(image: str) -> AsyncIterator[tuple[Any, oci_direct.Template]]:
    """A runc-direct sandbox that has served one call, and its default template."""
    box: Any = await open_sandbox(
        "docker", image=image, pool_size=1, default_limits=TEST_LIMITS, engine_path="runc-direct"
    )
    try:
        result = await box.exec("pass", timeout=30)
        assert result.exit_code == 0, result.stderr
        yield box, box._template_for(box.default_limits, "pool", starting=False)
    finally:
        await box.aclose()


def _engine_init_filters(box: Any, uid: int) -> seccomp_once.Installed:
    """The filters of the init of a container dockerd itself starts with the template's settings."""
    settings = container_settings(
        box.api,
        box.default_limits,
        labels.container_labels(box.run_id, "template"),
        box.user,
        box.entrypoint,
        RUNC,
        uid,
        False,
    )
    created = box.api.create_container(box.image_id, **settings)
    try:
        box.api.start(created["Id"])
        pid = int(box.api.inspect_container(created["Id"])["State"]["Pid"])
        seccomp_once.wait_until_running(pid, "/sbin/docker-init", 30)
        return seccomp_once.installed(pid)
    finally:
        remove_container(box.api, created["Id"])


@pytest.mark.docker
@ROOT_AND_RUNC
async def test_every_container_holds_the_engines_own_filter_flags_and_status(sandbox_image: str) -> None:
    async with _direct_sandbox(sandbox_image) as (box, template):
        assert template.seccomp_filter is not None, template.seccomp
        assert template.seccomp in box.describe()["seccomp_install"]
        engine = await _in_thread(_engine_init_filters, box, template.uid)
        through_helper = await _in_thread(oci_direct._probe_filters, template, box.run_id)
        through_runc = await _in_thread(
            oci_direct._probe_filters, oci_direct.runc_compiled(template), box.run_id
        )
        assert len(engine.filters) == 1 and engine.filters[0][1] == 0
        # The helper installs exactly the bytes recorded, with the engine's flags and status.
        assert through_helper.filters == ((template.seccomp_filter, 0),)
        assert through_helper.status == through_runc.status == engine.status
        assert dict(engine.status)["NoNewPrivs"] == "1"
        # runc orders its stub's architecture checks as a Go map iterates, so the engine's
        # container and a fresh runc probe may hold other bytes: they must answer the same.
        for other in (engine, through_runc):
            assert len(other.filters) == 1 and other.filters[0][1] == 0
            assert bpf_oracle.differences(template.seccomp_filter, other.filters[0][0]) == []


@pytest.mark.docker
@ROOT_AND_RUNC
async def test_the_program_sees_no_trace_of_the_helper(sandbox_image: str) -> None:
    probe = (
        "import os\n"
        "links = []\n"
        "for n in os.listdir('/proc/self/fd'):\n"
        "    try:\n"
        "        links.append(os.readlink('/proc/self/fd/' + n))\n"
        "    except OSError:\n"
        "        pass  # listdir's own descriptor, closed by now\n"
        "print(sorted(l for l in links if 'seccomp' in l or 'helpers' in l))\n"
        "print(open('/proc/1/cmdline', 'rb').read().split(b'\\0')[0].decode())\n"
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('Seccomp')])\n"
        "print(any('helpers' in l or 'seccomp-exec' in l for l in open('/proc/self/mountinfo')))\n"
    )
    async with _direct_sandbox(sandbox_image) as (box, template):
        result = await box.exec(probe, timeout=30)
        assert template.seccomp_filter is not None, template.seccomp
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == ["[]", "/sbin/docker-init", "['2', '2']", "False"]


def _broken(template: oci_direct.Template) -> oci_direct.Template:
    spec = copy.deepcopy(template.spec)
    spec["process"]["noNewPrivileges"] = False
    return replace(template, spec=spec, _text=None)


@pytest.mark.docker
@ROOT_AND_RUNC
async def test_a_template_that_cannot_be_proved_keeps_runc_compiling_and_says_why(
    sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _direct_sandbox(sandbox_image) as (box, template):
        no_nnp = oci_direct.record_seccomp_once(_broken(template), box.run_id)
        assert no_nnp.seccomp_filter is None and "noNewPrivileges" in no_nnp.seccomp
        monkeypatch.setattr(seccomp_once, "helper_binary", lambda directory: "no C compiler (cc)")
        no_cc = oci_direct.record_seccomp_once(template, box.run_id)
        assert no_cc.seccomp_filter is None and no_cc.seccomp.endswith("no C compiler (cc)")
        # A helper that installs other bytes than runc's is caught by the second probe.
        monkeypatch.undo()
        real = oci_direct._probe_filters
        calls: list[int] = []

        def other_bytes(probed: oci_direct.Template, run_id: str) -> seccomp_once.Installed:
            calls.append(1)
            if probed.seccomp_filter is not None:
                probed = replace(probed, seccomp_filter=probed.seccomp_filter + _RET_ALLOW, _text=None)
            return real(probed, run_id)

        monkeypatch.setattr(oci_direct, "_probe_filters", other_bytes)
        monkeypatch.setattr(oci_direct, "_PROVED", {})  # no proof of this process stands in
        differs = await _in_thread(oci_direct.record_seccomp_once, template, box.run_id)
        assert len(calls) == 2 and differs.seccomp_filter is None and "exactly" in differs.seccomp


@pytest.mark.docker
@ROOT_AND_RUNC
async def test_a_proof_serves_every_template_of_the_same_profile_and_no_other(
    sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _direct_sandbox(sandbox_image) as (box, template):
        assert template.seccomp_filter is not None, template.seccomp
        probes: list[int] = []
        real = oci_direct._probe_filters

        def counted(probed: oci_direct.Template, run_id: str) -> seccomp_once.Installed:
            probes.append(1)
            return real(probed, run_id)

        monkeypatch.setattr(oci_direct, "_probe_filters", counted)
        again = await _in_thread(oci_direct.record_seccomp_once, template, box.run_id)
        assert probes == [] and again == template
        # Another profile (one more rule) is not covered by that proof: it is probed and proved.
        other_spec = copy.deepcopy(oci_direct.runc_compiled(template).spec)
        other_spec["linux"]["seccomp"]["syscalls"].append(
            {"names": ["ioprio_get"], "action": "SCMP_ACT_ALLOW"}
        )
        other = replace(oci_direct.runc_compiled(template), spec=other_spec, _text=None)
        recorded = await _in_thread(oci_direct.record_seccomp_once, other, box.run_id)
        assert len(probes) == 2 and recorded.seccomp_filter not in (None, template.seccomp_filter)


async def _in_thread(function: Any, *args: Any) -> Any:
    import asyncio

    return await asyncio.to_thread(function, *args)
