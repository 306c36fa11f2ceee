"""Proctor's verdict equals an independent oracle's, for every value family the codec carries.

The oracle (tests/frontiermath/exact_oracle.py) says whether a value is *exactly* the reference
without sympy's ``==``. Each case runs the real verification step in-process: the value is encoded,
checked and rebuilt by the codec, then the driver's gate and the task's verify() (an everyday idiom)
decide, exactly as in the verification sandbox. docs/frontiermath.md, "Exact means exact".
"""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from typing import Any

import gmpy2
import mpmath
import numpy
import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proctor.agent.tracks.frontiermath import sandbox_driver as driver
from proctor.agent.tracks.frontiermath import value_codec
from tests.frontiermath.exact_oracle import exactly, within

# Everyday verify() idioms; REF is the reference's source.
IDIOMS = {
    "==": "def verify(a):\n    return a == REF\n",
    "Eq": "def verify(a):\n    return bool(sympy.Eq(a, REF))\n",
    "simplify": "def verify(a):\n    return sympy.simplify(a - (REF)) == 0\n",
    "nsimplify": "def verify(a):\n    return sympy.nsimplify(a) == REF\n",
}
CONTAINER_IDIOMS = {"==": IDIOMS["=="]}
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


class _Channel:
    def mark(self, name: str, elapsed_s: float) -> None:
        pass


def proctor_verdict(value: Any, idiom: str, reference_source: str, answer_kind: str) -> bool:
    """The verification step's verdict (False for a refusal or a verify() that raised).

    The value is encoded as it is, without the answer side's evaluation: what a submission that
    patched its own driver sends. The gate must hold for it all the same.
    """
    code = "import sympy\nimport mpmath\n" + idiom.replace("REF", reference_source)
    request = {
        "verification_code": code,
        "answer_kind": answer_kind,
        "value_json": json.dumps(value_codec.encode_value(value)),
    }
    reply = driver.run_verify(request, _Channel())  # type: ignore[arg-type]
    assert reply["status"] in ("ok", "candidate_error"), reply
    return reply["status"] == "ok" and reply["verdict"] is True


# -- values near an integer reference, in every family -------------------------------------------

F30 = 265252859812191058636308480000000  # 30!
F90 = 2880067194370816120  # fibonacci(90)


def exact_integers(n: int) -> list[Any]:
    values: list[Any] = [n, sympy.Integer(n), gmpy2.mpz(n), Fraction(n), gmpy2.mpq(n, 1)]
    if -(2**63) <= n < 2**63:
        values.append(numpy.int64(n))
    return values


def inexact_integers(n: int) -> list[Any]:
    """Floating point of every library, holding n (rounded) or near it: never exact."""
    with mpmath.workprec(200):
        mpf_wide = mpmath.mpf(n)
    return [
        float(n),
        complex(n),
        numpy.float64(n),
        numpy.float32(n),
        numpy.complex128(n),
        sympy.Float(n, 15),
        sympy.Float(n, 50),
        sympy.Float(2**108, precision=1),
        mpmath.mpf(n),
        mpf_wide,
        mpmath.mpc(n),
        gmpy2.mpfr(n),
        gmpy2.mpc(n),
        Decimal(n),
        sympy.pi - sympy.pi + sympy.Float(n, 30),
    ]


def unevaluated_integers(n: int) -> list[Any]:
    """Exact forms equal to n that leave the work to the verifier."""
    half, rest = divmod(n, 2)
    return [
        sympy.Add(sympy.Integer(half), sympy.Integer(half + rest), evaluate=False),
        sympy.UnevaluatedExpr(sympy.Integer(n)),
        sympy.Mul(sympy.Integer(n), 1, evaluate=False),
    ]


integers = st.one_of(
    st.integers(-(10**6), 10**6),
    st.integers(2**52, 2**120),
    st.sampled_from([F30, F90, 42, 2**107 + 12345, 10**40 + 7]),
)
offsets = st.sampled_from([0, 1, -1, 123456789, 10**12, -(2**60)])


