"""`proctor score eed`: PHYBench expression edit distance on one pair or a JSONL file of pairs."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from proctor.agent.cli.app import score_app
from proctor.agent.errors import UserError
from proctor.agent.inputs.input_files import MAX_TASK_FILE_BYTES, read_text_input, unreadable_value
from proctor.agent.scoring.latex_preprocess import MODES
from proctor.agent.scoring.parse_failure import parse_failure
from proctor.agent.scoring.worker_pool import WorkerStartupError

if TYPE_CHECKING:
    from proctor.agent.scoring.eed import EEDResult

_PAIRS_HELP = (
    'JSONL file, one {"reference": ..., "answer": ...} per line (an "id" is copied through). '
    "Prints one JSON result per line, in input order; a bad line prints an error object naming "
    "the file and line, the other lines are still scored, and the command then exits 2."
)


@score_app.command("eed")
def score_eed(
    reference: Annotated[str | None, typer.Argument(help="Reference answer, LaTeX.")] = None,
    answer: Annotated[str | None, typer.Argument(help="Answer to score, LaTeX.")] = None,
    pairs: Annotated[Path | None, typer.Option("--pairs", help=_PAIRS_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as one JSON object.")] = False,
    mode: Annotated[str, typer.Option("--mode", help="strict (published behaviour) or fixed.")] = "strict",
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            help="Hard time limit per pair, seconds (default: room for the published 30 s simplify "
            "and 10 s equals limits to fire, 120 s).",
        ),
    ] = None,
) -> None:
    """Score an answer against a reference with EED (0-100; 100 = equivalent).

    Exits 2 when a side does not parse, naming the side and why (the score is then 0), or on a
    bad line of --pairs; a reference of --pairs that does not parse is such a line (an answer
    that does not parse is the answer's score, 0).
    """
    from proctor.agent.scoring.eed import eed_score

    if mode not in MODES:
        raise UserError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    if timeout is not None and timeout <= 0:
        raise UserError("--timeout must be a positive number of seconds")
    if pairs is not None:
        if reference is not None or answer is not None:
            raise UserError("give either REFERENCE ANSWER or --pairs FILE, not both")
        try:
            _score_pairs_file(pairs, mode, timeout)
        except WorkerStartupError as exc:
            raise UserError(str(exc)) from None
        return
    if reference is None or answer is None:
        raise UserError("give REFERENCE and ANSWER (LaTeX strings), or --pairs FILE.jsonl")
    try:
        result = eed_score(reference, answer, mode=mode, timeout_s=timeout)
    except WorkerStartupError as exc:
        raise UserError(str(exc)) from None
    if as_json:
        print(json.dumps(result.to_dict()), flush=True)
    else:
        _print_result(result)
    if result.status == "parse_error":
        # A score of 0 that says nothing about the answer: the input was not what EED reads.
        failure = parse_failure(result.detail, reference, answer)
        raise UserError(f"the {failure.side} {failure.why}" if failure else f"parse_error: {result.detail}")


def _print_result(result: EEDResult) -> None:
    print(f"score              {result.score:.2f}")
    print(f"status             {result.status}")
    if result.distance is not None:
        print(f"distance           {result.distance:g}")
        print(f"relative_distance  {result.relative_distance:.4f}")
        print(f"reference_size     {result.reference_size}")
        print(f"answer_size        {result.answer_size}")
    if result.detail:
        print(f"detail             {result.detail}")


def _read_pairs(path: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """Yield (line number, pair) or (line number, error message) for each non-blank line."""
    text = read_text_input(path, "pairs file", max_bytes=MAX_TASK_FILE_BYTES)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, f"{where}: invalid JSON ({exc.msg})"
            continue
        except RecursionError:
            yield number, f"{where}: nested too deeply"
            continue
        except ValueError as exc:
            yield number, f"{where}: {unreadable_value(exc)}"
            continue
        if not isinstance(row, dict):
            yield number, f"{where}: expected a JSON object with reference and answer"
            continue
        missing = [key for key in ("reference", "answer") if not isinstance(row.get(key), str)]
        if missing:
            yield number, f"{where}: field {missing[0]!r} is missing or not a string"
            continue
        yield number, row


def _score_pairs_file(path: Path, mode: str, timeout: float | None) -> None:
    from proctor.agent.scoring.eed import eed_score
    from proctor.agent.scoring.worker_pool import default_pool

    rows = list(_read_pairs(path))
    bad_lines: list[int] = []

    def score(item: tuple[int, dict[str, Any] | str]) -> dict[str, Any]:
        number, row = item
        if isinstance(row, str):
            return {"line": number, "status": "input_error", "error": row}
        result = eed_score(row["reference"], row["answer"], mode=mode, timeout_s=timeout).to_dict()
        output: dict[str, Any] = {"line": number}
        if "id" in row:
            output["id"] = row["id"]
        output.update(result)
        return output

    # One thread per worker keeps every worker busy; results still print in input order.
    with ThreadPoolExecutor(max_workers=default_pool().size) as executor:
        for (number, row), output in zip(rows, executor.map(score, rows), strict=True):
            if output.get("status") == "input_error":
                bad_lines.append(output["line"])
                print(f"proctor: error: {output['error']}", file=sys.stderr)
            elif output.get("status") == "parse_error" and isinstance(row, dict):
                # An answer that does not parse is scored 0, as published; a reference that does
                # not parse leaves nothing to score against: the file is wrong.
                failure = parse_failure(output.get("detail"), row["reference"], row["answer"])
                if failure is not None and failure.side == "reference":
                    bad_lines.append(number)
                    print(f"proctor: error: {path}:{number}: the reference {failure.why}", file=sys.stderr)
            print(json.dumps(output), flush=True)
    if bad_lines:
        listed = ", ".join(str(n) for n in bad_lines[:10]) + (" ..." if len(bad_lines) > 10 else "")
        raise UserError(f"{len(bad_lines)} bad line(s) in {path} (line {listed}); the others were scored")
