"""The program that runs *inside* the sandbox for every submission step.

This file is sent as source to ``Sandbox.exec`` with a JSON request on stdin; it must stay
standalone (standard library at import time; sympy/numpy only when a value needs them).
It is also importable on the host so that tests can exercise encoding and comparison.

Modes:

* ``answer``  - run the submitted code and ``answer()``, serialise the value with its type;
* ``verify``  - rebuild the value, run the task's ``verify(a)``;
* ``compare`` - rebuild the value, evaluate the task's expected answer, compare by type.

The result is written to the *original* stdout between lines carrying a per-call nonce;
while untrusted code runs, file descriptor 1 points at stderr, so whatever it prints can
neither corrupt nor fake the protocol (verification happens in a separate sandbox anyway).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from fractions import Fraction
from typing import Any

MAX_DEPTH = 64
_CONTAINERS = (("list", list), ("tuple", tuple), ("frozenset", frozenset), ("set", set))
TRACEBACK_CHARS = 4000


class Unserializable(Exception):
    """The value has a type the protocol cannot carry."""


class TimeLimitReached(BaseException):
    """Raised by the interval timer; a BaseException so `except Exception` cannot swallow it."""


# -- values <-> tagged JSON ---------------------------------------------------------------


def type_name(value: Any) -> str:
    cls = type(value)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def encode(value: Any, depth: int = 0) -> dict[str, Any]:
    """A JSON-safe, type-tagged form of ``value``; raises Unserializable for other types."""
    if depth > MAX_DEPTH:
        raise Unserializable("the value is nested too deeply")
    if value is None:
        return {"t": "none"}
    if isinstance(value, bool):
        return {"t": "bool", "v": value}
    sympy = sys.modules.get("sympy")
    if sympy is not None and isinstance(value, sympy.Basic | sympy.MatrixBase):
        return {"t": "sympy", "v": sympy.srepr(value), "class": type(value).__name__}
    if isinstance(value, int):
        return {"t": "int", "v": str(int(value))}
    if isinstance(value, float):
        return {"t": "float", "v": repr(float(value))}
    if isinstance(value, complex):
        return {"t": "complex", "v": [repr(float(value.real)), repr(float(value.imag))]}
    if isinstance(value, str):
        return {"t": "str", "v": value}
    if isinstance(value, Fraction):
        return {"t": "fraction", "v": [str(value.numerator), str(value.denominator)]}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        kind = next(name for name, cls in _CONTAINERS if isinstance(value, cls))
        return {"t": kind, "v": [encode(item, depth + 1) for item in items]}
    if isinstance(value, dict):
        return {"t": "dict", "v": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    return _encode_library_value(value, depth)


def _encode_library_value(value: Any, depth: int) -> dict[str, Any]:
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        if isinstance(value, numpy.ndarray):
            # galois FieldArray is an ndarray subclass; its elements become plain ints.
            return {"t": "ndarray", "v": encode(value.tolist(), depth + 1), "dtype": str(value.dtype)}
        if isinstance(value, numpy.bool_):
            return {"t": "bool", "v": bool(value)}
        if isinstance(value, numpy.integer):
            return {"t": "int", "v": str(int(value))}
        if isinstance(value, numpy.floating):
            return {"t": "float", "v": repr(float(value))}
        if isinstance(value, numpy.complexfloating):
            return {"t": "complex", "v": [repr(float(value.real)), repr(float(value.imag))]}
    gmpy2 = sys.modules.get("gmpy2")
    if gmpy2 is not None:
        if isinstance(value, type(gmpy2.mpq(1, 2))):
            return {"t": "fraction", "v": [str(int(value.numerator)), str(int(value.denominator))]}
        if isinstance(value, type(gmpy2.mpfr(1))):
            return {
                "t": "bigfloat",
                "v": format(value, f".{int(value.precision * 0.302) + 2}g"),
                "prec": int(value.precision),
            }
    mpmath = sys.modules.get("mpmath")
    if mpmath is not None and isinstance(value, mpmath.mpf):
        prec = int(mpmath.mp.prec)
        return {"t": "bigfloat", "v": mpmath.nstr(value, int(prec * 0.302) + 2), "prec": prec}
    if hasattr(type(value), "__index__"):
        # Other integer types (gmpy2.mpz, galois field scalars) carry an exact integer.
        import operator

        return {"t": "int", "v": str(operator.index(value))}
    raise Unserializable(f"cannot serialise a value of type {type_name(value)}")


def decode(tagged: dict[str, Any]) -> Any:
    """Inverse of :func:`encode`; sympy values are rebuilt with sympy's own namespace."""
    tag = tagged["t"]
    value: Any = tagged.get("v")
    if tag == "none":
        return None
    if tag == "bool":
        return bool(value)
    if tag == "int":
        return int(value)
    if tag == "float":
        return float(value)
    if tag == "complex":
        return complex(float(value[0]), float(value[1]))
    if tag == "str":
        return str(value)
    if tag == "fraction":
        return Fraction(int(value[0]), int(value[1]))
    if tag in ("list", "tuple", "set", "frozenset"):
        items = [decode(item) for item in value]
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    if tag == "dict":
        return {decode(k): decode(v) for k, v in value}
    if tag == "sympy":
        return eval(value, sympy_namespace())
    if tag == "bigfloat":
        import sympy

        return sympy.Float(value, dps=max(15, int(tagged.get("prec", 53) * 0.302)))
    if tag == "ndarray":
        items = decode(value)
        try:
            import numpy
        except ImportError:
            return items
        return numpy.array(items, dtype=object if tagged.get("dtype") == "object" else None)
    raise ValueError(f"unknown value tag {tag!r}")


