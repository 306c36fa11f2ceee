"""An independent oracle: is this value *exactly* the reference? (issue 22 item 3)

It shares no code with the driver's gate or comparison and never uses sympy's ``==``: types are
named by module and class name from fixed tables, rationals are compared as ``fractions.Fraction``,
and a symbolic value is compared numerically with mpmath at 1,000 bits after its own structural
check that it is exact and evaluated. Tests assert that Proctor's verdict equals this one.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import mpmath

# Exact rational scalars, by "module.qualname" of their type.
_INTEGER_TYPES = {
    "builtins.int",
    "gmpy2.mpz",
    "sympy.core.numbers.Integer",
    "sympy.core.numbers.One",
    "sympy.core.numbers.Zero",
    "sympy.core.numbers.NegativeOne",
    *(f"numpy.{name}" for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")),
}
_RATIONAL_TYPES = {
    "fractions.Fraction",
    "gmpy2.mpq",
    "sympy.core.numbers.Rational",
    "sympy.core.numbers.Half",
}
# Floating point of every library the codec carries, by the same names.
FLOATING_TYPES = {
    "builtins.float",
    "builtins.complex",
    "decimal.Decimal",
    "gmpy2.mpfr",
    "gmpy2.mpc",
    "builtins.mpc",  # gmpy2's mpc names no module
    "sympy.core.numbers.Float",
    "mpmath.ctx_mp_python.mpf",
    "mpmath.ctx_mp_python.mpc",
    *(f"numpy.{name}" for name in ("float16", "float32", "float64", "longdouble", "complex64", "complex128")),
}
# The exact, evaluated symbolic forms the oracle understands: leaves and the nodes above them.
_SYMBOLIC_LEAVES = {"Pi": mpmath.pi, "Exp1": mpmath.e, "ImaginaryUnit": mpmath.j}
_SYMBOLIC_NODES = {
    "Add": lambda *xs: mpmath.fsum(xs),
    "Mul": lambda *xs: mpmath.fprod(xs),
    "Pow": lambda b, e: mpmath.power(b, e),
    "sin": mpmath.sin,
    "cos": mpmath.cos,
    "log": mpmath.log,
    "exp": mpmath.exp,
}


def type_name(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def as_fraction(value: Any) -> Fraction | None:
    """The exact rational a scalar is, for exact types only (never a float, never a bool)."""
    name = type_name(value)
    if name in _INTEGER_TYPES:
        return Fraction(int(value))
    if name in _RATIONAL_TYPES:
        return Fraction(int(value.numerator), int(value.denominator))
    return None


def float_as_fraction(value: Any) -> Fraction | None:
    """The exact binary/decimal number a real floating-point scalar stores (for tolerances)."""
    name = type_name(value)
    if name in ("sympy.core.numbers.Float", "mpmath.ctx_mp_python.mpf"):
        sign, man, exp, _ = value._mpf_
        number = Fraction(man) * (Fraction(2) ** exp)
        return -number if sign else number
    if name in ("builtins.float", "decimal.Decimal", "numpy.float64", "numpy.float32", "numpy.float16"):
        return Fraction(value) if name == "decimal.Decimal" else Fraction(float(value))
    if name == "gmpy2.mpfr":
        return Fraction(*(int(part) for part in value.as_integer_ratio()))
    return as_fraction(value)


def _symbolic_number(value: Any) -> Any | None:
    """mpmath's value of an exact, evaluated symbolic number; None when it is not one."""
    fraction = as_fraction(value)
    if fraction is not None:
        return mpmath.mpf(fraction.numerator) / fraction.denominator
    kind = type(value).__name__
    if not getattr(value, "args", ()):
        return _SYMBOLIC_LEAVES.get(kind)
    if kind not in _SYMBOLIC_NODES:
        return None
    numbers = [as_fraction(arg) is not None for arg in value.args]
    if kind in ("Add", "Mul") and sum(numbers) > 1:
        return None  # unevaluated: numbers not yet combined
    if kind == "Pow" and all(numbers):
        exponent = as_fraction(value.args[1])
        assert exponent is not None
        if exponent.denominator == 1 or abs(exponent.numerator) > exponent.denominator:
            return None  # unevaluated power of a number
    evaluates_at = {"sin": (0,), "cos": (0,), "log": (0, 1), "exp": (0, 1)}
    if as_fraction(value.args[0]) in evaluates_at.get(kind, ()):
        return None  # sin(0), cos(0), log(1), exp(0) and exp(1) evaluate
    parts = [_symbolic_number(arg) for arg in value.args]
    if any(part is None for part in parts):
        return None
    return _SYMBOLIC_NODES[kind](*parts)


def exactly(value: Any, reference: Any) -> bool:
    """Is ``value`` exactly ``reference`` (an int, Fraction, sympy exact number, or a list/tuple/dict
    of them)? Any floating-point part anywhere, or an unevaluated form, makes it False."""
    if isinstance(reference, list | tuple):
        return (
            type(value) is type(reference)
            and len(value) == len(reference)
            and all(exactly(got, want) for got, want in zip(value, reference, strict=True))
        )
    if isinstance(reference, dict):
        if type(value) is not dict or len(value) != len(reference):
            return False
        pairs = list(value.items())
        return all(
            any(exactly(key, want_key) and exactly(got, want) for key, got in pairs)
            for want_key, want in reference.items()
        )
    if type_name(value) in FLOATING_TYPES:
        return False
    want = as_fraction(reference)
    got = as_fraction(value)
    if want is not None and got is not None:
        return got == want
    with mpmath.workprec(1000):
        got_number = _symbolic_number(value)
        want_number = _symbolic_number(reference)
        if got_number is None or want_number is None:
            return False
        return bool(abs(got_number - want_number) < mpmath.mpf(2) ** -900)


def within(value: Any, reference: Fraction, tolerance: Fraction) -> bool:
    """For an approximate answer type: the exact number the value stores is within the tolerance."""
    number = float_as_fraction(value)
    return number is not None and abs(number - reference) < tolerance
