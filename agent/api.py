"""Proctor's Python API: run an eval and read a run directory from a script or a notebook.

``import proctor`` re-exports what is here (see docs/api.md). The CLI and this API share one
path: a config is validated by the same loader as ``proctor run FILE``, and the run is executed
by the same runner, so a run started here is byte-for-byte the kind of run directory the CLI
writes, and can be resumed, viewed and compared with the CLI.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import RunConfig
from proctor.agent.results.records import SampleRecord
from proctor.agent.results.store import RUN_HEADER, SAMPLES, SUMMARY, load_samples, read_json
from proctor.agent.results.summary import summarize
from proctor.agent.run.config_loader import RunFlags, load_run_config
from proctor.agent.run.progress import RunProgress
from proctor.agent.run.runner import execute_run

if TYPE_CHECKING:
    import pandas

ConfigLike = RunConfig | Mapping[str, Any] | str | Path

# Sample fields that are whole structures (transcripts, tool calls, verdict details): the
# DataFrame keeps one row per sample with scalar columns; the structures stay on Run.samples.
# (input, output) USD per million tokens, either unknown.
PricePair = tuple[float | None, float | None]
_NESTED_FIELDS = ("transcript", "tool_calls", "turns", "submission", "judge", "eed", "unencodable_text")


@dataclass(frozen=True)
class Run:
    """A run directory as written by ``proctor run``: header, summary and finished samples."""

    path: Path
    header: dict[str, Any]
    summary: dict[str, Any]
    samples: list[SampleRecord]

    @property
    def status(self) -> str | None:
        """``finished``, ``interrupted`` or ``failed`` (as run.json records it)."""
        value = self.header.get("status")
        return value if isinstance(value, str) else None

    @property
    def run_id(self) -> str | None:
        value = self.header.get("run_id")
        return value if isinstance(value, str) else None

    def records(self) -> list[dict[str, Any]]:
        """Every sample as plain JSON-ready data, the way samples.jsonl holds it."""
        return [sample.model_dump(mode="json") for sample in self.samples]

    def to_dataframe(self) -> pandas.DataFrame:
        """One row per sample with its scalar fields (outcome, score, tokens, ...), plus the
        submission's and the judge's outcome-level fields flattened as ``submission_*`` /
        ``judge_*``. Needs pandas (``pip install pandas``)."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Run.to_dataframe needs pandas: pip install pandas") from None
        model_prices, judge_prices = self._prices()
        rows = []
        for record in self.records():
            row = {name: value for name, value in record.items() if name not in _NESTED_FIELDS}
            for nested in ("submission", "judge"):
                part = record.get(nested)
                if isinstance(part, dict):
                    for name, value in part.items():
                        if value is None or isinstance(value, str | int | float | bool):
                            row[f"{nested}_{name}"] = value
            row["tool_call_count"] = len(record.get("tool_calls") or [])
            row["turns"] = len(record.get("turns") or [])
            row["cost_usd"] = _priced(model_prices.get(str(record.get("model"))), record)
            judge = record.get("judge")
            # The judge's own tokens (every attempt), at the judge's prices; only when it was asked.
            asked = isinstance(judge, dict) and judge.get("decided_by") == "judge" and judge.get("model")
            row["judge_cost_usd"] = _priced(judge_prices, judge) if asked else None
            rows.append(row)
        return pandas.DataFrame(rows)

    def _prices(self) -> tuple[dict[str, PricePair], PricePair | None]:
        """(model label -> prices, the judge's prices) from the config run.json recorded."""
        raw_config = self.header.get("config")
        config: dict[str, Any] = raw_config if isinstance(raw_config, dict) else {}
        raw_models = self.header.get("models")
        models: list[Any] = raw_models if isinstance(raw_models, list) else []
        raw_entries = config.get("models")
        entries: list[Any] = raw_entries if isinstance(raw_entries, list) else []
        prices: dict[str, PricePair] = {}
        # run.json's "models" (labels) and config "models" (prices) are in the same order.
        for model, entry in zip(models, entries, strict=False):
            if isinstance(model, dict) and isinstance(entry, dict) and isinstance(model.get("label"), str):
                pair = _price_pair(entry)
                if pair is not None:
                    prices[model["label"]] = pair
        judge = config.get("judge")
        return prices, _price_pair(judge) if isinstance(judge, dict) else None


def _price_pair(entry: dict[str, Any]) -> PricePair | None:
    """(input, output) USD per million tokens of a recorded model entry; None when it has neither."""
    pair = tuple(
        value if isinstance(value, int | float) and not isinstance(value, bool) else None
        for value in (entry.get("input_price_per_mtok"), entry.get("output_price_per_mtok"))
    )
    return None if pair == (None, None) else (pair[0], pair[1])


