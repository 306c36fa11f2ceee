"""One worker pool for the whole EED test session: workers start once (~1 s), not per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from proctor.agent.scoring.worker_pool import EEDWorkerPool


@pytest.fixture(scope="session")
def eed_pool() -> Iterator[EEDWorkerPool]:
    pool = EEDWorkerPool(size=1)
    yield pool
    pool.close()
