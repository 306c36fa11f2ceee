"""`proctor sandbox exec|cleanup|worker` and `proctor bench sandbox`."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from proctor.agent.cli import exit_codes
from proctor.agent.cli.app import SWEEP_JOIN_S, bench_app, sandbox_app
from proctor.agent.cli.sandbox_flags import given_sandbox_flags, spec_with_flags
from proctor.agent.errors import UserError
from proctor.agent.text.terminal import escape_for_terminal
from proctor.sandbox import (
    ExecResult,
    InvalidProgram,
    Limits,
    Sandbox,
    SandboxError,
    SandboxSpec,
    SandboxUnavailable,
    check_program_text,
    open_sandbox,
)
from proctor.sandbox.api import AUTO_PATH, DOCKER_PATH, ENGINE_PATHS
from proctor.sandbox.docker.runtimes import RUNTIMES
from proctor.sandbox.sizes import parse_size


def parse_number(flag: str, text: str) -> float:
    # Parsed here rather than by typer so that a bad value is one line, like every other error.
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{flag}: {text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise UserError(f"{flag}: {text!r} is not a finite number")
    return value


def parse_exec_limits(memory: str | None, cpus_text: str | None) -> Limits:
    """Limits from the flags; UserError naming the flag when a value is bad."""
    limits = Limits()
    if memory is not None:
        try:
            limits = limits.replace(memory_bytes=parse_size(memory))
        except ValueError as exc:
            raise UserError(f"--memory: {exc}") from None
        if limits.memory_bytes < 16 * 1024 * 1024:
            raise UserError(f"--memory: {memory!r} is below the 16m minimum a Python process needs")
    if cpus_text is not None:
        cpus = parse_number("--cpus", cpus_text)
        available = os.cpu_count() or 1
        if not 0 < cpus <= available:
            raise UserError(f"--cpus: {cpus} is not between 0 (exclusive) and {available} (this machine)")
        limits = limits.replace(cpus=cpus)
    return limits


def read_program(file: str) -> str:
    """The program's text; UserError naming the file when it cannot be a program."""
    if file == "-":
        try:
            code = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UserError(f"-: not UTF-8 text (byte {exc.start})") from None
    else:
        code = _read_file(file)
    try:
        check_program_text(code)
    except InvalidProgram as exc:
        raise UserError(f"{file}: {exc}") from None
    return code


def _read_file(file: str) -> str:
    path = Path(file)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{file}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{file}: is a directory, not a Python program") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{file}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise UserError(f"{file}: cannot read ({exc.strerror})") from None


async def _run_once(spec: SandboxSpec, code: str, timeout: float) -> ExecResult:
    try:
        sandbox: Sandbox = await open_sandbox(spec)
    except SandboxUnavailable as exc:
        raise UserError(f"--backend {spec.backend}: {exc}") from None
    try:
        warning = sandbox.describe().get("warning")
        if warning:
            print(f"proctor: {warning}", file=sys.stderr, flush=True)
        return await sandbox.exec(code, timeout=timeout)
    finally:
        await sandbox.aclose()


# What `proctor sandbox exec` exits with when the program did not end by itself (exit_codes.py).
EXIT_TIMED_OUT = exit_codes.TIMED_OUT
EXIT_SANDBOX_FAILED = exit_codes.SANDBOX_FAILED
EXIT_OUT_OF_MEMORY = exit_codes.OUT_OF_MEMORY
_LARGEST_EXIT_STATUS = 255


def mirrored_exit_code(result: ExecResult) -> int:
    """The status `proctor sandbox exec` exits with for ``result``: the program's own, or 124
    when it timed out, 137 when it was killed for memory. 125 when the sandbox reported no status
    a shell could carry (no exit code without a time-out, or one outside 0..255)."""
    if result.timed_out:
        return EXIT_TIMED_OUT
    if result.oom_killed:
        return EXIT_OUT_OF_MEMORY
    code = result.exit_code
    if code is None:
        return EXIT_SANDBOX_FAILED
    if code < 0:  # a signal, as subprocess reports it: the shell's 128 + N
        code = 128 - code
    return code if 0 <= code <= _LARGEST_EXIT_STATUS else EXIT_SANDBOX_FAILED


STATUS_PREFIX = "proctor: "
# Reverse video: the program's own escapes are shown escaped on a terminal, so no program
# output can look like this line there.
_MARK_ON, _MARK_OFF = "\x1b[7m", "\x1b[0m"


