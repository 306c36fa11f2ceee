"""The value codec: answer()'s value crosses from the answer sandbox to verify() as data.

The answer process is hostile, so what it emits is untrusted bytes. This module turns a value
into a JSON-safe tree of tagged nodes (``encode_value``), checks such a tree against a strict
schema using the standard library only (``check_encoded``, run on the host before anything
uses a reply), and rebuilds the value from the tree (``decode_value``) without executing
anything that came from it: no eval/exec/pickle/sympify, no string handed to a constructor
that parses, and every class is looked up in fixed allowlists written below.

It is shipped as source text into the sandbox ahead of the driver, and imported on the host,
so: standard library only at import time, the maths libraries imported inside functions,
no module-level side effects, private names prefixed ``_codec_``. docs/value-codec.md has the
encoding table and the threat model.
"""

from __future__ import annotations

# Aliased: this text runs ahead of the driver script in one namespace, where a plain `re`
# or `json` could be rebound (`from sympy import *` alone rebinds `re`).
import decimal as _codec_decimal
import fractions as _codec_fractions
import json as _codec_json
import math as _codec_math
import re as _codec_re
import struct as _codec_struct
import sys as _codec_sys
from typing import Any

MAX_ENCODED_BYTES = 8 * 1024 * 1024
# Nesting of values (a list in a list, a sympy node in a node): the decoder recurses once
# per level, so this stays far below the interpreter's recursion limit.
VALUE_MAX_DEPTH = 100
# JSON elements (objects, arrays, strings, numbers) in one document.
VALUE_MAX_NODES = 2_000_000
# Cells a sympy Poly's dense representation may take: a monomial x**(10**12) would
# otherwise allocate a list of 10**12 coefficients while decoding.
VALUE_MAX_POLY_CELLS = 2_000_000
# Precision (bits) accepted for mpfr/mpf/Float: bounds the memory one number allocates.
VALUE_MAX_PRECISION = 1 << 25
# Moduli (GF(p), galois fields, pyadic) are capped so building a field stays cheap.
VALUE_MAX_MODULUS_BITS = 4096
# p**k bound for a pyadic number's digits (bits).
VALUE_MAX_PADIC_BITS = 1 << 23


class ValueCodecError(Exception):
    """The value cannot be carried, or a document is not a valid encoding; one-line message."""


# ---------------------------------------------------------------------------------------
# Fixed allowlists (names only; classes are resolved lazily and only through these tables)
# ---------------------------------------------------------------------------------------

# sympy singletons: name of the attribute of sympy.S -> carried as that name.
_CODEC_SYMPY_SINGLETONS = (
    "Zero",
    "One",
    "NegativeOne",
    "Half",
    "NaN",
    "Infinity",
    "NegativeInfinity",
    "ComplexInfinity",
    "ImaginaryUnit",
    "Pi",
    "Exp1",
    "EulerGamma",
    "Catalan",
    "GoldenRatio",
    "TribonacciConstant",
    "true",
    "false",
    "EmptySet",
    "UniversalSet",
    "Naturals",
    "Naturals0",
    "Integers",
    "Rationals",
    "Reals",
    "Complexes",
    "IdentityFunction",
)

# sympy classes rebuilt from their decoded args. "e": the constructor takes evaluate=False
# (so nothing is computed and the tree comes back as built); "p": the constructor has no
# evaluate flag and does not evaluate (Integral, Sum, sets...); "r": assembled raw with
# Basic.__new__ after the args are type-checked. Every name is an attribute of the top-level
# sympy package except those in _CODEC_SYMPY_HOMES.
_CODEC_SYMPY_NODES: dict[str, str] = {
    **dict.fromkeys(
        [
            "Add",
            "Mul",
            "Pow",
            "Tuple",
            "Derivative",
            "Piecewise",
            "Mod",
            "Abs",
            "sign",
            "re",
            "im",
            "arg",
            "conjugate",
            "floor",
            "ceiling",
            "frac",
            "Max",
            "Min",
            "Heaviside",
            "DiracDelta",
            "KroneckerDelta",
            "exp",
            "log",
            "LambertW",
            "sin",
            "cos",
            "tan",
            "cot",
            "sec",
            "csc",
            "asin",
            "acos",
            "atan",
            "acot",
            "asec",
            "acsc",
            "atan2",
            "sinh",
            "cosh",
            "tanh",
            "coth",
            "sech",
            "csch",
            "asinh",
            "acosh",
            "atanh",
            "acoth",
            "asech",
            "acsch",
            "sinc",
            "factorial",
            "factorial2",
            "subfactorial",
            "binomial",
            "RisingFactorial",
            "FallingFactorial",
            "gamma",
            "lowergamma",
            "uppergamma",
            "loggamma",
            "digamma",
            "trigamma",
            "polygamma",
            "beta",
            "zeta",
            "dirichlet_eta",
            "polylog",
            "lerchphi",
            "erf",
            "erfc",
            "erfi",
            "erf2",
            "erfinv",
            "erfcinv",
            "Ei",
            "li",
            "Li",
            "Si",
            "Ci",
            "Shi",
            "Chi",
            "expint",
            "fresnels",
            "fresnelc",
            "besselj",
            "bessely",
            "besseli",
            "besselk",
            "hankel1",
            "hankel2",
            "jn",
            "yn",
            "airyai",
            "airybi",
            "airyaiprime",
            "airybiprime",
            "elliptic_k",
            "elliptic_e",
            "elliptic_f",
            "elliptic_pi",
            "hyper",
            "fibonacci",
            "lucas",
            "tribonacci",
            "bernoulli",
            "euler",
            "catalan",
            "harmonic",
            "bell",
            "genocchi",
            "partition",
            "motzkin",
            "totient",
            "reduced_totient",
            "mobius",
            "primenu",
            "primeomega",
            "primepi",
            "legendre",
            "assoc_legendre",
            "chebyshevt",
            "chebyshevu",
            "hermite",
            "laguerre",
            "assoc_laguerre",
            "jacobi",
            "gegenbauer",
            "Ynm",
            "Equality",
            "Unequality",
            "StrictLessThan",
            "LessThan",
            "StrictGreaterThan",
            "GreaterThan",
            "And",
            "Or",
            "Not",
            "Xor",
            "Nand",
            "Nor",
            "Implies",
            "Equivalent",
            "ITE",
            "FiniteSet",
            "Complement",
            "SymmetricDifference",
            "Contains",
        ],
        "e",
    ),
    **dict.fromkeys(
        [
            "Lambda",
            "ExprCondPair",
            "Sum",
            "Product",
            "Integral",
            "Limit",
            "Range",
            "UnevaluatedExpr",
            # The only exact form sympy has for most roots of quintics and beyond.
            "ComplexRootOf",
        ],
        "p",
    ),
    # These constructors compare or evaluate their arguments even with evaluate=False
    # (Interval's end < start, Union's ordering by infimum, ProductSet's is_empty,
    # ConditionSet testing the condition on elements), which computes 3**(10**100): they
    # are assembled from their type-checked args without calling the constructor.
    **dict.fromkeys(["Interval", "Union", "Intersection", "ProductSet", "ImageSet", "ConditionSet"], "r"),
}

# The few node classes sympy does not export at top level, with the module that has them.
_CODEC_SYMPY_HOMES = {
    "ExprCondPair": "sympy.functions.elementary.piecewise",
    "ComplexRootOf": "sympy.polys.rootoftools",
}


def _codec_sympy_class(sympy: Any, name: str) -> Any:
    """The sympy class for an allowlisted node name (callers check the allowlist first)."""
    if name not in _CODEC_SYMPY_NODES:
        return None
    home = _CODEC_SYMPY_HOMES.get(name)
    namespace = _codec_sys.modules.get(home) if home is not None else sympy
    return getattr(namespace, name, None)


_CODEC_MATRIX_CLASSES = (
    "MutableDenseMatrix",
    "ImmutableDenseMatrix",
    "MutableSparseMatrix",
    "ImmutableSparseMatrix",
)
_CODEC_POLY_CLASSES = ("Poly", "PurePoly")

# Exact IEEE/numpy dtypes carried as raw bytes: bool, signed/unsigned ints, floats, complex.
_CODEC_DTYPE_RE = _codec_re.compile(
    r"\A(?:\|b1|[<>|]i[1248]|[<>|]u[1248]|[<>]f(?:2|4|8|10|12|16)|[<>]c(?:8|16|20|24|32))\Z"
)
# Canonical hex integers only (what hex() writes): no leading zeros, no "-0x0".
_CODEC_HEX_RE = _codec_re.compile(r"\A(?:0x0|-?0x[1-9a-f][0-9a-f]*)\Z")
_CODEC_GDTYPE_RE = _codec_re.compile(r"\A[<>|][iu][1248]\Z")
_CODEC_HEXBYTES_RE = _codec_re.compile(r"\A(?:[0-9a-f]{2})*\Z")
_CODEC_DIGITS_RE = _codec_re.compile(r"\A[0-9]*\Z")

