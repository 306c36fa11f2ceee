"""Lock rendering and build-context assembly, on small fake wheel files (no network, no engine)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from proctor.sandbox.docker import image as image_module
from proctor.sandbox.docker.image import ImageBuildError, pinned_versions
from proctor.sandbox.docker.image_lock import render_lock


def _fake_wheel(directory: Path, name: str, content: bytes) -> Path:
    path = directory / name
    path.write_bytes(content)
    return path


def test_render_lock_hashes_each_wheel_and_normalizes_names(tmp_path: Path) -> None:
    wheels = [
        _fake_wheel(tmp_path, "typing_extensions-4.16.0-py3-none-any.whl", b"te"),
        _fake_wheel(tmp_path, "galois-0.4.4-py3-none-any.whl", b"galois"),
    ]
    text = render_lock(wheels, "requirements.in")
    lock = tmp_path / "requirements.lock"
    lock.write_text(text)
    assert pinned_versions(lock) == {"galois": "0.4.4", "typing-extensions": "4.16.0"}
    assert f"--hash=sha256:{hashlib.sha256(b'te').hexdigest()}" in text
    # Sorted by name, so regenerating an unchanged closure gives an identical file.
    assert text.index("galois==") < text.index("typing-extensions==")
    assert render_lock(list(reversed(wheels)), "requirements.in") == text


def test_context_holds_only_the_locked_wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    locked = pinned_versions()
    wheels = [
        _fake_wheel(cache, f"{name.replace('-', '_')}-{version}-py3-none-any.whl", name.encode())
        for name, version in locked.items()
    ]
    stale = _fake_wheel(cache, "numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl", b"old")
    context = tmp_path / "context"
    context.mkdir()
    image_module._assemble_context(context, [*wheels, stale], set(locked))
    shipped = sorted(p.name for p in (context / "wheels").iterdir())
    assert shipped == sorted(w.name for w in wheels)
    assert (context / "Dockerfile").read_bytes() == (image_module.IMAGE_DIR / "Dockerfile").read_bytes()


def test_context_with_a_missing_wheel_names_it(tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    with pytest.raises(ImageBuildError, match=r"no downloaded wheel for .*galois"):
        image_module._assemble_context(context, [], set(pinned_versions()))
