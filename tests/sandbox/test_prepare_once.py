"""The image's prepare step once per template (sandbox/docker/prepare_once.py): on runc-direct a
container rebuilds the tree the entrypoint left in two probe containers, and the program sees
exactly what the entrypoint itself makes (compared with the docker path, which runs it in every
container); an entrypoint whose effect cannot be recorded and replayed faithfully keeps running
in every container."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from proctor.sandbox.docker import oci_direct, prepare_once
from proctor.sandbox.docker.backend import DockerSandbox, connect_engine, resolve_image
from tests.sandbox.conftest import TEST_LIMITS

ROOT_AND_RUNC = pytest.mark.skipif(oci_direct.available() is not None, reason=str(oci_direct.available()))

# What a program sees of every writable place: kind, mode, ownership (its own or not), size,
# link target and content of each entry, names as bytes.
LOOK = r"""
import hashlib, json, os, stat
found = {}
for top in (b'/tmp', b'/work', b'/dev/shm', b'/dev/mqueue'):
    for root, dirs, files in os.walk(top):
        for name in sorted(dirs + files) + [b'.']:
            path = os.path.join(root, name)
            info = os.lstat(path)
            link = os.readlink(path).hex() if stat.S_ISLNK(info.st_mode) else None
            data = None
            if stat.S_ISREG(info.st_mode):
                data = hashlib.sha256(open(path, 'rb').read()).hexdigest()
            try:
                names = sorted(os.listxattr(path, follow_symlinks=False)) if link is None else None
            except OSError as exc:
                names = type(exc).__name__
            found[path.hex()] = [oct(info.st_mode), info.st_uid == os.getuid(), info.st_gid,
                                 info.st_size if not stat.S_ISDIR(info.st_mode) else None, link, data, names]
