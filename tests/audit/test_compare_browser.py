"""`proctor sandbox audit --compare` over Proctor's docker, runsc and local sandboxes, Inspect's
local provider and two `--command` sandboxes: one table as text, JSON and an offline page,
opened in headless Chromium.

One of the commands carries markup in a docker label: the page must show it as text and run
nothing. Screenshots land in artifacts/ (gitignored).
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.agent.audit.battery import ALL_CHECKS
from tests.audit.test_audit import proctor
from tests.report.cdp import Chromium
from tests.report.conftest import ARTIFACTS
from tests.sandbox.conftest import RUNSC_INSTALLED

LABEL = "proctor-audit-test-compare=1"
HOSTILE = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"
ROWS = [
    "net.interfaces",
    "priv.non_root",
    "output.hostile_bytes",
    "files.bind_mounts",
    "limits.read_only_root",
]


@pytest.fixture
def _no_container_left() -> Iterator[None]:
    yield
    found = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={LABEL}"], capture_output=True, text=True, check=False
    ).stdout.split()
    if found:
        subprocess.run(["docker", "rm", "-f", *found], capture_output=True, check=False)


@pytest.mark.docker
@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(not RUNSC_INSTALLED, reason="gVisor (runsc) is not installed: bash .ci/setup-gvisor.sh")
@pytest.mark.usefixtures("_no_container_left")
def test_the_comparison_page_in_chromium(tmp_path: Path) -> None:
    from proctor.sandbox.docker.image import image_tag

    image = image_tag()
    defaults = shlex.join(["docker", "run", "--rm", "-i", "--label", LABEL, image, "python3", "-"])
    hardened = shlex.join(
        [
            *("docker", "run", "--rm", "-i", "--label", LABEL, "--label", f"note={HOSTILE}"),
            *("--network", "none", "--read-only", "--cap-drop", "ALL", "-u", "65534", image, "python3", "-"),
        ]
    )
    report, page = tmp_path / "compare.json", tmp_path / "compare.html"
    args = ["sandbox", "audit", "--compare", "docker,runsc,local,inspect:local"]
    args += ["--compare", f"defaults={defaults}", "--compare", shlex.quote(f"hardened={hardened}")]
    args += ["--json", str(report), "--html", str(page)]
    for row in ROWS:
        args += ["--only", row]
    result = proctor(*args, timeout=800)
    assert result.returncode == 0, result.stderr[-3000:]
    labels = ["docker", "runsc", "local", "inspect:local", "defaults", "hardened"]
    data = json.loads(report.read_text())
    assert [s["label"] for s in data["sandboxes"]] == labels
    assert [row["id"] for row in data["rows"]] == [check.id for check in ALL_CHECKS if check.id in ROWS]
    verdicts = {row["id"]: {k: v["verdict"] for k, v in row["results"].items()} for row in data["rows"]}
    # What each sandbox is, measured side by side.
    assert verdicts["net.interfaces"] == {
        "docker": "held",
        "runsc": "held",
        "local": "held",
        "inspect:local": "broken",  # Inspect's local provider: a plain process of this machine
        "defaults": "broken",
        "hardened": "held",
    }
    assert verdicts["limits.read_only_root"]["defaults"] == "broken"
    assert verdicts["limits.read_only_root"]["hardened"] == "held"
    assert data["sandboxes"][4]["command"] == defaults
    for label in labels:
        assert label in result.stdout

    html = page.read_text(encoding="utf-8")
    assert "<script" not in html and "default-src 'none'" in html
    with Chromium(width=1400, height=900) as browser:
        browser.navigate(page.as_uri(), ready_expression="document.readyState === 'complete'")
        assert browser.console_errors() == []
        assert set(browser.requested_urls()) <= {page.as_uri()}
        assert browser.evaluate("document.scripts.length") == 0
        assert browser.evaluate("document.images.length") == 0
        assert browser.evaluate("document.title").startswith("Proctor sandbox audit")
        cells = browser.evaluate(
            "Array.from(document.querySelectorAll('tr.check')).map("
            "r => Array.from(r.querySelectorAll('td')).slice(1).map(c => c.className))"
        )
        assert len(cells) == len(ROWS) and all(len(row) == len(labels) for row in cells)
        assert all(c in ("held", "weak", "broken", "skipped") for row in cells for c in row)
        # The markup shows as text (shell-quoted within the command line), and nothing ran.
        shown = browser.evaluate("document.body.innerText")
        assert "<script>document.title=" in shown and "<img src=x onerror=alert(1)>" in shown
        heads = browser.evaluate("Array.from(document.querySelectorAll('th')).map(t => t.textContent)")
        assert heads == ["check", *labels]
        ARTIFACTS.mkdir(exist_ok=True)
        browser.screenshot(ARTIFACTS / "audit-compare.png", full_page=True)
