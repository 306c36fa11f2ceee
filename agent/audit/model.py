"""What an audit check is, what it finds, and how its evidence is kept short and inert."""

from __future__ import annotations

import enum
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from proctor.sandbox import ExecResult, Limits, Sandbox

EVIDENCE_CHARS = 400
RESULT_MARK = "AUDIT-RESULT "


class Verdict(enum.StrEnum):
    HELD = "held"
    WEAK = "weak"
    BROKEN = "broken"
    # Not applicable to this backend (say, the controller sweep on local); never a pass.
    SKIPPED = "skipped"


class NotRun(Exception):
    """The sandbox refused to run a row's program (an Inspect provider's exec raised): the row
    is graded "skipped" with this reason, never held, since nothing was measured."""


@dataclass(frozen=True)
class Finding:
    verdict: Verdict
    observed: str
    evidence: str = ""


@dataclass
class AuditContext:
    """Everything a check may use: the sandbox under audit and the limits it was opened with."""

    sandbox: Sandbox
    limits: Limits
    backend: str
    quick: bool = False
    # The image the sandbox was opened with (the SIGKILL check opens its own controller on it).
    image: str | None = None
    runtime: str | None = None
    # The engine socket the sandbox's containers run on (the SIGKILL check's controller uses it).
    engine: str | None = None
    # Ray: the node every call of this context runs on (the audit checks each node in turn).
    node: str | None = None
    # Whether the calls run on this process's own kernel, so that what a check plants on or
    # looks for in "the host" is the host of the program (False for a ray node elsewhere).
    host_local: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


CheckFunc = Callable[[AuditContext], Awaitable[Finding]]

# Proctor's own backends: a check that measures what only they do leaves out "command".
PROCTOR_BACKENDS = ("docker", "local", "ray")
# An Inspect AI sandbox provider, reached through --inspect (inspect_sandbox.py). Unlike a
# command, the provider itself enforces each call's timeout and output cap, so those rows grade it.
INSPECT = "inspect"
# Through --command the audit itself kills the command's process group at the timeout and caps
# what it reads: a row about either would grade the audit's adapter, not the sandbox.
# A foreign sandbox may run the program as PID 1 (`docker run` without --init): its
# PTRACE_TRACEME makes containerd's shim the tracer, and that process then survives
# `docker rm -f` in tracing stop until killed from the host. The TRACEME rows attack Proctor's
# own supervisor; through --command they would leave such a process on the auditor's host.
COMMAND_TRACEME = (
    "not applicable through --command: PTRACE_TRACEME from a PID 1 makes the engine's shim its "
    "tracer, and the process outlives its container (the rows attack Proctor's own supervisor)"
)
INSPECT_TRACEME = (
    "not applicable through --inspect: PTRACE_TRACEME makes the provider's own process the "
    "program's tracer (this audit itself, for local); the rows attack Proctor's own supervisor"
)
COMMAND_OWN_TIMEOUT = (
    "not applicable through --command: the audit enforces the timeout itself (it kills the "
    "command's process group); whether the sandbox behind it stops the program is host-side"
)
COMMAND_OWN_CAP = (
    "not applicable through --command: the audit's own reader caps the output, so the row "
    "would measure the audit, not the sandbox"
)


@dataclass(frozen=True)
class Check:
    """One row of the audit. ``quick`` checks make up ``--quick``; ``timeout_s`` bounds the row."""

    id: str
    klass: str
    tried: str
    expected: str
    run: CheckFunc
    quick: bool = False
    timeout_s: float = 20.0
    # "command": a sandbox Proctor did not build, reached through --command (command_sandbox.py);
    # "inspect": an Inspect AI provider's exec, reached through --inspect (inspect_sandbox.py).
    backends: tuple[str, ...] = ("docker", "local", "ray", "command", INSPECT)
    # Why the check cannot apply to a backend it leaves out, in one line (shown on its row).
    not_applicable: Mapping[str, str] = field(default_factory=dict)
    # The check plants something on the audit's own host, or looks there (a file, a process,
    # an abstract socket): it means something only where the program runs on that host.
    host_side: bool = False


@dataclass(frozen=True)
class Row:
    id: str
    klass: str
    tried: str
    expected: str
    observed: str
    verdict: Verdict
    evidence: str
    duration_s: float
    # Ray: the node this row's calls ran on ("<node ID prefix> (<hostname>)"); None elsewhere.
    node: str | None = None

    def to_dict(self) -> dict[str, Any]:
        where = {"node": self.node} if self.node is not None else {}
        return {
            **where,
            "id": self.id,
            "class": self.klass,
            "tried": self.tried,
            "expected": self.expected,
            "observed": self.observed,
            "verdict": self.verdict.value,
            "evidence": self.evidence,
            "duration_s": round(self.duration_s, 3),
        }


def escape_text(text: str, limit: int = EVIDENCE_CHARS) -> str:
    """Printable ASCII only, bounded: sandbox output can never drive a terminal or a page.

    Backslashes pass through unchanged, so escaping twice gives the same text.
    """
    out: list[str] = []
    for char in text:
        if char == "\n":
            out.append("\\n")
        elif " " <= char <= "~":
            out.append(char)
        else:
            code = ord(char)
            out.append(
                f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
            )
        if len(out) > limit:
            break
    joined = "".join(out)
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."


def probe_reply(result: ExecResult) -> dict[str, Any] | None:
    """The JSON object a probe program printed last, or None when it never got that far."""
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            try:
                reply = json.loads(line[len(RESULT_MARK) :])
            except json.JSONDecodeError:
                return None
            return reply if isinstance(reply, dict) else None
    return None


def describe_exec(result: ExecResult) -> str:
    """A short account of how a call ended, for evidence."""
    if result.timed_out:
        ending = "timed out"
    elif result.oom_killed:
        ending = f"oom-killed (exit {result.exit_code})"
    else:
        ending = f"exit {result.exit_code}"
    tail = result.stderr.strip()[-200:]
    return f"{ending} after {result.duration_s:.2f} s" + (f"; stderr: {tail}" if tail else "")


# Prepended to every probe program: a way to report back that survives partial failures.
PROBE_PRELUDE = f"""\
import json as _json, sys as _sys
def report(**values):
    _sys.stdout.write({RESULT_MARK!r} + _json.dumps(values) + "\\n")
    _sys.stdout.flush()
"""


async def run_probe(
    ctx: AuditContext,
    body: str,
    *,
    timeout: float = 10.0,
    stdin: str | None = None,
    limits: Limits | None = None,
) -> tuple[ExecResult, dict[str, Any] | None]:
    """Run one probe program through ``Sandbox.exec``, exactly as an eval's tool call would."""
    result = await ctx.sandbox.exec(PROBE_PRELUDE + body, timeout=timeout, stdin=stdin, limits=limits)
    return result, probe_reply(result)


def shared_host(ctx: AuditContext) -> dict[str, Any] | None:
    """What the sandbox found when its programs run in this audit's own PID namespace and can
    signal the audit's process (an Inspect provider with no isolation, such as ``local``);
    None otherwise. Rows that attack other processes, or use up a per-uid kernel quota, are then
    graded on that evidence and not attempted: they would stop or starve the machine itself."""
    found = ctx.sandbox.describe().get("shared_host")
    return found if isinstance(found, dict) else None


def no_reply(result: ExecResult) -> Finding:
    """The probe died before it could answer: broken, because nothing was measured."""
    return Finding(Verdict.BROKEN, "the probe did not report", escape_text(describe_exec(result)))


def mib(value: float) -> str:
    return f"{value / (1024 * 1024):.0f} MiB"
