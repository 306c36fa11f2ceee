"""`inspect view` serves an exported run with its transcript events (issue 24, "Done when").

The export of a real judged run is served by Inspect's own viewer, started on 127.0.0.1 on a
free port; the viewer's log API (what its Transcript tab reads) lists the file and returns every
sample with its model, grader and score events. An HTTP check of the API; no browser.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from proctor.agent.export.inspect_log import export_inspect
from tests.rescore.conftest import StoredResearchRun, read_lines
from tests.support.inspect_logs import REPO, inspect_installed

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not inspect_installed(), reason="pip install 'proctor[inspect]'"),
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


@pytest.mark.timeout(600)
def test_inspect_view_serves_every_sample_with_its_events(
    research_run: StoredResearchRun, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    export_inspect(research_run.directory, logs / "research.eval")
    port = free_port()
    base = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    viewer = subprocess.Popen(
        [
            *(sys.executable, "-m", "inspect_ai", "view", "start", "--log-dir", str(logs)),
            *("--host", "127.0.0.1", "--port", str(port)),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "viewer.log").open("w"),
    )
    try:
        deadline = time.monotonic() + 240
        listing = None
        while listing is None:
            try:
                listing = get_json(f"{base}/log-files")
            except (urllib.error.URLError, ConnectionError):
                assert viewer.poll() is None, (tmp_path / "viewer.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "inspect view did not answer"
                time.sleep(1)
        (entry,) = listing["files"]
        assert entry["name"].endswith("research.eval")
        log = get_json(f"{base}/logs/{urllib.parse.quote(entry['name'])}")
    finally:
        viewer.terminate()
        try:
            viewer.wait(timeout=20)
        except subprocess.TimeoutExpired:
            viewer.kill()
            viewer.wait()
    records = read_lines(research_run.directory / "samples.jsonl")
    assert len(log["samples"]) == len(records) == 6
    for sample in log["samples"]:
        kinds = [event["event"] for event in sample["events"]]
        assert kinds[:3] == ["span_begin", "sample_init", "span_end"]
        roles = [event.get("role") for event in sample["events"] if event["event"] == "model"]
        assert roles[0] is None and roles[1:] and set(roles[1:]) == {"grader"}
        assert ("score" in kinds) != ("error" in kinds)
