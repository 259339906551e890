"""Names as the rules should read them: look-alike letters folded to Latin, invisible characters dropped.

A button labelled "Sеnd" with a Cyrillic е looks exactly like "Send" to the user; the risk rules must see it so.
"""

from __future__ import annotations

import unicodedata

# Cyrillic and Greek letters that are drawn like Latin ones (the common confusables, not the full Unicode table).
_LOOKALIKES = str.maketrans({
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t",
    "у": "y", "х": "x", "ѕ": "s", "і": "i", "ї": "i", "ј": "j", "ԁ": "d", "ԛ": "q", "ԝ": "w", "һ": "h", "ɡ": "g",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "Х": "X",
    "Ѕ": "S", "І": "I", "Ј": "J", "Ԛ": "Q", "Ԝ": "W",
    "α": "a", "ο": "o", "ν": "v", "ρ": "p", "τ": "t", "υ": "u", "ι": "i", "κ": "k", "ε": "e",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O", "Ρ": "P",
    "Τ": "T", "Υ": "Y", "Χ": "X",
})
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b\u200c\u200d\u200e"
                                    "\u200f\u2060\u2061\u2062\u2063\u2064\ufeff"))


def plain(text: str) -> str:
    """NFKC (fullwidth and styled letters), invisible characters removed, look-alikes folded to Latin."""
    return unicodedata.normalize("NFKC", text).translate(_INVISIBLE).translate(_LOOKALIKES)
