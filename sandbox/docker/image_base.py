"""The base image: use one the engine has or can pull, else bootstrap Debian 12 locally.

No registry is reachable on these machines, so `docker pull` fails. A minimal Debian
bookworm root made by `debootstrap --variant=minbase` and `docker import`ed gives an
equivalent base built only from the Debian mirror, which is reachable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import docker
import docker.errors

from proctor.sandbox.api import SandboxError

BOOTSTRAP_BASE_IMAGE = "proctor/debian-base:bookworm"
BOOTSTRAP_SUITE = "bookworm"
BOOTSTRAP_VARIANT = "minbase"
# Bump when the bootstrap recipe changes, so images built on the old base get a new tag.
BOOTSTRAP_RECIPE = f"debootstrap --variant={BOOTSTRAP_VARIANT} {BOOTSTRAP_SUITE} (recipe 1)"
FALLBACK_MIRROR = "http://deb.debian.org/debian"
DEBIAN_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
DEBIAN_SOURCES_LIST = Path("/etc/apt/sources.list")

Log = Callable[[str], None]


class BaseImageError(SandboxError):
    """The base image could neither be found, pulled nor bootstrapped."""


def find_local(client: docker.DockerClient, ref: str) -> str | None:
    """The ID of image ``ref`` in the engine, or None; a malformed reference is an error."""
    try:
        return str(client.images.get(ref).id)
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as exc:
        if exc.status_code == 400:
            raise BaseImageError(f"{ref!r} is not a valid image reference") from None
        raise


def ensure_base_image(client: docker.DockerClient, base: str, log: Log) -> tuple[str, str]:
    """Return ``(ref, image_id)`` of a base the engine has, bootstrapping when it must.

    The bootstrap tag is never pulled: that name exists only on this machine.
    Any other base is used when present, pulled when possible, and otherwise
    replaced by the bootstrapped Debian base (a warning says so).
    """
    image_id = find_local(client, base)
    if image_id is not None:
        return base, image_id
    if base != BOOTSTRAP_BASE_IMAGE:
        try:
            log(f"base image {base} not present; pulling it")
            return base, str(client.images.pull(base).id)
        except docker.errors.APIError as exc:
            log(f"cannot pull {base} ({_first_line(exc)}); using the bootstrapped Debian base instead")
        image_id = find_local(client, BOOTSTRAP_BASE_IMAGE)
        if image_id is not None:
            return BOOTSTRAP_BASE_IMAGE, image_id
    return BOOTSTRAP_BASE_IMAGE, bootstrap_base_image(client, log)


def bootstrap_base_image(client: docker.DockerClient, log: Log, mirror: str | None = None) -> str:
    """debootstrap a minimal bookworm root and import it as :data:`BOOTSTRAP_BASE_IMAGE`."""
    # root's PATH has /usr/sbin, but a sudo-less user shell may not.
    debootstrap = shutil.which("debootstrap", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    if debootstrap is None:
        raise BaseImageError(
            "no base image available and debootstrap is not installed (apt-get install -y debootstrap)"
        )
    if os.geteuid() != 0:
        raise BaseImageError("bootstrapping the Debian base image needs root (debootstrap); run as root")
    mirror = mirror or debian_mirror()
    repository, _, tag = BOOTSTRAP_BASE_IMAGE.partition(":")
    with tempfile.TemporaryDirectory(prefix="proctor-rootfs-", dir="/var/tmp") as workdir:
        rootfs = Path(workdir) / "rootfs"
        tarball = Path(workdir) / "rootfs.tar"
        log(f"bootstrapping Debian {BOOTSTRAP_SUITE} ({BOOTSTRAP_VARIANT}) from {mirror}")
        _run([debootstrap, f"--variant={BOOTSTRAP_VARIANT}", BOOTSTRAP_SUITE, str(rootfs), mirror])
        # The image's apt must not point at the host's proxy/cache settings, only at the mirror.
        (rootfs / "etc/apt/sources.list").write_text(f"deb {mirror} {BOOTSTRAP_SUITE} main\n")
        _run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(tarball), "."])
        log(f"importing the root filesystem as {BOOTSTRAP_BASE_IMAGE}")
        client.api.import_image_from_file(
            str(tarball), repository=repository, tag=tag, changes=['CMD ["/bin/bash"]']
        )
    image_id = find_local(client, BOOTSTRAP_BASE_IMAGE)
    if image_id is None:
        raise BaseImageError(f"docker import did not produce {BOOTSTRAP_BASE_IMAGE}")
    return image_id


def debian_mirror() -> str:
    """The host's Debian mirror (the main archive, not the security one)."""
    if DEBIAN_SOURCES.is_file():
        for stanza in DEBIAN_SOURCES.read_text().split("\n\n"):
            fields = _deb822_fields(stanza)
            suites = fields.get("suites", "").split()
            if BOOTSTRAP_SUITE in suites and fields.get("uris"):
                return fields["uris"].split()[0]
    if DEBIAN_SOURCES_LIST.is_file():
        for line in DEBIAN_SOURCES_LIST.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and parts[2] == BOOTSTRAP_SUITE:
                return parts[1]
    return FALLBACK_MIRROR


def _deb822_fields(stanza: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in stanza.splitlines():
        if line.startswith("#") or ":" not in line or line[:1].isspace():
            continue
        key, _, value = line.partition(":")
        fields[key.strip().lower()] = value.strip()
    return fields


def _run(argv: list[str]) -> None:
    completed = subprocess.run(argv, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        tail = "\n".join((completed.stderr or completed.stdout).strip().splitlines()[-5:])
        raise BaseImageError(f"{Path(argv[0]).name} failed (exit {completed.returncode}): {tail}")


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