def status_line(result: ExecResult) -> str:
    if result.timed_out:
        outcome = "timed out"
    elif result.oom_killed:
        outcome = f"killed: out of memory (exit {result.exit_code})"
    else:
        outcome = f"exit {result.exit_code}"
    flags = [f"{name} truncated" for name in ("stdout", "stderr") if getattr(result, f"{name}_truncated")]
    details = "; ".join([f"{result.duration_s:.2f} s", *flags])
    return f"{STATUS_PREFIX}[sandbox {result.backend}: {outcome}; {details}]"


def print_result(result: ExecResult) -> None:
    """The program's output, then the status line on stderr, on a line of its own.

    On a terminal the program's control characters are escaped and the status line is marked
    in a way the program cannot print; a pipe gets the program's bytes exactly.
    """
    out_tty, err_tty = sys.stdout.isatty(), sys.stderr.isatty()
    stdout = escape_for_terminal(result.stdout) if out_tty else result.stdout
    stderr = escape_for_terminal(result.stderr) if err_tty else result.stderr
    sys.stdout.write(stdout)
    sys.stdout.flush()
    sys.stderr.write(stderr)
    line = status_line(result)
    if err_tty:
        # A program that ends without a newline must not share the status line.
        ends_open = (stderr and not stderr.endswith("\n")) or (
            out_tty and not stderr and stdout and not stdout.endswith("\n")
        )
        line = ("\n" if ends_open else "") + _MARK_ON + line + _MARK_OFF
    elif stderr and not stderr.endswith("\n"):
        line = "\n" + line
    print(line, file=sys.stderr, flush=True)


@sandbox_app.command("exec")
def exec_program(
    file: Annotated[str, typer.Argument(help="Python program to run, or - to read it from stdin.")],
    backend: Annotated[str, typer.Option(help="auto, docker, local or ray.")] = "auto",
    ray_address: Annotated[
        str | None, typer.Option(help="Ray cluster for --backend ray (default: RAY_ADDRESS or auto).")
    ] = None,
    ray_allow_unauthenticated: Annotated[
        bool,
        typer.Option("--ray-allow-unauthenticated", help="Use a Ray cluster without token authentication."),
    ] = False,
    timeout_text: Annotated[str, typer.Option("--timeout", help="Wall-clock limit in seconds.")] = "30",
    memory: Annotated[str | None, typer.Option(help="Memory limit, e.g. 512m or 8g (default 4g).")] = None,
    cpus: Annotated[str | None, typer.Option(help="CPU quota in CPUs (default 1).")] = None,
    image: Annotated[str | None, typer.Option(help="Sandbox image (default: the pinned image).")] = None,
    runtime: Annotated[str | None, typer.Option(help="Container runtime: runc (default) or runsc.")] = None,
    docker_host: Annotated[
        str | None, typer.Option(help="Docker engine socket (default: the environment's).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the ExecResult as one JSON object.")] = False,
    engine_path: Annotated[
        str,
        typer.Option(
            help="auto (default: runc-direct where it can serve), docker or runc-direct: "
            "who starts the container."
        ),
    ] = AUTO_PATH,
) -> None:
    """Run a Python program in a sandbox; exit as it did (124 timeout, 137 OOM).

    The exit status is the program's own (1 for an uncaught exception), as timeout(1) and docker
    run give it: 124 when the program ran out of time, 137 when it was killed for memory, 125
    when the sandbox itself failed, 2 when a flag or the file was refused before anything ran,
    130 on Ctrl-C. --json prints the whole result and exits the same way.
    """
    # The flags that open a sandbox are named after the spec's options: gathered in one mapping
    # and laid over one spec, the value open_sandbox takes.
    given = given_sandbox_flags(locals())
    timeout = parse_number("--timeout", timeout_text)
    if not 0 < timeout <= 24 * 3600:
        raise UserError(f"--timeout: {timeout} must be a positive number of seconds (at most a day)")
    # One call: a warm pool would only start containers nobody uses, and nothing reads the
    # local backend's import probe.
    base = SandboxSpec(pool_size=0, probe_libraries=False, default_limits=parse_exec_limits(memory, cpus))
    spec = spec_with_flags(base, given)
    code = read_program(file)
    try:
        result = asyncio.run(_run_once(spec, code, timeout))
    except InvalidProgram as exc:
        raise UserError(f"{file}: {exc}") from None
    except SandboxError as exc:
        print(f"proctor: error: the sandbox failed: {exc}", file=sys.stderr)
        # Not 1: that is what a program that raised exits with.
        raise typer.Exit(EXIT_SANDBOX_FAILED) from None
    except KeyboardInterrupt:
        # Reached only after the call's cleanup ran (asyncio cancels the call first); typer
        # alone would exit 130 without a word.
        print("proctor: interrupted: the program was stopped and its sandbox removed", file=sys.stderr)
        raise typer.Exit(exit_codes.INTERRUPTED) from None
    if as_json:
        print(json.dumps(result.to_dict(), sort_keys=True), flush=True)
    else:
        print_result(result)
    raise typer.Exit(mirrored_exit_code(result))


