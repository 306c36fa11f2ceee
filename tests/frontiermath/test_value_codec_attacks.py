"""Issue 8 item 1: a hostile document is data; decoding it never runs code or escapes the schema.

The decoder is fed hand-written attacks and a fuzzed corpus (hypothesis JSON trees and
mutations of valid encodings) while eval/exec/compile of text, sympy's parser, pickle and
marshal are replaced by functions that raise a BaseException (so no `except Exception`
inside the codec or sympy can hide a call). Every document must decode or raise
ValueCodecError, nothing else, and a canary file and global must stay untouched. The
encoder is attacked with subclasses whose hooks (__eq__, __hash__, __repr__, printers,
__index__, __reduce__) would lie: they are refused without the hooks being called.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import json
import marshal
import pickle
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proctor.agent.tracks.frontiermath import value_codec
from proctor.agent.tracks.frontiermath.value_codec import (
    ValueCodecError,
    check_encoded,
    decode_value,
    encode_value,
)

numpy = pytest.importorskip("numpy")
sympy = pytest.importorskip("sympy")
# Imported up front so that the import system's own loading happens outside the guards.
for _library in ("galois", "gmpy2", "mpmath", "pyadic"):
    pytest.importorskip(_library)
sympy_parser = pytest.importorskip("sympy.parsing.sympy_parser")

FUZZ = settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))

CANARY_PATH = Path("/tmp/proctor-codec-canary")
CANARY = {"touched": False}
PAYLOAD = f"__import__('pathlib').Path('{CANARY_PATH}').write_text('pwned')"


class ForbiddenCall(BaseException):
    """Raised by the patched eval/exec/parser: BaseException, so nothing can swallow it."""


def _inside_numba() -> bool:
    """numba (under galois) evaluates its own type-signature literals while compiling."""
    frame = sys._getframe(2)
    while frame is not None:
        if "/numba/" in frame.f_code.co_filename:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


@contextlib.contextmanager
def forbid_code() -> Iterator[None]:
    """Make every way of running text as code raise ForbiddenCall inside the block."""
    real_compile = builtins.compile

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise ForbiddenCall(f"forbidden call with {str(args)[:80]}")

    def forbidden_from_codec(real: Any) -> Any:
        # numba (under galois) loads its own on-disk cache with pickle; only a call made
        # on behalf of the codec, with a codec frame on the stack, would be a leak.
        def call(*args: Any, **kwargs: Any) -> Any:
            frame = sys._getframe(1)
            while frame is not None:
                if "/numba/" in frame.f_code.co_filename:
                    break
                if frame.f_code.co_filename == value_codec.__file__:
                    raise ForbiddenCall(f"{real.__name__} reached from the codec")
                frame = frame.f_back  # type: ignore[assignment]
            return real(*args, **kwargs)

        return call

    def guarded_text(real: Any) -> Any:
        def call(source: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(source, str | bytes) and not _inside_numba():
                raise ForbiddenCall(f"{real.__name__} of text {str(source)[:80]!r}")
            return real(source, *args, **kwargs)

        return call

    def guarded_compile(source: Any, filename: Any, *args: Any, **kwargs: Any) -> Any:
        # The import system compiles .py files; anything else compiled is a red flag.
        if not str(filename).endswith(".py"):
            raise ForbiddenCall(f"compile of {str(source)[:80]!r}")
        return real_compile(source, filename, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(builtins, "eval", guarded_text(builtins.eval))
        patch.setattr(builtins, "exec", guarded_text(builtins.exec))
        patch.setattr(builtins, "compile", guarded_compile)
        patch.setattr(sympy_parser, "parse_expr", forbidden)
        patch.setattr(sympy, "sympify", guarded_text(sympy.sympify))
        patch.setattr(sympy, "parse_expr", forbidden, raising=False)
        patch.setattr(pickle, "loads", forbidden_from_codec(pickle.loads))
        patch.setattr(marshal, "loads", forbidden_from_codec(marshal.loads))
        yield


@pytest.fixture
def no_code_execution() -> Iterator[None]:
    """The canary file and global must be untouched by whatever the test decodes."""
    CANARY_PATH.unlink(missing_ok=True)
    yield
    assert not CANARY_PATH.exists(), "a document ran code"
    assert CANARY == {"touched": False}


def decodes_or_refuses(document: Any) -> None:
    """The only two allowed outcomes: a value, or ValueCodecError with a one-line message."""
    try:
        with forbid_code():
            decode_value(document)
    except ValueCodecError as exc:
        message = str(exc)
        assert message and "\n" not in message and len(message) < 400


def rejected(document: Any, *needles: str) -> str:
    with pytest.raises(ValueCodecError) as caught, forbid_code():
        decode_value(document)
    message = str(caught.value)
    for needle in needles:
        assert needle in message, message
    return message


def _node(cls: str, *args: Any) -> dict[str, Any]:
    return {"t": "sym.node", "cls": cls, "args": list(args)}


def _power(base: int, exponent: int) -> dict[str, Any]:
    return _node("Pow", {"t": "sym.int", "v": hex(base)}, {"t": "sym.int", "v": hex(exponent)})


# -- hand-written hostile documents ---------------------------------------------------------


@pytest.mark.parametrize(
    "document",
    [
        {"t": "eval", "v": PAYLOAD},
        {"t": "__import__", "v": "os"},
        {"t": "os.system", "v": "true"},
        {"t": "sympy", "v": PAYLOAD, "class": "Symbol"},  # today's srepr format
        {"t": "sym.node", "cls": "Function", "args": [{"t": "str", "v": PAYLOAD}]},
        {"t": "sym.node", "cls": "eval", "args": []},
        {"t": "sym.node", "cls": "__class__", "args": []},
        {"t": "sym.node", "cls": "Symbol", "args": []},
        {"t": "sym.node", "cls": "sympify", "args": []},
        {"t": "sym.const", "name": "__class__"},
        {"t": "sym.const", "name": "sympify"},
        {"t": "sym.matrix", "cls": "Matrix", "rows": 1, "cols": 1, "items": [{"t": "sym.int", "v": "0x1"}]},
        {"t": "sym.poly", "cls": "Expr", "gens": [], "domain": {"k": "ZZ"}, "terms": []},
        {"t": "sym.poly", "cls": "Poly", "gens": [], "domain": {"k": "EX"}, "terms": []},
        {"t": "sym.poly", "cls": "Poly", "gens": [], "domain": {"k": "ZZ", "x": PAYLOAD}, "terms": []},
        {"t": "sym.symbol", "name": "x", "assume": {PAYLOAD: True}},
        {"t": "sym.symbol", "name": "x", "assume": {"positive": "yes"}},
        {"t": "np.array", "dtype": "O", "shape": [1], "data": ""},
        {"t": "np.array", "dtype": "<M8", "shape": [1], "data": "00" * 8},
        {"t": "np.array", "dtype": "V8", "shape": [1], "data": "00" * 8},
        {"t": "int", "v": "12"},
        {"t": "int", "v": 12},
        {"t": "int", "v": "0x12", "extra": 1},
        {"t": "int"},
        {"t": "float", "v": 1.5},
        {"t": "float", "v": "1.5"},
        {"t": "bool", "v": 1},
        {"t": "list", "items": {}},
        {"t": "list", "items": [1, 2]},
        {"t": "dict", "items": [[{"t": "none"}]]},
        {"t": "np.array", "dtype": "<i8", "shape": ["2"], "data": "00" * 16},
        {"t": "decimal", "sign": 2, "digits": "1", "exp": "0x0"},
        {"t": "decimal", "sign": 0, "digits": "1e5", "exp": "0x0"},
        {"t": "sym.float", "mpf": [0, "0x3", "0x0", 2], "prec": 1.5},
        {"t": "mpmath.mpf", "mpf": [0, "0x3", "0x0", 2, 9], "prec": 53},
        {"t": "galois.array", "field": {"p": "0x7", "m": 1}, "shape": [], "dtype": "<i8", "vals": []},
        {"t": "str", "v": None},
        [],
        "int",
        None,
        1.0,
    ],
)
def test_hostile_documents_are_refused_by_the_schema(document: Any, no_code_execution: None) -> None:
    with pytest.raises(ValueCodecError):
        check_encoded(document)
    rejected(document)


@pytest.mark.parametrize(
    "document",
    [
        {"t": "int", "v": "-0x0"},
        {"t": "range", "start": "0x0", "stop": "0x1", "step": "0x0"},
        {"t": "fraction", "num": "0x2", "den": "0x4"},
        {"t": "fraction", "num": "0x1", "den": "-0x3"},
        {"t": "sym.rat", "p": "0x2", "q": "0x4"},
        {"t": "sym.rat", "p": "0x2", "q": "0x1"},
        {"t": "sym.float", "mpf": [0, "0x2", "0x0", 2], "prec": 53},  # not normalised
        {"t": "sym.float", "mpf": [0, "0x3", "0x0", 2], "prec": 1},  # mantissa longer than prec
        {"t": "mpmath.mpf", "mpf": [0, "0x0", "0x5", 0], "prec": 53},
        {"t": "gmpy2.mpfr", "prec": 53, "kind": "num", "man": "0x1", "exp": "0x0"},
        {"t": "gmpy2.mpfr", "prec": 2, "kind": "num", "man": "0x3", "exp": "0x" + "f" * 40},
        {"t": "gmpy2.mpfr", "prec": 53, "kind": "nan", "man": "0x1", "exp": "0x0"},
        {"t": "gmpy2.mpq", "num": "0x2", "den": "0x2"},
        {"t": "gmpy2.mpc", "re": {"t": "int", "v": "0x1"}, "im": {"t": "int", "v": "0x1"}},
        {"t": "set", "items": [{"t": "int", "v": "0x1"}, {"t": "int", "v": "0x1"}]},
        {"t": "set", "items": [{"t": "list", "items": []}]},
        {"t": "dict", "items": [[{"t": "list", "items": []}, {"t": "none"}]]},
        {"t": "dict", "items": [[{"t": "none"}, {"t": "none"}], [{"t": "none"}, {"t": "none"}]]},
        {"t": "np.array", "dtype": "<i8", "shape": [3], "data": "00" * 16},
        {"t": "np.array", "dtype": "|b1", "shape": [1], "data": "02"},
        {"t": "np.array", "dtype": "<i8", "shape": [2**40, 2**40], "data": ""},
        {"t": "np.objarray", "shape": [2**40], "items": []},
        {"t": "sym.node", "cls": "Add", "args": [{"t": "str", "v": PAYLOAD}, {"t": "sym.int", "v": "0x1"}]},
        {"t": "sym.node", "cls": "sin", "args": [{"t": "sym.int", "v": "0x1"}, {"t": "sym.int", "v": "0x1"}]},
        {"t": "sym.node", "cls": "Pow", "args": [{"t": "sym.int", "v": "0x1"}]},
        {
            "t": "sym.matrix",
            "cls": "MutableDenseMatrix",
            "rows": 1,
            "cols": 1,
            "items": [{"t": "str", "v": PAYLOAD}],
        },
        {"t": "sym.matrix", "cls": "MutableDenseMatrix", "rows": 2, "cols": 2, "items": []},
        {
            "t": "sym.smatrix",
            "cls": "MutableSparseMatrix",
            "rows": 1,
            "cols": 1,
            "entries": [[0, 0, {"t": "str", "v": PAYLOAD}]],
        },
        {
            "t": "sym.smatrix",
            "cls": "MutableSparseMatrix",
            "rows": 1,
            "cols": 1,
            "entries": [[5, 0, {"t": "sym.int", "v": "0x1"}]],
        },
        {
            "t": "sym.poly",
            "cls": "Poly",
            "gens": [{"t": "sym.symbol", "name": "x", "assume": {}}],
            "domain": {"k": "ZZ"},
            "terms": [[[10**12], {"t": "sym.int", "v": "0x1"}]],
        },
        {
            "t": "sym.poly",
            "cls": "Poly",
            "gens": [{"t": "str", "v": PAYLOAD}],
            "domain": {"k": "ZZ"},
            "terms": [],
        },
        {
            "t": "sym.poly",
            "cls": "Poly",
            "gens": [{"t": "sym.symbol", "name": "x", "assume": {}}],
            "domain": {"k": "ZZ"},
            "terms": [[[1], {"t": "str", "v": PAYLOAD}]],
        },
        {"t": "sym.symbol", "name": "x", "assume": {"positive": True, "negative": True}},
        {"t": "sym.modint", "mod": "0x1", "val": "0x0", "sym": True},
        {"t": "sym.modint", "mod": "0x7", "val": "0x9", "sym": True},
        {"t": "sym.modint", "mod": "0x1" + "0" * 2000, "val": "0x0", "sym": True},
        {
            "t": "galois.array",
            "field": {"p": "0x7", "m": 1, "irr": ["0x1", "0x4"], "prim": "0x3"},
            "shape": [1],
            "dtype": "<i8",
            "vals": ["0x9"],
        },
        {
            "t": "galois.array",
            "field": {"p": "0x7", "m": 1, "irr": ["0x1", "0x1"], "prim": "0x3"},
            "shape": [1],
            "dtype": "<i8",
            "vals": ["0x1"],
        },
        {
            "t": "galois.array",
            "field": {"p": "0x1" + "0" * 2000, "m": 1, "irr": [], "prim": "0x3"},
            "shape": [],
            "dtype": "|O",
            "vals": [],
        },
        {"t": "pyadic.padic", "num": "0x64", "p": "0x7", "k": "0x1", "n": "0x0"},
        {"t": "pyadic.modp", "n": "0x9", "p": "0x7"},
        _node(
            "Interval",
            {"t": "str", "v": "0"},
            {"t": "sym.int", "v": "0x1"},
            {"t": "bool", "v": True},
            {"t": "bool", "v": False},
        ),
        _node(
            "Interval",
            {"t": "sym.int", "v": "0x0"},
            {"t": "sym.int", "v": "0x1"},
            {"t": "sym.int", "v": "0x1"},
            {"t": "sym.int", "v": "0x0"},
        ),
        {"t": "pyadic.padic", "num": "0x1", "p": "0x1" + "0" * 1000, "k": "0x2000000", "n": "0x0"},
        {"t": "pyadic.gaussian", "real": {"t": "int", "v": "0x1"}, "imag": {"t": "int", "v": "0x1"}},
        {
            "t": "mpmath.matrix",
            "rows": 1,
            "cols": 1,
            "entries": [[0, 0, {"t": "int", "v": "0x1"}]],
            "prec": 53,
        },
        {"t": "str32", "v": "00d8"},
    ],
)
def test_well_formed_but_invalid_documents_raise_only_value_codec_error(
    document: Any, no_code_execution: None
) -> None:
    rejected(document)


def test_code_in_a_symbol_name_stays_a_name(no_code_execution: None) -> None:
    with forbid_code():
        value = decode_value({"t": "sym.symbol", "name": PAYLOAD, "assume": {"positive": True}})
    assert type(value) is sympy.Symbol and value.name == PAYLOAD and value.is_positive


def test_code_in_an_undefined_function_name_stays_a_name(no_code_execution: None) -> None:
    document = {"t": "sym.ufunc", "name": PAYLOAD, "args": [{"t": "sym.symbol", "name": "x", "assume": {}}]}
    with forbid_code():
        value = decode_value(document)
    assert type(value).__name__ == PAYLOAD and value.args == (sympy.Symbol("x"),)


def test_huge_exponent_is_kept_unevaluated_not_computed(no_code_execution: None) -> None:
    power = {
        "t": "sym.node",
        "cls": "Pow",
        "args": [{"t": "sym.int", "v": "0xa"}, {"t": "sym.int", "v": hex(10**100)}],
    }
    started = time.perf_counter()
    with forbid_code():
        value = decode_value({"t": "sym.node", "cls": "Add", "args": [power, {"t": "sym.int", "v": "0x1"}]})
    assert time.perf_counter() - started < 2.0
    assert type(value) is sympy.Add and sympy.Pow(10, 10**100, evaluate=False) in value.args


@pytest.mark.parametrize(
    "document",
    [
        _node(
            "Interval", _power(3, 10**100), _power(10, 10**100), *[{"t": "sym.const", "name": "false"}] * 2
        ),
        _node(
            "Union",
            _node(
                "Interval",
                {"t": "sym.int", "v": "0x0"},
                _power(10, 10**100),
                *[{"t": "sym.const", "name": "true"}] * 2,
            ),
            _node("FiniteSet", _power(3, 10**100)),
        ),
        _node(
            "ProductSet",
            _node(
                "Interval",
                _power(3, 10**100),
                _power(10, 10**100),
                *[{"t": "sym.const", "name": "false"}] * 2,
            ),
            _node("FiniteSet", _power(3, 10**100)),
        ),
        _node(
            "Intersection", _node("FiniteSet", _power(3, 10**100)), _node("FiniteSet", _power(10, 10**100))
        ),
        _node(
            "ConditionSet",
            {"t": "sym.symbol", "name": "x", "assume": {}},
            _node("StrictLessThan", {"t": "sym.symbol", "name": "x", "assume": {}}, _power(10, 10**100)),
            _node("FiniteSet", _power(3, 10**100)),
        ),
        _node("Max", _power(10, 10**100), _power(3, 10**100)),
        _node("Mod", _power(10, 10**100), _power(3, 10**100)),
        _node("factorial", _power(10, 10**100)),
        _node(
            "Abs",
            _node(
                "Add", _power(10, 10**100), _node("Mul", {"t": "sym.int", "v": "-0x1"}, _power(3, 10**100))
            ),
        ),
        _node(
            "Sum",
            {"t": "sym.symbol", "name": "k", "assume": {}},
            _node(
                "Tuple",
                {"t": "sym.symbol", "name": "k", "assume": {}},
                {"t": "sym.int", "v": "0x1"},
                _power(10, 10**100),
            ),
        ),
    ],
)
def test_decoding_never_evaluates_a_huge_tree(document: Any, no_code_execution: None) -> None:
    """Constructors that compare or evaluate (Interval's end < start) would compute 3**(10**100)."""
    started = time.perf_counter()
    with forbid_code():
        value = decode_value(document)
    assert time.perf_counter() - started < 2.0
    assert type(value).__name__ == document["cls"]


def test_deep_nesting_is_refused_before_recursion_trouble(no_code_execution: None) -> None:
    document: dict[str, Any] = {"t": "none"}
    for _ in range(5000):
        document = {"t": "list", "items": [document]}
    rejected(document, "nested too deeply")
    shallow: dict[str, Any] = {"t": "none"}
    for _ in range(value_codec.VALUE_MAX_DEPTH - 1):
        shallow = {"t": "list", "items": [shallow]}
    decode_value(shallow)


def test_huge_fan_out_is_refused_by_node_count(no_code_execution: None) -> None:
    document = {"t": "list", "items": [{"t": "none"}] * (value_codec.VALUE_MAX_NODES + 1)}
    rejected(document, "too many nodes")


def test_document_over_the_size_cap_is_refused(no_code_execution: None) -> None:
    with pytest.raises(ValueCodecError, match=r"too large to carry \(\d+ bytes > cap 1000\)"):
        decode_value({"t": "str", "v": "x" * 4096}, max_bytes=1000)
    with pytest.raises(ValueCodecError, match="too large to carry"):
        check_encoded({"t": "int", "v": "0x" + "f" * (value_codec.MAX_ENCODED_BYTES + 1)})


def test_encoding_a_value_over_the_cap_fails_fast_with_its_size() -> None:
    value = 1 << (8 * value_codec.MAX_ENCODED_BYTES * 2)
    started = time.perf_counter()
    with pytest.raises(ValueCodecError, match=r"the value is too large to carry \(\d+ bytes > cap \d+\)"):
        encode_value(value)
    assert time.perf_counter() - started < 2.0
    with pytest.raises(ValueCodecError, match="too large to carry"):
        encode_value(["y" * 1000] * 10_000)


# -- fuzzing -------------------------------------------------------------------------------

TAGS = sorted(value_codec._CODEC_SCHEMA)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.text(max_size=12)
    | st.sampled_from(
        ["0x1", "-0xff", "0x0", "nan", "inf", "n", "F", "|b1", "<i8", "Add", "Pow", "Symbol", "ZZ", PAYLOAD]
    )
)
json_trees = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["t", "v", "items", "args", "cls", "name", "re", "im", "mpf", "prec"]),
            inner,
            max_size=4,
        )
        | st.builds(
            lambda tag, rest: {"t": tag, **rest},
            st.sampled_from(TAGS),
            st.dictionaries(
                st.sampled_from(
                    [
                        "v",
                        "items",
                        "args",
                        "cls",
                        "name",
                        "assume",
                        "shape",
                        "dtype",
                        "data",
                        "num",
                        "den",
                        "p",
                        "q",
                        "mpf",
                        "prec",
                        "entries",
                    ]
                ),
                inner,
                max_size=4,
            ),
        )
    ),
    max_leaves=20,
)


