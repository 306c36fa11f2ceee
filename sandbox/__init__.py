"""Run untrusted Python in isolated, stateless sandboxes.

This package never imports ``agent``: the agent reaches it only through
:func:`open_sandbox`, :class:`Sandbox`, :class:`ExecResult` and :class:`Limits`.
"""

from sandbox.api import ExecResult, InvalidProgram, Limits, Sandbox, SandboxError, SandboxUnavailable
from sandbox.factory import open_sandbox

__all__ = [
    "ExecResult",
    "InvalidProgram",
    "Limits", "Sandbox", "SandboxError", "SandboxUnavailable", "open_sandbox"]
