"""`inspect view` shows an exported run with its transcript events (issue 24, "Done when").

A real judged run (3 tasks x 2 trials, one the judge cannot grade) is exported and served by
Inspect's own viewer, started once on 127.0.0.1 on a free port (one process writes the log with
the export's code, then runs the `inspect view start` command), and checked twice:

- its log API (what the viewer's pages read) lists the file and returns every sample with its
  model, grader and score (or error) events;
- headless Debian Chromium (``tests/report/cdp.py``) opens the viewer's Transcript tab of every
  sample (``#/logs/<file>/samples/sample/<id>/<epoch>/transcript``, the viewer's hash route) and
  the page shows each of that sample's events as a panel, found by the event's own id, under
  the title the viewer gives it (``Model Call: openai/student``, ``Model Call (grader): ...``,
  ``Score``, ``Error``) with the reply or verdict in it; the page never says "Transcript events
  were removed", and every request it makes goes to the viewer on 127.0.0.1.
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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.report.cdp import Chromium
from tests.rescore.conftest import StoredResearchRun, read_lines
from tests.support.inspect_logs import REPO, inspect_installed

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(not inspect_installed(), reason="pip install 'proctor[inspect]'"),
]

# The export as `export_inspect`'s child process writes it, then the `inspect` command's own
# entry point (`inspect view start ...`), in one interpreter: inspect_ai is imported once, not
# once to export and again to serve, which kept this test as fast as the API-only check was.
# `export_inspect` itself (its checks, its child process) is tested in test_inspect_export.py.
EXPORT_THEN_VIEW = """
import sys
from pathlib import Path

from proctor.agent.export.inspect_log import _write_logs

_write_logs(Path(sys.argv[1]), Path(sys.argv[2]))

from inspect_ai._cli.main import main

sys.argv = ["inspect", *sys.argv[3:]]
main()
"""
# The viewer's notice when it drops a sample's events (too large for the browser).
EVENTS_REMOVED = "Transcript events were removed"
# What the page reports on each poll: its title, whether the Transcript tab is the one shown,
# the text of the page and of every event panel in that tab, by the panel's event id.
SNAPSHOT = """(() => {
  const tab = document.getElementById('transcript-contents');
  const panels = {};
  for (const panel of tab ? tab.querySelectorAll('[id^="event-panel-"]') : []) {
    panels[panel.id.slice('event-panel-'.length)] = panel.innerText;
  }
  return {
    title: document.title,
    transcript: Boolean(tab && tab.classList.contains('active')),
    body: document.body ? document.body.innerText : '',
    panels,
  };
})()"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


