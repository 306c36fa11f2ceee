"""What an Inspect AI user's flag is called here: the hint after "No such option".

People arrive from ``inspect eval`` with its flags in their fingers; the error names the flag
that does the same job in `proctor run` instead of leaving them to read the whole help page.
"""

from __future__ import annotations

# Inspect's flag -> the `proctor run` way to say it. Only flags with a real equivalent.
INSPECT_FLAGS: dict[str, str] = {
    "--epochs": "--trials N",
    "--log-dir": "--out DIR",
    "--temperature": "-M temperature=VALUE",
    "--top-p": "-M top_p=VALUE",
    "--seed": "-M seed=N",
    "--max-tokens": "-M max_tokens=N",
    "--model-base-url": "-M base_url=URL",
    # Inspect's limit is per model provider; Proctor's is per endpoint (base URL), set per model.
    "--max-connections": "-M max_connections=N (concurrent requests per endpoint)",
    "--max-samples": "--max-concurrency N",
    "--max-subprocesses": "--max-sandbox-concurrency N",
    "--max-sandboxes": "--max-sandbox-concurrency N",
    "--sample-id": "--task-id ID",
    "--token-limit": "--token-cap N",
    "--no-fail-on-error": "--fail-on-error 1.0",
}


def hint_for(option: str) -> str:
    """`` (Inspect's --epochs is --trials N here)`` for a known Inspect flag, else ''."""
    # "--epochs=3" reaches the error as "--epochs".
    name = option.split("=", 1)[0]
    replacement = INSPECT_FLAGS.get(name)
    return f"; Inspect's {name} is {replacement} here" if replacement else ""
