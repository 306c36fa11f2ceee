"""`proctor score eed` on one pair and on a JSONL file of pairs, run as the real console command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

_PROCTOR = [
    sys.executable,
    "-c",
    "import sys; from proctor.agent.cli import main; sys.argv[0] = 'proctor'; main()",
]


def proctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_PROCTOR, *args], capture_output=True, text=True, timeout=120)


def test_one_pair_as_json() -> None:
    done = proctor("score", "eed", r"2 m g + 4\frac{mv_0^2}{l}", r"2 m g+2\frac{mv_0^2}{l}", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "ok"
    assert round(result["score"]) == 47
    assert (result["distance"], result["reference_size"]) == (2.0, 15)


def test_one_pair_as_text_and_fixed_mode() -> None:
    done = proctor("score", "eed", "--mode", "fixed", r"\frac{G M m}{r^2}", r"\frac{GMm}{r^{2}}")
    assert done.returncode == 0, done.stderr
    assert "score              100.00" in done.stdout
    assert "equivalent" in done.stdout


def test_pairs_file_scores_good_lines_and_reports_bad_ones(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        "\n".join(
            [
                json.dumps({"id": "q1", "reference": "x^2", "answer": r"x \cdot x"}),
                "{not json",
                json.dumps({"reference": "a+b"}),
                "",
                json.dumps({"reference": r"2 m g + 4\frac{mv_0^2}{l}", "answer": r"2 m g+2\frac{mv_0^2}{l}"}),
                json.dumps({"reference": "x", "answer": r"\int x"}),
            ]
        )
        + "\n"
    )
    done = proctor("score", "eed", "--pairs", str(pairs))
    assert done.returncode == 2  # bad lines make the command fail, after scoring the rest
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [row["line"] for row in rows] == [1, 2, 3, 5, 6]
    assert rows[0]["id"] == "q1" and rows[0]["score"] == 100.0
    assert rows[1]["status"] == "input_error" and f"{pairs}:2: invalid JSON" in rows[1]["error"]
    assert rows[2]["status"] == "input_error" and "'answer' is missing" in rows[2]["error"]
    for key in ("score", "relative_distance", "reference_size", "distance"):
        assert key in rows[3]
    assert round(rows[3]["score"]) == 47
    assert rows[4]["status"] == "zero_gate:integral"
    assert f"{pairs}:2" in done.stderr
    assert "2 bad line(s)" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["x"], "give REFERENCE and ANSWER"),
        (["x", "y", "--mode", "loose"], "--mode must be one of"),
        (["x", "y", "--pairs", "p.jsonl"], "not both"),
        (["--pairs", "/nonexistent/pairs.jsonl"], "cannot read"),
    ],
)
def test_bad_invocations_give_one_line_errors(args: list[str], message: str) -> None:
    done = proctor("score", "eed", *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
