"""The example in PHYBench's EED readme: 2mg + 4mv0^2/l scored against a halved second coefficient."""

from __future__ import annotations

import pytest

from proctor.agent.scoring.eed import eed_score
from proctor.agent.scoring.worker_pool import EEDWorkerPool

REFERENCE = r"2 m g + 4\frac{mv_0^2}{l}"


def test_halved_coefficient_scores_the_published_47(eed_pool: EEDWorkerPool) -> None:
    result = eed_score(REFERENCE, r"2 m g+2\frac{mv_0^2}{l}", pool=eed_pool)
    # simplify() factors both sides: the reference becomes 2m(gl + 2v0^2)/l (15 nodes) and the
    # answer 2m(gl + v0^2)/l; the answer lacks the Mul node and the factor 2 under the Add: d = 2.
    assert result.status == "ok"
    assert result.reference_size == 15
    assert result.answer_size == 13
    assert result.distance == 2.0
    assert result.score == pytest.approx(60 - 100 * 2 / 15)
    assert round(result.score) == 47


def test_same_expression_written_differently_scores_100(eed_pool: EEDWorkerPool) -> None:
    result = eed_score(REFERENCE, r"2 m g+4\frac{m v_0^2}{l}", pool=eed_pool)
    assert result.status == "equivalent"
    assert result.score == 100.0
