"""The second oracle: every honest exact value equal to the reference is credited (issue 40).

The first oracle (test_exact_oracle.py) proves the gate from the attacker's side: no inexact value
and no skipped work is credited. This one proves it from the honest side. Each case is what a
strong model writes: a call of a library function (sympy's factor, expand, together, apart,
cancel, nsimplify, root, sqrt, solve, nonlinsolve, roots, Matrix operations, binomial, factorint;
numpy integer arrays; gmpy2 mpz/mpq; Fraction) whose result equals a reference that a task author
writes by hand. The value takes the real path in-process: the answer side's driver (answer(), then
the value brought to evaluated form), the codec and its schema check, then the verification side's
gate and verify() in an everyday idiom, or the typed comparison.

The oracle is independent of the verdict: each case's equality is by construction (the reference is
written from the same integers the value is computed from), and ``equal_by_numbers`` checks it
again by exact rational arithmetic at sample points, without sympy's comparison.

Which idioms apply: a scalar or expression under ``==``, ``Eq``, ``simplify(a - b) == 0``,
``equals`` and the typed comparison; a container (list, tuple, set, dict, Matrix) under ``==`` and
the typed comparison (``Eq``/``simplify`` of a list is not an idiom); a numpy array under
``numpy.array_equal`` and the typed comparison (``==`` on an array is an array, not a verdict).
docs/frontiermath.md, "Exact means exact".
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.frontiermath.verdicts import answer_value, credited, idiom_verdict, verify_reply

SCALAR_IDIOMS = ("==", "Eq", "simplify", "equals", "typed")
CONTAINER_IDIOMS = ("==", "typed")
# bool(Eq(p, q)) of two polynomials in x raises in sympy itself ("cannot determine truth value of
# Relational"), whatever the values: not an idiom a task can use for expressions with symbols.
SYMBOLIC_IDIOMS = ("==", "simplify", "equals", "typed")
# 15 examples a family: each example runs sympy in-process for every idiom (30 took 2-23 s each).
SETTINGS = settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
X = sympy.Symbol("x")


@dataclass(frozen=True)
class HonestCase:
    family: str
    body: str  # answer()'s body: a library call
    reference: str  # the reference as a task author writes it (sympy source, x is Symbol('x'))
    idioms: tuple[str, ...] = SCALAR_IDIOMS
    # The reference in the value's own form, for ``==`` (which compares forms: (x + 1)**2 is not
    # x**2 + 2*x + 1 under it); None when ``reference`` is already written in that form.
    form: str | None = None

    def reference_for(self, idiom: str) -> str:
        return self.form if idiom == "==" and self.form is not None else self.reference


def equal_by_numbers(case: HonestCase) -> bool:
    """Independent of the verdict: value and reference agree at rational points, exactly."""
    namespace: dict[str, object] = {}
    exec("import fractions, math\nimport gmpy2, numpy, sympy\nfrom sympy import *\n", namespace)
    value = eval(case.body.removeprefix("return "), namespace)
    reference = eval(case.reference, namespace)
    return _agree(value, reference)


def _agree(value: object, reference: object) -> bool:
    numpy = pytest.importorskip("numpy")
    if isinstance(value, numpy.ndarray):
        value = value.tolist()
    if isinstance(value, sympy.MatrixBase) or isinstance(reference, sympy.MatrixBase):
        return sympy.Matrix(value).shape == sympy.Matrix(reference).shape and all(
            _agree(a, b) for a, b in zip(sympy.Matrix(value), sympy.Matrix(reference), strict=True)
        )
    if isinstance(value, dict):
        return (
            isinstance(reference, dict)
            and len(value) == len(reference)
            and all(
                any(_agree(k, rk) and _agree(v, rv) for rk, rv in reference.items()) for k, v in value.items()
            )
        )
    if isinstance(value, list | tuple | set | frozenset | sympy.FiniteSet | sympy.Tuple):
        items, wanted = list(value), list(reference)  # type: ignore[call-overload]
        return len(items) == len(wanted) and all(any(_agree(a, b) for b in wanted) for a in items)
    value, reference = sympy.sympify(value), sympy.sympify(reference)
    if (value.free_symbols | reference.free_symbols) - {X}:
        return bool(value == reference)  # dict keys such as the symbols a solution names
    difference = value - reference
    for point in (Fraction(3, 7), Fraction(-5, 2), Fraction(11, 3)):
        at = difference.subs(X, sympy.Rational(point.numerator, point.denominator))
        if sympy.N(at, 60, maxn=200) != 0 and abs(sympy.N(at, 60)) > sympy.Rational(1, 10**50):
            return False
    return True


# -- the families: what a strong model returns -----------------------------------------------------

small = st.integers(-9, 9).filter(bool)
positive = st.integers(2, 9)


@st.composite
def factored_forms(draw: st.DrawFn) -> HonestCase:
    """factor, factor_terms, together, apart, cancel, expand: the forms sympy's own functions keep."""
    a, b, c = draw(positive), draw(small), draw(small)
    linear = f"{a}*Symbol('x') + {a * b}"  # a common factor: factor() holds a*(x + b)
    quadratic = f"Symbol('x')**2 + {b + c}*Symbol('x') + {b * c}"
    choices = [
        HonestCase("factor, linear", f"return sympy.factor({linear})", linear, SYMBOLIC_IDIOMS),
        HonestCase("factor_terms", f"return sympy.factor_terms({linear})", linear, SYMBOLIC_IDIOMS),
        HonestCase(
            "factor, quadratic",
            f"return sympy.factor({quadratic})",
            quadratic,
            SYMBOLIC_IDIOMS,
            form=f"(Symbol('x') + {b})*(Symbol('x') + {c})",
        ),
        HonestCase(
            "expand",
            f"return sympy.expand((Symbol('x') + {b})*(Symbol('x') + {c}))",
            quadratic,
            SYMBOLIC_IDIOMS,
        ),
        HonestCase(
            "together",
            f"return sympy.together({a}/Symbol('x') + {a * b}/Symbol('x'))",
            f"{a * (1 + b)}/Symbol('x')" if 1 + b else "0",
            SYMBOLIC_IDIOMS,
        ),
        HonestCase(
            "cancel",
            f"return sympy.cancel(({quadratic})/(Symbol('x') + {b}))",
            f"Symbol('x') + {c}",
            SYMBOLIC_IDIOMS,
        ),
        HonestCase(
            "apart",
            f"return sympy.apart({a}/((Symbol('x') + {b})*(Symbol('x') + {b + a})), Symbol('x'))",
            f"1/(Symbol('x') + {b}) - 1/(Symbol('x') + {b + a})",
            SYMBOLIC_IDIOMS,
        ),
    ]
    return draw(st.sampled_from(choices))


