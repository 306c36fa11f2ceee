"""Issue 40's cases through the real submission path (docker): each gets the verdict an honest
reader expects. Honest exact answers that were refused are ``correct``; wrong answers that a
careless ``verify()`` (``a == N``) credited, because the answer type's prose was read as
substrings, are ``incorrect``. Held-out variants use other values and idioms than the issue's.
The in-process properties over many more values are test_honest_exact_oracle.py and
test_verdict_determinism.py; docs/frontiermath.md, "Exact means exact".
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from proctor.agent.inputs.config import SandboxConfig
from proctor.agent.results.records import Outcome
from proctor.agent.tracks.frontiermath.submission import SubmissionResult, SubmissionRunner
from proctor.agent.tracks.frontiermath.tasks import FrontierMathTask
from proctor.sandbox import Sandbox, open_sandbox
from tests.frontiermath.support import RecordingEvents

# One sandbox for the module: its tests share the event loop it was opened on.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

# Room for sympy's import and a few thousand digits on a loaded machine.
ROOMY = SandboxConfig(answer_timeout_s=30, verify_timeout_s=60)
PRELUDE = (
    "import numpy\nimport sympy\nimport pyadic\nfrom sympy.polys.domains import GF\n\n"
    "def answer():\n    x = sympy.Symbol('x')\n    "
)
SIMPLIFY = (
    "import sympy\n\ndef verify(a):\n    x = sympy.Symbol('x')\n    return sympy.simplify(a - (REF)) == 0\n"
)
# A non-square of 2,501 digits: its square root took about 0.9 s to evaluate here, past the old
# per-node timer of 0.25 s on any machine, and near it on a fast one.
BIG = 2 * 10**2500 + 3


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox() -> AsyncIterator[Sandbox]:
    opened = await open_sandbox("docker", pool_size=2)
    try:
        yield opened
    finally:
        await opened.aclose()


def task(task_id: str, **fields: str | float) -> FrontierMathTask:
    return FrontierMathTask.model_validate(
        {"id": task_id, "question": "q", "answer_type": "sympy expression", **fields}
    )


async def judge(sandbox: Sandbox, body: str, target: FrontierMathTask) -> SubmissionResult:
    runner = SubmissionRunner(sandbox, ROOMY, RecordingEvents())
    return await runner.evaluate(PRELUDE + body + "\n", target)


# (answer()'s body, the task's fields): each value equals the reference.
HONEST = {
    "factor, linear, compared": ("return sympy.factor(6*x + 12)", {"answer": "6*Symbol('x') + 12"}),
    "factor_terms, compared": ("return sympy.factor_terms(10*x - 15)", {"answer": "10*Symbol('x') - 15"}),
    "together, compared": ("return sympy.together(3/x + 9/x)", {"answer": "12/Symbol('x')"}),
    "factor, linear, simplify": (
        "return sympy.factor(4*x + 8)",
        {"verification_code": SIMPLIFY.replace("REF", "4*x + 8")},
    ),
    "together, simplify": (
        "return sympy.together(x/2 + x/3)",
        {"verification_code": SIMPLIFY.replace("REF", "sympy.Rational(5, 6)*x")},
    ),
    "cube root of a negative, the reference that very expression": (
        "return sympy.root(-8, 3)",
        {"answer": "root(-8, 3)"},
    ),
    "cube root of a negative, written as a power": (
        "return sympy.root(-125, 3)",
        {"answer": "5*(-1)**Rational(1, 3)"},
    ),
    "root of unity, the reference that very expression": (
        "return sympy.root(1, 7, 3)",
        {"verification_code": "import sympy\n\ndef verify(a):\n    return a == sympy.root(1, 7, 3)\n"},
    ),
    "sqrt of a 2,501-digit non-square": (f"return sympy.sqrt({BIG})", {"answer": f"sqrt({BIG})"}),
    "solver: FiniteSet of Tuples against a set of tuples": (
        "y = sympy.Symbol('y')\n    return sympy.nonlinsolve([x**2 - 4, y - 3*x], [x, y])",
        {"answer": "{(2, 6), (-2, -6)}", "answer_type": "Python set of tuples"},
    ),
    "sympy Tuple against a tuple": (
        "return sympy.Tuple(3, sympy.Rational(1, 2))",
        {"answer": "(3, Rational(1, 2))"},
    ),
    "CRootOf": (
        "return sympy.CRootOf(x**5 - x + 3, 0)",
        {"answer": "CRootOf(Symbol('x')**5 - Symbol('x') + 3, 0)"},
    ),
    # No answer_kind: the reference's own outermost form says modular (docs, step 1).
    "a finite-field element, its kind from the reference": (
        "return GF(13)(4) * GF(13)(5)",
        {"answer": "GF(13)(7)", "answer_type": "an element of GF(13)"},
    ),
    "a polynomial over GF(2), its kind from the reference": (
        "return sympy.Poly(x**3 + x + 1, x, modulus=2)",
        {"answer": "Poly(Symbol('x')**3 + Symbol('x') + 1, Symbol('x'), modulus=2)"},
    ),
}


@pytest.mark.parametrize("name", list(HONEST))
async def test_honest_exact_answers_are_correct(sandbox: Sandbox, name: str) -> None:
    body, fields = HONEST[name]
    result = await judge(sandbox, body, task(name, **fields))
    assert result.outcome is Outcome.CORRECT, (result.outcome, result.error, result.record.verification)


# Answer types that negate or merely mention a kind; substring matching once admitted that kind.
CARELESS = "def verify(a):\n    return a == N\n"
N = 143
WRONG_UNDER_A_CARELESS_VERIFY = {
    "a rounded float, answer type negating floats": (
        "return numpy.float64(10**30)",
        "an integer, not a floating-point number",
        10**30 + 1,
    ),
    "a GF(2) element, answer type mentioning a finite field": (
        "return GF(2)(1)",
        "the number of elements of a finite field, as a Python int",
        N,
    ),
    "a p-adic number, answer type mentioning a p-adic valuation": (
        "return pyadic.PAdic(3, 7, 2)",
        "a Python int: the sum of the p-adic valuations",
        3 + 7**3,
    ),
    "a modular element, answer type saying modular arithmetic is only a means": (
        "return GF(11)(N % 11)".replace("N", str(N)),
        "Python int (modular arithmetic helps, but the answer is exact)",
        N,
    ),
}


@pytest.mark.parametrize("name", list(WRONG_UNDER_A_CARELESS_VERIFY))
async def test_wrong_answers_stay_incorrect_under_a_careless_verify(sandbox: Sandbox, name: str) -> None:
    body, answer_type, n = WRONG_UNDER_A_CARELESS_VERIFY[name]
    target = task(name, answer_type=answer_type, verification_code=CARELESS.replace("N", str(n)))
    assert target.wanted_kind == "exact" and target.answer_kind_origin.startswith("inferred")
    result = await judge(sandbox, body, target)
    assert result.outcome is Outcome.INCORRECT, (result.outcome, result.error)
    assert "answer kind is exact" in (result.record.verification or ""), result.record.verification