@sandbox_app.command("cleanup")
def cleanup(
    everything: Annotated[
        bool, typer.Option("--all", help="Remove every sandbox container, live runs' included.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as one JSON object.")] = False,
) -> None:
    """Remove sandbox containers (and local-backend cgroups) left behind by crashed runs."""
    from proctor.sandbox.docker.backend import connect_engine
    from proctor.sandbox.docker.cleanup import (
        background_sweep_result,
        cleanup_containers,
        cleanup_direct,
        cleanup_local_cgroups,
        cleanup_other_engines,
    )

    # The sweep every command starts may have removed some of the same leftovers: count them.
    swept = background_sweep_result(SWEEP_JOIN_S)
    outcome: dict[str, Any] = {"engine": True}
    try:
        report = cleanup_containers(connect_engine(), everything=everything)
    except SandboxUnavailable as exc:
        outcome.update(engine=False, engine_error=str(exc), removed=swept, kept_live=[], failed=[])
    else:
        # gVisor's separate engine too, when it is set up (its containers would be missed otherwise).
        for extra in cleanup_other_engines(everything):
            report.removed += extra.removed
            report.kept_live += extra.kept_live
            report.failed += extra.failed
        removed = swept + [cid for cid in report.removed if cid not in swept]
        outcome.update(removed=removed, kept_live=report.kept_live, failed=report.failed)
    # Containers runc-direct started itself (sandbox/docker/oci_direct.py): no engine lists them.
    direct = cleanup_direct(everything=everything)
    outcome["removed"] = outcome.get("removed", []) + direct.removed
    outcome["kept_live"] = outcome.get("kept_live", []) + direct.kept_live
    outcome["failed"] = outcome.get("failed", []) + direct.failed
    outcome["cgroups_removed"] = cleanup_local_cgroups(everything=everything) + direct.cgroups_removed
    if as_json:
        print(json.dumps(outcome, sort_keys=True))
    elif not outcome["engine"]:
        print(f"no containers checked: {outcome['engine_error']}")
    else:
        kept = len(outcome["kept_live"])
        print(
            f"removed {len(outcome['removed'])} sandbox container(s)"
            + (f"; kept {kept} of live runs (use --all to remove them too)" if kept else "")
            + (f"; could not remove {len(outcome['failed'])}" if outcome["failed"] else "")
        )
    if outcome["failed"]:
        raise typer.Exit(1)


