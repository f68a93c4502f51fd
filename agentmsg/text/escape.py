"""Make hidden characters visible: one table for transcripts and the boundary.

Control characters, line breaks other than ``\\n``, and every character that
renders as nothing (format characters, Unicode category Cf: zero-width,
bidi, soft hyphen, interlinear annotation, tags; variation selectors;
Hangul fillers; the combining grapheme joiner; the Mongolian free variation
selectors; the rest of the default-ignorable tag/selector block) are what
let peer text fake structure (a second header, a reordered line) or carry a
hidden channel (instructions spelled in tag characters, bits in variation
selectors).  Every renderer shows them as backslash escapes, and
``flags`` names them ``hidden-text``.  Pure, and import-free: it runs on
every prompt.

:func:`escape` is the one function every human-facing view uses (the
terminal output of every command, ``top``, transcripts, the HTML page, the
registry's YAML, error lines): a view that prints peer text calls it, or
:func:`line` (the same, for a one-line field), and nothing else.  It is
idempotent, so a view may also pass a whole composed line through it.
"""

from __future__ import annotations

#: Characters that draw nothing, or nothing of their own (see the module docstring).
INVISIBLE_RANGES = (
    (0xAD, 0xAD), (0x34F, 0x34F), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD), (0x70F, 0x70F),
    (0x890, 0x891), (0x8E2, 0x8E2), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
    (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE01EF),
)
#: The rest of the tag/selector block (unassigned, default-ignorable): escaped by a separate pass
#: (see ``escape``), so the translate table stays small.
PLANE14_IGNORABLE = (0xE01F0, 0xE0FFF)
#: Controls and line breaks other than ``\n``.
CONTROL_RANGES = ((0x00, 0x08), (0x0B, 0x1F), (0x7F, 0x9F), (0x2028, 0x2029))
HIDDEN_RANGES = CONTROL_RANGES + INVISIBLE_RANGES
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
#: All of plane 14's tags and selectors (U+E0000 to U+E0FFF) go to the separate pass: in the table they were
#: two thirds of its entries, and building it costs every process that escapes (the pre-tool hook's refusal,
#: a full prompt hook) for characters real text all but never holds.
_RARE = (0xE0000, PLANE14_IGNORABLE[1])
_LOW_PLANE14 = chr(_RARE[0])


def code(cp: int) -> str:
    """The escape ``unicode_escape`` would write, without loading that codec."""
    if cp in _NAMED:
        return _NAMED[cp]
    if cp < 0x100:
        return f"\\x{cp:02x}"
    return f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def table(*extra: int) -> dict[int, str]:
    """A ``str.translate`` table escaping every hidden character below plane 14 (:func:`escape` takes plane 14
    itself), plus ``extra`` (never printable ASCII, which :func:`escape` returns as it is)."""
    if any(0x20 <= cp < 0x7F for cp in extra):
        raise ValueError("printable ASCII is never escaped")
    cps = [cp for lo, hi in HIDDEN_RANGES if lo < _RARE[0] for cp in range(lo, hi + 1)] + list(extra)
    return {cp: code(cp) for cp in cps}


_TRANSCRIPT: dict[int, str] = {}


def escape(text: str, tab: dict[int, str] | None = None) -> str:
    """``text`` with hidden characters (and lone surrogates) escaped; ``\\n`` kept."""
    if text.isascii() and text.isprintable():  # nothing any table escapes: no table built (C speed)
        return text
    return escaped(text, tab)


def escaped(text: str, tab: dict[int, str] | None = None) -> str:
    """:func:`escape` without its shortcut for printable ASCII (tests hold the two to each other)."""
    if tab is None:
        if not _TRANSCRIPT:
            _TRANSCRIPT.update(table())
        tab = _TRANSCRIPT
    out = text.translate(tab)
    try:
        out.encode("utf-8")
        rare = bool(out) and max(out) >= _LOW_PLANE14  # C speed; plane 14 and up is rare in real text
    except UnicodeEncodeError:  # lone surrogates
        rare = True
    if rare:
        lo, hi = _RARE
        out = "".join(code(ord(c)) if 0xD800 <= ord(c) <= 0xDFFF or lo <= ord(c) <= hi else c for c in out)
    return out


def line(text: str) -> str:
    """``text`` for one line of a view: :func:`escape`, and line breaks and tabs shown as ``\\n``, ``\\t``.

    A field printed with it cannot start a line of its own (a forged header, a fake entry) or push the
    columns around; like :func:`escape` it is idempotent.
    """
    return escape(text).replace("\n", "\\n").replace("\t", "\\t")