@st.composite
def principal_roots(draw: st.DrawFn) -> HonestCase:
    """root() of negative numbers and roots of unity: powers of -1 in sympy's evaluated form."""
    m, n = draw(positive), draw(st.sampled_from([3, 5, 7]))
    k = draw(st.integers(1, n - 1))
    same = draw(st.booleans())  # the reference is that very expression, or written as a power
    cube = f"root({-(m**3)}, 3)"
    unity = f"root(1, {n}, {k})"
    return draw(
        st.sampled_from(
            [
                HonestCase(
                    "root of a negative",
                    f"return sympy.{cube}",
                    cube if same else f"{m}*(-1)**Rational(1, 3)",
                ),
                HonestCase(
                    "root of unity",
                    f"return sympy.{unity}",
                    unity if same else f"(-1)**Rational({2 * k}, {n})",
                ),
                HonestCase("root, negative, odd", f"return sympy.root(-{m}, {n})", f"root(-{m}, {n})"),
            ]
        )
    )


@st.composite
def large_square_roots(draw: st.DrawFn) -> HonestCase:
    """sqrt of a non-square integer of hundreds of digits (the docker tier has thousands)."""
    digits = draw(st.integers(200, 600))
    n = draw(st.integers(10 ** (digits - 1), 10**digits)) * 2 + 1
    reference = draw(st.sampled_from([f"sqrt({n})", f"Integer({n})**Rational(1, 2)"]))
    return HonestCase("sqrt of a large integer", f"return sympy.sqrt({n})", reference)


@st.composite
def solver_results(draw: st.DrawFn) -> HonestCase:
    """solve, nonlinsolve, roots, solveset: lists, FiniteSets of Tuples, dicts."""
    a, s, d = draw(positive), draw(small), draw(small)
    x, y = "Symbol('x')", "Symbol('y')"
    half_sum, half_diff = Fraction(s + d, 2), Fraction(s - d, 2)

    def rational(number: Fraction) -> str:
        return f"Rational({number.numerator}, {number.denominator})"

    solution = f"{{{x}: {rational(half_sum)}, {y}: {rational(half_diff)}}}"
    choices = [
        HonestCase("solve", f"return sympy.solve({x}**2 - {a * a}, {x})", f"[{-a}, {a}]", CONTAINER_IDIOMS),
        HonestCase(
            "nonlinsolve",
            f"return sympy.nonlinsolve([{x}**2 - {a * a}, {y} - {x}], [{x}, {y}])",
            f"{{({-a}, {-a}), ({a}, {a})}}",
            CONTAINER_IDIOMS,
        ),
        HonestCase(
            "nonlinsolve, one solution as a tuple",
            f"return tuple(sympy.nonlinsolve([{x} - {a}, {y} + {x}], [{x}, {y}]))[0]",
            f"({a}, {-a})",
            CONTAINER_IDIOMS,
        ),
        HonestCase(
            "solve, a system",
            f"return sympy.solve([{x} + {y} - {s}, {x} - {y} - {d}], [{x}, {y}])",
            solution,
            CONTAINER_IDIOMS,
        ),
        HonestCase(
            "roots",
            f"return sympy.roots(({x} - {a})**2*({x} + {a}), {x})",
            f"{{{a}: 2, {-a}: 1}}",
            CONTAINER_IDIOMS,
        ),
        HonestCase(
            "solveset", f"return sympy.solveset({x}**2 - {a * a}, {x})", f"{{{a}, {-a}}}", CONTAINER_IDIOMS
        ),
        HonestCase(
            "CRootOf", f"return sympy.CRootOf({x}**5 - {x} + {a}, 0)", f"CRootOf({x}**5 - {x} + {a}, 0)"
        ),
    ]
    return draw(st.sampled_from(choices))


