"""Tool-call workloads at different CPU quotas, in the real sandbox: what a second CPU buys.

``python -m proctor.sandbox.bench.workloads --backend docker --cpus 1,2 --repeat 3`` runs each
workload below ``repeat`` times per quota through :func:`open_sandbox` (a fresh container per
call, the run's own lock-down) and prints one JSON line per call plus a summary table: the
program's own time around the work (``inside_s``, imports excluded), its CPU time, and our
clock around the whole call. The quotas take turns within each round, so load from elsewhere
on the machine falls on all of them alike. docs/sandbox.md ("Why these defaults") records a run.

The workloads are the kind a FrontierMath tool call makes: exact algebra in sympy, linear
algebra over a large prime field in galois, floating-point linear algebra in numpy (the one
that can use several cores, through OpenBLAS), graph search in networkx, and a numpy sieve of
the odd numbers to 10**9 (500 MB of flags).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from typing import Any

from proctor.sandbox.api import MIB, Limits, SandboxError
from proctor.sandbox.factory import open_sandbox
from proctor.sandbox.spec import SandboxSpec

_TIMED = """
import json, resource, time
{imports}
_start = time.perf_counter()
_cpu = time.process_time()
{body}
_usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"inside_s": time.perf_counter() - _start, "cpu_s": time.process_time() - _cpu,
                   "max_rss_mib": _usage.ru_maxrss / 1024, "check": str(check)}}))
"""

WORKLOADS: dict[str, tuple[str, str]] = {
    "sympy": (
        "import sympy as sp",
        "x = sp.symbols('x')\n"
        "f = sp.factor(x**360 - 1)\n"
        "d = sp.expand(sp.Matrix(6, 6, lambda i, j: sp.Rational(1, i + j + 1) + x ** ((i * j) % 3)).det())\n"
        "m = sp.Matrix(40, 40, lambda i, j: sp.Rational((7 * i + 3 * j) % 11 + 1, (i + 2 * j) % 5 + 1))\n"
        "sol = (m + sp.eye(40)).LUsolve(sp.Matrix(40, 1, lambda i, j: i))\n"
        "n = sp.factorint(2**101 - 1)\n"
        "check = len(f.args) + len(d.args) + len(sol) + len(n)",
    ),
    "galois": (
        "import galois, numpy as np",
        "GF = galois.GF(2**61 - 1)\n"
        "rng = np.random.default_rng(7)\n"
        "A = GF(rng.integers(0, 2**61 - 1, size=(120, 120), dtype=np.int64))\n"
        "inv = np.linalg.inv(A)\n"
        "f = galois.Poly.Random(64, seed=7, field=GF)\n"
        "X = galois.Poly([1, 0], field=GF)\n"
        "g = galois.gcd(pow(X, GF.order, f) - X, f)\n"
        "check = int((A @ inv)[5, 5]) + g.degree",
    ),
    "numpy-linalg": (
        "import numpy as np",
        "rng = np.random.default_rng(7)\n"
        "a = rng.standard_normal((3000, 3000))\n"
        "b = a @ a.T\n"
        "ev = np.linalg.eigvalsh(b[:1200, :1200])\n"
        "x = np.linalg.solve(b + 3000 * np.eye(3000), rng.standard_normal(3000))\n"
        "check = int(float(ev[-1]) > 0) + x.shape[0]",
    ),
    "networkx": (
        "import networkx as nx",
        "g = nx.gnm_random_graph(15000, 75000, seed=7)\n"
        "lengths = [len(nx.single_source_shortest_path_length(g, s)) for s in range(20)]\n"
        "bc = nx.betweenness_centrality(g, k=30, seed=7)\n"
        "check = sum(lengths) + len(bc)",
    ),
    "numpy-sieve-1e9": (
        "import numpy as np",
        "n = 10**9\n"
        "s = np.ones(n // 2, dtype=bool)\n"
        "s[0] = False\n"
        "for i in range(3, int(n**0.5) + 1, 2):\n"
        "    if s[i // 2]:\n"
        "        s[i * i // 2 :: i] = False\n"
        "check = int(s.sum()) + 1",
    ),
}


def program(name: str) -> str:
    imports, body = WORKLOADS[name]
    return _TIMED.format(imports=imports, body=body)


async def measure(
    backend: str, quotas: list[float], memory_bytes: int, repeat: int, timeout: float
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    spec = SandboxSpec(backend=backend, pool_size=0, default_limits=Limits(memory_bytes=memory_bytes))
    sandbox = await open_sandbox(spec)
    try:
        for round_index in range(repeat):
            # Rotate the quotas' order each round: a burst of outside load falls on all alike.
            order = quotas[round_index % len(quotas) :] + quotas[: round_index % len(quotas)]
            for name in WORKLOADS:
                for cpus in order:
                    limits = Limits(memory_bytes=memory_bytes, cpus=cpus)
                    started = time.perf_counter()
                    try:
                        result = await sandbox.exec(program(name), timeout=timeout, limits=limits)
                    except SandboxError as exc:
                        rows.append({"workload": name, "cpus": cpus, "error": str(exc)})
                        continue
                    row: dict[str, Any] = {
                        "workload": name,
                        "cpus": cpus,
                        "round": round_index,
                        "outside_s": round(time.perf_counter() - started, 3),
                        "exit_code": result.exit_code,
                        "timed_out": result.timed_out,
                        "oom_killed": result.oom_killed,
                        "load_1m": os.getloadavg()[0],
                    }
                    lines = result.stdout.strip().splitlines()
                    if result.exit_code == 0 and lines:
                        row.update(json.loads(lines[-1]))
                    else:
                        row["stderr_tail"] = result.stderr[-300:]
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    finally:
        await sandbox.aclose()
    return rows


def summary(rows: list[dict[str, Any]], quotas: list[float]) -> str:
    lines = ["workload | " + " | ".join(f"{q:g} CPU: median inside_s (cpu_s)" for q in quotas)]
    for name in WORKLOADS:
        cells = []
        for quota in quotas:
            done = [r for r in rows if r["workload"] == name and r["cpus"] == quota and "inside_s" in r]
            failed = [r for r in rows if r["workload"] == name and r["cpus"] == quota and "inside_s" not in r]
            if done:
                inside = statistics.median(r["inside_s"] for r in done)
                cpu = statistics.median(r["cpu_s"] for r in done)
                cells.append(f"{inside:.2f} s ({cpu:.2f} s)" + (f", {len(failed)} failed" if failed else ""))
            else:
                how = "OOM" if any(r.get("oom_killed") for r in failed) else "failed"
                cells.append(f"{how} x{len(failed)}")
        lines.append(f"{name} | " + " | ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="docker")
    parser.add_argument("--cpus", default="1,2", help="comma-separated CPU quotas")
    parser.add_argument("--memory-mib", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    quotas = [float(q) for q in args.cpus.split(",")]
    rows = asyncio.run(measure(args.backend, quotas, args.memory_mib * MIB, args.repeat, args.timeout))
    print(summary(rows, quotas), file=sys.stderr)


if __name__ == "__main__":
    main()
