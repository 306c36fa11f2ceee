"""The endpoints a run used, as run.json records them, and what a resume may change of them.

Each model and the judge is recorded with the base URL it actually talks to, after the
environment (``OPENAI_BASE_URL``) is applied, user:password and query removed; the key itself is
never recorded, only the name of its variable. Resuming against another URL would mix answers
from two servers in one score, so it is refused unless `--allow-endpoint-change`, which then
leaves an ``endpoint_change`` event in run.json.
"""

from __future__ import annotations

from typing import Any

from proctor.agent.errors import UserError
from proctor.agent.run.preflight import EndpointUse

ENDPOINT_CHANGE = "endpoint_change"


def endpoints_record(uses: list[EndpointUse]) -> list[dict[str, Any]]:
    return [
        {
            "role": use.role,
            "label": use.label,
            "name": use.cfg.name,
            "base_url": use.base_url,
            "api_key_env": use.cfg.api_key_env,
        }
        for use in uses
    ]


def endpoint_changes(previous: Any, current: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each model or judge present in both records whose base URL differs."""
    if not isinstance(previous, list):
        return []  # recorded before endpoints were: nothing to compare against
    before = {
        (entry.get("role"), entry.get("label")): entry.get("base_url")
        for entry in previous
        if isinstance(entry, dict)
    }
    changes = []
    for entry in current:
        key = (entry["role"], entry["label"])
        if key in before and before[key] != entry["base_url"]:
            changes.append(
                {"role": entry["role"], "label": entry["label"], "from": before[key], "to": entry["base_url"]}
            )
    return changes


def refuse_or_record(
    changes: list[dict[str, Any]], *, allowed: bool, run_json: str, now: str
) -> list[dict[str, Any]]:
    """Raise one line when a resume would change an endpoint; with permission, the events to keep."""
    if not changes:
        return []
    if not allowed:
        first = changes[0]
        more = f" (and {len(changes) - 1} more)" if len(changes) > 1 else ""
        raise UserError(
            f"{run_json}: {first['role']} {first['label']} ran against {first['from']}, now "
            f"{first['to']}{more}; resuming would mix two endpoints in one score "
            "(pass --allow-endpoint-change if that is intended)"
        )
    return [{"event": ENDPOINT_CHANGE, "at": now, **change} for change in changes]
