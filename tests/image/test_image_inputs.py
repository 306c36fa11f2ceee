"""Pure tests of the image's inputs: the lock, the pins, the input-hash tag (no engine needed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from proctor.sandbox.docker import image as image_module
from proctor.sandbox.docker.image import (
    DEFAULT_IMAGE_NAME,
    IMAGE_DIR,
    INPUT_FILES,
    LOCK_FILE,
    ImageBuildError,
    image_tag,
    pinned_versions,
    top_level_pins,
)
from proctor.sandbox.docker.image_base import BOOTSTRAP_BASE_IMAGE, debian_mirror
from tests.support.cli import proctor_in_process

# The issue's list, written out here so that a drift in requirements.in or the lock fails.
ISSUE_PINS = {
    "galois": "0.4.4",
    "gmpy2": "2.2.1",
    "mpmath": "1.3.0",
    "networkx": "3.4.2",
    "numpy": "2.1.3",
    "pyadic": "0.2.3",
    "scipy": "1.15.2",
    "sympy": "1.13.3",
}


def test_requirements_in_pins_exactly_the_issue_list() -> None:
    assert top_level_pins() == ISSUE_PINS


def test_lock_holds_the_pins_and_galois_transitive_dependencies() -> None:
    locked = pinned_versions()
    for name, version in ISSUE_PINS.items():
        assert locked[name] == version
    # galois needs numba (which needs llvmlite) and typing-extensions; they must be locked too.
    assert {"numba", "llvmlite", "typing-extensions"} <= set(locked)


def test_every_locked_wheel_has_exactly_one_sha256_hash() -> None:
    text = LOCK_FILE.read_text()
    entries = [line for line in text.splitlines() if line and not line.startswith((" ", "#"))]
    hashes = [line.strip() for line in text.splitlines() if line.strip().startswith("--hash=")]
    assert len(entries) == len(pinned_versions()) == len(hashes)
    for line in hashes:
        algorithm, _, digest = line.removeprefix("--hash=").partition(":")
        assert algorithm == "sha256"
        assert len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)


def test_malformed_lock_line_names_file_and_line(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.lock"
    lock.write_text("numpy==2.1.3 \\\n    --hash=sha256:" + "0" * 64 + "\nscipy>=1.15\n")
    with pytest.raises(ImageBuildError, match=r"requirements\.lock:3: expected 'name==version'"):
        pinned_versions(lock)


def _copy_inputs(destination: Path) -> Path:
    destination.mkdir()
    for name in INPUT_FILES:
        shutil.copy2(IMAGE_DIR / name, destination / name)
    return destination


def test_tag_names_the_image_by_twelve_hex_digits_and_is_stable() -> None:
    tag = image_tag()
    name, _, digest = tag.partition(":")
    assert name == DEFAULT_IMAGE_NAME
    assert len(digest) == 12 and int(digest, 16) >= 0
    assert image_tag() == tag
    assert image_tag(BOOTSTRAP_BASE_IMAGE) == tag  # the default base is the bootstrapped one


def test_tag_is_the_same_for_a_copy_of_the_same_inputs(tmp_path: Path) -> None:
    assert image_tag(image_dir=_copy_inputs(tmp_path / "copy")) == image_tag()


def test_tag_changes_when_the_lock_changes(tmp_path: Path) -> None:
    copy = _copy_inputs(tmp_path / "copy")
    lock = copy / "requirements.lock"
    lock.write_text(lock.read_text().replace("sympy==1.13.3", "sympy==1.13.2"))
    assert image_tag(image_dir=copy) != image_tag()


@pytest.mark.parametrize("name", [n for n in INPUT_FILES if n != "requirements.lock"])
def test_tag_changes_when_any_other_input_changes(tmp_path: Path, name: str) -> None:
    copy = _copy_inputs(tmp_path / "copy")
    with (copy / name).open("a") as handle:
        handle.write("\n# changed\n")
    assert image_tag(image_dir=copy) != image_tag()


def test_tag_changes_with_the_base_image() -> None:
    assert image_tag("debian:bookworm-slim") != image_tag()


def test_missing_input_is_a_clear_error(tmp_path: Path) -> None:
    copy = _copy_inputs(tmp_path / "copy")
    (copy / "sandbox-init").unlink()
    with pytest.raises(ImageBuildError, match="sandbox-init is missing"):
        image_tag(image_dir=copy)


def test_debian_mirror_comes_from_the_deb822_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sources = tmp_path / "debian.sources"
    sources.write_text(
        "Types: deb\nURIs: http://mirror.invalid/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\n# a comment\nURIs: http://mirror.invalid/debian\nSuites: bookworm bookworm-updates\n"
    )
    monkeypatch.setattr("proctor.sandbox.docker.image_base.DEBIAN_SOURCES", sources)
    assert debian_mirror() == "http://mirror.invalid/debian"


def test_cli_without_an_engine_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    # main() in this process (tests/support/cli.py), its environment pointing at no engine.
    completed = proctor_in_process("image", "build", env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Docker engine answers" in lines[0]


def test_module_exposes_the_agreed_names() -> None:
    for name in (
        "DEFAULT_IMAGE_NAME",
        "image_tag",
        "find_image",
        "build_image",
        "pinned_versions",
        "ImageInfo",
    ):
        assert hasattr(image_module, name)
