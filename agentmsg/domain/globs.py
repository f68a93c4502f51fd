"""The glob rule of claims (docs/CLAIMS.md): gitignore-style patterns, anchored at the repository's root.

* a pattern is ``/``-separated and relative to the root;
* ``*`` matches any run of characters within one path segment, ``?`` one character, ``[abc]``/``[a-z]``/
  ``[!a]`` one character of a class, ``\\x`` the character ``x`` itself;
* a segment that is exactly ``**`` matches zero or more whole segments;
* a pattern that matches a directory covers everything beneath it (``src`` covers ``src/retry.py``).

Its own module, importing nothing, because the pre-tool hook (hooks/pretool.py) runs before every edit and
needs only :func:`covers`; the rest of domain/claims.py (the claim value, the fold) is not on that path.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Token = tuple[str, Any]  # ("c", char) | ("?", None) | ("*", None) | ("[", (negated, chars, ranges))


def escape(path: str) -> str:
    """A literal path as a pattern that matches only it."""
    return "".join("\\" + c if c in "*?[\\" else c for c in path)


def _tokens(segment: str) -> list[Token]:
    out: list[Token] = []
    i, n = 0, len(segment)
    while i < n:
        c = segment[i]
        if c == "\\" and i + 1 < n:
            out.append(("c", segment[i + 1]))
            i += 2
            continue
        if c == "*":
            if not (out and out[-1][0] == "*"):
                out.append(("*", None))
        elif c == "?":
            out.append(("?", None))
        elif c == "[":
            end = segment.find("]", i + 2)
            if end < 0:
                out.append(("c", c))
            else:
                body = segment[i + 1:end]
                neg = body[:1] in ("!", "^")
                body = body[1:] if neg else body
                chars, ranges, j = set(), [], 0
                while j < len(body):
                    if j + 2 < len(body) and body[j + 1] == "-":
                        ranges.append((body[j], body[j + 2]))
                        j += 3
                    else:
                        chars.add(body[j])
                        j += 1
                out.append(("[", (neg, frozenset(chars), tuple(ranges))))
                i = end + 1
                continue
        else:
            out.append(("c", c))
        i += 1
    return out


def _in_class(cls: tuple[bool, frozenset[str], tuple[tuple[str, str], ...]], ch: str) -> bool:
    neg, chars, ranges = cls
    hit = ch in chars or any(a <= ch <= b for a, b in ranges)
    return hit != neg


def _one_char(a: Token, b: Token) -> bool:
    """Could one character match both single-character tokens?  Unsure (two classes): yes."""
    if a[0] == "?" or b[0] == "?":
        return True
    if a[0] == "c" and b[0] == "c":
        return bool(a[1] == b[1])
    if a[0] == "c":
        return _in_class(b[1], a[1])
    if b[0] == "c":
        return _in_class(a[1], b[1])
    na, ca, ra = a[1]
    nb, cb, rb = b[1]
    if na or nb:
        return True
    if ca & cb or any(_in_class(b[1], c) for c in ca) or any(_in_class(a[1], c) for c in cb):
        return True
    return any(x1 <= y2 and y1 <= x2 for x1, x2 in ra for y1, y2 in rb)


def _segments_meet(p: list[Token], q: list[Token]) -> bool:
    """Does some string (one segment) match both token lists?"""
    memo: dict[tuple[int, int], bool] = {}

    def go(i: int, j: int) -> bool:
        key = (i, j)
        if key in memo:
            return memo[key]
        memo[key] = False
        if i == len(p) and j == len(q):
            res = True
        elif i < len(p) and p[i][0] == "*":
            res = go(i + 1, j) or (j < len(q) and go(i, j + 1))
        elif j < len(q) and q[j][0] == "*":
            res = go(i, j + 1) or (i < len(p) and go(i + 1, j))
        elif i < len(p) and j < len(q):
            res = _one_char(p[i], q[j]) and go(i + 1, j + 1)
        else:
            res = False
        memo[key] = res
        return res

    return go(0, 0)


def _split(pattern: str) -> list[str]:
    out: list[str] = []
    for seg in pattern.split("/"):
        if seg == "**" and out and out[-1] == "**":
            continue
        out.append(seg)
    return out


def overlap(a: str, b: str) -> bool:
    """Is some path covered by both patterns (each covers what it matches and everything beneath)?"""
    p = [(s, _tokens(s)) for s in _split(a)]
    q = [(s, _tokens(s)) for s in _split(b)]
    memo: dict[tuple[int, int], bool] = {}

    def go(i: int, j: int) -> bool:
        key = (i, j)
        if key in memo:
            return memo[key]
        memo[key] = False
        if i == len(p) or j == len(q):
            res = True  # one matched a directory the other's remainder lies beneath (or both ended)
        elif p[i][0] == "**":
            res = go(i + 1, j) or go(i, j + 1)
        elif q[j][0] == "**":
            res = go(i, j + 1) or go(i + 1, j)
        else:
            res = _segments_meet(p[i][1], q[j][1]) and go(i + 1, j + 1)
        memo[key] = res
        return res

    return go(0, 0)


def covers(pattern: str, path: str) -> bool:
    """Does ``pattern`` cover the literal ``path`` (or a path beneath it, or a directory it names)?"""
    return overlap(pattern, escape(path))
