"""One Proctor record as one Inspect ``EvalSample``: its messages, its transcript events, its score.

Built with Inspect's own types, from what the record holds and nothing else:

- ``messages``: the transcript, reasoning as ``ContentReasoning``, tool calls with their
  arguments (text that is not a JSON object stays ``raw_arguments`` with a ``parse_error``);
- ``events``, in the order a native eval writes them: an ``init`` span with the
  ``SampleInitEvent`` (the task's question and reference), a ``solvers`` span holding one
  ``ModelEvent`` per reply (the messages sent, the reply, that turn's usage and stop reason, the
  model's name, generation settings and offered tools, forced ``tool_choice`` on forced turns)
  each followed by
  the ``ToolEvent`` of every call it made (arguments, result, the sandbox's outcome, the call's
  duration, an error as ``ToolCallError``), then a ``scorers`` span holding the judge's requests
  (``ModelEvent`` with role ``grader``: its prompt and each reply) and the ``ScoreEvent`` (the
  verdict and its reasons); an error outcome ends with an ``ErrorEvent`` instead of a score;
- times: Proctor records when a sample started and finished and how long each tool call took,
  not when each request was sent. Inspect needs a timestamp on every event, so an event whose own
  time is not recorded carries the sample's start (the score, its finish); ``completed`` and
  ``working_time`` are set only where recorded (a tool call's duration).

Every value a model, a sandbox or an edited file controls goes through
:class:`~proctor.agent.export.inspect_bounds.Fitter`, and the finished sample is written and read
back once with Inspect's own serialiser (:func:`holdable`): a sample it still cannot hold loses
its events, then its messages, each replaced by a summary and noted in
``metadata["proctor_export"]``, so one sample never stops the export of the others.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from proctor.agent.export.inspect_bounds import MAX_DEPTH as MAX_VALUE_DEPTH
from proctor.agent.export.inspect_bounds import MAX_TEXT_CHARS as MAX_VALUE_CHARS
from proctor.agent.export.inspect_bounds import Fitter, measure
from proctor.agent.inputs.config import ModelConfig
from proctor.agent.results.records import ERROR_OUTCOMES, SampleRecord, ToolCallRecord
from proctor.agent.text.encodable import safe_text

if TYPE_CHECKING:
    from inspect_ai.event import Event
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ChatMessage, ChatMessageAssistant, GenerateConfig, ModelOutput
    from inspect_ai.scorer import Score
    from inspect_ai.tool import ToolCall

_T = TypeVar("_T")
SCORER = "proctor"
CORRECT, INCORRECT = "C", "I"
# The reasoning efforts Inspect's GenerateConfig takes; another (a newer SDK's) stays in metadata.
_INSPECT_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
_STOP_REASONS = {
    "stop": "stop",
    "length": "max_tokens",
    "max_tokens": "max_tokens",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}
# Sample ids become file names inside the .eval archive: characters a zip entry name or a path
# cannot hold, or that would split it, are replaced.
_ID_UNSAFE = frozenset("/\\") | {chr(c) for c in range(32)} | {"\x7f"}
MAX_ID_CHARS = 200


@dataclass(frozen=True)
class TaskInfo:
    """What the tasks file says of one task, when it still loads."""

    question: str | None = None
    target: str | None = None


@dataclass(frozen=True)
class Settings:
    """The run's settings for the model and the judge, as Inspect's generation config."""

    model: ModelConfig | None
    judge: ModelConfig | None
    max_output_tokens: int | None
    track: str
    # The tools the model was offered, as the request sent them (OpenAI function schemas).
    tools: tuple[dict[str, Any], ...] = ()


def _text(value: Any, field: str, fit: Fitter) -> str:
    """Stored content as text, whatever an edited file put there."""
    if value is None:
        return ""
    if isinstance(value, str):
        return fit.text(value, field)
    fitted = fit.value(value, field)
    return fitted if isinstance(fitted, str) else json.dumps(fitted, ensure_ascii=False)


def _time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)


def sample_id(task_id: str, fit: Fitter) -> str:
    """The task id, unless an archive entry name cannot hold it (then a readable, unique stand-in)."""
    fixed = fit.text(task_id, "task_id") if len(task_id) <= MAX_ID_CHARS else task_id
    if (
        fixed == task_id
        and not (_ID_UNSAFE & set(task_id))
        and task_id.strip()
        and task_id not in (".", "..")
    ):
        return task_id
    digest = hashlib.sha256(task_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    readable = "".join("_" if c in _ID_UNSAFE else c for c in fixed)[:60]
    fit.note(
        "task_id",
        "not usable as an Inspect sample id (a file name in the log); the original is in metadata.task_id",
        len(task_id),
    )
    return f"{readable}~{digest}"


def tool_call(entry: Any, index: int, field: str, fit: Fitter) -> ToolCall:
    from inspect_ai.tool import ToolCall

    entry = entry if isinstance(entry, dict) else {}
    function = entry.get("function")
    function = function if isinstance(function, dict) else {}
    arguments, parse_error = arguments_of(function.get("arguments"), f"{field}.function.arguments", fit)
    call_id = _text(entry.get("id"), f"{field}.id", fit)
    return ToolCall(
        id=call_id or f"call-{index}",
        function=_text(function.get("name"), f"{field}.function.name", fit) or "unknown",
        arguments=arguments,
        parse_error=parse_error,
    )


def arguments_of(raw_value: Any, field: str, fit: Fitter) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments as the object the model meant, or its raw text with the reason.

    The raw text is the model's own: when its JSON cannot be held as an object (nested past
    :data:`MAX_VALUE_DEPTH`, too large), the call keeps the text, noted, never the whole export.
    """
    raw = raw_value if isinstance(raw_value, str) else json.dumps(raw_value, default=str)
    error: str | None
    try:
        parsed = json.loads(raw)
    except RecursionError:
        parsed, error = None, "arguments nested too deeply to parse"
    except ValueError:
        parsed, error = None, "arguments are not JSON"
    else:
        error = None if isinstance(parsed, dict) else "arguments are not an object"
    if isinstance(parsed, dict):
        depth, chars = measure(parsed)
        if depth > MAX_VALUE_DEPTH or chars > MAX_VALUE_CHARS:
            reason = (
                f"arguments nested {depth} levels deep (at most {MAX_VALUE_DEPTH} are kept)"
                if depth > MAX_VALUE_DEPTH
                else f"arguments of {chars:,} characters of JSON (at most {MAX_VALUE_CHARS:,})"
            )
            fit.note(field, f"{reason}; kept as the raw_arguments text", len(raw))
            return {"raw_arguments": fit.text(raw, field)}, reason
        return fit.value(parsed, field), None
    if error == "arguments nested too deeply to parse":
        fit.note(field, f"{error}; kept as the raw_arguments text", len(raw))
    return {"raw_arguments": fit.text(raw, field)}, error


