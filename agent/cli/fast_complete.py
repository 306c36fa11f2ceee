"""The shell's TAB, answered from completion_table.json: no typer, no command imported.

The scripts `proctor completion SHELL` prints are typer's; they call ``proctor`` with the words
typed so far in the environment (bash: COMP_WORDS/COMP_CWORD; zsh and fish:
_TYPER_COMPLETE_ARGS) and read the answer in typer's formats, which this module writes. It
completes command names, option names, option values (fixed lists, and --task-id from the task
file named on the same line) and fixed argument values; paths are left to the shell.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

# Built from the app by completion_build.py (a test keeps it equal).
TABLE_PATH = Path(__file__).resolve().parent / "completion_table.json"
# A task file this large is not read for its ids: completion must answer at once.
MAX_TASK_FILE_BYTES = 20 * 1024 * 1024
# An id with whitespace or a control character would break the shell's word list.
_SHELL_SAFE = re.compile(r"^[^\s\x00-\x1f\x7f]+$")


def split_words(text: str) -> list[str]:
    """The words of a command line as the shell gave them (click's rule: an unclosed quote
    keeps what was typed)."""
    lex = shlex.shlex(text, posix=True)
    lex.whitespace_split = True
    lex.commenters = ""
    words: list[str] = []
    try:
        for token in lex:
            words.append(token)
    except ValueError:
        words.append(lex.token)
    return words


def candidates(args: list[str], incomplete: str, table: dict[str, Any]) -> list[tuple[str, str]]:
    """(value, help) pairs for the word being typed, after the words ``args``."""
    command = table
    positional = 0
    awaiting: dict[str, Any] | None = None
    for word in args:
        if awaiting is not None:
            awaiting = None
            continue
        if word.startswith("-") and word != "-":
            name = word.split("=", 1)[0]
            option = command["options"].get(name)
            if option is not None and option["value"] and "=" not in word:
                awaiting = option
            continue
        sub = command.get("commands", {}).get(word)
        if sub is not None and positional == 0:
            command = sub
            continue
        positional += 1
    if awaiting is not None:
        return _values(awaiting, incomplete, args)
    if incomplete.startswith("-"):
        name, equals, value = incomplete.partition("=")
        option = command["options"].get(name)
        if equals and option is not None and option["value"]:
            return [(f"{name}={v}", h) for v, h in _values(option, value, args)]
        return [(n, o["help"]) for n, o in command["options"].items() if n.startswith(incomplete)]
    if "commands" in command and positional == 0:
        return [(n, c["help"]) for n, c in command["commands"].items() if n.startswith(incomplete)]
    arguments = command.get("arguments") or []
    if positional < len(arguments) and isinstance(arguments[positional], list):
        return [(v, "") for v in arguments[positional] if v.startswith(incomplete)]
    return []


def _values(option: dict[str, Any], incomplete: str, args: list[str]) -> list[tuple[str, str]]:
    values = option.get("values")
    if values == "task_ids":
        values = task_ids(args)
    if not isinstance(values, list):
        return []  # a path, a number, a name: the shell's own completion
    return [(str(v), "") for v in values if str(v).startswith(incomplete)]


def task_ids(args: list[str]) -> list[str]:
    """The ids of the task file on the line: --tasks FILE, or the tasks of the config file."""
    path: Path | None = None
    for index, word in enumerate(args):
        if word == "--tasks" and index + 1 < len(args):
            path = Path(args[index + 1])
        elif word.startswith("--tasks="):
            path = Path(word.split("=", 1)[1])
    if path is None:
        config = next((Path(w) for w in args if w.endswith((".yaml", ".yml"))), None)
        path = _tasks_of_config(config) if config is not None else None
    if path is None:
        return []
    ids = [i for i in _ids_in(path) if _SHELL_SAFE.match(i)]
    return list(dict.fromkeys(ids))


def _tasks_of_config(config: Path) -> Path | None:
    data = _load(config)
    tasks = data.get("tasks") if isinstance(data, dict) else None
    return config.parent / tasks if isinstance(tasks, str) else None


def _load(path: Path) -> Any:
    try:
        if path.stat().st_size > MAX_TASK_FILE_BYTES:
            return None
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml  # only for a YAML file: ~20 ms

            return yaml.safe_load(text)
        if path.suffix == ".json":
            return json.loads(text)
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except Exception:  # a file that does not parse offers nothing; the command says why
        return None


def _ids_in(path: Path) -> list[str]:
    data = _load(path)
    if isinstance(data, dict):
        data = data.get("tasks")
    if not isinstance(data, list):
        return []
    return [str(row["id"]) for row in data if isinstance(row, dict) and isinstance(row.get("id"), str | int)]


def _zsh_escape(text: str) -> str:
    return (
        text.replace('"', '""')
        .replace("'", "''")
        .replace("$", "\\$")
        .replace("`", "\\`")
        .replace(":", r"\\:")
    )


def answer(shell: str, environ: dict[str, str] | os._Environ[str]) -> tuple[str, int]:
    """What to print for the shell, and the exit status (fish's is-args asks by status)."""
    table = json.loads(TABLE_PATH.read_text(encoding="utf-8"))
    if shell == "bash":
        words = split_words(environ.get("COMP_WORDS", ""))
        index = int(environ.get("COMP_CWORD", "0") or 0)
        args, incomplete = words[1:index], (words[index] if index < len(words) else "")
    else:
        line = environ.get("_TYPER_COMPLETE_ARGS", "")
        words = split_words(line)[1:]
        if words and not line.endswith(" "):
            args, incomplete = words[:-1], words[-1]
        else:
            args, incomplete = words, ""
    found = candidates(args, incomplete, table)
    if shell == "bash":
        return "\n".join(value for value, _ in found), 0
    if shell == "zsh":
        if not found:
            return "_files", 0
        items = "\n".join(
            f'"{_zsh_escape(v)}":"{_zsh_escape(h)}"' if h else f'"{_zsh_escape(v)}"' for v, h in found
        )
        return f"_arguments '*: :(({items}))'", 0
    action = environ.get("_TYPER_COMPLETE_FISH_ACTION", "")
    if action == "is-args":
        return "", 0 if found else 1
    return "\n".join(f"{v}\t{' '.join(h.split())}" if h else v for v, h in found), 0


def main(instruction: str) -> None:
    """``instruction`` is the completion variable's value: ``complete_bash`` and the like."""
    shell = instruction.removeprefix("complete_")
    if shell not in ("bash", "zsh", "fish"):
        raise SystemExit(1)
    text, status = answer(shell, os.environ)
    if text:
        sys.stdout.write(text + "\n")
    raise SystemExit(status)
