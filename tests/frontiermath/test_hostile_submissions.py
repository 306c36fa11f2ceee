"""Submissions written by an adversary who has read our source: none of them may be credited.

Each attack runs through the real submission path on the docker backend (the pinned image) and
must end ``incorrect``, ``answer_error`` or ``answer_timeout``: never ``correct``, and never
``verify_error``, which would let a model abstain at will (errors are counted apart from the
accuracy). docs/frontiermath.md names these tests in its threat model.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from proctor.agent.inputs.config import SandboxConfig
from proctor.agent.results.records import Outcome, SubmissionRecord
from proctor.agent.tracks.frontiermath.checks import check_submission_code
from proctor.agent.tracks.frontiermath.submission import ANSWER_GRACE_S, SubmissionResult, SubmissionRunner
from proctor.agent.tracks.frontiermath.tasks import FrontierMathTask
from proctor.sandbox import Sandbox, open_sandbox
from tests.frontiermath.support import RecordingEvents

# One sandbox for the module (each call still gets a fresh container from its pool): opening and
# closing one per test cost more than most of these tests' calls. The tests share its event loop.
pytestmark = [pytest.mark.docker, pytest.mark.asyncio(loop_scope="module")]

NOT_CREDITED = {Outcome.INCORRECT, Outcome.ANSWER_ERROR, Outcome.ANSWER_TIMEOUT}
# Short limits keep the slow attacks cheap; the sympy import alone needs a few seconds when loaded.
CONFIG = SandboxConfig(answer_timeout_s=4, verify_timeout_s=8)


def task(task_id: str, **fields: str | float) -> FrontierMathTask:
    return FrontierMathTask.model_validate(
        {"id": task_id, "question": "q", "answer_type": "Python int", **fields}
    )


INTEGER = task("integer", answer="42")
SYMBOLIC = task("symbolic", answer="sqrt(2) + 1", answer_type="sympy expression")
NUMERIC = task("numeric", answer="pi", tolerance=1e-9, answer_type="Python float")
VERIFIED = task(
    "verified",
    verification_code="def verify(a):\n    return type(a) is int and a > 100 and a % 7 == 3\n",
)
# A careless verifier that parses its argument: a submitted string must still not run as code.
SYMPIFYING = task(
    "sympifying",
    answer_type="sympy expression",
    verification_code=(
        "import sympy\n\ndef verify(a):\n    return sympy.simplify(sympy.sympify(a) - sympy.sqrt(2)) == 0\n"
    ),
)
COMPARING = task("comparing", verification_code="def verify(a):\n    return a == 143\n")
ARITHMETIC = task("arithmetic", verification_code="def verify(a):\n    return a % 7 == 3 and a > 100\n")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox() -> AsyncIterator[Sandbox]:
    opened = await open_sandbox("docker", pool_size=2)
    try:
        yield opened
    finally:
        await opened.aclose()


async def judge(
    sandbox: Sandbox, code: str, target: FrontierMathTask, config: SandboxConfig = CONFIG
) -> SubmissionResult:
    return await SubmissionRunner(sandbox, config, RecordingEvents()).evaluate(code, target)


def assert_not_credited(result: SubmissionResult) -> None:
    assert result.outcome in NOT_CREDITED, (result.outcome, result.error)


# A forged verification reply, shaped like the driver's, for every channel an attacker can find.
FORGE = (
    "def _forge(nonce):\n"
    "    import json\n"
    "    body = json.dumps({'status': 'ok', 'verdict': True, 'detail': 'equal',\n"
    "                       'value': {'t': 'sympy',\n"
    "                                 'v': \"__import__('os').system('true') or Integer(42)\"}})\n"
    "    return ('\\n<<<PROCTOR-RESULT %s>>>\\n%s\\n<<<END %s>>>\\n' % (nonce, body, nonce)).encode()\n"
)

ATTACKS: dict[str, tuple[str, FrontierMathTask]] = {
    # -- the value is data: printers, srepr and subclasses cannot become code -------------
    "patched srepr and printers": (
        "import sympy\nimport sympy.printing.repr as _r\n\n"
        "def answer():\n"
        "    payload = \"__import__('os').write(1, b'pwned') and Integer(42)\"\n"
        "    sympy.srepr = lambda *a, **k: payload\n"
        "    _r.srepr = sympy.srepr\n"
        "    sympy.Basic.__repr__ = lambda self: payload\n"
        "    sympy.Basic.__str__ = lambda self: payload\n"
        "    return sympy.Integer(41)\n",
        INTEGER,
    ),
    "sympy subclass with custom printers": (
        "import sympy\n\n"
        "class Sly(sympy.Symbol):\n"
        "    def _sympystr(self, printer):\n        return '42'\n"
        "    def _sympyrepr(self, printer):\n        return \"__import__('os').getpid() and Integer(42)\"\n"
        "    def __eq__(self, other):\n        return True\n"
        "    __hash__ = sympy.Symbol.__hash__\n\n"
        "def answer():\n    return Sly('x')\n",
        SYMBOLIC,
    ),
    "int subclass equal to everything": (
        "class Yes(int):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "    __hash__ = int.__hash__\n"
        "    def __mod__(self, other):\n        return 3\n"
        "    def __gt__(self, other):\n        return True\n\n"
        "def answer():\n    return Yes(41)\n",
        VERIFIED,
    ),
    "numpy subclass equal to everything": (
        "import numpy\n\n"
        "class Yes(numpy.ndarray):\n"
        "    def __eq__(self, other):\n        return True\n\n"
        "def answer():\n    return numpy.zeros(3).view(Yes)\n",
        COMPARING,
    ),
    "object that reduces to a call": (
        "import os\n\n"
        "class Bomb:\n"
        "    def __reduce__(self):\n        return (os.system, ('true',))\n"
        "    def __eq__(self, other):\n        return True\n\n"
        "def answer():\n    return Bomb()\n",
        INTEGER,
    ),
    # A library type whose own == converts the reference into the submission's domain: 6 is 1
    # mod 5, so this Poly "equalled" sqrt(2) + 1; one over 3-bit reals rounded 188684/15015 to its 12.
    "Poly over a finite field coerces the reference": (
        "import sympy\n\n"
        "def answer():\n"
        "    root = sympy.sqrt(2)\n"
        "    return sympy.Poly(root + 6, root, modulus=5)\n",
        SYMBOLIC,
    ),
    "Poly over low-precision reals rounds the reference": (
        "import sympy\n\n"
        "def answer():\n"
        "    root = sympy.sqrt(2)\n"
        "    return [sympy.Poly(root + 12, root, domain=sympy.RealField(3))]\n",
        task("symbolic list", answer="[sqrt(2) + 188684/15015]", answer_type="list of sympy expressions"),
    ),
    # -- values whose == reduces or rounds the other side, against a verify() using == ------
    "GF(2) element equals every odd integer": (
        "from sympy.polys.domains import GF\n\ndef answer():\n    return GF(2)(1)\n",
        COMPARING,
    ),
    "pyadic ModP equals its residue class": (
        "import pyadic\n\ndef answer():\n    return pyadic.ModP(3, 7)\n",
        COMPARING,
    ),
    "pyadic PAdic equals to its precision": (
        "import pyadic\n\ndef answer():\n    return pyadic.PAdic(3, 7, 1)\n",
        COMPARING,
    ),
    "Poly over GF(143) equals 143": (
        "import sympy\n\ndef answer():\n    return sympy.Poly(0, sympy.Symbol('x'), modulus=143)\n",
        COMPARING,
    ),
    "Poly over GF(p) inside a tuple": (
        "import sympy\n\ndef answer():\n    return (sympy.Poly(3, sympy.Symbol('x'), modulus=7),)\n",
        task("comparing tuple", verification_code="def verify(a):\n    return a == (143,)\n"),
    ),
    "numpy float rounds a large integer": (
        "import numpy\n\ndef answer():\n    return numpy.float64(1e30)\n",
        task("comparing big", verification_code="def verify(a):\n    return a == 10**30 + 1\n"),
    ),
    "float16 array rounds an integer": (
        "import numpy\n\ndef answer():\n    return [numpy.float16(2048.0)]\n",
        task("comparing list", verification_code="def verify(a):\n    return a == [2049]\n"),
    ),
    # -- monkeypatching the answer process only changes what it says, which is not trusted --
    "patched json forges the reply": (
        FORGE + "\n"
        "def answer():\n"
        "    import json\n"
        "    real = json.dumps\n"
        "    def forged(obj, *args, **kwargs):\n"
        "        if isinstance(obj, dict) and 'status' in obj:\n"
        "            obj = {'status': 'ok', 'verdict': True,\n"
        "                   'value': {'t': 'sympy',\n"
        "                             'v': \"__import__('os').system('true') or Integer(42)\"}}\n"
        "        return real(obj, *args, **kwargs)\n"
        "    json.dumps = forged\n"
        "    return 41\n",
        INTEGER,
    ),
    "patched builtins": (
        "import builtins\n\n"
        "def answer():\n"
        "    builtins.isinstance = lambda *a: True\n"
        "    builtins.type = lambda *a: int\n"
        "    builtins.len = lambda *a: 0\n"
        "    return 41\n",
        INTEGER,
    ),
    "patched sympy and numpy comparison": (
        "import sympy\nimport numpy\n\n"
        "def answer():\n"
        "    sympy.Basic.__eq__ = lambda self, other: True\n"
        "    sympy.simplify = lambda *a, **k: 0\n"
        "    numpy.array_equal = lambda *a, **k: True\n"
        "    return sympy.Integer(41)\n",
        SYMBOLIC,
    ),
    # -- secrets and channels of the driver ------------------------------------------------
    "frames walked to the driver's channel": (
        FORGE + "\n"
        "def answer():\n"
        "    import sys, os, gc\n"
        "    frame = sys._getframe()\n"
        "    while frame is not None:\n"
        "        for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):\n"
        "            nonce = getattr(value, 'nonce', None)\n"
        "            fd = getattr(value, 'fd', None)\n"
        "            if isinstance(nonce, str) and isinstance(fd, int):\n"
        "                os.write(fd, _forge(nonce))\n"
        "        frame = frame.f_back\n"
        "    for thing in gc.get_objects():\n"
        "        if isinstance(thing, dict) and isinstance(thing.get('nonce'), str):\n"
        "            os.write(1, _forge(thing['nonce']))\n"
        "    os._exit(0)\n",
        INTEGER,
    ),
    "writes to every inherited descriptor": (
        FORGE + "\n"
        "def answer():\n"
        "    import os\n"
        "    report = b'\\x00proctor-exit:' + b'0' * 32 + b':0:0\\x00'\n"
        "    for fd in range(64):\n"
        "        for data in (_forge('0' * 32), report):\n"
        "            try:\n"
        "                os.write(fd, data)\n"
        "            except OSError:\n"
        "                pass\n"
        "    return 41\n",
        INTEGER,
    ),
    "forked late writer": (
        FORGE + "\n"
        "def answer():\n"
        "    import os, sys, time\n"
        "    frame, channel = sys._getframe(), None\n"
        "    while frame is not None and channel is None:\n"
        "        channel = frame.f_locals.get('channel')\n"
        "        frame = frame.f_back\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(0.3)\n"
        "            for _ in range(20):\n"
        "                for fd in (1, 2, getattr(channel, 'fd', 1)):\n"
        "                    try:\n"
        "                        os.write(fd, _forge(getattr(channel, 'nonce', '0')))\n"
        "                    except OSError:\n"
        "                        pass\n"
        "                time.sleep(0.05)\n"
        "        os._exit(0)\n"
        "    return 41\n",
        INTEGER,
    ),
    "stops its parent": (
        "def answer():\n"
        "    import os, signal\n"
        "    for pid in (os.getppid(), 1):\n"
        "        for sig in (signal.SIGSTOP, signal.SIGKILL):\n"
        "            try:\n"
        "                os.kill(pid, sig)\n"
        "            except OSError:\n"
        "                pass\n"
        "    return 41\n",
        INTEGER,
    ),
    "traces its parent": (
        "def answer():\n"
        "    import ctypes, os\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    for pid in (os.getppid(), 1):\n"
        "        libc.ptrace(16, pid, None, None)\n"
        "        try:\n"
        "            with open(f'/proc/{pid}/mem', 'rb') as mem:\n"
        "                mem.read(16)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 41\n",
        INTEGER,
    ),
    # -- a string that a careless verify() parses must not run ------------------------------
    "string parsed by verify runs code": (
        "def answer():\n    return \"sqrt(2) if __import__('os').write(1, b'pwned') else sqrt(2)\"\n",
        SYMPIFYING,
    ),
    "string parsed by verify walks frames": (
        'def answer():\n    return "(lambda: sqrt(2))()"\n',
        SYMPIFYING,
    ),
    "string parsed by verify reaches dunders": (
        'def answer():\n    return "Integer(1).__class__.__mro__[-1].__subclasses__() and sqrt(2)"\n',
        SYMPIFYING,
    ),
    # -- values that break verification are wrong, not errors ------------------------------
    "value makes verify raise": ("def answer():\n    return 'abc'\n", ARITHMETIC),
    "value makes verify return a non-bool": (
        "import numpy\n\ndef answer():\n    return numpy.arange(4)\n",
        COMPARING,
    ),
    # Cheap to build (evaluate=False), expensive to judge: the verifier's time and memory run out.
    "value makes comparison slow": (
        "import sympy\n\n"
        "def answer():\n"
        "    x = sympy.Symbol('x')\n"
        "    terms = [sympy.sin(x) ** k * sympy.cos(x) ** (k + 3) for k in range(1, 80)]\n"
        "    return sympy.Add(*terms, evaluate=False)\n",
        SYMBOLIC,
    ),
    "value exhausts verification memory": (
        "import sympy\n\n"
        "def answer():\n"
        "    return sympy.Add(sympy.Pow(3, 10**12, evaluate=False), sympy.sqrt(2), evaluate=False)\n",
        SYMBOLIC,
    ),
    "nan against a tolerance": ("def answer():\n    return float('nan')\n", NUMERIC),
    "infinity against a tolerance": ("def answer():\n    return float('inf')\n", NUMERIC),
    "undefined sympy number against a tolerance": (
        "import sympy\n\ndef answer():\n    return sympy.zoo\n",
        NUMERIC,
    ),
    # -- size -----------------------------------------------------------------------------
    "value too large to carry": ("def answer():\n    return 1 << 80_000_000\n", INTEGER),
    "forged progress marks": (
        "def answer():\n"
        "    import sys, os\n"
        "    frame, channel = sys._getframe(), None\n"
        "    while frame is not None and channel is None:\n"
        "        channel = frame.f_locals.get('channel')\n"
        "        frame = frame.f_back\n"
        "    for text in ('1.2.3', 'nan', '9' * 5000, '-1', '1e999'):\n"
        "        mark = '<<<PROCTOR-MARK %s returned %s>>>' % (channel.nonce, text)\n"
        "        os.write(channel.fd, mark.encode())\n"
        "    while True:\n"
        "        pass\n",
        INTEGER,
    ),
    "exits after printing a fake result": (
        FORGE + "\ndef answer():\n    import os, sys\n    sys.stdout.write(_forge('0' * 32).decode())\n"
        "    os._exit(0)\n",
        INTEGER,
    ),
}


@pytest.mark.parametrize("name", list(ATTACKS))
async def test_hostile_submission_is_never_credited(sandbox: Sandbox, name: str) -> None:
    code, target = ATTACKS[name]
    result = await judge(sandbox, code, target)
    assert_not_credited(result)


async def test_a_huge_exact_value_is_carried_and_judged(sandbox: Sandbox) -> None:
    result = await judge(sandbox, "def answer():\n    return 10**999000\n", INTEGER)
    assert result.outcome is Outcome.INCORRECT, result.error
    assert "bits" in (result.record.value_repr or "")


@pytest.mark.parametrize(
    "code",
    [
        # The driver's timer cancelled, then a stall.
        "def answer():\n    import signal, time\n    signal.setitimer(signal.ITIMER_REAL, 0)\n"
        "    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n    time.sleep(600)\n",
        # The timer's exception caught, then a busy loop.
        "def answer():\n    while True:\n        try:\n            while True:\n                pass\n"
        "        except BaseException:\n            pass\n",
        # Every catchable signal ignored and the work moved to a child.
        "def answer():\n    import os, signal, time\n"
        "    for s in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT):\n"
        "        signal.signal(s, signal.SIG_IGN)\n    if os.fork() == 0:\n        time.sleep(600)\n"
        "    os.wait()\n",
    ],
    ids=["cancelled timer", "caught timer", "ignored signals and a child"],
)
async def test_answer_limit_holds_from_outside(sandbox: Sandbox, code: str) -> None:
    config = SandboxConfig(answer_timeout_s=2, verify_timeout_s=20)
    started = time.monotonic()
    result = await judge(sandbox, code, INTEGER, config)
    elapsed = time.monotonic() - started
    assert result.outcome is Outcome.ANSWER_TIMEOUT, result.error
    assert result.record.answer_exec is not None
    # The sandbox ends the call at the limit plus the grace, not at the submission's leisure.
    assert result.record.answer_exec["duration_s"] <= 2 + ANSWER_GRACE_S + 1.0
    assert elapsed < 2 + ANSWER_GRACE_S + 10  # teardown included, loaded machine allowed


async def test_exact_reference_rejects_a_wrong_exact_answer(sandbox: Sandbox) -> None:
    exact = task("exact", answer="4*pi - 188684/15015", answer_type="sympy expression")
    wrong = (
        "import sympy\n\ndef answer():\n"
        "    return 4 * sympy.pi - sympy.Rational(188684, 15015) + sympy.Rational(1, 10**40)\n"
    )
    # Both sides get the protocol's room: neither verdict may hang on the machine's load (the
    # short limit of the attacks above is for values refused whatever the time).
    assert (await judge(sandbox, wrong, exact, ROOMY)).outcome is Outcome.INCORRECT
    right = "import sympy\n\ndef answer():\n    return 4 * sympy.pi - sympy.Rational(188684, 15015)\n"
    result = await judge(sandbox, right, exact, ROOMY)
    assert result.outcome is Outcome.CORRECT, result.error
    assert result.record.reference_inexact is False


# What answer() returns must reach verify() with its type (issue: mpc, Decimal, range and GF(7)(3)
# used to fail; mpf became sympy.Float; a galois array lost its field).
TYPED: dict[str, tuple[str, str]] = {
    "mpmath.mpc": (
        "import mpmath\n\ndef answer():\n    mpmath.mp.prec = 100\n    return mpmath.mpc(1, 2) / 3\n",
        "import mpmath\n\ndef verify(a):\n    mpmath.mp.prec = 100\n"
        "    return type(a) is mpmath.mpc and a == mpmath.mpc(1, 2) / 3\n",
    ),
    "mpmath.mpf keeps its precision": (
        "import mpmath\n\ndef answer():\n    mpmath.mp.dps = 60\n    return +mpmath.pi\n",
        "import mpmath\n\ndef verify(a):\n    mpmath.mp.dps = 60\n"
        "    return type(a) is mpmath.mpf and a == +mpmath.pi\n",
    ),
    "decimal.Decimal": (
        "from decimal import Decimal\n\ndef answer():\n"
        "    return Decimal('-0.000123456789012345678901234567890')\n",
        "from decimal import Decimal\n\ndef verify(a):\n"
        "    want = Decimal('-0.000123456789012345678901234567890')\n"
        "    return type(a) is Decimal and a.as_tuple() == want.as_tuple()\n",
    ),
    "range": (
        "def answer():\n    return range(3, 100, 7)\n",
        "def verify(a):\n    return type(a) is range and a == range(3, 100, 7)\n",
    ),
    # The answer type asks for a finite-field element (see test_values_with_inexact_equality_*).
    "sympy GF element": (
        "from sympy.polys.domains import GF\n\ndef answer():\n    return GF(7)(3)\n",
        "from sympy.polys.domains import GF\n\ndef verify(a):\n"
        "    return type(a) is type(GF(7)(3)) and a == GF(7)(3) and a.mod == 7\n",
    ),
    "galois FieldArray keeps its field": (
        "import galois\n\ndef answer():\n    GF = galois.GF(2**4)\n    return GF([1, 2, 3]) * GF(7)\n",
        "import galois\nimport numpy\n\ndef verify(a):\n    GF = galois.GF(2**4)\n"
        "    return type(a) is GF and numpy.array_equal(a, GF([1, 2, 3]) * GF(7))\n",
    ),
    "numpy array keeps dtype and shape": (
        "import numpy\n\ndef answer():\n    return numpy.arange(6, dtype=numpy.uint16).reshape(2, 3)\n",
        "import numpy\n\ndef verify(a):\n    return type(a) is numpy.ndarray and a.dtype == numpy.uint16"
        " and a.shape == (2, 3) and a.tolist() == [[0, 1, 2], [3, 4, 5]]\n",
    ),
    "gmpy2.mpfr keeps its precision": (
        "import gmpy2\n\ndef answer():\n    gmpy2.get_context().precision = 200\n"
        "    return gmpy2.sqrt(gmpy2.mpfr(2))\n",
        "import gmpy2\n\ndef verify(a):\n    gmpy2.get_context().precision = 200\n"
        "    want = gmpy2.sqrt(gmpy2.mpfr(2))\n"
        "    return type(a) is type(want) and a.precision == 200 and a == want\n",
    ),
    "sympy symbol keeps its assumptions": (
        "import sympy\n\ndef answer():\n    n = sympy.Symbol('n', integer=True, positive=True)\n"
        "    return sympy.Poly(n**2 + 3 * n, n)\n",
        "import sympy\n\ndef verify(a):\n    n = sympy.Symbol('n', integer=True, positive=True)\n"
        "    return type(a) is sympy.Poly and a == sympy.Poly(n**2 + 3 * n, n) and a.gens[0].is_positive\n",
    ),
}


TYPED_KINDS = {
    "mpmath.mpc": "floating-point",
    "mpmath.mpf keeps its precision": "floating-point",
    "decimal.Decimal": "floating-point",
    "gmpy2.mpfr keeps its precision": "floating-point",
    "sympy GF element": "modular",
    "galois FieldArray keeps its field": "modular",
}


@pytest.mark.parametrize("name", list(TYPED))
async def test_types_reach_verify_intact(sandbox: Sandbox, name: str) -> None:
    answer_code, verification_code = TYPED[name]
    # A floating-point or modular value reaches verify() only when the task's answer kind is its.
    target = task(
        f"typed-{name}", verification_code=verification_code, answer_kind=TYPED_KINDS.get(name, "exact")
    )
    # galois builds its field on first use; give the calls room on a loaded machine.
    patient = SandboxConfig(answer_timeout_s=60, verify_timeout_s=60)
    result = await judge(sandbox, answer_code, target, patient)
    assert result.outcome is Outcome.CORRECT, (result.error, result.record.value_repr)


# Values whose == is not exact still reach verify() when the answer type asks for them, and exact
# values of other libraries always do.
INEXACT_BUT_ASKED_FOR: dict[str, tuple[str, str, str]] = {
    "GF(7) element for a finite-field task": (
        "from sympy.polys.domains import GF\n\ndef answer():\n    return GF(7)(3)\n",
        "modular",
        "def verify(a):\n    return a == 3 and a.mod == 7\n",
    ),
    "7-adic number for a p-adic task": (
        "import pyadic\n\ndef answer():\n    return pyadic.PAdic(3, 7, 5)\n",
        "p-adic",
        "import pyadic\n\ndef verify(a):\n"
        "    return type(a) is pyadic.PAdic and a == pyadic.PAdic(3, 7, 5)\n",
    ),
    "numpy float for a float task": (
        "import numpy\n\ndef answer():\n    return numpy.float64(1e30)\n",
        "floating-point",
        "def verify(a):\n    return abs(a - 1e30) < 1e15\n",
    ),
    "mpmath mpf for an mpmath task": (
        "import mpmath\n\ndef answer():\n    mpmath.mp.dps = 30\n    return mpmath.mpf(1) / 7\n",
        "floating-point",
        "import mpmath\n\ndef verify(a):\n    mpmath.mp.dps = 30\n"
        "    return abs(a - mpmath.mpf(1) / 7) < mpmath.mpf(10) ** -25\n",
    ),
    "numpy int for an int task": (
        "import numpy\n\ndef answer():\n    return numpy.int64(143)\n",
        "exact",
        "def verify(a):\n    return a == 143\n",
    ),
}


@pytest.mark.parametrize("name", list(INEXACT_BUT_ASKED_FOR))
async def test_values_with_inexact_equality_reach_verify_when_the_answer_kind_is_theirs(
    sandbox: Sandbox, name: str
) -> None:
    answer_code, answer_kind, verification_code = INEXACT_BUT_ASKED_FOR[name]
    target = task(f"asked-{name}", verification_code=verification_code, answer_kind=answer_kind)
    result = await judge(
        sandbox, answer_code, target, SandboxConfig(answer_timeout_s=30, verify_timeout_s=30)
    )
    assert result.outcome is Outcome.CORRECT, (result.error, result.record.verification)


async def test_a_value_with_inexact_equality_is_refused_with_its_reason(sandbox: Sandbox) -> None:
    code = "from sympy.polys.domains import GF\n\ndef answer():\n    return GF(2)(1)\n"
    result = await judge(sandbox, code, COMPARING, SandboxConfig(answer_timeout_s=30, verify_timeout_s=30))
    assert result.outcome is Outcome.INCORRECT
    assert "modular value compares modulo its modulus" in (result.record.verification or "")
    assert "the task's answer kind is exact" in (result.record.verification or "")


# Room for sympy's import on a loaded machine: these must reach the comparison to prove anything.
ROOMY = SandboxConfig(answer_timeout_s=30, verify_timeout_s=60)
# A float reference: the numerical difference is then small but not exactly zero.
FLOAT_PI = task("float pi", answer="3.141592653589793", tolerance=1e-9, answer_type="Python float")


@pytest.mark.parametrize(
    "expression",
    [
        "sympy.Integral(4 / (1 + x**2), (x, 0, 1))",
        "sympy.sqrt(6 * sympy.Sum(1 / k**2, (k, 1, sympy.oo)))",
        "2 * sympy.Product(4 * k**2 / (4 * k**2 - 1), (k, 1, sympy.oo))",
    ],
)
async def test_unevaluated_calculus_never_meets_a_tolerance(sandbox: Sandbox, expression: str) -> None:
    """pi to within 1e-9 by handing the verifier an integral, a series or a product to evaluate:
    numerical evaluation against the tolerance computed them, and each was `correct`."""
    code = (
        "import sympy\n\n"
        "def answer():\n"
        "    x = sympy.Symbol('x')\n"
        "    k = sympy.Symbol('k', integer=True, positive=True)\n"
        f"    return {expression}\n"
    )
    result = await judge(sandbox, code, FLOAT_PI, ROOMY)
    assert result.outcome is Outcome.INCORRECT, (result.outcome, result.error)
    assert "unevaluated" in (result.record.verification or ""), result.record.verification


PI_MINUS_RATIONAL = task("pi minus rational", answer="4*pi - 188684/15015", answer_type="sympy expression")


@pytest.mark.parametrize(
    "expression",
    [
        "sympy.Add(4 * sympy.pi, sympy.Float(-16, precision=1), evaluate=False)",
        "sympy.Add(4 * sympy.pi, sympy.Float(-12, precision=2), evaluate=False)",
    ],
)
async def test_a_low_precision_float_never_rounds_into_the_reference(
    sandbox: Sandbox, expression: str
) -> None:
    """The rational part guessed to 1 or 2 bits: sympy added it to the reference's rational at
    that precision and the difference simplified to 0, so a value 3.4 away was `correct`."""
    code = f"import sympy\n\ndef answer():\n    return {expression}\n"
    result = await judge(sandbox, code, PI_MINUS_RATIONAL, ROOMY)
    assert result.outcome is Outcome.INCORRECT, (result.outcome, result.error)


# -- exact means exact (issue 22): one attack per inexact family and per verify() idiom --------------
# Each idiom below credited at least one of these values before; every value is `incorrect` now, and
# the honest exact answers of every family stay `correct` through the same idioms. All cases of one
# idiom run through one verification per value; the docker calls are batched per idiom.
F30 = "sympy.factorial(30)"
IDIOM_VERIFIERS = {
    "==": "import sympy\n\ndef verify(a):\n    return a == REF\n",
    "Eq": "import sympy\n\ndef verify(a):\n    return bool(sympy.Eq(a, REF))\n",
    "simplify": "import sympy\n\ndef verify(a):\n    return sympy.simplify(a - (REF)) == 0\n",
    "nsimplify": "import sympy\n\ndef verify(a):\n    return sympy.nsimplify(a) == REF\n",
}
# (answer() body, the reference's source): each value is inexact or unevaluated.
INEXACT_ATTACKS = {
    "float of 30!": ("return float(math.factorial(30) + 10**12)", F30),
    "sympy Float, 15 digits": ("return sympy.Float(math.factorial(30) + 123456789, 15)", F30),
    "sympy Float, 1 bit": ("return sympy.Float(2**108, precision=1)", "sympy.Integer(2**107 + 99)"),
    "gmpy2 mpfr": ("return gmpy2.mpfr(math.factorial(30) + 123456789)", F30),
    "mpmath mpf, F90 last digits wrong": (
        "mpmath.mp.dps = 19\n    return mpmath.mpf(sympy.fibonacci(90) + 7)",
        "sympy.fibonacci(90)",
    ),
    "mpmath mpf for 1/7": ("mpmath.mp.dps = 16\n    return mpmath.mpf(1) / 7", "sympy.Rational(1, 7)"),
    "numpy float64, small": ("return numpy.float64(42)", "42"),
    "Python complex": ("return complex(42)", "42"),
    "decimal": ("return decimal.Decimal(42)", "42"),
    "gmpy2 mpc": ("return gmpy2.mpc(42)", "42"),
    "mpmath mpc": ("return mpmath.mpc(42)", "42"),
    "Float inside a list": ("return [sympy.Float(42, 50)]", "[42]"),
}
# Held forms are evaluated on the answer side, within answer()'s budget: judged by their value.
HONEST_HELD = {
    "held factorial": ("return sympy.factorial(30, evaluate=False)", F30),
    "held sum": ("return sympy.Add(40, 2, evaluate=False)", "42"),
}
HONEST_EXACT = {
    "int": "return math.factorial(30)",
    "sympy Integer": "return sympy.factorial(30)",
    "gmpy2 mpz": "return gmpy2.fac(30)",
    "Fraction": "return fractions.Fraction(math.factorial(30))",
    "gmpy2 mpq": "return gmpy2.mpq(math.factorial(30), 1)",
}
PRELUDE = "import decimal, fractions, math\nimport gmpy2, mpmath, numpy, sympy\n\ndef answer():\n    "


class AnsweredOnce:
    """Each submission's answer() run once; the value it carries is then verified under any idiom.

    SubmissionRunner.evaluate is two steps: answer() in one sandbox call, then the verification
    of the value it carried in another. The first never reads the task, so the carried value is
    the same whichever idiom verifies it, and verifying it under four idioms shows each idiom
    exactly what four separate submissions would have: evaluate()'s own two steps, with the
    value that crosses between them, at a quarter of the answer() runs.
    """

    def __init__(self, sandbox: Sandbox) -> None:
        self.runner = SubmissionRunner(sandbox, ROOMY, RecordingEvents())
        self.answers: dict[str, tuple[SubmissionResult | Any, SubmissionRecord]] = {}

    async def judge(self, code: str, target: FrontierMathTask) -> SubmissionResult:
        # evaluate() refuses code its checks flag before anything runs; none of these is flagged.
        assert check_submission_code(code) == [], code
        if code not in self.answers:
            record = SubmissionRecord(code=code)
            self.answers[code] = (await self.runner._run_answer(code, record), record)
        answered, record = self.answers[code]
        if isinstance(answered, SubmissionResult):
            return answered  # answer() itself failed: the verdict, whatever the idiom
        return await self.runner._verify(target, record.model_copy(deep=True), answered)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def answered_once(sandbox: Sandbox) -> AnsweredOnce:
    return AnsweredOnce(sandbox)


@pytest.mark.slow
# The four idioms share one worker, so each value's answer() runs once for all of them.
@pytest.mark.xdist_group("hostile-idioms")
@pytest.mark.parametrize("idiom", list(IDIOM_VERIFIERS))
async def test_inexact_and_unevaluated_values_are_incorrect_through_every_idiom(
    answered_once: AnsweredOnce, idiom: str
) -> None:
    failures = []
    for name, (body, reference) in INEXACT_ATTACKS.items():
        verifier = IDIOM_VERIFIERS[idiom].replace("REF", reference)
        target = task(f"exact-{name}", verification_code=verifier)
        result = await answered_once.judge(PRELUDE + body + "\n", target)
        if result.outcome is not Outcome.INCORRECT:
            failures.append((name, result.outcome, result.error))
    for name, (body, reference) in HONEST_HELD.items():
        verifier = IDIOM_VERIFIERS[idiom].replace("REF", reference)
        target = task(f"held-{name}", verification_code=verifier)
        result = await answered_once.judge(PRELUDE + body + "\n", target)
        if result.outcome is not Outcome.CORRECT:
            failures.append((name, result.outcome, result.error))
    for name, body in HONEST_EXACT.items():
        verifier = IDIOM_VERIFIERS[idiom].replace("REF", F30)
        target = task(f"honest-{name}", verification_code=verifier)
        result = await answered_once.judge(PRELUDE + body + "\n", target)
        if result.outcome is not Outcome.CORRECT:
            failures.append((name, result.outcome, result.error))
    assert not failures, failures


# A submission that owns its process can skip the answer side's evaluation (here: by replacing the
# driver's function); the verification side's confirmation must refuse what it sends.
SKIPS_EVALUATION = "import sys\nsys.modules['proctor_driver'].evaluated_form = lambda value: value\n"


@pytest.mark.slow
async def test_a_value_that_skipped_evaluation_is_never_credited(sandbox: Sandbox) -> None:
    """pi + factorial(200000) was simplified by the verifier; an unevaluated primenu of a
    38-digit semiprime took 7.7 s of its budget to factor."""
    symbolic = task("pi", answer="pi", answer_kind="exact")
    forty_two = task(
        "42", verification_code="import sympy\n\ndef verify(a):\n    return sympy.simplify(a - 42) == 0\n"
    )
    for body, target in (
        ("return sympy.pi + sympy.factorial(200000, evaluate=False)", symbolic),
        ("return sympy.primenu(sympy.nextprime(10**18) * sympy.nextprime(10**19), evaluate=False)", symbolic),
        ("return sympy.Add(40, 2, evaluate=False)", forty_two),
        ("return sympy.factorial(30, evaluate=False) - sympy.factorial(30) + 42", forty_two),
    ):
        code = SKIPS_EVALUATION + PRELUDE + body + "\n"
        result = await judge(sandbox, code, target, ROOMY)
        assert result.outcome is Outcome.INCORRECT, (body, result.outcome, result.error)
        assert "evaluated form" in (result.record.verification or ""), result.record.verification