def chat_messages(transcript: list[Any], model: str, fit: Fitter | None = None) -> list[ChatMessage]:
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
        ContentReasoning,
        ContentText,
    )

    fit = fit or Fitter()
    messages: list[ChatMessage] = []
    for position, raw_entry in enumerate(transcript):
        entry: Mapping[str, Any] = raw_entry if isinstance(raw_entry, dict) else {"content": raw_entry}
        where = f"transcript.{position}"
        role, content = entry.get("role"), _text(entry.get("content"), f"{where}.content", fit)
        if role == "assistant":
            reasoning = entry.get("reasoning")
            body: Any = content
            if reasoning:
                body = [
                    ContentReasoning(reasoning=_text(reasoning, f"{where}.reasoning", fit)),
                    ContentText(text=content),
                ]
            entries = entry.get("tool_calls")
            calls = [
                tool_call(call, index, f"{where}.tool_calls.{index}", fit)
                for index, call in enumerate(entries if isinstance(entries, list) else [])
            ]
            messages.append(ChatMessageAssistant(content=body, tool_calls=calls or None, model=model))
        elif role == "tool":
            messages.append(
                ChatMessageTool(
                    content=content,
                    tool_call_id=_text(entry.get("tool_call_id"), f"{where}.tool_call_id", fit) or None,
                    function=_text(entry.get("name"), f"{where}.name", fit) or None,
                )
            )
        elif role == "system":
            messages.append(ChatMessageSystem(content=content))
        else:
            messages.append(ChatMessageUser(content=content))
    return messages