# The special mpf tuples (mpmath's libmpf: zero, +inf, -inf, nan); other tuples are normalised.
_CODEC_MPF_SPECIALS = ((0, 0, 0, 0), (0, 0, -456, -2), (1, 0, -456, -2), (0, 0, -123, -1))


# ---------------------------------------------------------------------------------------
# The schema: tag -> field -> kind. check_encoded enforces it with the standard library.
# ---------------------------------------------------------------------------------------

_CODEC_SCHEMA: dict[str, dict[str, str]] = {
    "none": {},
    "bool": {"v": "bool"},
    "int": {"v": "hex"},
    "float": {"v": "f64"},
    "complex": {"re": "f64", "im": "f64"},
    "str": {"v": "str"},
    "str32": {"v": "hexbytes"},
    "bytes": {"v": "hexbytes"},
    "list": {"items": "nodes"},
    "tuple": {"items": "nodes"},
    "set": {"items": "nodes"},
    "frozenset": {"items": "nodes"},
    "dict": {"items": "pairs"},
    "range": {"start": "hex", "stop": "hex", "step": "hex"},
    "fraction": {"num": "hex", "den": "hex"},
    "decimal": {"sign": "sign", "digits": "digits", "exp": "decexp"},
    "np.scalar": {"dtype": "dtype", "data": "hexbytes"},
    "np.array": {"dtype": "dtype", "shape": "shape", "data": "hexbytes"},
    "np.objarray": {"shape": "shape", "items": "nodes"},
    "sym.int": {"v": "hex"},
    "sym.rat": {"p": "hex", "q": "hex"},
    "sym.float": {"mpf": "mpf", "prec": "prec"},
    "sym.const": {"name": "singleton"},
    "sym.symbol": {"name": "str", "assume": "assume"},
    "sym.dummy": {"name": "str", "index": "hex", "assume": "assume"},
    "sym.node": {"cls": "symclass", "args": "nodes"},
    "sym.ufunc": {"name": "str", "args": "nodes"},
    "sym.matrix": {"cls": "matclass", "rows": "count", "cols": "count", "items": "nodes"},
    "sym.smatrix": {"cls": "matclass", "rows": "count", "cols": "count", "entries": "cells"},
    "sym.poly": {"cls": "polyclass", "gens": "nodes", "domain": "domain", "terms": "terms"},
    "sym.modint": {"mod": "hex", "val": "hex", "sym": "bool"},
    "mpmath.mpf": {"mpf": "mpf", "prec": "prec"},
    "mpmath.mpc": {"re": "mpf", "im": "mpf", "prec": "prec"},
    "mpmath.matrix": {"rows": "count", "cols": "count", "entries": "cells", "prec": "prec"},
    "gmpy2.mpz": {"v": "hex"},
    "gmpy2.mpq": {"num": "hex", "den": "hex"},
    "gmpy2.mpfr": {"prec": "prec", "kind": "mpfrkind", "man": "hex", "exp": "hex"},
    "gmpy2.mpc": {"re": "node", "im": "node"},
    "galois.array": {"field": "gfield", "shape": "shape", "dtype": "gdtype", "vals": "hexlist"},
    "pyadic.padic": {"num": "hex", "p": "hex", "k": "hex", "n": "hex"},
    "pyadic.modp": {"n": "hex", "p": "hex"},
    "pyadic.gaussian": {"real": "node", "imag": "node"},
}
_CODEC_MPFR_KINDS = ("num", "nan", "+inf", "-inf", "+0", "-0")
_CODEC_DOMAIN_SCHEMA: dict[str, dict[str, str]] = {
    "ZZ": {},
    "QQ": {},
    "ZZ_I": {},
    "QQ_I": {},
    "GF": {"mod": "hex", "sym": "bool"},
    "RR": {"prec": "prec"},
    "CC": {"prec": "prec"},
    "poly_ring": {"base": "domain", "gens": "nodes"},
    "frac_field": {"base": "domain", "gens": "nodes"},
}


def _codec_assumption_names() -> frozenset[str]:
    # The assumption names sympy 1.13/1.14 define (sympy.core.assumptions._assume_defined).
    return frozenset(
        [
            "algebraic",
            "antihermitian",
            "commutative",
            "complex",
            "composite",
            "even",
            "extended_negative",
            "extended_nonnegative",
            "extended_nonpositive",
            "extended_nonzero",
            "extended_positive",
            "extended_real",
            "finite",
            "hermitian",
            "imaginary",
            "infinite",
            "integer",
            "irrational",
            "negative",
            "noninteger",
            "nonnegative",
            "nonpositive",
            "nonzero",
            "odd",
            "polar",
            "positive",
            "prime",
            "rational",
            "real",
            "transcendental",
            "zero",
        ]
    )


_CODEC_ASSUMPTIONS = _codec_assumption_names()


