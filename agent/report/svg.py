"""A tiny SVG vocabulary: scales, nice ticks, escaped elements. Enough for four plots."""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from html import escape


def attr(value: object) -> str:
    return escape(str(value), quote=True)


# Advance widths in em, rounded up from DejaVu Sans (what system-ui resolves to on Debian, and
# wider than most UI fonts): an estimate that may leave a little space but never too little.
_WIDE_GLYPHS = frozenset("mwMW@%")


def _glyph_em(char: str) -> float:
    if char in _WIDE_GLYPHS or unicodedata.east_asian_width(char) in ("W", "F"):
        return 1.0
    if char.isascii():
        return 0.8 if char.isupper() else 0.64
    return 0.8


def text_width(content: str, font_px: float) -> float:
    """An upper bound on the rendered width of one line of text, in pixels."""
    return font_px * sum(_glyph_em(char) for char in content)


def text(x: float, y: float, content: str, *, anchor: str = "start", css: str = "", extra: str = "") -> str:
    klass = f' class="{attr(css)}"' if css else ""
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{klass}{extra}>'
        f"{escape(content, quote=False)}</text>"
    )


@dataclass(frozen=True)
class LinearScale:
    """Maps a data interval onto a pixel interval (pixels may run backwards, as y does)."""

    domain_low: float
    domain_high: float
    pixel_low: float
    pixel_high: float

    def __call__(self, value: float) -> float:
        span = self.domain_high - self.domain_low
        fraction = 0.0 if span == 0 else (value - self.domain_low) / span
        return self.pixel_low + fraction * (self.pixel_high - self.pixel_low)

    def data_attr(self, name: str) -> str:
        # Written into the SVG so tests (and curious readers) can check where a value lands.
        return (
            f' data-{name}-scale="{self.domain_low:g} {self.domain_high:g} '
            f'{self.pixel_low:.3f} {self.pixel_high:.3f}"'
        )


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high], about ``count`` of them."""
    if high <= low:
        return [low]
    raw_step = (high - low) / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw_step))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw_step)
    first = math.ceil(low / step) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def format_tokens(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def format_seconds(value: float) -> str:
    if value < 1:
        return f"{value * 1000:g} ms"
    return f"{value:g} s"


def open_svg(width: int, height: int, label: str, css: str, extra: str = "") -> str:
    return (
        f'<svg class="plot {attr(css)}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{attr(label)}"{extra}>'
        f"<title>{escape(label, quote=False)}</title>"
    )