@pytest.mark.slow
@SETTINGS
@given(reference=integers, offset=offsets, idiom=st.sampled_from(list(IDIOMS)), pick=st.integers(0, 99))
def test_integer_references_match_the_oracle(reference: int, offset: int, idiom: str, pick: int) -> None:
    value_n = reference + offset
    pool = exact_integers(value_n) + inexact_integers(value_n) + unevaluated_integers(value_n)
    value = pool[pick % len(pool)]
    source = f"sympy.Integer({reference})"
    assert proctor_verdict(value, IDIOMS[idiom], source, "exact") is exactly(
        value, sympy.Integer(reference)
    ), (value, reference, idiom)


@pytest.mark.parametrize("idiom", list(IDIOMS))
def test_honest_exact_integers_of_every_family_stay_correct(idiom: str) -> None:
    for value in exact_integers(F90):
        assert proctor_verdict(value, IDIOMS[idiom], "sympy.fibonacci(90)", "exact"), (value, idiom)


@pytest.mark.parametrize("idiom", list(IDIOMS))
def test_honest_model_inexact_answers_are_incorrect(idiom: str) -> None:
    """The issue's cases: each was `correct` through one of these idioms."""
    f30 = "sympy.factorial(30)"
    with mpmath.workdps(30):
        f90_wrong = mpmath.mpf(F90 + 7)  # the last digit wrong, but more digits than a float
    cases = [
        (float(F30), f30),
        (float(F30 + 10**12), f30),
        (sympy.Float(F30 + 123456789, 15), f30),
        (sympy.Float(F30, 50), f30),
        (gmpy2.mpfr(F30 + 123456789), f30),
        (f90_wrong, "sympy.fibonacci(90)"),
        (42.0, "42"),
        (numpy.float64(42), "42"),
    ]
    for value, source in cases:
        assert exactly(value, sympy.Integer(42)) is False
        assert not proctor_verdict(value, IDIOMS[idiom], source, "exact"), (value, idiom)
    with mpmath.workdps(16):
        seventh = mpmath.mpf(1) / 7
    assert not proctor_verdict(seventh, IDIOMS[idiom], "sympy.Rational(1, 7)", "exact")


def test_one_low_precision_float_never_equals_many_integers() -> None:
    """Float(2**108, precision=1) once passed both idioms for 200 of 200 integers near 2**107."""
    value = sympy.Float(2**108, precision=1)
    for k in range(0, 200, 7):
        reference = 2**107 + k * 10**20
        for idiom in ("simplify", "Eq"):
            assert not proctor_verdict(value, IDIOMS[idiom], f"sympy.Integer({reference})", "exact")


# -- rationals and symbolic references -------------------------------------------------------------

SYMBOLIC_REFERENCES = {
    "sympy.sqrt(2) + 1": sympy.sqrt(2) + 1,
    "4*sympy.pi - sympy.Rational(188684, 15015)": 4 * sympy.pi - sympy.Rational(188684, 15015),
    "sympy.sin(1) + sympy.log(3)": sympy.sin(1) + sympy.log(3),
    "sympy.Rational(1, 7)": sympy.Rational(1, 7),
    "2 + 3*sympy.I": 2 + 3 * sympy.I,
}


def symbolic_neighbours(reference: Any) -> list[Any]:
    tiny = sympy.Rational(1, 10**40)
    return [
        reference,
        reference + tiny,
        reference - 1,
        reference + sympy.Float(0, 15),
        reference + sympy.Float(10**-30, 50),
        sympy.N(reference, 15),
        sympy.N(reference, 60),
        sympy.Add(reference, sympy.factorial(3, evaluate=False), -6, evaluate=False),
        sympy.UnevaluatedExpr(reference),
        sympy.Add(reference, sympy.Integral(0, (sympy.Symbol("x"), 0, 1)), evaluate=False),
    ]


@pytest.mark.slow
@SETTINGS
@given(
    source=st.sampled_from(list(SYMBOLIC_REFERENCES)),
    idiom=st.sampled_from(["Eq", "simplify", "=="]),
    pick=st.integers(0, 99),
)
def test_symbolic_references_match_the_oracle(source: str, idiom: str, pick: int) -> None:
    reference = SYMBOLIC_REFERENCES[source]
    pool = symbolic_neighbours(reference)
    value = pool[pick % len(pool)]
    got = proctor_verdict(value, IDIOMS[idiom], source, "exact")
    want = exactly(value, reference)
    if want and idiom == "==":
        # `==` is structural: an equal value in another form is the idiom's strictness, not ours.
        assert got in (True, False)
    else:
        assert got is want, (value, source, idiom)