@sandbox_app.command("worker")
def worker(
    address: Annotated[str, typer.Option(help="The Ray cluster this node joined (host:port of its head).")],
    node_id: Annotated[
        str | None, typer.Option(help="Ray node to serve (default: the node this machine runs).")
    ] = None,
    docker_host: Annotated[
        str | None, typer.Option(help="The node's Docker engine (default: DOCKER_HOST or the local socket).")
    ] = None,
    image: Annotated[str | None, typer.Option(help="Sandbox image (default: the pinned image).")] = None,
    pool_size_text: Annotated[str, typer.Option("--pool-size", help="Warm containers kept ready.")] = "2",
    stop: Annotated[bool, typer.Option("--stop", help="Stop every worker of the cluster instead.")] = False,
    ray_allow_unauthenticated: Annotated[
        bool,
        typer.Option(
            "--ray-allow-unauthenticated",
            help="Serve a Ray cluster without token authentication (anyone who reaches it can run code).",
        ),
    ] = False,
) -> None:
    """Start this node's sandbox worker: a Ray actor serving sandbox calls from its Docker engine.

    The node must have joined the cluster with the resource proctor_sandbox sized to its CPUs
    (ray start --address ADDR --resources '{"proctor_sandbox": N}'). The worker outlives this
    command; --stop removes every worker's containers and ends them.
    """
    from proctor.sandbox.ray.auth import TOKEN_HINT, require_token_auth
    from proctor.sandbox.ray.backend import _one_line
    from proctor.sandbox.ray.worker import NAMESPACE, import_ray, probe_address, start_worker, stop_workers

    pool_size = parse_number("--pool-size", pool_size_text)
    if pool_size != int(pool_size) or not 0 <= pool_size <= 64:
        raise UserError(f"--pool-size: {pool_size_text} must be a whole number between 0 and 64")
    try:
        ray = import_ray()
    except SandboxUnavailable as exc:
        raise UserError(str(exc)) from None
    try:
        probe_address(address)
        # A worker holds the node's Docker socket: never hand it to a cluster anyone can use.
        auth = require_token_auth(address, ray_allow_unauthenticated)
    except SandboxUnavailable as exc:
        raise UserError(f"--address {address}: {exc}") from None
    if auth.get("allowed_unauthenticated"):
        print(
            f"proctor: warning: the Ray cluster at {address} has no token authentication; anyone who "
            "reaches its ports can run code on this node",
            file=sys.stderr,
        )
    try:
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level="ERROR")
    except Exception as exc:
        hint = f"; {TOKEN_HINT}" if auth.get("requires_token") else ""
        raise UserError(
            f"--address {address}: cannot join the Ray cluster ({_one_line(exc)}{hint})"
        ) from None
    try:
        if stop:
            stopped = stop_workers()
            print(f"stopped {len(stopped)} sandbox worker(s)")
            return
        try:
            info = start_worker(
                node_id,
                docker_host=docker_host or os.environ.get("DOCKER_HOST"),
                image=image,
                pool_size=int(pool_size),
            )
        except SandboxUnavailable as exc:
            raise UserError(str(exc)) from None
        except Exception as exc:
            raise UserError(f"the sandbox worker did not start: {_one_line(exc)}") from None
        verb = "started" if info.pop("started") else "already running"
        print(f"sandbox worker {verb}: " + json.dumps(info, sort_keys=True))
        if info.get("niceness"):
            print(
                f"proctor: warning: this node's Ray workers run at nice {info['niceness']}, which adds "
                "latency to every call on a busy node; start the node with RAY_worker_niceness=0",
                file=sys.stderr,
            )
    finally:
        ray.shutdown()


@bench_app.command("sandbox")
def bench_sandbox(
    calls_text: Annotated[str, typer.Option("--calls", help="Timed calls per way (after a warm-up).")] = "30",
    image: Annotated[str | None, typer.Option(help="Sandbox image (default: the pinned image).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as one JSON object.")] = False,
    runtimes_text: Annotated[
        str | None,
        typer.Option(
            "--runtimes",
            help="Compare container runtimes in one interleaved run instead, e.g. runc,runsc.",
        ),
    ] = None,
    runtime: Annotated[
        str | None, typer.Option(help="Compare this runtime with runc (same as --runtimes runc,R).")
    ] = None,
    concurrency_text: Annotated[
        str | None,
        typer.Option(
            "--concurrency",
            help="Comma-separated caller counts, e.g. 1,4,16: calls/s and p50/p95 of the pool, "
            "docker run and docker exec in one interleaved run (--calls is then calls per caller).",
        ),
    ] = None,
    rounds_text: Annotated[
        str, typer.Option("--rounds", help="With --concurrency: interleaved rounds.")
    ] = "2",
    slots_text: Annotated[
        str | None,
        typer.Option(
            "--max-sandbox-concurrency",
            help="With --concurrency: the pool's execution slots (default: as many as callers, as "
            "docker run and docker exec get).",
        ),
    ] = None,
    engine_paths_text: Annotated[
        str,
        typer.Option(
            "--engine-paths",
            help="With --concurrency: the pool's engine paths to measure (docker,runc-direct).",
        ),
    ] = "docker,runc-direct",
    backend: Annotated[
        str, typer.Option(help="docker (every local way) or ray (overhead and throughput by nodes).")
    ] = "docker",
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster for --backend ray.")] = None,
) -> None:
    """p50/p95 latency of a stateless print(1): per-call container, warm pool, local, bare host."""
    from proctor.sandbox.bench.calls import print_table, run_benchmark

    calls = parse_number("--calls", calls_text)
    if calls != int(calls) or not 1 <= calls <= 10_000:
        raise UserError(f"--calls: {calls_text} must be a whole number between 1 and 10000")
    if backend not in ("docker", "ray"):
        raise UserError(f"--backend: {backend!r} is not one of docker, ray")
    if backend == "ray":
        _bench_ray(int(calls), ray_address, image, as_json)
        return
    if runtimes_text is not None or runtime is not None:
        _bench_runtimes(runtimes_text, runtime, int(calls), image, as_json)
        return
    if concurrency_text is not None:
        _bench_concurrency(
            concurrency_text, rounds_text, slots_text, int(calls), image, as_json, engine_paths_text
        )
        return
    try:
        report = asyncio.run(run_benchmark(calls=int(calls), image=image))
    except SandboxUnavailable as exc:
        raise UserError(f"bench sandbox needs docker and the image: {exc}") from None
    if as_json:
        print(json.dumps(report, sort_keys=True))
    else:
        print_table(report)


