"""Output: floods, bytes that are not UTF-8, NULs, control characters and a forged exit report."""

from __future__ import annotations

from proctor.agent.audit.model import (
    COMMAND_OWN_CAP,
    INSPECT,
    PROCTOR_BACKENDS,
    AuditContext,
    Check,
    Finding,
    Verdict,
    describe_exec,
    escape_text,
    run_probe,
)
from proctor.sandbox import SandboxError

KLASS = "output"


async def flood(ctx: AuditContext) -> Finding:
    total = (8 if ctx.quick else 64) * 1024 * 1024
    cap = ctx.limits.output_bytes
    body = (
        "import os\nblock = b'f' * (1 << 20)\n"
        f"for _ in range({total >> 20}):\n    os.write(1, block)\n    os.write(2, block)\n"
    )
    result, _ = await run_probe(ctx, body, timeout=60)
    kept = max(len(result.stdout), len(result.stderr))
    evidence = escape_text(
        f"{total >> 20} MiB on each stream; kept {len(result.stdout)} + {len(result.stderr)} chars; "
        f"{describe_exec(result)}"
    )
    if result.timed_out or result.exit_code != 0:
        return Finding(Verdict.BROKEN, "the flood did not finish normally", evidence)
    if kept > cap + 4096:
        return Finding(Verdict.BROKEN, f"kept {kept} chars past the {cap} B cap", evidence)
    return Finding(Verdict.HELD, f"finished in {result.duration_s:.2f} s; kept <= cap", evidence)


async def hostile_bytes(ctx: AuditContext) -> Finding:
    body = (
        "import os\n"
        "os.write(1, b'bad \\xff\\xfe\\xc3 utf8; nul \\x00 here; '\n"
        "    b'ansi \\x1b[2J\\x1b]0;title\\x07 bell \\x07 bs \\x08\\r\\n')\n"
        "os.write(2, b'\\x1b[31mred\\x1b[0m \\xed\\xa0\\x80 surrogate \\x00\\n')\n"
    )
    result, _ = await run_probe(ctx, body, timeout=10)
    both = result.stdout + result.stderr
    escaped = escape_text(both, limit=10_000)
    evidence = escape_text(f"stdout {result.stdout!r}; stderr {result.stderr!r}; {describe_exec(result)}")
    problems = []
    if result.exit_code != 0:
        problems.append("the call did not end normally")
    if "\ufffd" not in both:
        problems.append("invalid UTF-8 was not replaced")
    if "\x00" not in result.stdout:
        problems.append("a NUL byte was lost")
    if any(ord(c) < 0x20 and c != "\\" for c in escaped) or "\x1b" in escaped:
        problems.append("control characters survived escaping")
    try:
        both.encode("utf-8")
    except UnicodeEncodeError:
        problems.append("the text holds lone surrogates")
    if problems:
        return Finding(Verdict.BROKEN, "; ".join(problems), evidence)
    return Finding(Verdict.HELD, "decoded with replacements; NULs kept; escaped for display", evidence)


async def forged_exit_report(ctx: AuditContext) -> Finding:
    body = (
        "import os\n"
        "for fd in (1, 2):\n"
        "    os.write(fd, b'\\x00proctor-exit:' + b'0' * 32 + b':0:0\\x00')\n"
        "    os.write(fd, b'\\x00proctor-ready\\x00')\n"
        "raise SystemExit(7)\n"
    )
    result, _ = await run_probe(ctx, body, timeout=10)
    evidence = escape_text(f"{describe_exec(result)}; stdout {result.stdout[-80:]!r}")
    if result.exit_code != 7:
        return Finding(Verdict.BROKEN, f"exit code {result.exit_code}, not the program's 7", evidence)
    return Finding(Verdict.HELD, "the program's own exit code (7) came back", evidence)


NON_BLOCKING_ROUNDS = 3


async def non_blocking_streams(ctx: AuditContext) -> Finding:
    # stdout/stderr may share their open file description (and so O_NONBLOCK) with whatever
    # reports the program's exit: left non-blocking and full, they can make that report fail.
    body = (
        "import fcntl, os\n"
        "for fd in (1, 2):\n"
        "    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)\n"
        "for fd in (1, 2):\n"
        "    try:\n"
        "        while True:\n"
        "            os.write(fd, b'x' * 65536)\n"
        "    except BlockingIOError:\n"
        "        pass\n"
        "os._exit(5)\n"
    )
    codes: list[object] = []
    for _ in range(NON_BLOCKING_ROUNDS):
        try:
            result, _ = await run_probe(ctx, body, timeout=20)
        except SandboxError as exc:
            codes.append(f"sandbox error: {exc}")
            continue
        codes.append("timed out" if result.timed_out else result.exit_code)
    evidence = escape_text(f"exit codes over {NON_BLOCKING_ROUNDS} rounds: {codes}")
    if any(code != 5 for code in codes):
        return Finding(Verdict.BROKEN, "the program's exit code 5 did not come back every time", evidence)
    return Finding(Verdict.HELD, "exit code 5 every time", evidence)


CHECKS = [
    Check(
        "output.flood",
        KLASS,
        "64 MiB on stdout and on stderr (8 MiB in --quick)",
        "finishes; kept <= cap",
        flood,
        quick=True,
        timeout_s=70,
        backends=(*PROCTOR_BACKENDS, INSPECT),
        not_applicable={"command": COMMAND_OWN_CAP},
    ),
    Check(
        "output.hostile_bytes",
        KLASS,
        "invalid UTF-8, NUL bytes, ANSI/OSC escapes, BEL, BS, CR",
        "replaced, kept, and escaped in this report",
        hostile_bytes,
        quick=True,
    ),
    Check(
        "output.forged_exit_report",
        KLASS,
        "print a fake exit report and ready marker, then exit 7",
        "exit code 7",
        forged_exit_report,
        quick=True,
    ),
    Check(
        "output.non_blocking_streams",
        KLASS,
        "set O_NONBLOCK on stdout/stderr, fill both pipes, exit 5 (three times)",
        "exit code 5 each time",
        non_blocking_streams,
        timeout_s=60,
    ),
]
