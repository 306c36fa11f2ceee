"""What a progress line says about a sample: `reason=` for a scored failure, `error=` only for an
error outcome, and a traceback shown by the exception's own line, never by its header."""

from __future__ import annotations

import io
import traceback

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from proctor.agent.results.records import ERROR_OUTCOMES, Outcome, SampleRecord
from proctor.agent.run.progress import TRACEBACK_HEADER, RunProgress, headline


def _record(outcome: Outcome, error: str) -> SampleRecord:
    return SampleRecord(
        run_id="r",
        track="frontiermath",
        task_id="t",
        trial=0,
        model="openai/m",
        outcome=outcome,
        error=error,
        started_at="2026-12-01T00:00:00+00:00",
        finished_at="2026-12-01T00:00:01+00:00",
        duration_s=1.0,
    )


def _line(record: SampleRecord) -> str:
    out = io.StringIO()
    progress = RunProgress(Console(file=out, width=400), live=False)
    progress.begin(total=1, already_done=[], run_dir="run")
    progress.sample_started()
    progress.sample_finished(record)
    [line] = [text for text in out.getvalue().splitlines() if text.startswith("[1/1]")]
    return line


@pytest.mark.parametrize("outcome", list(Outcome))
def test_only_an_error_outcome_is_called_an_error(outcome: Outcome) -> None:
    line = _line(_record(outcome, "verify() returned False"))
    if outcome in ERROR_OUTCOMES:
        assert "error=verify() returned False" in line and "reason=" not in line
    else:
        assert "reason=verify() returned False" in line and "error=" not in line


def _raised(exc: BaseException) -> str:
    try:
        raise exc
    except BaseException as caught:
        return "".join(traceback.format_exception(caught))


def _chained(inner: BaseException, outer: BaseException) -> str:
    try:
        try:
            raise inner
        except BaseException:
            raise outer  # noqa: B904 - the implicit chain is the point
    except BaseException as caught:
        return "".join(traceback.format_exception(caught))


EXCEPTIONS = st.sampled_from([ValueError, ZeroDivisionError, KeyError, RuntimeError, ArithmeticError])
# A message line as an answer() may raise it: any printable text, including text that looks like
# a traceback header or a frame.
MESSAGES = st.one_of(
    st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=60),
    st.just(TRACEBACK_HEADER),
    st.just('  File "x.py", line 1, in answer'),
).filter(lambda text: text.strip() != "" and not text[:1].isspace())


# No deadline: the machine is shared and loaded; the property, not the speed, is under test.
@settings(deadline=None)
@given(EXCEPTIONS, MESSAGES)
def test_a_traceback_is_shown_by_its_exceptions_own_line(kind: type[Exception], message: str) -> None:
    text = _raised(kind(message))
    expected = traceback.format_exception_only(kind(message))[-1].splitlines()[0].strip()
    assert headline(text) == expected
    assert _line(_record(Outcome.ANSWER_ERROR, text)).count(TRACEBACK_HEADER) == (
        1 if TRACEBACK_HEADER in expected else 0
    )


@settings(deadline=None)
@given(EXCEPTIONS, MESSAGES, EXCEPTIONS, MESSAGES)
def test_a_chained_traceback_is_shown_by_the_exception_that_ended_it(
    inner: type[Exception], inner_message: str, outer: type[Exception], outer_message: str
) -> None:
    text = _chained(inner(inner_message), outer(outer_message))
    expected = traceback.format_exception_only(outer(outer_message))[-1].splitlines()[0].strip()
    assert headline(text) == expected


def test_a_multi_line_message_and_plain_text_show_their_first_line() -> None:
    assert headline(_raised(ValueError("first\nsecond"))) == "ValueError: first"
    assert headline("\n\n  the endpoint said no\nmore detail") == "the endpoint said no"
    assert headline("") == "" and headline(TRACEBACK_HEADER) == TRACEBACK_HEADER
