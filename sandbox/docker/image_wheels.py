"""Download the image's wheels on the host, where PyPI is reachable, checked against the lock.

Containers here cannot reach PyPI (TLS is intercepted on the host), so the build installs
offline from these files. pip checks every download against the lock's sha256 hashes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from proctor.sandbox.api import SandboxError

TARGET_PYTHON = "3.11"
TARGET_ABI = "cp311"
# Debian 12 has glibc 2.36, so every manylinux tag up to 2_28 runs there.
TARGET_PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")


class WheelDownloadError(SandboxError):
    """pip could not fetch the locked wheels."""


def wheel_cache_dir() -> Path:
    """Where downloaded wheels are kept between builds (outside the repo, shared by clones)."""
    configured = os.environ.get("PROCTOR_WHEEL_CACHE")
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return root / "proctor" / "wheels"


def target_pip_options() -> list[str]:
    """pip flags that select wheels for the image's interpreter, not the host's."""
    options = ["--only-binary=:all:", f"--python-version={TARGET_PYTHON}", "--implementation=cp"]
    options += [f"--abi={TARGET_ABI}", "--abi=abi3", "--abi=none"]
    for platform in TARGET_PLATFORMS:
        options.append(f"--platform={platform}")
    options.append("--platform=any")
    return options


def download_locked_wheels(lock_file: Path, dest: Path) -> list[Path]:
    """Fetch every wheel the lock names into ``dest`` (already present ones are reused)."""
    dest.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps"]
    argv += ["--require-hashes", *target_pip_options(), "--dest", str(dest), "-r", str(lock_file)]
    completed = subprocess.run(argv, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        tail = "\n".join(completed.stderr.strip().splitlines()[-8:])
        raise WheelDownloadError(f"pip download of the locked wheels failed: {tail}")
    return sorted(dest.glob("*.whl"))
