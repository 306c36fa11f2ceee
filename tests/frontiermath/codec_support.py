"""Helpers shared by the value codec tests: the JSON round trip and a deep, typed sameness check."""

from __future__ import annotations

import decimal
import json
import math
import struct
import sys
from fractions import Fraction
from typing import Any

import pytest

from proctor.agent.tracks.frontiermath.value_codec import decode_value, encode_value

numpy = pytest.importorskip("numpy")
sympy = pytest.importorskip("sympy")


def roundtrip(value: Any) -> Any:
    """What verify() receives: encode in the answer process, JSON on the wire, decode."""
    return decode_value(json.loads(json.dumps(encode_value(value))))


def assert_same(got: Any, want: Any, where: str = "value") -> None:
    """``got`` has exactly ``want``'s type, deeply, and equals it (nan-aware, precision-aware)."""
    assert type(got) is type(want), f"{where}: {type(got)} is not {type(want)}"
    if isinstance(want, float):
        assert struct.pack(">d", got) == struct.pack(">d", want) or (math.isnan(got) and math.isnan(want))
    elif isinstance(want, complex):
        assert_same(got.real, want.real, where + ".real")
        assert_same(got.imag, want.imag, where + ".imag")
    elif isinstance(want, list | tuple):
        assert len(got) == len(want), where
        for index, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_same(a, b, f"{where}[{index}]")
    elif isinstance(want, set | frozenset):
        assert len(got) == len(want), where
        pool = list(got)
        for item in want:
            match = next((i for i, candidate in enumerate(pool) if _same(candidate, item)), None)
            assert match is not None, f"{where}: {item!r} lost"
            pool.pop(match)
    elif isinstance(want, dict):
        assert len(got) == len(want), where
        for (ka, va), (kb, vb) in zip(got.items(), want.items(), strict=True):
            assert_same(ka, kb, where + ".key")
            assert_same(va, vb, f"{where}[{kb!r}]")
    elif isinstance(want, decimal.Decimal):
        assert got.as_tuple() == want.as_tuple(), where
    elif _is_galois(want):
        assert got.dtype == want.dtype and got.shape == want.shape, where
        assert numpy.array_equal(got.view(numpy.ndarray), want.view(numpy.ndarray)), where
    elif isinstance(want, numpy.ndarray):
        _assert_same_array(got, want, where)
    elif isinstance(want, numpy.generic):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), where
    elif isinstance(want, sympy.MatrixBase):
        assert got.shape == want.shape and got == want, where
        for a, b in zip(got, want, strict=True):
            assert_same(a, b, where + "[]")
    elif isinstance(want, sympy.Poly):
        assert got == want and got.domain == want.domain and got.gens == want.gens, where
        assert got.rep == want.rep, where
    elif isinstance(want, sympy.Basic):
        assert sympy.srepr(got) == sympy.srepr(want), where
        assert got == want or (got is sympy.nan and want is sympy.nan), where
        for a, b in zip(sympy.preorder_traversal(got), sympy.preorder_traversal(want), strict=True):
            assert type(a) is type(b), where
            if isinstance(b, sympy.Float):
                assert a._prec == b._prec and a._mpf_ == b._mpf_, where
            if isinstance(b, sympy.Symbol):
                assert a.assumptions0 == b.assumptions0, where
    else:
        _assert_same_library_value(got, want, where)


def _assert_same_array(got: Any, want: Any, where: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, where
    if want.dtype == object:
        for a, b in zip(got.reshape(-1), want.reshape(-1), strict=True):
            assert_same(a, b, where + "[]")
    else:
        assert got.tobytes() == numpy.ascontiguousarray(want).tobytes(), where


def _assert_same_library_value(got: Any, want: Any, where: str) -> None:
    module = type(want).__module__.split(".")[0]
    gmpy2_types = _gmpy2_types()
    if type(want) in gmpy2_types:
        module = "gmpy2"
    if module == "mpmath":
        mpmath = pytest.importorskip("mpmath")
        if isinstance(want, mpmath.matrix):
            assert (got.rows, got.cols) == (want.rows, want.cols), where
            for i in range(want.rows):
                for j in range(want.cols):
                    assert_same(got[i, j], want[i, j], f"{where}[{i},{j}]")
        elif isinstance(want, mpmath.mpc):
            assert got._mpc_ == want._mpc_, where
        else:
            assert got._mpf_ == want._mpf_, where
    elif module == "gmpy2":
        gmpy2 = pytest.importorskip("gmpy2")
        if type(want) is gmpy2.mpfr:
            assert got.precision == want.precision, where
            assert gmpy2.is_signed(got) == gmpy2.is_signed(want), where
            assert got == want or (gmpy2.is_nan(got) and gmpy2.is_nan(want)), where
        elif type(want) is gmpy2.mpc:
            assert got.precision == want.precision, where
            assert_same(got.real, want.real, where + ".real")
            assert_same(got.imag, want.imag, where + ".imag")
        else:
            assert got == want, where
    elif module == "pyadic":
        slots = {"PAdic": ("num", "p", "k", "n"), "ModP": ("n", "p"), "GaussianRational": ("real", "imag")}
        for name in slots[type(want).__name__]:
            assert getattr(got, name) == getattr(want, name), f"{where}.{name}"
    elif isinstance(want, Fraction | int | str | bytes | range) or want is None:
        assert got == want, where
    else:
        assert got == want, f"{where}: no sameness rule for {type(want)}"


def _same(a: Any, b: Any) -> bool:
    try:
        assert_same(a, b)
    except AssertionError:
        return False
    return True


def _gmpy2_types() -> tuple[type, ...]:
    try:
        import gmpy2
    except ImportError:
        return ()
    return (gmpy2.mpz, gmpy2.mpq, gmpy2.mpfr, gmpy2.mpc)


def _is_galois(value: Any) -> bool:
    galois = sys.modules.get("galois")
    return galois is not None and isinstance(value, galois.FieldArray)