@FUZZ
@given(document=json_trees)
def test_fuzzed_json_trees_decode_or_raise_value_codec_error(document: Any, no_code_execution: None) -> None:
    decodes_or_refuses(document)


def _valid_documents() -> list[Any]:
    x = sympy.Symbol("x", positive=True)
    values = [
        [1, -2.5, "s", b"b", None, True, (1, 2), {3}, frozenset({4}), {"k": 5}, range(1, 9, 2)],
        sympy.sin(x) ** 2 + sympy.Rational(1, 3) * sympy.Function("f")(x) - sympy.Float("1.5", 30),
        sympy.Matrix([[1, x], [sympy.pi, 2]]),
        sympy.Poly(x**2 + 3 * x + 1, x, modulus=7),
        sympy.Interval(0, 1, True, False),
        sympy.GF(7)(3),
        numpy.arange(6, dtype="int32").reshape(2, 3),
        numpy.float64(0.5),
    ]
    return [encode_value(v) for v in values]


VALID = _valid_documents()


def _mutate(document: Any, path: list[int], replacement: Any) -> Any:
    """Replace the node reached by following ``path`` (indices into children) by ``replacement``."""
    mutated = copy.deepcopy(document)
    parent: Any = None
    key: Any = None
    node = mutated
    for step in path:
        children = (
            list(node.items())
            if isinstance(node, dict)
            else list(enumerate(node))
            if isinstance(node, list)
            else []
        )
        if not children:
            break
        parent, (key, node) = node, children[step % len(children)]
    if parent is None:
        return replacement
    parent[key] = replacement
    return mutated


