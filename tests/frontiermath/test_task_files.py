"""Task files: every format loads, and every error names the file, the line and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proctor.agent.errors import UserError
from proctor.agent.inputs.tasks import TaskFileError
from proctor.agent.tracks.frontiermath.tasks import load_frontiermath_tasks

GOOD = {"id": "a", "question": "What is 1+1?", "answer_type": "Python int", "answer": "2"}


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_jsonl_missing_field_names_file_line_and_field(tmp_path: Path) -> None:
    bad = {k: v for k, v in GOOD.items() if k != "answer_type"} | {"id": "b"}
    path = write_jsonl(tmp_path / "tasks.jsonl", [GOOD, bad])
    with pytest.raises(TaskFileError) as caught:
        load_frontiermath_tasks(path)
    assert str(caught.value) == f"{path}:2: field 'answer_type': field required"
    assert isinstance(caught.value, UserError)


def test_jsonl_line_numbers_count_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n\n" + json.dumps(GOOD | {"id": "c", "tolerance": -1}) + "\n")
    with pytest.raises(TaskFileError, match=r"tasks\.jsonl:4: field 'tolerance'"):
        load_frontiermath_tasks(path)


def test_invalid_json_line_is_located(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(GOOD) + "\n{not json\n")
    with pytest.raises(TaskFileError, match=r"tasks\.jsonl:2: invalid JSON"):
        load_frontiermath_tasks(path)


def test_exactly_one_verification_method(tmp_path: Path) -> None:
    both = GOOD | {"verification_code": "def verify(a):\n    return a == 2\n"}
    neither = {k: v for k, v in GOOD.items() if k != "answer"}
    for row in (both, neither):
        path = write_jsonl(tmp_path / "t.jsonl", [row])
        with pytest.raises(
            TaskFileError, match=r"t\.jsonl:1: exactly one of 'verification_code' and 'answer'"
        ):
            load_frontiermath_tasks(path)


def test_source_fields_are_checked_at_load(tmp_path: Path) -> None:
    cases = {
        "answer": (GOOD | {"answer": "1 +"}, "field 'answer': not a Python expression"),
        "verification_code": (
            {k: v for k, v in GOOD.items() if k != "answer"}
            | {"verification_code": "def check(a): return 1"},
            "field 'verification_code': must define a top-level function verify()",
        ),
        "reference_solution": (
            GOOD | {"reference_solution": "def solve():\n    return 2\n"},
            "field 'reference_solution': must define a top-level function answer()",
        ),
    }
    for row, message in cases.values():
        path = write_jsonl(tmp_path / "t.jsonl", [row])
        with pytest.raises(TaskFileError) as caught:
            load_frontiermath_tasks(path)
        assert str(caught.value).startswith(f"{path}:1: {message}")


def test_unknown_field_is_named(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [GOOD | {"anwser": "2"}])
    with pytest.raises(TaskFileError, match=r"t\.jsonl:1: field 'anwser': extra inputs are not permitted"):
        load_frontiermath_tasks(path)


def test_duplicate_ids_are_an_error(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [GOOD, GOOD | {"question": "again"}])
    with pytest.raises(
        TaskFileError, match=r"t\.jsonl:2: field 'id': duplicate id 'a' \(first seen at .*t\.jsonl:1\)"
    ):
        load_frontiermath_tasks(path)


def test_json_list_reports_entry_index_and_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_text(
        "[\n  " + json.dumps(GOOD) + ",\n\n  " + json.dumps({"id": "b", "question": "q"}) + "\n]\n"
    )
    with pytest.raises(TaskFileError) as caught:
        load_frontiermath_tasks(path)
    assert str(caught.value).startswith(f"{path}: entry 1 (line 4): field 'answer_type': field required")


def test_yaml_list_reports_the_field_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text(
        "- id: a\n  question: q\n  answer_type: Python int\n  answer: '2'\n"
        "- id: b\n  question: q\n  answer_type: Python int\n  answer: '2'\n  tolerance: -3\n"
    )
    with pytest.raises(TaskFileError) as caught:
        load_frontiermath_tasks(path)
    assert str(caught.value).startswith(f"{path}: entry 1 (line 9): field 'tolerance'")


def test_all_formats_load_the_same_tasks(tmp_path: Path) -> None:
    rows = [GOOD, GOOD | {"id": 7, "answer": 3, "metadata": {"quickstart": True}}]
    jsonl = write_jsonl(tmp_path / "a.jsonl", rows)
    as_json = tmp_path / "a.json"
    as_json.write_text(json.dumps(rows, indent=2))
    as_yaml = tmp_path / "a.yaml"
    import yaml

    as_yaml.write_text(yaml.safe_dump(rows))
    loaded = [load_frontiermath_tasks(p) for p in (jsonl, as_json, as_yaml)]
    assert loaded[0] == loaded[1] == loaded[2]
    assert [t.id for t in loaded[0]] == ["a", "7"]
    assert loaded[0][1].answer == "3" and loaded[0][1].quickstart


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="task file not found"):
        load_frontiermath_tasks(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(TaskFileError, match="no tasks"):
        load_frontiermath_tasks(tmp_path / "empty.jsonl")
    (tmp_path / "obj.json").write_text('{"id": "a"}')
    with pytest.raises(TaskFileError, match="expected a JSON list"):
        load_frontiermath_tasks(tmp_path / "obj.json")


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "-1e-9"])
def test_tolerance_must_be_finite_and_non_negative(tmp_path: Path, text: str) -> None:
    # NaN would fail every answer and infinity pass every one: refused at load, one line.
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(GOOD)[:-1] + f', "tolerance": {text}}}\n')
    with pytest.raises(TaskFileError, match=r"tasks\.jsonl:1: field 'tolerance'") as caught:
        load_frontiermath_tasks(path)
    assert "\n" not in str(caught.value)


def test_tolerance_from_yaml_must_be_finite(tmp_path: Path) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text("- id: a\n  question: q\n  answer_type: float\n  answer: pi\n  tolerance: .nan\n")
    with pytest.raises(TaskFileError, match="field 'tolerance'"):
        load_frontiermath_tasks(path)


DEEP = "-" * 5000 + "1"


@pytest.mark.parametrize(
    ("field", "source"),
    [
        ("answer", DEEP),
        ("answer", "1+" * 5000 + "1"),
        ("verification_code", "def verify(a):\n    return a == " + DEEP + "\n"),
        ("reference_solution", "def answer():\n    return " + "x." * 5000 + "y\n"),
    ],
)
def test_a_source_nested_past_the_parser_is_one_line_naming_the_field(
    tmp_path: Path, field: str, source: str
) -> None:
    """A hostile task file: Python's parser raises RecursionError (or MemoryError) on these; the
    load must still end in one line naming file, line and field, never a traceback."""
    row = {k: v for k, v in GOOD.items() if k != "answer" or field != "verification_code"} | {field: source}
    path = write_jsonl(tmp_path / "t.jsonl", [row])
    with pytest.raises(TaskFileError) as caught:
        load_frontiermath_tasks(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:1: field '{field}': not ") and "nested too deeply" in message
    assert "\n" not in message


# -- the answer kind: stated, or inferred once at load from structured evidence (issue 40) ----------


def test_a_stated_answer_kind_is_validated_in_one_line_naming_file_line_and_field(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "tasks.jsonl", [GOOD, GOOD | {"id": "b", "answer_kind": "float"}])
    with pytest.raises(TaskFileError) as caught:
        load_frontiermath_tasks(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:2: field 'answer_kind': ") and "\n" not in message
    assert all(kind in message for kind in ("'exact'", "'floating-point'", "'modular'", "'p-adic'"))


def test_a_tolerance_beside_an_exact_kind_is_one_line_naming_the_line(tmp_path: Path) -> None:
    row = GOOD | {"answer_kind": "exact", "tolerance": 1e-9}
    path = write_jsonl(tmp_path / "tasks.jsonl", [row])
    with pytest.raises(TaskFileError, match=r"tasks\.jsonl:1: .*'tolerance' compares approximations"):
        load_frontiermath_tasks(path)


@pytest.mark.parametrize("kind", ["exact", "floating-point", "modular", "p-adic"])
def test_a_stated_answer_kind_is_kept_whatever_the_prose_says(tmp_path: Path, kind: str) -> None:
    row = GOOD | {"answer_type": "a floating-point approximation in GF(7), p-adic", "answer_kind": kind}
    if kind == "floating-point":
        row["tolerance"] = 1e-9
    (task,) = load_frontiermath_tasks(write_jsonl(tmp_path / "tasks.jsonl", [row]))
    assert task.wanted_kind == kind and task.answer_kind_origin == "stated in the task file"


# Answer types that negate or merely mention a kind: substring matching once admitted each kind.
NEGATIONS_AND_MENTIONS = [
    "an integer, not a floating-point number",
    "Python int (do not return a float or an approximation)",
    "the number of elements of the finite field GF(2^8), as a Python int",
    "a Python int: the 7-adic valuation of N (not a p-adic number)",
    "Python int; modular arithmetic is only a means, the answer is exact",
    "mpmath is not needed: an exact sympy Rational",
    "the count of solutions of x^2 = 2 in the 7-adic integers (pyadic is available)",
    "decimal.Decimal is wrong here; return the exact integer",
    "numpy complex128 values are not accepted; an exact complex number",
]


@pytest.mark.parametrize("answer_type", NEGATIONS_AND_MENTIONS)
def test_without_the_field_negations_and_mentions_of_a_kind_infer_exact(
    tmp_path: Path, answer_type: str
) -> None:
    (task,) = load_frontiermath_tasks(
        write_jsonl(tmp_path / "tasks.jsonl", [GOOD | {"answer_type": answer_type}])
    )
    assert task.wanted_kind == "exact" and task.exact_kind
    assert task.answer_kind_origin.startswith("inferred:")


@pytest.mark.parametrize("answer_type", ["Python float", "an exact integer", "GF(7) element", "p-adic"])
def test_without_the_field_a_stated_tolerance_is_the_evidence_of_an_approximation(
    tmp_path: Path, answer_type: str
) -> None:
    row = GOOD | {"answer_type": answer_type, "tolerance": 1e-6}
    (task,) = load_frontiermath_tasks(write_jsonl(tmp_path / "tasks.jsonl", [row]))
    assert task.wanted_kind == "floating-point"
    assert task.answer_kind_origin == "inferred: a tolerance (1e-06) is stated"
    (plain,) = load_frontiermath_tasks(
        write_jsonl(tmp_path / "plain.jsonl", [GOOD | {"answer_type": answer_type}])
    )
    assert plain.wanted_kind == "exact"  # the words alone are never evidence: when in doubt, exact


# The reference's own outermost form is a field of the task file: a finite-field value there is
# what the task wants. Conversions and arithmetic around it are not read (when in doubt, exact).
@pytest.mark.parametrize(
    ("reference", "kind"),
    [
        ("GF(7)(3)", "modular"),
        ("FF(11)(5)", "modular"),
        ("[GF(5)(1), GF(5)(4)]", "modular"),
        ("Poly(x**3 + x + 1, x, modulus=2)", "modular"),
        ("Poly(x**2 + 1, x, domain=GF(3))", "modular"),
        ("Poly(x**2 + 1, x, domain='GF(3)')", "modular"),
        ("int(GF(7)(3))", "exact"),
        ("GF(7)(3) + 1", "exact"),
        ("[GF(5)(1), 4]", "exact"),
        ("Poly(x**2 + 1, x)", "exact"),
        ("Mod(10, 7)", "exact"),
        ("len([GF(7)(1)])", "exact"),
    ],
)
def test_without_the_field_a_finite_field_reference_infers_modular_and_nothing_else_does(
    tmp_path: Path, reference: str, kind: str
) -> None:
    row = GOOD | {"answer": reference, "answer_type": "an integer, not an element of a finite field"}
    (task,) = load_frontiermath_tasks(write_jsonl(tmp_path / "tasks.jsonl", [row]))
    assert task.wanted_kind == kind, task.answer_kind_origin
    assert task.answer_kind_origin.startswith("inferred:")
