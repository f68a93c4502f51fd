"""Make hidden characters visible: one table for transcripts and the boundary.

Control characters, line breaks other than ``\\n``, invisible and bidi
characters and Unicode tag characters are what let peer text fake structure
(a second header, a reordered line, a hidden instruction).  Both renderers
show them as backslash escapes.  Pure, and import-free: it runs on every
prompt.
"""

from __future__ import annotations

HIDDEN_RANGES = (
    (0x00, 0x08), (0x0B, 0x1F), (0x7F, 0x9F), (0xAD, 0xAD), (0x61C, 0x61C), (0x180E, 0x180E),
    (0x200B, 0x200F), (0x2028, 0x202E), (0x2060, 0x2069), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB),
    (0xE0000, 0xE007F),
)
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}


def code(cp: int) -> str:
    """The escape ``unicode_escape`` would write, without loading that codec."""
    if cp in _NAMED:
        return _NAMED[cp]
    if cp < 0x100:
        return f"\\x{cp:02x}"
    return f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def table(*extra: int) -> dict[int, str]:
    """A ``str.translate`` table escaping every hidden character, plus ``extra``."""
    cps = [cp for lo, hi in HIDDEN_RANGES for cp in range(lo, hi + 1)] + list(extra)
    return {cp: code(cp) for cp in cps}


_TRANSCRIPT: dict[int, str] = {}


def escape(text: str, tab: dict[int, str] | None = None) -> str:
    """``text`` with hidden characters (and lone surrogates) escaped; ``\\n`` kept."""
    if tab is None:
        if not _TRANSCRIPT:
            _TRANSCRIPT.update(table())
        tab = _TRANSCRIPT
    out = text.translate(tab)
    try:
        out.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        out = "".join(code(ord(c)) if 0xD800 <= ord(c) <= 0xDFFF else c for c in out)
    return out
