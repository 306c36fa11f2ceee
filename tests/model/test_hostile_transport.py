"""Endpoints that fail below the reply's shape: the bytes on the wire, and when they come.

A raw HTTP server on 127.0.0.1 sends, per request, what a broken or hostile endpoint might:
an error object with status 200, an event stream or a bare string to a request that asked for
neither, a reply dribbled a byte at a time (slow-loris), a connection reset half-way through
the body, a body far larger than any reply, a gzip bomb, an encoding nobody asked for. Each is
the endpoint's failure: retried, then a ``ModelError`` naming it, never an empty answer graded
against the model, never unbounded time or memory. Both APIs (Chat Completions, Responses)
go through the real openai SDK; the judge uses the same clients.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import json
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest

from proctor.agent.inputs.config import ModelConfig, RunConfig
from proctor.agent.model.base import ModelError
from proctor.agent.model.bounded_reply import MAX_REPLY_BYTES, bound_reply
from proctor.agent.model.factory import make_client
from proctor.agent.model.retry import FailedReply, RetryPolicy
from proctor.agent.results.records import Outcome
from proctor.agent.results.store import load_samples
from proctor.agent.run.runner import execute_run
from tests.runner.conftest import make_config, quiet_progress, write_tasks
from tests.support.scripted_server import Reply, ScriptedServer

FAST = RetryPolicy(max_retries=1, base_delay_s=0.001, max_delay_s=0.01)
QUESTION = [{"role": "user", "content": "What is 6 * 7?"}]


def good_body(api: str) -> dict[str, Any]:
    usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    if api == "chat":
        message = {"role": "assistant", "content": "42"}
        return {"id": "c", "object": "chat.completion", "created": 1, "model": "m", "usage": usage,
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}  # fmt: skip
    part = {"type": "output_text", "text": "42", "annotations": []}
    return {"id": "r", "object": "response", "created_at": 1, "model": "m", "status": "completed",
            "output": [{"type": "message", "id": "m1", "role": "assistant", "status": "completed",
                        "content": [part]}],
            "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}}  # fmt: skip


Send = Callable[[BaseHTTPRequestHandler, str], None]


def _headers(handler: BaseHTTPRequestHandler, length: int, extra: dict[str, str] | None = None) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(length))
    for name, value in (extra or {}).items():
        handler.send_header(name, value)
    handler.end_headers()


def send_bytes(data: bytes, extra: dict[str, str] | None = None) -> Send:
    def send(handler: BaseHTTPRequestHandler, api: str) -> None:
        _headers(handler, len(data), extra)
        handler.wfile.write(data)

    return send


def send_good(handler: BaseHTTPRequestHandler, api: str) -> None:
    send_bytes(json.dumps(good_body(api)).encode())(handler, api)


def send_event_stream(handler: BaseHTTPRequestHandler, api: str) -> None:
    data = f"data: {json.dumps(good_body(api))}\n\ndata: [DONE]\n\n".encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def send_slowly(handler: BaseHTTPRequestHandler, api: str) -> None:
    """Slow-loris: every byte well inside any per-read timeout, the whole far outside."""
    data = json.dumps(good_body(api)).encode()
    _headers(handler, len(data))
    try:
        for byte in data:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.2)
    except OSError:
        pass  # the client gave up, as it should


def send_reset_mid_body(handler: BaseHTTPRequestHandler, api: str) -> None:
    data = json.dumps(good_body(api)).encode()
    _headers(handler, len(data))
    handler.wfile.write(data[: len(data) // 2])
    handler.wfile.flush()
    # Linger 0: close with a TCP reset rather than a clean end of stream.
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.connection.close()
    handler.close_connection = True


def send_declared_huge(handler: BaseHTTPRequestHandler, api: str) -> None:
    """Says it is 1 GiB; sends a few bytes, then waits (a client that believes it would allocate)."""
    _headers(handler, 1 << 30)
    handler.wfile.write(b'{"choices": [')
    handler.wfile.flush()
    time.sleep(2)


def send_undeclared_huge(handler: BaseHTTPRequestHandler, api: str) -> None:
    """No Content-Length (chunked): the bound must count the bytes as they come."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    chunk = b'{"pad": "' + b"A" * (1 << 20)
    try:
        for index in range(MAX_REPLY_BYTES // len(chunk) + 8):
            piece = chunk if index == 0 else b"A" * (1 << 20)
            handler.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    except OSError:
        pass  # the client stopped reading: the bound held


@functools.cache
def gzip_bomb() -> bytes:
    """About 150 KB that expand to 16 MiB past the bound (built once, when first needed)."""
    return gzip.compress(b'{"pad": "' + b"A" * (MAX_REPLY_BYTES + (16 << 20)) + b'"}', compresslevel=9)


def send_gzip_bomb(handler: BaseHTTPRequestHandler, api: str) -> None:
    send_bytes(gzip_bomb(), {"Content-Encoding": "gzip"})(handler, api)


def send_gzip_good(handler: BaseHTTPRequestHandler, api: str) -> None:
    send_bytes(gzip.compress(json.dumps(good_body(api)).encode()), {"Content-Encoding": "gzip"})(handler, api)


ATTACKS: dict[str, tuple[Send, str]] = {
    "200 with an error object": (
        send_bytes(json.dumps({"error": {"message": "upstream exploded", "type": "server_error"}}).encode()),
        "HTTP 200 with an error body: upstream exploded",
    ),
    "200 with an error string": (
        send_bytes(json.dumps({"error": "overloaded"}).encode()),
        "HTTP 200 with an error body: overloaded",
    ),
    "200 with a bare JSON string": (send_bytes(b'"sure, 42"'), "not a reply (str)"),
    "200 with a JSON list": (send_bytes(b"[1, 2, 3]"), "not a reply (list)"),
    "200 with null": (send_bytes(b"null"), "not a reply (empty)"),
    "an event stream to a request that asked for none": (send_event_stream, "not a reply"),
    "slow-loris": (send_slowly, "timeout (no whole reply within 2 s)"),
    "connection reset mid-body": (send_reset_mid_body, "gave up after 1 retries"),
    "a declared size past the bound": (send_declared_huge, "declared"),
    "an undeclared size past the bound": (send_undeclared_huge, f"larger than {MAX_REPLY_BYTES:,} bytes"),
    "a gzip bomb": (send_gzip_bomb, f"larger than {MAX_REPLY_BYTES:,} bytes"),
    "an encoding nobody asked for": (
        send_bytes(b"\x00" * 64, {"Content-Encoding": "br"}),
        "content-encoding 'br', which was not asked for",
    ),
}


class RawServer:
    """Answers the n-th request with ``plan[n]`` (the last entry repeats)."""

    def __init__(self, plan: list[Send], api: str) -> None:
        self.plan = plan
        self.api = api
        self.requests = 0
        self.accept_encodings: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                index = min(server.requests, len(server.plan) - 1)
                server.requests += 1
                server.accept_encodings.append(self.headers.get("Accept-Encoding", ""))
                server.plan[index](self, server.api)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> RawServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(params=["chat", "responses"])
def api(request: pytest.FixtureRequest) -> Iterator[str]:
    yield request.param


# The deadline that slow-loris must hit. Attacks bounded by size get a deadline far past what
# reading 128 MiB takes on a loaded machine, so the size bound (what they test) trips first.
SHORT_DEADLINE_S = 2.0
SIZE_DEADLINE_S = 60.0
SIZE_ATTACKS = {"an undeclared size past the bound", "a gzip bomb"}


async def _ask(server: RawServer, api: str, reasons: list[str], deadline_s: float = SHORT_DEADLINE_S) -> Any:
    config = ModelConfig(
        name="openai/test-model",
        base_url=server.base_url,
        api=api,
        request_timeout_s=deadline_s,
        max_retries=1,
    )
    client = make_client(config, on_retry=reasons.append, retry_policy=FAST)
    try:
        return await client.complete(QUESTION)
    finally:
        await client.aclose()


@pytest.mark.parametrize("attack", list(ATTACKS))
async def test_an_endpoint_failure_is_retried_then_a_model_error_naming_it(api: str, attack: str) -> None:
    send, said = ATTACKS[attack]
    reasons: list[str] = []
    started = time.monotonic()
    deadline_s = SIZE_DEADLINE_S if attack in SIZE_ATTACKS else SHORT_DEADLINE_S
    with RawServer([send], api) as server, pytest.raises(ModelError) as caught:
        await asyncio.wait_for(_ask(server, api, reasons, deadline_s), timeout=2 * deadline_s + 16)
    assert said in str(caught.value), str(caught.value)
    assert server.requests == 2 and len(reasons) == 1  # retried once, as the policy says
    if attack not in SIZE_ATTACKS:
        # Two attempts, each bounded by the 2 s deadline (slow-loris included), plus load.
        assert time.monotonic() - started < 15


@pytest.mark.parametrize("attack", ["200 with an error object", "slow-loris", "a gzip bomb"])
async def test_a_good_reply_after_an_endpoint_failure_is_used(api: str, attack: str) -> None:
    reasons: list[str] = []
    with RawServer([ATTACKS[attack][0], send_good], api) as server:
        response = await _ask(server, api, reasons)
    assert response.content == "42" and response.retries == 1 and len(reasons) == 1


async def test_a_gzip_reply_within_the_bound_is_read_and_only_boundable_encodings_are_asked_for(
    api: str,
) -> None:
    with RawServer([send_gzip_good], api) as server:
        response = await _ask(server, api, [])
    assert response.content == "42"
    assert server.accept_encodings == ["gzip, deflate"]


async def test_a_gzip_bomb_is_never_expanded_past_the_bound() -> None:
    """The mechanism itself, with a 1 MiB bound: 64 MiB of zeros in 64 KiB of gzip stop after
    at most the bound was produced; no call to the decoder may produce more."""
    limit = 1 << 20
    bomb = gzip.compress(b"\0" * (64 << 20), compresslevel=9)
    chunks = [bomb[i : i + 4096] for i in range(0, len(bomb), 4096)]

    class Chunks(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield chunk

    response = httpx2.Response(200, headers={"Content-Encoding": "gzip"}, stream=Chunks())
    await bound_reply(limit)(response)
    assert "content-encoding" not in response.headers  # the library will not decode it again
    produced = 0
    with pytest.raises(FailedReply, match="larger than 1,048,576 bytes"):
        async for piece in response.stream:
            produced += len(piece)
    assert produced <= limit


async def test_a_run_records_an_endpoint_failure_as_model_error_not_as_a_wrong_answer(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    out = tmp_path / "run"
    error_body = ATTACKS["200 with an error object"][0]
    with RawServer([error_body], "chat") as server:
        model = ModelConfig(name="openai/m", base_url=server.base_url, max_retries=0)
        result = await execute_run(
            make_config(tasks, out, server.base_url, models=[model]),
            progress=quiet_progress(),
            handle_signals=False,
        )
    records = load_samples(out / "samples.jsonl").records
    assert result.status == "finished" and len(records) == 2
    assert {r.outcome for r in records} == {Outcome.MODEL_ERROR}
    assert all("HTTP 200 with an error body" in (r.error or "") for r in records)
    # An error outcome is not a score: --resume runs these samples again.
    assert result.summary["overall"]["scored_samples"] == 0


async def test_a_judge_endpoint_failure_is_a_judge_error_not_a_verdict(tmp_path: Path) -> None:
    """The judge goes through the same clients: its 200 error bodies and non-replies are the
    judge's failure (judge_error, run again by --resume), never a verdict against the model."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps({"id": f"o{i}", "question": "Describe the motion.", "answer": "It oscillates."}) + "\n"
            for i in range(2)
        )
    )
    out = tmp_path / "run"
    with (
        ScriptedServer(
            lambda request, index: Reply(content="FINAL ANSWER: it goes back and forth")
        ) as model_server,
        RawServer([ATTACKS["200 with an error object"][0], send_bytes(b'"CORRECT"')], "chat") as judge_server,
    ):
        config = RunConfig(
            track="olympiad",
            tasks=tasks,
            out=out,
            models=[ModelConfig(name="openai/m", base_url=model_server.base_url, max_retries=0)],
            judge=ModelConfig(name="openai/judge", base_url=judge_server.base_url, max_retries=1),
            trials=1,
            track_options={"judge_retries": 1},
        )
        result = await execute_run(config, progress=quiet_progress(), handle_signals=False)
    records = load_samples(out / "samples.jsonl").records
    assert result.status == "finished" and len(records) == 2 and judge_server.requests >= 2
    assert {r.outcome for r in records} == {Outcome.JUDGE_ERROR}, [(r.outcome, r.error) for r in records]
    assert all("HTTP 200 with" in (r.error or "") for r in records), [r.error for r in records]
