"""Shell completion (issue 24): `proctor completion SHELL` prints a script the shell accepts, and
the protocol that script speaks completes commands and options, in a real bash, through a real
`proctor` process, without importing a command to complete the command names."""

from __future__ import annotations

import ast
import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.agent.cli import COMPLETE_VAR

REPO = Path(__file__).resolve().parents[2]
ENTRY = "from proctor.agent.cli import main; main()"


def proctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", ENTRY, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


@functools.cache
def script(shell: str) -> str:
    done = proctor("completion", shell)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def proctor_on_path(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An environment whose PATH has a `proctor` that is this checkout's."""
    bin_dir = tmp_path_factory.mktemp("bin")
    launcher = bin_dir / "proctor"
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    launcher.write_text(f'#!/bin/sh\nPYTHONPATH="{pythonpath}" exec "{sys.executable}" -c "{ENTRY}" "$@"\n')
    launcher.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def bash_complete(line: str, env: dict[str, str]) -> list[str]:
    """What TAB offers at the end of ``line``: the printed script sourced in bash, its function
    called as bash's programmable completion calls it."""
    program = f"""
set -e
source <(proctor completion bash)
read -r -a COMP_WORDS <<< {line!r}
{"COMP_WORDS+=('')" if line.endswith(" ") else ""}
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
complete -p proctor >/dev/null
_proctor_completion proctor
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    done = subprocess.run(
        ["bash", "--norc", "-c", program], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    return [item for item in done.stdout.splitlines() if item]


def test_the_bash_script_is_valid_bash_and_names_proctor() -> None:
    text = script("bash")
    checked = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    assert "complete -o default -F _proctor_completion proctor" in text and COMPLETE_VAR in text


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_the_zsh_script_is_valid_zsh() -> None:
    checked = subprocess.run(["zsh", "-n"], input=script("zsh"), capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_the_fish_script_is_valid_fish() -> None:
    checked = subprocess.run(
        ["fish", "--no-execute"], input=script("fish"), capture_output=True, text=True, timeout=30
    )
    assert checked.returncode == 0, checked.stderr


def test_zsh_and_fish_scripts_ask_proctor_for_their_completions() -> None:
    assert "compdef _proctor_completion proctor" in script("zsh") and COMPLETE_VAR in script("zsh")
    assert "complete --command proctor" in script("fish") and COMPLETE_VAR in script("fish")


def test_an_unknown_shell_is_a_one_line_error() -> None:
    done = proctor("completion", "tcsh")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "tcsh" in done.stderr


def test_bash_completes_command_names_and_the_roots_options(proctor_on_path: dict[str, str]) -> None:
    assert bash_complete("proctor ru", proctor_on_path) == ["run"]
    assert bash_complete("proctor re", proctor_on_path) == ["rescore"]
    offered = bash_complete("proctor ", proctor_on_path)
    assert {"run", "quickstart", "completion", "sandbox", "list"} <= set(offered)
    # Options of the root, and a light command's arguments.
    assert bash_complete("proctor --ver", proctor_on_path) == ["--version"]
    assert bash_complete("proctor completion z", proctor_on_path) == ["zsh"]


# Completing a command's options imports that command, as running it would: `run` brings in
# the openai SDK, seconds of CPU on a loaded machine, hence slow.
@pytest.mark.slow
def test_bash_completes_options_and_subcommands(proctor_on_path: dict[str, str]) -> None:
    # Both spellings of the one option.
    assert bash_complete("proctor run --li", proctor_on_path) == ["--limit", "--limit-tasks"]
    assert bash_complete("proctor run --dry", proctor_on_path) == ["--dry-run"]
    assert "--resume" in bash_complete("proctor run --", proctor_on_path)
    assert set(bash_complete("proctor sandbox ", proctor_on_path)) >= {"exec", "cleanup"}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_through_the_printed_script(proctor_on_path: dict[str, str]) -> None:
    def offered(line: str) -> list[str]:
        # `complete -C LINE` asks fish for what TAB would offer; each line is "value<TAB>help".
        done = subprocess.run(
            ["fish", "--no-config", "-c", f"proctor completion fish | source; complete -C {line!r}"],
            capture_output=True,
            text=True,
            timeout=120,
            env=proctor_on_path,
        )
        assert done.returncode == 0, done.stderr
        return [item.split("\t")[0] for item in done.stdout.splitlines()]

    assert offered("proctor ru") == ["run"]
    assert offered("proctor list ") == ["subjects", "tasks", "tracks"]
    assert offered("proctor run --dry") == ["--dry-run"]


@pytest.mark.parametrize(
    ("shell", "env"),
    [
        ("zsh", {"_TYPER_COMPLETE_ARGS": "proctor ru"}),
        ("fish", {"_TYPER_COMPLETE_ARGS": "proctor ru", "_TYPER_COMPLETE_FISH_ACTION": "get-args"}),
    ],
)
def test_the_zsh_and_fish_protocols_complete_too(shell: str, env: dict[str, str]) -> None:
    # What the zsh and fish scripts send (typer's protocol), without the shell itself.
    done = proctor(env={COMPLETE_VAR: f"complete_{shell}", **env})
    assert done.returncode == 0, done.stderr
    assert "run" in done.stdout and "rescore" not in done.stdout


PROBE = """
import os, sys
sys.argv = ["proctor"]
from proctor.agent.cli import main
try:
    main()
except SystemExit:
    pass
print("LOADED", sorted(name for name in sys.modules if name.startswith("proctor.agent.cli.")))
"""


def test_completing_a_command_name_imports_no_command() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, COMPLETE_VAR: "complete_bash", "COMP_WORDS": "proctor r", "COMP_CWORD": "1"},
    )
    assert done.returncode == 0, done.stderr
    offered, loaded = done.stdout.splitlines()[:-1], done.stdout.splitlines()[-1]
    assert offered == ["rescore", "run"]
    assert not [name for name in ast.literal_eval(loaded[len("LOADED ") :]) if name.endswith("_cmd")], loaded