def generate_config(model: ModelConfig | None, effort: str | None, max_tokens: int | None) -> GenerateConfig:
    """The settings Proctor sent with every request, in Inspect's names (only what was set)."""
    from inspect_ai.model import GenerateConfig

    if model is None:
        return GenerateConfig()
    effort = effort or model.reasoning_effort
    return GenerateConfig(
        max_retries=model.max_retries,
        timeout=int(model.request_timeout_s),
        max_connections=model.max_connections,
        max_tokens=max_tokens,
        temperature=model.temperature,
        top_p=model.top_p,
        seed=model.seed,
        reasoning_effort=effort if effort in _INSPECT_EFFORTS else None,  # type: ignore[arg-type]
        extra_body=model.extra_body or None,
    )


def _stop_reason(
    finish_reason: Any,
) -> Literal["stop", "max_tokens", "tool_calls", "content_filter", "unknown"]:
    return _STOP_REASONS.get(finish_reason, "unknown") if isinstance(finish_reason, str) else "unknown"  # type: ignore[return-value]


def _usage(data: Any) -> Any:
    from inspect_ai.model import ModelUsage

    if not isinstance(data, dict):
        return None
    inputs, outputs = _count(data.get("input_tokens")), _count(data.get("output_tokens"))
    reasoning = _count(data.get("reasoning_tokens", 0))
    if inputs is None or outputs is None or reasoning is None:
        return None
    return ModelUsage(
        input_tokens=inputs,
        output_tokens=outputs,
        total_tokens=inputs + outputs,
        reasoning_tokens=reasoning or None,
    )


