"""The in-sandbox driver's value protocol and typed comparison, exercised in-process."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import numpy
import pytest
import sympy

from agent.tracks.frontiermath import sandbox_driver as driver


def roundtrip(value: Any) -> Any:
    return driver.decode(json.loads(json.dumps(driver.encode(value))))


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        10**400,
        -7,
        0.1,
        float("inf"),
        complex(1, -2),
        "x#y",
        Fraction(-3, 7),
        [1, (2, 3), {"k": [Fraction(1, 2)]}],
        {4, 5, 6},
        frozenset({1}),
        {(1, 2): "pair"},
    ],
)
def test_plain_values_round_trip_with_their_type(value: Any) -> None:
    back = roundtrip(value)
    assert back == value and type(back) is type(value)


def test_sympy_values_round_trip_through_srepr() -> None:
    x = sympy.Symbol("x")
    for value in (
        sympy.Rational(3, 7),
        sympy.sqrt(2) + 1,
        sympy.pi**2 / 6,
        x**2 - 1,
        sympy.Matrix([[1, 2], [3, x]]),
    ):
        tagged = driver.encode(value)
        assert tagged["t"] == "sympy" and tagged["v"] == sympy.srepr(value)
        assert roundtrip(value) == value


def test_numpy_and_integer_like_values() -> None:
    assert driver.encode(numpy.int64(5)) == {"t": "int", "v": "5"}
    assert driver.encode(numpy.float64(0.5)) == {"t": "float", "v": "0.5"}
    assert driver.encode(numpy.bool_(True)) == {"t": "bool", "v": True}
    array = roundtrip(numpy.array([[1, 2], [3, 4]]))
    assert isinstance(array, numpy.ndarray) and array.tolist() == [[1, 2], [3, 4]]


def test_unserializable_values_are_refused() -> None:
    with pytest.raises(driver.Unserializable, match="type object"):
        driver.encode(object())
    with pytest.raises(driver.Unserializable, match="function"):
        driver.encode([lambda: 1])


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