def _bench_ray(calls: int, ray_address: str | None, image: str | None, as_json: bool) -> None:
    try:
        from proctor.sandbox.bench.ray_routing import print_ray_report, run_ray_benchmark

        report = asyncio.run(run_ray_benchmark(calls=calls, address=ray_address, image=image))
    except SandboxUnavailable as exc:
        raise UserError(f"bench sandbox --backend ray: {exc}") from None
    if as_json:
        print(json.dumps(report, sort_keys=True))
    else:
        print_ray_report(report)


def _bench_runtimes(
    runtimes_text: str | None, runtime: str | None, calls: int, image: str | None, as_json: bool
) -> None:
    from proctor.sandbox.bench.runtime_costs import print_comparison, run_runtime_comparison

    flag = "--runtimes" if runtimes_text is not None else "--runtime"
    names = [name.strip() for name in (runtimes_text or f"runc,{runtime}").split(",") if name.strip()]
    names = list(dict.fromkeys(names))
    for name in names:
        if name not in RUNTIMES:
            raise UserError(f"{flag}: {name!r} is not one of {', '.join(RUNTIMES)}")
    if not names:
        raise UserError(f"{flag}: name at least one runtime, e.g. runc,runsc")
    try:
        report = asyncio.run(run_runtime_comparison(names, calls=calls, image=image))
    except SandboxUnavailable as exc:
        raise UserError(f"{flag}: {exc}") from None
    if as_json:
        print(json.dumps(report, sort_keys=True))
    else:
        print_comparison(report)


def _bench_concurrency(
    concurrency_text: str,
    rounds_text: str,
    slots_text: str | None,
    calls: int,
    image: str | None,
    as_json: bool,
    engine_paths_text: str = "docker,runc-direct",
) -> None:
    from proctor.sandbox.bench.concurrency import print_concurrency_table, run_concurrency_benchmark

    engine_paths = tuple(dict.fromkeys(part.strip() for part in engine_paths_text.split(",") if part.strip()))
    if not engine_paths or not set(engine_paths) <= set(ENGINE_PATHS):
        raise UserError(f"--engine-paths: {engine_paths_text!r}: name some of {', '.join(ENGINE_PATHS)}")
    if DOCKER_PATH not in engine_paths:
        raise UserError("--engine-paths: docker is always measured (per-sample and the reference)")
    try:
        concurrencies = [int(part) for part in concurrency_text.split(",")]
    except ValueError:
        raise UserError(
            f"--concurrency: {concurrency_text!r} is not a comma-separated list of whole numbers"
        ) from None
    if not concurrencies or not all(1 <= value <= 256 for value in concurrencies):
        raise UserError(f"--concurrency: {concurrency_text!r}: each caller count must be between 1 and 256")
    rounds = parse_number("--rounds", rounds_text)
    if rounds != int(rounds) or not 1 <= rounds <= 100:
        raise UserError(f"--rounds: {rounds_text} must be a whole number between 1 and 100")
    slots = None
    if slots_text is not None:
        slots_number = parse_number("--max-sandbox-concurrency", slots_text)
        if slots_number != int(slots_number) or not 1 <= slots_number <= 256:
            raise UserError(
                f"--max-sandbox-concurrency: {slots_text} must be a whole number between 1 and 256"
            )
        slots = int(slots_number)
    try:
        report = asyncio.run(
            run_concurrency_benchmark(
                concurrencies,
                calls=calls,
                rounds=int(rounds),
                image=image,
                max_concurrent_executions=slots,
                engine_paths=engine_paths,
            )
        )
    except SandboxUnavailable as exc:
        raise UserError(f"bench sandbox needs docker and the image: {exc}") from None
    if as_json:
        print(json.dumps(report, sort_keys=True))
    else:
        print_concurrency_table(report)
