"""CPU by part (sandbox/bench/cpu_parts.py) and the launcher's report that carries it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from proctor.sandbox.bench.cpu_parts import ContainerTally, Reading, per_call_ms, process_cpu_s
from proctor.sandbox.docker.containers import _Stream


def test_the_launchers_report_carries_cpu_by_part_and_an_old_report_still_ends_the_call() -> None:
    nonce = "ab" * 16
    with_cpu = _Stream(1024, nonce)
    with_cpu.feed(b"out" + f"\0proctor-exit:{nonce}:0:0:0:21000:5000:9000\0".encode())
    assert with_cpu.report == (0, False, False) and with_cpu.cpu_us == (21000, 5000, 9000)
    assert with_cpu.buffer.text() == "out"
    without = _Stream(1024, nonce)
    without.feed(f"\0proctor-exit:{nonce}:2:1:0\0".encode())
    assert without.report == (2, True, False) and without.cpu_us is None


def test_parts_per_call_split_the_containers_cgroup_by_the_launchers_own_accounting() -> None:
    before = Reading(controller_s=1.0, children_s=10.0, engine={7: 5.0, 8: 1.0})
    # pid 8 ended (its CPU stays counted as it was), pid 9 appeared during the round.
    after = Reading(controller_s=1.2, children_s=10.5, engine={7: 5.1, 9: 0.1})
    tally = ContainerTally()
    for index in range(4):
        tally.add(
            {
                "container_id": f"c{index}",
                "cpu_us": {"launcher": 20_000, "prepare": 5_000, "program": 30_000, "container": 75_000},
            }
        )
    parts = per_call_ms(before, after, 4, tally)
    assert parts["controller"] == pytest.approx(50.0)
    assert parts["engine"] == pytest.approx(50.0)
    assert (parts["launcher"], parts["prepare"], parts["program"]) == (20.0, 5.0, 30.0)
    assert parts["init"] == pytest.approx(20.0)  # 75 in the cgroup less the 55 the launcher counted
    assert parts["runtime"] == pytest.approx(125.0 - 75.0)  # reaped by the controller, less the containers
    assert parts["client"] is None


def test_init_is_estimated_from_the_calls_whose_cgroup_was_still_there() -> None:
    # Docker removes a fresh container's group once its launcher exits, which can be before
    # the report is read: that call has no "container" figure (CI saw init go missing).
    tally = ContainerTally()
    tally.add({"container_id": "c0", "cpu_us": {"launcher": 20_000, "prepare": 5_000, "program": 30_000}})
    tally.add(
        {
            "container_id": "c1",
            "cpu_us": {"launcher": 10_000, "prepare": 5_000, "program": 10_000, "container": 40_000},
        }
    )
    parts = per_call_ms(Reading(0.0, 0.0), Reading(0.0, 0.1), 2, tally)
    assert parts["init"] == pytest.approx(15.0)  # c1 alone: 40 in its group less its own 25
    assert (parts["launcher"], parts["program"]) == (15.0, 20.0)  # over both calls
    assert parts["runtime"] is None  # reaped CPU cannot be split without every call's group
    assert per_call_ms(Reading(0.0, 0.0), Reading(0.0, 0.0), 1, _only_without_group())["init"] is None


def _only_without_group() -> ContainerTally:
    tally = ContainerTally()
    tally.add({"container_id": "c0", "cpu_us": {"launcher": 1, "prepare": 1, "program": 1}})
    return tally


def test_a_kernel_worker_that_exits_during_the_round_takes_nothing_away() -> None:
    before = Reading(controller_s=0.0, children_s=0.0, kernel={10: 5.0, 11: 40.0})
    after = Reading(controller_s=0.0, children_s=0.0, kernel={10: 5.2, 12: 0.2})
    assert per_call_ms(before, after, 4, None)["kernel"] == pytest.approx(100.0)


def test_ways_without_a_launcher_show_what_the_controller_reaped_as_the_client() -> None:
    before = Reading(controller_s=0.0, children_s=0.0)
    after = Reading(controller_s=0.1, children_s=0.2)
    parts = per_call_ms(before, after, 2, None)
    assert parts["client"] == pytest.approx(100.0) and parts["launcher"] is None and parts["runtime"] is None


def test_a_process_reaped_cpu_is_counted_with_its_parent() -> None:
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass",
        ],
        check=True,
    )
    assert child.returncode == 0
    assert process_cpu_s(os.getpid(), children=True) - process_cpu_s(os.getpid(), children=False) >= 0.15


def test_a_reused_container_adds_only_what_its_counters_grew_by() -> None:
    seen: dict[str, dict[str, int]] = {}
    first, second = ContainerTally(seen), ContainerTally(seen)
    first.add(
        {"container_id": "c1", "cpu_us": {"launcher": 30, "prepare": 10, "program": 20, "container": 100}}
    )
    # The same container after a reset: launcher, entrypoint and cgroup counters ran on; the
    # program's figure is this call's alone.
    second.add(
        {"container_id": "c1", "cpu_us": {"launcher": 34, "prepare": 15, "program": 7, "container": 140}}
    )
    assert second.parts_us == {"launcher": 4, "prepare": 5, "program": 7, "container": 40}


def test_docker_exec_shows_what_ran_in_its_long_lived_containers_as_the_program() -> None:
    before = Reading(controller_s=0.0, children_s=0.0, containers_s=1.0)
    after = Reading(controller_s=0.0, children_s=0.1, containers_s=1.2)
    assert per_call_ms(before, after, 4, None)["program"] == pytest.approx(50.0)


def test_docker_exec_counts_its_program_once_though_the_live_shim_reaped_it_too() -> None:
    # The shim's own CPU grew by 0.04 s, and by the 0.2 s of the programs it reaped, which the
    # long-lived containers' groups counted as well: the parts must add up to what ran once.
    shim, dockerd = 41, 7
    before = Reading(controller_s=0.0, children_s=0.0, engine={shim: 3.0, dockerd: 9.0}, containers_s=1.0)
    after = Reading(controller_s=0.0, children_s=0.1, engine={shim: 3.24, dockerd: 9.08}, containers_s=1.2)
    parts = per_call_ms(before, after, 4, None)
    assert parts["program"] == pytest.approx(50.0)
    assert parts["engine"] == pytest.approx(30.0)  # (0.04 + 0.08) s over 4 calls
    assert parts["client"] == pytest.approx(25.0)
    whole_ms = (0.24 + 0.08 + 0.1) / 4 * 1000  # what the processes and groups spent, once each
    assert sum(value or 0.0 for part, value in parts.items() if part != "kernel") == pytest.approx(whole_ms)


def test_a_pooled_ways_engine_figure_is_left_whole() -> None:
    # Without long-lived containers nothing of the engine's figure was counted elsewhere.
    before = Reading(controller_s=0.0, children_s=0.0, engine={7: 5.0})
    after = Reading(controller_s=0.0, children_s=0.0, engine={7: 5.2})
    assert per_call_ms(before, after, 4, None)["engine"] == pytest.approx(50.0)


@pytest.mark.docker
@pytest.mark.slow
async def test_the_bench_runs_as_many_calls_at_once_as_callers_and_splits_each_ways_cpu(
    sandbox_image: str,
) -> None:
    from proctor.sandbox.bench.concurrency import run_concurrency_benchmark
    from proctor.sandbox.docker.oci_direct import available

    paths = ("docker", "runc-direct") if available() is None else ("docker",)
    report = await run_concurrency_benchmark([3], calls=1, rounds=1, image=sandbox_image, engine_paths=paths)
    assert report["max_concurrent_executions"] is None
    for row in report["results"]:
        assert row["execution_slots"] == 3
        for way, figures in row["ways"].items():
            parts = figures["cpu_ms_per_call_by_part"]
            assert parts["controller"] is not None and parts["engine"] is not None, way
            if way.startswith("pool") or way == "per-sample":
                assert all(parts[part] is not None for part in ("launcher", "prepare", "program")), way
            if way == "pool (runc-direct)":
                # Its groups stay until Proctor removes the container, so every call reads one.
                # On the engine's path the launcher exits right after its report and the engine
                # may drop the group first: ``init`` is then over the calls that read it, and
                # None when none did (a loaded machine, three calls).
                assert parts["init"] is not None
            if way == "pool (runc-direct)":
                assert parts["runtime"] is not None and parts["runtime"] > 0
            if way == "docker exec":
                assert parts["program"] is not None and parts["program"] > 0