def sympy_namespace() -> dict[str, Any]:
    import sympy

    namespace: dict[str, Any] = {
        name: getattr(sympy, name) for name in dir(sympy) if not name.startswith("_")
    }
    namespace["Fraction"] = Fraction
    return namespace


# -- typed comparison ---------------------------------------------------------------------


def _is_integer(value: Any) -> bool:
    import sympy

    if isinstance(value, bool):
        return False
    return isinstance(value, (int, sympy.Integer))


def _is_exact_rational(value: Any) -> bool:
    import sympy

    return _is_integer(value) or isinstance(value, Fraction | sympy.Rational)


def _to_sympy(value: Any) -> Any:
    import sympy

    if isinstance(value, Fraction):
        return sympy.Rational(value.numerator, value.denominator)
    return sympy.sympify(value, strict=True)


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type_name(value)} {text[:200]}{'...' if len(text) > 200 else ''}"


def compare(candidate: Any, expected: Any, tolerance: float | None = None) -> tuple[bool, str]:
    """Compare by the expected value's type; returns (equal, why)."""
    import sympy

    if tolerance is not None and _is_real_number(expected) and _is_real_number(candidate):
        difference = abs(sympy.N(_to_sympy(candidate) - _to_sympy(expected), 50))
        return bool(
            difference <= tolerance
        ), f"|difference| = {sympy.N(difference, 6)}, tolerance {tolerance}"
    if isinstance(expected, str):
        return _verdict(isinstance(candidate, str) and candidate == expected, candidate, expected)
    if isinstance(expected, (bool, sympy.logic.boolalg.BooleanAtom)):
        same = isinstance(candidate, bool | sympy.logic.boolalg.BooleanAtom) and bool(candidate) == bool(
            expected
        )
        return _verdict(same, candidate, expected)
    if _is_integer(expected):
        if not _is_integer(candidate):
            return False, f"expected an exact integer, got {_describe(candidate)}"
        return _verdict(int(candidate) == int(expected), candidate, expected)
    if _is_exact_rational(expected):
        if not _is_exact_rational(candidate):
            return False, f"expected an exact rational, got {_describe(candidate)}"
        return _verdict(_to_sympy(candidate) == _to_sympy(expected), candidate, expected)
    if isinstance(expected, float):
        if isinstance(candidate, bool) or not isinstance(candidate, int | float | Fraction | sympy.Number):
            return False, f"expected a number, got {_describe(candidate)}"
        return _verdict(float(candidate) == expected, candidate, expected)
    if isinstance(expected, list | tuple):
        return _compare_sequences(candidate, expected, tolerance)
    if isinstance(expected, set | frozenset | sympy.FiniteSet) and not isinstance(candidate, str):
        return _compare_sets(candidate, expected, tolerance)
    if isinstance(expected, dict):
        return _compare_dicts(candidate, expected, tolerance)
    if isinstance(expected, sympy.MatrixBase):
        return _compare_matrices(candidate, expected)
    if isinstance(expected, sympy.Basic):
        return _compare_symbolic(candidate, expected)
    return _verdict(type(candidate) is type(expected) and candidate == expected, candidate, expected)