print(json.dumps(found))
"""

# Directories, files with content and modes, a read-only directory filled first, links (one
# dangling), an empty file, a name that is not UTF-8: all of it replayable.
REPLAYABLE = (
    "mkdir -p /work/a/b /tmp/ro && printf 'x\\ny\\n' > /work/a/f && chmod 604 /work/a/f"
    " && ln -s /etc/passwd /tmp/passwd && ln -s /nowhere /work/a/b/dangling && : > /tmp/ro/empty"
    " && chmod 555 /tmp/ro && : > \"/dev/shm/$(printf 'n\\377')\" && chmod 705 /work/a/b"
)


def shell_entrypoint(script: str) -> list[str]:
    # The launcher appends its own command (true), which the script execs, as an image's would.
    return ["/bin/sh", "-c", script + '\nexec "$@"', "sandbox-init"]


@asynccontextmanager
async def sandbox(
    image: str, engine_path: str, entrypoint: list[str] | None, record_prepare_after: int = 0
) -> AsyncIterator[DockerSandbox]:
    client = connect_engine()
    reference, image_id = resolve_image(client, image, None)
    box = DockerSandbox(
        client,
        reference,
        image_id,
        pool_size=0,
        default_limits=TEST_LIMITS,
        entrypoint=entrypoint,
        engine_path=engine_path,
        # 0: recorded with the template, so the first call already uses it.
        record_prepare_after=record_prepare_after,
    )
    box.start()
    try:
        yield box
    finally:
        await box.aclose()


def how_prepared(box: DockerSandbox) -> str:
    (template,) = box._templates.values()
    return template.prepare


async def look(box: DockerSandbox) -> dict[str, object]:
    result = await box.exec(LOOK, timeout=60)
    assert result.exit_code == 0, result
    found: dict[str, object] = json.loads(result.stdout)
    return found


@pytest.mark.docker
@ROOT_AND_RUNC
@pytest.mark.parametrize("script", [None, REPLAYABLE], ids=["image-entrypoint", "replayable-script"])
async def test_the_replayed_tree_is_the_tree_the_entrypoint_makes(
    sandbox_image: str, script: str | None
) -> None:
    entrypoint = None if script is None else shell_entrypoint(script)
    async with sandbox(sandbox_image, "runc-direct", entrypoint) as direct:
        replayed = [await look(direct) for _ in range(2)]
        assert how_prepared(direct).startswith("replayed"), how_prepared(direct)
        config = json.loads(direct._templates[(TEST_LIMITS, False)].spec["process"]["args"][-1])
        assert config["replay"], "nothing recorded: the comparison proves nothing"
    async with sandbox(sandbox_image, "docker", entrypoint) as engine:
        made = await look(engine)
    assert replayed[0] == replayed[1] == made
    # The pinned image's entrypoint makes the numba cache; the script its own tree.
    assert len(made) > 6, made


@pytest.mark.docker
@ROOT_AND_RUNC
async def test_a_template_records_its_prepare_step_once_it_has_started_enough_containers(
    sandbox_image: str,
) -> None:
    # Recording costs two probe containers: a sandbox of few calls keeps the entrypoint per
    # container, and from the (N+1)th container on the recorded tree serves, making the same tree.
    async with sandbox(sandbox_image, "runc-direct", None, record_prepare_after=2) as direct:
        before = [await look(direct) for _ in range(2)]
        assert how_prepared(direct).startswith("the entrypoint runs in every container"), how_prepared(direct)
        after = [await look(direct) for _ in range(2)]
        assert how_prepared(direct).startswith("replayed"), how_prepared(direct)
    assert before[0] == before[1] == after[0] == after[1]


@pytest.mark.docker
@ROOT_AND_RUNC
async def test_numba_loads_its_kernels_from_the_image_through_the_replayed_cache(sandbox_image: str) -> None:
    # As the audit's row limits.numba_cache asks: galois's kernels load from the image's cache,
    # none is compiled and saved anew.
    program = (
        "import contextlib, io, os\nos.environ['NUMBA_DEBUG_CACHE'] = '1'\nlog = io.StringIO()\n"
        "with contextlib.redirect_stdout(log):\n    import galois\n"
        "print(log.getvalue().count('data loaded from'), log.getvalue().count('data saved to'))"
    )
    async with sandbox(sandbox_image, "runc-direct", None) as direct:
        result = await direct.exec(program, timeout=120)
        assert how_prepared(direct).startswith("replayed"), how_prepared(direct)
    assert result.exit_code == 0, result
    loaded, saved = map(int, result.stdout.split())
    assert loaded > 0 and saved == 0, result.stdout


# Each leaves something a replay could not make the same, and a program shows that the
# entrypoint really ran in its own container.
OWN_UID = "import os; print(open('/tmp/uid').read().strip() == str(os.getuid()))"
OWN_HOST = "import os; print(open('/work/host').read().strip() == os.uname()[1])"
IS_FIFO = "import stat, os; print(stat.S_ISFIFO(os.lstat('/tmp/fifo').st_mode))"
NOT_REPLAYABLE = {
    "fifo": ("mkfifo /tmp/fifo", IS_FIFO, "True"),
    "hard-link": ("echo a > /tmp/a && ln /tmp/a /tmp/b", "import os; print(os.stat('/tmp/b').st_nlink)", "2"),
    "own-uid": ("id -u > /tmp/uid", OWN_UID, "True"),
    "hostname": ("uname -n > /work/host", OWN_HOST, "True"),
    "random-name": ("mktemp -d /tmp/x.XXXXXX", "import glob; print(len(glob.glob('/tmp/x.*')))", "1"),
    "output": ("echo hello", "print('ran')", "ran"),
    # The root launcher has no CAP_DAC_READ_SEARCH: a directory it cannot list cannot be recorded.
    "unlistable-directory": (
        "mkdir /tmp/d && chmod 711 /tmp/d",
        "import os; print(os.listdir('/tmp/d'))",
        "[]",
    ),
    "root-mode": ("chmod 700 /tmp", "import os; print(oct(os.stat('/tmp').st_mode & 0o777))", "0o700"),
}


@pytest.mark.docker
@ROOT_AND_RUNC
@pytest.mark.parametrize("case", sorted(NOT_REPLAYABLE))
async def test_an_entrypoint_that_cannot_be_replayed_runs_in_every_container(
    sandbox_image: str, case: str
) -> None:
    script, program, expected = NOT_REPLAYABLE[case]
    async with sandbox(sandbox_image, "runc-direct", shell_entrypoint(script)) as direct:
        results = [await direct.exec(program, timeout=60) for _ in range(2)]
        assert how_prepared(direct).startswith("the entrypoint runs in every container"), how_prepared(direct)
    for result in results:
        assert (result.exit_code, result.stdout.strip()) == (0, expected), result


# -- the recorded answer, without containers ------------------------------------------------


def answer(*lines: str) -> bytes:
    return b"\x00proctor-prepared:tree\n" + "".join(line + "\n" for line in lines).encode() + b"\x00"


def test_a_probe_answer_becomes_the_entries_the_launcher_rebuilds() -> None:
    tree = answer("2f746d702f64 d 493 -", "2f746d702f642f66 f 420 7879", "2f746d702f6c l 0 2f65")
    assert prepare_once.parse_probe(tree) == [
        ["2f746d702f64", "d", 493, ""],
        ["2f746d702f642f66", "f", 420, "7879"],
        ["2f746d702f6c", "l", 0, "2f65"],
    ]


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        (b"hi\n" + answer(), "wrote output"),
        (b"\x00proctor-prepared:refused " + b"a fifo".hex().encode() + b"\x00", "a fifo"),
        (answer("2f74 x 0 -"), "malformed"),
        (answer("2f74 f 420 zz"), "malformed"),
        (answer("2f74 f 420"), "malformed"),
        (b"", "no probe answer"),
    ],
)
def test_anything_but_a_clean_probe_answer_keeps_the_entrypoint_per_container(
    output: bytes, reason: str
) -> None:
    recorded = prepare_once.record(lambda uid: output, (1, 2), json.dumps({"uid": 1}))
    assert recorded.replay is None and recorded.config is None
    assert reason in recorded.reason


def test_two_different_trees_or_one_too_large_are_not_replayed() -> None:
    answers = {1: answer("2f746d702f61 d 493 -"), 2: answer("2f746d702f62 d 493 -")}
    recorded = prepare_once.record(answers.__getitem__, (1, 2), json.dumps({"uid": 1}))
    assert recorded.config is None and "not deterministic" in recorded.reason
    big = answer("2f746d702f61 f 420 " + "00" * prepare_once.MAX_CONFIG_BYTES)
    recorded = prepare_once.record(lambda uid: big, (1, 2), json.dumps({"uid": 1}))
    assert recorded.config is None and "too large" in recorded.reason
    same = answer("2f746d702f61 d 493 -")
    recorded = prepare_once.record(lambda uid: same, (1, 2), json.dumps({"uid": 1}))
    assert recorded.config is not None
    assert json.loads(recorded.config) == {"uid": 1, "replay": [["2f746d702f61", "d", 493, ""]]}
