"""The built image itself: pins, user, read-only galois import with the precompiled cache."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import docker
import pytest

from proctor.sandbox import SandboxError
from proctor.sandbox.docker.image import ImageInfo, build_image, find_image, image_tag, pinned_versions

# The session fixture builds the image when it is missing (CI builds it before the tests):
# from nothing that can take several minutes on 2 loaded cores.
pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]

SANDBOX_UID = 10001


def run_locked_down(client: docker.DockerClient, image: str, code: str, **options: Any) -> str:
    """Run ``python3 -c code`` the way the sandbox does: read-only root, tmpfs /tmp, no network."""
    settings: dict[str, Any] = {
        "read_only": True,
        "tmpfs": {"/tmp": "rw,size=64m,mode=1777"},
        "network_mode": "none",
        "user": str(SANDBOX_UID),
        "remove": True,
        "stdout": True,
        "stderr": True,
    }
    settings.update(options)
    output = client.containers.run(image, ["python3", "-c", code], **settings)
    return output.decode() if isinstance(output, bytes) else str(output)


def test_image_is_tagged_by_its_inputs_and_found(
    docker_engine: docker.DockerClient, built_image: ImageInfo
) -> None:
    assert built_image.tag == image_tag(built_image.base)
    assert find_image(docker_engine, built_image.tag) == built_image.image_id
    assert find_image(docker_engine, "proctor/frontiermath-python:000000000000") is None
    with pytest.raises(SandboxError, match="not a valid image reference"):
        find_image(docker_engine, "bogus::")


def test_build_is_idempotent_and_fast_when_the_image_exists(
    docker_engine: docker.DockerClient, built_image: ImageInfo
) -> None:
    started = time.monotonic()
    again = build_image(built_image.base, client=docker_engine, log=lambda line: None)
    assert (again.tag, again.image_id, again.built) == (built_image.tag, built_image.image_id, False)
    assert time.monotonic() - started < 10


def test_installed_distributions_are_exactly_the_lock(
    docker_engine: docker.DockerClient, built_image: ImageInfo
) -> None:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "print(json.dumps({'python': list(sys.version_info[:2]),"
        " 'dists': {d.metadata['Name']: d.version for d in m.distributions()}}))"
    )
    report = json.loads(run_locked_down(docker_engine, built_image.tag, code))
    assert report["python"] == [3, 11]
    installed = {name.lower().replace("_", "-"): version for name, version in report["dists"].items()}
    locked = pinned_versions()
    # Exactly the lock: not even the venv's own pip and setuptools are left.
    assert installed == locked


def test_image_user_is_the_unprivileged_sandbox_user(
    docker_engine: docker.DockerClient, built_image: ImageInfo
) -> None:
    config = docker_engine.images.get(built_image.tag).attrs["Config"]
    assert config["User"].split(":")[0] == str(SANDBOX_UID)
    # No --user here: the image's own USER must apply.
    output = run_locked_down(
        docker_engine, built_image.tag, "import os; print(os.getuid(), os.getgid(), os.getcwd())", user=None
    )
    uid, gid, cwd = output.split()
    assert (int(uid), int(gid), cwd) == (SANDBOX_UID, SANDBOX_UID, "/work")


def test_nothing_is_imported_in_advance(docker_engine: docker.DockerClient, built_image: ImageInfo) -> None:
    code = (
        "import sys, importlib.util, json, os, site\n"
        "print(json.dumps({'modules': sorted(sys.modules),"
        " 'customize': [m for m in ('sitecustomize', 'usercustomize') if importlib.util.find_spec(m)],"
        " 'pth': [f for d in site.getsitepackages() if os.path.isdir(d) for f in os.listdir(d)"
        " if f.endswith('.pth')]}))"
    )
    report = json.loads(run_locked_down(docker_engine, built_image.tag, code))
    heavy = {
        "numpy",
        "scipy",
        "sympy",
        "galois",
        "numba",
        "llvmlite",
        "networkx",
        "mpmath",
        "gmpy2",
        "pyadic",
    }
    assert heavy.isdisjoint(report["modules"])
    assert report["customize"] == []
    assert report["pth"] == []  # a .pth line starting with 'import' runs at every start-up


GALOIS_CHECK = """
import os, time
start = time.perf_counter()
import galois
elapsed = time.perf_counter() - start
field = galois.GF(2**8)
assert int(field(3) * field(7) + field(1)) == 8
cache = os.environ["NUMBA_CACHE_DIR"]
links, files = [], []
for root, _, names in os.walk(cache):
    for name in names:
        (links if os.path.islink(os.path.join(root, name)) else files).append(name)
