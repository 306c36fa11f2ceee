"""The pair rows (agent/audit/pairs.py): two concurrent calls, one sending a token, one listening.

Invariant: a row reports bits only when the listener's samples follow the sender's token, and
grades by the bandwidth it measured. Oracles: a listener that sees nothing (constant samples,
or a counter rising at a constant rate) carries 0 bits whatever the token; one that sees the
levels, or their inverse, carries all of them. Against real channels: two plain host processes
(a ``--command`` with no sandbox at all) share every inode and /proc/locks, and their rows grade
broken; the local backend and the default docker path grade held.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.agent.audit import pairs
from proctor.agent.audit.command_sandbox import CommandSandbox
from proctor.agent.audit.model import AuditContext, Finding, Verdict
from proctor.sandbox import Limits, Sandbox, open_sandbox

BY_ID = {channel.id: channel for channel in pairs.CHANNELS}
# The rows whose channel Proctor closes by construction (docs/sandbox.md, "What concurrent
# samples share"): each must hold, on every backend but a bare command.
CLOSED = ("pair.lock", "pair.inotify", "pair.proc_locks")
TOKENS = st.lists(st.integers(0, 1), min_size=8, max_size=64)


@settings(max_examples=30, deadline=None)
@given(bits=TOKENS, level=st.integers(0, 10**9), rate=st.integers(0, 10**6), cumulative=st.booleans())
def test_a_listener_that_sees_nothing_carries_no_bits(
    bits: list[int], level: int, rate: int, cumulative: bool
) -> None:
    slots = 2 * len(bits) + 1
    samples = [float(level + rate * i) if cumulative else float(level) for i in range(slots)]
    measured = pairs.decode(bits, samples, cumulative, 0.005)
    assert measured.carried_bits == 0 and measured.correct == measured.wrong == 0
    for channel in pairs.CHANNELS:
        assert pairs.grade(channel, measured) is Verdict.HELD


@settings(max_examples=30, deadline=None)
@given(bits=TOKENS, inverted=st.booleans(), scale=st.integers(1, 10**6))
def test_a_listener_that_follows_the_levels_either_way_carries_every_bit(
    bits: list[int], inverted: bool, scale: int
) -> None:
    levels = pairs.manchester(bits)
    samples = [0.0] + [float(scale * ((1 - level) if inverted else level)) for level in levels]
    measured = pairs.decode(bits, samples, False, 0.005)
    assert measured.undecided == 0
    assert measured.carried_bits == pytest.approx(len(bits))
    assert measured.bps == pytest.approx(len(bits) / (2 * len(bits) * 0.005))
    # A channel the docs bound at 0 is broken by any bit; the counters' bounds are what is measured.
    assert pairs.grade(BY_ID["pair.lock"], measured) is Verdict.BROKEN


def test_a_listener_no_better_than_chance_carries_no_bits() -> None:
    # Half right, half wrong: exactly what a listener guessing by coin would get.
    bits = [1, 0] * 16
    samples = [0.0]
    for index, level in enumerate(pairs.manchester(bits)):
        flip = (index // 2) % 2
        samples.append(float(level ^ flip))
    measured = pairs.decode(bits, samples, False, 0.005)
    assert measured.correct == measured.wrong == 16 and measured.carried_bits == 0


def test_every_row_can_measure_its_bound_and_the_closed_and_slow_ones_past_it() -> None:
    # One bit per two slots. A row whose clock stopped short of its bound would grade a channel
    # weak that the docs do not allow; the level counters' bound is their clock's ceiling.
    for channel in pairs.CHANNELS:
        ceiling = 1 / (2 * channel.slot_s)
        assert ceiling >= channel.bound_bps, channel.id
        if channel.id not in ("pair.nr_shmem", "pair.tasks"):
            assert ceiling > channel.bound_bps, channel.id


async def _closed_rows(sandbox: Sandbox, backend: str) -> dict[str, Finding]:
    ctx = AuditContext(sandbox=sandbox, limits=sandbox.default_limits, backend=backend)
    return {row: await pairs.measure(ctx, BY_ID[row]) for row in CLOSED}


# Each row sends a token one slot at a time between two real processes: seconds, whatever the machine.
@pytest.mark.slow
async def test_two_bare_processes_share_every_closed_channel() -> None:
    # The honest oracle for "broken": no sandbox at all, so every inode and /proc/locks is shared.
    found = await _closed_rows(CommandSandbox([sys.executable, "-"]), "command")
    assert {row: finding.verdict for row, finding in found.items()} == dict.fromkeys(
        CLOSED, Verdict.BROKEN
    ), found


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the local backend needs Linux")
async def test_the_local_backend_holds_the_closed_channels() -> None:
    box = await open_sandbox("local", default_limits=Limits(), probe_libraries=False)
    try:
        found = await _closed_rows(box, "local")
    finally:
        await box.aclose()
    assert {row: finding.verdict for row, finding in found.items()} == dict.fromkeys(CLOSED, Verdict.HELD), (
        found
    )


@pytest.mark.docker
async def test_the_default_docker_path_holds_the_closed_channels() -> None:
    # The pinned image and every default: what a run gets.
    box = await open_sandbox("docker", pool_size=0, probe_libraries=False)
    try:
        assert box.describe()["engine_path"] == "runc-direct"
        found = await _closed_rows(box, "docker")
    finally:
        await box.aclose()
    assert {row: finding.verdict for row, finding in found.items()} == dict.fromkeys(CLOSED, Verdict.HELD), (
        found
    )


def test_the_rows_run_alone_and_outside_the_quick_subset() -> None:
    from proctor.agent.audit.battery import ALONE, select_checks

    assert pairs.PAIR_IDS <= ALONE
    assert not pairs.PAIR_IDS & {check.id for check in select_checks("docker", quick=True)}


@pytest.mark.slow
async def test_a_command_that_runs_one_program_at_a_time_makes_the_rows_not_applicable(
    tmp_path: Path,
) -> None:
    # flock(1) serializes the two runs: they never overlap, so nothing could be measured, and a
    # row that said "held" here would be a pass for a channel never tried.
    serial = CommandSandbox(["flock", str(tmp_path / "one-at-a-time"), sys.executable, "-"])
    ctx = AuditContext(sandbox=serial, limits=serial.default_limits, backend="command")
    finding = await pairs.measure(ctx, BY_ID["pair.lock"])
    assert finding.verdict is Verdict.SKIPPED and "one program at a time" in finding.observed, finding
