"""`proctor bench loop`: the harness's own cost per turn, with model latency taken out.

What runs is the real thing: the runner, the run store (fsync per sample), the FrontierMath
track's agent loop and token budget, and the real openai-SDK model client. What is *not*
real, and is labelled so in the output:

* the model: a zero-latency OpenAI-compatible server in a **separate process** (so its CPU
  time is not the harness's), answering every turn with a ``python`` tool call and
  reporting token usage from a script; on a forced-submission turn it answers without a
  tool call, which ends the conversation (the submission path is per sample, not per turn);
* the sandbox: an in-process **double** that runs no code and returns ``1`` at once, so
  the numbers are the harness's and not Docker's (see `proctor bench sandbox` for that).

Measures: harness CPU ms per turn (``time.process_time`` of this process / turns), wall ms
per turn, and for the single sequential conversations the server-side gap between sending a
reply and receiving the next request (that gap is exactly the harness's time: client
parsing, loop, accounting, store, request building). Token accounting (budget planning and
recording, per-message estimates) is timed separately at turn 10 and near turn 500 of a
conversation whose reported usage climbs toward the 1M cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import multiprocessing
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from proctor.agent.inputs.config import BudgetConfig, ModelConfig, RunConfig, SandboxConfig
from proctor.agent.run.progress import RunProgress
from proctor.agent.run.runner import execute_run
from proctor.sandbox import ExecResult, Limits

SANDBOX_DOUBLE_LABEL = "in-process sandbox double (runs no code; benchmark only)"
MODEL_LABEL = "zero-latency scripted OpenAI-compatible server (separate process)"
TARGET_MS_PER_TURN = 5.0
# The model config's default connection limit. Samples in flight share these connections;
# httpx's pool scans every pooled connection per request, so a pool of 200 costs ~200
# socket checks a request: the limit, not the sample count, should stay small.
DEFAULT_CONNECTIONS = ModelConfig.model_fields["max_connections"].default


# --------------------------------------------------------------------------------------
# The scripted server (child process)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UsageScript:
    """Reported usage for turn k (1-based): input = base + growth * k, output fixed."""

    input_base: int = 800
    input_growth: int = 0
    output: int = 60

    def usage(self, turn: int) -> tuple[int, int]:
        return self.input_base + self.input_growth * turn, self.output


def _reply_body(request: dict[str, Any], script: UsageScript, counter: int) -> bytes:
    messages = request.get("messages") or []
    turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
    forced = isinstance(request.get("tool_choice"), dict)
    prompt_tokens, completion_tokens = script.usage(turn)
    message: dict[str, Any]
    if forced:
        # No tool call on the forced turn: the loop ends the conversation (no submission).
        message = {"role": "assistant", "content": "I cannot finish in time."}
        finish = "stop"
    else:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{counter}",
                    "type": "function",
                    "function": {"name": "python", "arguments": '{"code": "print(1)"}'},
                }
            ],
        }
        finish = "tool_calls"
    body = {
        "id": f"chatcmpl-{counter}",
        "object": "chat.completion",
        "created": 0,
        "model": request.get("model", "bench"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return json.dumps(body).encode()


class _BenchServer:
    """Minimal HTTP/1.1 keep-alive server: enough for the openai SDK's chat completions."""

    def __init__(self, script: UsageScript) -> None:
        self.script = script
        self.counter = 0
        self.busy_s = 0.0
        # (received, replied) perf_counter pairs, in arrival order.
        self.timeline: list[tuple[float, float]] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                received = time.perf_counter()
                if method == "GET" and path.endswith("/stats"):
                    payload = json.dumps({"busy_s": self.busy_s, "timeline": self.timeline}).encode()
                    self.timeline = []
                    self.busy_s = 0.0
                else:
                    self.counter += 1
                    payload = _reply_body(json.loads(body or b"{}"), self.script, self.counter)
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                    + str(len(payload)).encode()
                    + b"\r\n\r\n"
                    + payload
                )
                await writer.drain()
                replied = time.perf_counter()
                if not path.endswith("/stats"):
                    self.busy_s += replied - received
                    self.timeline.append((received, replied))
        writer.close()


def _serve(script: UsageScript, ready: Any) -> None:
    async def main() -> None:
        server = _BenchServer(script)
        listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, backlog=1024)
        ready.send(listener.sockets[0].getsockname()[1])
        async with listener:
            await listener.serve_forever()

    asyncio.run(main())