# -- containers: every place a value can sit ---------------------------------------------------------


def placed(value: Any, where: str) -> Any:
    return {
        "list": lambda: [1, value],
        "tuple": lambda: (value, 2),
        "dict value": lambda: {"k": value},
        "dict key": lambda: {value: 1} if _hashable(value) else {"k": value},
        "object array": lambda: numpy.array([1, value], dtype=object),
        "matrix": lambda: sympy.Matrix([[1, sympy.sympify(value)]]),
        "sparse matrix": lambda: sympy.SparseMatrix(10**4, 10**4, {(7, 9): sympy.sympify(value)}),
        "expression": lambda: sympy.Add(sympy.pi, sympy.sympify(value), evaluate=False),
    }[where]()


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


@pytest.mark.slow
@SETTINGS
@given(
    where=st.sampled_from(
        ["list", "tuple", "dict value", "dict key", "object array", "matrix", "sparse matrix"]
    ),
    pick=st.integers(0, 99),
    n=st.integers(-(10**9), 10**9),
)
def test_an_inexact_part_anywhere_makes_the_value_incorrect(where: str, pick: int, n: int) -> None:
    pool = [*inexact_integers(n), sympy.Poly(n * sympy.Symbol("x"), sympy.Symbol("x"), domain=sympy.RR)]
    inner = pool[pick % len(pool)]
    if where in ("matrix", "sparse matrix") and not isinstance(inner, sympy.Basic | float | int):
        inner = sympy.Float(n, 20)
    value = placed(inner, where)
    assert driver.inexact_kinds(value) == ["floating-point"], (where, inner)
    # The same container with the exact integer is credited by a verify() that compares it.
    assert not proctor_verdict(value, "def verify(a):\n    return True\n", "0", "exact")


# -- approximate answer types: within the tolerance, as the oracle measures it ------------------------


@pytest.mark.slow
@SETTINGS
@given(
    pick=st.integers(0, 99),
    scale=st.sampled_from([Fraction(0), Fraction(1, 10**30), Fraction(1, 10**6), Fraction(3, 10**3)]),
)
def test_approximate_types_take_every_floating_family_within_the_tolerance(
    pick: int, scale: Fraction
) -> None:
    reference, tolerance = Fraction(1, 7), Fraction(1, 10**9)
    target = float(reference + scale)
    with mpmath.workdps(16):
        mpf16 = mpmath.mpf(1) / 7 + mpmath.mpf(scale.numerator) / scale.denominator
    pool = [
        target,
        numpy.float64(target),
        sympy.Float(target, 15),
        sympy.Float(sympy.Rational(reference + scale), 50),
        mpf16,
        gmpy2.mpfr(target),
        Decimal(target),
        Fraction(reference + scale),
    ]
    value = pool[pick % len(pool)]
    idiom = "def verify(a):\n    return abs(a - REF) < sympy.Rational(1, 10**9)\n"
    got = proctor_verdict(value, idiom, "sympy.Rational(1, 7)", "floating-point")
    assert got is within(value, reference, tolerance), (value, scale)


# -- evaluated form: the verifier never credits work answer() left undone -------------------------
#
# The answer side brings an honest value to evaluated form within answer()'s budget; a submission
# that patches its own driver can still send an unevaluated one. The verification side confirms
# the form with no timer of its own: a value is refused, or its rebuilding runs until the
# verification's limit kills the step, which submission.py turns into ``incorrect`` (the value was
# touched). Either way it is never credited; the child below stands in for that limit.
# Any limit proves the point (refused and killed are both "not credited"); a short one keeps the
# quick tier quick: primepi(10**12) is killed, the others are refused well before it.
VERIFICATION_LIMIT_S = 5.0


def refusal_or_killed(value: Any) -> str:
    """The gate's refusal, run in a child killed at VERIFICATION_LIMIT_S ("killed": incorrect too)."""
    import os
    import signal

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            refusal = driver.unevaluated_refusal(value) or "credited"
            os.write(write_end, refusal.encode("utf-8", "replace")[:4000])
        finally:
            os._exit(0)
    os.close(write_end)
    import select

    ready = select.select([read_end], [], [], VERIFICATION_LIMIT_S)[0]
    if not ready:
        os.kill(pid, signal.SIGKILL)
    reply = os.read(read_end, 8192).decode("utf-8", "replace") if ready else "killed"
    os.close(read_end)
    os.waitpid(pid, 0)
    return reply


