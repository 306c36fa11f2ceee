"""`proctor sandbox audit --inspect NAME`: the battery through an Inspect AI provider's exec.

Inspect's own ``local`` provider runs each program as a plain process of this machine, so its
rows must grade broken: the grading can fail. Providers registered here (through Inspect's own
``sandboxenv`` decorator, as a plug-in registers) end their calls each way Inspect allows: a
timeout, an output cut, a refusal, a call that never returns; each must be graded for what it
is, a refusal as "not run" and never as held. Without ``--inspect`` nothing imports Inspect.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("inspect_ai")

from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxEnvironment,
    SandboxUnavailableError,
    sandboxenv,
)

from proctor.agent.audit import audit_sandbox
from proctor.agent.audit import inspect_sandbox as adapter
from proctor.agent.audit.battery import ALL_CHECKS
from proctor.agent.audit.compare import INSPECT_NOTE, parse_specs
from proctor.agent.audit.inspect_sandbox import InspectSandbox, ProviderDidNotReturn
from proctor.agent.audit.model import Verdict
from proctor.sandbox import Limits
from tests.support.cli import proctor_in_process

REPO = Path(__file__).resolve().parents[2]


# -- providers that end a call each way Inspect allows ------------------------------------------


class _Scripted(SandboxEnvironment):
    """Runs nothing; each call ends as ``ending`` says (set per provider below)."""

    ending = "refuse"
    calls: ClassVar[list[str]] = []

    @classmethod
    async def sample_init(
        cls, task_name: str, config: Any, metadata: dict[str, str]
    ) -> dict[str, SandboxEnvironment]:
        return {"default": cls()}

    @classmethod
    async def sample_cleanup(
        cls, task_name: str, config: Any, environments: dict[str, SandboxEnvironment], interrupted: bool
    ) -> None:
        cls.calls.append("sample_cleanup")

    async def exec(  # type: ignore[override]
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        type(self).calls.append(f"exec timeout={timeout} retry={timeout_retry}")
        if self.ending == "refuse":
            raise SandboxUnavailableError("the sandbox is not running")
        if self.ending == "timeout":
            raise TimeoutError
        if self.ending == "cut":
            raise OutputLimitExceededError("10 MiB", "kept tail")
        if self.ending == "hang":
            await asyncio.Event().wait()
        return ExecResult(True, 0, "", "")

    async def write_file(self, file: str, contents: str | bytes) -> None:
        raise NotImplementedError

    async def read_file(self, file: str, text: bool = True) -> Any:  # type: ignore[override]
        raise NotImplementedError


PROVIDERS: dict[str, type[_Scripted]] = {}


def _provider(ending: str) -> str:
    """Registered as a plug-in registers: through Inspect's own decorator and registry."""
    name = f"proctor-audit-test-{ending}"

    @sandboxenv(name=name)
    class Provider(_Scripted):
        pass

    Provider.ending = ending
    Provider.calls = []
    PROVIDERS[name] = Provider
    return name


REFUSING, TIMING_OUT, CUTTING, HANGING = (_provider(e) for e in ("refuse", "timeout", "cut", "hang"))


async def test_a_provider_that_refuses_every_call_passes_no_row() -> None:
    """Every row of the battery through a provider whose exec always raises: not one is held."""
    sandbox = await InspectSandbox.open(REFUSING)
    try:
        report = await audit_sandbox(sandbox, Limits())
    finally:
        await sandbox.aclose()
    assert {row.id for row in report.rows} == {check.id for check in ALL_CHECKS}
    verdicts = {row.id: row.verdict for row in report.rows}
    assert Verdict.HELD not in verdicts.values() and Verdict.WEAK not in verdicts.values(), verdicts
    refused = [row for row in report.rows if row.observed.startswith("not run: the provider's exec raised")]
    assert len(refused) > len(ALL_CHECKS) // 2, [row.observed for row in report.rows]
    assert all(row.verdict is Verdict.SKIPPED for row in refused)
    # The lifecycle ran to its end, and no call was retried behind the audit's back.
    calls = PROVIDERS[REFUSING].calls
    assert calls[-1] == "sample_cleanup" and all("retry=False" in c for c in calls if c.startswith("exec"))


