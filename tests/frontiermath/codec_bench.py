"""Encode + JSON + check + decode times of typical and large answers (best of 5).

Run from the repository root: `python3 -m tests.frontiermath.codec_bench`. Not a test (no
timed assertions); the numbers are quoted in docs/value-codec.md.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy
import sympy

from proctor.agent.tracks.frontiermath.value_codec import decode_value, encode_value


def bench(label: str, value: Any, repeat: int = 5) -> None:
    best, size = float("inf"), 0
    for _ in range(repeat):
        started = time.perf_counter()
        text = json.dumps(encode_value(value))
        decode_value(json.loads(text))
        best = min(best, time.perf_counter() - started)
        size = len(text)
    print(f"{label:32s} {best * 1000:9.2f} ms  {size:>9d} bytes")


def main() -> None:
    x = sympy.symbols("x0:50")
    bench("int 12345", 12345)
    bench("int 10**999000", 10**999000)
    bench("numpy int64 200x200", numpy.arange(40000, dtype="int64").reshape(200, 200))
    terms = [
        sympy.Rational(i + 1, i + 2) * x[i % 50] ** (i // 50 + 1) * sympy.sin(x[(i * 7) % 50])
        for i in range(1000)
    ]
    expression = sympy.Add(*terms)
    assert len(expression.args) == 1000
    bench("sympy 1000-term expression", expression)


if __name__ == "__main__":
    main()
