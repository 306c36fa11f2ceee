"""The endpoints a run used, as run.json records them, and what a resume may change of them.

Each model and the judge is recorded with the base URL it actually talks to, after the
environment (``OPENAI_BASE_URL``) is applied, user:password and credential-like query values
removed; the key itself is never recorded, only the name of its variable.

A resume talks to the recorded URL, not to whatever the new shell's environment says
(:func:`pin_recorded_endpoints`): a model or judge whose URL came from the environment is pinned
to the one run.json names, and only its key is read from the environment again. A URL the user
names on purpose (``-M base_url=...``, ``--judge-setting base_url=...``, a config file) that
differs would mix answers from two servers in one score, so it is refused unless
`--allow-endpoint-change`, which then leaves an ``endpoint_change`` event in run.json.
"""

from __future__ import annotations

import os
from typing import Any

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import ModelConfig, RunConfig
from proctor.agent.model.endpoint import (
    LOCAL_SERVER_URL,
    REDACTED,
    configured_base_url,
    is_loopback,
    without_secrets,
)
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


def _pinned(cfg: ModelConfig, role: str, recorded: Any, run_json: str) -> ModelConfig:
    """``cfg`` talking to ``recorded`` when its URL came from the environment; else unchanged."""
    if cfg.base_url or not isinstance(recorded, str) or recorded == LOCAL_SERVER_URL:
        # Named on purpose (compared, and refused if different, by the caller), Proctor's own
        # llama.cpp server (a new port each session), or nothing recorded to pin to.
        return cfg
    from_environment = configured_base_url(cfg)
    if without_secrets(from_environment) == recorded:
        # The same endpoint: keep the environment's spelling, which may carry credentials
        # that run.json left out.
        return cfg
    if REDACTED in recorded or not recorded.startswith(("http://", "https://")):
        raise UserError(
            f"{run_json}: {role} {cfg.name} ran against {recorded}, whose credentials run.json does "
            f"not keep, and the environment now says {without_secrets(from_environment)}; give the "
            "full URL again (OPENAI_BASE_URL or a base_url setting)"
        )
    if not os.environ.get(cfg.api_key_env) and not is_loopback(recorded):
        # A URL from the environment needed this key in the first session; pinning it must not
        # quietly turn that into the keyless placeholder a named URL is allowed.
        raise UserError(
            f"{role} {cfg.name!r}: the key variable {cfg.api_key_env} is not set; set it to the "
            f"API key for {recorded} (the endpoint this run used, from {run_json})"
        )
    return cfg.model_copy(update={"base_url": recorded})


def pin_recorded_endpoints(config: RunConfig, previous: Any, labels: list[str], run_json: str) -> RunConfig:
    """``config`` with every model and judge whose URL comes from the environment pointed at the
    URL ``previous`` (run.json's ``endpoints``) records for it.

    A new shell's ``OPENAI_BASE_URL`` (or its absence, meaning OpenAI's) says nothing about
    where this run's first samples were answered; sending the rest elsewhere would mix two
    servers in one score. Keys still come from each entry's ``api_key_env``.
    """
    if not isinstance(previous, list):
        return config  # recorded before endpoints were: nothing to pin to
    recorded = {
        (entry.get("role"), entry.get("label")): entry.get("base_url")
        for entry in previous
        if isinstance(entry, dict)
    }
    models = [
        _pinned(cfg, "model", recorded.get(("model", label)), run_json)
        for label, cfg in zip(labels, config.models, strict=True)
    ]
    judge = config.judge
    if judge is not None:
        judge = _pinned(judge, "judge", recorded.get(("judge", judge.name)), run_json)
    if judge is config.judge and all(new is old for new, old in zip(models, config.models, strict=True)):
        return config
    return config.model_copy(update={"models": models, "judge": judge})


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
            f"{run_json}: {first['role']} {first['label']} ran against {first['from']}, and its "
            f"base_url now names {first['to']}{more}; resuming would mix two endpoints in one score "
            "(drop that base_url to resume against the recorded one, or pass "
            "--allow-endpoint-change if mixing is intended)"
        )
    return [{"event": ENDPOINT_CHANGE, "at": now, **change} for change in changes]