def _count(value: Any) -> int | None:
    """A token count as a record holds it (an edited one may hold anything)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63:
        return value
    return None


def model_output(model: str, message: ChatMessageAssistant, stop_reason: str, usage: Any) -> ModelOutput:
    from inspect_ai.model import ChatCompletionChoice, ModelOutput

    return ModelOutput(
        model=model,
        choices=[ChatCompletionChoice(message=message, stop_reason=stop_reason)],  # type: ignore[arg-type]
        usage=usage,
    )


class SampleBuilder:
    """Builds one record's sample; every value passes through one :class:`Fitter`."""

    def __init__(self, record: SampleRecord, task: TaskInfo, settings: Settings) -> None:
        self.record = record
        self.task = task
        self.settings = settings
        self.fit = Fitter()
        started = _time(record.started_at)
        finished = _time(record.finished_at)
        if started is None:
            self.fit.note(
                "started_at", "not an ISO time; events carry the finish time", len(record.started_at)
            )
        self.started = started or finished or dt.datetime.fromtimestamp(0, dt.UTC)
        self.finished = finished or self.started
        self.model = self.fit.text(record.model, "model")
        self.duration = self.fit.number(record.duration_s, "duration_s")
        self._span = 0
        self._reply: str | None = None

    # -- the parts -------------------------------------------------------------------------

    def score(self) -> Score | None:
        from inspect_ai.scorer import Score

        record = self.record
        if record.outcome in ERROR_OUTCOMES:
            return None
        return Score(
            value=CORRECT if record.success else INCORRECT,
            answer=self._answer(),
            explanation=self._explanation(),
            metadata=self.fit.value(self._score_metadata(), "score"),
        )

    def _answer(self) -> str | None:
        record = self.record
        if record.submission is not None:
            return self.fit.text(record.submission.code, "submission.code")
        if record.eed is not None and record.eed.extracted_answer is not None:
            return self.fit.text(record.eed.extracted_answer, "eed.extracted_answer")
        return self.final_reply() or None

    def final_reply(self) -> str:
        """The model's last reply (fitted once: a second call must not note it again)."""
        if self._reply is None:
            self._reply = self._last_reply()
        return self._reply

    def _last_reply(self) -> str:
        for position in range(len(self.record.transcript) - 1, -1, -1):
            entry = self.record.transcript[position]
            if isinstance(entry, dict) and entry.get("role") == "assistant":
                return _text(entry.get("content"), f"transcript.{position}.content", self.fit)
        return ""

    def _explanation(self) -> str | None:
        record = self.record
        if record.judge is not None:
            if record.judge.replies:
                return self.fit.text(
                    record.judge.replies[-1], f"judge.replies.{len(record.judge.replies) - 1}"
                )
            return (
                None
                if record.judge.precheck is None
                else self.fit.text(record.judge.precheck, "judge.precheck")
            )
        if record.submission is not None and record.submission.verification is not None:
            return self.fit.text(record.submission.verification, "submission.verification")
        if record.eed is not None:
            return f"EED {record.eed.score:g} ({self.fit.text(record.eed.status, 'eed.status')})"
        return None if record.error is None else self.fit.text(record.error, "error")

    def _score_metadata(self) -> dict[str, Any]:
        record = self.record
        data: dict[str, Any] = {
            "outcome": record.outcome.value,
            "score": record.score,
            "success": record.success,
        }
        if record.judge is not None:
            data["judge"] = record.judge.model_dump(exclude={"replies", "prompt"})
        if record.eed is not None:
            data["eed"] = record.eed.model_dump()
        if record.submission is not None:
            data["submission"] = record.submission.model_dump(exclude={"code"})
        if record.rescore is not None:
            data["rescore"] = record.rescore.model_dump(mode="json")
        return data

    # -- events ----------------------------------------------------------------------------

    def _span_id(self) -> str:
        self._span += 1
        return f"{self.record.task_id[:8]}-{self.record.trial}-span-{self._span}"

    def _at(self, when: dt.datetime) -> dict[str, Any]:
        return {"timestamp": when, "working_start": 0.0}

    def events(
        self, messages: list[ChatMessage], score: Score | None, sample_id: str, question: str, target: str
    ) -> list[Event]:
        from inspect_ai.dataset import Sample
        from inspect_ai.event import SampleInitEvent, ScoreEvent

        events: list[Event] = []
        at = self._at(self.started)
        with_span = self._spanner(events)
        init = with_span("init", "init", None)
        events.append(
            SampleInitEvent(
                sample=Sample(
                    id=sample_id,
                    input=question,
                    target=target,
                    metadata={"subject": self.record.subject} if self.record.subject else None,
                ),
                span_id=init,
                **at,
            )
        )
        with_span(None, None, init)
        solvers = with_span("solvers", "solvers", None)
        solver = with_span(f"proctor/{self.settings.track}", "solver", solvers)
        events.extend(self._conversation_events(messages, solver))
        with_span(None, None, solver)
        with_span(None, None, solvers)
        scorers = with_span("scorers", "scorers", None)
        scorer = with_span(SCORER, "scorer", scorers)
        events.extend(self._judge_events(scorer))
        if score is not None:
            events.append(
                ScoreEvent(
                    score=score,
                    target=target,
                    scorer=SCORER,
                    span_id=scorer,
                    timestamp=self.finished,
                    working_start=self.duration or 0.0,
                )
            )
        with_span(None, None, scorer)
        with_span(None, None, scorers)
        if self.record.outcome in ERROR_OUTCOMES:
            from inspect_ai.event import ErrorEvent

            events.append(ErrorEvent(error=self.error(), timestamp=self.finished, working_start=0.0))
        return events

    def _spanner(self, events: list[Event]) -> Callable[[str | None, str | None, str | None], str]:
        """``(name, type, parent)`` opens a span and returns its id; ``(None, None, id)`` closes it."""
        from inspect_ai.event import SpanBeginEvent, SpanEndEvent

        def span(name: str | None, kind: str | None, other: str | None) -> str:
            if name is None:
                assert other is not None
                events.append(SpanEndEvent(id=other, span_id=other, **self._at(self.started)))
                return other
            span_id = self._span_id()
            events.append(
                SpanBeginEvent(
                    id=span_id, name=name, type=kind, parent_id=other, span_id=other, **self._at(self.started)
                )
            )
            return span_id

        return span

    def _conversation_events(self, messages: list[ChatMessage], span: str) -> list[Event]:
        from inspect_ai.event import ModelEvent

        record = self.record
        config = generate_config(
            self.settings.model, record.reasoning_effort, self.settings.max_output_tokens
        )
        # Each tool call's record by its id, in the order the calls were made.
        by_id: dict[str, list[tuple[int, ToolCallRecord]]] = {}
        for index, call in enumerate(record.tool_calls):
            by_id.setdefault(call.call_id, []).append((index, call))
        used: set[int] = set()
        events: list[Event] = []
        # The transcript's own entries, when the messages are theirs (not a summary in their
        # place), and each reply's row of the token budget: FrontierMath keeps a reply's usage
        # in its entry, the other tracks in ``turns``, one row per reply.
        entries = record.transcript if len(record.transcript) == len(messages) else [{}] * len(messages)
        replies = sum(1 for m in messages if m.role == "assistant")
        turns = record.turns if len(record.turns) == replies else [None] * replies
        reply = 0
        for position, message in enumerate(messages):
            if message.role == "assistant":
                entry = entries[position] if isinstance(entries[position], dict) else {}
                turn = turns[reply]
                reply += 1
                usage = _usage(entry.get("usage"))
                if usage is None and turn is not None:
                    usage = _usage(turn.model_dump())
                forced = bool(entry.get("forced_submission")) or (turn is not None and turn.forced_submission)
                events.append(
                    ModelEvent(
                        model=self.model,
                        input=messages[:position],
                        tools=self.offered_tools,
                        tool_choice=self._forced_choice() if forced else "auto",
                        config=config,
                        output=model_output(
                            self.model,
                            message,
                            _stop_reason(entry.get("finish_reason")),
                            usage,
                        ),
                        span_id=span,
                        metadata=self.fit.value(
                            {
                                k: entry[k]
                                for k in ("turn", "forced_submission", "finish_reason")
                                if k in entry
                            },
                            f"transcript.{position}",
                        )
                        or None,
                        **self._at(self.started),
                    )
                )
            elif message.role == "tool":
                match = self._tool_record(message, by_id, used)
                if match is not None:
                    used.add(match[0])
                    events.append(self._tool_event(match[0], match[1], message, span))
        # Calls the transcript shows no result for (an edited file): still shown, after the rest.
        for index, call in enumerate(record.tool_calls):
            if index not in used:
                events.append(self._tool_event(index, call, None, span))
        if record.provider_refusal is not None:
            refusal = record.provider_refusal
            from inspect_ai.model import ModelOutput

            events.append(
                ModelEvent(
                    model=self.model,
                    input=messages,
                    tools=self.offered_tools,
                    tool_choice="auto",
                    config=config,
                    output=ModelOutput(model=self.model, choices=[]),
                    error=self.fit.text(
                        f"{refusal.kind} (HTTP {refusal.status}): {refusal.message}", "provider_refusal"
                    ),
                    span_id=span,
                    metadata={
                        "provider_refusal": self.fit.value(
                            refusal.model_dump(mode="json"), "provider_refusal"
                        )
                    },
                    **self._at(self.started),
                )
            )
        return events

    @functools.cached_property
    def offered_tools(self) -> list[Any]:
        """The offered tools as Inspect's ToolInfo (what its viewer lists for each model call),
        built once per sample: every request of the conversation offered the same ones."""
        from inspect_ai.tool import ToolInfo, ToolParams
        from inspect_ai.util import JSONSchema

        tools: list[Any] = []
        for schema in self.settings.tools:
            function = schema["function"]
            parameters = function["parameters"]
            tools.append(
                ToolInfo(
                    name=function["name"],
                    description=function["description"],
                    parameters=ToolParams(
                        properties={
                            name: JSONSchema.model_validate(value)
                            for name, value in parameters["properties"].items()
                        },
                        required=list(parameters.get("required", [])),
                    ),
                )
            )
        return tools

    def _forced_choice(self) -> Any:
        from inspect_ai.tool import ToolFunction

        return ToolFunction(name="submit_answer")

    def _tool_record(
        self,
        message: ChatMessage,
        by_id: dict[str, list[tuple[int, ToolCallRecord]]],
        used: set[int],
    ) -> tuple[int, ToolCallRecord] | None:
        call_id = getattr(message, "tool_call_id", None)
        for index, call in by_id.get(call_id or "", []):
            if index not in used:
                return index, call
        return None

    def _tool_event(self, index: int, call: ToolCallRecord, message: ChatMessage | None, span: str) -> Event:
        from inspect_ai.event import ToolEvent
        from inspect_ai.tool import ToolCallError

        where = f"tool_calls.{index}"
        arguments, parse_error = arguments_of(call.raw_arguments, f"{where}.raw_arguments", self.fit)
        sandbox = call.sandbox if isinstance(call.sandbox, dict) else None
        error: ToolCallError | None = None
        if call.error is not None:
            kind = (
                "parsing"
                if parse_error is not None
                else ("sandbox_unavailable" if call.error.startswith("sandbox failure") else "unknown")
            )
            error = ToolCallError(kind, self.fit.text(call.error, f"{where}.error"))  # type: ignore[arg-type]
        elif sandbox is not None and sandbox.get("timed_out") is True:
            error = ToolCallError("timeout", self.fit.text(call.result, f"{where}.result"))
        elif sandbox is not None and sandbox.get("oom_killed") is True:
            error = ToolCallError("limit", self.fit.text(call.result, f"{where}.result"))
        metadata: dict[str, Any] = {"turn": call.turn}
        if sandbox is not None:
            metadata["sandbox"] = sandbox
        if call.truncated:
            metadata["truncated"] = True
        if call.deviations:
            metadata["deviations"] = call.deviations
        if parse_error is not None:
            metadata["parse_error"] = parse_error
        return ToolEvent(
            id=self.fit.text(call.call_id, f"{where}.call_id") or f"call-{index}",
            function=self.fit.text(call.name, f"{where}.name") or "unknown",
            arguments=arguments,
            result=self.fit.text(call.result, f"{where}.result"),
            error=error,
            working_time=self.fit.number(call.duration_s, f"{where}.duration_s"),
            message_id=message.id if message is not None else None,
            span_id=span,
            metadata=self.fit.value(metadata, where),
            **self._at(self.started),
        )

    def _judge_events(self, span: str) -> list[Event]:
        from inspect_ai.event import ModelEvent
        from inspect_ai.model import ChatMessageAssistant, ChatMessageUser

        judge = self.record.judge
        if judge is None or judge.prompt is None or not judge.model:
            return []
        name = self.fit.text(judge.model, "judge.model")
        prompt = ChatMessageUser(content=self.fit.text(judge.prompt, "judge.prompt"))
        config = generate_config(self.settings.judge, None, None)
        # The judge's tokens are recorded over all its attempts: per request only when there was one.
        usage = _usage(
            {"input_tokens": judge.input_tokens, "output_tokens": judge.output_tokens, "reasoning_tokens": 0}
        )
        events: list[Event] = []
        for attempt, reply in enumerate(judge.replies):
            message = ChatMessageAssistant(
                content=self.fit.text(reply, f"judge.replies.{attempt}"), model=name
            )
            events.append(
                ModelEvent(
                    model=name,
                    role="grader",
                    input=[prompt],
                    tools=[],
                    tool_choice="none",
                    config=config,
                    output=model_output(name, message, "stop", usage if len(judge.replies) == 1 else None),
                    span_id=span,
                    metadata={"attempt": attempt + 1},
                    **self._at(self.started),
                )
            )
        return events

    # -- the sample ------------------------------------------------------------------------

    def input_text(self, messages: list[ChatMessage]) -> str:
        """The task's question; without the tasks file, the first user message (the whole prompt)."""
        if self.task.question is not None:
            return self.fit.text(self.task.question, "tasks file: question")
        first_user = next((m for m in messages if m.role == "user"), None)
        return first_user.text if first_user is not None else ""

    def target(self) -> str:
        if self.task.target is not None:
            return self.fit.text(self.task.target, "tasks file: reference")
        if self.record.reference is not None:
            return self.fit.text(self.record.reference.text, "reference.text")
        return ""

    def error(self) -> Any:
        from inspect_ai._util.error import EvalError

        record = self.record
        return EvalError(
            message=self.fit.text(record.error or record.outcome.value, "error"),
            traceback=self.fit.text(record.harness_traceback or "", "harness_traceback"),
            traceback_ansi="",
        )

    def metadata(self) -> dict[str, Any]:
        record = self.record
        return self.fit.value(
            {
                "task_id": record.task_id,
                "outcome": record.outcome.value,
                "subject": record.subject,
                "reasoning_effort": record.reasoning_effort,
                "error": record.error,
                "forced_submission_turn": record.forced_submission_turn,
                "cap_reached": record.cap_reached,
                "retries": record.retries,
                "provider_refusal": (
                    record.provider_refusal.model_dump(mode="json") if record.provider_refusal else None
                ),
            },
            "",
        )


