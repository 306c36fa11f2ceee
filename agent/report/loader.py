"""Read a run directory into memory, checking it the way a person would want to be told.

A run directory holds ``samples.jsonl`` (one :class:`SampleRecord` per line), ``run.json``
(the header) and ``summary.json``. Only ``samples.jsonl`` is required: a crashed run still
deserves a report. Every problem is reported as a :class:`UserError` naming file and line.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from proctor.agent.errors import UserError
from proctor.agent.inputs.input_files import (
    MAX_CONFIG_BYTES,
    MAX_SAMPLES_BYTES,
    read_text_input,
    too_deep,
    unreadable_value,
)
from proctor.agent.results.records import RERUN_ON_RESUME, SampleRecord
from proctor.agent.results.summary import run_span, session_count
from proctor.agent.results.summary import wall_seconds as summary_wall_seconds

SAMPLES_FILE = "samples.jsonl"
HEADER_FILE = "run.json"
SUMMARY_FILE = "summary.json"

DEFAULT_FORCE_SUBMIT_AT = 660_000
DEFAULT_TOKEN_CAP = 1_000_000


@dataclass
class RunData:
    run_dir: Path
    samples: list[SampleRecord]
    header: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    # Things the reader should know about the files themselves (e.g. a torn last line).
    warnings: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        run_id = self.header.get("run_id") or self.header.get("id")
        if run_id:
            return str(run_id)
        if self.samples:
            return self.samples[0].run_id
        return self.run_dir.name

    @property
    def config(self) -> dict[str, Any]:
        config = self.header.get("config")
        return config if isinstance(config, dict) else {}

    @property
    def budget(self) -> tuple[int, int]:
        """(force_submit_at, token_cap) from the run's config, else the protocol's defaults."""
        budget = _mapping(self.config.get("budget")) or _mapping(self.header.get("budget"))
        force = _positive_int(budget.get("force_submit_at"), DEFAULT_FORCE_SUBMIT_AT)
        cap = _positive_int(budget.get("token_cap"), DEFAULT_TOKEN_CAP)
        return force, cap

    @property
    def tracks(self) -> list[str]:
        names = sorted({s.track for s in self.samples})
        configured = self.header.get("track") or self.config.get("track")
        if not names and configured:
            names = [str(configured)]
        return names

    @property
    def models(self) -> list[str]:
        """Model labels: the header's (in config order), then any only the records name."""
        described = [m for m in _list(self.header.get("models")) if isinstance(m, dict)]
        configured = [str(m.get("label") or m.get("name")) for m in described] or [
            str(m.get("name")) for m in _list(self.config.get("models")) if isinstance(m, dict)
        ]
        return list(dict.fromkeys([*configured, *(s.model for s in self.samples)]))

    @property
    def prices(self) -> dict[str, tuple[float | None, float | None]]:
        """Record label -> (input, output) USD per million tokens, for models that set prices.

        Records carry the runner's model *label* (the name, plus "@effort" for twins); the
        header's ``models`` list pairs labels with configs in order.
        """
        configs = [m for m in _list(self.config.get("models")) if isinstance(m, dict)]
        described = [m for m in _list(self.header.get("models")) if isinstance(m, dict)]
        labels = [str(m.get("label") or m.get("name")) for m in described]
        if len(labels) != len(configs):
            labels = [str(m.get("name")) for m in configs]
        prices: dict[str, tuple[float | None, float | None]] = {}
        for label, model in zip(labels, configs, strict=True):
            # Checked as the judge's are: text, a list or 400 digits there is no price.
            model_prices = _prices_of(model)
            if model_prices is not None:
                prices[label] = model_prices
        return prices

    @property
    def judge(self) -> dict[str, Any] | None:
        """The judge as configured (name, effort, prices), else as the records name it; None without one."""
        configured = self.config.get("judge")
        if isinstance(configured, dict) and configured.get("name"):
            return {
                "name": str(configured["name"]),
                "reasoning_effort": configured.get("reasoning_effort"),
                "prices": _prices_of(configured),
            }
        named = sorted({s.judge.model for s in self.samples if s.judge is not None and s.judge.model})
        if named:
            return {"name": ", ".join(named), "reasoning_effort": None, "prices": None}
        return None

    @property
    def judge_prices(self) -> tuple[float | None, float | None] | None:
        judge = self.judge
        return None if judge is None else judge["prices"]

    @property
    def is_agentic(self) -> bool:
        """Whether the FrontierMath token budget applies (it is that track's protocol only)."""
        return "frontiermath" in self.tracks

    @property
    def isolates_less(self) -> bool:
        """Whether the sandbox was one that isolates less than Docker (the local backend)."""
        if self.header.get("sandbox_isolates_less"):
            return True
        return str(self.sandbox.get("backend", "")).lower() == "local"

    @property
    def started_at(self) -> str | None:
        """When the run began: its first session's start (a resume's header has its own)."""
        value = run_span(self.header)[0] or self.header.get("created_at")
        return str(value) if value else None

    @property
    def ended_at(self) -> str | None:
        """When the run's last session ended."""
        value = run_span(self.header)[1] or self.header.get("finished_at")
        return str(value) if value else None

    @property
    def sessions(self) -> int:
        """Sessions the run took: 1, and one more per --resume."""
        return session_count(self.header)

    @property
    def sandbox(self) -> dict[str, Any]:
        """The sandbox as described in the header (backend, image ID), falling back to records."""
        described = self.header.get("sandbox")
        info: dict[str, Any] = dict(described) if isinstance(described, dict) else {}
        if "backend" not in info:
            for sample in self.samples:
                backend = _first_backend(sample)
                if backend:
                    info["backend"] = backend
                    break
        if not (info.get("image_id") or info.get("image")):
            images = {s.sandbox_image for s in self.samples if s.sandbox_image}
            if images:
                info["image_id"] = ", ".join(sorted(images))
        return info

    @property
    def wall_time_s(self) -> float | None:
        """The run summary's wall time (summed over resumed sessions), else header or record stamps."""
        sessions = summary_wall_seconds(self.header) if self.header.get("sessions") else None
        if sessions is not None:
            return sessions
        start, end = _parse_time(self.started_at), _parse_time(self.ended_at)
        if start is None or end is None:
            starts = [t for t in (_parse_time(s.started_at) for s in self.samples) if t]
            ends = [t for t in (_parse_time(s.finished_at) for s in self.samples) if t]
            if not starts or not ends:
                return None
            start, end = min(starts), max(ends)
        return max(0.0, (end - start).total_seconds())