@contextlib.contextmanager
def bench_server(script: UsageScript) -> Iterator[str]:
    """Start the scripted server in a child process; yield its base URL (…/v1)."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_serve, args=(script, child), daemon=True)
    process.start()
    try:
        if not parent.poll(30):
            raise RuntimeError("bench server did not start within 30 s")
        yield f"http://127.0.0.1:{parent.recv()}/v1"
    finally:
        process.terminate()
        process.join(5)


async def _server_stats(base_url: str) -> dict[str, Any]:
    import httpx

    async with httpx.AsyncClient() as http:
        response = await http.get(f"{base_url}/stats")
        return dict(response.json())


# --------------------------------------------------------------------------------------
# The sandbox double and accounting probes (this process)
# --------------------------------------------------------------------------------------


class InProcessSandboxDouble:
    """Benchmark double: answers every exec with exit 0 and ``1`` printed; runs nothing."""

    backend = "bench-double"

    async def exec(
        self,
        code: str | None = None,
        *,
        argv: Sequence[str] | None = None,
        stdin: str | bytes | None = None,
        timeout: float = 30.0,
        limits: Limits | None = None,
    ) -> ExecResult:
        return ExecResult(exit_code=0, stdout="1\n", stderr="", backend=self.backend)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "note": SANDBOX_DOUBLE_LABEL, "isolates_less": True}

    async def aclose(self) -> None:
        return None


async def open_double(*_: Any, **__: Any) -> InProcessSandboxDouble:
    return InProcessSandboxDouble()


class AccountingProbe:
    """Times the token-accounting calls of the loop, per conversation turn.

    It wraps, for the duration of the benchmark only, the budget's planning and recording
    and the conversation's per-message accounting (which tokenises the new message).
    """

    def __init__(self) -> None:
        self.seconds_by_turn: dict[int, float] = defaultdict(float)
        self._restore: list[Callable[[], None]] = []

    def _wrap(self, owner: Any, name: str, turn_of: Callable[[Any], int]) -> None:
        original = getattr(owner, name)
        probe = self

        def timed(instance: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(instance, *args, **kwargs)
            finally:
                probe.seconds_by_turn[turn_of(instance)] += time.perf_counter() - started

        setattr(owner, name, timed)
        self._restore.append(lambda: setattr(owner, name, original))

    def __enter__(self) -> AccountingProbe:
        from proctor.agent.model.budget import TokenBudget
        from proctor.agent.tracks.frontiermath.loop import Conversation

        self._wrap(TokenBudget, "plan_request", lambda budget: len(budget.turns))
        self._wrap(TokenBudget, "record_response", lambda budget: len(budget.turns))
        self._wrap(Conversation, "_append", lambda conversation: len(conversation.budget.turns))
        return self

    def __exit__(self, *exc: object) -> None:
        for restore in reversed(self._restore):
            restore()

    def micros_around(self, turn: int, window: int = 2) -> float:
        values = [self.seconds_by_turn[t] for t in range(turn - window, turn + window + 1)]
        return statistics.median(values) * 1e6


# --------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------


@dataclass
class ScenarioResult:
    name: str
    samples: int
    concurrency: int
    turns: int
    wall_s: float
    harness_cpu_ms_per_turn: float
    wall_ms_per_turn: float
    server_ms_per_turn: float
    # Sequential conversations only: the server-side gap reply -> next request, median.
    harness_gap_ms_median: float | None = None
    harness_wall_minus_server_ms_per_turn: float | None = None
    max_cumulative_tokens: int = 0
    accounting_us_turn_10: float | None = None
    accounting_us_turn_500: float | None = None
    harness_gap_ms_turn_10: float | None = None
    harness_gap_ms_turn_500: float | None = None
    outcomes: dict[str, int] = field(default_factory=dict)


def _write_tasks(path: Path, count: int) -> Path:
    lines = [
        json.dumps(
            {"id": f"bench-{i:04d}", "question": f"Compute {i}.", "answer_type": "Python int", "answer": i}
        )
        for i in range(count)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


async def run_scenario(
    name: str,
    *,
    samples: int,
    concurrency: int,
    turns: int,
    script: UsageScript,
    budget: BudgetConfig,
    workdir: Path,
    probe_turns: bool = False,
    connections: int = DEFAULT_CONNECTIONS,
) -> ScenarioResult:
    """Run ``samples`` conversations of up to ``turns`` turns each through the real runner."""
    with bench_server(script) as base_url:
        config = RunConfig(
            track="frontiermath",
            tasks=_write_tasks(workdir / f"{name}-tasks.jsonl", samples),
            models=[
                ModelConfig(
                    name="openai/bench", base_url=base_url, max_connections=connections, max_retries=0
                )
            ],
            trials=1,
            max_concurrency=concurrency,
            out=workdir / f"{name}-run",
            budget=budget,
            sandbox=SandboxConfig.model_validate({"backend": "local", "pool_size": 0}),
            track_options={"max_turns": turns},
        )
        progress = RunProgress(Console(file=io.StringIO()), live=False)
        probe = AccountingProbe()
        with probe if probe_turns else contextlib.nullcontext():
            await _server_stats(base_url)  # warm the route; resets the server's counters
            cpu_before, wall_before = time.process_time(), time.perf_counter()
            result = await execute_run(
                config, progress=progress, handle_signals=False, sandbox_opener=open_double
            )
            wall = time.perf_counter() - wall_before
            cpu = time.process_time() - cpu_before
        stats = await _server_stats(base_url)

    overall = result.summary["overall"]
    total_turns = int(overall["turns"])
    timeline: list[tuple[float, float]] = [tuple(pair) for pair in stats["timeline"]]
    scenario = ScenarioResult(
        name=name,
        samples=samples,
        concurrency=concurrency,
        turns=total_turns,
        wall_s=wall,
        harness_cpu_ms_per_turn=cpu / total_turns * 1e3,
        wall_ms_per_turn=wall / total_turns * 1e3,
        server_ms_per_turn=stats["busy_s"] / total_turns * 1e3,
        outcomes=dict(overall["outcomes"]),
    )
    records_dir = workdir / f"{name}-run" / "samples.jsonl"
    scenario.max_cumulative_tokens = max(
        (json.loads(line)["total_tokens"] for line in records_dir.read_text().splitlines() if line), default=0
    )
    if concurrency == 1:
        gaps = [timeline[i + 1][0] - timeline[i][1] for i in range(len(timeline) - 1)]
        if gaps:
            scenario.harness_gap_ms_median = statistics.median(gaps) * 1e3
            scenario.harness_wall_minus_server_ms_per_turn = (wall - stats["busy_s"]) / total_turns * 1e3
            if probe_turns and len(gaps) > 505:
                scenario.harness_gap_ms_turn_10 = statistics.median(gaps[7:12]) * 1e3
                scenario.harness_gap_ms_turn_500 = statistics.median(gaps[497:502]) * 1e3
    if probe_turns and total_turns > 505:
        scenario.accounting_us_turn_10 = probe.micros_around(10)
        scenario.accounting_us_turn_500 = probe.micros_around(500)
    return scenario


async def run_benchmark(
    *,
    concurrencies: Sequence[int] = (1, 200),
    turns: int = 20,
    long_conversation: bool = True,
    connections: int = DEFAULT_CONNECTIONS,
) -> list[ScenarioResult]:
    results: list[ScenarioResult] = []
    with tempfile.TemporaryDirectory(prefix="proctor-bench-loop-") as tmp:
        workdir = Path(tmp)
        # Imports, the tokenizer's tables and SDK setup are paid once per process, not per
        # turn: a short unreported run pays them before anything is measured.
        await run_scenario(
            "warm-up",
            samples=2,
            concurrency=1,
            turns=3,
            script=UsageScript(),
            budget=BudgetConfig(),
            workdir=workdir,
        )
        for concurrency in concurrencies:
            # Enough conversations to keep every slot busy, small usage: defaults never force.
            samples = max(concurrency, 10)
            results.append(
                await run_scenario(
                    f"concurrent-{concurrency}",
                    samples=samples,
                    concurrency=concurrency,
                    turns=turns,
                    script=UsageScript(input_base=800, input_growth=40, output=60),
                    budget=BudgetConfig(),
                    workdir=workdir,
                    connections=connections,
                )
            )
        if long_conversation:
            # Reported input grows 4 tokens a turn from 804: cumulative use passes 930k at turn
            # 500 and the conversation ends at the 1M cap near turn 523. Forcing is moved to
            # 990k (not the protocol's 660k) so that the conversation runs that long.
            results.append(
                await run_scenario(
                    "long-1M",
                    samples=1,
                    concurrency=1,
                    turns=2000,
                    script=UsageScript(input_base=804, input_growth=4, output=60),
                    budget=BudgetConfig(token_cap=1_000_000, force_submit_at=990_000),
                    workdir=workdir,
                    probe_turns=True,
                )
            )
    return results


def results_as_json(results: Sequence[ScenarioResult], connections: int) -> dict[str, Any]:
    return {
        "model_connections": connections,
        "model": MODEL_LABEL,
        "sandbox": SANDBOX_DOUBLE_LABEL,
        "target_ms_per_turn": TARGET_MS_PER_TURN,
        "scenarios": [asdict(r) for r in results],
    }
