"""In-process verdicts through the real driver steps: answer side, codec, verification side.

The same functions the sandboxes run (``run_answer``, ``run_verify``, ``run_compare``), called in
this process so that property tests can afford many values. Docker tests run the same steps in
real sandboxes (test_hostile_submissions.py, test_honest_values_sandbox.py).
"""

from __future__ import annotations

import json
from typing import Any

from proctor.agent.tracks.frontiermath import sandbox_driver as driver
from proctor.agent.tracks.frontiermath import value_codec

# Where these tests write the reference and the value's names from.
PRELUDE = "import fractions, math\nimport gmpy2, numpy, sympy\nfrom sympy import *\nx, y = symbols('x y')\n"


class QuietChannel:
    """The driver's channel, minus the bytes: the marks are not what these tests look at."""

    def mark(self, name: str, elapsed_s: float) -> None:
        pass


def answer_value(body: str, limit_s: float = 30.0) -> Any:
    """The encoded value of ``def answer(): <body>``, as the answer sandbox's driver sends it."""
    code = PRELUDE + "def answer():\n    " + body + "\n"
    request = {"code": code, "time_limit_s": limit_s, "max_value_bytes": value_codec.MAX_ENCODED_BYTES}
    reply = driver.run_answer(request, QuietChannel())  # type: ignore[arg-type]
    assert reply["status"] == "ok", reply
    # What the host does with the reply before verification: the schema check, then JSON.
    value_codec.check_encoded(reply["value"])
    return reply["value"]


def verify_reply(encoded: Any, verification_code: str, answer_kind: str = "exact") -> dict[str, Any]:
    request = {
        "verification_code": PRELUDE + verification_code,
        "answer_kind": answer_kind,
        "value_json": json.dumps(encoded),
    }
    return driver.run_verify(request, QuietChannel())  # type: ignore[arg-type]


def compare_reply(
    encoded: Any, expected: str, answer_kind: str = "exact", tolerance: float | None = None
) -> dict[str, Any]:
    request = {
        "expected": expected,
        "tolerance": tolerance,
        "answer_kind": answer_kind,
        "value_json": json.dumps(encoded),
    }
    return driver.run_compare(request, QuietChannel())  # type: ignore[arg-type]


def credited(reply: dict[str, Any]) -> bool:
    """The outcome the host gives the reply: only an "ok" verdict of True is ``correct``."""
    return reply.get("status") == "ok" and reply.get("verdict") is True


# Everyday verify() idioms; REF is the reference's source.
IDIOMS = {
    "==": "def verify(a):\n    return a == (REF)\n",
    "Eq": "def verify(a):\n    return bool(sympy.Eq(a, REF))\n",
    "simplify": "def verify(a):\n    return sympy.simplify(a - (REF)) == 0\n",
    "equals": "def verify(a):\n    return sympy.sympify(a).equals(REF) is True\n",
}


def idiom_verdict(encoded: Any, idiom: str, reference: str, answer_kind: str = "exact") -> dict[str, Any]:
    """The reply for one idiom; "typed" is the task's ``answer`` compared by type."""
    if idiom == "typed":
        return compare_reply(encoded, reference, answer_kind)
    return verify_reply(encoded, IDIOMS[idiom].replace("REF", reference), answer_kind)
