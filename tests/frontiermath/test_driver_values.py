"""The in-sandbox driver's typed comparison, exact references and hardened parser, in-process.

How values are carried is value_codec's job: see test_value_codec*.py."""

from __future__ import annotations

import warnings
from fractions import Fraction
from typing import Any

import numpy
import pytest
import sympy
from sympy.utilities.exceptions import SymPyDeprecationWarning

from proctor.agent.tracks.frontiermath import sandbox_driver as driver
from proctor.agent.tracks.frontiermath import value_codec


@pytest.mark.parametrize(
    ("candidate", "expected", "tolerance", "same"),
    [
        (42, 42, None, True),
        (sympy.Integer(42), 42, None, True),
        (42, sympy.Integer(42), None, True),
        (42.0, 42, None, False),  # exact types: a float is not the integer 42
        (True, 1, None, False),
        (Fraction(3, 7), sympy.Rational(3, 7), None, True),
        (sympy.Rational(6, 14), Fraction(3, 7), None, True),
        (3 / 7, sympy.Rational(3, 7), None, False),
        ("abc", "abc", None, True),
        ("abc", "abd", None, False),
        (sympy.sqrt(8) / 2 + 1, sympy.sqrt(2) + 1, None, True),
        (1 - sympy.cos(sympy.Symbol("x")) ** 2, sympy.sin(sympy.Symbol("x")) ** 2, None, True),
        # An integer answer must be an integer, not an expression that happens to equal one.
        (
            sympy.sin(sympy.Symbol("x")) ** 2 + sympy.cos(sympy.Symbol("x")) ** 2,
            sympy.Integer(1),
            None,
            False,
        ),
        (2.414, sympy.sqrt(2) + 1, None, False),
        (2.4142135, sympy.sqrt(2) + 1, 1e-6, True),
        (2.41, sympy.sqrt(2) + 1, 1e-3, False),
        ([1, Fraction(1, 2)], (1, sympy.Rational(1, 2)), None, True),
        ([1, 2], [1, 2, 3], None, False),
        ({3, 1, 2}, {1, 2, 3}, None, True),
        ({"a": 1}, {"a": 1}, None, True),
        ([[1, 0], [0, 1]], sympy.eye(2), None, True),
        (sympy.Matrix([[1, 1], [0, 1]]), sympy.eye(2), None, False),
    ],
)
def test_typed_comparison(candidate: Any, expected: Any, tolerance: float | None, same: bool) -> None:
    result, why = driver.compare(candidate, expected, tolerance)
    assert result is same, why


def test_typed_comparison_accepts_the_pinned_libraries_integer_and_rational_types() -> None:
    import gmpy2

    assert driver.compare(gmpy2.mpz(42), sympy.Integer(42))[0]
    assert driver.compare(numpy.int64(42), sympy.Integer(42))[0]
    assert driver.compare(gmpy2.mpq(3, 7), sympy.Rational(3, 7))[0]
    assert not driver.compare(numpy.float64(42.0), sympy.Integer(42))[0]


@pytest.mark.parametrize("candidate", [float("nan"), float("inf"), sympy.nan, sympy.zoo, sympy.oo])
def test_undefined_and_infinite_numbers_never_meet_a_tolerance(candidate: Any) -> None:
    assert driver.compare(candidate, sympy.pi, 1e-9)[0] is False


