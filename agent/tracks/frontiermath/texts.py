"""The texts the conversation rules send the model, and user-supplied replacements for them.

Proctor ships its own wording of each rule's message (profiles.py); it does not copy another
project's texts. A user who wants a run to send exactly the texts of another harness (the
public Inspect AI FrontierMath example) supplies them as template files in ``track_options``:

    track_options:
      protocol_texts:
        usage_message: texts/usage.txt          # the per-turn status message
        forced_notice: texts/forced.txt         # the forced-submission warning
        empty_output_help: texts/empty.txt      # the help after a python call printed nothing
        submission_reply: texts/submitted.txt   # the tool result of a graded submit_answer

Templates name values in braces: ``{used}``, ``{force_at}``, ``{cap}``, ``{remaining}``
(tokens left before the hard limit), each as plain digits or, written ``{used:,}``, with
thousands separators; ``{{`` and ``}}`` are literal braces. Substitution is one explicit pass
over the text (no ``str.format``, which would let a template reach attributes and indexes of
what it is given), so nothing in a template is ever evaluated. A placeholder a text does not
offer, a required one missing, an unmatched brace, an unreadable or non-UTF-8 file: one line
naming the file and the problem, before any sample starts. run.json records each file's path
and sha256 (``track_settings.protocol_texts``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor.agent.errors import UserError
from proctor.agent.tracks.frontiermath.profiles import ProtocolProfile

# Each text a user may supply -> (the profile field it replaces, placeholders it offers, those
# it must use). The usage message and the forced notice exist to tell the model its tokens.
_BUDGET = frozenset({"used", "force_at", "cap", "remaining"})
TEXTS: dict[str, tuple[str, frozenset[str], frozenset[str]]] = {
    "usage_message": ("status_message", _BUDGET, frozenset({"used"})),
    "forced_notice": ("forced_notice", _BUDGET, frozenset({"used"})),
    "empty_output_help": ("empty_output_help", frozenset(), frozenset()),
    "submission_reply": ("submission_reply", frozenset(), frozenset()),
}
# A text file past this is not a message: refuse it rather than send megabytes every turn.
MAX_TEXT_BYTES = 64 * 1024
# "{{", "}}", "{name}" or "{name:,}", else a lone brace (an error).
_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)(:,)?\}|[{}]")


def placeholders(template: str) -> list[tuple[str, bool]]:
    """(name, grouped) for each placeholder; ValueError naming a lone brace or a bad field."""
    found: list[tuple[str, bool]] = []
    for match in _TOKEN.finditer(template):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        if match.group(1) is None:
            line = template.count("\n", 0, match.start()) + 1
            raise ValueError(f"unmatched {token!r} on line {line} (write {token * 2} for a literal brace)")
        found.append((match.group(1), match.group(2) is not None))
    return found


def render(template: str, values: dict[str, int]) -> str:
    """``template`` with each placeholder replaced by its value, in one pass (see the module)."""

    def one(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = match.group(1)
        if name is None or name not in values:  # checked at load; never reached for loaded texts
            raise ValueError(f"no value for {token!r}")
        return f"{values[name]:,}" if match.group(2) else str(values[name])

    return _TOKEN.sub(one, template)


def budget_values(used: int, force_at: int, cap: int) -> dict[str, int]:
    return {"used": used, "force_at": force_at, "cap": cap, "remaining": max(0, cap - used)}


@dataclass(frozen=True)
class UserText:
    key: str
    path: Path
    text: str
    sha256: str


def load_text(key: str, raw_path: Any) -> UserText:
    """One supplied text, checked; a one-line UserError naming the file otherwise."""
    where = f"track_options.protocol_texts.{key}"
    if key not in TEXTS:
        raise UserError(f"field '{where}': unknown text; the texts are: {', '.join(TEXTS)}")
    if not isinstance(raw_path, str | Path) or not str(raw_path).strip():
        raise UserError(f"field '{where}': expected the path of a UTF-8 text file, got {raw_path!r}")
    path = Path(raw_path)
    try:
        data = path.read_bytes()[: MAX_TEXT_BYTES + 1]
    except OSError as exc:
        raise UserError(f"{path}: cannot read the {key} template: {exc.strerror or exc}") from None
    if len(data) > MAX_TEXT_BYTES:
        raise UserError(f"{path}: the {key} template is over {MAX_TEXT_BYTES:,} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: the {key} template is not UTF-8 (byte {exc.start})") from None
    # A file's final newline is an editor's, not part of the message.
    text = text[:-1] if text.endswith("\n") else text
    _, offered, required = TEXTS[key]
    try:
        used = placeholders(text)
    except ValueError as exc:
        raise UserError(f"{path}: {key} template: {exc}") from None
    for name, _grouped in used:
        if name not in offered:
            offer = ", ".join("{" + n + "}" for n in sorted(offered)) or "none"
            raise UserError(f"{path}: {key} template: unknown placeholder {{{name}}} (offered: {offer})")
    for name in sorted(required - {name for name, _ in used}):
        raise UserError(f"{path}: {key} template: missing placeholder {{{name}}}")
    if not text.strip():
        raise UserError(f"{path}: the {key} template is empty")
    return UserText(key, path, text, hashlib.sha256(data).hexdigest())


def load_texts(options: Any) -> list[UserText]:
    """``track_options.protocol_texts`` -> the supplied texts (none when the option is absent)."""
    if options is None:
        return []
    if not isinstance(options, dict):
        raise UserError(
            "field 'track_options.protocol_texts': expected a mapping of text name to file "
            f"({', '.join(TEXTS)})"
        )
    return [load_text(str(key), value) for key, value in options.items()]


def with_texts(profile: ProtocolProfile, texts: list[UserText]) -> ProtocolProfile:
    """``profile`` sending the supplied texts instead of its own. A submission reply replaces
    the reply to the other submit_answer calls too when the profile gives both the same text."""
    changes: dict[str, Any] = {}
    for text in texts:
        field = TEXTS[text.key][0]
        changes[field] = text.text
        if field == "submission_reply" and profile.other_submission_reply == profile.submission_reply:
            changes["other_submission_reply"] = text.text
    return dataclasses.replace(profile, **changes) if changes else profile


def texts_record(texts: list[UserText]) -> dict[str, dict[str, str]]:
    """run.json's record: each supplied text's file and sha256 (of the bytes as read)."""
    return {text.key: {"path": str(text.path), "sha256": text.sha256} for text in texts}
