"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for tests and benchmarks.

It speaks just enough of the wire protocol for the real ``openai`` SDK to talk to it:
``POST /v1/chat/completions``, ``POST /v1/responses`` and ``GET /v1/models``.
What each call returns comes from a *script*: a list of steps consumed in order, or a
callable ``(request_json, call_index) -> Step`` for replies that depend on the request.

Steps:

- ``Reply(content=..., tool_calls=[ToolCallSpec("python", '{"code": "print(1)"}')],
  usage=ReportedUsage(prompt_tokens=100, completion_tokens=20, reasoning_tokens=5))``;
  ``usage=None`` omits the usage block (the client must estimate). ``arguments`` are sent
  verbatim, so malformed JSON reaches the client exactly as a small model would send it.
- ``HttpError(429, "slow down", retry_after="2")``, ``HttpError(401, "bad key")``,
  ``HttpError(429, "out of credit", code="insufficient_quota")``.
- ``Drop()``: close the connection without answering.
- ``RawReply(body={...})`` sends ``body`` as the whole JSON reply, whatever its shape (for
  replies no well-behaved server sends: ``arguments`` as an object, ``name: null``, no
  ``choices``); ``RawReply(raw=b"...")`` sends those bytes verbatim (invalid JSON escapes).
- Any step takes ``delay_s`` (wait before answering) to simulate slow replies.

``/v1/responses`` checks reasoning items sent back as input the way OpenAI does: with
``store`` false each needs its ``encrypted_content``, which must be the one this server
issued with that id, and must be followed by another item; otherwise HTTP 400.

Every request body is recorded in ``server.requests`` (path, parsed JSON, headers; only the
newest N with ``keep_last=N``), ``server.call_count`` counts them, and
``server.max_in_flight`` is the most requests the server was handling at once.

