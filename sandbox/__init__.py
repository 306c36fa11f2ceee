"""Run untrusted Python in isolated, stateless sandboxes.

This package never imports ``agent``: the agent reaches it only through
:func:`open_sandbox` (given a :class:`SandboxSpec`, the one value of every sandbox option),
:class:`Sandbox`, :class:`ExecResult` and :class:`Limits`, the exceptions,
:func:`execution_caller` (whose calls share one fair turn under the process's execution
bound) and :func:`check_program_text` (code no interpreter can take).
"""

if __name__ != "proctor.sandbox":
    # The repository root on sys.path would otherwise give every module a second name
    # (sandbox.x beside proctor.sandbox.x) with state of its own: one path per module (issue 26).
    raise ImportError(f"{__name__} is proctor.sandbox's folder, not a package: import proctor.sandbox")


from proctor.sandbox.api import ExecResult, InvalidProgram, Limits, Sandbox, SandboxError, SandboxUnavailable
from proctor.sandbox.factory import open_sandbox
from proctor.sandbox.program import check_program_text
from proctor.sandbox.slots import execution_caller
from proctor.sandbox.spec import SandboxSpec, check_option_name, docker_only_problem, option_choices

__all__ = [
    "ExecResult",
    "InvalidProgram",
    "Limits",
    "Sandbox",
    "SandboxError",
    "SandboxSpec",
    "SandboxUnavailable",
    "check_option_name",
    "check_program_text",
    "docker_only_problem",
    "execution_caller",
    "open_sandbox",
    "option_choices",
]
