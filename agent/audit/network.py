"""Isolation: the network. No probe ever leaves the machine.

Every program that would connect to a non-loopback address first lists the interfaces in
the same call (the same fresh sandbox) and connects to nothing when any interface other
than loopback exists: that alone is reported broken, with the interface list as evidence.
Targets are documentation-only ranges (192.0.2.0/24, 2001:db8::/32), the docker bridge's
usual gateway and the cloud metadata address, which must fail at once for want of a route.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
from collections.abc import Iterator

from proctor.agent.audit.model import (
    AuditContext,
    Check,
    CheckFunc,
    Finding,
    Verdict,
    escape_text,
    no_reply,
    run_probe,
)

KLASS = "isolation: network"

# The network namespace's interfaces, from /proc/net/dev: socket.if_nameindex() asks netlink,
# which the sandbox's seccomp filter refuses (sandbox/docker/seccomp.py).
_INTERFACES = "sorted(line.split(':')[0].strip() for line in open('/proc/net/dev').read().splitlines()[2:])"
_GATE = (
    "import socket, time, errno\n"
    f"names = {_INTERFACES}\n"
    """\
others = [name for name in names if name != "lo"]
if others:
    report(gated=True, interfaces=names)
    raise SystemExit(0)

def attempt(family, kind, address):
    started = time.monotonic()
    try:
        sock = socket.socket(family, kind)
    except OSError as exc:
        refused = errno.errorcode.get(exc.errno, str(exc.errno))
        return {"target": repr(address), "outcome": "socket() " + refused, "s": 0}
    sock.settimeout(1.5)
    try:
        if kind == socket.SOCK_STREAM:
            sock.connect(address)
        else:
            sock.connect(address)
            sock.send(b"proctor-audit")
        outcome = "CONNECTED"
    except socket.timeout:
        outcome = "timeout"
    except OSError as exc:
        outcome = errno.errorcode.get(exc.errno, str(exc.errno))
    finally:
        sock.close()
    return {"target": repr(address), "outcome": outcome, "s": round(time.monotonic() - started, 3)}
"""
)


def _connect_probe(targets: list[tuple[str, str, tuple[object, ...]]]) -> str:
    lines = [
        f"    attempt(socket.{family}, socket.{kind}, {address!r})," for family, kind, address in targets
    ]
    return _GATE + "results = [\n" + "\n".join(lines) + "\n]\nreport(interfaces=names, results=results)\n"


def _judge_attempts(reply: dict[str, object]) -> Finding:
    if reply.get("gated"):
        return Finding(
            Verdict.BROKEN,
            "a non-loopback interface exists; no connection was attempted",
            escape_text(f"interfaces: {reply.get('interfaces')}"),
        )
    results = reply.get("results")
    if not isinstance(results, list):
        return Finding(Verdict.BROKEN, "the probe's reply is malformed", escape_text(repr(reply)))
    connected = [r for r in results if r.get("outcome") == "CONNECTED"]
    slow = [r for r in results if r.get("outcome") == "timeout" or float(r.get("s", 0)) > 1.0]
    summary = "; ".join(f"{r.get('target')}: {r.get('outcome')} in {r.get('s')} s" for r in results)
    if connected:
        return Finding(
            Verdict.BROKEN, f"{len(connected)} of {len(results)} attempts connected", escape_text(summary)
        )
    if slow:
        return Finding(Verdict.WEAK, "every attempt failed, some only after waiting", escape_text(summary))
    return Finding(Verdict.HELD, f"all {len(results)} attempts failed at once", escape_text(summary))


async def interfaces(ctx: AuditContext) -> Finding:
    result, reply = await run_probe(
        ctx,
        f"report(interfaces={_INTERFACES}, dev=open('/proc/net/dev').read().splitlines()[2:])\n",
    )
    if reply is None:
        return no_reply(result)
    names = reply.get("interfaces") or []
    evidence = escape_text(f"interfaces: {names}")
    if any(name != "lo" for name in names):
        return Finding(Verdict.BROKEN, f"interfaces {names}", evidence)
    return Finding(Verdict.HELD, "loopback only" if names else "no interface at all", evidence)


def _attempts(targets: list[tuple[str, str, tuple[object, ...]]]) -> CheckFunc:
    async def run(ctx: AuditContext) -> Finding:
        result, reply = await run_probe(ctx, _connect_probe(targets), timeout=15.0)
        return no_reply(result) if reply is None else _judge_attempts(reply)

    return run


async def dns(ctx: AuditContext) -> Finding:
    body = _GATE + (
        "outcomes = []\n"
        "for name in ('example.com', 'metadata.google.internal', 'host.docker.internal'):\n"
        "    started = time.monotonic()\n"
        "    try:\n"
        "        found = socket.getaddrinfo(name, 80)\n"
        "        outcome = 'RESOLVED ' + str(sorted({f[4][0] for f in found}))\n"
        "    except OSError as exc:\n"
        "        outcome = type(exc).__name__ + ' ' + str(exc)\n"
        "    took = round(time.monotonic() - started, 3)\n"
        "    outcomes.append({'target': name, 'outcome': outcome, 's': took})\n"
        "report(interfaces=names, results=outcomes)\n"
    )
    result, reply = await run_probe(ctx, body, timeout=20.0)
    if reply is None:
        return no_reply(result)
    if reply.get("gated"):
        return _judge_attempts(reply)
    results = reply.get("results") or []
    summary = "; ".join(f"{r['target']}: {r['outcome']} in {r['s']} s" for r in results)
    resolved = [r for r in results if str(r["outcome"]).startswith("RESOLVED")]
    if resolved:
        return Finding(Verdict.BROKEN, f"{len(resolved)} name(s) resolved", escape_text(summary))
    if any(float(r["s"]) > 2.0 for r in results):
        return Finding(Verdict.WEAK, "no name resolved, some only after waiting", escape_text(summary))
    return Finding(Verdict.HELD, f"none of {len(results)} names resolved", escape_text(summary))


@contextlib.contextmanager
def _host_abstract_listener() -> Iterator[str]:
    """A listening abstract unix socket in the audit's own (host) network namespace."""
    name = f"proctor-audit-{secrets.token_hex(8)}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind("\0" + name)
        listener.listen(1)
        yield name
    finally:
        listener.close()


