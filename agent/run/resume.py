"""What a run directory already holds decides how a run starts in it: ``--resume`` carries on
the run its run.json records (the same config, the recorded endpoints, its sessions and events
kept), and a directory holding another run is refused. `proctor run --dry-run` makes the same
check, reading only."""

from __future__ import annotations

from typing import Any

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import RunConfig
from proctor.agent.results.records import utc_now
from proctor.agent.results.store import RunStore, checked_header, resume_conflicts
from proctor.agent.run.endpoint_record import endpoint_changes, pin_recorded_endpoints, refuse_or_record
from proctor.agent.run.sample_plan import model_labels


def prepare_header(
    config: RunConfig, store: RunStore, header: dict[str, Any], *, allow_endpoint_change: bool
) -> dict[str, Any]:
    """The header this session writes: ``header`` itself in a fresh directory, the recorded
    run's carried on for a resume; refused when the directory holds a run this one may not
    continue."""
    if config.resume and store.header_path.exists():
        previous = checked_header(store.read_header(), store.header_path)
        conflicts = resume_conflicts(previous, header)
        if conflicts:
            raise UserError(
                f"{store.header_path}: cannot resume this run with a different config: "
                + "; ".join(conflicts)
            )
        events = refuse_or_record(
            endpoint_changes(previous.get("endpoints"), header["endpoints"]),
            allowed=allow_endpoint_change,
            run_json=str(store.header_path),
            now=utc_now(),
        )
        header = {
            **header,
            "run_id": previous["run_id"],
            "created_at": previous.get("created_at"),
            "sessions": list(previous.get("sessions") or []),
            # Kept when this session opens no sandbox (nothing left to run).
            "sandbox": previous.get("sandbox"),
            "sandbox_isolates_less": previous.get("sandbox_isolates_less"),
            "sandbox_spec": previous.get("sandbox_spec"),
            # The resumed config is read back from run.json with every value explicit.
            "defaults_applied": previous.get("defaults_applied", []),
            "paper_defaults": previous.get("paper_defaults", header.get("paper_defaults")),
            "hardware": previous.get("hardware"),
            "events": list(previous.get("events") or []) + events,
        }
    else:
        store.refuse_samples_without_header(config.resume, "run")
    return header


def pinned_to_recorded_endpoints(config: RunConfig, store: RunStore) -> RunConfig:
    """A resume talks to the endpoints run.json records, not the new shell's environment."""
    if not store.header_path.exists():
        return config
    previous = store.read_header()
    return pin_recorded_endpoints(
        config, previous.get("endpoints"), model_labels(config.models), str(store.header_path)
    )