class _CodecChecker:
    """Walks a parsed JSON document once, counting nodes and bytes, checking every field."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.nodes = 0
        self.size = 0

    def fail(self, where: str, problem: str) -> ValueCodecError:
        return ValueCodecError(f"invalid encoded value at {where}: {problem}")

    def count(self, amount: int, size: int) -> None:
        self.nodes += amount
        self.size += size
        if self.nodes > VALUE_MAX_NODES:
            raise ValueCodecError(f"the encoded value has too many nodes (more than {VALUE_MAX_NODES})")
        if self.size > self.max_bytes:
            raise ValueCodecError(
                f"the value is too large to carry ({self.size} bytes > cap {self.max_bytes})"
            )

    def node(self, data: object, where: str, depth: int) -> None:
        if depth > VALUE_MAX_DEPTH:
            raise ValueCodecError(
                f"the encoded value is nested too deeply (more than {VALUE_MAX_DEPTH} levels)"
            )
        if type(data) is not dict:
            raise self.fail(where, f"expected an object, got {_codec_json_type(data)}")
        self.count(1, 2)
        tag = data.get("t")
        if type(tag) is not str or tag not in _CODEC_SCHEMA:
            shown = tag[:40] if type(tag) is str else _codec_json_type(tag)
            raise self.fail(where, f"unknown tag {shown!r}")
        self.fields(data, _CODEC_SCHEMA[tag], where + f"<{tag}>", depth, tag_key=True)

    def fields(self, data: dict, schema: dict[str, str], where: str, depth: int, tag_key: bool) -> None:
        expected = set(schema) | ({"t"} if tag_key else set())
        if set(data) != expected:
            extra = sorted(str(k)[:40] for k in set(data) - expected)
            missing = sorted(set(expected) - set(data))
            raise self.fail(where, f"fields {extra} unexpected, {missing} missing")
        for name, kind in schema.items():
            self.field(data[name], kind, f"{where}.{name}", depth)

    def field(self, value: object, kind: str, where: str, depth: int) -> None:
        self.count(1, 8)
        check = getattr(self, "kind_" + kind)  # kind comes from _CODEC_SCHEMA, never from data
        check(value, where, depth)

    # -- kinds --
    def kind_bool(self, value: object, where: str, depth: int) -> None:
        if type(value) is not bool:
            raise self.fail(where, f"expected true/false, got {_codec_json_type(value)}")

    def _string(self, value: object, where: str) -> str:
        if type(value) is not str:
            raise self.fail(where, f"expected a string, got {_codec_json_type(value)}")
        self.count(0, len(value))
        return value

    def kind_str(self, value: object, where: str, depth: int) -> None:
        self._string(value, where)

    def kind_hex(self, value: object, where: str, depth: int) -> None:
        if not _CODEC_HEX_RE.match(self._string(value, where)):
            raise self.fail(where, "expected a hexadecimal integer like '-0x1f'")

    def kind_hexbytes(self, value: object, where: str, depth: int) -> None:
        if not _CODEC_HEXBYTES_RE.match(self._string(value, where)):
            raise self.fail(where, "expected hexadecimal bytes")

    def kind_f64(self, value: object, where: str, depth: int) -> None:
        text = self._string(value, where)
        if len(text) != 16 or not _CODEC_HEXBYTES_RE.match(text):
            raise self.fail(where, "expected the 16 hex digits of an IEEE double")

    def kind_digits(self, value: object, where: str, depth: int) -> None:
        if not _CODEC_DIGITS_RE.match(self._string(value, where)):
            raise self.fail(where, "expected decimal digits")

    def kind_decexp(self, value: object, where: str, depth: int) -> None:
        text = self._string(value, where)
        if text not in ("n", "N", "F") and not _CODEC_HEX_RE.match(text):
            raise self.fail(where, "expected a hex exponent or one of n, N, F")

    def kind_sign(self, value: object, where: str, depth: int) -> None:
        if type(value) is not int or value not in (0, 1):
            raise self.fail(where, "expected 0 or 1")

    def kind_count(self, value: object, where: str, depth: int) -> None:
        if type(value) is not int or not 0 <= value <= VALUE_MAX_NODES * 64:
            raise self.fail(where, "expected a small non-negative integer")

    def kind_prec(self, value: object, where: str, depth: int) -> None:
        if type(value) is not int or not 1 <= value <= VALUE_MAX_PRECISION:
            raise self.fail(where, f"expected a precision between 1 and {VALUE_MAX_PRECISION} bits")

    def kind_dtype(self, value: object, where: str, depth: int) -> None:
        if not _CODEC_DTYPE_RE.match(self._string(value, where)):
            raise self.fail(where, "expected a bool, integer, float or complex dtype like '<i8'")

    def kind_gdtype(self, value: object, where: str, depth: int) -> None:
        text = self._string(value, where)
        if text != "|O" and not _CODEC_GDTYPE_RE.match(text):
            raise self.fail(where, "expected an integer dtype or '|O'")

    def kind_shape(self, value: object, where: str, depth: int) -> None:
        if type(value) is not list or len(value) > 32:
            raise self.fail(where, "expected a list of at most 32 dimensions")
        for index, dim in enumerate(value):
            self.kind_count(dim, f"{where}[{index}]", depth)
        self.count(len(value), 8 * len(value))

    def _allowed_name(self, value: object, where: str, allowed: Any, what: str) -> None:
        if self._string(value, where) not in allowed:
            raise self.fail(where, f"{str(value)[:40]!r} is not an allowed {what}")

    def kind_singleton(self, value: object, where: str, depth: int) -> None:
        self._allowed_name(value, where, _CODEC_SYMPY_SINGLETONS, "sympy constant")

    def kind_symclass(self, value: object, where: str, depth: int) -> None:
        self._allowed_name(value, where, _CODEC_SYMPY_NODES, "sympy class")

    def kind_matclass(self, value: object, where: str, depth: int) -> None:
        self._allowed_name(value, where, _CODEC_MATRIX_CLASSES, "sympy matrix class")

    def kind_polyclass(self, value: object, where: str, depth: int) -> None:
        self._allowed_name(value, where, _CODEC_POLY_CLASSES, "sympy polynomial class")

    def kind_mpfrkind(self, value: object, where: str, depth: int) -> None:
        if self._string(value, where) not in _CODEC_MPFR_KINDS:
            raise self.fail(where, f"expected one of {', '.join(_CODEC_MPFR_KINDS)}")

    def kind_assume(self, value: object, where: str, depth: int) -> None:
        if type(value) is not dict:
            raise self.fail(where, "expected an object of assumptions")
        for key, flag in value.items():
            if key not in _CODEC_ASSUMPTIONS:
                raise self.fail(where, f"{str(key)[:40]!r} is not a sympy assumption")
            if type(flag) is not bool:
                raise self.fail(f"{where}.{key}", "expected true/false")
        self.count(len(value), 16 * len(value))

    def kind_mpf(self, value: object, where: str, depth: int) -> None:
        if type(value) is not list or len(value) != 4:
            raise self.fail(where, "expected [sign, mantissa, exponent, bitcount]")
        self.kind_sign(value[0], where + "[0]", depth)
        self.kind_hex(value[1], where + "[1]", depth)
        self.kind_hex(value[2], where + "[2]", depth)
        if type(value[3]) is not int or not -2 <= value[3] <= VALUE_MAX_PRECISION:
            raise self.fail(where + "[3]", "expected a bit count")
        self.count(4, 32)

    def kind_node(self, value: object, where: str, depth: int) -> None:
        self.node(value, where, depth + 1)

    def kind_nodes(self, value: object, where: str, depth: int) -> None:
        if type(value) is not list:
            raise self.fail(where, f"expected a list, got {_codec_json_type(value)}")
        self.count(len(value), len(value))
        for index, item in enumerate(value):
            self.node(item, f"{where}[{index}]", depth + 1)

    def kind_hexlist(self, value: object, where: str, depth: int) -> None:
        if type(value) is not list:
            raise self.fail(where, f"expected a list, got {_codec_json_type(value)}")
        self.count(len(value), len(value))
        for index, item in enumerate(value):
            self.kind_hex(item, f"{where}[{index}]", depth)

    def kind_pairs(self, value: object, where: str, depth: int) -> None:
        if type(value) is not list:
            raise self.fail(where, f"expected a list, got {_codec_json_type(value)}")
        self.count(len(value), len(value))
        for index, pair in enumerate(value):
            if type(pair) is not list or len(pair) != 2:
                raise self.fail(f"{where}[{index}]", "expected a [key, value] pair")
            self.node(pair[0], f"{where}[{index}][0]", depth + 1)
            self.node(pair[1], f"{where}[{index}][1]", depth + 1)

    def kind_cells(self, value: object, where: str, depth: int) -> None:
        if type(value) is not list:
            raise self.fail(where, f"expected a list, got {_codec_json_type(value)}")
        self.count(len(value), len(value))
        for index, cell in enumerate(value):
            if type(cell) is not list or len(cell) != 3:
                raise self.fail(f"{where}[{index}]", "expected a [row, column, value] cell")
            self.kind_count(cell[0], f"{where}[{index}][0]", depth)
            self.kind_count(cell[1], f"{where}[{index}][1]", depth)
            self.node(cell[2], f"{where}[{index}][2]", depth + 1)

    def kind_terms(self, value: object, where: str, depth: int) -> None:
        if type(value) is not list:
            raise self.fail(where, f"expected a list, got {_codec_json_type(value)}")
        self.count(len(value), len(value))
        cells = 0
        for index, term in enumerate(value):
            if type(term) is not list or len(term) != 2 or type(term[0]) is not list:
                raise self.fail(f"{where}[{index}]", "expected a [[exponents], coefficient] term")
            for position, exponent in enumerate(term[0]):
                self.kind_count(exponent, f"{where}[{index}][0][{position}]", depth)
            self.count(len(term[0]), 8 * len(term[0]))
            cells += sum(term[0]) + len(term[0]) + 1
            if cells > VALUE_MAX_POLY_CELLS:
                raise ValueCodecError(
                    "the polynomial's degrees are too large to carry "
                    f"(more than {VALUE_MAX_POLY_CELLS} cells)"
                )
            self.node(term[1], f"{where}[{index}][1]", depth + 1)

    def kind_domain(self, value: object, where: str, depth: int) -> None:
        if depth > VALUE_MAX_DEPTH:
            raise ValueCodecError(
                f"the encoded value is nested too deeply (more than {VALUE_MAX_DEPTH} levels)"
            )
        if (
            type(value) is not dict
            or type(value.get("k")) is not str
            or value["k"] not in _CODEC_DOMAIN_SCHEMA
        ):
            raise self.fail(where, f"expected a domain, one of {', '.join(_CODEC_DOMAIN_SCHEMA)}")
        kind = value["k"]
        expected = {"k", *_CODEC_DOMAIN_SCHEMA[kind]}
        if set(value) != expected:
            raise self.fail(where, f"a {kind} domain has exactly the fields {sorted(expected)}")
        for name, field_kind in _CODEC_DOMAIN_SCHEMA[kind].items():
            self.field(value[name], field_kind, f"{where}.{name}", depth + 1)

    def kind_gfield(self, value: object, where: str, depth: int) -> None:
        if type(value) is not dict or set(value) != {"p", "m", "irr", "prim"}:
            raise self.fail(where, "a galois field has exactly the fields p, m, irr, prim")
        self.kind_hex(value["p"], where + ".p", depth)
        if type(value["m"]) is not int or not 1 <= value["m"] <= 4096:
            raise self.fail(where + ".m", "expected a degree between 1 and 4096")
        self.kind_hexlist(value["irr"], where + ".irr", depth)
        self.kind_hex(value["prim"], where + ".prim", depth)


def _codec_json_type(value: object) -> str:
    return {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def check_encoded(data: object, *, max_bytes: int = MAX_ENCODED_BYTES) -> None:
    """Raise ValueCodecError unless ``data`` (parsed JSON) is a well-formed, bounded encoding."""
    checker = _CodecChecker(max_bytes)
    try:
        checker.node(data, "value", 0)
    except ValueCodecError:
        raise
    except RecursionError:
        raise ValueCodecError(
            f"the encoded value is nested too deeply (more than {VALUE_MAX_DEPTH} levels)"
        ) from None
    except Exception as exc:  # a schema walk must never fail any other way; say so plainly
        raise ValueCodecError(f"invalid encoded value: {type(exc).__name__}") from None


# ---------------------------------------------------------------------------------------
# Encoding (runs in the answer sandbox; the value's own methods are never called)
# ---------------------------------------------------------------------------------------


def _codec_hex(number: int) -> str:
    return hex(number)


def _codec_f64(number: float) -> str:
    return _codec_struct.pack(">d", number).hex()


def type_label(value: Any) -> str:
    """A short, stable name for the value's type, e.g. ``sympy.Rational``, ``numpy.ndarray[int64]``."""
    cls = type(value)
    module = getattr(cls, "__module__", None)
    name = getattr(cls, "__qualname__", None) or getattr(cls, "__name__", "?")
    if type(module) is not str or type(name) is not str:
        return "?"
    if module == "builtins":
        return name
    numpy = _codec_sys.modules.get("numpy")
    if numpy is not None and cls is numpy.ndarray:
        return f"numpy.ndarray[{value.dtype}]"
    top = module.split(".", 1)[0]
    if top == "sympy" and "ModularInteger" in name:
        return "sympy.ModularInteger"
    if top == "galois":
        return "galois.FieldArray"
    return f"{top}.{name.rsplit('.', 1)[-1]}"


