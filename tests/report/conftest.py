"""Run directories for the report tests, generated from SampleRecord objects."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.run_factory import make_frontiermath_run, make_judged_run

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
SMALL_FORCE_AT = 20_000
SMALL_CAP = 30_000


@pytest.fixture(scope="session")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 FrontierMath samples, two models, with small token limits (forced submissions happen)."""
    return make_frontiermath_run(
        tmp_path_factory.mktemp("small") / "run",
        60,
        force_at=SMALL_FORCE_AT,
        cap=SMALL_CAP,
        models=("openai/model-a", "openai/model-b"),
    )


@pytest.fixture(scope="session")
def judged_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An Olympiad-style run with judge replies, judge errors and EED, on the local backend."""
    return make_judged_run(tmp_path_factory.mktemp("judged") / "run", 30)


@pytest.fixture(scope="session")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1,000 samples with long transcripts (about 30 turns each), the protocol's real limits."""
    return make_frontiermath_run(
        tmp_path_factory.mktemp("big") / "run", 1000, turns_hint=30, output_chars=1500
    )