def eval_sample(record: SampleRecord, task: TaskInfo, settings: Settings) -> EvalSample:
    """The record as an Inspect sample that Inspect's writer holds (see the module doc)."""
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelOutput, ModelUsage
    from inspect_ai.scorer import Score

    builder = SampleBuilder(record, task, settings)
    fit = builder.fit
    sid = sample_id(record.task_id, fit)
    messages: list[ChatMessage] = guarded(
        fit,
        "transcript",
        lambda: chat_messages(record.transcript, builder.model, fit),
        lambda problem: _summary_messages(f"[proctor export: the transcript was left out: {problem}]"),
    )
    question, target = builder.input_text(messages), builder.target()
    verdict = None if record.outcome in ERROR_OUTCOMES else (CORRECT if record.success else INCORRECT)
    score: Score | None = guarded(
        fit,
        "score",
        builder.score,
        lambda problem: (
            None
            if verdict is None
            else Score(value=verdict, explanation=f"[proctor export: left out: {problem}]")
        ),
    )
    events: list[Event] = guarded(
        fit,
        "events",
        lambda: builder.events(messages, score, sid, question, target),
        lambda problem: _summary_events(f"[proctor export: the events were left out: {problem}]"),
    )
    usage = ModelUsage(
        input_tokens=record.input_tokens,
        output_tokens=record.output_tokens,
        total_tokens=record.total_tokens,
        reasoning_tokens=record.reasoning_tokens or None,
    )
    judge_usage: dict[str, Any] = {}
    if record.judge is not None and record.judge.model:
        judge_usage["grader"] = ModelUsage(
            input_tokens=record.judge.input_tokens,
            output_tokens=record.judge.output_tokens,
            total_tokens=record.judge.input_tokens + record.judge.output_tokens,
        )
    duration = builder.duration
    sample = guarded(
        fit,
        "sample",
        lambda: EvalSample(
            id=sid,
            epoch=record.trial + 1,
            input=question,
            target=target,
            messages=messages,
            output=ModelOutput.from_content(
                builder.model, builder.final_reply(), stop_reason=_sample_stop(record)
            ),
            scores=None if score is None else {SCORER: score},
            metadata=builder.metadata(),
            model_usage={builder.model: usage},
            role_usage=judge_usage,
            started_at=None if _time(record.started_at) is None else builder.started.isoformat(),
            completed_at=None if _time(record.finished_at) is None else builder.finished.isoformat(),
            total_time=duration,
            working_time=duration,
            error=builder.error() if record.outcome in ERROR_OUTCOMES else None,
            events=events,
        ),
        lambda problem: bare_sample(sid, record.trial + 1, verdict, record.outcome.value, fit),
    )
    return holdable(sample, fit)


