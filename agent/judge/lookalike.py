"""A comparison form of text, for spotting what *looks like* a verdict or a prompt's label.

The judge's verdict itself is parsed strictly (``agent/judge/verdict.py``): it must be exactly
``VERDICT: CORRECT`` in ASCII. This module serves the other direction: deciding whether some
text would *read* as a verdict or as one of the prompt's section labels to a person or a model,
however it is spelled. So it maps text to a skeleton that erases the usual disguises:

* compatibility forms (NFKD): full-width ``ＶＥＲＤＩＣＴ``, mathematical bold letters,
  ligatures, the full-width colon ``：``;
* combining marks, format characters (zero-width spaces and joiners, bidi controls, soft
  hyphens) and control characters other than tab and newline, all deleted: ``VER\\u200bDICT``,
  ``VER\\x1cDICT`` read as ``VERDICT``;
* Cyrillic, Greek and small-capital letters that are drawn like Latin ones (``VΕRDICT`` with a
  Greek Epsilon), mapped to the Latin letter, and colon look-alikes (ratio, modifier colons)
  mapped to ``:``;
* case (``casefold``).

The table is small on purpose: it covers the letters that spell the words we look for and the
usual homoglyph sources, not all of Unicode's confusables. It only ever widens what is flagged.
"""

from __future__ import annotations

import unicodedata

# Letters from other scripts drawn like a Latin letter (upper and lower case separately: Greek
# capital Nu looks like N, its small letter like v).
_LATIN_LOOKALIKES = {
    # Cyrillic
    "А": "a", "а": "a", "В": "b", "в": "b", "Ь": "b", "ь": "b", "С": "c", "с": "c",
    "Ԁ": "d", "ԁ": "d", "Е": "e", "е": "e", "Һ": "h", "һ": "h", "Н": "h", "н": "h",
    "І": "i", "і": "i", "Ӏ": "l", "ӏ": "l", "Ј": "j", "ј": "j", "К": "k", "к": "k",
    "М": "m", "м": "m", "П": "n", "п": "n", "О": "o", "о": "o", "Р": "p", "р": "p",
    "Ԛ": "q", "ԛ": "q", "Г": "r", "г": "r", "Ѕ": "s", "ѕ": "s", "Т": "t", "т": "t",
    "Ѵ": "v", "ѵ": "v", "Ԝ": "w", "ԝ": "w", "Х": "x", "х": "x", "У": "y", "у": "y",
    "Ү": "y", "ү": "y",
    # Greek
    "Α": "a", "α": "a", "Β": "b", "β": "b", "Ϲ": "c", "ϲ": "c", "Ε": "e", "ε": "e",
    "Η": "h", "Ι": "i", "ι": "i", "ϳ": "j", "Κ": "k", "κ": "k", "Μ": "m", "Ν": "n",
    "ν": "v", "Ο": "o", "ο": "o", "σ": "o", "Ρ": "p", "ρ": "p", "Τ": "t", "τ": "t",
    "Υ": "y", "υ": "u", "Χ": "x", "χ": "x", "Ζ": "z",
    # Latin letters without a compatibility decomposition to ASCII
    "ı": "i", "ȷ": "j", "ᴀ": "a", "ʙ": "b", "ᴄ": "c", "ᴅ": "d", "ᴇ": "e", "ɢ": "g",
    "ʜ": "h", "ɪ": "i", "ᴊ": "j", "ᴋ": "k", "ʟ": "l", "ᴍ": "m", "ɴ": "n", "ᴏ": "o",
    "ᴘ": "p", "ʀ": "r", "ꜱ": "s", "ᴛ": "t", "ᴜ": "u", "ᴠ": "v", "ᴡ": "w", "ʏ": "y",
    "ᴢ": "z",
    # Colons that NFKD leaves alone: ratio, modifier letters, Hebrew, Syriac, Mongolian, Lisu.
    "∶": ":", "ː": ":", "˸": ":", "꞉": ":", "׃": ":", "܃": ":", "܄": ":", "᠄": ":",
    "⁚": ":", "ꓽ": ":", "︰": ":",
}  # fmt: skip

_DELETED_CATEGORIES = frozenset({"Mn", "Me", "Cf", "Cc"})
_KEPT_CONTROLS = frozenset("\t\n")
_MAX_CACHED = 50_000


class _Table(dict[int, str | None]):
    """``str.translate`` table, filled lazily: each distinct character is classified once.

    (Filling it for all 1.1 million code points up front takes seconds.)"""

    def __missing__(self, code: int) -> str | None:
        char = chr(code)
        value = (
            None if char not in _KEPT_CONTROLS and unicodedata.category(char) in _DELETED_CATEGORIES else char
        )
        if len(self) < _MAX_CACHED:  # random text must not grow the table to every code point
            self[code] = value
        return value


_TABLE = _Table({ord(k): v for k, v in _LATIN_LOOKALIKES.items()})


_MAX_REPLACES = 32
# ASCII text needs only its control characters deleted and lower case (casefold is lower there);
# translate has a fast path for ASCII text and a plain dict.
_ASCII_CONTROLS = dict.fromkeys([*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F])


def skeleton(text: str) -> str:
    """``text`` with the disguises above erased: compare skeletons, never show them.

    Linear at C speed: the per-character Python work is one classification per *distinct*
    character, and the text itself is only scanned by ``str.replace``, ``casefold`` and at most
    one ``str.translate`` with a small plain dict (with the lazy table as its mapping it took
    seconds on megabytes of non-ASCII text).
    """
    if text.isascii():
        return text.translate(_ASCII_CONTROLS).lower()
    text = unicodedata.normalize("NFKD", text)
    deleted: list[str] = []
    mapped: list[tuple[str, str]] = []
    for char in set(text):
        value = _TABLE[ord(char)]
        if value is None:
            deleted.append(char)
        elif value != char:
            mapped.append((char, value))
    # str.replace (a memchr scan) per character for a few; translate with a plain dict of just
    # these characters for many (thousands of format and combining characters).
    if len(deleted) > _MAX_REPLACES:
        text = text.translate(dict.fromkeys(map(ord, deleted)))
    else:
        for char in deleted:
            text = text.replace(char, "")
    for char, value in mapped:
        text = text.replace(char, value)
    return text.casefold()
