"""Which module defines each command, and what each command's help says, without importing
typer or any command: what `proctor --help` and `proctor --version` need (root_help.py), and
the lazy root group's table (commands_registry.py)."""

from __future__ import annotations

import functools
import importlib
from pathlib import Path
from typing import Any

# Every command module, in the order the eager registry imported them (the order of --help).
MODULES = (
    "audit_cmd",
    "bench_eed_cmd",
    "bench_loop_cmd",
    "bench_submission_cmd",
    "completion_cmd",
    "export_cmd",
    "image_cmd",
    "list_cmd",
    "rescore_cmd",
    "run_cmd",
    "sandbox_cmd",
    "score_cmd",
    "validate_cmd",
    "view_cmd",
)
# Top-level commands -> the module that defines each (decorated ``@app.command("NAME")``).
COMMANDS: dict[str, str] = {
    "export": "export_cmd",
    "rescore": "rescore_cmd",
    "run": "run_cmd",
    "quickstart": "run_cmd",
    "validate": "validate_cmd",
    "view": "view_cmd",
    "compare": "view_cmd",
    "completion": "completion_cmd",
}
# Sub-command groups (created in app.py) -> the modules that add commands to each.
GROUPS: dict[str, tuple[str, ...]] = {
    "sandbox": ("audit_cmd", "sandbox_cmd"),
    "image": ("image_cmd",),
    "bench": ("bench_eed_cmd", "bench_loop_cmd", "bench_submission_cmd", "sandbox_cmd"),
    "score": ("score_cmd",),
    "list": ("list_cmd",),
}
_HERE = Path(__file__).resolve().parent


def load(*modules: str) -> None:
    for module in modules:
        importlib.import_module(f"proctor.agent.cli.{module}")


def load_all() -> None:
    load(*MODULES)


@functools.cache
def _parsed(module: str) -> Any:
    import ast  # only for the help pages: --version does not parse anything

    # Once per module: run_cmd.py and view_cmd.py each define two commands.
    return ast.parse((_HERE / f"{module}.py").read_text(encoding="utf-8"))


def docstring(module: str, name: str) -> str:
    """The docstring of the function ``module`` registers as command ``name``, read from source."""
    import ast

    tree = _parsed(module)
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            if (
                isinstance(decorator, ast.Call)
                and isinstance(decorator.func, ast.Attribute)
                and decorator.func.attr == "command"
                and decorator.args
                and isinstance(decorator.args[0], ast.Constant)
                and decorator.args[0].value == name
            ):
                return ast.get_docstring(node) or ""
    raise LookupError(f"{module}.py registers no command {name!r}")
