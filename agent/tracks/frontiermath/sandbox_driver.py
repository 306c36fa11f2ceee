"""The program that runs *inside* the sandbox for every submission step.

It is shipped as source (with ``value_codec.py`` ahead of it, see ``driver_program`` in
``submission.py``) and reads one JSON request on stdin. It is also importable on the host so
that tests can exercise the comparison. Standard library at import time; sympy and friends only
when a step needs them.

Two processes, two trust levels:

* ``answer`` runs the submitted code. That process belongs to the submission from its first
  line: it can patch anything here, forge any output, stop its own timer. So nothing it prints
  is trusted. The host reads its reply as untrusted data, checks it against the value schema,
  and enforces the time limit from outside (the sandbox's own wall clock).
* ``verify`` and ``compare`` run only our code, the task's own code and the value rebuilt by the
  allowlist decoder, which never executes anything that came out of the answer sandbox. Their
  reply is the verdict.

Each reply is written to the *original* stdout between lines carrying a per-call nonce; while
other code runs, file descriptor 1 points at stderr. Progress marks on the same channel tell the
host how far a step got when the sandbox had to kill it.
"""

import json
import os
import signal
import sys
import time
import traceback
from fractions import Fraction
from typing import Any

try:  # in the sandbox the bootstrap registers the codec under this name
    import proctor_value_codec as codec
except ImportError:  # on the host (tests)
    from proctor.agent.tracks.frontiermath import value_codec as codec

TRACEBACK_CHARS = 4000
REPR_CHARS = 2000
# A decimal repr of an integer costs time quadratic in its length: past this many bits the
# record says how big it is instead.
REPR_INT_BITS = 20_000

# Progress marks (the host's ``submission.py`` reads the same names).
MARK_RETURNED = "returned"  # answer() returned; its value is being serialised
MARK_REFERENCE_READY = "reference-ready"  # the task's reference/verifier is loaded: the rest is the value's


class TimeLimitReached(BaseException):
    """Raised by the interval timer; a BaseException so `except Exception` cannot swallow it."""


class ReferenceFailed(Exception):
    """The task's own expected answer or verification code failed: not the submission's fault."""


# -- the protocol channel ------------------------------------------------------------------


class Channel:
    """The original stdout, kept aside while fd 1 points at stderr."""

    def __init__(self, nonce: str) -> None:
        self.nonce = nonce
        sys.stdout.flush()
        self.fd = os.dup(1)
        os.dup2(2, 1)

    def _write(self, text: str) -> None:
        block = memoryview(text.encode("utf-8", "backslashreplace"))
        while block:
            block = block[os.write(self.fd, block) :]

    def mark(self, name: str, elapsed_s: float) -> None:
        self._write(f"\n<<<PROCTOR-MARK {self.nonce} {name} {elapsed_s:.3f}>>>\n")

    def reply(self, result: dict[str, Any]) -> None:
        try:
            payload = json.dumps(result)
        except (TypeError, ValueError) as exc:
            payload = json.dumps({"status": "harness_error", "error": f"result not JSON: {exc}"})
        sys.stdout.flush()
        sys.stderr.flush()
        self._write(f"\n<<<PROCTOR-RESULT {self.nonce}>>>\n{payload}\n<<<END {self.nonce}>>>\n")


# -- typed comparison ---------------------------------------------------------------------


def _describe(value: Any) -> str:
    return f"{codec.type_label(value)} {short_repr(value)}"


def short_repr(value: Any, limit: int = 200) -> str:
    """A bounded repr: huge integers are described, never converted to decimal."""
    big = _big_integer_bits(value)
    if big is not None:
        return f"<integer of {big} bits>"
    # A sparse matrix prints every zero: 10**4 x 10**4 with one entry took gigabytes to repr.
    sympy = sys.modules.get("sympy")
    if sympy is not None and isinstance(value, sympy.MatrixBase) and value.rows * value.cols > 10_000:
        return f"<{type(value).__name__} {value.rows}x{value.cols}>"
    try:
        text = repr(value)
    except Exception as exc:  # a decoded value's own printer failed: say so, don't crash
        text = f"<unprintable: {type(exc).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


def _big_integer_bits(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    integer = _exact_integer(value)
    if integer is not None and integer.bit_length() > REPR_INT_BITS:
        return integer.bit_length()
    return None


def _exact_integer(value: Any) -> int | None:
    """The value as a Python int when it is an integer type (never a bool, never a float)."""
    if isinstance(value, bool):
        return None
    if type(value) is int:
        return value
    sympy = sys.modules.get("sympy")
    if sympy is not None and isinstance(value, sympy.Integer):
        return int(value)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.integer):
        return int(value)
    gmpy2 = sys.modules.get("gmpy2")
    if gmpy2 is not None and type(value) is type(gmpy2.mpz(0)):
        return int(value)
    return None


def _exact_rational(value: Any) -> Fraction | None:
    integer = _exact_integer(value)
    if integer is not None:
        return Fraction(integer)
    if type(value) is Fraction:
        return value
    sympy = sys.modules.get("sympy")
    if sympy is not None and isinstance(value, sympy.Rational):
        return Fraction(int(value.p), int(value.q))
    gmpy2 = sys.modules.get("gmpy2")
    if gmpy2 is not None and type(value) is type(gmpy2.mpq(1, 2)):
        return Fraction(int(value.numerator), int(value.denominator))
    return None