def _is_real_number(value: Any) -> bool:
    import sympy

    if isinstance(value, bool):
        return False
    if isinstance(value, int | float | Fraction):
        return True
    return isinstance(value, sympy.Expr) and value.is_number and value.is_real is not False


def _verdict(same: bool, candidate: Any, expected: Any) -> tuple[bool, str]:
    return same, "equal" if same else f"expected {_describe(expected)}, got {_describe(candidate)}"


def _as_items(candidate: Any) -> list[Any] | None:
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(candidate, numpy.ndarray):
        return list(candidate.tolist())
    if isinstance(candidate, list | tuple):
        return list(candidate)
    return None


def _compare_sequences(candidate: Any, expected: Any, tolerance: float | None) -> tuple[bool, str]:
    items = _as_items(candidate)
    if items is None:
        return False, f"expected a sequence, got {_describe(candidate)}"
    if len(items) != len(expected):
        return False, f"expected {len(expected)} items, got {len(items)}"
    for index, (got, want) in enumerate(zip(items, expected, strict=True)):
        same, why = compare(got, want, tolerance)
        if not same:
            return False, f"item {index}: {why}"
    return True, "equal"


def _compare_sets(candidate: Any, expected: Any, tolerance: float | None) -> tuple[bool, str]:
    import sympy

    if isinstance(candidate, set | frozenset | sympy.FiniteSet | list | tuple):
        pool = list(candidate)
    else:
        return False, f"expected a set, got {_describe(candidate)}"
    wanted = list(expected)
    if len(pool) != len(wanted):
        return False, f"expected {len(wanted)} elements, got {len(pool)}"
    for want in wanted:
        match = next((i for i, got in enumerate(pool) if compare(got, want, tolerance)[0]), None)
        if match is None:
            return False, f"no submitted element equals {_describe(want)}"
        pool.pop(match)
    return True, "equal"


def _compare_dicts(candidate: Any, expected: dict[Any, Any], tolerance: float | None) -> tuple[bool, str]:
    if not isinstance(candidate, dict):
        return False, f"expected a dict, got {_describe(candidate)}"
    if len(candidate) != len(expected):
        return False, f"expected {len(expected)} keys, got {len(candidate)}"
    for key, want in expected.items():
        got_key = next((k for k in candidate if compare(k, key)[0]), None)
        if got_key is None:
            return False, f"missing key {key!r}"
        same, why = compare(candidate[got_key], want, tolerance)
        if not same:
            return False, f"key {key!r}: {why}"
    return True, "equal"


def _compare_matrices(candidate: Any, expected: Any) -> tuple[bool, str]:
    import sympy

    try:
        matrix = sympy.Matrix(candidate)
    except Exception:
        return False, f"expected a matrix, got {_describe(candidate)}"
    if matrix.shape != expected.shape:
        return False, f"expected shape {expected.shape}, got {matrix.shape}"
    for got, want in zip(matrix, expected, strict=True):
        same, why = _compare_symbolic(got, want)
        if not same:
            return False, why
    return True, "equal"


def _compare_symbolic(candidate: Any, expected: Any) -> tuple[bool, str]:
    import sympy

    if isinstance(candidate, str | bool):
        return False, f"expected a sympy object, got {_describe(candidate)}"
    try:
        value = _to_sympy(candidate)
    except (sympy.SympifyError, TypeError, ValueError):
        return False, f"expected a sympy object, got {_describe(candidate)}"
    if value == expected:
        return True, "structurally equal"
    if isinstance(expected, sympy.Set) or isinstance(value, sympy.Set):
        same = (
            isinstance(value, sympy.Set)
            and isinstance(expected, sympy.Set)
            and (
                sympy.Complement(value, expected) == sympy.S.EmptySet
                and sympy.Complement(expected, value) == sympy.S.EmptySet
            )
        )
        return _verdict(bool(same), value, expected)
    if not (isinstance(value, sympy.Expr) and isinstance(expected, sympy.Expr)):
        return _verdict(False, value, expected)
    if sympy.simplify(value - expected) == 0:
        return True, "symbolically equal (simplified difference is 0)"
    if value.equals(expected) is True:
        return True, "symbolically equal (sympy equals)"
    return _verdict(False, value, expected)