def _priced(prices: PricePair | None, usage: Any) -> float | None:
    """What ``usage``'s input and output tokens cost at ``prices``; None when nothing is priced,
    as the summary does (agent/results/summary.py)."""
    if prices is None or not isinstance(usage, dict):
        return None
    total = 0.0
    for price, tokens in zip(prices, (usage.get("input_tokens"), usage.get("output_tokens")), strict=True):
        if price is not None and isinstance(tokens, int):
            total += tokens * price / 1e6
    return total


def load_run(path: str | Path) -> Run:
    """Read a run directory. The samples are parsed strictly (a damaged line raises
    :class:`UserError` naming file and line); the directory is never modified. When
    summary.json is missing (a run still going, or killed), the summary is computed from the
    finished samples the same way the runner computes it."""
    directory = Path(path)
    if not (directory / RUN_HEADER).is_file():
        raise UserError(f"{directory}: not a run directory (no {RUN_HEADER})")
    header = read_json(directory / RUN_HEADER)
    samples_path = directory / SAMPLES
    samples = load_samples(samples_path).records if samples_path.exists() else []
    summary_path = directory / SUMMARY
    # Missing while a run is going or after it was killed: computed as the runner would.
    summary = read_json(summary_path) if summary_path.is_file() else summarize(samples, header=header)
    return Run(path=directory, header=header, summary=summary, samples=samples)


def _to_config(config: ConfigLike, out: str | Path | None, resume: bool) -> RunConfig:
    if isinstance(config, RunConfig):
        changes: dict[str, Any] = {}
        if out is not None:
            changes["out"] = Path(out)
        if resume:
            changes["resume"] = True
        return config.model_copy(update=changes) if changes else config
    flags = RunFlags(out=Path(out) if out is not None else None, resume=resume)
    if isinstance(config, str | Path):
        return load_run_config(Path(config), flags)
    if isinstance(config, Mapping):
        return load_run_config(None, flags, base=dict(config), source="proctor.run(config)")
    kind = type(config).__name__
    raise TypeError(f"config must be a RunConfig, a mapping or a path to a YAML file, not {kind}")


async def run_async(
    config: ConfigLike,
    *,
    out: str | Path | None = None,
    resume: bool = False,
    progress: bool = False,
    preflight: bool = True,
) -> Run:
    """Run an eval in the caller's event loop and return the run as written to disk.

    ``config`` is what ``proctor run`` accepts: a YAML file's path, the same fields as a
    mapping, or a :class:`RunConfig`. A run that was interrupted or failed is still returned
    (see :attr:`Run.status`); bad input raises :class:`UserError` before anything is spent.
    The caller's loop is left as it was: no signal handlers are installed. As with
    ``proctor run``, every model and judge endpoint first gets one tiny request and a missing key
    variable is refused (``preflight=False`` skips the request, not the key check)."""
    run_config = _to_config(config, out, resume)
    return await _run_blocking(run_config, progress, preflight, handle_signals=False)


def run(
    config: ConfigLike,
    *,
    out: str | Path | None = None,
    resume: bool = False,
    progress: bool = False,
    preflight: bool = True,
) -> Run:
    """Run an eval to the end and return it: the blocking form of :func:`run_async`.

    Works in a plain script (Ctrl-C stops the run; finished samples are kept and the run can be
    resumed) and in a notebook, whose event loop is already running: there the run gets its own
    loop in a worker thread."""
    run_config = _to_config(config, out, resume)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_run_blocking(run_config, progress, preflight, handle_signals=_in_main_thread()))
    return _run_in_thread(run_config, progress, preflight)


async def _run_blocking(config: RunConfig, progress: bool, preflight: bool, *, handle_signals: bool) -> Run:
    console = Console() if progress else Console(quiet=True)
    result = await execute_run(
        config,
        progress=RunProgress(console, live=progress),
        handle_signals=handle_signals,
        preflight=preflight,
    )
    return load_run(result.run_dir)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _run_in_thread(config: RunConfig, progress: bool, preflight: bool) -> Run:
    outcome: list[Run] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            outcome.append(asyncio.run(_run_blocking(config, progress, preflight, handle_signals=False)))
        except BaseException as exc:  # re-raised in the caller's thread
            failure.append(exc)

    worker = threading.Thread(target=target, name="proctor-run", daemon=False)
    worker.start()
    worker.join()
    if failure:
        raise failure[0]
    return outcome[0]


__all__ = ["Run", "UserError", "load_run", "run", "run_async"]