def _contains_text(value: Any, depth: int = 0) -> bool:
    """True when a str/bytes sits anywhere inside: such values are never handed to sympify."""
    if isinstance(value, str | bytes | bytearray):
        return True
    if depth > 100:
        return True
    if isinstance(value, dict):
        return any(_contains_text(k, depth + 1) or _contains_text(v, depth + 1) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return any(_contains_text(item, depth + 1) for item in value)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.ndarray):
        return value.dtype.kind in "OSUV" and (
            value.dtype.kind != "O" or any(_contains_text(item, depth + 1) for item in value.flat)
        )
    return False


def _to_sympy(value: Any) -> Any:
    """A sympy form of a *numeric or symbolic* value; raises TypeError for anything textual."""
    import sympy

    if _contains_text(value):
        raise TypeError("text is not a number")
    rational = _exact_rational(value)
    if rational is not None:
        return sympy.Rational(rational.numerator, rational.denominator)
    gmpy2 = sys.modules.get("gmpy2")
    if gmpy2 is not None and type(value) is type(gmpy2.mpfr(0)):
        if not gmpy2.is_finite(value):
            return sympy.nan if gmpy2.is_nan(value) else (sympy.oo if value > 0 else -sympy.oo)
        return sympy.Rational(*(int(part) for part in value.as_integer_ratio()))
    if gmpy2 is not None and type(value) is type(gmpy2.mpc(0)):
        return _to_sympy(value.real) + sympy.I * _to_sympy(value.imag)
    decimal = sys.modules.get("decimal")
    if decimal is not None and type(value) is decimal.Decimal:
        if not value.is_finite():
            return sympy.nan if value.is_nan() else (sympy.oo if value > 0 else -sympy.oo)
        return sympy.Rational(*value.as_integer_ratio())
    return sympy.sympify(value, strict=True)


def compare(candidate: Any, expected: Any, tolerance: float | None = None) -> tuple[bool, str]:
    """Compare by the expected value's type; returns (equal, why)."""
    import sympy

    if tolerance is not None and _is_real_number(expected) and _is_real_number(candidate):
        value, reference = _to_sympy(candidate), _to_sympy(expected)
        # Numerical evaluation would compute an unevaluated integral or sum for the submission.
        pending = _unevaluated_work(value, reference)
        if pending:
            return False, _unevaluated_text(pending)
        difference = abs(sympy.N(exact_numbers(value) - exact_numbers(reference), 50))
        if difference.is_comparable is not True:
            return False, f"the difference {short_repr(difference)} is not a finite real number"
        return bool(
            difference <= tolerance
        ), f"|difference| = {sympy.N(difference, 6)}, tolerance {tolerance}"
    if isinstance(expected, str):
        return _verdict(type(candidate) is str and candidate == expected, candidate, expected)
    if isinstance(expected, bool | sympy.logic.boolalg.BooleanAtom):
        same = isinstance(candidate, bool | sympy.logic.boolalg.BooleanAtom) and bool(candidate) == bool(
            expected
        )
        return _verdict(same, candidate, expected)
    expected_integer = _exact_integer(expected)
    if expected_integer is not None:
        got = _exact_integer(candidate)
        if got is None:
            return False, f"expected an exact integer, got {_describe(candidate)}"
        return _verdict(got == expected_integer, candidate, expected)
    expected_rational = _exact_rational(expected)
    if expected_rational is not None:
        got_rational = _exact_rational(candidate)
        if got_rational is None:
            return False, f"expected an exact rational, got {_describe(candidate)}"
        return _verdict(got_rational == expected_rational, candidate, expected)
    if isinstance(expected, float):
        if not _is_real_number(candidate) or (isinstance(candidate, sympy.Basic) and not candidate.is_Number):
            return False, f"expected a number, got {_describe(candidate)}"
        return _verdict(_to_sympy(candidate) == _to_sympy(expected), candidate, expected)
    if isinstance(expected, list | tuple | sympy.Tuple):
        # A sympy Tuple (what solve and nonlinsolve return) is a sequence like a Python tuple.
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

    if isinstance(value, bool) or _contains_text(value):
        return False
    if _exact_rational(value) is not None or isinstance(value, float):
        return True
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.floating):
        return True
    gmpy2 = sys.modules.get("gmpy2")
    if gmpy2 is not None and type(value) is type(gmpy2.mpfr(0)):
        return True
    mpmath = sys.modules.get("mpmath")
    if mpmath is not None and isinstance(value, mpmath.mpf):
        return True
    decimal = sys.modules.get("decimal")
    if decimal is not None and type(value) is decimal.Decimal:
        return True
    return isinstance(value, sympy.Expr) and value.is_number and value.is_real is not False


def _verdict(same: bool, candidate: Any, expected: Any) -> tuple[bool, str]:
    return same, "equal" if same else f"expected {_describe(expected)}, got {_describe(candidate)}"


def _as_items(candidate: Any) -> list[Any] | None:
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(candidate, numpy.ndarray):
        return list(candidate.tolist()) if candidate.ndim > 0 else None
    if isinstance(candidate, list | tuple):
        return list(candidate)
    sympy = sys.modules.get("sympy")
    if sympy is not None and isinstance(candidate, sympy.Tuple):
        return list(candidate.args)
    return None