def _summary_messages(text: str) -> list[ChatMessage]:
    from inspect_ai.model import ChatMessageUser

    return [ChatMessageUser(content=text)]


def _summary_events(text: str) -> list[Event]:
    from inspect_ai.event import InfoEvent

    return [InfoEvent(source="proctor export", data=text)]


def _problem(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return safe_text(f"{type(exc).__name__}: {first[:200]}")


def guarded(fit: Fitter, field: str, build: Callable[[], _T], fallback: Callable[[str], _T]) -> _T:
    """``build()``, or when one of Inspect's types refuses a value the rules let through, the
    fallback (a summary), noted: one part of one sample, never the export."""
    try:
        return build()
    except Exception as exc:  # whatever Inspect's validation raised: that part degrades
        problem = _problem(exc)
        fit.note(field, f"Inspect's types refused it ({problem}); replaced by a summary", None)
        return fallback(problem)


def _sample_stop(record: SampleRecord) -> Literal["stop", "model_length", "content_filter"]:
    """Inspect's own name for a provider's refusal (a scored sample there too)."""
    refusal = record.provider_refusal
    if refusal is None:
        return "stop"
    return "model_length" if refusal.kind == "context_overflow" else "content_filter"


def write_problem(sample: EvalSample) -> str | None:
    """Why Inspect cannot write ``sample`` and read it back, or None when it can.

    The writer's own steps: ``condense_sample`` (which raises ``SampleSerializationError`` on
    content nested too deeply), JSON at the depth the ``.json`` log nests a sample (two levels
    below the root; the ``.eval`` log writes it at the root), and the reader's validation.
    """
    from inspect_ai.log import EvalSample, condense_sample
    from pydantic_core import to_json

    try:
        condensed = condense_sample(sample)
        text = to_json([[condensed]], exclude_none=True)
        EvalSample.model_validate(json.loads(text)[0][0], context={"deserializing": True})
    except Exception as exc:  # whatever the writer or reader raised: the sample degrades
        return _problem(exc)
    return None


def holdable(sample: EvalSample, fit: Fitter) -> EvalSample:
    """``sample`` with its notes, in the first form Inspect can write: whole; without its events;
    without its messages too; the bare sample (id, epoch, score). Each step is noted."""
    from inspect_ai.event import InfoEvent
    from inspect_ai.model import ChatMessageUser, ModelOutput

    def noted(candidate: EvalSample) -> EvalSample:
        report = fit.report()
        if report is None:
            return candidate
        return candidate.model_copy(update={"metadata": {**candidate.metadata, "proctor_export": report}})

    candidate = noted(sample)
    problem = write_problem(candidate)
    if problem is None:
        return candidate
    fit.note("events", f"Inspect cannot write them ({problem}); replaced by a summary", len(sample.events))
    summary = f"[proctor export: this sample's events were left out: {problem}]"
    candidate = noted(
        sample.model_copy(update={"events": [InfoEvent(source="proctor export", data=summary)]})
    )
    problem = write_problem(candidate)
    if problem is None:
        return candidate
    fit.note(
        "messages", f"Inspect cannot write them ({problem}); replaced by a summary", len(sample.messages)
    )
    summary = f"[proctor export: this sample's messages were left out: {problem}]"
    candidate = noted(
        sample.model_copy(
            update={
                "events": [InfoEvent(source="proctor export", data=summary)],
                "messages": [ChatMessageUser(content=summary)],
                "output": ModelOutput(model=sample.output.model),
            }
        )
    )
    if write_problem(candidate) is None:
        return candidate
    fit.note("sample", "Inspect cannot write the rest; only the id, epoch, outcome and score are kept", None)
    verdict = None
    kept = sample.scores.get(SCORER) if sample.scores else None
    if kept is not None and isinstance(kept.value, str):
        verdict = kept.value
    outcome = sample.metadata.get("outcome")
    return bare_sample(sample.id, sample.epoch, verdict, outcome if isinstance(outcome, str) else None, fit)


def bare_sample(
    sid: int | str, epoch: int, verdict: str | None, outcome: str | None, fit: Fitter
) -> EvalSample:
    """The last resort: nothing but Proctor's own values (the fitted id, the epoch, the verdict,
    the outcome) and the notes of what was left out."""
    from inspect_ai.log import EvalSample
    from inspect_ai.scorer import Score

    return EvalSample(
        id=sid,
        epoch=epoch,
        input="[proctor export: left out, see metadata.proctor_export]",
        target="",
        scores=None if verdict is None else {SCORER: Score(value=verdict)},
        metadata={"outcome": outcome, "proctor_export": fit.report()},
    )
