"""What an Inspect AI user's setting is called here, on the command line and in a config file.

People arrive from ``inspect eval`` with its flags and its field names in their fingers. A
flag `proctor run` does not know (agent/cli/flag_hints.py) and a key a config file may not
hold (agent/inputs/config_problems.py) get the same hint from this one table, naming what does
the same job here, instead of a spelling guess that may point elsewhere (``max_connections``
is not ``max_concurrency``).
"""

from __future__ import annotations

from typing import NamedTuple


class Equivalent(NamedTuple):
    # How `proctor run` says it on the command line.
    flag: str
    # Where a config file says it; None when only the command line can.
    config: str | None


# Inspect's name (its flag without the dashes, hyphens as underscores) -> ours. Only settings
# with a real equivalent.
INSPECT_EQUIVALENTS: dict[str, Equivalent] = {
    "epochs": Equivalent("--trials N", "trials: N"),
    "log_dir": Equivalent("--out DIR", "out: DIR"),
    "temperature": Equivalent("-M temperature=VALUE", "temperature: VALUE in each models entry"),
    "top_p": Equivalent("-M top_p=VALUE", "top_p: VALUE in each models entry"),
    "seed": Equivalent("-M seed=N", "seed: N in each models entry"),
    "max_tokens": Equivalent("-M max_tokens=N", "budget: {max_output_tokens: N}"),
    "model_base_url": Equivalent("-M base_url=URL", "base_url: URL in each models entry"),
    # Inspect's limit is per model provider; Proctor's is per endpoint (base URL), set per model.
    "max_connections": Equivalent(
        "-M max_connections=N (concurrent requests per endpoint)", "max_connections: N in each models entry"
    ),
    "max_samples": Equivalent("--max-concurrency N", "max_concurrency: N"),
    "max_subprocesses": Equivalent("--max-sandbox-concurrency N", "sandbox: {max_concurrent_executions: N}"),
    "max_sandboxes": Equivalent("--max-sandbox-concurrency N", "sandbox: {max_concurrent_executions: N}"),
    "sample_id": Equivalent("--task-id ID", "task_ids: [ID]"),
    "token_limit": Equivalent("--token-cap N", "budget: {token_cap: N}"),
    "no_fail_on_error": Equivalent("--fail-on-error 1.0", None),
}


def inspect_name(text: str) -> str:
    """``--max-connections=4`` or ``max-connections`` -> ``max_connections``."""
    return text.split("=", 1)[0].lstrip("-").replace("-", "_")


def flag_hint(option: str) -> str:
    """``; Inspect's --epochs is --trials N here`` for a known Inspect flag, else ''."""
    name = option.split("=", 1)[0]
    equivalent = INSPECT_EQUIVALENTS.get(inspect_name(option))
    return f"; Inspect's {name} is {equivalent.flag} here" if equivalent else ""


def config_hint(key: str) -> str:
    """``; Inspect's epochs is trials: N here (--trials N)`` for a known Inspect name, else ''."""
    equivalent = INSPECT_EQUIVALENTS.get(inspect_name(key)) if key == key.strip() else None
    if equivalent is None:
        return ""
    if equivalent.config is None:
        return f"; Inspect's {key} is {equivalent.flag} here, on the command line only"
    return f"; Inspect's {key} is {equivalent.config} here; on the command line, {equivalent.flag}"