def _compare_sequences(candidate: Any, expected: Any, tolerance: float | None) -> tuple[bool, str]:
    items = _as_items(candidate)
    if items is None:
        return False, f"expected a sequence, got {_describe(candidate)}"
    if len(items) != len(expected):
        return False, f"expected {len(expected)} items, got {len(items)}"
    for index, (got, want) in enumerate(zip(items, list(expected), strict=True)):
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
    # Each submitted key answers one expected key only: two expected keys that compare equal
    # (``(x+1)**2`` and ``x**2+2*x+1``) once both matched the first and left a junk key unread.
    unmatched = list(candidate)
    for key, want in expected.items():
        index = next((i for i, k in enumerate(unmatched) if compare(k, key)[0]), None)
        if index is None:
            return False, f"missing key {short_repr(key)}"
        same, why = compare(candidate[unmatched.pop(index)], want, tolerance)
        if not same:
            return False, f"key {short_repr(key)}: {why}"
    return True, "equal"


def _compare_matrices(candidate: Any, expected: Any) -> tuple[bool, str]:
    import sympy

    if _contains_text(candidate):
        return False, f"expected a matrix, got {_describe(candidate)}"
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


def exact_numbers(expr: Any) -> Any:
    """The expression with every sympy Float replaced by the exact rational it stores.

    sympy adds a Float to a Rational at the Float's own precision, which a submission chooses:
    ``4*pi + Float(-16, precision=1)`` minus ``4*pi - 188684/15015`` simplified to 0, so a value
    off by 3.4 was "symbolically equal" (and a numpy float16 brings 11 bits). A Float is an
    exact binary number; compared as that number, nothing is rounded. NaN and infinities are
    not Floats in sympy and stay as they are.
    """
    import sympy

    if not isinstance(expr, sympy.Basic):
        return expr
    floats = expr.atoms(sympy.Float)
    if not floats:
        return expr
    return expr.xreplace({number: sympy.Rational(number) for number in floats})


def _unevaluated_work(value: Any, expected: Any) -> list[str]:
    """The unevaluated calculus in the value that the reference does not have.

    An unevaluated integral, sum or limit would have the verifier do the work answer() was timed
    for (by simplification, or by numerical evaluation against a tolerance): the value must be
    the result, unless the reference itself is unevaluated. Every comparison path that hands a
    sympy value to sympy's own machinery asks this first.
    """
    import sympy

    unevaluated = (sympy.Integral, sympy.Sum, sympy.Product, sympy.Limit, sympy.Derivative)
    value_has = value.has if isinstance(value, sympy.Basic) else (lambda kind: False)
    expected_has = expected.has if isinstance(expected, sympy.Basic) else (lambda kind: False)
    return [kind.__name__ for kind in unevaluated if value_has(kind) and not expected_has(kind)]


def _unevaluated_text(pending: list[str]) -> str:
    return f"the value is unevaluated ({', '.join(pending)}); submit the evaluated result"


def _polynomials_as_expressions(value: Any) -> tuple[Any, str | None]:
    """The value with every ``Poly`` in it replaced by the expression it stands for.

    A ``Poly``'s own ``==`` converts the other side into the Poly's domain first, which the
    submission chooses: ``Poly(sqrt(2) + 6, sqrt(2), modulus=5) == sqrt(2) + 1`` is True (6 is 1
    mod 5), and so is the tuple comparison of any tree holding such a Poly. Over a domain of
    characteristic 0 (ZZ, QQ, RR, ZZ[y]...) the Poly is exactly its expression; over GF(p) it
    only says what holds modulo p, which is not the reference's value: (value, why not) then.
    """
    import sympy

    polys = value.atoms(sympy.Poly) if isinstance(value, sympy.Basic) else set()
    for poly in polys:
        domain = poly.get_domain()
        try:
            characteristic = domain.characteristic()
        except (AttributeError, NotImplementedError):
            characteristic = None
        if characteristic != 0:
            return value, f"a polynomial over {domain} equals the reference only modulo its characteristic"
    if not polys:
        return value, None
    return value.xreplace({poly: poly.as_expr() for poly in polys}), None


def _compare_polys(value: Any, expected: Any) -> tuple[bool, str]:
    """A reference that is itself a Poly: the same class, domain and generators, the same terms."""
    same = (
        type(value) is type(expected)
        and value.get_domain() == expected.get_domain()
        and tuple(value.gens) == tuple(expected.gens)
        and value.as_expr() == expected.as_expr()
    )
    return _verdict(same, value, expected)


def _compare_symbolic(candidate: Any, expected: Any) -> tuple[bool, str]:
    import sympy

    if isinstance(candidate, bool):
        return False, f"expected a sympy object, got {_describe(candidate)}"
    try:
        value = _to_sympy(candidate)
    except (sympy.SympifyError, TypeError, ValueError):
        return False, f"expected a sympy object, got {_describe(candidate)}"
    if isinstance(expected, sympy.Poly):
        return _compare_polys(value, expected)
    # Before anything compares the value (even structurally): no Poly may coerce the reference.
    value, modular = _polynomials_as_expressions(value)
    if modular is not None:
        return False, modular
    expected, _ = _polynomials_as_expressions(expected)
    if value == expected:
        return True, "structurally equal"
    # From here sympy does arithmetic on both sides (set complements compare end points too):
    # with their Floats exact, it cannot round at a precision the submission picked.
    value, expected = exact_numbers(value), exact_numbers(expected)
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
    pending = _unevaluated_work(value, expected)
    if pending:
        return False, _unevaluated_text(pending)
    if value.has(sympy.nan, sympy.zoo) or expected.has(sympy.nan, sympy.zoo):
        return _verdict(False, value, expected)
    if sympy.simplify(value - expected) == 0:
        return True, "symbolically equal (simplified difference is 0)"
    if value.equals(expected) is True:
        return True, "symbolically equal (sympy equals)"
    return _verdict(False, value, expected)


# -- reference answers --------------------------------------------------------------------