@pytest.mark.parametrize(
    "build",
    [
        lambda: sympy.pi + sympy.factorial(200000, evaluate=False),
        lambda: sympy.primenu(sympy.nextprime(10**18) * sympy.nextprime(10**19), evaluate=False),
        lambda: sympy.Add(1, 2, evaluate=False),
        lambda: sympy.UnevaluatedExpr(sympy.Integer(3)),
        lambda: sympy.binomial(10**6, 5 * 10**5, evaluate=False),
        lambda: sympy.fibonacci(10**6, evaluate=False),
        lambda: sympy.primepi(10**12, evaluate=False),
        lambda: sympy.Pow(3, 10**12, evaluate=False),
        lambda: sympy.Pow(2, sympy.Rational(10**12 + 1, 2), evaluate=False),
        lambda: sympy.Sum(sympy.Symbol("k"), (sympy.Symbol("k"), 1, 10**9)),
        lambda: [sympy.Matrix([[1, sympy.factorial(10**5, evaluate=False)]])],
        lambda: sympy.Mul(2, sympy.Symbol("x") + 2, evaluate=False),
        lambda: sympy.Pow(-1, sympy.Rational(1, 2), evaluate=False),
    ],
    ids=["factorial", "primenu", "Add", "UnevaluatedExpr", "binomial", "fibonacci", "primepi", "Pow",
         "root power", "Sum", "in a matrix", "held product", "sqrt(-1)"],
)  # fmt: skip
def test_an_unevaluated_value_is_never_credited(build: Any) -> None:
    reply = refusal_or_killed(build())
    assert reply == "killed" or "evaluated form" in reply, reply


@pytest.mark.parametrize(
    "value",
    [
        sympy.sqrt(2),
        sympy.pi,
        sympy.sin(1),
        sympy.log(3),
        sympy.Rational(3, 7),
        sympy.I,
        4 * sympy.pi - sympy.Rational(188684, 15015),
        sympy.Symbol("x") ** 2 + sympy.exp(sympy.Symbol("x")),
        sympy.Matrix([[sympy.sqrt(3), 1]]),
        sympy.Interval(0, sympy.pi),
        sympy.Lambda(sympy.Symbol("x"), sympy.Symbol("x") ** 2),
        sympy.root(-8, 3),
        sympy.root(1, 5, 2),
        sympy.CRootOf(sympy.Symbol("x") ** 5 - sympy.Symbol("x") + 1, 0),
        sympy.sqrt(3 * 10**200 + 1),
        2 * sympy.Symbol("x") + 4,
    ],
    ids=str,
)
def test_exact_evaluated_forms_pass(value: Any) -> None:
    decoded = value_codec.decode_value(value_codec.encode_value(value))
    assert driver.unevaluated_refusal(decoded) is None


def test_the_reference_own_forms_are_allowed_in_compare_mode() -> None:
    x = sympy.Symbol("x")
    reference = sympy.Integral(sympy.exp(-(x**2)), (x, 0, 1))
    assert driver.candidate_refusal(reference, "exact", reference) is None
    assert driver.candidate_refusal(reference, "exact", None) is not None


def test_the_evaluation_is_part_of_answers_budget() -> None:
    """An honest held form is evaluated on the answer side, under answer()'s own timer: work
    that does not finish there is answer()'s timeout, never the verifier's to do."""
    from tests.frontiermath.verdicts import QuietChannel

    code = "import sympy\n\ndef answer():\n    return sympy.primepi(10**12, evaluate=False)\n"
    request = {"code": code, "time_limit_s": 1.0, "max_value_bytes": value_codec.MAX_ENCODED_BYTES}
    reply = driver.run_answer(request, QuietChannel())  # type: ignore[arg-type]
    assert reply["status"] == "timeout", reply
    quick = {**request, "code": code.replace("sympy.primepi(10**12", "sympy.factorial(30")}
    reply = driver.run_answer(quick, QuietChannel())  # type: ignore[arg-type]
    assert reply["status"] == "ok" and value_codec.decode_value(reply["value"]) == sympy.factorial(30)
