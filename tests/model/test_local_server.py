"""The local llama.cpp server manager, and one real completion from the embedded Gemma model."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model import local_server
from proctor.agent.model.factory import make_client
from proctor.agent.model.local_server import LocalLlamaServer, LocalServerError

PYTHON_TOOL = {
    "type": "function",
    "function": {
        "name": "python",
        "description": "Run Python code and return what it prints",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
    },
}


async def test_missing_packages_name_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_server, "SERVER_MODULES", ("llama_cpp", "proctor_no_such_module"))
    with pytest.raises(UserError, match=r"proctor_no_such_module.*pip install -e '\.\[local-model\]'"):
        async with LocalLlamaServer():
            pass


def test_unknown_local_model_is_a_user_error() -> None:
    with pytest.raises(UserError, match="local/gemma3-270m"):
        local_server.embedded_model_path("llama-70b")


@pytest.mark.local_model
async def test_a_server_that_cannot_start_reports_its_log(tmp_path: Path) -> None:
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"this is not a GGUF file")
    server = LocalLlamaServer(model_path=bogus, startup_timeout_s=60)
    with pytest.raises(LocalServerError, match="exited with code"):
        await server.start()
    assert server.port is None  # stopped and cleaned up


@pytest.mark.local_model
async def test_real_local_model_answers_with_tools() -> None:
    server = LocalLlamaServer()
    async with server as base_url:
        process = server._process
        assert process is not None and process.returncode is None
        client = make_client(ModelConfig(name="local/gemma3-270m"), base_url_override=base_url)
        response = await client.complete(
            [{"role": "user", "content": "Use the python tool to compute 6 * 7."}],
            tools=[PYTHON_TOOL],
            max_output_tokens=64,
        )
        await client.aclose()
    # A tiny model: only that something came back, never what.
    assert response.content is not None or response.tool_calls
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    # The server process is gone once the context exits.
    assert process.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.kill(process.pid, 0)


# A stand-in for llama_cpp.server: answers 200 to every GET, optionally ignoring SIGTERM,
# so the process handling is tested without the model.
FAKE_SERVER = """
import signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
if sys.argv[2] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
class Ok(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"{}")
    def log_message(self, *args):
        pass
if sys.argv[2] != "mute":
    HTTPServer(("127.0.0.1", int(sys.argv[1])), Ok).serve_forever()
else:
    import time; time.sleep(600)
"""


class FakeServer(LocalLlamaServer):
    def __init__(self, mode: str, **kwargs: object) -> None:
        super().__init__(model_path=Path("unused.gguf"), **kwargs)  # type: ignore[arg-type]
        self.mode = mode

    def command(self, model_path: Path, port: int) -> list[str]:
        return [sys.executable, "-c", FAKE_SERVER, str(port), self.mode]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def no_module_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_server, "SERVER_MODULES", ())


@pytest.mark.usefixtures("no_module_check")
async def test_cancellation_stops_the_server() -> None:
    server = FakeServer("ok")
    started = asyncio.Event()

    async def run() -> None:
        async with server as base_url:
            assert base_url.startswith("http://127.0.0.1:")
            started.set()
            await asyncio.sleep(600)

    task = asyncio.create_task(run())
    await asyncio.wait_for(started.wait(), 30)
    process = server._process
    assert process is not None
    task.cancel()  # what Ctrl-C does to the running sample tasks
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _gone(process.pid)


@pytest.mark.usefixtures("no_module_check")
async def test_a_process_ignoring_sigterm_is_killed() -> None:
    server = FakeServer("stubborn", stop_timeout_s=0.5)
    async with server:
        process = server._process
        assert process is not None
    assert process.returncode == -signal.SIGKILL
    assert _gone(process.pid)


@pytest.mark.usefixtures("no_module_check")
async def test_a_server_that_never_answers_times_out_and_is_stopped() -> None:
    server = FakeServer("mute", startup_timeout_s=1.0, stop_timeout_s=1.0)
    with pytest.raises(LocalServerError, match="did not answer within 1s"):
        await server.start()
    assert server._process is None and server.port is None


@pytest.mark.usefixtures("no_module_check")
async def test_local_model_server_resolves_config_names() -> None:
    assert local_server.local_model_server("local/gemma3-270m").model == "gemma3-270m"
    with pytest.raises(UserError, match="unknown local model 'local/llama-70b'"):
        await local_server.local_model_server("local/llama-70b").start()