async def test_inspects_timeout_and_output_cut_are_mapped_to_the_audits_endings() -> None:
    for name, check in ((TIMING_OUT, "limits.wall_clock"), (CUTTING, "limits.output")):
        sandbox = await InspectSandbox.open(name)
        try:
            result = await sandbox.exec("print(1)", timeout=1.5)
            report = await audit_sandbox(sandbox, Limits(output_bytes=sandbox.output_cap), only=[check])
        finally:
            await sandbox.aclose()
        # Inspect takes whole seconds: 1.5 s is given as 2, never as 1.
        assert result.extra["timeout_given_s"] == 2
        if name == TIMING_OUT:
            assert result.timed_out and result.exit_code is None
        else:
            assert (result.stdout, result.stdout_truncated, result.stderr_truncated) == (
                "kept tail",
                True,
                True,
            )
            assert not result.timed_out and result.exit_code is None
        assert report.rows[0].verdict is Verdict.HELD, report.rows[0]


async def test_a_call_that_never_returns_is_a_broken_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adapter, "RETURN_GRACE_S", 0.5)
    monkeypatch.setattr(adapter, "IDENTITY_TIMEOUT_S", 0.5)
    sandbox = await InspectSandbox.open(HANGING)  # its identity probe is refused by the deadline
    try:
        with pytest.raises(ProviderDidNotReturn):
            await sandbox.exec("print(1)", timeout=0.2)
        report = await audit_sandbox(sandbox, Limits(), only=["limits.wall_clock"])
    finally:
        await sandbox.aclose()
    assert report.rows[0].verdict is Verdict.BROKEN and "ProviderDidNotReturn" in report.rows[0].evidence


# -- Inspect's own local provider: no isolation, so broken rows ---------------------------------

# Rows a bare process of this machine must fail, and rows that must still be measured.
LOCAL_BROKEN = {
    "files.host",
    "state.across_calls",
    "net.interfaces",
    "enforce.stop",
    "enforce.read",
    "state.per_uid_quota",
}


async def test_inspect_local_is_graded_broken_where_unisolated() -> None:
    """Inspect's local provider through its own lifecycle: every unisolated row broken, the
    timeout it does enforce held, and the attacks on this machine's processes proven from the
    program's identity without being made."""
    sandbox = await InspectSandbox.open("local")
    try:
        report = await audit_sandbox(
            sandbox, Limits(), only=[*sorted(LOCAL_BROKEN), "limits.wall_clock", "priv.traceme"]
        )
    finally:
        await sandbox.aclose()
    rows = {row.id: row for row in report.rows}
    for check_id in LOCAL_BROKEN:
        assert rows[check_id].verdict is Verdict.BROKEN, rows[check_id]
    assert "not attempted" in rows["enforce.stop"].observed
    assert rows["limits.wall_clock"].verdict is Verdict.HELD, rows["limits.wall_clock"]
    assert rows["priv.traceme"].verdict is Verdict.SKIPPED
    assert rows["priv.traceme"].observed.startswith("not applicable through --inspect")
    assert report.backend == "inspect" and report.sandbox["provider"] == "local"
    assert report.sandbox["host_local"] is True and report.sandbox["shared_host"]["signal"] == "delivered"


# -- the CLI: one table beside Proctor's own, one-line errors, no Inspect unless asked ----------


def test_compare_puts_inspect_local_beside_proctor_and_a_command(tmp_path: Path) -> None:
    out_json, out_html = tmp_path / "cmp.json", tmp_path / "cmp.html"
    only = ["--only", "files.host", "--only", "state.across_calls", "--only", "limits.wall_clock"]
    result = proctor_in_process(
        "sandbox",
        "audit",
        "--compare",
        f"local,inspect:local,bare={sys.executable} -",
        *only,
        "--json",
        str(out_json),
        "--html",
        str(out_html),
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(out_json.read_text())
    sandboxes = {entry["label"]: entry for entry in data["sandboxes"]}
    assert sandboxes["inspect:local"]["inspect_provider"] == "local"
    rows = {row["id"]: row["results"] for row in data["rows"]}
    assert rows["files.host"]["inspect:local"]["verdict"] == "broken"
    # A command's host side is not the audit's; Inspect's local provider is this very host.
    assert rows["files.host"]["bare"]["verdict"] == "skipped"
    assert rows["limits.wall_clock"]["inspect:local"]["verdict"] == "held"
    assert rows["limits.wall_clock"]["bare"]["verdict"] == "skipped"
    assert rows["state.across_calls"]["local"]["verdict"] == "held"  # Proctor's own local backend
    assert INSPECT_NOTE in " ".join(result.stdout.split())
    assert "inspect:local" in out_html.read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--inspect", "no-such-provider"],
            "no Inspect sandbox provider named 'no-such-provider'; installed: ",
        ),
        (
            ["--compare", "local,inspect:no-such-provider"],
            "no Inspect sandbox provider named 'no-such-provider'",
        ),
        (["--inspect-config", "x.yaml"], "--inspect-config: applies to --inspect only"),
        (["--inspect", "local", "--backend", "docker"], "--inspect: cannot be combined with --backend"),
        (["--inspect", "local", "--command", "x"], "--inspect: cannot be combined with --command"),
        (
            ["--inspect", "local", "--inspect-config", "/no/such.yaml"],
            "--inspect-config: /no/such.yaml is not a file",
        ),
        (["--compare", "local,inspect:"], "--compare: 'inspect:': name an Inspect provider"),
    ],
)
def test_bad_inspect_use_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = proctor_in_process("sandbox", "audit", *args)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert message in result.stderr
    if "installed: " in message:
        assert "docker" in result.stderr and "local" in result.stderr