@st.composite
def integer_functions(draw: st.DrawFn) -> HonestCase:
    """binomial, factorint, nsimplify of rationals, Matrix operations, and every integer library."""
    n, k = draw(st.integers(10, 400)), draw(st.integers(0, 10))
    p, q = draw(small), draw(positive)
    a, b, c, d = draw(small), draw(small), draw(small), draw(small)
    det = a * d - b * c
    matrix = f"Matrix([[{a}, {b}], [{c}, {d}]])"
    big = sympy.binomial(n, k)
    choices = [
        HonestCase("binomial", f"return sympy.binomial({n}, {k})", str(big)),
        HonestCase(
            "factorint",
            f"return sympy.factorint({big * 6})",
            repr(sympy.factorint(big * 6)),
            CONTAINER_IDIOMS,
        ),
        HonestCase(
            "nsimplify of a rational",
            f"return sympy.nsimplify(sympy.Rational({p}, {q}))",
            f"Rational({p}, {q})",
        ),
        HonestCase("nsimplify of a dyadic float", f"return sympy.nsimplify({p / 8!r})", f"Rational({p}, 8)"),
        HonestCase("Matrix det", f"return {matrix}.det()", str(det)),
        HonestCase("Matrix product", f"return {matrix} * {matrix}", f"{matrix}**2", CONTAINER_IDIOMS),
        HonestCase("gmpy2 mpz", f"return gmpy2.mpz({big})", str(big)),
        HonestCase("gmpy2 mpq", f"return gmpy2.mpq({p}, {q})", f"Rational({p}, {q})"),
        HonestCase("Fraction", f"return fractions.Fraction({p}, {q})", f"Rational({p}, {q})"),
        HonestCase("numpy int64", f"return numpy.int64({n})", str(n)),
        HonestCase("math.comb", f"return math.comb({n}, {k})", f"binomial({n}, {k})"),
    ]
    if det:
        inverse = sympy.Matrix([[a, b], [c, d]]).inv()
        choices.append(
            HonestCase("Matrix inverse", f"return {matrix}.inv()", sympy.srepr(inverse), CONTAINER_IDIOMS)
        )
    return draw(st.sampled_from(choices))


def _check(case: HonestCase, idiom: str) -> None:
    assert equal_by_numbers(case), case  # the oracle: the value equals the reference
    encoded = answer_value(case.body)
    reply = idiom_verdict(encoded, idiom, case.reference_for(idiom))
    assert credited(reply), (case, idiom, reply)


@pytest.mark.parametrize("family", ["factored", "roots", "solvers", "integers"])
@SETTINGS
@given(data=st.data())
def test_every_honest_exact_value_equal_to_the_reference_is_credited(
    family: str, data: st.DataObject
) -> None:
    strategy = {
        "factored": factored_forms(),
        "roots": principal_roots(),
        "solvers": solver_results(),
        "integers": integer_functions(),
    }[family]
    case = data.draw(strategy)
    idiom = data.draw(st.sampled_from(case.idioms))
    _check(case, idiom)


@SETTINGS
@given(case=large_square_roots(), idiom=st.sampled_from(SCALAR_IDIOMS))
def test_large_square_roots_are_credited(case: HonestCase, idiom: str) -> None:
    _check(case, idiom)


@SETTINGS
@given(n=st.integers(-(10**30), 10**30), shape=st.sampled_from([(4,), (2, 3)]))
def test_numpy_integer_arrays_are_credited(n: int, shape: tuple[int, ...]) -> None:
    size = 1
    for extent in shape:
        size *= extent
    entries = [n + i for i in range(size)]
    nested = entries if len(shape) == 1 else [entries[:3], entries[3:]]
    dtype = "numpy.int64" if all(-(2**63) <= e < 2**63 for e in entries) else "object"
    body = f"return numpy.array({nested!r}, dtype={dtype})"
    encoded = answer_value(body)
    assert credited(idiom_verdict(encoded, "typed", repr(nested)))
    array_equal = (
        f"def verify(a):\n    return bool(numpy.array_equal(a, numpy.array({nested!r}, dtype=object)))\n"
    )
    assert credited(verify_reply(encoded, array_equal))