@FUZZ
@given(document=st.sampled_from(VALID), path=st.lists(st.integers(0, 50), max_size=8), replacement=json_trees)
def test_mutated_valid_encodings_decode_or_raise_value_codec_error(
    document: Any, path: list[int], replacement: Any, no_code_execution: None
) -> None:
    decodes_or_refuses(_mutate(document, path, replacement))


def test_valid_corpus_decodes_without_any_code_execution(no_code_execution: None) -> None:
    for document in VALID:
        text = json.dumps(document)
        with forbid_code():
            decode_value(json.loads(text))


# -- encoder attacks -----------------------------------------------------------------------

CALLED: list[str] = []


class EvilInt(int):
    def __eq__(self, other: object) -> bool:
        CALLED.append("__eq__")
        return True

    def __hash__(self) -> int:
        CALLED.append("__hash__")
        return 0

    def __repr__(self) -> str:
        CALLED.append("__repr__")
        return "42"

    def __index__(self) -> int:
        CALLED.append("__index__")
        return 42

    def __int__(self) -> int:
        CALLED.append("__int__")
        return 42

    def __reduce__(self) -> Any:
        CALLED.append("__reduce__")
        return (eval, (PAYLOAD,))


class EvilFloat(float):
    def __repr__(self) -> str:
        CALLED.append("__repr__")
        return "1.0"


