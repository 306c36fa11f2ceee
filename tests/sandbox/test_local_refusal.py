"""The local backend refuses, in one line, wherever bubblewrap cannot sandbox: it never runs
a program unsandboxed (docs/sandbox.md, "Local backend")."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from proctor.sandbox import SandboxUnavailable
from proctor.sandbox.local.backend import LocalSandbox


def test_missing_bwrap_is_refused_in_one_line(tmp_path: Path) -> None:
    # PATH without bwrap: the backend must refuse, and the program must never run unsandboxed.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    program = tmp_path / "p.py"
    program.write_text("print('ran')\n")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from proctor.agent.cli import main; main()",
            "sandbox",
            "exec",
            "--backend",
            "local",
            str(program),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": str(bin_dir)},
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 2, done
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("proctor: error:"), done.stderr
    assert "bubblewrap" in lines[0] and "apt-get install bubblewrap" in lines[0]


def test_bwrap_that_cannot_create_namespaces_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What bwrap prints where user namespaces are disabled; the backend must refuse, not degrade.
    # World-traversable: the probe runs it after dropping to an unprivileged uid.
    tool_dir = Path(tempfile.mkdtemp(prefix="proctor-fake-bwrap-"))
    tool_dir.chmod(0o755)
    fake = tool_dir / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{tool_dir}{os.pathsep}{os.environ['PATH']}")
    try:
        with pytest.raises(SandboxUnavailable) as caught:
            LocalSandbox()
    finally:
        shutil.rmtree(tool_dir)
    message = str(caught.value)
    assert "\n" not in message and "No permissions to creating new namespace" in message
    assert "bubblewrap" in message
