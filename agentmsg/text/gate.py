"""Patterns compiled on first use, behind a literal gate.

Why: compiling the secret and injection patterns cost about 13 ms per CLI
process, more than the rest of ``agentmsg send`` above the typer floor,
yet most texts contain none of the literals a pattern needs. A `Gated`
pattern names those literals; when they are absent it is neither compiled
nor run. A gate is sound only if every match holds one of its alternatives
in full: ``tests/text/test_gate.py`` checks each gate against every match the
bare pattern finds on the corpora and on random text, and that gated and
ungated scans agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

__all__ = ["Gated", "Lazy", "fold"]

# Characters outside ASCII that re.IGNORECASE matches to an ASCII letter,
# mapped to that letter (str.lower() handles the rest: U+0130 alone lowers
# to two characters). tests/text/test_gate.py checks this against every code point.
_ODD_CASE = {0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"}


def fold(text: str) -> str:
    """Text in which a case-insensitive pattern's ASCII literals appear in lower case."""
    return text.lower() if text.isascii() else text.translate(_ODD_CASE).lower()


class Lazy:
    """A pattern compiled on its first use, with the `re.Pattern` methods the scanners call."""

    __slots__ = ("_compiled", "flags", "source")

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source, self.flags = source, flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.source, self.flags)
        return self._compiled

    def match(self, text: str) -> re.Match[str] | None:
        return self.pattern.match(text)

    def fullmatch(self, text: str) -> re.Match[str] | None:
        return self.pattern.fullmatch(text)

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self.pattern.search(text, pos)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.pattern.finditer(text)

    def findall(self, text: str) -> list[Any]:
        return self.pattern.findall(text)

    def split(self, text: str) -> list[Any]:
        return self.pattern.split(text)

    def sub(self, repl: str, text: str) -> str:
        return self.pattern.sub(repl, text)


class Gated(Lazy):
    """One pattern source, its flags and its gate; compiled on first `pattern` access.

    `gate` is a tuple of alternatives; an alternative is a tuple of clauses,
    each ``"a|b|c"``: the text may match only if, for some alternative,
    every clause has one of its literals in it. An empty gate always
    passes. With `folded`, literals are lower case and are looked up in
    `fold(text)` (for a case-insensitive pattern). `nonascii`: the pattern
    matches only characters outside ASCII.
    """

    __slots__ = ("folded", "gate", "nonascii")

    def __init__(
        self,
        source: str,
        flags: int = 0,
        *,
        gate: tuple[tuple[str, ...], ...] = (),
        folded: bool = False,
        nonascii: bool = False,
    ) -> None:
        super().__init__(source, flags)
        self.folded, self.nonascii = folded, nonascii
        self.gate = tuple(tuple(tuple(clause.split("|")) for clause in alt) for alt in gate)
        if any("" in clause for alt in self.gate for clause in alt):
            raise ValueError(f"empty literal in gate {gate!r}")  # "" is in every text: no gate at all

    def may_match(self, text: str, folded: str) -> bool:
        """False only when no match is possible (`folded` is `fold(text)`)."""
        if self.nonascii:
            return not text.isascii()
        hay = folded if self.folded else text
        return not self.gate or any(all(any(lit in hay for lit in clause) for clause in alt) for alt in self.gate)
