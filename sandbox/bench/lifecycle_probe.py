"""Where a sandbox call's time goes under concurrency: ``python3 -m proctor.sandbox.bench.lifecycle_probe``.

C threads each run N calls of ``print(1)`` three ways and time every engine request:

- a new container: create, attach, start, launcher ready, run, remove;
- a recycled container (the warm pool's way): run, then the launcher's reset until it is ready again;
- ``docker exec`` into one long-lived container: exec_create, exec_start (which runs it).

It also samples the CPU time that dockerd and containerd (the daemons) and everything else on
the machine used meanwhile (runc and the per-container shims are short-lived, so they are in
"other", with the programs themselves and whatever else the machine was doing).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker

from proctor.sandbox.api import Limits
from proctor.sandbox.docker import labels
from proctor.sandbox.docker.backend import connect_engine, image_entrypoint, resolve_image, sandbox_user
from proctor.sandbox.docker.containers import (
    StartedContainer,
    create_started_container,
    recycle_container,
    remove_container,
    run_program,
)
from proctor.sandbox.program import python_argv

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class _TimedApi:
    """The APIClient, with the wall time of each request recorded under its method's name."""

    def __init__(self, api: docker.APIClient, record: Callable[[str, float], None]) -> None:
        self._api = api
        self._record = record

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._api, name)
        if not callable(method):
            return method

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self._record(name, time.perf_counter() - started)

        return timed


def _daemon_cpu_s() -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if name in ("dockerd", "containerd"):
            totals[name] += (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    first = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    busy = sum(int(value) for index, value in enumerate(first) if index not in (3, 4))
    totals["all"] = busy / _CLOCK_TICKS
    return dict(totals)


def probe(image: str | None, concurrency: int, calls: int, way: str) -> dict[str, Any]:
    client = connect_engine()
    reference, image_id = resolve_image(client, image)
    user = sandbox_user(client, image_id)
    entrypoint = image_entrypoint(client, image_id)
    samples: dict[str, list[float]] = defaultdict(list)
    lock = threading.Lock()

    def record(name: str, seconds: float) -> None:
        with lock:
            samples[name].append(seconds)

    api = _TimedApi(client.api, record)
    run_id = labels.new_run_id()
    limits = Limits()
    argv = python_argv("print(1)")
    long_lived: list[StartedContainer] = []
    if way == "exec":
        for _ in range(concurrency):
            container = create_started_container(
                client.api,
                image_id,
                limits,
                labels.container_labels(run_id, "probe"),
                user,
                prepare=entrypoint,
            )
            long_lived.append(container)  # its launcher waits on the open connection: it stays up

    def worker(index: int) -> None:
        recycled = None
        for _ in range(calls):
            started = time.perf_counter()
            if way == "exec":
                exec_id = api.exec_create(
                    long_lived[index].id, ["python3", "-I", "-c", "print(1)"], user=user
                )
                api.exec_start(exec_id)
            elif way == "recycled":
                if recycled is None:
                    recycled = create_started_container(
                        client.api,
                        image_id,
                        limits,
                        labels.container_labels(run_id, "probe"),
                        user,
                        prepare=entrypoint,
                    )
                at = time.perf_counter()
                raw = run_program(client.api, recycled, argv, None, 30, 1024, keep=True)
                record("run", time.perf_counter() - at)
                at = time.perf_counter()
                assert raw.reusable, raw
                recycle_container(recycled)
                record("reset until ready", time.perf_counter() - at)
            else:
                at = time.perf_counter()
                container = create_started_container(
                    api,
                    image_id,
                    limits,
                    labels.container_labels(run_id, "probe"),
                    user,
                    prepare=entrypoint,
                )
                record("create+attach+start+ready", time.perf_counter() - at)
                at = time.perf_counter()
                run_program(client.api, container, argv, None, 30, 1024)
                record("run", time.perf_counter() - at)
                remove_container(api, container.id)
            record("whole call", time.perf_counter() - started)
        if recycled is not None:
            recycled.close()
            remove_container(client.api, recycled.id)

    before = _daemon_cpu_s()
    wall = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(index,)) for index in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - wall
    after = _daemon_cpu_s()
    for container in long_lived:
        container.close()
        remove_container(client.api, container.id)
    total = concurrency * calls
    cpu = {name: round((after.get(name, 0) - before.get(name, 0)) / total * 1000, 1) for name in after}
    cpu["other"] = round(cpu["all"] - cpu.get("dockerd", 0) - cpu.get("containerd", 0), 1)
    return {
        "way": way,
        "image": reference,
        "concurrency": concurrency,
        "calls": total,
        "calls_per_s": round(total / wall, 1),
        "p50_ms": {
            name: round(statistics.median(values) * 1000, 1) for name, values in sorted(samples.items())
        },
        "cpu_ms_per_call": cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--image", default=None)
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--calls", type=int, default=8, help="calls per thread")
    parser.add_argument("--ways", default="new,recycled,exec")
    args = parser.parse_args()
    for concurrency in (int(part) for part in args.concurrency.split(",")):
        for way in args.ways.split(","):
            print(json.dumps(probe(args.image, concurrency, args.calls, way)), flush=True)


if __name__ == "__main__":
    main()