# Builtins a reference answer may call; everything else comes from sympy's namespace.
_REFERENCE_BUILTINS = [
    "abs",
    "bool",
    "complex",
    "dict",
    "divmod",
    "float",
    "frozenset",
    "int",
    "len",
    "list",
    "max",
    "min",
    "pow",
    "range",
    "round",
    "set",
    "sorted",
    "str",
    "sum",
    "tuple",
    "zip",
    "True",
    "False",
    "None",
]


def evaluate_reference(source: str) -> Any:
    """The task's expected answer, evaluated with exact arithmetic.

    Every integer literal becomes ``sympy.Integer`` before evaluation, so ``188684/15015`` is the
    exact rational and ``4*pi - 188684/15015`` stays exact (Python's ``/`` would make a float).
    Float literals stay floats; ``contains_float`` lets validation flag them.
    """
    import ast
    import builtins

    import sympy

    tree = ast.parse(source, "<answer>", "eval")
    for node in ast.walk(tree):
        # A reference is a value, not a program: no way to the interpreter's internals.
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise ValueError(f"the expected answer uses the private attribute {node.attr!r}")
        if isinstance(node, ast.Name) and node.id.startswith("__"):
            raise ValueError(f"the expected answer uses the name {node.id!r}")

    class ExactIntegers(ast.NodeTransformer):
        def visit_Constant(self, node: ast.Constant) -> ast.AST:
            if type(node.value) is int:
                call = ast.Call(ast.Name("__proctor_integer__", ast.Load()), [ast.Constant(node.value)], [])
                return ast.copy_location(call, node)
            return node

    exact = ast.fix_missing_locations(ExactIntegers().visit(tree))
    namespace: dict[str, Any] = {
        name: getattr(sympy, name) for name in dir(sympy) if not name.startswith("_")
    }
    namespace.update({name: getattr(builtins, name) for name in _REFERENCE_BUILTINS})
    namespace["Fraction"] = Fraction
    namespace["__builtins__"] = {}
    namespace["__proctor_integer__"] = sympy.Integer
    return eval(compile(exact, "<answer>", "eval"), namespace)


