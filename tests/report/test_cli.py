"""`proctor view`: writes the page, prints its path, serves on 127.0.0.1, fails in one line."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.support.cli import proctor_in_process

PROCTOR = [sys.executable, "-c", "from proctor.agent.cli import main; main()"]


def _proctor(*args: str) -> subprocess.CompletedProcess[str]:
    # main() in this process (tests/support/cli.py); --serve below keeps a real process.
    return proctor_in_process(*args)


def test_view_writes_the_report_next_to_the_run(small_run: Path) -> None:
    result = _proctor("view", str(small_run))
    assert result.returncode == 0, result.stderr
    page = small_run / "report.html"
    assert result.stdout.strip() == str(page)
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_view_out_option(small_run: Path, tmp_path: Path) -> None:
    target = tmp_path / "nested" / "r.html"
    result = _proctor("view", str(small_run), "--out", str(target))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(target) and target.stat().st_size > 10_000


def test_view_of_a_missing_or_invalid_run_is_one_line(tmp_path: Path) -> None:
    result = _proctor("view", str(tmp_path / "nope"))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "no such run directory" in result.stderr
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "samples.jsonl").write_text('{"run_id": 1}\n')
    result = _proctor("view", str(tmp_path / "bad"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "samples.jsonl:1: field" in result.stderr


def test_view_serve_answers_on_loopback(small_run: Path) -> None:
    process = subprocess.Popen(
        [*PROCTOR, "view", str(small_run), "--serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        path_line = process.stdout.readline().strip()
        address_line = process.stdout.readline().strip()
        assert path_line.endswith("report.html")
        assert address_line.startswith("serving at http://127.0.0.1:")
        url = address_line.split()[2]
        with urllib.request.urlopen(url, timeout=10) as reply:  # loopback only
            body = reply.read().decode()
        assert body == (small_run / "report.html").read_text()
        try:
            urllib.request.urlopen(url + "etc/passwd", timeout=10)
            raise AssertionError("only the report is served")
        except urllib.error.HTTPError as exc:
            assert exc.code == 404
    finally:
        process.terminate()
        process.wait(timeout=10)