@contextmanager
def export_and_view(run: Path, log: Path, workdir: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """The run exported to ``log``, then `inspect view` of its folder on 127.0.0.1 at a free
    port, stopped on exit; yields the process and the viewer's origin."""
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    view = ("view", "start", "--log-dir", str(log.parent), "--host", "127.0.0.1", "--port", str(port))
    with (workdir / "viewer.log").open("w") as errors:
        viewer = subprocess.Popen(
            [sys.executable, "-c", EXPORT_THEN_VIEW, str(run), str(log), *view],
            cwd=workdir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
    try:
        yield viewer, f"http://127.0.0.1:{port}"
    finally:
        viewer.terminate()
        try:
            viewer.wait(timeout=20)
        except subprocess.TimeoutExpired:
            viewer.kill()
            viewer.wait(timeout=20)


def wait_for_listing(viewer: subprocess.Popen[bytes], api: str, log_file: Path) -> Any:
    deadline = time.monotonic() + 240
    while True:
        try:
            return get_json(f"{api}/log-files")
        except (urllib.error.URLError, ConnectionError):
            assert viewer.poll() is None, log_file.read_text()[-2000:]
            assert time.monotonic() < deadline, "inspect view did not answer"
            time.sleep(0.1)


def reply_text(event: dict[str, Any]) -> str:
    (choice,) = event["output"]["choices"]
    content = choice["message"]["content"]
    assert isinstance(content, str), content
    return content


@dataclass(frozen=True)
class Panel:
    """An event's panel in the Transcript tab: its title (as the viewer's ``eventTitle`` words
    it; shown in capitals), text it shows, and its last line when that is checked."""

    title: str
    shows: tuple[str, ...] = ()
    last_line: str | None = None


def expected_panels(sample: dict[str, Any]) -> dict[str, Panel]:
    """The panel of each event of the sample, by the event's id."""
    panels: dict[str, Panel] = {}
    for event in sample["events"]:
        kind, uuid = event["event"], event["uuid"]
        if kind == "span_begin" and event.get("type") == "solver":
            panels[uuid] = Panel(f"solver: {event['name']}")
        elif kind == "model" and event.get("role") is None:
            panels[uuid] = Panel(f"model call: {event['model']}", (reply_text(event),))
        elif kind == "model":
            panels[uuid] = Panel(f"model call ({event['role']}): {event['model']}", (reply_text(event),))
        elif kind == "score":
            score = event["score"]
            shows = tuple(part for part in (score.get("answer"), score.get("explanation")) if part)
            panels[uuid] = Panel("score", shows, score["value"])
        elif kind == "error":
            panels[uuid] = Panel("error")
        else:
            # The rest of what the export writes has no panel of its own in the viewer's default
            # view (the init, solvers and scorers spans, the sample's init). A run whose samples
            # hold another kind (a tool call) needs its panel checked here too.
            assert kind in {"span_begin", "span_end", "sample_init"}, f"no check for {kind} events"
    return panels


def transcript_problems(snapshot: dict[str, Any], sample: dict[str, Any]) -> list[str]:
    """What the page does not (yet) show of the sample's transcript; empty when all is there."""
    wanted = f"{sample['id']}_{sample['epoch']} "
    if not snapshot["title"].startswith(wanted):
        return [f"the page shows {snapshot['title']!r}, not sample {wanted.strip()}"]
    problems = [] if snapshot["transcript"] else ["the Transcript tab is not the one shown"]
    if EVENTS_REMOVED in snapshot["body"]:
        problems.append(f"the page says {EVENTS_REMOVED!r}")
    shown: dict[str, str] = snapshot["panels"]
    for uuid, panel in expected_panels(sample).items():
        text = shown.get(uuid)
        if text is None:
            problems.append(f"no panel for event {uuid} ({panel.title})")
            continue
        lines = text.strip().splitlines()
        heading = lines[0].lower() if lines else ""  # a title, then its token count if any
        if heading != panel.title and not heading.startswith(f"{panel.title} ("):
            problems.append(f"event {uuid}: panel titled {heading!r}, not {panel.title!r}")
        problems += [
            f"event {uuid} ({panel.title}) does not show {part!r}" for part in panel.shows if part not in text
        ]
        if panel.last_line is not None and lines[-1:] != [panel.last_line]:
            problems.append(f"event {uuid} ({panel.title}) ends {lines[-1:]}, not {panel.last_line!r}")
    return problems


def open_transcript(browser: Chromium, url: str, sample: dict[str, Any]) -> dict[str, Any]:
    """Opens the sample's Transcript tab and polls the page until it shows every event (60 s)."""
    browser.send("Page.navigate", {"url": url})
    deadline = time.monotonic() + 60
    while True:
        snapshot: dict[str, Any] = browser.evaluate(SNAPSHOT)
        problems = transcript_problems(snapshot, sample)
        if not problems:
            return snapshot
        assert time.monotonic() < deadline, f"{url}: {problems}\n{snapshot['body'][-3000:]}"
        time.sleep(0.1)


@pytest.mark.timeout(600)
def test_inspect_view_shows_every_sample_with_its_transcript_events(
    research_run: StoredResearchRun, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    records = read_lines(research_run.directory / "samples.jsonl")
    viewing = export_and_view(research_run.directory, logs / "research.eval", tmp_path)
    # Chromium starts while the viewer's process exports and starts serving.
    with viewing as (viewer, origin), Chromium() as browser:
        listing = wait_for_listing(viewer, f"{origin}/api", tmp_path / "viewer.log")
        (entry,) = listing["files"]
        assert entry["name"].endswith("/research.eval")
        log = get_json(f"{origin}/api/logs/{urllib.parse.quote(entry['name'], safe='')}")
        assert len(log["samples"]) == len(records) == 6
        for sample in log["samples"]:
            kinds = [event["event"] for event in sample["events"]]
            assert kinds[:3] == ["span_begin", "sample_init", "span_end"]
            roles = [event.get("role") for event in sample["events"] if event["event"] == "model"]
            assert roles[0] is None and roles[1:] and set(roles[1:]) == {"grader"}
            assert ("score" in kinds) != ("error" in kinds)

        # Then the viewer's pages: each sample's Transcript tab (same-document navigation
        # after the first; the panels are found by event id, so none is left from the last).
        shown = []
        for sample in log["samples"]:
            sample_id = urllib.parse.quote(str(sample["id"]), safe="")
            route = f"/logs/research.eval/samples/sample/{sample_id}/{sample['epoch']}/transcript"
            snapshot = open_transcript(browser, f"{origin}/#{route}", sample)
            shown.append((sample["id"], sample["epoch"], len(snapshot["panels"])))
        # Network: the viewer on 127.0.0.1 and nothing else (data: URLs are read from the page).
        assert [url for url in browser.requested_urls() if not url.startswith((f"{origin}/", "data:"))] == []
        viewer.terminate()  # it stops while Chromium closes (export_and_view waits for it)
    # Both trials of each task; the judged ones with their score, r3 (no verdict) with its error.
    assert sorted(shown) == [
        ("r1", 1, 4),
        ("r1", 2, 4),
        ("r2", 1, 4),
        ("r2", 2, 4),
        ("r3", 1, 6),
        ("r3", 2, 6),
    ]