def contains_float(value: Any, depth: int = 0) -> bool:
    """True when an inexact number (float, sympy Float) sits anywhere in the value."""
    if depth > 100:
        return False
    if isinstance(value, float):
        return True
    sympy = sys.modules.get("sympy")
    if sympy is not None and isinstance(value, sympy.Basic):
        return bool(value.atoms(sympy.Float)) if hasattr(value, "atoms") else False
    if isinstance(value, dict):
        return any(contains_float(k, depth + 1) or contains_float(v, depth + 1) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return any(contains_float(item, depth + 1) for item in value)
    return False


# -- sympy's string parser, hardened for the verification sandbox --------------------------

_FORBIDDEN_NAMES = frozenset(
    [
        "eval",
        "exec",
        "compile",
        "__import__",
        "open",
        "getattr",
        "setattr",
        "delattr",
        "globals",
        "locals",
        "vars",
        "input",
        "breakpoint",
        "memoryview",
        "type",
        "object",
        "super",
        "help",
        "exit",
        "quit",
        "print",
        "classmethod",
        "staticmethod",
        "property",
        "callable",
        "dir",
        "id",
        "hash",
        "iter",
        "next",
    ]
)


def harden_sympy_parser() -> None:
    """Make ``sympify``/``parse_expr`` refuse strings that are not plain mathematical expressions.

    sympy parses text by ``eval``. A task's ``verify(a)`` that calls ``sympify(a)`` on a submitted
    string would run the submission's code beside the verdict. Every parse in the verification
    sandbox is therefore checked first: no dunder names or private attributes, none of the
    builtins that reach code or objects, no lambdas, comprehensions or assignments.
    """
    import ast

    from sympy.parsing import sympy_parser

    original = sympy_parser.stringify_expr
    allowed_nodes = (
        ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Call, ast.keyword,
        ast.Name, ast.Load, ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Attribute,
        ast.Subscript, ast.Slice, ast.IfExp, ast.Starred, ast.operator, ast.unaryop, ast.boolop,
        ast.cmpop, ast.expr_context,
    )  # fmt: skip

    def checked(s: str, local_dict: Any, global_dict: Any, transformations: Any) -> str:
        code = original(s, local_dict, global_dict, transformations)
        for node in ast.walk(ast.parse(code, "<sympify>", "eval")):
            if not isinstance(node, allowed_nodes):
                raise ValueError(f"refused to parse: {type(node).__name__} is not mathematics")
            if isinstance(node, ast.Name) and (node.id.startswith("__") or node.id in _FORBIDDEN_NAMES):
                raise ValueError(f"refused to parse: the name {node.id!r}")
            if isinstance(node, ast.Attribute) and (node.attr.startswith("_") or "format" in node.attr):
                raise ValueError(f"refused to parse: the attribute {node.attr!r}")
        return code

    sympy_parser.stringify_expr = checked


# -- the three modes ----------------------------------------------------------------------


def _run_untrusted(source: str, function: str, filename: str, *args: Any) -> Any:
    namespace: dict[str, Any] = {"__name__": "__submission__"}
    exec(compile(source, filename, "exec"), namespace)
    target = namespace.get(function)
    if not callable(target):
        raise NameError(f"the code does not define a function named {function!r}")
    return target(*args)


def _load_function(source: str, function: str, filename: str) -> Any:
    namespace: dict[str, Any] = {"__name__": "__verification__"}
    exec(compile(source, filename, "exec"), namespace)
    target = namespace.get(function)
    if not callable(target):
        raise NameError(f"the code does not define a function named {function!r}")
    return target


def _error_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text if len(text) <= TRACEBACK_CHARS else "...\n" + text[-TRACEBACK_CHARS:]


def run_answer(request: dict[str, Any], channel: Channel) -> dict[str, Any]:
    """Untrusted from the first line of the submission on: the host trusts none of this reply."""
    limit = float(request["time_limit_s"])
    started = time.monotonic()
    signal.signal(signal.SIGALRM, _raise_time_limit)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        value = _run_untrusted(request["code"], "answer", "<submission>")
        channel.mark(MARK_RETURNED, time.monotonic() - started)
        # Part of answer()'s budget, under the same timer: the verifier gets the evaluated value.
        value = evaluated_form(value)
    except TimeLimitReached:
        return {
            "status": "timeout",
            "error": f"answer() and its value's evaluation did not finish within {limit:g} s",
        }
    except BaseException as exc:  # SystemExit and KeyboardInterrupt are errors of answer() too
        return {"status": "error", "error": _error_text(exc)}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    elapsed = time.monotonic() - started
    try:
        encoded = codec.encode_value(value, max_bytes=int(request["max_value_bytes"]))
    except codec.ValueCodecError as exc:
        return {"status": "unserializable", "error": str(exc), "answer_s": elapsed}
    except RecursionError:
        return {"status": "unserializable", "error": "the value is nested too deeply", "answer_s": elapsed}
    return {
        "status": "ok",
        "value": encoded,
        "answer_s": elapsed,
        "encode_s": time.monotonic() - started - elapsed,
    }


def _raise_time_limit(signum: int, frame: Any) -> None:
    raise TimeLimitReached


def _decode_candidate(request: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
    """The value, rebuilt by the allowlist decoder; parsed only now, after the reference is ready."""
    try:
        return codec.decode_value(json.loads(request["value_json"])), None
    except Exception as exc:  # MemoryError too: whatever decoding the value raises is the value's
        return None, {"status": "decode_error", "error": f"{type(exc).__name__}: {exc}"[:TRACEBACK_CHARS]}


# -- exactness, decided by the task's answer kind -----------------------------------------------
#
# A task's verify() is the task author's code, often ``return a == 143``, ``bool(Eq(a, F90))`` or
# ``simplify(a - expected) == 0``. Every such idiom is lax for an inexact value: sympy compares a
# Float with an Integer at the Float's precision (``Float(2**108, precision=1)`` "equals" every
# integer near 2**107), numpy and mpmath convert the integer to their precision first, and
# ``GF(2)(1) == 143`` is True because 143 is odd. So the verdict is decided before verify() (or the
# typed comparison) sees the value: unless the task's answer kind is that kind of value, a value
# with any inexact part anywhere in it is "incorrect", at any magnitude (a float is inexact
# whatever it holds: 42.0 is not the integer 42).
#
# The walk is total: every leaf is matched against a positive list of exact kinds, and a leaf of a
# kind not on it is "unrecognised", which no task asks for. The kind a task wants is a field of the
# task (``answer_kind``, stated or inferred once at load from structured evidence), sent in the
# request; the prose of the answer type is never read here.
ANSWER_KINDS = ("exact", "floating-point", "modular", "p-adic")
_INEXACT_KINDS = {
    "floating-point": "is binary or decimal floating point, not an exact number",
    "modular": "compares modulo its modulus",
    "p-adic": "compares to its p-adic precision",
    "unrecognised": "is of a kind whose exactness is not known",
}
_INEXACT_WALK_LIMIT = 4_000_000  # the codec carries at most 2,000,000 nodes


def _domain_kind(domain: Any) -> str | None:
    """The inexact kind of a polynomial domain, looking through polynomial rings and fraction fields."""
    for _ in range(64):
        if getattr(domain, "is_FiniteField", False):
            return "modular"
        if getattr(domain, "is_RealField", False) or getattr(domain, "is_ComplexField", False):
            return "floating-point"
        if getattr(domain, "is_PolynomialRing", False) or getattr(domain, "is_FractionField", False):
            domain = domain.domain
            continue
        exact = ("is_ZZ", "is_QQ", "is_ZZ_I", "is_QQ_I", "is_GaussianRing", "is_GaussianField")
        return None if any(getattr(domain, flag, False) for flag in exact) else "unrecognised"
    return "unrecognised"


def _sympy_leaf_kind(value: Any, sympy: Any) -> str | None:
    """A sympy object without args: exact only when it is on this list."""
    from sympy.core.numbers import (
        ComplexInfinity,
        ImaginaryUnit,
        Infinity,
        NaN,
        NegativeInfinity,
        NumberSymbol,
    )

    if isinstance(value, sympy.Float):
        return "floating-point"
    exact = (
        sympy.Rational,  # Integer too
        NumberSymbol,  # pi, E, EulerGamma, Catalan, GoldenRatio, TribonacciConstant
        ImaginaryUnit,
        Infinity,
        NegativeInfinity,
        ComplexInfinity,
        NaN,
        sympy.Symbol,  # Dummy too
        sympy.logic.boolalg.BooleanAtom,
    )
    if isinstance(value, exact):
        return None
    singletons = ("EmptySet", "UniversalSet", "Naturals", "Naturals0", "Integers", "Rationals", "Reals")
    if any(value is getattr(sympy.S, name) for name in (*singletons, "Complexes", "IdentityFunction")):
        return None
    return "unrecognised"


def _classify(value: Any) -> tuple[str | None, list[Any]]:
    """(the value's own inexact kind or None, the parts it holds that are walked in turn)."""
    kind = type(value)
    if kind in (bool, int, str, bytes, type(None), range, Fraction):
        return None, []
    if kind in (float, complex):
        return "floating-point", []
    if kind in (list, tuple, set, frozenset):
        return None, list(value)
    if kind is dict:
        return None, [part for item in value.items() for part in item]
    decimal = sys.modules.get("decimal")
    if decimal is not None and kind is decimal.Decimal:
        return "floating-point", []
    galois = sys.modules.get("galois")
    if galois is not None and isinstance(value, galois.FieldArray):
        return "modular", []
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.ndarray | numpy.generic):
        dtype_kind = value.dtype.kind
        if dtype_kind == "O":
            return None, list(value.flat)
        if dtype_kind in "biu":
            return None, []
        return ("floating-point" if dtype_kind in "fc" else "unrecognised"), []
    sympy = sys.modules.get("sympy")
    if sympy is not None:
        from sympy.polys.domains.modularinteger import ModularInteger

        if isinstance(value, ModularInteger):
            return "modular", []
        if isinstance(value, sympy.Poly):
            return _domain_kind(value.domain), list(value.gens)
        if isinstance(value, sympy.MatrixBase):
            # Its non-zero entries only: a sparse matrix may be 10**6 x 10**6 with one entry, and
            # a zero entry is an exact Integer.
            return None, list(value.values())
        if isinstance(value, sympy.Basic):
            return (None, list(value.args)) if value.args else (_sympy_leaf_kind(value, sympy), [])
    mpmath = sys.modules.get("mpmath")
    if mpmath is not None and isinstance(value, mpmath.mpf | mpmath.mpc | mpmath.matrix):
        return "floating-point", []
    gmpy2 = sys.modules.get("gmpy2")
    if gmpy2 is not None:
        if kind in (type(gmpy2.mpz(0)), type(gmpy2.mpq(0, 1))):
            return None, []
        if kind in (type(gmpy2.mpfr(0)), type(gmpy2.mpc(0))):
            return "floating-point", []
    pyadic = sys.modules.get("pyadic")
    if pyadic is not None:
        if isinstance(value, pyadic.ModP):
            return "modular", []
        if isinstance(value, pyadic.PAdic):
            return "p-adic", []
        if kind is pyadic.GaussianRational:
            return None, [value.real, value.imag]
    return "unrecognised", []


def inexact_kinds(value: Any) -> list[str]:
    """The kinds of inexact value anywhere in ``value`` (see _INEXACT_KINDS), sorted."""
    found: set[str] = set()
    pending, seen, visited = [value], set(), 0
    while pending:
        if visited >= _INEXACT_WALK_LIMIT:  # more than the codec carries: not examined, not credited
            found.add("unrecognised")
            break
        item = pending.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        visited += 1
        kind, parts = _classify(item)
        if kind is not None:
            found.add(kind)
        pending.extend(parts)
    return sorted(found)


def wanted_inexact_kind(answer_kind: Any) -> str | None:
    """The one inexact kind a task's answer kind admits; None for "exact" and anything unknown."""
    return answer_kind if answer_kind in ANSWER_KINDS and answer_kind != "exact" else None


def unasked_inexact_kinds(value: Any, answer_kind: Any) -> list[str]:
    """The inexact kinds in ``value`` that the task's answer kind does not admit."""
    admitted = wanted_inexact_kind(answer_kind)
    return [kind for kind in inexact_kinds(value) if kind != admitted]


def exactness_refusal(value: Any, answer_kind: Any) -> str | None:
    """Why the value is refused before verify()/the comparison sees it, or None."""
    unasked = unasked_inexact_kinds(value, answer_kind)
    if not unasked:
        return None
    reasons = "; ".join(f"a {kind} value {_INEXACT_KINDS[kind]}" for kind in unasked)
    wanted = answer_kind if answer_kind in ANSWER_KINDS else "exact"
    return f"not given to verify(): {reasons}, and the task's answer kind is {wanted}"


# -- evaluated form: answer() does the work, within its own budget ----------------------------
#
# A value is its evaluated form: every sympy node is what its class builds from its args with
# evaluation on. A node that evaluation would change (built with evaluate=False, a factorial or
# primenu of a number, two numbers in one Add) would have the verifier do answer()'s work:
# ``simplify`` computed ``factorial(200000, evaluate=False)``, and an unevaluated ``primenu`` of a
# 38-digit semiprime had the verifier factor it. So the answer sandbox brings the returned value to
# evaluated form itself (``evaluated_form``), under answer()'s own timer and the sandbox's limit
# from outside: work that does not finish there is answer()'s timeout. The verification sandbox
# receives that value and only confirms it (``unevaluated_refusal``): each node, rebuilt from its
# args, must come back the same. That confirmation has no timer of its own: a node that comes back
# different is refused, and one whose rebuilding does not finish is killed with the verification
# (``incorrect``, the value was touched), so the verdict on a value never depends on the clock or
# the machine's load. An honest value costs the verifier what evaluating it cost answer().
#
# Sympy's held operations (Integral, Sum, Product, Limit, Derivative, UnevaluatedExpr) are values
# that evaluation keeps: they are sympy's way of saying "not computed". One in the value is refused
# unless the reference holds the same class (compare mode).
_HELD = ("Integral", "Sum", "Product", "Limit", "Derivative", "UnevaluatedExpr")


def _held_classes(sympy: Any) -> tuple[Any, ...]:
    return tuple(getattr(sympy, name) for name in _HELD)


def _sympy_nodes(value: Any) -> list[Any]:
    """The sympy nodes with args in ``value``, children before parents (matrices and Polys opened)."""
    sympy = sys.modules.get("sympy")
    if sympy is None:
        return []
    order: list[Any] = []
    seen: set[int] = set()
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, done = stack.pop()
        if done:
            order.append(item)
            continue
        if id(item) in seen:
            continue
        seen.add(id(item))
        _, parts = _classify(item)
        if isinstance(item, sympy.Poly):
            parts = parts + list(item.coeffs())
        own = isinstance(item, sympy.Basic) and not isinstance(item, sympy.Poly | sympy.MatrixBase)
        if own and item.args:
            stack.append((item, True))
        stack.extend((part, False) for part in parts)
    return order


def _certainly_changed(node: Any, sympy: Any) -> bool:
    """Forms that evaluation always changes, decided without computing (Pow(3, 10**12) never is).

    Only certainties: two rationals in one Add/Mul are combined; a power of rationals with an
    integer exponent, an exponent past 1 in size (2**(3/2) is 2*sqrt(2)), or a base of 0 or 1 is
    computed. Anything else (a principal root such as (-1)**(1/3) among them) is rebuilt.
    """
    numbers = [isinstance(arg, sympy.Rational) for arg in node.args]
    if isinstance(node, sympy.Add | sympy.Mul) and sum(numbers) > 1:
        return True
    if isinstance(node, sympy.Pow) and numbers[0] and numbers[1]:
        base, exponent = node.args
        return bool(exponent.is_Integer or abs(exponent.p) > exponent.q or base in (0, 1))
    return False


def _same_node(node: Any, rebuilt: Any) -> bool:
    if type(rebuilt) is not type(node):
        return False
    if rebuilt.args == node.args:
        return True
    # Evaluation orders the terms of a commutative sum or product; another order is the same form.
    if node.is_commutative and type(node).__name__ in ("Add", "Mul"):
        from collections import Counter

        return Counter(rebuilt.args) == Counter(node.args)
    return False


def _rebuilt(node: Any, args: tuple[Any, ...]) -> Any:
    """The node's class applied to ``args`` with evaluation on; the node itself if it cannot be.

    A class that does not take its own args back (some need keywords) is not one sympy would
    compute from them. Running out of memory or stack is not "cannot": it is raised.
    """
    try:
        return node.func(*args)
    except (MemoryError, RecursionError, TimeLimitReached):
        raise
    except Exception:
        return node


def _unevaluated_node(nodes: list[Any], allowed: frozenset[str]) -> str | None:
    """The first node (children first) that evaluation would change, described; or None."""
    import sympy

    held = _held_classes(sympy)
    for node in nodes:
        name = type(node).__name__
        if isinstance(node, held):
            if name in allowed:
                continue
            return f"{short_repr(node)} is an unevaluated {name}, which the verifier would have to compute"
        if _certainly_changed(node, sympy):
            return f"{short_repr(node)} is changed by evaluation"
        if not _same_node(node, _rebuilt(node, node.args)):
            return f"{short_repr(node)} is changed by evaluation"
    return None


def _reference_forms(reference: Any) -> frozenset[str]:
    """The held classes the reference itself uses: a value may use the same ones."""
    sympy = sys.modules.get("sympy")
    if sympy is None:
        return frozenset()
    held = _held_classes(sympy)
    return frozenset(type(node).__name__ for node in _sympy_nodes(reference) if isinstance(node, held))


def unevaluated_refusal(value: Any, allowed: frozenset[str] = frozenset()) -> str | None:
    """Why the value is not in evaluated form, or None. No timer: see the section's comment."""
    nodes = _sympy_nodes(value)
    if not nodes:
        return None
    try:
        found = _unevaluated_node(nodes, allowed)
    except (MemoryError, RecursionError):
        found = "evaluating it ran out of memory or stack"
    if found is None:
        return None
    return (
        f"the value is not in evaluated form: {found}; "
        "answer() must return the result, not work for the verifier"
    )


def evaluated_form(value: Any) -> Any:
    """``value`` with every sympy node rebuilt, children first, from evaluated args (answer side).

    Containers the codec carries are rebuilt around their evaluated items (lists, tuples, sets,
    dicts, numpy object arrays, sympy matrices); Polys, numbers and other leaves stay as they are.
    Walked with an explicit stack: a deep expression must not hit the recursion limit here.
    """
    sympy = sys.modules.get("sympy")
    numpy = sys.modules.get("numpy")
    done: dict[int, Any] = {}
    keep_alive: list[Any] = []  # ids stay unique only while their objects live
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, ready = stack.pop()
        if not ready and id(item) in done:
            continue
        parts = _evaluation_parts(item, sympy, numpy)
        if not ready:
            keep_alive.append(item)
            keep_alive.extend(parts)
            stack.append((item, True))
            stack.extend((part, False) for part in parts if id(part) not in done)
            continue
        done[id(item)] = _reassembled(item, [done[id(part)] for part in parts], sympy, numpy)
    return done[id(value)]


def _evaluation_parts(item: Any, sympy: Any, numpy: Any) -> list[Any]:
    kind = type(item)
    if kind in (list, tuple, set, frozenset):
        return list(item)
    if kind is dict:
        return [part for pair in item.items() for part in pair]
    if numpy is not None and kind is numpy.ndarray and item.dtype.kind == "O":
        return list(item.flat)
    if sympy is not None:
        if isinstance(item, sympy.MatrixBase):
            return list(item.todok().values())
        if isinstance(item, sympy.Basic) and not isinstance(item, sympy.Poly) and item.args:
            return list(item.args)
    return []


def _reassembled(item: Any, parts: list[Any], sympy: Any, numpy: Any) -> Any:
    kind = type(item)
    if kind in (list, tuple, set, frozenset):
        return kind(parts)
    if kind is dict:
        return dict(zip(parts[0::2], parts[1::2], strict=True))
    if numpy is not None and kind is numpy.ndarray and item.dtype.kind == "O":
        rebuilt = numpy.empty(item.shape, dtype=object)
        for index, part in enumerate(parts):
            rebuilt.flat[index] = part
        return rebuilt
    if sympy is not None and isinstance(item, sympy.MatrixBase):
        entries = dict(zip(item.todok().keys(), parts, strict=True))
        if isinstance(item, sympy.SparseMatrix | sympy.ImmutableSparseMatrix):
            return kind(item.rows, item.cols, entries)
        dense = [
            [entries.get((row, col), sympy.S.Zero) for col in range(item.cols)] for row in range(item.rows)
        ]
        return kind(dense) if item.rows and item.cols else item
    if sympy is not None and isinstance(item, sympy.Basic) and parts:
        return _rebuilt(item, tuple(parts))
    return item


def candidate_refusal(value: Any, answer_kind: Any, reference: Any = None) -> str | None:
    """The one gate before verify()/compare: exactness by answer kind, then evaluated form."""
    refusal = exactness_refusal(value, answer_kind)
    if refusal is None:
        refusal = unevaluated_refusal(value, _reference_forms(reference))
    return refusal


def _refuse_candidate(
    request: dict[str, Any], candidate: Any, reference: Any = None
) -> dict[str, Any] | None:
    """The verdict "incorrect" with its reason when the gate refuses the value, else None."""
    try:
        refusal = candidate_refusal(candidate, request.get("answer_kind"), reference)
    except Exception as exc:
        return {"status": "candidate_error", "error": "examining the value failed:\n" + _error_text(exc)}
    if refusal is None:
        return None
    return {"status": "ok", "verdict": False, "detail": refusal, **_candidate_summary(candidate)}


def run_verify(request: dict[str, Any], channel: Channel) -> dict[str, Any]:
    started = time.monotonic()
    harden_sympy_parser()
    try:
        verify = _load_function(request["verification_code"], "verify", "<verification_code>")
    except BaseException as exc:
        return {
            "status": "reference_error",
            "error": "the task's verification code failed:\n" + _error_text(exc),
        }
    channel.mark(MARK_REFERENCE_READY, time.monotonic() - started)
    candidate, failure = _decode_candidate(request)
    if failure is not None:
        return failure
    refused = _refuse_candidate(request, candidate)
    if refused is not None:
        return refused
    try:
        verdict = verify(candidate)
    except BaseException as exc:
        return {"status": "candidate_error", "error": "verify() raised:\n" + _error_text(exc)}
    if not _is_boolean(verdict):
        return {"status": "candidate_error", "error": f"verify() returned {_describe(verdict)}, not a bool"}
    return {"status": "ok", "verdict": bool(verdict), **_candidate_summary(candidate)}


def _candidate_summary(candidate: Any) -> dict[str, str]:
    try:
        label = codec.type_label(candidate)
    except Exception as exc:
        label = f"<unknown: {type(exc).__name__}>"
    return {"value_type": label, "value_repr": short_repr(candidate, REPR_CHARS)}


def _is_boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.bool_):
        return True
    sympy = sys.modules.get("sympy")
    return sympy is not None and isinstance(value, sympy.logic.boolalg.BooleanAtom)


