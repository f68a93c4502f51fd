"""One check for "exactly one header per message, from a real sender", shared by the corpus and the properties."""

from __future__ import annotations

import re

try:
    from markdown_it import MarkdownIt
except ImportError:  # pragma: no cover - markdown-it comes with rich; without it, the line check still runs
    MarkdownIt = None

HEADER_LINE = re.compile(r" {0,3}## \[")
REAL_HEADER = re.compile(r"\[(driver|reviewer|carol)→(driver|reviewer|carol)\] \d{4}-\d\d-\d\d \d\d:\d\d UTC")


def headers(text: str) -> list[str]:
    return [line for line in text.splitlines() if HEADER_LINE.match(line)]


def assert_one_header_per_message(text: str, n: int, where: str) -> None:
    """``n`` headers, each a real sender→recipient line, to grep and to a CommonMark renderer alike."""
    got = headers(text)
    assert len(got) == len(re.findall(r"^## \[", text, re.M)) == n, (where, got)
    assert all(REAL_HEADER.match(h[3:]) for h in got), (where, got)
    if MarkdownIt is not None:
        tokens = MarkdownIt("commonmark").parse(text)
        h2 = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag == "h2"]
        assert len(h2) == n and all(REAL_HEADER.fullmatch(h) for h in h2), (where, h2)
        others = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag != "h2"]
        assert not [h for h in others if "boss" in h or "eve" in h.split()], (where, others)
