"""``inspect eval`` with ``--sandbox proctor``, end to end, in a child process that finds the
provider only through the ``inspect_ai`` entry point pyproject declares (support.py).

Within a sample files persist, the network is off and the uid is not 0; after the eval no
container of it is left. Once with Inspect's mockllm model scripting the tool calls, once with
the local model (Gemma 3 270M through llama.cpp, as `proctor quickstart` serves it): that model
is weak, so only the run and the sandbox's own facts are asserted, never what it answered.
"""

from __future__ import annotations

import asyncio
import glob
import subprocess
import sys
from pathlib import Path
from typing import Any

import docker
import pytest
from inspect_ai.log import EvalLog, EvalSample, read_eval_log

from proctor.sandbox.docker import labels
from tests.inspect_provider.support import environment_with_entry_points

TASK = Path(__file__).with_name("eval_task.py")
INSPECT = str(Path(sys.executable).with_name("inspect"))

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def inspect_env(tmp: Path, extra_env: dict[str, str] | None = None) -> dict[str, str]:
    env = {**environment_with_entry_points(tmp / "entry-points"), **(extra_env or {})}
    # Inspect's generate cache would replay an earlier run's model outputs.
    env["XDG_CACHE_HOME"] = str(tmp / "cache")
    return env


def run_inspect(tmp: Path, *args: str, extra_env: dict[str, str] | None = None) -> tuple[int, str, int]:
    """(exit code, output, pid) of one ``inspect`` command; the pid owns its containers."""
    process = subprocess.Popen(
        [INSPECT, *args, "--log-dir", str(tmp / "logs"), "--display", "plain"],
        env=inspect_env(tmp, extra_env),
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output, _ = process.communicate(timeout=900)
    return process.returncode, output, process.pid


def only_log(tmp: Path) -> EvalLog:
    (path,) = glob.glob(str(tmp / "logs" / "*.eval"))
    return read_eval_log(path)


def containers_of(owner_pid: int | None = None) -> list[dict[str, Any]]:
    client = docker.from_env()
    try:
        found = client.api.containers(all=True, filters={"label": f"{labels.ROLE}=inspect-sample"})
    finally:
        client.close()
    return [c for c in found if owner_pid is None or c["Labels"].get(labels.OWNER_PID) == str(owner_pid)]


def facts(sample: EvalSample) -> dict[str, Any]:
    """What the sandbox said of itself after the model's turn (eval_task.py's scorer)."""
    assert sample.scores is not None
    return sample.scores["sandbox_facts"].metadata or {}


def assert_sandbox_facts(log: EvalLog) -> None:
    assert log.status == "success", log.error
    assert log.eval.sandbox is not None and log.eval.sandbox.type == "proctor"
    (sample,) = log.samples or []
    assert sample.error is None
    found = facts(sample)
    assert found["uid"].isdigit() and int(found["uid"]) != 0
    assert found["interfaces"] == ["lo"]


def test_mockllm_eval_keeps_files_between_calls_without_network_or_root(
    tmp_path: Path, sandbox_image: str
) -> None:
    code, output, pid = run_inspect(
        tmp_path, "eval", f"{TASK}@notes", "-T", "script=notes", "--sandbox", "proctor"
    )
    assert code == 0, output[-4000:]
    assert containers_of(pid) == []
    log = only_log(tmp_path)
    assert_sandbox_facts(log)
    (sample,) = log.samples or []
    tool_outputs = [message.text for message in sample.messages if message.role == "tool"]
    # First call wrote note.txt; the second, a separate exec, read it back, as a non-root uid.
    assert len(tool_outputs) == 2 and tool_outputs[0] == ""
    note, uid, interfaces = tool_outputs[1].split()
    assert note == "persisted-across-calls" and uid == facts(sample)["uid"] and interfaces == "lo"
    assert facts(sample)["note"] == "persisted-across-calls\n"


@pytest.mark.local_model
@pytest.mark.timeout(1500)
def test_local_model_eval_runs_in_the_proctor_sandbox_from_a_config_file(
    tmp_path: Path, sandbox_image: str
) -> None:
    from proctor.agent.model.local_server import LocalLlamaServer

    config = tmp_path / "proctor.yaml"
    config.write_text(f"image: {sandbox_image}\nmemory: 1g\npids: 128\n")

    async def evaluate() -> tuple[int, str, int]:
        async with LocalLlamaServer() as base_url:
            return await asyncio.to_thread(
                run_inspect,
                tmp_path,
                "eval",
                f"{TASK}@notes",
                "--model",
                "openai-api/local/gemma3-270m",
                "--sandbox",
                f"proctor:{config}",
                "--max-tokens",
                "128",
                extra_env={"LOCAL_BASE_URL": base_url, "LOCAL_API_KEY": "unused"},
            )

    code, output, pid = asyncio.run(evaluate())
    assert code == 0, output[-4000:]
    assert containers_of(pid) == []
    log = only_log(tmp_path)
    assert_sandbox_facts(log)
    assert log.eval.sandbox is not None and log.eval.sandbox.config == str(config)