def run_compare(request: dict[str, Any], channel: Channel) -> dict[str, Any]:
    started = time.monotonic()
    harden_sympy_parser()
    try:
        # The reference is held to the same form as the value: factor(2*x + 4) is 2*x + 4.
        expected = evaluated_form(evaluate_reference(request["expected"]))
    except BaseException as exc:
        return {
            "status": "reference_error",
            "error": "the task's expected answer failed to evaluate:\n" + _error_text(exc),
        }
    inexact = contains_float(expected)
    channel.mark(MARK_REFERENCE_READY, time.monotonic() - started)
    candidate, failure = _decode_candidate(request)
    if failure is not None:
        return failure
    refused = _refuse_candidate(request, candidate, expected)
    if refused is not None:
        return {**refused, "expected_type": codec.type_label(expected), "reference_inexact": inexact}
    try:
        same, why = compare(candidate, expected, request.get("tolerance"))
    except BaseException as exc:
        return {"status": "candidate_error", "error": "comparison failed:\n" + _error_text(exc)}
    return {
        "status": "ok",
        "verdict": bool(same),
        "detail": why,
        "expected_type": codec.type_label(expected),
        "reference_inexact": inexact,
        **_candidate_summary(candidate),
    }


MODES = {"answer": run_answer, "verify": run_verify, "compare": run_compare}


def main() -> None:
    # The first line is the request; what follows (verification only) is the value's JSON, which
    # is parsed after the task's reference is ready, so a failure before that is never the value's.
    header, _, value_json = sys.stdin.read().partition("\n")
    request = json.loads(header)
    request["value_json"] = value_json
    channel = Channel(str(request.pop("nonce")))
    # Huge integers are legitimate answers; lift the int<->str digit limit for them.
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    try:
        result = MODES[request["mode"]](request, channel)
    except BaseException as exc:
        result = {"status": "harness_error", "error": _error_text(exc)}
    channel.reply(result)
    # Threads or children left behind must not keep the call alive.
    os._exit(0)
