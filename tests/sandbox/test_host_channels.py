"""The host-channel measurement's decoder and grade (sandbox/bench/host_channels.py), on
synthetic samples whose bits are known: the figures in docs/sandbox.md rest on them."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.sandbox.bench.host_channels import binary_entropy, decode, grade

SLOT_S = 0.2


def manchester_samples(bits: list[int], drift: float, rng: random.Random) -> list[tuple[float, float]]:
    """What a receiver samples every 5 ms: a step of 10 in the half a bit's sender acted in, on
    a counter drifting by ``drift`` a second, with noise."""
    samples = []
    for index, bit in enumerate(bits):
        for step in range(int(SLOT_S / 0.005)):
            at = index * SLOT_S + step * 0.005
            first_half = step < SLOT_S / 0.005 / 2
            raised = 10.0 if first_half == bool(bit) else 0.0
            samples.append((at, 1000.0 + drift * at + raised + rng.uniform(-1, 1)))
    return samples


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), drift=st.floats(-50.0, 50.0))
def test_a_clean_channel_decodes_every_bit_whatever_the_hosts_drift(seed: int, drift: float) -> None:
    rng = random.Random(seed)
    bits = [rng.randrange(2) for _ in range(64)]
    figures = decode(manchester_samples(bits, drift, rng), 0.0, SLOT_S, len(bits), "mean")
    graded = grade(bits, figures, True, SLOT_S)
    assert graded["errors"] == 0 and graded["bits_per_s"] == 1 / SLOT_S


def test_errors_within_chance_count_as_no_channel_and_beyond_it_as_the_capacity() -> None:
    bits = [index % 2 for index in range(64)]
    right = [1.0 if bit else -1.0 for bit in bits]

    def with_errors(count: int) -> list[float | None]:
        return [-figure if index < count else figure for index, figure in enumerate(right)]

    for errors in (20, 32, 44):  # within three standard deviations of a fair coin's 32
        assert grade(bits, with_errors(errors), True, SLOT_S)["bits_per_s"] == 0.0
    for errors in (4, 60):  # as good either way: the attacker learns the sign once
        capacity = (1 - binary_entropy(errors / 64)) / SLOT_S
        assert grade(bits, with_errors(errors), True, SLOT_S)["bits_per_s"] == round(capacity, 2)
    # A slot with no samples in a half is an error, not a guess.
    assert grade(bits, [None] * 64, True, SLOT_S)["errors"] == 64