class EvilList(list):
    def __iter__(self) -> Any:
        CALLED.append("__iter__")
        return iter([42])


class EvilDict(dict):
    def items(self) -> Any:
        CALLED.append("items")
        return [(1, 42)]


class EvilArray(numpy.ndarray):
    def __eq__(self, other: object) -> Any:
        CALLED.append("__eq__")
        return True


class EvilSymbol(sympy.Symbol):
    def _sympystr(self, printer: Any) -> str:
        CALLED.append("_sympystr")
        return "42"

    def __eq__(self, other: object) -> bool:
        CALLED.append("__eq__")
        return True

    __hash__ = sympy.Symbol.__hash__


class EvilInteger(sympy.Integer):
    def _sympyrepr(self, printer: Any) -> str:
        CALLED.append("_sympyrepr")
        return "Integer(42)"


class CustomFunction(sympy.Function):
    @classmethod
    def eval(cls, arg: Any) -> Any:
        CALLED.append("eval")
        return None


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda: EvilInt(7), "a subclass of int; return a plain int"),
        (lambda: EvilFloat(7.0), "a subclass of float"),
        (lambda: EvilList([1]), "a subclass of list"),
        (lambda: EvilDict({1: 2}), "a subclass of dict"),
        (lambda: [1, {"k": (EvilInt(3),)}], "a subclass of int"),
        (lambda: numpy.arange(3).view(EvilArray), "a subclass of numpy.ndarray"),
        (lambda: numpy.array(["a"]), "dtype <U1"),
        (lambda: numpy.datetime64("2020-01-01"), "cannot be carried"),
        (lambda: EvilSymbol("x"), "a subclass of sympy.Symbol"),
        (lambda: sympy.Add(EvilSymbol("x"), 1, evaluate=False), "a subclass of sympy.Symbol"),
        (lambda: EvilInteger(5), "subclass of sympy.Integer"),
        (lambda: CustomFunction(sympy.Symbol("x")), "class CustomFunction"),
        (lambda: sympy.Function("g", real=True)(sympy.Symbol("x")), "undefined functions"),
        (lambda: object(), "object, which cannot be carried"),
        (lambda: lambda: 1, "function, which cannot be carried"),
        (lambda: type("Sneaky", (), {}), "cannot be carried"),
    ],
)
def test_encoder_refuses_subclasses_and_unknown_types_without_calling_their_hooks(
    make: Any, needle: str
) -> None:
    value = make()
    CALLED.clear()
    with pytest.raises(ValueCodecError) as caught:
        encode_value(value)
    assert needle in str(caught.value)
    assert "\n" not in str(caught.value)
    assert CALLED == [], f"the encoder called the value's own {CALLED}"