@pytest.mark.parametrize(
    "candidate",
    ["sqrt(2) + 1", ["sqrt(2) + 1"], numpy.array(["1"], dtype=object), ("x",)],
)
def test_text_is_never_handed_to_sympify(candidate: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("sympify was given text")

    monkeypatch.setattr("sympy.parsing.sympy_parser.parse_expr", refuse)
    for expected in (sympy.sqrt(2) + 1, sympy.Matrix([[1]]), sympy.pi):
        assert driver.compare(candidate, expected, None)[0] is False


def test_references_are_evaluated_exactly() -> None:
    value = driver.evaluate_reference("4*pi - 188684/15015")
    assert value == 4 * sympy.pi - sympy.Rational(188684, 15015)
    assert not driver.contains_float(value)
    assert driver.evaluate_reference("[1/3, {2: 5/2}]") == [sympy.Rational(1, 3), {2: sympy.Rational(5, 2)}]
    assert driver.evaluate_reference("2**100 // 3") == 2**100 // 3
    assert driver.contains_float(driver.evaluate_reference("0.5 + pi"))
    assert driver.contains_float(driver.evaluate_reference("[1, 2.0]"))


@pytest.mark.parametrize(
    "source",
    ["__import__('os').getpid()", "open('/etc/passwd')", "eval('1')", "().__class__", "(1).__add__(2)"],
)
def test_references_cannot_reach_the_builtins_that_run_code(source: str) -> None:
    with pytest.raises((NameError, ValueError)):
        driver.evaluate_reference(source)


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "(lambda: 1)()",
        "Integer(1).__class__",
        "eval('1')",
        "getattr(Integer(1), 'p')",
        "'{0.__class__}'.format(1)",
        "[x for x in (1, 2)]",
        "sqrt(2) if __import__('os') else 1",
    ],
)
def test_the_hardened_parser_refuses_code(text: str) -> None:
    driver.harden_sympy_parser()
    with pytest.raises((ValueError, sympy.SympifyError)):
        sympy.sympify(text)


def test_the_hardened_parser_still_reads_mathematics() -> None:
    driver.harden_sympy_parser()
    x = sympy.Symbol("x")
    assert sympy.sympify("sqrt(2)*x**2 + Rational(1, 3) - sin(pi/4)") == (
        sympy.sqrt(2) * x**2 + sympy.Rational(1, 3) - sympy.sin(sympy.pi / 4)
    )
    assert sympy.sympify("[1, 2/3]") == [1, sympy.Rational(2, 3)]


def test_short_repr_never_converts_a_huge_integer_to_decimal() -> None:
    assert driver.short_repr(10**999000) == f"<integer of {(10**999000).bit_length()} bits>"
    assert len(driver.short_repr(list(range(10_000)))) <= 203


def test_unevaluated_calculus_does_not_outsource_the_work_to_the_verifier() -> None:
    x = sympy.Symbol("x")
    integral = sympy.Integral(4 / (1 + x**2), (x, 0, 1))  # equals pi once evaluated
    same, why = driver.compare(integral, sympy.pi)
    assert same is False and "unevaluated (Integral)" in why
    series = sympy.Sum(1 / sympy.Symbol("k") ** 2, (sympy.Symbol("k"), 1, sympy.oo))
    assert driver.compare(series, sympy.pi**2 / 6)[0] is False
    assert driver.compare(series, series)[0] is True  # an unevaluated reference may be matched


@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        (sympy.Integral(sympy.exp(-(sympy.Symbol("x") ** 2)), (sympy.Symbol("x"), 0, 1)), 0.746824132812427),
        (sympy.Sum(1 / sympy.Symbol("k") ** 2, (sympy.Symbol("k"), 1, sympy.oo)), 1.6449340668482264),
        (sympy.Integral(4 / (1 + sympy.Symbol("x") ** 2), (sympy.Symbol("x"), 0, 1)), sympy.pi),
        # Inside a sequence the element goes through the same tolerance path.
        ([sympy.Sum(1 / sympy.Symbol("k") ** 2, (sympy.Symbol("k"), 1, sympy.oo))], [1.6449340668482264]),
    ],
)
def test_unevaluated_calculus_never_meets_a_tolerance(candidate: Any, expected: Any) -> None:
    """Against a tolerance the difference is evaluated numerically: that must not compute an
    unevaluated integral or sum for the submission (it did: both were `correct`)."""
    same, why = driver.compare(candidate, expected, 1e-6)
    assert same is False and "unevaluated" in why


