"""What an Inspect AI user's flag is called here: the hint after "No such option".

People arrive from ``inspect eval`` with its flags in their fingers; the error names the flag
that does the same job in `proctor run` instead of leaving them to read the whole help page.
The table is agent/inputs/inspect_names.py's, which a config file's keys get their hints from too.
"""

from __future__ import annotations

from proctor.agent.inputs.inspect_names import INSPECT_EQUIVALENTS, flag_hint

# Inspect's flag -> the `proctor run` way to say it.
INSPECT_FLAGS: dict[str, str] = {
    "--" + name.replace("_", "-"): equivalent.flag for name, equivalent in INSPECT_EQUIVALENTS.items()
}


def hint_for(option: str) -> str:
    """``; Inspect's --epochs is --trials N here`` for a known Inspect flag, else ''."""
    # "--epochs=3" reaches the error as "--epochs".
    return flag_hint(option) if option.split("=", 1)[0] in INSPECT_FLAGS else ""
