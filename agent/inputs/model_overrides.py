"""Model entries from the command line laid over a config file's: ``--model``, ``--judge``, ``-M``.

``--model NAME`` beside a config file *merges* into the file's entry instead of replacing it:

* an entry of the file with the same name is used as it is (``--model`` then selects models);
* a file with a single model entry lends its settings (base URL, key variable, API, sampling,
  connection limits, ``extra_body``) to every other ``--model``; its prices are not lent, they
  belong to the model they were written for;
* a file with several entries, none of that name, is replaced: the flags name the run's models,
  as flags override a config. They are lent only the settings every entry of the file agrees
  on (one endpoint and key for all, say); a setting the entries differ in is not lent, since
  which entry to take it from would be a guess.

``--judge NAME`` merges into the file's ``judge`` the same way. ``-M KEY=VALUE`` (repeatable)
then sets a setting on every answering model, typed and validated like the config field it
names (``-M temperature=0.6 -M seed=7 -M base_url=http://127.0.0.1:8000/v1``);
``--judge-setting KEY=VALUE`` does the same for the judge.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlparse

from pydantic import ValidationError

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import BudgetConfig, ModelConfig

# Settings a model is given per name, never lent to another model.
_NOT_LENT = ("name", "input_price_per_mtok", "output_price_per_mtok")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# -M keys (hyphens and underscores alike) -> the ModelConfig field they set.
MODEL_SETTINGS: dict[str, str] = {
    "temperature": "temperature",
    "top_p": "top_p",
    "seed": "seed",
    "reasoning_effort": "reasoning_effort",
    "base_url": "base_url",
    "api_key_env": "api_key_env",
    "key_env": "api_key_env",
    "api": "api",
    "max_connections": "max_connections",
    "request_timeout_s": "request_timeout_s",
    "max_retries": "max_retries",
    "input_price_per_mtok": "input_price_per_mtok",
    "output_price_per_mtok": "output_price_per_mtok",
}
# -M keys that set the run's budget, which every model shares.
BUDGET_SETTINGS: dict[str, str] = {
    "max_tokens": "max_output_tokens",
    "max_output_tokens": "max_output_tokens",
}
KNOWN_KEYS = ", ".join(sorted({*MODEL_SETTINGS, *BUDGET_SETTINGS}))


def _as_entry(value: Any) -> Any:
    return {"name": value} if isinstance(value, str) else value


def _entry_name(entry: Any) -> Any:
    return entry.get("name") if isinstance(entry, dict) else None


def _lent(entry: dict[str, Any], name: str) -> dict[str, Any]:
    kept = {key: value for key, value in entry.items() if key not in _NOT_LENT}
    return {"name": name, **kept}


def merge_models(file_models: Any, flag_models: list[str]) -> list[Any]:
    """The run's model entries when ``--model`` is given beside ``file_models``."""
    if not isinstance(file_models, list) or not file_models:
        return [{"name": name} for name in flag_models]
    entries = [_as_entry(entry) for entry in file_models]
    merged: list[Any] = []
    for name in flag_models:
        same = [entry for entry in entries if _entry_name(entry) == name]
        if same:
            merged.append(same[0])
        elif len(entries) == 1 and isinstance(entries[0], dict):
            merged.append(_lent(entries[0], name))
        else:
            merged.append(_lent(_shared_settings(entries), name))
    return merged


def _shared_settings(entries: list[Any]) -> dict[str, Any]:
    """The settings every entry holds with the same value (an entry that is not a mapping, or
    names no setting, shares none)."""
    if not all(isinstance(entry, dict) for entry in entries):
        return {}
    first, *others = entries
    return {
        key: value
        for key, value in first.items()
        if key not in _NOT_LENT and all(key in other and other[key] == value for other in others)
    }


def merge_judge(file_judge: Any, flag_judge: str) -> Any:
    """The judge entry when ``--judge`` is given beside the file's ``judge``."""
    entry = _as_entry(file_judge)
    if not isinstance(entry, dict):
        return {"name": flag_judge}
    if entry.get("name") == flag_judge:
        return entry
    return _lent(entry, flag_judge)


def _key(raw: str) -> str:
    return raw.strip().lower().replace("-", "_")


def _first_problem(error: ValidationError) -> str:
    problem = error.errors(include_url=False)[0]
    return str(problem.get("msg", "invalid")).removeprefix("Value error, ")


def parse_model_settings(items: list[str], flag: str = "-M") -> tuple[dict[str, Any], dict[str, Any]]:
    """``-M KEY=VALUE`` items -> (model fields, budget fields), typed; one-line UserError naming
    the item otherwise."""
    model_fields: dict[str, Any] = {}
    budget_fields: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for item in items:
        raw_key, sep, value = item.partition("=")
        key = _key(raw_key)
        if not sep or not key:
            raise UserError(f"{flag} {item}: expected KEY=VALUE (keys: {KNOWN_KEYS})")
        if key not in MODEL_SETTINGS and key not in BUDGET_SETTINGS:
            raise UserError(f"{flag} {item}: unknown model setting {raw_key.strip()!r} (keys: {KNOWN_KEYS})")
        target = MODEL_SETTINGS.get(key) or BUDGET_SETTINGS[key]
        if target in seen:
            raise UserError(f"{flag} {item}: {target} is already set by {flag} {seen[target]}")
        seen[target] = item
        if key in MODEL_SETTINGS:
            model_fields[target] = _typed_model_value(f"{flag} {item}", target, value)
        else:
            budget_fields[target] = _typed_budget_value(f"{flag} {item}", target, value)
    return model_fields, budget_fields


def _typed_model_value(where: str, field: str, value: str) -> Any:
    if field == "base_url":
        parsed = urlparse(value)
        if parsed.scheme not in {"http", "https"} or not parsed.hostname:
            raise UserError(f"{where}: base_url must be an http(s) URL such as http://127.0.0.1:8000/v1")
    if field == "api_key_env" and not _ENV_NAME.match(value):
        raise UserError(
            f"{where}: api_key_env names an environment variable (letters, digits, _), not the key itself"
        )
    try:
        checked = ModelConfig.model_validate({"name": "openai/settings-check", field: value})
    except ValidationError as exc:
        raise UserError(f"{where}: {field}: {_first_problem(exc)}") from None
    return getattr(checked, field)


def _typed_budget_value(where: str, field: str, value: str) -> Any:
    try:
        checked = BudgetConfig.model_validate({field: value})
    except ValidationError as exc:
        raise UserError(f"{where}: {field}: {_first_problem(exc)}") from None
    return getattr(checked, field)


def apply_judge_settings(judge: Any, items: list[str]) -> dict[str, Any]:
    """``--judge-setting KEY=VALUE`` items laid over the judge entry (same keys as ``-M``,
    except the run-wide ``max_tokens``)."""
    if not isinstance(judge, dict):
        raise UserError(f"--judge-setting {items[0]}: this run has no judge entry to set (give --judge NAME)")
    model_fields, budget_fields = parse_model_settings(items, "--judge-setting")
    if budget_fields:
        raise UserError(
            f"--judge-setting: {', '.join(budget_fields)} is the run's budget, not the judge's; "
            "give it with -M"
        )
    return {**judge, **model_fields}
