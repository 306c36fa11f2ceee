"""Run untrusted Python in isolated, stateless sandboxes.

This package never imports ``agent``: the agent reaches it only through
:func:`open_sandbox`, :class:`Sandbox`, :class:`ExecResult` and :class:`Limits`, the
exceptions, :func:`execution_caller` (whose calls share one fair turn under the process's
execution bound) and :func:`check_program_text` (code no interpreter can take).
"""

if __name__ != "proctor.sandbox":
    # The repository root on sys.path would otherwise give every module a second name
    # (sandbox.x beside proctor.sandbox.x) with state of its own: one path per module (issue 26).
    raise ImportError(f"{__name__} is proctor.sandbox's folder, not a package: import proctor.sandbox")


from proctor.sandbox.api import ExecResult, InvalidProgram, Limits, Sandbox, SandboxError, SandboxUnavailable
from proctor.sandbox.factory import open_sandbox
from proctor.sandbox.program import check_program_text
from proctor.sandbox.slots import execution_caller

__all__ = [
    "ExecResult",
    "InvalidProgram",
    "Limits",
    "Sandbox",
    "SandboxError",
    "SandboxUnavailable",
    "check_program_text",
    "execution_caller",
    "open_sandbox",
]