async def abstract_unix(ctx: AuditContext) -> Finding:
    with _host_abstract_listener() as name:
        body = (
            "import socket, errno\n"
            # Listed before this program makes a socket of its own.
            "lines = open('/proc/net/unix').read().splitlines()[1:]\n"
            "sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
            "try:\n"
            f"    sock.connect('\\0' + {name!r})\n"
            "    outcome = 'CONNECTED'\n"
            "except OSError as exc:\n"
            "    outcome = errno.errorcode.get(exc.errno, str(exc.errno))\n"
            "named = [line.split()[-1] for line in lines if len(line.split()) > 7][:5]\n"
            "report(outcome=outcome, visible=len(lines), sample=named)\n"
        )
        result, reply = await run_probe(ctx, body)
    if reply is None:
        return no_reply(result)
    evidence = escape_text(
        f"connect to host's @{name}: {reply['outcome']}; /proc/net/unix lists {reply['visible']} "
        f"socket(s) {reply['sample']}"
    )
    if reply["outcome"] == "CONNECTED":
        return Finding(Verdict.BROKEN, "reached an abstract socket of the host", evidence)
    if reply["visible"]:
        return Finding(
            Verdict.WEAK, f"{reply['visible']} unix socket(s) of other processes are listed", evidence
        )
    return Finding(Verdict.HELD, "the host's abstract socket is unreachable; no socket listed", evidence)


DOC_V4 = "192.0.2.1"
DOC_V6 = "2001:db8::1"
CHECKS = [
    Check(
        "net.interfaces",
        KLASS,
        "list network interfaces inside the sandbox",
        "loopback only",
        interfaces,
        quick=True,
    ),
    Check(
        "net.tcp4",
        KLASS,
        f"TCP connect to {DOC_V4}:80 and the docker gateway 172.17.0.1:2375",
        "fails at once (no route)",
        _attempts(
            [("AF_INET", "SOCK_STREAM", (DOC_V4, 80)), ("AF_INET", "SOCK_STREAM", ("172.17.0.1", 2375))]
        ),
        quick=True,
    ),
    Check(
        "net.udp4",
        KLASS,
        f"UDP datagram to {DOC_V4}:53",
        "fails at once (no route)",
        _attempts([("AF_INET", "SOCK_DGRAM", (DOC_V4, 53))]),
    ),
    Check(
        "net.ipv6",
        KLASS,
        f"TCP and UDP to [{DOC_V6}]",
        "fails at once (no route)",
        _attempts([("AF_INET6", "SOCK_STREAM", (DOC_V6, 80)), ("AF_INET6", "SOCK_DGRAM", (DOC_V6, 53))]),
    ),
    Check(
        "net.metadata",
        KLASS,
        "TCP connect to the metadata address 169.254.169.254:80",
        "fails at once (no route)",
        _attempts([("AF_INET", "SOCK_STREAM", ("169.254.169.254", 80))]),
    ),
    Check("net.dns", KLASS, "resolve example.com and two well-known internal names", "nothing resolves", dns),
    Check(
        "net.abstract_unix",
        KLASS,
        "connect to an abstract unix socket the audit listens on in the host's namespace",
        "unreachable; no other process's socket listed",
        abstract_unix,
        quick=True,
        host_side=True,
    ),
]
