"""The pinned FrontierMath sandbox image: its input-hash tag, lookup, and offline build.

The tag is a hash of everything the image is made from (Dockerfile, lock, copied files,
base reference), so the same inputs always name the same image and any change names a
new one. :func:`image_tag` is pure: it needs no engine. :func:`build_image` is
idempotent: when the tagged image exists it returns at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests

from proctor.sandbox.api import SandboxError
from proctor.sandbox.docker.image_base import (
    BOOTSTRAP_BASE_IMAGE,
    BOOTSTRAP_RECIPE,
    ensure_base_image,
    find_local,
)
from proctor.sandbox.docker.image_wheels import download_locked_wheels, wheel_cache_dir
from proctor.sandbox.docker.runtimes import engine_down

DEFAULT_IMAGE_NAME = "proctor/frontiermath-python"
DEFAULT_BASE_IMAGE = BOOTSTRAP_BASE_IMAGE
IMAGE_DIR = Path(__file__).resolve().parents[2] / "images" / "frontiermath-python"
LOCK_FILE = IMAGE_DIR / "requirements.lock"
# Every file the Dockerfile COPYs, plus the Dockerfile: the tag hashes exactly these.
INPUT_FILES = ("Dockerfile", "requirements.lock", "sandbox-init", "warm_numba_cache.py")
TAG_HEX_DIGITS = 12
LABEL_PREFIX = "org.proctor.image"
# Generous: the build's quiet steps (apt, numba compilation) can take minutes on 2 cores.
BUILD_API_TIMEOUT_S = 1800

Log = Callable[[str], None]
_LOCK_LINE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s\\;]+)")


class ImageBuildError(SandboxError):
    """The sandbox image could not be built; the message says which step failed."""


@dataclass(frozen=True)
class ImageInfo:
    tag: str
    image_id: str
    base: str
    base_id: str | None
    versions: dict[str, str] = field(default_factory=dict)
    built: bool = False
    build_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "image_id": self.image_id,
            "base": self.base,
            "base_id": self.base_id,
            "versions": dict(self.versions),
            "built": self.built,
            "build_seconds": round(self.build_seconds, 1),
        }


def pinned_versions(lock_file: Path | None = None) -> dict[str, str]:
    """``{distribution: version}`` for every wheel in the lock (the pins and their closure)."""
    path = lock_file or LOCK_FILE
    versions: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "--")):
            continue
        match = _LOCK_LINE.match(line)
        if match is None:
            raise ImageBuildError(f"{path}:{number}: expected 'name==version', got {line!r}")
        versions[_normalize(match["name"])] = match["version"]
    return versions


def top_level_pins(requirements_in: Path | None = None) -> dict[str, str]:
    """The pins a user asked for in ``requirements.in`` (without transitive dependencies)."""
    return pinned_versions(requirements_in or IMAGE_DIR / "requirements.in")


def inputs_digest(base: str | None = None, image_dir: Path | None = None) -> str:
    """sha256 over the base reference and the name and bytes of every input file."""
    directory = image_dir or IMAGE_DIR
    base_ref = base or DEFAULT_BASE_IMAGE
    hasher = hashlib.sha256()
    hasher.update(f"base={base_ref}\n".encode())
    if base_ref == BOOTSTRAP_BASE_IMAGE:
        hasher.update(f"bootstrap={BOOTSTRAP_RECIPE}\n".encode())
    for name in INPUT_FILES:
        path = directory / name
        try:
            content = path.read_bytes()
        except FileNotFoundError:
            raise ImageBuildError(f"image input {path} is missing") from None
        hasher.update(f"file={name} size={len(content)}\n".encode())
        hasher.update(content)
    return hasher.hexdigest()


def image_tag(base: str | None = None, image_dir: Path | None = None) -> str:
    """``proctor/frontiermath-python:<12 hex>`` for these inputs. Pure: no engine needed."""
    return f"{DEFAULT_IMAGE_NAME}:{inputs_digest(base, image_dir)[:TAG_HEX_DIGITS]}"


@functools.cache
def image_libraries(reference: str) -> dict[str, str] | None:
    """The pinned top-level libraries when ``reference`` is the image these inputs build;
    None for any other image, whose contents Proctor does not know."""
    if reference != image_tag():
        return None
    return top_level_pins()


def find_image(client: docker.DockerClient, ref: str | None = None) -> str | None:
    """The image ID of ``ref`` (default: the current input-hash tag), or None if absent."""
    return find_local(client, ref or image_tag())


def docker_client(timeout: int = 60) -> docker.DockerClient:
    """A client whose engine answered a ping; :class:`SandboxUnavailable` otherwise."""
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except docker.errors.DockerException as exc:
        raise engine_down(None, exc) from None
    return client


def build_image(
    base: str | None = None,
    *,
    client: docker.DockerClient | None = None,
    log: Log = print,
) -> ImageInfo:
    """Build the sandbox image unless its input-hash tag already exists, and describe it.

    Steps: find/pull/bootstrap the base, download the locked wheels on the host,
    assemble a build context, build with the engine. Raises :class:`SandboxUnavailable`
    when no engine answers and :class:`ImageBuildError` when a step fails.
    """
    client = client or docker_client(timeout=BUILD_API_TIMEOUT_S)
    requested_base = base or DEFAULT_BASE_IMAGE
    versions = pinned_versions()
    existing = _existing_info(client, image_tag(requested_base), versions)
    if existing is not None:
        return existing
    with _build_lock(log):
        # Another process may have built it while this one waited for the lock.
        existing = _existing_info(client, image_tag(requested_base), versions)
        if existing is not None:
            return existing
        try:
            return _build_locked(client, requested_base, versions, log)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            # The engine went away or refused a request mid-build: one clear line, no traceback.
            raise ImageBuildError(f"the Docker engine failed during the build: {_one_line(exc)}") from exc


@contextlib.contextmanager
def _build_lock(log: Log) -> Iterator[None]:
    """One build at a time per machine: parallel test workers would otherwise all build."""
    lock_path = wheel_cache_dir().parent / "image-build.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another image build holds {lock_path}; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build_locked(
    client: docker.DockerClient, requested_base: str, versions: dict[str, str], log: Log
) -> ImageInfo:
    started = time.monotonic()
    base_ref, base_id = ensure_base_image(client, requested_base, log)
    tag = image_tag(base_ref)
    if base_ref != requested_base:
        existing = _existing_info(client, tag, versions)
        if existing is not None:
            return existing
    log(f"downloading the locked wheels into {wheel_cache_dir()}")
    wheels = download_locked_wheels(LOCK_FILE, wheel_cache_dir())
    labels = {
        f"{LABEL_PREFIX}.inputs": inputs_digest(base_ref),
        f"{LABEL_PREFIX}.base": base_ref,
        f"{LABEL_PREFIX}.base-id": base_id,
        f"{LABEL_PREFIX}.versions": json.dumps(versions, sort_keys=True),
    }
    log(f"building {tag} on {base_ref}")
    with tempfile.TemporaryDirectory(prefix="proctor-image-") as context:
        _assemble_context(Path(context), wheels, set(versions))
        for line in _stream_build(client, context, tag, base_ref, labels):
            log(line)
    image_id = find_image(client, tag)
    if image_id is None:
        raise ImageBuildError(f"the build finished but {tag} is not in the engine")
    seconds = time.monotonic() - started
    log(f"built {tag} ({image_id}) in {seconds:.0f} s")
    _remove_stale_images(client, tag, base_ref, log)
    return ImageInfo(tag, image_id, base_ref, base_id, versions, built=True, build_seconds=seconds)


def _existing_info(client: docker.DockerClient, tag: str, versions: dict[str, str]) -> ImageInfo | None:
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None
    labels = image.labels or {}
    return ImageInfo(
        tag=tag,
        image_id=str(image.id),
        base=labels.get(f"{LABEL_PREFIX}.base", ""),
        base_id=labels.get(f"{LABEL_PREFIX}.base-id"),
        versions=versions,
    )


def _remove_stale_images(client: docker.DockerClient, current: str, base_ref: str, log: Log) -> None:
    """Drop earlier builds on the same base (about 800 MB each); one still in use is kept.

    Images built on another base are left alone: someone may have asked for them on purpose.
    """
    for image in client.images.list(name=DEFAULT_IMAGE_NAME):
        if (image.labels or {}).get(f"{LABEL_PREFIX}.base") != base_ref:
            continue
        for stale in (t for t in image.tags if t != current and t.startswith(f"{DEFAULT_IMAGE_NAME}:")):
            try:
                client.images.remove(stale, noprune=False)
                log(f"removed the stale image {stale}")
            except docker.errors.APIError:
                pass  # a container still uses it; a later build removes it


def _assemble_context(context: Path, wheels: list[Path], wanted: set[str]) -> None:
    """Copy the inputs and only the locked wheels (the cache may hold older ones)."""
    for name in INPUT_FILES:
        shutil.copy2(IMAGE_DIR / name, context / name)
    wheel_dir = context / "wheels"
    wheel_dir.mkdir()
    locked = pinned_versions()
    for wheel in wheels:
        name, version = wheel.name.split("-")[:2]
        if locked.get(_normalize(name)) != version:
            continue
        try:
            os.link(wheel, wheel_dir / wheel.name)  # same filesystem: no 110 MB copy
        except OSError:
            shutil.copy2(wheel, wheel_dir / wheel.name)
    present = {_normalize(w.name.split("-")[0]) for w in wheel_dir.iterdir()}
    missing = sorted(wanted - present)
    if missing:
        raise ImageBuildError(f"no downloaded wheel for {', '.join(missing)}")


def _stream_build(
    client: docker.DockerClient, context: str, tag: str, base_ref: str, labels: dict[str, str]
) -> Iterator[str]:
    chunks = client.api.build(
        path=context,
        tag=tag,
        buildargs={"BASE_IMAGE": base_ref},
        labels=labels,
        rm=True,
        forcerm=True,
        pull=False,
        decode=True,
        network_mode="bridge",
        timeout=BUILD_API_TIMEOUT_S,
    )
    recent: list[str] = []
    for chunk in chunks:
        if "error" in chunk:
            detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
            context_lines = "\n".join(recent[-10:])
            raise ImageBuildError(f"docker build of {tag} failed: {_one_line(detail)}\n{context_lines}")
        text = str(chunk.get("stream", "")).rstrip()
        if text:
            recent.append(text)
            yield text


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _one_line(value: object) -> str:
    text = str(value).strip()
    return text.splitlines()[0] if text else type(value).__name__
