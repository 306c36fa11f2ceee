"""Build the completion table (completion_table.py) from the typer app itself.

Run ``python3 -m proctor.agent.cli.completion_build > agent/cli/completion_table.json`` after a
command, an option or a value list changes; tests/cli/test_completion_values.py fails while the
committed table differs from what this builds. JSON, not Python: reading it costs the same
whether or not the interpreter may cache bytecode (PYTHONDONTWRITEBYTECODE).

The table lets the shell's TAB be answered without importing typer or any command
(fast_complete.py): completing ``proctor run --tr`` imported the run command (the openai SDK,
pydantic) and took 3.6-6.1 s.
"""

from __future__ import annotations

import enum
import json
import typing
from collections.abc import Callable
from typing import Any

# The values an option takes that its type does not say (the CLI checks them itself, for a
# one-line error): read from the constants the commands check against, so they cannot drift.
# Keyed by option, or by "command path option" where commands take different values.


def _tracks() -> list[str]:
    from proctor.agent.tracks.registry import track_names

    return track_names()


def _protocols() -> list[str]:
    from proctor.agent.tracks.frontiermath.profiles import PROFILES

    return list(PROFILES)


def _efforts() -> list[str]:
    from proctor.agent.model.efforts import REASONING_EFFORTS

    return list(REASONING_EFFORTS)


def _backends() -> list[str]:
    from proctor.sandbox.factory import BACKENDS

    return list(BACKENDS)


def _runtimes() -> list[str]:
    from proctor.sandbox.docker.runtimes import RUNTIMES

    return list(RUNTIMES)


def _engine_paths() -> list[str]:
    from proctor.sandbox.api import ENGINE_PATH_CHOICES

    return list(ENGINE_PATH_CHOICES)


def _isolations() -> list[str]:
    from proctor.sandbox.api import ISOLATIONS

    return list(ISOLATIONS)


def _eed_modes() -> list[str]:
    from proctor.agent.scoring.latex_preprocess import MODES

    return list(MODES)


def _formats() -> list[str]:
    from proctor.agent.cli.export_cmd import FORMATS

    return list(FORMATS)


def _audit_modes() -> list[str]:
    from proctor.agent.cli.run_cmd import AUDIT_MODES

    return list(AUDIT_MODES)


def _audit_backends() -> list[str]:
    from proctor.agent.cli.audit_cmd import AUDIT_BACKENDS

    return list(AUDIT_BACKENDS)


def _validate_backends() -> list[str]:
    return ["auto", "docker", "local"]


VALUES: dict[str, Callable[[], list[str]]] = {
    "--track": _tracks,
    "--protocol": _protocols,
    "--reasoning-effort": _efforts,
    "--judge-effort": _efforts,
    "--backend": _backends,
    "--runtime": _runtimes,
    "--engine-path": _engine_paths,
    "--isolation": _isolations,
    "--mode": _eed_modes,
    "--format": _formats,
    "--audit": _audit_modes,
    "proctor sandbox audit --backend": _audit_backends,
    "proctor validate --backend": _validate_backends,
    "proctor quickstart --backend": _validate_backends,
    "proctor bench sandbox --backend": lambda: ["docker", "ray"],
}
# Options whose values are the ids of the task file on the same command line (--tasks FILE,
# or the config file's tasks).
TASK_ID_OPTIONS = frozenset({"--task-id"})


def _first_line(text: str | None) -> str:
    return " ".join((text or "").strip().split("\n\n")[0].split())


def _values_of(path: str, name: str, param: Any) -> list[str] | str | None:
    # An Enum annotation is typer's choice (`proctor completion SHELL`).
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, enum.Enum):
            return [str(member.value) for member in candidate]
    if name in TASK_ID_OPTIONS:
        return "task_ids"
    source = VALUES.get(f"{path} {name}") or VALUES.get(name)
    return source() if source is not None else None


def _command(command: Any, path: str, ctx: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"help": _first_line(command.short_help or command.help)}
    options: dict[str, Any] = {}
    arguments: list[Any] = []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            arguments.append(_values_of(path, param.name, param))
            continue
        takes_value = not param.is_flag and not getattr(param, "count", False)
        for name in [*param.opts, *param.secondary_opts]:
            options[name] = {
                "help": _first_line(param.help),
                "value": takes_value,
                "values": _values_of(path, param.opts[0], param) if takes_value else None,
            }
    entry["options"] = options
    entry["arguments"] = arguments
    subcommands = getattr(command, "commands", None)
    if subcommands is not None or hasattr(command, "list_commands"):
        entry["commands"] = {}
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            entry["commands"][name] = _command(sub, f"{path} {name}", ctx)
    return entry


def build_table() -> dict[str, Any]:
    import typer
    from typer import _click

    from proctor.agent.cli.app import app
    from proctor.agent.cli.commands_registry import load_all

    load_all()
    root = typer.main.get_command(app)
    return _command(root, "proctor", _click.Context(root, info_name="proctor"))


def render_table(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(render_table(build_table()), end="")