@pytest.mark.parametrize("error", [MemoryError(), OverflowError("too big"), KeyError("t")])
def test_any_failure_to_rebuild_the_value_is_the_values(
    monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    """Decoding runs after the reference-ready mark: an exception the codec did not foresee must
    become a decode_error (the answer's), not escape to the driver's harness_error."""

    def failing(data: object) -> object:
        raise error

    monkeypatch.setattr(driver.codec, "decode_value", failing)
    value, failure = driver._decode_candidate({"value_json": '{"t": "int", "v": "0x2a"}'})
    assert value is None and failure is not None and failure["status"] == "decode_error"


PI_MINUS_RATIONAL = "4*pi - 188684/15015"


@pytest.mark.parametrize(
    ("candidate", "reference", "tolerance"),
    [
        # The rational part replaced by a 1-bit Float 3.4 away from it: was "symbolically equal".
        (sympy.Add(4 * sympy.pi, sympy.Float(-16, precision=1), evaluate=False), PI_MINUS_RATIONAL, None),
        (sympy.Add(4 * sympy.pi, sympy.Float(-12, precision=2), evaluate=False), PI_MINUS_RATIONAL, None),
        (
            sympy.Add(sympy.sqrt(2), sympy.Float(2, precision=1), evaluate=False),
            "sqrt(2) + Rational(7, 3)",
            None,
        ),
        # The right value plus a low-precision error that rounding made vanish.
        (sympy.Add(sympy.sqrt(2) + 1, sympy.Float(0.1875, precision=2), evaluate=False), "sqrt(2) + 1", None),
        (sympy.Add(4 * sympy.pi, sympy.Float(-16, precision=1), evaluate=False), PI_MINUS_RATIONAL, 1e-6),
        # Set complements compare the end points: the same rounding made a wrong interval equal.
        (
            sympy.Interval(0, sympy.Add(4 * sympy.pi, sympy.Float(-12, precision=2), 1, evaluate=False)),
            "Interval(0, 4*pi - 188684/15015 + 1)",
            None,
        ),
        # numpy's float16 becomes an 11-bit Float; in a sympy tree it rounded the same way.
        (
            [sympy.Add(4 * sympy.pi, sympy.Float(-12.5, precision=11), evaluate=False)],
            f"[{PI_MINUS_RATIONAL}]",
            1e-6,
        ),
    ],
)
def test_low_precision_floats_never_round_a_wrong_value_into_the_reference(
    candidate: Any, reference: str, tolerance: float | None
) -> None:
    expected = driver.evaluate_reference(reference)
    same, why = driver.compare(candidate, expected, tolerance)
    assert same is False, why


def test_floats_are_compared_as_the_exact_numbers_they_store() -> None:
    pi = sympy.pi
    # Exactly the reference, written with Floats: still equal.
    assert driver.compare(sympy.Mul(sympy.Float(1.0, precision=1), pi, evaluate=False), pi)[0] is True
    assert driver.compare(pi + sympy.Float(0.5), pi + sympy.Rational(1, 2))[0] is True
    # A double is within any sensible tolerance of what it approximates, exactly measured.
    assert driver.compare(3.141592653589793, pi, 1e-12)[0] is True
    assert driver.compare(numpy.float16(3.140625), pi, 1e-3)[0] is True
    assert driver.compare(numpy.float16(3.140625), pi, 1e-4)[0] is False
    assert driver.exact_numbers(sympy.Float(0.1)) == sympy.Rational(3602879701896397, 2**55)


SQRT2 = sympy.sqrt(2)


def matrix_of_non_expressions(rows: list[list[Any]]) -> Any:
    """A sympy Matrix holding Polys, as a hostile answer() may build one: sympy deprecates such
    matrices but still makes them, so the comparison must still judge them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SymPyDeprecationWarning)
        return sympy.Matrix(rows)


def codec_round_trip(value: Any) -> Any:
    """The value as the verification sandbox receives it."""
    return value_codec.decode_value(value_codec.encode_value(value))


@pytest.mark.parametrize(
    ("candidate", "reference"),
    [
        # 6 is 1 mod 5: the Poly's own == converted the reference into GF(5) and said "equal".
        (sympy.Poly(SQRT2 + 6, SQRT2, modulus=5), "sqrt(2) + 1"),
        (sympy.Poly(0, sympy.pi, modulus=2), PI_MINUS_RATIONAL),
        # The same Poly inside a sequence, a set, a matrix or a sympy Tuple: compared the same way.
        ([sympy.Poly(SQRT2 + 6, SQRT2, modulus=5)], "[sqrt(2) + 1]"),
        ({sympy.Poly(SQRT2 + 6, SQRT2, modulus=5)}, "{sqrt(2) + 1}"),
        (matrix_of_non_expressions([[sympy.Poly(SQRT2 + 6, SQRT2, modulus=5)]]), "Matrix([[sqrt(2) + 1]])"),
        (sympy.Tuple(sympy.Poly(SQRT2 + 6, SQRT2, modulus=5)), "Tuple(sqrt(2) + 1)"),
        # A wrong polynomial in a weak domain, against a polynomial reference.
        (sympy.Poly(sympy.Symbol("x") + 7, sympy.Symbol("x"), modulus=2), "Symbol('x') + 3"),
        (
            sympy.Poly(sympy.Symbol("x") + 12.0, sympy.Symbol("x"), domain=sympy.RealField(3)),
            "Symbol('x') + 188684/15015",
        ),
    ],
)
@pytest.mark.filterwarnings("ignore::sympy.utilities.exceptions.SymPyDeprecationWarning")
def test_a_polynomial_never_coerces_the_reference_into_its_own_domain(candidate: Any, reference: str) -> None:
    expected = driver.evaluate_reference(reference)
    same, why = driver.compare(codec_round_trip(candidate), expected)
    assert same is False, why


def test_a_polynomial_is_still_judged_as_the_value_it_stands_for() -> None:
    x = sympy.Symbol("x")
    assert driver.compare(sympy.Poly(x**2 + 3 * x + 5, x), x**2 + 3 * x + 5)[0] is True
    assert driver.compare(sympy.Poly(SQRT2 + 1, SQRT2), SQRT2 + 1)[0] is True
    modular = driver.evaluate_reference("Poly(Symbol('x')**2 + 3*Symbol('x'), Symbol('x'), modulus=5)")
    assert driver.compare(sympy.Poly(x**2 + 8 * x, x, modulus=5), modular)[0] is True  # 8 = 3 in GF(5)
    assert driver.compare(sympy.Poly(x**2 + 3 * x, x, modulus=7), modular)[0] is False
    assert driver.compare(x**2 + 3 * x, modular)[0] is False


def test_each_submitted_dict_key_answers_one_expected_key() -> None:
    """Two expected keys equal under the comparison once both matched the first submitted key,
    so the second submitted key and its value were never looked at."""
    x = sympy.Symbol("x")
    expected = {(x + 1) ** 2: 1, x**2 + 2 * x + 1: 1}
    assert len(expected) == 2
    assert driver.compare({(x + 1) ** 2: 1, x: 5}, expected)[0] is False
    assert driver.compare({x**2 + 2 * x + 1: 1, (x + 1) ** 2: 1}, expected)[0] is True
    assert driver.compare({"b": 2, "a": 1}, {"a": 1, "b": 2})[0] is True


def _sparse_matrix_with(size: int, entry: Any) -> Any:
    """A size x size sparse matrix with one entry: walking its cells would never end."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SymPyDeprecationWarning)
        return sympy.SparseMatrix(size, size, {(3, 4): entry})


def _inexact_cases() -> list[tuple[str, Any, list[str]]]:
    import pyadic
    from sympy.polys.domains import GF

    x, y = sympy.symbols("x y")
    return [
        ("int", 143, []),
        ("sympy Integer", sympy.Integer(143), []),
        ("numpy int64", numpy.int64(143), []),
        ("Python float: inexact at any magnitude", 1e30, ["floating-point"]),
        ("42.0 is not the integer 42", 42.0, ["floating-point"]),
        ("Python complex", 1j, ["floating-point"]),
        ("sympy Float", sympy.Float(1e30), ["floating-point"]),
        ("sympy Float inside an expression", sympy.pi + sympy.Float(0.5), ["floating-point"]),
        ("Decimal", __import__("decimal").Decimal("1.5"), ["floating-point"]),
        ("mpmath mpf", __import__("mpmath").mpf(3), ["floating-point"]),
        ("mpmath matrix", __import__("mpmath").matrix([[1, 2]]), ["floating-point"]),
        ("Fraction", Fraction(1, 3), []),
        ("exact sympy expression", sympy.sqrt(2) + sympy.pi + sympy.sin(1) + sympy.I, []),
        ("int numpy array", numpy.arange(3), []),
        ("an unknown leaf is never exact", object(), ["unrecognised"]),
        ("Poly over ZZ", sympy.Poly(x**2 + 1, x), []),
        ("Poly over ZZ[y]", sympy.Poly(x * y + 1, x), []),
        ("GF(2) element", GF(2)(1), ["modular"]),
        ("Poly over GF(143)", sympy.Poly(0, x, modulus=143), ["modular"]),
        ("Poly over GF(7)[y]", sympy.Poly(x + y, x, domain=sympy.GF(7)[y]), ["modular"]),
        ("Poly over RR", sympy.Poly(1.5 * x, x, domain=sympy.RR), ["floating-point"]),
        ("pyadic ModP", pyadic.ModP(3, 7), ["modular"]),
        ("pyadic PAdic", pyadic.PAdic(3, 7, 1), ["p-adic"]),
        ("float64 below 2**53", numpy.float64(2.0**53 - 1), ["floating-point"]),
        ("float64 at 2**53", numpy.float64(2.0**53), ["floating-point"]),
        ("float32 at 2**24", numpy.float32(2.0**24), ["floating-point"]),
        ("float32 below 2**24", numpy.float32(2.0**24 - 1), ["floating-point"]),
        ("float16 at 2048", numpy.float16(2048), ["floating-point"]),
        ("complex128 with a large imaginary part", numpy.complex128(1 + 1e20j), ["floating-point"]),
        ("float array of nan and inf", numpy.array([numpy.nan, numpy.inf, 1.0]), ["floating-point"]),
        ("empty float array", numpy.zeros(0), ["floating-point"]),
        ("float array", numpy.array([1.0, 3e17]), ["floating-point"]),
        ("nested in a dict key", {(1, GF(7)(3)): 2}, ["modular"]),
        ("nested in a dict value", {"a": [pyadic.PAdic(3, 7, 1)]}, ["p-adic"]),
        ("inside a set", frozenset({GF(5)(1)}), ["modular"]),
        ("inside an object array", numpy.array([None, GF(3)(1)], dtype=object), ["modular"]),
        ("inside a sympy Tuple", sympy.Tuple(1, sympy.Poly(3, x, modulus=7)), ["modular"]),
        (
            "inside a matrix",
            matrix_of_non_expressions([[sympy.Poly(x, x, domain=sympy.RR)]]),
            ["floating-point"],
        ),
        ("inside a huge sparse matrix", _sparse_matrix_with(10**6, sympy.Poly(3, x, modulus=7)), ["modular"]),
        (
            "two kinds at once",
            [GF(2)(1), numpy.float64(1e300), pyadic.PAdic(1, 5, 2)],
            ["floating-point", "modular", "p-adic"],
        ),
        ("Float in a huge sparse matrix", _sparse_matrix_with(10**6, sympy.Float(2)), ["floating-point"]),
    ]


_INEXACT_CASES = _inexact_cases()


@pytest.mark.parametrize(("name", "value", "kinds"), _INEXACT_CASES, ids=[case[0] for case in _INEXACT_CASES])
def test_values_whose_equality_reduces_or_rounds_are_found_wherever_they_sit(
    name: str, value: Any, kinds: list[str]
) -> None:
    assert driver.inexact_kinds(value) == kinds, name


@pytest.mark.parametrize(
    ("answer_kind", "kinds"),
    [
        ("exact", ["floating-point", "modular", "p-adic"]),
        ("floating-point", ["modular", "p-adic"]),
        ("modular", ["floating-point", "p-adic"]),
        ("p-adic", ["floating-point", "modular"]),
        # Anything else is no kind a task file can state (the schema refuses it): exact.
        ("Python float", ["floating-point", "modular", "p-adic"]),
        (None, ["floating-point", "modular", "p-adic"]),
    ],
)
def test_an_inexact_value_reaches_verify_only_when_the_answer_kind_is_its_kind(
    answer_kind: str | None, kinds: list[str]
) -> None:
    import pyadic
    from sympy.polys.domains import GF

    value = [GF(2)(1), numpy.float64(1e300), pyadic.PAdic(1, 5, 2)]
    assert driver.unasked_inexact_kinds(value, answer_kind) == kinds
