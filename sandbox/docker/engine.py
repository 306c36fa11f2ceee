"""Make sure a Docker engine answers: install docker.io and start dockerd when asked to.

Usage from scripts: ``python -m proctor.sandbox.docker.engine [--install]`` (exit 0 once the engine
answers, 1 with one line on stderr otherwise). A fresh Debian 12 machine has no
engine; CI installs it with ``--install`` and the image build bootstraps the rest.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import docker
import docker.errors

from proctor.sandbox.api import SandboxUnavailable

APT_PACKAGES = ("docker.io", "debootstrap")
DOCKERD_LOG = Path("/var/log/proctor-dockerd.log")
START_TIMEOUT_S = 60.0
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def engine_answers(timeout: int = 5) -> bool:
    """True when the engine named by the environment (DOCKER_HOST or the socket) answers a ping."""
    try:
        client = docker.from_env(timeout=timeout)
    except docker.errors.DockerException:
        return False
    try:
        return bool(client.ping())
    except (docker.errors.DockerException, OSError):
        return False
    finally:
        client.close()


def ensure_engine(install: bool, log: Callable[[str], None] = print) -> None:
    """Return once an engine answers; install (if ``install``) and start dockerd as needed."""
    if engine_answers():
        return
    if _which("dockerd") is None or _which("debootstrap") is None:
        if not install:
            raise SandboxUnavailable("Docker is not installed: apt-get install -y docker.io debootstrap")
        _apt_install(APT_PACKAGES, log)
    dockerd = _which("dockerd")
    if dockerd is None:
        raise SandboxUnavailable("dockerd is still missing after installing docker.io")
    if os.geteuid() != 0:
        raise SandboxUnavailable("no Docker engine answers and starting dockerd needs root")
    log(f"starting dockerd (log: {DOCKERD_LOG})")
    with DOCKERD_LOG.open("ab") as sink:
        # A new session: the engine outlives this process and is not killed with its group.
        subprocess.Popen(
            [dockerd], stdout=sink, stderr=sink, stdin=subprocess.DEVNULL, start_new_session=True
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if engine_answers():
            log("the Docker engine answers")
            return
        time.sleep(0.5)
    raise SandboxUnavailable(f"dockerd did not answer within {START_TIMEOUT_S:.0f} s; see {DOCKERD_LOG}")


def _apt_install(packages: tuple[str, ...], log: Callable[[str], None]) -> None:
    if os.geteuid() != 0:
        raise SandboxUnavailable(f"installing {' '.join(packages)} needs root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    log(f"installing {' '.join(packages)} with apt-get")
    for argv in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", *packages]):
        completed = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        if completed.returncode != 0:
            tail = (completed.stderr or completed.stdout).strip().splitlines()[-1:]
            raise SandboxUnavailable(f"{' '.join(argv[:2])} failed: {' '.join(tail)}")


def _which(program: str) -> str | None:
    return shutil.which(program, path=f"{os.environ.get('PATH', '')}:{_SYSTEM_PATH}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m proctor.sandbox.docker.engine", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--install", action="store_true", help="apt-get install docker.io and debootstrap")
    args = parser.parse_args(argv)
    try:
        ensure_engine(install=args.install, log=lambda line: print(line, file=sys.stderr))
    except SandboxUnavailable as exc:
        print(f"proctor.sandbox.docker.engine: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