Usage::

    from tests.support.scripted_server import ScriptedServer, Reply, HttpError, ToolCallSpec

    with ScriptedServer([HttpError(429, "busy", retry_after="0"), Reply(content="hi")]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        ...
        assert server.requests[-1].json["messages"][0]["role"] == "user"

    def script(request: dict, index: int) -> Step:
        if request.get("tool_choice", "auto") != "auto":
            return Reply(tool_calls=[ToolCallSpec("submit_answer", '{"code": "def answer(): return 1"}')])
        return Reply(content=f"turn {index}")

    with ScriptedServer(script) as server: ...

A call past the end of a list script gets HTTP 400 "script exhausted" (not retryable, so a
test that under-scripts fails fast and says why). Replies are immediate unless a step asks
for a delay; delays are capped and cut short when the server stops, so nothing hangs.
"""

from __future__ import annotations

import itertools
import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Longest delay a step may ask for; longer would only make a broken test hang.
MAX_DELAY_S = 60.0


@dataclass
class ReportedUsage:
    """Token usage as the provider reports it (Chat Completions names)."""

    prompt_tokens: int = 10
    completion_tokens: int = 5
    reasoning_tokens: int = 0
    # ``total_tokens`` as sent: None sends prompt + completion (OpenAI's shape, where reasoning
    # is inside the completion); a gateway that reports reasoning apart sends p + c + r;
    # OMIT_TOTAL leaves the field out.
    total_tokens: int | None = None

    def sent_total(self) -> int | None:
        if self.total_tokens == OMIT_TOTAL:
            return None
        return self.prompt_tokens + self.completion_tokens if self.total_tokens is None else self.total_tokens


# ReportedUsage(total_tokens=OMIT_TOTAL): a usage block without total_tokens.
OMIT_TOTAL = -1


@dataclass
class ToolCallSpec:
    name: str
    # Sent verbatim: may be malformed JSON on purpose.
    arguments: str
    id: str | None = None


@dataclass
class Reply:
    content: str | None = None
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    usage: ReportedUsage | None = field(default_factory=ReportedUsage)
    finish_reason: str | None = None  # default: "tool_calls" when there are tool calls, else "stop"
    reasoning: str | None = None  # Responses API: sent as a reasoning summary item
    # Responses API: the reasoning item's encrypted_content, sent (as OpenAI does) only when
    # the request's ``include`` asks for "reasoning.encrypted_content".
    encrypted_reasoning: str | None = None
    delay_s: float = 0.0


@dataclass
class HttpError:
    status: int
    message: str = "scripted error"
    code: str | None = None
    type: str | None = None
    retry_after: str | None = None  # the Retry-After header verbatim: seconds or an HTTP date
    retry_after_ms: str | None = None  # the retry-after-ms header OpenAI also sends
    body: Any = None  # replaces the standard {"error": {...}} body when set
    delay_s: float = 0.0


@dataclass
class Drop:
    """Close the connection without sending any response."""

    delay_s: float = 0.0


@dataclass
class RawReply:
    """A 200 reply whose JSON body (or raw bytes) is sent exactly as given."""

    body: Any = None
    raw: bytes | None = None
    delay_s: float = 0.0


Step = Reply | HttpError | Drop | RawReply
Script = Sequence[Step] | Callable[[dict[str, Any], int], Step]


@dataclass
class RecordedRequest:
    path: str
    json: dict[str, Any]
    headers: dict[str, str]
    call_index: int
    received_at: float


class ScriptedServer:
    """Serves a script over HTTP on 127.0.0.1:<free port> in a background thread."""

    def __init__(
        self,
        script: Script,
        *,
        model_ids: Sequence[str] = ("scripted-model",),
        keep_last: int | None = None,
    ) -> None:
        """``keep_last`` bounds ``requests`` to the newest N (benchmarks with megabyte histories
        would otherwise hold every body ever sent); ``call_count`` still counts them all."""
        self._script = script
        self._keep_last = keep_last
        self._calls = 0
        self._model_ids = list(model_ids)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._call_counter = itertools.count()
        self._id_counter = itertools.count(1)
        self._in_flight = 0
        self.max_in_flight = 0
        # encrypted_content of every reasoning item issued, by id, to check what comes back.
        self.issued_reasoning: dict[str, str] = {}
        self.requests: list[RecordedRequest] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        handler = _make_handler(self)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler, bind_and_activate=False)
        # The default backlog of 5 refuses connections when hundreds of samples run at once.
        httpd.request_queue_size = 1024
        httpd.daemon_threads = True
        httpd.allow_reuse_address = True
        httpd.server_bind()
        httpd.server_activate()
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """What to pass as the SDK's ``base_url`` (ends in /v1)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- views for assertions ------------------------------------------------------------------

    @property
    def call_count(self) -> int:
        with self._lock:
            return self._calls

    def bodies(self, path_suffix: str = "") -> list[dict[str, Any]]:
        """Recorded request bodies, optionally only those whose path ends with ``path_suffix``."""
        with self._lock:
            return [r.json for r in self.requests if r.path.endswith(path_suffix)]

    # -- request handling (called from handler threads) ----------------------------------------

    def _record(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> int:
        with self._lock:
            index = next(self._call_counter)
            self._calls += 1
            self.requests.append(RecordedRequest(path, body, headers, index, time.monotonic()))
            if self._keep_last is not None and len(self.requests) > self._keep_last:
                del self.requests[: len(self.requests) - self._keep_last]
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            return index

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _step_for(self, body: dict[str, Any], index: int) -> Step:
        if callable(self._script):
            return self._script(body, index)
        if index < len(self._script):
            return self._script[index]
        return HttpError(
            400,
            f"scripted server: script exhausted (call {index + 1}, script has {len(self._script)} steps)",
            code="script_exhausted",
        )

    def _wait(self, seconds: float) -> None:
        if seconds > MAX_DELAY_S:
            raise ValueError(f"scripted delay {seconds}s exceeds the {MAX_DELAY_S}s cap")
        if seconds > 0:
            self._stopping.wait(seconds)

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}_{next(self._id_counter)}"

    def _chat_body(self, step: Reply, request: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": step.content}
        if step.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id or self._next_id("call"),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in step.tool_calls
            ]
        finish = step.finish_reason or ("tool_calls" if step.tool_calls else "stop")
        body: dict[str, Any] = {
            "id": self._next_id("chatcmpl"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "scripted-model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        }
        if step.usage is not None:
            u = step.usage
            body["usage"] = {
                "prompt_tokens": u.prompt_tokens,
                "completion_tokens": u.completion_tokens,
                "total_tokens": u.sent_total(),
                "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
            }
            if body["usage"]["total_tokens"] is None:
                del body["usage"]["total_tokens"]
        return body

    def responses_input_problem(self, request: dict[str, Any]) -> str | None:
        """Why OpenAI would refuse the reasoning items in this request's input, or None."""
        items = request.get("input")
        if not isinstance(items, list):
            return None
        stored = request.get("store") is True
        for position, item in enumerate(items):
            if not isinstance(item, dict) or item.get("type") != "reasoning":
                continue
            item_id = item.get("id")
            if position + 1 == len(items):
                return f"Item '{item_id}' of type 'reasoning' was provided without its following item."
            encrypted = item.get("encrypted_content")
            if encrypted is None and not stored:
                return f"Item with id '{item_id}' not found: items are not persisted when store is false."
            with self._lock:
                issued = self.issued_reasoning.get(str(item_id))
            if encrypted is not None and encrypted != issued:
                return f"The encrypted content for item {item_id} could not be verified."
        return None

    def _responses_body(self, step: Reply, request: dict[str, Any]) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        if step.reasoning is not None or step.encrypted_reasoning is not None:
            summary = [] if step.reasoning is None else [{"type": "summary_text", "text": step.reasoning}]
            item: dict[str, Any] = {"type": "reasoning", "id": self._next_id("rs"), "summary": summary}
            include = request.get("include")
            if step.encrypted_reasoning is not None and "reasoning.encrypted_content" in (include or ()):
                item["encrypted_content"] = step.encrypted_reasoning
                with self._lock:
                    self.issued_reasoning[item["id"]] = step.encrypted_reasoning
            output.append(item)
        if step.content is not None:
            output.append(
                {
                    "type": "message",
                    "id": self._next_id("msg"),
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": step.content, "annotations": []}],
                }
            )
        for call in step.tool_calls:
            output.append(
                {
                    "type": "function_call",
                    "id": self._next_id("fc"),
                    "call_id": call.id or self._next_id("call"),
                    "name": call.name,
                    "arguments": call.arguments,
                    "status": "completed",
                }
            )
        body: dict[str, Any] = {
            "id": self._next_id("resp"),
            "object": "response",
            "created_at": int(time.time()),
            "model": request.get("model", "scripted-model"),
            "status": step.finish_reason or "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": request.get("tool_choice", "auto"),
            "tools": request.get("tools", []),
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "temperature": None,
            "top_p": None,
        }
        if step.usage is not None:
            u = step.usage
            body["usage"] = {
                "input_tokens": u.prompt_tokens,
                "output_tokens": u.completion_tokens,
                "total_tokens": u.sent_total(),
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
            }
            if body["usage"]["total_tokens"] is None:
                del body["usage"]["total_tokens"]
        return body


def _error_body(step: HttpError) -> Any:
    if step.body is not None:
        return step.body
    return {
        "error": {
            "message": step.message,
            "type": step.type or ("insufficient_quota" if step.code == "insufficient_quota" else "scripted"),
            "code": step.code,
            "param": None,
        }
    }


def _make_handler(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Keep-alive, so the SDK's connection pool behaves as against a real endpoint.
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes; with Nagle's algorithm on, the body waits
        # for the client's delayed ACK (~40 ms a reply), which would swamp any overhead benchmark.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            return  # quiet: test output should show test failures, not access logs

        def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            self._send_bytes(status, json.dumps(payload).encode(), headers)

        def _send_bytes(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/v1/models"):
                models = [
                    {"id": m, "object": "model", "created": 0, "owned_by": "scripted"}
                    for m in server._model_ids
                ]
                self._send_json(200, {"object": "list", "data": models})
            else:
                self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            path = self.path.split("?", 1)[0].rstrip("/")
            if not (path.endswith("/chat/completions") or path.endswith("/responses")):
                self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            try:
                request = json.loads(raw or b"{}")
            except json.JSONDecodeError as exc:
                self._send_json(
                    400, {"error": {"message": f"request body is not JSON: {exc}", "type": "bad"}}
                )
                return
            index = server._record(path, request, {k.lower(): v for k, v in self.headers.items()})
            try:
                self._answer(path, request, server._step_for(request, index))
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout); nothing left to tell it
            finally:
                server._done()

        def _answer(self, path: str, request: dict[str, Any], step: Step) -> None:
            server._wait(step.delay_s)
            if isinstance(step, Drop):
                self.close_connection = True
                # RST rather than FIN so the client sees a dropped connection at once.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            if isinstance(step, RawReply):
                data = step.raw if step.raw is not None else json.dumps(step.body).encode()
                self._send_bytes(200, data)
                return
            if isinstance(step, HttpError):
                headers = {}
                if step.retry_after is not None:
                    headers["Retry-After"] = step.retry_after
                if step.retry_after_ms is not None:
                    headers["retry-after-ms"] = step.retry_after_ms
                self._send_json(step.status, _error_body(step), headers)
                return
            if path.endswith("/responses"):
                problem = server.responses_input_problem(request)
                if problem is not None:
                    self._send_json(
                        400, {"error": {"message": problem, "type": "invalid_request_error", "code": None}}
                    )
                    return
                self._send_json(200, server._responses_body(step, request))
            else:
                self._send_json(200, server._chat_body(step, request))

    return Handler
