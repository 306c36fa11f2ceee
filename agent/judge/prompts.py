"""Prompt templates for the judge-based tracks: loading and filling.

The FrontierScience grading prompts are kept verbatim from the paper's appendix B, including
the placeholder ``{reference answer}`` with its space. ``str.format`` cannot fill such a name
and would also choke on the braces that LaTeX problems are full of, so templates are filled by
one regex pass over the known placeholders only: text that a problem or an answer brings in is
never scanned again, so an answer containing ``{answer}`` stays as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from proctor.agent.errors import UserError
from proctor.agent.inputs.input_files import MAX_CONFIG_BYTES, read_text_input

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "configs" / "prompts"

OLYMPIAD_JUDGE_PROMPT = "olympiad_judge.txt"
RESEARCH_JUDGE_PROMPT = "research_judge.txt"
SCIENCE_ANSWER_PROMPT = "science_answer.txt"
PHYBENCH_ANSWER_PROMPT = "phybench_answer.txt"

OLYMPIAD_PLACEHOLDERS = ("problem", "reference answer", "answer")
RESEARCH_PLACEHOLDERS = ("problem", "rubric", "answer")
ANSWER_PLACEHOLDERS = ("problem",)


def load_template(name_or_path: str | Path, placeholders: tuple[str, ...]) -> str:
    """Read a template (a bare file name means ``configs/prompts/NAME``) and check its placeholders.

    Only the final newline is dropped, so the text sent is the file's text, line for line.
    """
    path = Path(name_or_path)
    if not path.is_absolute() and path.parent == Path("."):
        bundled = PROMPTS_DIR / path
        path = bundled if bundled.exists() or not path.exists() else path
    text = read_text_input(path, "prompt template", max_bytes=MAX_CONFIG_BYTES)
    if text.endswith("\n"):
        text = text[:-1]
    missing = [name for name in placeholders if "{" + name + "}" not in text]
    if missing:
        names = ", ".join("{" + name + "}" for name in missing)
        raise UserError(f"{path}: prompt template lacks the placeholder(s) {names}")
    return text


def fill_template(template: str, values: Mapping[str, str]) -> str:
    """Replace each ``{name}`` for the names in ``values``, in a single pass."""
    if not values:
        return template
    pattern = re.compile("|".join(re.escape("{" + name + "}") for name in values))
    return pattern.sub(lambda match: values[match.group(0)[1:-1]], template)
