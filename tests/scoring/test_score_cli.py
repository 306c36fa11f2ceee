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


@pytest.mark.parametrize(
    ("reference", "answer", "side", "shown"),
    [
        ("x^2", "x**2", "answer", "'x**2'"),
        (
            r"\frac{",
            "x",
            "reference",
            r"'\frac{' does not parse as LaTeX: I expected something else here, at its end",
        ),
        (r"a + \frac{b}{", r"a + b", "reference", "does not parse"),
    ],
)
def test_a_side_that_does_not_parse_is_named_and_exits_2(
    reference: str, answer: str, side: str, shown: str
) -> None:
    for json_flag in ([], ["--json"]):
        done = proctor("score", "eed", *json_flag, "--", reference, answer)
        assert done.returncode == 2, done
        (line,) = done.stderr.splitlines()
        assert line.startswith(f"proctor: error: the {side} ") and shown in line, line
        assert "does not parse as LaTeX: " in line and "Traceback" not in done.stderr
        # The result is still printed: a score of 0, parse_error.
        assert "parse_error" in done.stdout


def test_pairs_a_reference_that_does_not_parse_is_a_bad_line_an_answer_is_a_score(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    answers_only = tmp_path / "answers.jsonl"
    pairs.write_text(
        json.dumps({"reference": r"\frac{", "answer": "x"})
        + "\n"
        + json.dumps({"reference": "x+1", "answer": "x**2"})
        + "\n"
    )
    answers_only.write_text(json.dumps({"reference": "x+1", "answer": "x**2"}) + "\n")
    done = proctor("score", "eed", "--pairs", str(pairs))
    assert done.returncode == 2, done
    assert [json.loads(line)["status"] for line in done.stdout.splitlines()] == ["parse_error", "parse_error"]
    assert f"proctor: error: {pairs}:1: the reference" in done.stderr and f"{pairs}:2" not in done.stderr
    assert "1 bad line(s)" in done.stderr
    fine = proctor("score", "eed", "--pairs", str(answers_only))
    assert fine.returncode == 0, fine.stderr
