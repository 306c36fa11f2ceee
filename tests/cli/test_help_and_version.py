"""`proctor --version`, and help pages that never show a Python type name."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer.main
from typer.testing import CliRunner

from proctor.agent.cli import commands_registry
from proctor.agent.cli.app import app

# The root group imports commands lazily; walking every command's help needs them all.
commands_registry.load_all()

REPO = Path(__file__).resolve().parents[2]
# What typer prints when left alone: <bool>, <str>, <list[str]>, <int range>, <Path>...
PYTHON_TYPE = re.compile(
    r"<\s*(?:bool|str|int|float|bytes|path|file|directory|datetime|uuid|Path|NoneType|Any|"
    r"(?:list|tuple|dict|set|Optional|Union)\[[^>]*|[a-z]+ range)\s*>|typing\.|\bNoneType\b|<class "
)


def command_paths() -> list[list[str]]:
    root = typer.main.get_command(app)
    paths: list[list[str]] = [[]]

    def walk(command: click.Command, prefix: list[str]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            paths.append([*prefix, name])
            walk(sub, [*prefix, name])

    walk(root, [])
    return paths


def test_every_command_is_scanned() -> None:
    paths = {" ".join(p) for p in command_paths()}
    assert {"", "run", "quickstart", "sandbox", "sandbox exec", "bench", "score eed"} <= paths


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "proctor")
def test_help_names_no_python_types(path: list[str]) -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    found = PYTHON_TYPE.findall(result.output)
    assert not found, f"proctor {' '.join(path)} --help shows {found}"


def test_run_help_shows_the_new_options_with_plain_placeholders() -> None:
    output = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["run", "--help"]).output
    for needle in (
        "--limit",
        "N|A-B",
        "--task-id",
        "ID",
        "--filter",
        "FIELD=VALUE",
        "-M",
        "KEY=VALUE",
        "--dry-run",
        "EFFORT",
        "xhigh",
        "INTEGER",
        "PATH",
    ):
        assert needle in output, needle


def test_version_comes_from_the_package_metadata() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", "from proctor.agent.cli import main; main()", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"proctor {importlib.metadata.version('proctor')}\n"
    assert done.stderr == ""
