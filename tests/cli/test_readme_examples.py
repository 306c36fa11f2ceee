"""Every `proctor run` example in README.md runs, as written, from a fresh checkout.

Each example is read out of README.md's code blocks (backslash continuations joined, `#`
comments dropped) and run as a `proctor` subprocess in a fresh working directory holding only
the repository's `configs/` (what a clone has), against a scripted OpenAI-compatible server on
127.0.0.1 reached the way the README documents: OPENAI_BASE_URL and OPENAI_API_KEY. Only tiny
limits are appended (one trial, one task, a small token cap); flags given later override the
example's own, which is the documented precedence.

Conventions, so the README can stay readable:
* `proctor run ... --flag` abbreviates the first complete run example plus `--flag`;
* an example with `--resume --out DIR` runs after the example that wrote DIR, in its directory.

Examples whose track runs code need the sandbox image: they carry the docker marker.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from proctor.agent.results.records import ERROR_OUTCOMES
from tests.support.scripted_server import Reply, ScriptedServer, Step, ToolCallSpec

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PROCTOR = [sys.executable, "-c", "from proctor.agent.cli import main; main()"]
TINY = [
    "--trials",
    "1",
    "--limit",
    "1",
    "--max-concurrency",
    "1",
    "--token-cap",
    "20000",
    "--force-submit-at",
    "10000",
]
_FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def run_examples(text: str) -> list[list[str]]:
    """The argv of each `proctor run` example in the markdown's code blocks."""
    examples: list[list[str]] = []
    for block in _FENCE.findall(text):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            argv = shlex.split(line, comments=True)
            if argv[:2] == ["proctor", "run"]:
                examples.append(argv[2:])
    return examples


def expand(example: list[str], first_complete: list[str]) -> list[str]:
    if example[:1] == ["..."]:
        return [*first_complete, *example[1:]]
    return example


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv and argv.index(name) + 1 < len(argv) else None


def needs_sandbox(argv: list[str]) -> bool:
    track = _option(argv, "--track")
    config = next((a for a in argv if a.endswith((".yaml", ".yml"))), None)
    options: dict[str, Any] = {}
    if track is None and config is not None:
        data = yaml.safe_load((REPO / config).read_text()) or {}
        track, options = data.get("track", "frontiermath"), data.get("track_options") or {}
    return (track or "frontiermath") == "frontiermath" or bool(options.get("python_tool"))


def answer(request: dict[str, Any], index: int) -> Step:
    """A model that submits at once, answers in one line, and judges every answer wrong."""
    tools = {tool.get("function", tool).get("name") for tool in request.get("tools") or []}
    if "submit_answer" in tools:
        return Reply(
            tool_calls=[ToolCallSpec("submit_answer", json.dumps({"code": "def answer():\n    return 0"}))]
        )
    prompt = json.dumps(request.get("messages") or request.get("input"))
    if "VERDICT" in prompt:
        return Reply(content="The answer does not match the reference.\nVERDICT: INCORRECT")
    return Reply(content="The answer is 0.")


EXAMPLES = run_examples(README.read_text())
FIRST_COMPLETE = next(e for e in EXAMPLES if e[:1] != ["..."] and "--resume" not in e)
CASES = [expand(e, FIRST_COMPLETE) for e in EXAMPLES]


def test_the_readme_has_run_examples() -> None:
    assert len(EXAMPLES) >= 3
    assert any(e and e[0].endswith(".yaml") for e in EXAMPLES), "the YAML example went missing"


def fresh_checkout(directory: Path) -> Path:
    directory.mkdir()
    (directory / "configs").symlink_to(REPO / "configs")
    return directory


def proctor(argv: list[str], cwd: Path, server: ScriptedServer) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "sk-scripted",
    }
    return subprocess.run(
        [*PROCTOR, "run", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def check_run(done: subprocess.CompletedProcess[str], run_dir: Path) -> None:
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert "Traceback" not in done.stderr
    records = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert records, "the example ran no sample"
    outcomes = {r["outcome"] for r in records}
    assert not outcomes & {o.value for o in ERROR_OUTCOMES}, outcomes


def run_dir_of(done: subprocess.CompletedProcess[str], argv: list[str], cwd: Path) -> Path:
    out = _option(argv, "--out")
    if out is not None:
        return cwd / out
    runs = sorted((cwd / "runs").iterdir())
    assert len(runs) == 1, runs
    return runs[0]


def _marks(argv: list[str]) -> list[pytest.MarkDecorator]:
    # Every example is a whole `proctor run` in a child process against a scripted server:
    # seconds each, so none is in the quick tier; those that run code need the sandbox image too.
    return [pytest.mark.docker, pytest.mark.slow] if needs_sandbox(argv) else [pytest.mark.slow]


@pytest.mark.parametrize(
    "argv",
    [pytest.param(c, marks=_marks(c), id=" ".join(e)[:60]) for c, e in zip(CASES, EXAMPLES, strict=True)],
)
def test_readme_run_example(argv: list[str], tmp_path: Path) -> None:
    with ScriptedServer(answer) as server:
        cwd = fresh_checkout(tmp_path / "checkout")
        if "--resume" in argv:
            out = _option(argv, "--out")
            writer = next(c for c in CASES if "--resume" not in c and _option(c, "--out") == out)
            check_run(proctor([*writer, *TINY], cwd, server), cwd / str(out))
            before = (cwd / str(out) / "samples.jsonl").read_text()
            done = proctor([*argv, *TINY], cwd, server)
            check_run(done, cwd / str(out))
            # Nothing was left to run, so nothing was run twice.
            assert (cwd / str(out) / "samples.jsonl").read_text() == before
            return
        done = proctor([*argv, *TINY], cwd, server)
        check_run(done, run_dir_of(done, argv, cwd))
        assert server.call_count > 0
