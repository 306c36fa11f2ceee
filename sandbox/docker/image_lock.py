"""Regenerate ``requirements.lock`` (every wheel of the closure, with sha256) from ``requirements.in``.

Usage: ``python -m proctor.sandbox.docker.image_lock`` (needs PyPI, i.e. run it on the host).

pip resolves the pins for the image's interpreter and platform (not the host's), and
the lock records the hash of each wheel it picked. The build then installs exactly
those files with ``--require-hashes --no-deps``.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from proctor.sandbox.docker.image_wheels import WheelDownloadError, target_pip_options

# name-version-...: wheel file names escape '-' in the project name as '_'.
_WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-")


def resolve_lock(requirements_in: Path) -> str:
    """Return the lock file text for ``requirements_in`` (downloads into a temp dir)."""
    with tempfile.TemporaryDirectory(prefix="proctor-lock-") as tmp:
        dest = Path(tmp)
        argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check"]
        argv += [*target_pip_options(), "--dest", str(dest), "-r", str(requirements_in)]
        completed = subprocess.run(argv, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            tail = "\n".join(completed.stderr.strip().splitlines()[-8:])
            raise WheelDownloadError(f"resolving {requirements_in} failed: {tail}")
        return render_lock(sorted(dest.glob("*.whl")), requirements_in.name)


def render_lock(wheels: list[Path], source_name: str) -> str:
    lines = [
        f"# Generated from {source_name} by `python -m proctor.sandbox.docker.image_lock`;"
        " do not edit by hand.",
        "# One wheel per package for CPython 3.11 on manylinux x86_64, installed with",
        "# `pip install --no-index --require-hashes --no-deps` inside the image build.",
    ]
    entries = []
    for wheel in wheels:
        match = _WHEEL_NAME.match(wheel.name)
        if match is None:
            raise WheelDownloadError(f"unexpected wheel file name {wheel.name}")
        name = match["name"].replace("_", "-").lower()
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        entries.append((name, match["version"], digest))
    for name, version, digest in sorted(entries):
        lines.append(f"{name}=={version} \\")
        lines.append(f"    --hash=sha256:{digest}")
    return "\n".join(lines) + "\n"


def main() -> None:
    from proctor.sandbox.docker.image import IMAGE_DIR, LOCK_FILE

    text = resolve_lock(IMAGE_DIR / "requirements.in")
    LOCK_FILE.write_text(text)
    print(f"wrote {LOCK_FILE}")


if __name__ == "__main__":
    main()
