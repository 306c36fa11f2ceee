"""The pinned KaTeX as the report inlines it: the lock's version, every font a data: URI, the
licence kept; an install that does not match the lock is refused with the reason."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from proctor.agent.report import latex


@pytest.mark.katex
def test_the_page_inlines_katex_with_every_font_as_data() -> None:
    assets = latex.katex_assets()
    lock = json.loads((latex.KATEX_DIR / "package-lock.json").read_text(encoding="utf-8"))
    pinned = lock["packages"]["node_modules/katex"]
    assert assets.version == pinned["version"] and pinned["integrity"].startswith("sha512-")
    assert (
        len(re.findall(r"url\(data:font/woff2;base64,", assets.style))
        == assets.style.count("@font-face")
        >= 19
    )
    assert not re.search(r"url\((?!data:)", assets.style)
    assert "MIT License" in assets.script and "Khan Academy" in assets.style


def test_a_katex_that_does_not_match_the_lock_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "katex"
    (root / "node_modules" / "katex").mkdir(parents=True)
    (root / "package-lock.json").write_text(
        json.dumps({"packages": {"node_modules/katex": {"version": "0.19.1"}}}), encoding="utf-8"
    )
    (root / "node_modules" / "katex" / "package.json").write_text('{"version": "0.16.0"}', encoding="utf-8")
    assets, reason = latex.katex_status(root)
    assert assets is None
    assert reason == (
        "KaTeX 0.16.0 is installed but the lock pins 0.19.1 (run `npm ci` in agent/report/katex, "
        "as .ci/setup.sh does)"
    )
