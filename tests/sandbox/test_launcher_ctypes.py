"""The launcher's ctypes, made from the C core ``_ctypes`` (sandbox/docker/launcher.py).

Invariant: every foreign call the launcher makes (prctl for dumpability, no_new_privs, the
bounding set and the seccomp filter; ptrace; the System V ``*ctl`` calls) behaves exactly as
through the ctypes package, and errno is read the same way; where the core is missing, the
package itself is used. Oracle: the ctypes package, in the same kind of process. Each case runs
the launcher's own first lines (up to its configuration) in a fresh interpreter, as the
container does (``-I -S``), then makes the calls. The container tests (test_containment.py,
test_launcher_attacks.py) prove the same calls inside the sandbox.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from proctor.sandbox.docker.containers import LAUNCHER

# The launcher's imports and its ctypes, after its ``from __future__`` line (a prelude may come
# first here) and up to the line that ends them.
_HEAD = LAUNCHER.split("from __future__ import annotations\n", 1)[1].split(
    "# The end of the launcher's imports", 1
)[0]

# Calls the launcher makes, each answered in a child process (prctl changes the process).
_CALLS = r"""
import errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
# The package is a module with a file; the launcher's own is a class in its source.
found = {"package": hasattr(ctypes, "__file__"), "package_imported": "ctypes" in sys.modules}
found["dumpable_before"] = libc.prctl(3, 0, 0, 0, 0)
found["set_dumpable"] = libc.prctl(4, 0, 0, 0, 0)
found["dumpable_after"] = libc.prctl(3, 0, 0, 0, 0)
found["unknown_option"] = libc.prctl(0x7FFF, 0, 0, 0, 0)
found["unknown_option_errno"] = ctypes.get_errno()
libc.ptrace.restype = ctypes.c_long
found["ptrace_no_such_task"] = libc.ptrace(17, 0x3FFFFFFF, None, ctypes.c_void_p(0))
found["ptrace_errno"] = ctypes.get_errno()
found["siginfo_buffer"] = len(bytes(ctypes.create_string_buffer(128)))
found["shmctl_unknown_id"] = libc.shmctl(0x3FFFFFFF, 0, 0, 0)
found["shmctl_errno"] = ctypes.get_errno()
class Fprog(ctypes.Structure):
    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_char_p)]
# One instruction: BPF_RET | BPF_K, SECCOMP_RET_ALLOW. Installed for real, as confine() does.
allow_all = bytes.fromhex("060000000000ff7f")
found["no_new_privs"] = libc.prctl(38, 1, 0, 0, 0)
found["seccomp"] = libc.prctl(22, 2, ctypes.byref(Fprog(len(allow_all) // 8, allow_all)), 0, 0)
status = open("/proc/self/status").read()
found["seccomp_mode"] = status.split("Seccomp:")[1].split()[0]
found["no_new_privs_status"] = status.split("NoNewPrivs:")[1].split()[0]
print(json.dumps(found))
"""


def _run(prelude: str, head: str = _HEAD) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", prelude + head + _CALLS],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def _package() -> dict[str, object]:
    """The oracle: the same calls through the ctypes package."""
    return _run("import ctypes\n", head="")


# A C core that lacks a name the launcher's ctypes is built from (another interpreter's): the
# package (imported first here, as it could not be without the name) serves instead.
_OTHER_CORE = (
    "import ctypes as package, sys, types\n"
    "core = types.ModuleType('_ctypes')\n"
    "vars(core).update({k: v for k, v in vars(sys.modules['_ctypes']).items() if k != '_SimpleCData'})\n"
    "sys.modules['_ctypes'] = core\n"
    "del package, core\n"
)


@pytest.mark.parametrize(
    ("prelude", "uses_package"), [("", False), (_OTHER_CORE, True)], ids=["core", "other-core"]
)
def test_the_launchers_foreign_calls_answer_as_the_ctypes_package_does(
    prelude: str, uses_package: bool
) -> None:
    ours = _run(prelude)
    oracle = _package()
    assert ours.pop("package") is uses_package
    # With the core, the package is never imported at all: that is the start-up it saves.
    assert ours.pop("package_imported") is uses_package
    assert oracle.pop("package") is True and oracle.pop("package_imported") is True
    assert ours == oracle
    # And what the oracle says is what the kernel does, so the comparison is not vacuous.
    assert oracle["dumpable_before"] == 1 and oracle["set_dumpable"] == 0 and oracle["dumpable_after"] == 0
    assert oracle["unknown_option"] == -1 and oracle["unknown_option_errno"] == 22  # EINVAL
    assert oracle["ptrace_no_such_task"] == -1 and oracle["ptrace_errno"] == 3  # ESRCH
    assert oracle["shmctl_unknown_id"] == -1 and oracle["shmctl_errno"] == 22  # EINVAL
    assert oracle["siginfo_buffer"] == 128
    assert oracle["no_new_privs"] == 0 and oracle["seccomp"] == 0
    assert oracle["seccomp_mode"] == "2" and oracle["no_new_privs_status"] == "1"
