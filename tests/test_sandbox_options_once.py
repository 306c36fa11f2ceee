"""The sandbox's options are named once, by ``SandboxSpec`` (sandbox/spec.py), and travel as
that one value (issue #37).

Invariant: outside a short allowlist, no ``agent/`` module hand-lists two or more of the spec's
options, as keyword arguments of a call or as parameters of a function: such a list is a copy
of the spec that can drift (rescore once opened without runtime, docker host, isolation, engine
path and Ray options, and ran a gVisor run's answer() under runc). Building the spec itself
(``SandboxSpec(...)``, ``.replace(...)``) is its use, not a copy. A Typer command's parameters
are its flags, named after the options they set; a command that takes two or more of them
must gather them with ``given_sandbox_flags(locals())`` and lay them over one spec.

The oracle is the spec's own field list (``dataclasses.fields``), not a list kept here, so a
new option is covered the day it is added. ``backend`` and ``image`` are left out: those words
also name a result's backend or an image to build, and alone they open nothing.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from proctor.sandbox import SandboxSpec

REPO = Path(__file__).resolve().parents[1]
GENERIC_WORDS = frozenset({"backend", "image"})
OPTIONS = frozenset(option.name for option in dataclasses.fields(SandboxSpec)) - GENERIC_WORDS
# Each exception, with the reason it is not a copy to remove.
ALLOWED = {
    # `proctor run`'s flags become RunFlags, which the config loader lays over the config's
    # sandbox section by field name (agent/run/config_loader.py), before one spec is built.
    ("agent/cli/run_cmd.py", "RunFlags"),
    ("agent/cli/run_cmd.py", "run_command"),
    # `proctor sandbox worker` starts a node's Ray worker through its own API
    # (sandbox/ray/worker.py start_worker): the worker serves the specs callers send it.
    ("agent/cli/sandbox_cmd.py", "worker"),
    ("agent/cli/sandbox_cmd.py", "start_worker"),
    # `proctor bench sandbox`: --runtime and --ray-address are axes of the benchmark, which
    # opens a sandbox per value it measures (sandbox/bench/).
    ("agent/cli/sandbox_cmd.py", "bench_sandbox"),
}
# The spec built (or changed) whole: a use of the spec, not a copy of it.
BUILDS_THE_SPEC = frozenset({"SandboxSpec", "replace"})


def _called_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _is_typer_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.func.attr == "command"
        for dec in node.decorator_list
    )


def _gathers_flags(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        isinstance(call, ast.Call) and _called_name(call) == "given_sandbox_flags" for call in ast.walk(node)
    )


def hand_listed_options(source: str, path: str) -> list[str]:
    """Every place in ``source`` that hand-lists two or more of the spec's options."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            named = sorted(OPTIONS & {word.arg for word in node.keywords if word.arg})
            name = _called_name(node)
            if len(named) >= 2 and name not in BUILDS_THE_SPEC and (path, name) not in ALLOWED:
                found.append(f"{path}:{node.lineno}: {name}(...) passes {', '.join(named)} one by one")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            parameters = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
            named = sorted(OPTIONS & parameters)
            if len(named) < 2 or (path, node.name) in ALLOWED:
                continue
            if not _is_typer_command(node):
                found.append(f"{path}:{node.lineno}: def {node.name} takes {', '.join(named)} one by one")
            elif not _gathers_flags(node):
                found.append(
                    f"{path}:{node.lineno}: command {node.name} does not lay its flags over one spec"
                )
    return found


def test_no_agent_module_hand_lists_the_specs_options() -> None:
    found = [
        problem
        for path in sorted((REPO / "agent").rglob("*.py"))
        for problem in hand_listed_options(path.read_text(), str(path.relative_to(REPO)))
    ]
    assert found == []


def test_every_allowed_exception_still_exists() -> None:
    # A stale entry would let a new copy of the same name through unnoticed.
    for path, name in ALLOWED:
        tree = ast.parse((REPO / path).read_text())
        names = {getattr(node, "name", None) for node in ast.walk(tree)} | {
            _called_name(node) for node in ast.walk(tree) if isinstance(node, ast.Call)
        }
        assert name in names, (path, name)


@pytest.mark.parametrize(
    "source",
    [
        # The copies issue #37 found: a helper's parameters, a call's keywords, a command that
        # threads its flags on by hand.
        "def open_it(runtime, docker_host):\n    pass\n",
        "async def open_it(*, isolation=None, engine_path='auto'):\n    pass\n",
        "opener(image, runtime=runtime, engine_path=path)\n",
        "Controller(ray_address=address, ray_allow_unauthenticated=True)\n",
        "@app.command('x')\ndef command(runtime: str, docker_host: str):\n    open_it(runtime)\n",
    ],
)
def test_a_hand_list_is_found(source: str) -> None:
    assert hand_listed_options(source, "agent/x.py")


@pytest.mark.parametrize(
    "source",
    [
        # The spec built or changed whole, one option alone, the generic words, a command that
        # lays its flags over one spec.
        "SandboxSpec(runtime='runsc', docker_host=None, engine_path='docker')\n",
        "spec.replace(pool_size=0, probe_libraries=False)\n",
        "dataclasses.replace(spec, runtime=runtime, isolation=isolation)\n",
        "def audit(sandbox, limits, *, runtime=None):\n    pass\n",
        "AuditContext(backend=backend, image=image, runtime=runtime)\n",
        "@app.command('x')\ndef command(runtime: str, docker_host: str):\n"
        "    spec = spec_with_flags(SandboxSpec(), given_sandbox_flags(locals()))\n",
    ],
)
def test_a_use_of_the_spec_is_not(source: str) -> None:
    assert hand_listed_options(source, "agent/x.py") == []