# -- the three modes ----------------------------------------------------------------------


def _run_untrusted(source: str, function: str, filename: str, *args: Any) -> Any:
    namespace: dict[str, Any] = {"__name__": "__submission__"}
    exec(compile(source, filename, "exec"), namespace)
    target = namespace.get(function)
    if not callable(target):
        raise NameError(f"the code does not define a function named {function!r}")
    return target(*args)


def _error_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text if len(text) <= TRACEBACK_CHARS else "...\n" + text[-TRACEBACK_CHARS:]


def run_answer(request: dict[str, Any]) -> dict[str, Any]:
    limit = float(request["time_limit_s"])
    started = time.monotonic()
    signal.signal(signal.SIGALRM, _raise_time_limit)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        value = _run_untrusted(request["code"], "answer", "<submission>")
    except TimeLimitReached:
        return {"status": "timeout", "error": f"answer() did not return within {limit:g} s"}
    except BaseException as exc:  # SystemExit and KeyboardInterrupt are errors of answer() too
        return {"status": "error", "error": _error_text(exc)}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    elapsed = time.monotonic() - started
    try:
        tagged = encode(value)
    except Unserializable as exc:
        return {"status": "unserializable", "error": str(exc), "type": type_name(value), "elapsed_s": elapsed}
    return {"status": "ok", "value": tagged, "type": type_name(value), "elapsed_s": elapsed}


def _raise_time_limit(signum: int, frame: Any) -> None:
    raise TimeLimitReached


def run_verify(request: dict[str, Any]) -> dict[str, Any]:
    candidate = decode(request["value"])
    try:
        verdict = _run_untrusted(request["verification_code"], "verify", "<verification_code>", candidate)
    except BaseException as exc:
        return {"status": "error", "error": _error_text(exc)}
    if not _is_boolean(verdict):
        return {"status": "error", "error": f"verify() returned {_describe(verdict)}, not a bool"}
    return {"status": "ok", "verdict": bool(verdict)}


def _is_boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.bool_):
        return True
    sympy = sys.modules.get("sympy")
    return sympy is not None and isinstance(value, sympy.logic.boolalg.BooleanAtom)


def run_compare(request: dict[str, Any]) -> dict[str, Any]:
    candidate = decode(request["value"])
    try:
        expected = eval(compile(request["expected"], "<answer>", "eval"), sympy_namespace())
    except BaseException as exc:
        return {
            "status": "error",
            "error": "the task's expected answer failed to evaluate:\n" + _error_text(exc),
        }
    try:
        same, why = compare(candidate, expected, request.get("tolerance"))
    except BaseException as exc:
        return {"status": "error", "error": "comparison failed:\n" + _error_text(exc)}
    return {"status": "ok", "verdict": same, "detail": why, "expected_type": type_name(expected)}


MODES = {"answer": run_answer, "verify": run_verify, "compare": run_compare}


def main() -> None:
    request = json.loads(sys.stdin.read())
    nonce = str(request["nonce"])
    # Huge integers are legitimate answers; lift the int<->str digit limit for them.
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    protocol_fd = os.dup(1)
    sys.stdout.flush()
    os.dup2(2, 1)  # from here on, anything printed lands on stderr
    try:
        result = MODES[request["mode"]](request)
    except BaseException as exc:
        result = {"status": "harness_error", "error": _error_text(exc)}
    try:
        payload = json.dumps(result)
    except (TypeError, ValueError) as exc:
        payload = json.dumps({"status": "harness_error", "error": f"result not JSON: {exc}"})
    sys.stdout.flush()
    sys.stderr.flush()
    block = memoryview(f"\n<<<PROCTOR-RESULT {nonce}>>>\n{payload}\n<<<END {nonce}>>>\n".encode())
    while block:
        block = block[os.write(protocol_fd, block) :]
    # Threads or children the submission left behind must not keep the call alive.
    os._exit(0)


if __name__ == "__main__":
    main()
