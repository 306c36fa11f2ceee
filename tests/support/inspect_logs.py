"""Reading Inspect logs back, and calling Inspect's types, in a child process.

inspect_ai can patch ``asyncio`` for the whole process (``nest_asyncio.apply()`` when it runs a
coroutine from inside a running loop), so no test imports it into the pytest process: one
xdist worker then runs every later async test on a patched event loop. Each helper here runs
Inspect in a fresh interpreter and hands back plain JSON: the log's own ``model_dump`` plus the
values Inspect computes (a message's ``text``, an output's ``completion``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

_READ_LOGS = """
import json, sys
from inspect_ai.log import read_eval_log

def read(path):
    # Attachments resolved: a long text (a prompt, a reply) is stored once in the log and
    # referred to from the events; a reader sees it whole.
    log = read_eval_log(path, resolve_attachments=True)
    data = log.model_dump(mode="json")
    for sample, dumped in zip(log.samples or [], data.get("samples") or []):
        dumped["output"]["completion"] = sample.output.completion
        for message, dumped_message in zip(sample.messages, dumped["messages"]):
            dumped_message["text"] = message.text
    return data

print(json.dumps([read(path) for path in sys.argv[1:]]))
"""

_CHAT_MESSAGES = """
import json, sys
from proctor.agent.export.inspect_sample import chat_messages

transcript, model = json.loads(sys.stdin.read())
messages = chat_messages(transcript, model)
out = []
for message in messages:
    dumped = message.model_dump(mode="json")
    dumped["text"] = message.text
    out.append(dumped)
print(json.dumps(out))
"""


def inspect_installed() -> bool:
    return importlib.util.find_spec("inspect_ai") is not None


def run_child(script: str, *args: str, stdin: str | None = None) -> Any:
    """Run ``script`` in a new interpreter (Inspect never loads here) and return the JSON of the
    last line it printed."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        },
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def read_log(path: Path) -> dict[str, Any]:
    """``inspect_ai.log.read_eval_log(path)`` as JSON (with each message's text and output's completion)."""
    (result,) = read_logs([path])
    return result


def read_logs(paths: list[Path]) -> list[dict[str, Any]]:
    """:func:`read_log` of each path, all in one child: importing inspect_ai takes seconds of CPU."""
    result: list[dict[str, Any]] = run_child(_READ_LOGS, *map(str, paths))
    return result


def chat_messages_json(transcript: list[Any], model: str) -> list[dict[str, Any]]:
    """``chat_messages(transcript, model)`` run in a child, each message as JSON plus its ``text``."""
    result: list[dict[str, Any]] = run_child(_CHAT_MESSAGES, stdin=json.dumps([transcript, model]))
    return result