def test_without_inspect_installed_the_error_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    result = proctor_in_process("sandbox", "audit", "--inspect", "local")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "error: --inspect: inspect_ai is not installed (pip install inspect-ai); installed providers: none"
    ) or result.stderr.strip().endswith("installed providers: none")
    assert len(result.stderr.strip().splitlines()) == 1


def test_proctor_and_an_audit_without_inspect_never_import_it() -> None:
    program = (
        "import sys\n"
        "import proctor\n"
        "from proctor.agent.cli import main\n"
        f"sys.argv = ['proctor', 'sandbox', 'audit', '--command', {sys.executable + ' -'!r}, "
        "'--only', 'priv.non_root']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "assert 'inspect_ai' not in sys.modules, sorted(m for m in sys.modules if m.startswith('inspect'))\n"
        "print('clean')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/local/bin:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.stdout.strip().endswith("clean"), result.stderr[-2000:]


_NAME = st.from_regex(r"[A-Za-z0-9_.-]{1,20}", fullmatch=True)
_CONFIG = st.from_regex(r"[A-Za-z0-9_./-]{1,30}", fullmatch=True)


@given(
    _NAME,
    st.one_of(st.none(), _CONFIG),
    st.one_of(st.none(), st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)),
)
@settings(max_examples=25, deadline=None)
def test_an_inspect_item_names_its_provider_config_and_label(
    name: str, config: str | None, label: str | None
) -> None:
    item = f"inspect:{name}" + (f":{config}" if config else "")
    if label in ("docker", "runc", "runsc", "local"):
        label = None
    specs = parse_specs([f"local,{label}={item}" if label else f"local,{item}"])
    spec = specs[1]
    assert (spec.backend, spec.provider, spec.config) == ("inspect", name, config)
    assert spec.label == (label or f"inspect:{name}")


# -- Proctor's own provider: the same rows hold (docker) ----------------------------------------


@pytest.fixture(scope="module")
def image() -> str:
    from proctor.sandbox.docker.image import image_tag

    return image_tag()


@pytest.mark.docker
@pytest.mark.timeout(300)
@pytest.mark.parametrize("isolation", ["per-sample", "fresh"])
async def test_proctors_provider_holds_the_rows_inspect_local_breaks(
    tmp_path: Path, image: str, isolation: str
) -> None:
    """The honest side: rows Inspect's local provider breaks hold through Proctor's own provider,
    so the grading above measures the sandbox, not the path through Inspect. Per-sample isolation
    shares one container and one uid between a sample's calls by design: files persist, and its
    calls can reach each other (docs/audit.md, "Docker's defaults beside Proctor's"); fresh
    isolation holds those rows too."""
    import proctor.sandbox.inspect_provider.provider  # noqa: F401  (registers it, as the entry point does)

    config = tmp_path / "proctor.yaml"
    config.write_text(f"image: {image}\nisolation: {isolation}\n")
    sandbox = await InspectSandbox.open("proctor", str(config))
    try:
        report = await audit_sandbox(
            sandbox,
            Limits(output_bytes=sandbox.output_cap),
            only=[*sorted(LOCAL_BROKEN), "limits.wall_clock", "priv.non_root"],
        )
    finally:
        await sandbox.aclose()
    rows = {row.id: row for row in report.rows}
    assert report.sandbox["shared_host"] is None, report.sandbox["program"]
    held = {"files.host", "net.interfaces", "limits.wall_clock", "priv.non_root"}
    if isolation == "fresh":
        held |= LOCAL_BROKEN
    for check_id in held:
        assert rows[check_id].verdict is Verdict.HELD, rows[check_id]
    if isolation == "per-sample":
        assert rows["state.across_calls"].verdict is Verdict.BROKEN, rows["state.across_calls"]
