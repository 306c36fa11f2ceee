"""`proctor bench eed`: EED throughput on a mixed set of pairs, and where the time goes.

The pair set mixes what a PHYBench run produces: equivalent rewrites, near misses (one coefficient
or exponent off), far answers, gated answers (no worker involved) and pathological expressions
that can only end in a timeout. Throughput is measured with the persistent worker pool; a second,
optional measurement starts a fresh interpreter for every pair, which is what the pool avoids.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from proctor.agent.scoring.eed import EEDResult, eed_score
from proctor.agent.scoring.worker_pool import EEDWorker, EEDWorkerPool, StepLimits, _score_with


@dataclass(frozen=True)
class BenchPair:
    category: str
    reference: str
    answer: str


_REFERENCES = (
    r"2 m g + 4\frac{mv_0^2}{l}",
    r"\frac{G M m}{r^2}",
    r"2\pi\sqrt{\frac{l}{g}}",
    r"\frac{m_1 m_2}{m_1+m_2}",
    r"v_0 t - \frac{1}{2} g t^2",
    r"\frac{q^2}{4\pi\epsilon_0 a^2}",
    r"\frac{mg}{k}\left(1-e^{-kt/m}\right)",
    r"\omega_0 \sqrt{1 - \frac{\gamma^2}{4\omega_0^2}}",
    r"\frac{n R T}{V - n b} - \frac{a n^2}{V^2}",
    r"\sqrt{v_0^2 + 2 g h}",
)

_EQUIVALENT = (
    (r"2 m g + 4\frac{mv_0^2}{l}", r"\frac{2m(gl + 2v_0^2)}{l}"),
    (r"\frac{G M m}{r^2}", r"G M m r^{-2}"),
    (r"2\pi\sqrt{\frac{l}{g}}", r"\frac{2\pi\sqrt{l}}{\sqrt{g}}"),
    (r"\frac{m_1 m_2}{m_1+m_2}", r"\frac{1}{\frac{1}{m_1}+\frac{1}{m_2}}"),
    (r"v_0 t - \frac{1}{2} g t^2", r"t\left(v_0 - \frac{g t}{2}\right)"),
    (r"\frac{q^2}{4\pi\epsilon_0 a^2}", r"\frac{q^2}{4 \pi \epsilon_0 a^{2}}"),
    (r"\sqrt{v_0^2 + 2 g h}", r"\left(2gh + v_0^2\right)^{1/2}"),
    (r"\sin^2\theta + \cos^2\theta", "1"),
)

_NEAR_MISS = (
    (r"2 m g + 4\frac{mv_0^2}{l}", r"2 m g + 2\frac{mv_0^2}{l}"),
    (r"\frac{G M m}{r^2}", r"\frac{G M m}{r}"),
    (r"2\pi\sqrt{\frac{l}{g}}", r"\pi\sqrt{\frac{l}{g}}"),
    (r"\frac{m_1 m_2}{m_1+m_2}", r"\frac{m_1 m_2}{m_1-m_2}"),
    (r"v_0 t - \frac{1}{2} g t^2", r"v_0 t + \frac{1}{2} g t^2"),
    (r"\frac{q^2}{4\pi\epsilon_0 a^2}", r"\frac{q^2}{2\pi\epsilon_0 a^2}"),
    (r"\frac{mg}{k}\left(1-e^{-kt/m}\right)", r"\frac{mg}{k}\left(1-e^{-t/m}\right)"),
    (r"\sqrt{v_0^2 + 2 g h}", r"\sqrt{v_0^2 + g h}"),
)

_FAR = (
    (r"2 m g + 4\frac{mv_0^2}{l}", r"\frac{m v_0}{l}"),
    (r"\frac{G M m}{r^2}", r"\sqrt{2 g h}"),
    (r"\omega_0 \sqrt{1 - \frac{\gamma^2}{4\omega_0^2}}", r"\omega_0"),
    (r"\frac{n R T}{V - n b} - \frac{a n^2}{V^2}", r"\frac{n R T}{V}"),
    (r"\frac{mg}{k}\left(1-e^{-kt/m}\right)", r"g t"),
    (r"2\pi\sqrt{\frac{l}{g}}", r"\frac{\sin\theta}{\cos\theta + 1}"),
)

_GATED = (
    (r"\frac{G M m}{r^2}", ""),
    (r"\int_0^R \rho(r) 4\pi r^2 dr", r"\frac{4}{3}\pi R^3 \rho"),
    (r"\sum_n \frac{1}{n^2}", r"\frac{\pi^2}{6}"),
    (r"m g", r"m g + \frac{1}{2} m v^2 + \frac{1}{2} k x^2"),
)

_PATHOLOGICAL = (
    ("(x+1)^{10000}", "(x+1)^{9999}"),
    (r"x^{x^{x^{x}}} + 1", r"(x^{x^{x^{x}}})^{7^{7^{7}}}"),
)


def bench_pairs(include_pathological: bool = True) -> list[BenchPair]:
    groups: list[tuple[str, tuple[tuple[str, str], ...]]] = [
        ("equivalent", _EQUIVALENT),
        ("near-miss", _NEAR_MISS),
        ("far", _FAR),
        ("gated", _GATED),
    ]
    if include_pathological:
        groups.append(("pathological", _PATHOLOGICAL))
    return [BenchPair(category, ref, ans) for category, pairs in groups for ref, ans in pairs]


@dataclass
class CategoryStats:
    pairs: int = 0
    wall_s: list[float] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=lambda: defaultdict(int))


@dataclass
class BenchReport:
    workers: int
    repeat: int
    timeout_s: float
    total_pairs: int
    elapsed_s: float
    pairs_per_s: float
    worker_seconds: float
    seconds_by_step: dict[str, float]
    categories: dict[str, CategoryStats]
    startup_s: float
    timed_out_seconds: float = 0.0
    spawn_per_pair_s: float | None = None
    pool_per_pair_s: float | None = None

    @property
    def simplify_share(self) -> float:
        return self.seconds_by_step.get("simplify", 0.0) / self.worker_seconds if self.worker_seconds else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "workers": self.workers,
            "repeat": self.repeat,
            "timeout_s": self.timeout_s,
            "total_pairs": self.total_pairs,
            "elapsed_s": round(self.elapsed_s, 3),
            "pairs_per_s": round(self.pairs_per_s, 2),
            "worker_seconds": round(self.worker_seconds, 3),
            "share_by_step": {
                step: round(seconds / self.worker_seconds, 4) if self.worker_seconds else 0.0
                for step, seconds in sorted(self.seconds_by_step.items())
            },
            "simplify_share": round(self.simplify_share, 4),
            "timed_out_share": round(self.timed_out_seconds / self.worker_seconds, 4)
            if self.worker_seconds
            else 0.0,
            "startup_s": round(self.startup_s, 3),
            "spawn_per_pair_s": None if self.spawn_per_pair_s is None else round(self.spawn_per_pair_s, 3),
            "pool_per_pair_s": None if self.pool_per_pair_s is None else round(self.pool_per_pair_s, 3),
            "categories": {
                name: {
                    "pairs": stats.pairs,
                    "mean_ms": round(1000 * statistics.fmean(stats.wall_s), 1) if stats.wall_s else 0.0,
                    "p95_ms": round(1000 * _percentile(stats.wall_s, 0.95), 1),
                    "statuses": dict(stats.statuses),
                }
                for name, stats in self.categories.items()
            },
        }


def _percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def run_bench(
    *,
    workers: int = 2,
    repeat: int = 2,
    timeout_s: float = 3.0,
    mode: str = "strict",
    compare_spawn: bool = True,
    pairs: list[BenchPair] | None = None,
) -> BenchReport:
    """Score the mixed set (or ``pairs``) ``repeat`` times through a warm pool of ``workers``."""
    pool = EEDWorkerPool(size=workers)
    try:
        started = time.perf_counter()
        pool.warm_up()
        startup = time.perf_counter() - started
        jobs = (pairs if pairs is not None else bench_pairs()) * repeat

        def timed(pair: BenchPair) -> tuple[BenchPair, EEDResult]:
            result = eed_score(pair.reference, pair.answer, mode=mode, timeout_s=timeout_s, pool=pool)
            return pair, result

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=workers) as executor:
            outcomes = list(executor.map(timed, jobs))
        elapsed = time.perf_counter() - started

        categories: dict[str, CategoryStats] = {}
        by_step: dict[str, float] = defaultdict(float)
        worker_seconds = 0.0
        timed_out_seconds = 0.0
        for pair, result in outcomes:
            # Time inside the worker (respawn waits excluded; they show in pairs per second).
            wall = result.timings.get("wall", 0.0)
            stats = categories.setdefault(pair.category, CategoryStats())
            stats.pairs += 1
            stats.wall_s.append(wall)
            stats.statuses[result.status] += 1
            worker_seconds += wall
            if result.status == "timeout":
                timed_out_seconds += wall
            for step, seconds in result.timings.items():
                if step != "wall":
                    by_step[step] += seconds
        report = BenchReport(
            workers=workers,
            repeat=repeat,
            timeout_s=timeout_s,
            total_pairs=len(jobs),
            elapsed_s=elapsed,
            pairs_per_s=len(jobs) / elapsed,
            worker_seconds=worker_seconds,
            seconds_by_step=dict(by_step),
            categories=categories,
            startup_s=startup,
            timed_out_seconds=timed_out_seconds,
        )
        if compare_spawn:
            report.spawn_per_pair_s, report.pool_per_pair_s = _compare_spawn(mode, timeout_s)
        return report
    finally:
        pool.close()


def _compare_spawn(mode: str, timeout_s: float) -> tuple[float, float]:
    """Seconds per pair, one at a time: a fresh interpreter per pair vs one warm worker.

    The warm worker is new (its reference cache is empty) and the six pairs have six different
    references, so the difference is the interpreter start and imports alone, not cache hits.
    """
    sample = [p for p in bench_pairs() if p.category == "equivalent"][:6]
    assert len({pair.reference for pair in sample}) == len(sample)
    limits = StepLimits()
    started = time.perf_counter()
    for pair in sample:
        worker = EEDWorker()
        try:
            _score_with(worker, pair.reference, pair.answer, mode, timeout_s, limits)
        finally:
            worker.kill()
    spawn = (time.perf_counter() - started) / len(sample)
    pool = EEDWorkerPool(size=1)
    try:
        pool.warm_up()
        started = time.perf_counter()
        for pair in sample:
            eed_score(pair.reference, pair.answer, mode=mode, timeout_s=timeout_s, pool=pool)
        warm = (time.perf_counter() - started) / len(sample)
    finally:
        pool.close()
    return spawn, warm