def test_encoder_carries_library_data_not_printer_output() -> None:
    """A tampered tree: an allowlisted class whose args were swapped for a string is refused on decode."""
    tampered = sympy.Add(sympy.Symbol("x"), 1, evaluate=False)
    tampered._args = (PAYLOAD, sympy.Integer(1))
    document = json.loads(json.dumps(encode_value(tampered)))
    with pytest.raises(ValueCodecError, match="not a sympy object"), forbid_code():
        decode_value(document)
    assert not CANARY_PATH.exists()


def test_codec_source_names_no_way_to_run_text() -> None:
    """Belt and braces for the runtime guards: the module never names an evaluator."""
    tree = ast.parse(Path(value_codec.__file__).read_text())
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert not names & {"eval", "exec", "compile", "__import__", "sympify", "parse_expr", "srepr", "lambdify"}
    assert not attributes & {"sympify", "parse_expr", "srepr", "loads", "literal_eval", "lambdify", "S"} - {
        "S"
    }
    assert not imported & {"pickle", "marshal", "shelve", "ast", "dill"}


def test_only_type_tags_not_values_choose_the_decoder() -> None:
    """A str that looks like sympy source decodes to that str."""
    assert decode_value(encode_value("Integer(1) + Symbol('x')")) == "Integer(1) + Symbol('x')"
    assert decode_value(encode_value(PAYLOAD)) == PAYLOAD