class _CodecEncoder:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.nodes = 0
        self.singletons: dict[int, str] | None = None

    def charge(self, size: int) -> None:
        self.size += size + 16
        self.nodes += 1
        if self.size > self.max_bytes:
            raise ValueCodecError(
                f"the value is too large to carry ({self.size} bytes > cap {self.max_bytes})"
            )
        if self.nodes > VALUE_MAX_NODES // 4:
            raise ValueCodecError(f"the value has too many parts to carry (more than {VALUE_MAX_NODES // 4})")

    def int_hex(self, number: int) -> str:
        # bit_length first: a 10**(10**8) answer fails before any text is built.
        self.charge(number.bit_length() // 4 + 4)
        return hex(number)

    def refuse(self, value: Any, why: str = "") -> ValueCodecError:
        return ValueCodecError(f"answer() returned a {type_label(value)}, which cannot be carried{why}")

    def encode(self, value: Any, depth: int) -> dict[str, Any]:
        if depth > VALUE_MAX_DEPTH:
            raise ValueCodecError(f"the value is nested too deeply (more than {VALUE_MAX_DEPTH} levels)")
        self.charge(0)
        cls = type(value)
        if value is None:
            return {"t": "none"}
        if cls is bool:
            return {"t": "bool", "v": value}
        if cls is int:
            return {"t": "int", "v": self.int_hex(value)}
        if cls is float:
            return {"t": "float", "v": _codec_f64(value)}
        if cls is complex:
            return {"t": "complex", "re": _codec_f64(value.real), "im": _codec_f64(value.imag)}
        if cls is str:
            return self.encode_str(value)
        if cls is bytes:
            self.charge(2 * len(value))
            return {"t": "bytes", "v": value.hex()}
        if cls in (list, tuple, set, frozenset):
            items = list.__iter__(value) if cls is list else iter(value)
            return {"t": cls.__name__, "items": [self.encode(item, depth + 1) for item in items]}
        if cls is dict:
            return {
                "t": "dict",
                "items": [
                    [self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in dict.items(value)
                ],
            }
        if cls is range:
            return {
                "t": "range",
                "start": self.int_hex(value.start),
                "stop": self.int_hex(value.stop),
                "step": self.int_hex(value.step),
            }
        if cls is _codec_fractions.Fraction:
            return {
                "t": "fraction",
                "num": self.int_hex(value.numerator),
                "den": self.int_hex(value.denominator),
            }
        if cls is _codec_decimal.Decimal:
            return self.encode_decimal(value)
        for encoder in (
            self.encode_sympy,
            self.encode_numpy,
            self.encode_mpmath,
            self.encode_gmpy2,
            self.encode_galois,
            self.encode_pyadic,
        ):
            encoded = encoder(value, depth)
            if encoded is not None:
                return encoded
        for base in (
            bool,
            int,
            float,
            complex,
            str,
            bytes,
            list,
            tuple,
            set,
            frozenset,
            dict,
            _codec_fractions.Fraction,
            _codec_decimal.Decimal,
        ):
            if isinstance(value, base):
                raise ValueCodecError(
                    f"answer() returned a {type_label(value)}, a subclass of {base.__name__}; "
                    f"return a plain {base.__name__}"
                )
        raise self.refuse(value)

    def encode_str(self, text: str) -> dict[str, Any]:
        self.charge(len(text))
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # Lone surrogates: carried as UTF-32 code units so no JSON writer can reject them.
            self.charge(8 * len(text))
            return {"t": "str32", "v": text.encode("utf-32-be", "surrogatepass").hex()}
        return {"t": "str", "v": text}

    def encode_decimal(self, value: _codec_decimal.Decimal) -> dict[str, Any]:
        sign, digits, exponent = value.as_tuple()
        self.charge(len(digits))
        exp = exponent if isinstance(exponent, str) else self.int_hex(exponent)
        return {"t": "decimal", "sign": sign, "digits": "".join(map(str, digits)), "exp": exp}

    # -- sympy --
    def encode_sympy(self, value: Any, depth: int) -> dict[str, Any] | None:
        sympy = _codec_sys.modules.get("sympy")
        if sympy is None:
            return None
        cls = type(value)
        if cls.__name__ in _CODEC_MATRIX_CLASSES and getattr(sympy, cls.__name__, None) is cls:
            return self.encode_matrix(value, depth, cls.__name__)
        if isinstance(value, sympy.Basic):
            return self.encode_basic(value, depth, sympy)
        modular = _codec_sys.modules.get("sympy.polys.domains.modularinteger")
        if modular is not None and isinstance(value, modular.ModularInteger):
            field = sympy.GF(value.mod, symmetric=value.sym)
            if type(field(0)) is not cls:
                raise self.refuse(value, "; return an element of sympy's GF(p)")
            return {
                "t": "sym.modint",
                "mod": self.int_hex(int(value.mod)),
                "val": self.int_hex(int(value.val)),
                "sym": bool(value.sym),
            }
        if isinstance(value, sympy.MatrixBase):
            raise self.refuse(value, "; return a Matrix, ImmutableMatrix or SparseMatrix")
        return None

    def encode_basic(self, value: Any, depth: int, sympy: Any) -> dict[str, Any]:
        cls = type(value)
        if cls is sympy.Integer:
            return {"t": "sym.int", "v": self.int_hex(int(value.p))}
        if cls is sympy.Rational:
            return {"t": "sym.rat", "p": self.int_hex(int(value.p)), "q": self.int_hex(int(value.q))}
        if cls is sympy.Float:
            return {"t": "sym.float", "mpf": self.mpf(value._mpf_), "prec": int(value._prec)}
        if self.singletons is None:
            self.singletons = {id(getattr(sympy.S, name)): name for name in _CODEC_SYMPY_SINGLETONS}
        singleton = self.singletons.get(id(value))
        if singleton is not None and getattr(sympy.S, singleton) is value:
            return {"t": "sym.const", "name": singleton}
        if cls is sympy.Symbol:
            return {"t": "sym.symbol", "name": self.name(value.name), "assume": self.assumptions(value)}
        if cls is sympy.Dummy:
            return {
                "t": "sym.dummy",
                "name": self.name(value.name),
                "index": self.int_hex(int(value.dummy_index)),
                "assume": self.assumptions(value),
            }
        if cls is sympy.Poly or cls is sympy.PurePoly:
            return self.encode_poly(value, depth, sympy)
        undefined = sympy.core.function.UndefinedFunction
        if type(cls) is undefined and issubclass(cls, sympy.core.function.AppliedUndef):
            name = cls.__name__
            if type(name) is not str or sympy.Function(name) != cls:
                raise self.refuse(value, "; only plain undefined functions Function('f') are carried")
            return {"t": "sym.ufunc", "name": self.name(name), "args": self.args(value, depth)}
        name = cls.__name__
        if name in _CODEC_SYMPY_NODES and _codec_sympy_class(sympy, name) is cls:
            return {"t": "sym.node", "cls": name, "args": self.args(value, depth)}
        for base in (sympy.Integer, sympy.Rational, sympy.Float, sympy.Symbol):
            if isinstance(value, base):
                raise ValueCodecError(
                    f"answer() returned a {type_label(value)}, a subclass of sympy.{base.__name__}; "
                    f"return a plain sympy.{base.__name__}"
                )
        raise ValueCodecError(
            f"answer() returned a sympy object of class {name!s:.60}, which cannot be carried"
        )

    def name(self, text: object) -> str:
        if type(text) is not str:
            raise ValueCodecError("a sympy symbol or function name is not a plain str")
        encoded = self.encode_str(text)
        if encoded["t"] != "str":
            raise ValueCodecError("a sympy symbol or function name contains lone surrogates")
        return text

    def assumptions(self, symbol: Any) -> dict[str, bool]:
        original = getattr(symbol, "_assumptions_orig", None)
        if original is None:
            original = symbol._assumptions0
        carried: dict[str, bool] = {}
        for key, flag in dict(original).items():
            if key not in _CODEC_ASSUMPTIONS or type(flag) is not bool:
                raise ValueCodecError(f"a sympy symbol has an assumption that cannot be carried: {key!s:.40}")
            carried[key] = flag
        return carried

    def args(self, value: Any, depth: int) -> list[dict[str, Any]]:
        return [self.encode(arg, depth + 1) for arg in tuple.__iter__(value.args)]

    def mpf(self, mpf: tuple) -> list[Any]:
        sign, man, exp, bc = mpf
        return [int(sign), self.int_hex(int(man)), self.int_hex(int(exp)), int(bc)]

    def encode_matrix(self, value: Any, depth: int, name: str) -> dict[str, Any]:
        rows, cols = (int(n) for n in value.shape)
        if "Sparse" in name:
            cells = [
                [int(i), int(j), self.encode(v, depth + 1)] for (i, j), v in sorted(value.todok().items())
            ]
            return {"t": "sym.smatrix", "cls": name, "rows": rows, "cols": cols, "entries": cells}
        items = [self.encode(v, depth + 1) for v in value.flat()]
        return {"t": "sym.matrix", "cls": name, "rows": rows, "cols": cols, "items": items}

    def encode_poly(self, value: Any, depth: int, sympy: Any) -> dict[str, Any]:
        domain = value.domain
        terms = [
            [[int(e) for e in monom], self.encode(domain.to_sympy(coeff), depth + 1)]
            for monom, coeff in value.rep.terms()
            if coeff != domain.zero
        ]
        return {
            "t": "sym.poly",
            "cls": type(value).__name__,
            "gens": [self.encode(g, depth + 1) for g in value.gens],
            "domain": self.domain(domain, depth),
            "terms": terms,
        }

    def domain(self, domain: Any, depth: int) -> dict[str, Any]:
        if depth > VALUE_MAX_DEPTH:
            raise ValueCodecError("a polynomial's domain is nested too deeply")
        if domain.is_ZZ:
            return {"k": "ZZ"}
        if domain.is_QQ:
            return {"k": "QQ"}
        if getattr(domain, "is_GaussianRing", False):
            return {"k": "ZZ_I"}
        if getattr(domain, "is_GaussianField", False):
            return {"k": "QQ_I"}
        if domain.is_FiniteField:
            return {"k": "GF", "mod": self.int_hex(int(domain.mod)), "sym": bool(domain.sym)}
        if domain.is_RealField:
            return {"k": "RR", "prec": int(domain.precision)}
        if domain.is_ComplexField:
            return {"k": "CC", "prec": int(domain.precision)}
        if domain.is_PolynomialRing or domain.is_FractionField:
            kind = "poly_ring" if domain.is_PolynomialRing else "frac_field"
            return {
                "k": kind,
                "base": self.domain(domain.domain, depth + 1),
                "gens": [self.encode(g, depth + 1) for g in domain.symbols],
            }
        raise ValueCodecError(f"a sympy Poly over the domain {domain!s:.60} cannot be carried")

    # -- numpy --
    def encode_numpy(self, value: Any, depth: int) -> dict[str, Any] | None:
        numpy = _codec_sys.modules.get("numpy")
        if numpy is None:
            return None
        cls = type(value)
        if cls is numpy.ndarray:
            array: Any = value
            dtype = array.dtype
            shape = [int(n) for n in array.shape]
            if dtype == numpy.dtype(object):
                items = [self.encode(item, depth + 1) for item in array.reshape(-1).tolist()]
                return {"t": "np.objarray", "shape": shape, "items": items}
            if not _CODEC_DTYPE_RE.match(dtype.str):
                raise ValueCodecError(
                    f"answer() returned a numpy array of dtype {dtype!s:.40}, which cannot be carried"
                )
            self.charge(2 * array.nbytes)
            return {
                "t": "np.array",
                "dtype": dtype.str,
                "shape": shape,
                "data": numpy.ascontiguousarray(array).tobytes().hex(),
            }
        if isinstance(value, numpy.generic):
            scalar: Any = value
            if cls is not numpy.dtype(cls).type or not _CODEC_DTYPE_RE.match(scalar.dtype.str):
                raise self.refuse(value)
            self.charge(2 * scalar.dtype.itemsize)
            return {
                "t": "np.scalar",
                "dtype": scalar.dtype.str,
                "data": numpy.array(scalar, dtype=scalar.dtype).tobytes().hex(),
            }
        galois = _codec_sys.modules.get("galois")
        if isinstance(value, numpy.ndarray) and not (
            galois is not None and isinstance(value, galois.FieldArray)
        ):
            raise ValueCodecError(
                f"answer() returned a {type_label(value)}, a subclass of numpy.ndarray; "
                "return a plain numpy array"
            )
        return None

    # -- mpmath --
    def encode_mpmath(self, value: Any, depth: int) -> dict[str, Any] | None:
        mpmath = _codec_sys.modules.get("mpmath")
        if mpmath is None:
            return None
        cls = type(value)
        prec = int(mpmath.mp.prec)
        if cls is mpmath.mp.mpf:
            return {"t": "mpmath.mpf", "mpf": self.mpf(value._mpf_), "prec": prec}
        if cls is mpmath.mp.mpc:
            real, imag = value._mpc_
            return {"t": "mpmath.mpc", "re": self.mpf(real), "im": self.mpf(imag), "prec": prec}
        if cls is mpmath.mp.matrix:
            matrix: Any = value
            cells = []
            for i in range(int(matrix.rows)):
                for j in range(int(matrix.cols)):
                    item = matrix[i, j]
                    if type(item) not in (mpmath.mp.mpf, mpmath.mp.mpc):
                        raise ValueCodecError("an mpmath matrix holds something other than mpf/mpc")
                    if item:
                        cells.append([i, j, self.encode(item, depth + 1)])
            return {
                "t": "mpmath.matrix",
                "rows": int(matrix.rows),
                "cols": int(matrix.cols),
                "entries": cells,
                "prec": prec,
            }
        if (getattr(cls, "__module__", "") or "").startswith("mpmath"):
            raise self.refuse(value, "; return an mpf, mpc or matrix of mpmath's default context")
        return None

    # -- gmpy2 --
    def encode_gmpy2(self, value: Any, depth: int) -> dict[str, Any] | None:
        gmpy2 = _codec_sys.modules.get("gmpy2")
        if gmpy2 is None:
            return None
        cls = type(value)
        if cls is gmpy2.mpz:
            return {"t": "gmpy2.mpz", "v": self.int_hex(int(value))}
        if cls is gmpy2.mpq:
            number: Any = value
            return {
                "t": "gmpy2.mpq",
                "num": self.int_hex(int(number.numerator)),
                "den": self.int_hex(int(number.denominator)),
            }
        if cls is gmpy2.mpfr:
            return self.mpfr(value)
        if cls is gmpy2.mpc:
            complex_value: Any = value
            return {
                "t": "gmpy2.mpc",
                "re": self.mpfr(complex_value.real),
                "im": self.mpfr(complex_value.imag),
            }
        if (getattr(cls, "__module__", "") or "").startswith("gmpy2") or cls.__name__ in ("xmpz",):
            raise self.refuse(value)
        return None

    def mpfr(self, value: Any) -> dict[str, Any]:
        gmpy2 = _codec_sys.modules["gmpy2"]
        self.charge(0)
        prec = int(value.precision)
        if gmpy2.is_nan(value):
            kind, man, exp = "nan", 0, 0
        elif gmpy2.is_infinite(value):
            kind, man, exp = ("-inf" if value < 0 else "+inf"), 0, 0
        elif gmpy2.is_zero(value):
            kind, man, exp = ("-0" if gmpy2.is_signed(value) else "+0"), 0, 0
        else:
            mantissa, exponent = value.as_mantissa_exp()
            kind, man, exp = "num", int(mantissa), int(exponent)
        return {
            "t": "gmpy2.mpfr",
            "prec": prec,
            "kind": kind,
            "man": self.int_hex(man),
            "exp": self.int_hex(exp),
        }

    # -- galois --
    def encode_galois(self, value: Any, depth: int) -> dict[str, Any] | None:
        galois = _codec_sys.modules.get("galois")
        numpy = _codec_sys.modules.get("numpy")
        if galois is None or numpy is None or not isinstance(value, galois.FieldArray):
            return None
        field: Any = type(value)
        if (
            _codec_galois_field(
                galois,
                int(field.characteristic),
                int(field.degree),
                field.irreducible_poly,
                int(field.primitive_element),
            )
            is not field
        ):
            raise ValueCodecError(
                f"answer() returned a {type_label(value)} of a field class galois does not build"
            )
        array: Any = value
        dtype = array.dtype
        if dtype != numpy.dtype(object) and dtype.kind not in "iu":
            raise ValueCodecError(f"a galois array of dtype {dtype!s:.40} cannot be carried")
        plain = array.view(numpy.ndarray).reshape(-1).tolist()
        return {
            "t": "galois.array",
            "field": {
                "p": self.int_hex(int(field.characteristic)),
                "m": int(field.degree),
                "irr": [
                    self.int_hex(int(c)) for c in field.irreducible_poly.coeffs.view(numpy.ndarray).tolist()
                ],
                "prim": self.int_hex(int(field.primitive_element)),
            },
            "shape": [int(n) for n in array.shape],
            "dtype": "|O" if dtype == numpy.dtype(object) else dtype.str,
            "vals": [self.int_hex(int(v)) for v in plain],
        }

    # -- pyadic --
    def encode_pyadic(self, value: Any, depth: int) -> dict[str, Any] | None:
        pyadic = _codec_sys.modules.get("pyadic")
        if pyadic is None:
            return None
        cls = type(value)
        if cls is pyadic.PAdic:
            number: Any = value
            return {
                "t": "pyadic.padic",
                "num": self.int_hex(int(number._num)),
                "p": self.int_hex(int(number._p)),
                "k": self.int_hex(int(number._k)),
                "n": self.int_hex(int(number.n)),
            }
        if cls is pyadic.ModP:
            element: Any = value
            return {"t": "pyadic.modp", "n": self.int_hex(int(element.n)), "p": self.int_hex(int(element.p))}
        if cls is pyadic.GaussianRational:
            gaussian: Any = value
            return {
                "t": "pyadic.gaussian",
                "real": self.encode(gaussian.real, depth + 1),
                "imag": self.encode(gaussian.imag, depth + 1),
            }
        if (getattr(cls, "__module__", "") or "").startswith("pyadic"):
            raise self.refuse(value)
        return None


def encode_value(value: object, *, max_bytes: int = MAX_ENCODED_BYTES) -> dict[str, Any]:
    """A JSON-safe tagged tree for ``value``; ValueCodecError names what cannot be carried."""
    encoder = _CodecEncoder(max_bytes)
    try:
        data = encoder.encode(value, 0)
    except ValueCodecError:
        raise
    except RecursionError:
        raise ValueCodecError(
            f"the value is nested too deeply (more than {VALUE_MAX_DEPTH} levels)"
        ) from None
    except MemoryError:
        raise ValueCodecError("the value is too large to carry (out of memory while encoding)") from None
    except Exception as exc:
        raise ValueCodecError(
            f"answer() returned a {type_label(value)} that could not be encoded ({type(exc).__name__})"
        ) from None
    size = len(_codec_json.dumps(data))
    if size > max_bytes:
        raise ValueCodecError(f"the value is too large to carry ({size} bytes > cap {max_bytes})")
    return data


# ---------------------------------------------------------------------------------------
# Decoding (runs in the verify sandbox; documents were checked by check_encoded first)
# ---------------------------------------------------------------------------------------


def _codec_galois_field(galois: Any, p: int, m: int, irreducible: Any, primitive: int) -> Any:
    # galois caches field classes by these parameters, so this returns the very class
    # verify() gets from galois.GF(...). verify=False: checking irreducibility and primitivity
    # of a hostile polynomial could take long; a wrong one only gives a different field.
    if m == 1:
        return galois.GF(p, primitive_element=primitive, verify=False)
    return galois.GF(p, m, irreducible_poly=irreducible, primitive_element=primitive, verify=False)


class _CodecDecoder:
    def __init__(self) -> None:
        self.modules: dict[str, Any] = {}

    def module(self, name: str) -> Any:
        if name not in self.modules:
            import importlib

            # name is one of the fixed literals passed below, never data.
            self.modules[name] = importlib.import_module(name)
        return self.modules[name]

    def fail(self, problem: str) -> ValueCodecError:
        return ValueCodecError(f"invalid encoded value: {problem}")

    def decode(self, data: dict[str, Any]) -> Any:
        tag = data["t"]
        method = _CODEC_DECODERS[tag]  # tag was checked against _CODEC_SCHEMA
        return method(self, data)

    # -- builtins --
    def d_none(self, data: dict) -> None:
        return None

    def d_bool(self, data: dict) -> bool:
        return data["v"] is True

    def d_int(self, data: dict) -> int:
        return int(data["v"], 16)

    def d_float(self, data: dict) -> float:
        return _codec_struct.unpack(">d", bytes.fromhex(data["v"]))[0]

    def d_complex(self, data: dict) -> complex:
        real = _codec_struct.unpack(">d", bytes.fromhex(data["re"]))[0]
        imag = _codec_struct.unpack(">d", bytes.fromhex(data["im"]))[0]
        return complex(real, imag)

    def d_str(self, data: dict) -> str:
        return data["v"]

    def d_str32(self, data: dict) -> str:
        raw = bytes.fromhex(data["v"])
        if len(raw) % 4:
            raise self.fail("str32 text is not whole UTF-32 code units")
        return raw.decode("utf-32-be", "surrogatepass")

    def d_bytes(self, data: dict) -> bytes:
        return bytes.fromhex(data["v"])

    def items(self, data: dict) -> list[Any]:
        return [self.decode(item) for item in data["items"]]

    def d_list(self, data: dict) -> list:
        return self.items(data)

    def d_tuple(self, data: dict) -> tuple:
        return tuple(self.items(data))

    def d_set(self, data: dict) -> set:
        items = self.items(data)
        result = set(items)
        if len(result) != len(items):
            raise self.fail("a set lists the same element twice")
        return result

    def d_frozenset(self, data: dict) -> frozenset:
        return frozenset(self.d_set(data))

    def d_dict(self, data: dict) -> dict:
        result = {}
        for key_data, value_data in data["items"]:
            key = self.decode(key_data)
            if key in result:
                raise self.fail("a dict lists the same key twice")
            result[key] = self.decode(value_data)
        return result

    def d_range(self, data: dict) -> range:
        step = int(data["step"], 16)
        if step == 0:
            raise self.fail("a range has step 0")
        return range(int(data["start"], 16), int(data["stop"], 16), step)

    def d_fraction(self, data: dict) -> _codec_fractions.Fraction:
        num, den = int(data["num"], 16), int(data["den"], 16)
        if den <= 0 or _codec_math.gcd(num, den) != 1:
            raise self.fail("a fraction is not in lowest terms with a positive denominator")
        return _codec_fractions.Fraction(num, den)

    def d_decimal(self, data: dict) -> _codec_decimal.Decimal:
        digits = tuple(int(c) for c in data["digits"])
        exp_text = data["exp"]
        exponent: int | str = exp_text if exp_text in ("n", "N", "F") else int(exp_text, 16)
        if exponent == "F" and digits not in ((), (0,)):
            raise self.fail("an infinite Decimal carries digits")
        # The tuple constructor is exact and context-free; no text is parsed.
        return _codec_decimal.Decimal((data["sign"], digits, exponent))  # type: ignore[arg-type]

    # -- numpy --
    def dtype(self, text: str) -> Any:
        numpy = self.module("numpy")
        dtype = numpy.dtype(text)  # text matched _CODEC_DTYPE_RE: a bool/int/float/complex code
        if dtype.str != text or dtype.kind not in "biufc":
            raise self.fail(f"dtype {text} is not available here")
        return dtype

    def raw_array(self, dtype: Any, shape: list[int], hex_data: str) -> Any:
        numpy = self.module("numpy")
        count = _codec_math.prod(shape)
        raw = bytes.fromhex(hex_data)
        if len(raw) != count * dtype.itemsize:
            raise self.fail(
                f"array data has {len(raw)} bytes; shape {shape} of {dtype.str} "
                f"needs {count * dtype.itemsize}"
            )
        if dtype.kind == "b" and raw.translate(None, b"\x00\x01"):
            raise self.fail("a bool array holds bytes other than 0 and 1")
        return numpy.frombuffer(raw, dtype=dtype).reshape(shape).copy()

    def d_np_scalar(self, data: dict) -> Any:
        dtype = self.dtype(data["dtype"])
        return self.raw_array(dtype, [1], data["data"])[0]

    def d_np_array(self, data: dict) -> Any:
        return self.raw_array(self.dtype(data["dtype"]), data["shape"], data["data"])

    def d_np_objarray(self, data: dict) -> Any:
        numpy = self.module("numpy")
        shape = data["shape"]
        if _codec_math.prod(shape) != len(data["items"]):
            raise self.fail("an object array's items do not fill its shape")
        flat = numpy.empty(len(data["items"]), dtype=object)
        for index, item in enumerate(data["items"]):
            flat[index] = self.decode(item)
        return flat.reshape(shape)

    # -- sympy --
    def sympy_args(self, data: dict, key: str = "args") -> list[Any]:
        sympy = self.module("sympy")
        args = [self.decode(item) for item in data[key]]
        for arg in args:
            if not isinstance(arg, sympy.Basic):
                raise self.fail(f"a sympy argument is a {type_label(arg)}, not a sympy object")
        return args

    def d_sym_int(self, data: dict) -> Any:
        return self.module("sympy").Integer(int(data["v"], 16))

    def d_sym_rat(self, data: dict) -> Any:
        sympy = self.module("sympy")
        p, q = int(data["p"], 16), int(data["q"], 16)
        if q <= 1 or _codec_math.gcd(p, q) != 1:
            raise self.fail("a sympy Rational is not in lowest terms with a denominator above 1")
        return sympy.Rational(p, q, 1)

    def mpf_tuple(self, value: list) -> tuple[int, int, int, int]:
        sign, man, exp, bc = value[0], int(value[1], 16), int(value[2], 16), value[3]
        mpf = (sign, man, exp, bc)
        if man == 0:
            if mpf not in _CODEC_MPF_SPECIALS:
                raise self.fail("an mpf tuple with a zero mantissa is not a known special value")
            return mpf
        if man < 0 or man % 2 == 0 or bc != man.bit_length():
            raise self.fail("an mpf tuple is not normalised (odd positive mantissa, exact bit count)")
        return mpf

    def d_sym_float(self, data: dict) -> Any:
        sympy = self.module("sympy")
        mpf = self.mpf_tuple(data["mpf"])
        if mpf[0:3] in ((0, 0, -456), (1, 0, -456), (0, 0, -123)):
            raise self.fail("a sympy Float is nan/inf; those are carried as sympy constants")
        if mpf[3] > data["prec"]:
            raise self.fail("a sympy Float's mantissa is longer than its precision")
        return sympy.Float._new(mpf, data["prec"], zero=False)

    def d_sym_const(self, data: dict) -> Any:
        name = data["name"]
        if name not in _CODEC_SYMPY_SINGLETONS:
            raise self.fail("unknown sympy constant")
        return getattr(self.module("sympy").S, name)

    def d_sym_symbol(self, data: dict) -> Any:
        # Symbol takes the name as a plain string: it is never parsed.
        return self.module("sympy").Symbol(data["name"], **data["assume"])

    def d_sym_dummy(self, data: dict) -> Any:
        return self.module("sympy").Dummy(data["name"], dummy_index=int(data["index"], 16), **data["assume"])

    def d_sym_node(self, data: dict) -> Any:
        sympy = self.module("sympy")
        name = data["cls"]
        mode = _CODEC_SYMPY_NODES.get(name)
        cls: Any = _codec_sympy_class(sympy, name) if mode is not None else None
        if not (isinstance(cls, type) and issubclass(cls, sympy.Basic)):
            raise self.fail(f"sympy class {name} is not available here")
        args = self.sympy_args(data)
        self.check_arity(cls, args, sympy)
        built: Any
        if mode == "e":
            built = cls(*args, evaluate=False)
        elif mode == "p":
            built = cls(*args)
        else:
            built = self.raw_set(cls, args, sympy)
        rebuilt_args = tuple(built.args)
        if type(built) is not cls or rebuilt_args != tuple(args):
            raise self.fail(f"sympy {name} does not rebuild exactly from these arguments")
        return built

    def raw_set(self, cls: Any, args: list[Any], sympy: Any) -> Any:
        name = cls.__name__
        if name == "Interval":
            if len(args) != 4 or not all(isinstance(end, sympy.Expr) for end in args[:2]):
                raise self.fail("an Interval takes two expressions and two open flags")
            if not all(isinstance(flag, sympy.logic.boolalg.BooleanAtom) for flag in args[2:]):
                raise self.fail("an Interval's open flags are not sympy true/false")
        elif name in ("Union", "Intersection", "ProductSet"):
            if len(args) < 2 or not all(isinstance(arg, sympy.Set) for arg in args):
                raise self.fail(f"a {name} takes two or more sets")
        elif name == "ImageSet":
            if len(args) < 2 or not isinstance(args[0], sympy.Lambda):
                raise self.fail("an ImageSet takes a Lambda and sets")
            if not all(isinstance(arg, sympy.Set) for arg in args[1:]):
                raise self.fail("an ImageSet takes a Lambda and sets")
        elif len(args) != 3 or not isinstance(args[0], sympy.Symbol) or not isinstance(args[2], sympy.Set):
            raise self.fail("a ConditionSet takes a symbol, a condition and a set")
        built = sympy.Basic.__new__(cls, *args)
        if name in ("Union", "Intersection"):
            built._argset = frozenset(args)  # what their constructor records beside args
        return built

    def check_arity(self, cls: Any, args: list[Any], sympy: Any) -> None:
        nargs = getattr(cls, "nargs", None)
        if issubclass(cls, sympy.Function) and isinstance(nargs, sympy.FiniteSet) and len(args) not in nargs:
            raise self.fail(f"sympy {cls.__name__} takes {nargs} arguments, got {len(args)}")
        if issubclass(cls, (sympy.Pow, sympy.core.relational.Relational)) and len(args) != 2:
            raise self.fail(f"sympy {cls.__name__} takes 2 arguments, got {len(args)}")

    def d_sym_ufunc(self, data: dict) -> Any:
        sympy = self.module("sympy")
        args = self.sympy_args(data)
        # The name only names a new class; it is never parsed or looked up.
        function = sympy.Function(data["name"])
        built = function(*args, evaluate=False)
        if built.args != tuple(args):
            raise self.fail("an undefined function does not rebuild exactly")
        return built

    def d_sym_matrix(self, data: dict) -> Any:
        sympy = self.module("sympy")
        rows, cols = data["rows"], data["cols"]
        if rows * cols != len(data["items"]):
            raise self.fail("a matrix's items do not fill its shape")
        items = self.sympy_args(data, "items")
        return getattr(sympy, data["cls"])(rows, cols, items)  # cls is in _CODEC_MATRIX_CLASSES

    def d_sym_smatrix(self, data: dict) -> Any:
        sympy = self.module("sympy")
        rows, cols = data["rows"], data["cols"]
        if rows * cols > VALUE_MAX_NODES * 64:
            raise self.fail("a sparse matrix is too large")
        cells = {}
        for i, j, item in data["entries"]:
            if i >= rows or j >= cols or (i, j) in cells:
                raise self.fail("a sparse matrix cell is out of range or repeated")
            value = self.decode(item)
            if not isinstance(value, sympy.Basic):
                raise self.fail("a sparse matrix cell is not a sympy object")
            cells[(i, j)] = value
        return getattr(sympy, data["cls"])(rows, cols, cells)

    def domain(self, spec: dict) -> Any:
        sympy = self.module("sympy")
        kind = spec["k"]
        if kind in ("ZZ", "QQ", "ZZ_I", "QQ_I"):
            return getattr(sympy.polys.domains, kind)
        if kind == "GF":
            mod = int(spec["mod"], 16)
            if mod < 2 or mod.bit_length() > VALUE_MAX_MODULUS_BITS:
                raise self.fail("a finite field's modulus is out of range")
            return sympy.GF(mod, symmetric=spec["sym"])
        if kind == "RR":
            return sympy.polys.domains.RealField(spec["prec"])
        if kind == "CC":
            return sympy.polys.domains.ComplexField(spec["prec"])
        base = self.domain(spec["base"])
        gens = self.sympy_args(spec, "gens")
        if not gens:
            raise self.fail("a polynomial ring has no generators")
        return base.poly_ring(*gens) if kind == "poly_ring" else base.frac_field(*gens)

    def d_sym_poly(self, data: dict) -> Any:
        sympy = self.module("sympy")
        gens = self.sympy_args(data, "gens")
        domain = self.domain(data["domain"])
        terms = {}
        for exponents, coeff_data in data["terms"]:
            if len(exponents) != len(gens) or tuple(exponents) in terms:
                raise self.fail("a polynomial term has the wrong number of exponents or repeats")
            coeff = self.decode(coeff_data)
            if not isinstance(coeff, sympy.Basic):
                raise self.fail("a polynomial coefficient is not a sympy object")
            terms[tuple(exponents)] = domain.from_sympy(coeff)
        if not gens:
            raise self.fail("a polynomial has no generators")
        cls = getattr(sympy, data["cls"])  # cls is in _CODEC_POLY_CLASSES
        return cls.from_dict(terms, *gens, domain=domain)

    def d_sym_modint(self, data: dict) -> Any:
        mod, val = int(data["mod"], 16), int(data["val"], 16)
        if mod < 2 or mod.bit_length() > VALUE_MAX_MODULUS_BITS or not 0 <= val < mod:
            raise self.fail("a GF(p) element's modulus or value is out of range")
        return self.module("sympy").GF(mod, symmetric=data["sym"])(val)

    # -- mpmath --
    def d_mpmath_mpf(self, data: dict) -> Any:
        return self.module("mpmath").mp.make_mpf(self.mpf_tuple(data["mpf"]))

    def d_mpmath_mpc(self, data: dict) -> Any:
        mpmath = self.module("mpmath")
        return mpmath.mp.make_mpc((self.mpf_tuple(data["re"]), self.mpf_tuple(data["im"])))

    def d_mpmath_matrix(self, data: dict) -> Any:
        mpmath = self.module("mpmath")
        rows, cols = data["rows"], data["cols"]
        if rows * cols > VALUE_MAX_NODES * 64:
            raise self.fail("an mpmath matrix is too large")
        matrix = mpmath.mp.matrix(rows, cols)
        seen = set()
        for i, j, item in data["entries"]:
            if i >= rows or j >= cols or (i, j) in seen:
                raise self.fail("an mpmath matrix cell is out of range or repeated")
            seen.add((i, j))
            value = self.decode(item)
            if type(value) not in (mpmath.mp.mpf, mpmath.mp.mpc):
                raise self.fail("an mpmath matrix cell is not an mpf or mpc")
            matrix[i, j] = value
        return matrix

    # -- gmpy2 --
    def d_gmpy2_mpz(self, data: dict) -> Any:
        return self.module("gmpy2").mpz(int(data["v"], 16))

    def d_gmpy2_mpq(self, data: dict) -> Any:
        num, den = int(data["num"], 16), int(data["den"], 16)
        if den <= 0 or _codec_math.gcd(num, den) != 1:
            raise self.fail("an mpq is not in lowest terms with a positive denominator")
        return self.module("gmpy2").mpq(num, den)

    def d_gmpy2_mpfr(self, data: dict) -> Any:
        gmpy2 = self.module("gmpy2")
        prec, kind = data["prec"], data["kind"]
        man, exp = int(data["man"], 16), int(data["exp"], 16)
        if kind != "num" and (man or exp):
            raise self.fail("a special mpfr carries a mantissa")
        if kind == "num" and abs(man).bit_length() != prec:
            raise self.fail("an mpfr mantissa does not have exactly its precision's bits")
        context = gmpy2.context(precision=prec, emax=gmpy2.get_emax_max(), emin=gmpy2.get_emin_min())
        with context:  # a fresh context: the caller's is left as it was
            if kind == "num":
                # The mantissa fits the precision and scaling by 2**exp is exact.
                value = gmpy2.mul_2exp(gmpy2.mpfr(gmpy2.mpz(man)), exp)
                if not gmpy2.is_finite(value) or value.as_mantissa_exp() != (man, exp):
                    raise self.fail("an mpfr exponent is out of range")
                return value
            special = {"nan": "nan", "+inf": "inf", "-inf": "-inf", "+0": "0", "-0": "-0"}[kind]
            return gmpy2.mpfr(special)  # one of five fixed literals, not data

    def d_gmpy2_mpc(self, data: dict) -> Any:
        gmpy2 = self.module("gmpy2")
        real, imag = self.decode(data["re"]), self.decode(data["im"])
        if type(real) is not gmpy2.mpfr or type(imag) is not gmpy2.mpfr:
            raise self.fail("an mpc's parts are not mpfr")
        context = gmpy2.context(emax=gmpy2.get_emax_max(), emin=gmpy2.get_emin_min())
        with context:  # a fresh context: the caller's is left as it was
            return gmpy2.mpc(real, imag, precision=(real.precision, imag.precision))

    # -- galois --
    def d_galois_array(self, data: dict) -> Any:
        numpy = self.module("numpy")
        galois = self.module("galois")
        spec = data["field"]
        p, m = int(spec["p"], 16), spec["m"]
        if p < 2 or p.bit_length() * m > VALUE_MAX_MODULUS_BITS:
            raise self.fail("a galois field's order is out of range")
        irreducible = [int(c, 16) for c in spec["irr"]]
        if len(irreducible) != m + 1 or any(not 0 <= c < p for c in irreducible):
            raise self.fail("a galois field's irreducible polynomial does not match its degree")
        order = p**m
        primitive = int(spec["prim"], 16)
        if not 0 <= primitive < order:
            raise self.fail("a galois field's primitive element is out of range")
        field = _codec_galois_field(
            galois, p, m, None if m == 1 else galois.Poly(irreducible, field=galois.GF(p)), primitive
        )
        if [int(c) for c in field.irreducible_poly.coeffs.view(numpy.ndarray).tolist()] != irreducible:
            raise self.fail("a galois field's irreducible polynomial does not match its primitive element")
        values = [int(v, 16) for v in data["vals"]]
        shape = data["shape"]
        if _codec_math.prod(shape) != len(values) or any(not 0 <= v < order for v in values):
            raise self.fail("a galois array's values do not fill its shape or leave the field")
        dtype = object if data["dtype"] == "|O" else numpy.dtype(data["dtype"])
        plain = numpy.empty(len(values), dtype=dtype)
        plain[:] = values
        return field(plain.reshape(shape))

    # -- pyadic --
    def d_pyadic_padic(self, data: dict) -> Any:
        pyadic = self.module("pyadic")
        num, p, k, n = (int(data[key], 16) for key in ("num", "p", "k", "n"))
        if p < 2 or p.bit_length() > VALUE_MAX_MODULUS_BITS or not 0 <= k <= VALUE_MAX_PRECISION:
            raise self.fail("a p-adic number's prime or precision is out of range")
        # p**k is only computed once it is known to be small: k * log2(p) bits at most.
        if k * p.bit_length() > VALUE_MAX_PADIC_BITS:
            raise self.fail("a p-adic number's precision is too large to carry")
        if abs(n) > VALUE_MAX_PRECISION or not 0 <= num < p**k:
            raise self.fail("a p-adic number's digits or valuation are out of range")
        # Set the stored fields directly: the constructor reinterprets its arguments.
        number = object.__new__(pyadic.PAdic)
        number.num, number.p, number.k, number.n = num, p, k, n
        return number

    def d_pyadic_modp(self, data: dict) -> Any:
        pyadic = self.module("pyadic")
        n, p = int(data["n"], 16), int(data["p"], 16)
        if p < 2 or p.bit_length() > VALUE_MAX_MODULUS_BITS or not 0 <= n < p:
            raise self.fail("a ModP element's value or modulus is out of range")
        return pyadic.ModP(n, p)

    def d_pyadic_gaussian(self, data: dict) -> Any:
        pyadic = self.module("pyadic")
        real, imag = self.decode(data["real"]), self.decode(data["imag"])
        if type(real) is not _codec_fractions.Fraction or type(imag) is not _codec_fractions.Fraction:
            raise self.fail("a GaussianRational's parts are not Fractions")
        return pyadic.GaussianRational(real, imag)


_CODEC_DECODERS = {tag: getattr(_CodecDecoder, "d_" + tag.replace(".", "_")) for tag in _CODEC_SCHEMA}


def decode_value(data: object, *, max_bytes: int = MAX_ENCODED_BYTES) -> object:
    """Rebuild the value from a document made by encode_value; ValueCodecError if it is not one."""
    check_encoded(data, max_bytes=max_bytes)
    try:
        return _CodecDecoder().decode(data)  # type: ignore[arg-type]
    except ValueCodecError:
        raise
    except RecursionError:
        raise ValueCodecError(
            f"the encoded value is nested too deeply (more than {VALUE_MAX_DEPTH} levels)"
        ) from None
    except MemoryError:
        raise ValueCodecError("the encoded value is too large to rebuild (out of memory)") from None
    except Exception as exc:
        text = str(exc).splitlines()[0][:160] if str(exc) else ""
        raise ValueCodecError(f"invalid encoded value: {type(exc).__name__} {text}".rstrip()) from None
