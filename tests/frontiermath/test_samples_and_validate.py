"""The shipped sample problems and `proctor validate`, which puts references through the submission path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.agent.tracks.frontiermath.checks import check_submission_code
from proctor.agent.tracks.frontiermath.tasks import load_frontiermath_tasks
from tests.support.cli import proctor_in_process

SAMPLES = Path(__file__).resolve().parents[2] / "configs" / "tasks" / "frontiermath-samples.jsonl"
# Libraries the host lacks; the local backend runs the host's Python.
IMAGE_ONLY = ("galois", "pyadic")


def proctor(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from proctor.agent.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_samples_cover_the_required_ground() -> None:
    tasks = load_frontiermath_tasks(SAMPLES)
    assert len(tasks) >= 10
    assert sum(task.quickstart for task in tasks) >= 3
    assert {"number theory", "combinatorics", "algebra", "finite fields", "p-adic analysis"} <= {
        task.subject for task in tasks
    }
    for task in tasks:
        assert task.reference_solution is not None, task.id
        assert check_submission_code(task.reference_solution) == [], task.id
        assert (task.answer is None) != (task.verification_code is None)
    assert any(t.verification_code for t in tasks) and any(t.tolerance for t in tasks)
    assert any("galois" in (t.reference_solution or "") for t in tasks)


# Every runnable sample's reference and verification, each in a sandbox: tens of seconds.
@pytest.mark.slow
def test_validate_passes_the_samples_the_host_can_run(tmp_path: Path) -> None:
    lines = [line for line in SAMPLES.read_text().splitlines() if line.strip()]
    runnable = [
        line for line in lines if not any(lib in json.loads(line)["reference_solution"] for lib in IMAGE_ONLY)
    ]
    assert len(runnable) >= 10
    subset = tmp_path / "samples.jsonl"
    subset.write_text("\n".join(runnable) + "\n")
    result = proctor("validate", "--tasks", str(subset), "--backend", "local", "--json")
    report = json.loads(result.stdout)
    assert result.returncode == 0, report["results"]
    assert report["passed"] == len(runnable) and report["failed"] == []


@pytest.mark.docker
def test_validate_passes_every_sample_in_the_pinned_image() -> None:
    # Correctness, not speed: the suite runs 4 workers on 2 cores, and galois compiles on first
    # use, so the 30 s protocol limit is measured by hand (README/docs), not asserted here.
    result = proctor(
        "validate", "--tasks", str(SAMPLES), "--backend", "docker", "--json", "--answer-timeout", "120"
    )
    report = json.loads(result.stdout)
    assert result.returncode == 0, [r for r in report["results"] if not r["passed"]]
    assert report["passed"] == report["total"] >= 10
    assert report["sandbox"]["backend"] == "docker"


def test_validate_lists_failing_references_and_exits_1(tmp_path: Path) -> None:
    rows = [
        {
            "id": "good",
            "question": "q",
            "answer_type": "Python int",
            "answer": "42",
            "reference_solution": "def answer():\n    return 6 * 7\n",
        },
        {
            "id": "wrong",
            "question": "q",
            "answer_type": "Python int",
            "answer": "42",
            "reference_solution": "def answer():\n    return 41\n",
        },
        {
            "id": "commented",
            "question": "q",
            "answer_type": "Python int",
            "answer": "42",
            "reference_solution": "def answer():\n    return 42  # fine?\n",
        },
        {"id": "no-reference", "question": "q", "answer_type": "Python int", "answer": "42"},
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    table = proctor_in_process("validate", "--tasks", str(path), "--backend", "local")
    assert table.returncode == 1
    assert "failing references: wrong, commented" in table.stdout
    as_json = proctor_in_process("validate", "--tasks", str(path), "--backend", "local", "--json")
    report = json.loads(as_json.stdout)
    assert as_json.returncode == 1
    assert report["failed"] == ["wrong", "commented"] and report["unchecked"] == ["no-reference"]
    outcomes = {r["id"]: r["outcome"] for r in report["results"]}
    assert outcomes == {
        "good": "correct",
        "wrong": "incorrect",
        "commented": "invalid_submission",
        "no-reference": None,
    }
    strict = proctor_in_process(
        "validate", "--tasks", str(path), "--backend", "local", "--json", "--require-reference"
    )
    assert json.loads(strict.stdout)["failed"] == ["wrong", "commented", "no-reference"]


def test_validate_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"id": "a", "question": "q", "answer": "1"}\n')
    result = proctor_in_process("validate", "--tasks", str(path), "--backend", "local")
    assert result.returncode == 2
    assert result.stderr.strip() == f"proctor: error: {path}:1: field 'answer_type': field required"
    missing = proctor_in_process("validate", "--tasks", str(tmp_path / "absent.jsonl"))
    assert missing.returncode == 2 and "task file not found" in missing.stderr
    backend = proctor_in_process("validate", "--tasks", str(path), "--backend", "vm")
    assert backend.returncode == 2 and "unknown backend" in backend.stderr


@pytest.mark.docker
def test_validate_flags_a_float_reference_for_an_exact_answer_type(tmp_path: Path) -> None:
    rows = [
        {
            "id": "float-for-int",
            "question": "q",
            "answer_type": "Python int",
            "answer": "84 / 2.0",
            "reference_solution": "def answer():\n    return 42\n",
        },
        {
            "id": "float-for-float",
            "question": "q",
            "answer_type": "Python float",
            "answer": "0.5",
            "tolerance": 1e-12,
            "reference_solution": "def answer():\n    return 0.5\n",
        },
        {
            "id": "exact-division",
            "question": "q",
            "answer_type": "sympy Rational",
            "answer": "188684/15015",
            "reference_solution": "def answer():\n    from fractions import Fraction\n"
            "    return Fraction(188684, 15015)\n",
        },
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = proctor("validate", "--tasks", str(path), "--backend", "docker", "--json")
    report = json.loads(result.stdout)
    assert result.returncode == 1 and report["failed"] == ["float-for-int"]
    flagged = {r["id"]: r["inexact_reference"] for r in report["results"]}
    assert flagged == {"float-for-int": True, "float-for-float": False, "exact-division": False}


def test_validate_and_dry_run_show_each_task_answer_kind(tmp_path: Path) -> None:
    """The kind each task wants, stated or inferred at load, before anything is spent."""
    rows = [
        {
            "id": "stated",
            "question": "q",
            "answer_type": "an element of GF(7)",
            "answer": "3",
            "answer_kind": "modular",
        },
        {"id": "negated", "question": "q", "answer_type": "an integer, not a float", "answer": "3"},
        {"id": "toleranced", "question": "q", "answer_type": "a number", "answer": "pi", "tolerance": 1e-9},
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    validated = proctor_in_process("validate", "--tasks", str(path), "--backend", "local", "--json")
    assert validated.returncode == 0, validated.stderr
    kinds = {
        r["id"]: (r["answer_kind"], r["answer_kind_origin"]) for r in json.loads(validated.stdout)["results"]
    }
    assert kinds == {
        "stated": ("modular", "stated in the task file"),
        "negated": ("exact", "inferred: no answer_kind and no tolerance, so exact"),
        "toleranced": ("floating-point", "inferred: a tolerance (1e-09) is stated"),
    }
    planned = proctor_in_process(
        "run", "--track", "frontiermath", "--tasks", str(path), "--model", "openai/m",
        "-M", "base_url=http://127.0.0.1:9/v1", "--out", str(tmp_path / "planned"), "--dry-run",
        env={"OPENAI_API_KEY": "sk-test"},
    )  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    (row,) = [line for line in planned.stdout.splitlines() if line.strip().startswith("answer kind")]
    assert "stated: modular (stated in the task file)" in row
    assert "negated: exact (inferred: no answer_kind and no tolerance, so exact)" in row
    assert "toleranced: floating-point (inferred: a tolerance (1e-09) is stated)" in row
