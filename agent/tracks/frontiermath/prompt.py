"""The benchmark's published prompt, filled in for one task.

Only the known ``{placeholders}`` are replaced: questions are full of LaTeX braces, which
``str.format`` would choke on. The numbers come from the run's configuration, so a test
run with small limits tells the model the limits that really apply. The library list comes
from the sandbox itself (``describe()["libraries"]``: the docker image's pins, or what really
imports on the local backend), so the prompt never promises a library the sandbox lacks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import RunConfig
from proctor.agent.inputs.input_files import MAX_CONFIG_BYTES, read_text_input
from proctor.agent.tracks.frontiermath.tasks import FrontierMathTask

# configs/ sits next to the packages in a checkout; the template ships there.
DEFAULT_TEMPLATE = Path(__file__).resolve().parents[3] / "configs" / "prompts" / "frontiermath.txt"
PLACEHOLDERS = (
    "answer_type",
    "question",
    "token_cap",
    "force_submit_at",
    "answer_timeout",
    "python_timeout",
    "libraries",
)
_LIBRARY_BULLET = "     • "
NO_LIBRARIES = _LIBRARY_BULLET + "(none: only the standard library is available)"
UNKNOWN_LIBRARIES = (
    _LIBRARY_BULLET + "(whatever the configured sandbox image installs; it is not listed here)"
)
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")


def load_template(path: Path | None) -> str:
    template_path = path or DEFAULT_TEMPLATE
    text = read_text_input(template_path, "prompt template", max_bytes=MAX_CONFIG_BYTES)
    for required in ("answer_type", "question"):
        if "{" + required + "}" not in text:
            raise UserError(f"{template_path}: prompt template lacks the {{{required}}} placeholder")
    return text


def _seconds(value: float) -> str:
    return f"{value:g}"


def library_lines(libraries: Mapping[str, str] | None) -> str:
    """One bullet per library in requirements.txt form; None means the sandbox did not say."""
    if libraries is None:
        return UNKNOWN_LIBRARIES
    if not libraries:
        return NO_LIBRARIES
    return "\n".join(f"{_LIBRARY_BULLET}{name}=={version}" for name, version in sorted(libraries.items()))


def render_prompt(
    template: str, task: FrontierMathTask, config: RunConfig, libraries: Mapping[str, str] | None
) -> str:
    values = {
        "libraries": library_lines(libraries),
        "answer_type": task.answer_type,
        "question": task.question,
        "token_cap": f"{config.budget.token_cap:,}",
        "force_submit_at": f"{config.budget.force_submit_at:,}",
        "answer_timeout": _seconds(config.sandbox.answer_timeout_s),
        "python_timeout": _seconds(config.sandbox.timeout_s),
    }
    # One pass, so text substituted in (the question) is never scanned for placeholders.
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)
