"""A resumed run's report header shows the whole run's times (issue 38, item 6).

Invariant: "started" is the first session's start, "ended" the last session's end, and "wall
time" the sum of every session's own duration (the gaps between sessions are not the run's
time). The oracle: the sessions the test writes, summed by hand.
"""

from __future__ import annotations

import datetime as dt
import html as html_lib
import json
import re
from pathlib import Path

import pytest

from proctor.agent.report.loader import load_run
from proctor.agent.report.page import render_report
from tests.report.run_factory import make_frontiermath_run


def facts(page: str) -> dict[str, str]:
    found = re.findall(r'data-fact="([^"]+)">[^<]*<b>([^<]*)</b>', page)
    return {html_lib.unescape(key): html_lib.unescape(value) for key, value in found}


@pytest.mark.parametrize("gap_hours", [1, 30])
def test_the_header_shows_first_start_last_end_and_summed_wall_time(tmp_path: Path, gap_hours: int) -> None:
    run_dir = make_frontiermath_run(tmp_path / "run", 4)
    header = json.loads((run_dir / "run.json").read_text())
    (resume,) = header["sessions"]
    resumed_at = dt.datetime.fromisoformat(resume["started_at"])
    first_start = resumed_at - dt.timedelta(hours=gap_hours)
    first = {
        "started_at": first_start.isoformat(),
        "ended_at": (first_start + dt.timedelta(seconds=125)).isoformat(),
        "status": "interrupted",
    }
    header["sessions"] = [first, {**resume, "resumed": True}]
    (run_dir / "run.json").write_text(json.dumps(header))
    resume_seconds = (dt.datetime.fromisoformat(resume["ended_at"]) - resumed_at).total_seconds()

    shown = facts(render_report(load_run(run_dir)))
    assert shown["started"] == first["started_at"]
    assert shown["ended"] == resume["ended_at"]
    total = 125 + resume_seconds
    assert shown["wall time"].endswith(" over 2 sessions"), shown["wall time"]
    assert load_run(run_dir).wall_time_s == pytest.approx(total)


def test_a_run_of_one_session_reads_as_before(tmp_path: Path) -> None:
    run_dir = make_frontiermath_run(tmp_path / "run", 2)
    header = json.loads((run_dir / "run.json").read_text())
    shown = facts(render_report(load_run(run_dir)))
    assert shown["started"] == header["started_at"] and shown["ended"] == header["ended_at"]
    assert "session" not in shown["wall time"]
