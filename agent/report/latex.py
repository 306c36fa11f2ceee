"""KaTeX for the report's mathematics, inlined so each page stays one offline file.

KaTeX comes from npm, pinned with its integrity hash in ``katex/package-lock.json`` beside this
file; ``npm ci`` there (``.ci/setup.sh`` runs it) installs it under ``katex/node_modules``.
A page embeds KaTeX's script, its stylesheet with every font as a ``data:`` URI (WOFF2 only:
every browser that runs the page reads it) and the licence notice. Without an install, or with
one that does not match the lock, the page shows LaTeX as source and says why, once.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

KATEX_DIR = Path(__file__).resolve().parent / "katex"
INSTALL_HINT = "run `npm ci` in agent/report/katex, as .ci/setup.sh does"


class KatexUnavailable(Exception):
    """Why the page cannot render mathematics: one line, shown on the page."""


@dataclass(frozen=True)
class KatexAssets:
    version: str
    script: str
    style: str


def katex_assets(root: Path | None = None) -> KatexAssets:
    """The pinned KaTeX, ready to inline; raises KatexUnavailable with the reason."""
    return _load(root or KATEX_DIR)


def katex_status(root: Path | None = None) -> tuple[KatexAssets | None, str]:
    """(assets, "") when KaTeX can be inlined, else (None, the reason)."""
    try:
        return katex_assets(root), ""
    except KatexUnavailable as error:
        return None, str(error)


def _pinned_version(root: Path) -> str:
    try:
        lock = json.loads((root / "package-lock.json").read_text(encoding="utf-8"))
        return str(lock["packages"]["node_modules/katex"]["version"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        lock_path = root / "package-lock.json"
        raise KatexUnavailable(f"cannot read KaTeX's pinned version from {lock_path}: {error}") from None


# One @font-face source list: KaTeX names each font as WOFF2, WOFF and TTF, in that order.
_FONT_SRC = re.compile(r"src:([^;}]*)")
_WOFF2_URL = re.compile(r"url\(([^)\s]+\.woff2)\)")


def _inline_fonts(css: str, dist: Path) -> str:
    def inline(match: re.Match[str]) -> str:
        woff2 = _WOFF2_URL.search(match.group(1))
        if woff2 is None:
            raise KatexUnavailable(f"a KaTeX font has no WOFF2 file: {match.group(1)[:120]}")
        path = (dist / woff2.group(1)).resolve()
        if not path.is_relative_to(dist.resolve()):
            raise KatexUnavailable(f"a KaTeX font lies outside its package: {woff2.group(1)}")
        try:
            data = base64.b64encode(path.read_bytes()).decode("ascii")
        except OSError as error:
            raise KatexUnavailable(f"cannot read KaTeX font {path.name}: {error.strerror}") from None
        return f'src:url(data:font/woff2;base64,{data}) format("woff2")'

    inlined = _FONT_SRC.sub(inline, css)
    # The page's promise is that nothing is fetched: any URL left but a data: one breaks it.
    if re.search(r"url\((?!data:)", inlined):
        raise KatexUnavailable("KaTeX's stylesheet refers to a file that could not be inlined")
    return inlined


@functools.cache
def _load(root: Path) -> KatexAssets:
    pinned = _pinned_version(root)
    package = root / "node_modules" / "katex"
    try:
        installed = json.loads((package / "package.json").read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError, TypeError):
        raise KatexUnavailable(f"KaTeX {pinned} is not installed ({INSTALL_HINT})") from None
    if installed != pinned:
        raise KatexUnavailable(f"KaTeX {installed} is installed but the lock pins {pinned} ({INSTALL_HINT})")
    dist = package / "dist"
    try:
        script = (dist / "katex.min.js").read_text(encoding="utf-8")
        css = (dist / "katex.min.css").read_text(encoding="utf-8")
        licence = (package / "LICENSE").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise KatexUnavailable(f"KaTeX {pinned} is incomplete ({error}; {INSTALL_HINT})") from None
    # Inlined into <script> and <style> elements: text that could end either early is refused.
    if re.search(r"</(script|style)|<!--", script + css, re.I) or "*/" in licence:
        raise KatexUnavailable("KaTeX's files hold text that cannot be inlined into a page")
    notice = f"/* KaTeX {pinned}, inlined by proctor view.\n{licence.strip()}\n*/\n"
    return KatexAssets(version=pinned, script=notice + script, style=notice + _inline_fonts(css, dist))
