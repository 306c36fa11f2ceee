"""Many records finishing at once, and the writer killed in the middle of writing them.

A forked writer appends 1 MiB records from eight threads through one ``SampleWriter`` and, after
each ``append`` returns (the record is "finished": written and fsync'd), reports its key on a
pipe. It is SIGKILLed at a seeded random moment, again and again, each time resuming from what
is on disk after ``load_samples(repair=True)``, as ``--resume`` does. Every key the writer
reported must be on disk exactly once; nothing but a torn last line may ever be cut.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from proctor.agent.errors import UserError
from proctor.agent.results.records import Outcome, SampleRecord
from proctor.agent.results.store import RunStore, SampleWriter, load_samples

THREADS = 8
RECORDS = 64
ROUNDS = 6


def _record(index: int) -> SampleRecord:
    return SampleRecord(
        run_id="run",
        track="echo",
        task_id=f"t{index:03d}",
        trial=0,
        model="m",
        outcome=Outcome.CORRECT,
        started_at="2026-12-01T00:00:00+00:00",
        finished_at="2026-12-01T00:00:01+00:00",
        duration_s=1.0,
        # Big enough that the kernel's write of one line takes a while: kills land inside writes.
        transcript=[{"role": "assistant", "content": f"{index} " + "x" * (1 << 20)}],
    )


def _writer(path: Path, todo: list[int], report_fd: int) -> None:  # pragma: no cover - the child
    writer = SampleWriter(path)
    lock = threading.Lock()
    queue = list(todo)

    def work() -> None:
        while True:
            with lock:
                if not queue:
                    return
                index = queue.pop()
            writer.append(_record(index))
            os.write(report_fd, f"{index}\n".encode())

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    os._exit(0)


def test_records_finished_before_a_kill_are_all_on_disk_exactly_once(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    rng = random.Random(7)
    finished: set[int] = set()
    for _ in range(ROUNDS):
        loaded = load_samples(path, repair=True)
        on_disk = [int(r.task_id[1:]) for r in loaded.records]
        assert len(on_disk) == len(set(on_disk)), "a record written twice"
        assert finished <= set(on_disk), f"finished records lost: {sorted(finished - set(on_disk))}"
        todo = [i for i in range(RECORDS) if i not in set(on_disk)]
        if not todo:
            break
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.close(read_end)
            _writer(path, todo, write_end)
        os.close(write_end)
        time.sleep(rng.uniform(0.05, 0.4))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        with os.fdopen(read_end, "rb") as reports:
            finished |= {int(line) for line in reports.read().split() if line}

    final = load_samples(path, repair=True)
    keys = [int(r.task_id[1:]) for r in final.records]
    assert len(keys) == len(set(keys)) and finished <= set(keys)
    # Every line but a torn last one is whole: after the repair, nothing is torn.
    assert load_samples(path).torn_bytes == 0
    assert path.read_bytes().count(b"\n") == len(keys)


@pytest.mark.parametrize("what", ["run", "re-score"])
def test_samples_without_a_header_are_refused_in_one_line_whether_resuming_or_not(
    tmp_path: Path, what: str
) -> None:
    store = RunStore(tmp_path)
    store.refuse_samples_without_header(resume=True, what=what)  # nothing here yet: accepted
    (tmp_path / "samples.jsonl").write_text('{"task_id": "a"}\n')
    with pytest.raises(UserError) as resumed:
        store.refuse_samples_without_header(resume=True, what=what)
    assert str(resumed.value) == (
        f"{tmp_path}: holds samples.jsonl but no run.json; cannot check it is the same {what}"
    )
    with pytest.raises(UserError, match="already holds a run; pass --resume to continue it"):
        store.refuse_samples_without_header(resume=False, what=what)
