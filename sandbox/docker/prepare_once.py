"""The image's prepare step (its entrypoint) once per template instead of once per container.

The launcher runs an image's entrypoint as the sandbox user before a container is ready. Its
only lasting effect, when it has no other, is what it leaves in the container's writable places
(/tmp, /work, /dev/shm, /dev/mqueue): the root is read-only, and the launcher kills every
process it left. So the entrypoint runs in two probe containers of the template (each with a uid,
name and hostname of its own), whose launchers report that tree (sandbox/docker/launcher.py,
``probe``). When both report the same tree, made only of the sandbox user's directories, regular
files and symbolic links, with no other effect, each container's launcher recreates that tree
in a forked child demoted exactly like a program, which runs nothing else (``rebuild``). Any
other answer keeps the entrypoint running per container, as before; the reason is kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

# One launcher argument holds the configuration with the tree: Linux refuses any single argument
# of 128 KiB or more (MAX_ARG_STRLEN), so a larger tree is run per container instead.
MAX_CONFIG_BYTES = 120 * 1024
_ANSWER = re.compile(rb"\x00proctor-prepared:(tree\n(?:[^\x00]*)|refused [0-9a-f]*)\x00$")
_HEX = re.compile(r"[0-9a-f]*")
_KINDS = {"d", "f", "l"}

Entry = list[str | int]


@dataclass(frozen=True)
class Recorded:
    """A template's prepare step: the tree its containers rebuild and the launcher configuration
    that carries it, or (both None) why the entrypoint stays per container."""

    replay: list[Entry] | None
    config: str | None
    reason: str


def parse_probe(output: bytes) -> list[Entry] | str:
    """The tree one probe container reported, or the reason it gave (or a reason of ours for an
    answer that is not a probe's: anything written before it was the entrypoint's output)."""
    found = _ANSWER.search(output)
    if found is None:
        return f"no probe answer in the container's output ({output[-200:]!r})"
    if found.start() != 0:
        return f"the entrypoint wrote output ({output[: found.start()][:200]!r})"
    body = found.group(1).decode("ascii", "replace")
    if body.startswith("refused "):
        reason = body.removeprefix("refused ")
        return bytes.fromhex(reason).decode("utf-8", "replace") if _HEX.fullmatch(reason) else reason
    entries: list[Entry] = []
    for line in body.splitlines()[1:]:
        fields = line.split(" ")
        if len(fields) != 4 or fields[1] not in _KINDS or not fields[2].isdigit():
            return f"a malformed entry in the probe's answer: {line[:200]!r}"
        path, kind, mode, data = fields
        data = "" if data == "-" else data
        if not (path and _HEX.fullmatch(path) and _HEX.fullmatch(data)):
            return f"a malformed entry in the probe's answer: {line[:200]!r}"
        entries.append([path, kind, int(mode), data])
    return entries


def record(run_probe: Callable[[int], bytes], probe_uids: tuple[int, int], launcher_config: str) -> Recorded:
    """Run the entrypoint in two probe containers (``run_probe(uid)`` returns one's output) and
    keep the tree only if both made the same one: proof, as far as two runs go, that it depends
    on nothing a container has of its own (their uids, names and hostnames differ). The tree goes
    into ``launcher_config`` (JSON) as ``replay``."""
    first, second = (parse_probe(run_probe(uid)) for uid in probe_uids)
    if isinstance(first, str):
        return Recorded(None, None, first)
    if isinstance(second, str):
        return Recorded(None, None, second)
    if first != second:
        return Recorded(None, None, "two runs of the entrypoint left different trees (not deterministic)")
    config = json.loads(launcher_config)
    config["replay"] = first
    text = json.dumps(config)
    if len(text.encode()) >= MAX_CONFIG_BYTES:
        return Recorded(None, None, "the tree it leaves is too large for the launcher's arguments")
    return Recorded(first, text, f"replayed: {len(first)} entries recorded once per template")


def as_probe(launcher_config: str) -> str:
    """The launcher's configuration for a probe container: run the entrypoint, report, exit."""
    config = json.loads(launcher_config)
    config["probe"] = True
    config.pop("replay", None)
    return json.dumps(config)