def load_run(run_dir: Path) -> RunData:
    """Load and validate a run directory; raise UserError with file and line on bad input."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise UserError(f"{run_dir}: no such run directory")
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: not a directory (expected a run directory holding {SAMPLES_FILE})")
    samples_path = run_dir / SAMPLES_FILE
    if not samples_path.is_file():
        raise UserError(f"{run_dir}: not a run directory ({SAMPLES_FILE} is missing)")
    warnings: list[str] = []
    samples = _load_samples(samples_path, warnings)
    header = _load_json_object(run_dir / HEADER_FILE, warnings, required=False) or {}
    summary = _load_json_object(run_dir / SUMMARY_FILE, warnings, required=False)
    return RunData(run_dir=run_dir, samples=samples, header=header, summary=summary, warnings=warnings)


def _load_samples(path: Path, warnings: list[str]) -> list[SampleRecord]:
    text = read_text_input(path, "samples file", max_bytes=MAX_SAMPLES_BYTES, run_file=True)
    lines = text.split("\n")
    by_key: dict[tuple[str, str, int], SampleRecord] = {}
    for index, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        is_torn_tail = index == len(lines) and not text.endswith("\n")
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            if is_torn_tail:
                # A crash mid-append leaves an unterminated last line; that sample did not finish.
                warnings.append(f"{path.name}:{index}: ignored an unfinished last line")
                continue
            raise UserError(f"{path}:{index}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        except RecursionError:
            raise UserError(too_deep(f"{path}:{index}")) from None
        except ValueError as exc:
            raise UserError(f"{path}:{index}: {unreadable_value(exc)}") from None
        try:
            record = SampleRecord.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(record)"
            raise UserError(f"{path}:{index}: field {where}: {first['msg']}") from None
        key = (record.model, record.task_id, record.trial)
        previous = by_key.get(key)
        if previous is not None and previous.outcome not in RERUN_ON_RESUME:
            # The store's rule (agent/results/store.py: load_samples): only an error record is superseded
            # (--resume ran it again); any other repeat is an edit and the first record stands,
            # so the report counts exactly what the summary counts.
            warnings.append(
                f"{path.name}:{index}: duplicate sample {record.task_id} trial {record.trial}; kept the first"
            )
            continue
        by_key[key] = record
    return list(by_key.values())


def _load_json_object(path: Path, warnings: list[str], *, required: bool) -> dict[str, Any] | None:
    if not path.is_file():
        if required:
            raise UserError(f"{path}: missing")
        warnings.append(f"{path.name} is missing; the header shows what the samples themselves record")
        return None
    try:
        data = json.loads(read_text_input(path, "JSON file", max_bytes=MAX_CONFIG_BYTES, run_file=True))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise UserError(too_deep(str(path))) from None
    except ValueError as exc:
        raise UserError(f"{path}: {unreadable_value(exc)}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object at the top level")
    return data


def _first_backend(sample: SampleRecord) -> str | None:
    for call in sample.tool_calls:
        if call.sandbox and call.sandbox.get("backend"):
            return str(call.sandbox["backend"])
    if sample.submission and sample.submission.answer_exec:
        backend = sample.submission.answer_exec.get("backend")
        return str(backend) if backend else None
    return None


def _prices_of(model: dict[str, Any]) -> tuple[float | None, float | None] | None:
    """A model config's (input, output) USD per million tokens; None when it sets neither or
    sets something that is not a number (run.json may have been edited by anyone)."""
    values: list[float | None] = []
    for key in ("input_price_per_mtok", "output_price_per_mtok"):
        value = model.get(key)
        if value is None:
            values.append(None)
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        try:
            price = float(value)  # an int of 400 digits overflows here (and in isfinite)
        except OverflowError:
            return None
        if not math.isfinite(price):
            return None
        values.append(price)
    return None if values == [None, None] else (values[0], values[1])


def _mapping(value: Any) -> dict[str, Any]:
    """``value`` when it is an object, else empty: run.json may have been edited by anyone."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    """``value`` when it is a list, else empty (a string would iterate by character)."""
    return value if isinstance(value, list) else []


def _positive_int(value: Any, default: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: inf
        return default
    return number if number > 0 else default


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    # Naive stamps are taken as UTC so they compare with aware ones.
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
