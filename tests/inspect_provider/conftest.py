"""Fixtures of the Inspect provider's tests: the pinned image (built once, as tests/sandbox/ does)."""

from __future__ import annotations

from tests.sandbox.conftest import RUNSC_INSTALLED, runsc, sandbox_image

__all__ = ["RUNSC_INSTALLED", "runsc", "sandbox_image"]