print(elapsed, len(links), len(files))
"""


def test_galois_imports_on_a_read_only_root_from_the_precompiled_cache(
    docker_engine: docker.DockerClient, built_image: ImageInfo
) -> None:
    output = run_locked_down(
        docker_engine, built_image.tag, GALOIS_CHECK, environment={"NUMBA_DEBUG_CACHE": "1"}
    )
    assert "no locator available" not in output
    # numba reports each kernel it took from the cache, and compiles (and saves) none anew.
    assert output.count("data loaded from") >= 4
    assert "data saved to" not in output
    elapsed, links, files = output.strip().splitlines()[-1].split()
    # The per-container cache dir holds only links to the build-time cache: nothing new was written.
    assert int(links) >= 8 and int(files) == 0
    assert float(elapsed) > 0


def test_without_the_entrypoint_galois_has_no_writable_cache(
    docker_engine: docker.DockerClient, built_image: ImageInfo
) -> None:
    """The failure the entrypoint exists for: on a read-only root numba finds no cache dir."""
    with pytest.raises(docker.errors.ContainerError) as failure:
        run_locked_down(
            docker_engine,
            built_image.tag,
            "import galois",
            entrypoint=[],
            environment={"NUMBA_CACHE_DIR": ""},
        )
    assert b"no locator available" in (failure.value.stderr or b"")


def test_cli_prints_the_tag_and_image_id(built_image: ImageInfo) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", "from proctor.agent.cli import main; main()", "image", "build", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert (report["tag"], report["image_id"], report["built"]) == (
        built_image.tag,
        built_image.image_id,
        False,
    )
    assert report["versions"]["galois"] == "0.4.4"


USER_KERNEL = """
import pathlib, sys
pathlib.Path("/tmp/userkernel.py").write_text(
    "import numba\\n@numba.njit(cache=True)\\ndef double(x):\\n    return 2 * x\\n"
)
sys.path.insert(0, "/tmp")
import userkernel
assert userkernel.double(21) == 42
"""


def test_a_program_can_still_cache_its_own_kernels(
    docker_engine: docker.DockerClient, built_image: ImageInfo
) -> None:
    """The per-container cache dir is writable: new compilations are saved beside the links."""
    output = run_locked_down(
        docker_engine, built_image.tag, USER_KERNEL, environment={"NUMBA_DEBUG_CACHE": "1"}
    )
    assert "data saved to '/tmp/numba-cache/" in output


def test_an_unavailable_base_falls_back_to_the_bootstrapped_one(
    docker_engine: docker.DockerClient, built_image: ImageInfo
) -> None:
    from proctor.sandbox.docker.image_base import BOOTSTRAP_BASE_IMAGE, ensure_base_image

    if built_image.base != BOOTSTRAP_BASE_IMAGE:
        pytest.skip("the session image was built on another base")
    messages: list[str] = []
    # A registry on a closed loopback port: the pull fails at once without leaving the machine.
    ref, image_id = ensure_base_image(docker_engine, "127.0.0.1:9/proctor/absent:none", messages.append)
    assert (ref, image_id) == (BOOTSTRAP_BASE_IMAGE, built_image.base_id)
    assert any("cannot pull" in message for message in messages)
