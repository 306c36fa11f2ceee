"""Judging for the FrontierScience tracks: verbatim prompts, strict verdicts, retries, pre-check."""

from proctor.agent.judge.caller import JudgeResult, ask_judge
from proctor.agent.judge.grading import Grade, grade_olympiad, grade_research
from proctor.agent.judge.precheck import PrecheckResult, normalize_answer, precheck
from proctor.agent.judge.prompts import fill_template, load_template
from proctor.agent.judge.verdict import (
    BinaryVerdict,
    PointsVerdict,
    VerdictParseError,
    parse_binary_verdict,
    parse_points_verdict,
)

__all__ = [
    "BinaryVerdict",
    "Grade",
    "JudgeResult",
    "PointsVerdict",
    "PrecheckResult",
    "VerdictParseError",
    "ask_judge",
    "fill_template",
    "grade_olympiad",
    "grade_research",
    "load_template",
    "normalize_answer",
    "parse_binary_verdict",
    "parse_points_verdict",
    "precheck",
]
