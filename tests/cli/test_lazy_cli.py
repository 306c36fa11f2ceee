"""`proctor --version` and `--help` answer without importing the heavy libraries, and the lazy
root group lists and resolves exactly what importing every command module registers."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer import _click as typer_click
from typer.testing import CliRunner

from proctor.agent.cli import commands_registry, root_help
from proctor.agent.cli.app import app
from proctor.agent.cli.commands_registry import COMMANDS, GROUPS, MODULES, LazyGroup

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "agent" / "cli"
# What made `proctor --version` take 2 s; none is needed to print a version or a command list.
HEAVY = ("openai", "docker", "sympy", "pydantic", "numpy", "yaml", "httpx", "aiohttp", "ray", "mpmath")
# What made `proctor --help` take 0.3 s of CPU (issue 24): typer's rich help renderer and what it
# imports (markdown, syntax highlighting, tracebacks), the live display, package metadata.
SLOW_START = (
    "typer.rich_utils",
    "rich.markdown",
    "markdown_it",
    "rich.syntax",
    "pygments",
    "rich.traceback",
    "rich.pretty",
    "rich.live",
    "importlib.metadata",
)

PROBE = """
import sys
already = set(sys.modules)  # the interpreter's own start (site, .pth files) is not proctor's
sys.argv = ["proctor", *sys.argv[1:]]
from proctor.agent.cli import main
try:
    main()
except SystemExit:
    pass
print("LOADED", sorted(name for name in {heavy!r} if name in sys.modules and name not in already))
"""


@pytest.mark.parametrize("argv", [["--version"], ["--help"], []])
def test_version_and_help_import_no_heavy_module(argv: list[str]) -> None:
    # --version reads the package metadata: that is its answer. Both answer before typer loads;
    # bare `proctor` (a usage error that shows the page) goes through typer.
    unwanted = [
        *HEAVY,
        *(name for name in SLOW_START if argv != ["--version"] or name != "importlib.metadata"),
        *(["typer"] if argv else []),
    ]
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=tuple(unwanted)), *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.splitlines()[-1] == "LOADED []", done.stdout + done.stderr
    if argv == ["--version"]:
        assert done.stdout.startswith("proctor ")
    else:
        assert "quickstart" in done.stdout and "sandbox" in done.stdout
        assert done.stdout.count("Usage:") == 1  # bare `proctor` printed the page twice


def test_sandbox_exec_imports_no_model_client_or_maths(tmp_path: Path) -> None:
    # The `sandbox` group also holds `audit`, whose battery imports the run config's models and
    # with them openai: 1.2 s of every `proctor sandbox exec`'s start until audit_cmd.py
    # imported them inside the command.
    program = tmp_path / "program.py"
    program.write_text("print(1)\n")
    unwanted = ("openai", "yaml", "sympy", "numpy", "mpmath", "ray", "proctor.agent.audit.battery")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE.format(heavy=unwanted),
            "sandbox",
            "exec",
            "--cpus",
            "many",
            str(program),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "--cpus: 'many' is not a number" in done.stderr, done.stderr
    assert done.stdout.splitlines()[-1] == "LOADED []", done.stdout + done.stderr


def test_the_page_without_typer_is_typers_root_page() -> None:
    # What `proctor --help` prints before typer loads (root_help.static_page) against what the
    # typer root itself says (its options, commands, help texts): a command or root option
    # added to one and not the other fails here.
    root = typer.main.get_command(app)
    assert isinstance(root, LazyGroup)
    root._listing = True
    try:
        from_typer = root_help.page_of(root, typer_click.Context(root, info_name="proctor"))
    finally:
        root._listing = False
    assert root_help.static_page() == from_typer
    assert [name for name, _ in from_typer.commands] == [*COMMANDS, *GROUPS]
    assert from_typer.options == [
        ("--version", "Print the version and exit."),
        ("--help", "Show this message and exit."),
    ]


def _registrations() -> dict[str, set[str]]:
    """Each command module -> the apps it registers commands on ("app", "sandbox_app", ...), from source."""
    found: dict[str, set[str]] = {}
    for module in MODULES:
        tree = ast.parse((CLI / f"{module}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                for decorator in node.decorator_list:
                    if (
                        isinstance(decorator, ast.Call)
                        and isinstance(decorator.func, ast.Attribute)
                        and decorator.func.attr == "command"
                        and isinstance(decorator.func.value, ast.Name)
                    ):
                        found.setdefault(module, set()).add(decorator.func.value.id)
    return found


def test_the_table_names_every_command_module_and_the_module_of_every_group() -> None:
    assert sorted(p.stem for p in CLI.glob("*_cmd.py")) == sorted(MODULES)
    registrations = _registrations()
    for group in GROUPS:
        owners = {module for module, apps in registrations.items() if f"{group}_app" in apps}
        assert owners == set(GROUPS[group]), group
    assert {module for module, apps in registrations.items() if "app" in apps} == set(COMMANDS.values())


def test_the_lazy_listing_is_what_an_eager_import_registers() -> None:
    lazy_group = typer.main.get_command(app)
    assert isinstance(lazy_group, LazyGroup)
    lazy_group._listing = True
    listed = [(name, lazy_group.get_command(None, name).help) for name in lazy_group.list_commands(None)]
    lazy_group._listing = False
    commands_registry.load_all()
    eager = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    # (Eager order is import order, which other tests change; the lazy listing's is COMMANDS, GROUPS.)
    assert dict(listed) == {name: command.help for name, command in eager.items()}
    assert [name for name, _ in listed] == [*COMMANDS, *GROUPS]


@pytest.mark.slow
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_a_group_resolved_alone_has_every_subcommand(group: str) -> None:
    commands_registry.load_all()
    eager = typer.main.get_command(app).commands[group].commands  # type: ignore[attr-defined]
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import typer; from proctor.agent.cli.app import app; "
            f"print(sorted(typer.main.get_command(app).get_command(None, {group!r}).commands))",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == str(sorted(eager)), done.stderr


def test_the_root_page_lists_every_option_and_command() -> None:
    # Drawn by root_help.py, not typer's renderer: it must still say all that typer's said.
    result = CliRunner(env={"COLUMNS": "300"}).invoke(app, ["--help"])
    assert result.exit_code == 0, result.output
    page = result.output
    assert "Usage: " in page and " [OPTIONS] COMMAND [ARGS]..." in page
    assert "Sandboxed code-execution agent runtime" in page
    assert re.search(r"--version\s+Print the version and exit\.", page)
    assert re.search(r"--help\s+Show this message and exit\.", page)
    for name in [*COMMANDS, *GROUPS]:
        assert re.search(rf"│ {name}\s+\S", page), name
    # A help text wrapped in its source reads as one sentence; a later paragraph is left out.
    assert "(new judge, fixed endpoint, fixed verification) without calling the answering model" in page
    assert "Exit status: 0 finished" not in page and "Exit status: 0 when every" not in page
    # Every command's exit statuses are one table of their own (exit_codes.py).
    assert re.search(r"Exit status ─", page) and re.search(r"│ 130\s+interrupted", page)
