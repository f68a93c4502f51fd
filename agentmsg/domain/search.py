"""Search rules: what a query means, which records it may match, and how hits rank.

Shared by every backend, so they agree: the query is split into terms
(a ``"quoted phrase"`` is one term, every other word is one), every term
must occur (AND), a phrase's words must be adjacent, matching ignores case
and punctuation (words are runs of letters and digits, as SQLite FTS5's
``unicode61`` tokenizer cuts them).  A backend with an index (the file
store's SQLite FTS5) ranks with BM25; one without (the memory store, or a
Python whose ``sqlite3`` lacks FTS5) uses :func:`scan_score`.  Either way a
match in the subject counts :data:`SUBJECT_WEIGHT` times one in the body,
and ties go to the newer record.

Searched: message subjects and bodies, and log notes.  Nothing refused as
a secret is ever stored, so nothing refused can be found.
"""

from __future__ import annotations

import re
from typing import Any

from agentmsg.domain.values import Message, Value
from agentmsg.errors import UsageError

SUBJECT_WEIGHT = 5.0
LIMIT_DEFAULT = 20
LIMIT_MAX = 1000
#: Record kinds a search can be narrowed to: the message kinds, and log notes.
KINDS = ("request", "update", "note")

_WORD = re.compile(r"[^\W_]+")
_TERM = re.compile(r'"([^"]*)"?|(\S+)')
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?Z?$")


def words(text: str) -> list[str]:
    """Lower-cased words: runs of letters and digits (as ``unicode61 remove_diacritics 0`` cuts them)."""
    return _WORD.findall(text.lower())


def terms(query: str) -> list[tuple[str, ...]]:
    """``'deploy "db migration"'`` -> ``[("deploy",), ("db", "migration")]``; a term without words is dropped."""
    out = []
    for phrase, word in _TERM.findall(query):
        found = tuple(words(phrase if phrase else word))
        if found:
            out.append(found)
    return out


def fts_expression(query_terms: list[tuple[str, ...]]) -> str:
    """An FTS5 MATCH expression: each term a quoted phrase (words only, so nothing to escape), all ANDed."""
    return " AND ".join('"' + " ".join(t) + '"' for t in query_terms)


def date_bound(value: str | None, what: str, *, end: bool) -> str | None:
    """``--since``/``--until`` as a timestamp prefix to compare with record ``ts`` (UTC ISO text).

    A bare date covers that whole day: ``--until 2026-03-01`` includes the 1st.
    """
    if not value:
        return None
    value = value.strip()
    if _DATE.match(value):
        return value + ("T\uffff" if end else "")
    if _STAMP.match(value):
        return value.rstrip("Z") + ("\uffff" if end else "")
    raise UsageError(f"{what} must be a date YYYY-MM-DD or a UTC time YYYY-MM-DDTHH:MM[:SS], got {value[:40]!r}")


class Query(Value):
    """One search request: the terms and the filters (None: any)."""

    __slots__ = ("collab", "kind", "limit", "recipient", "sender", "since", "terms", "text", "until")
    text: str
    terms: list[tuple[str, ...]]
    collab: str | None
    sender: str | None
    recipient: str | None
    kind: str | None
    since: str | None
    until: str | None
    limit: int

    def __init__(self, text: str, *, collab: str | None = None, sender: str | None = None,
                 recipient: str | None = None, kind: str | None = None, since: str | None = None,
                 until: str | None = None, limit: int = LIMIT_DEFAULT) -> None:
        self.text, self.terms = text, terms(text)
        self.collab, self.sender, self.recipient, self.kind = collab, sender, recipient, kind
        self.since = date_bound(since, "--since", end=False)
        self.until = date_bound(until, "--until", end=True)
        self.limit = limit
        if not self.terms:
            raise UsageError("the search query has no words to look for (words are letters and digits)")
        if kind is not None and kind not in KINDS:
            raise UsageError(f"--kind must be one of {', '.join(KINDS)}, got {kind[:40]!r}")
        if not 1 <= limit <= LIMIT_MAX:
            raise UsageError(f"--limit must be between 1 and {LIMIT_MAX}")

    def admits(self, *, collab: str, sender: str, recipient: str | None, kind: str, ts: str) -> bool:
        """The filters, for a backend that checks them itself (the index applies the same ones in SQL)."""
        return ((self.collab is None or collab == self.collab)
                and (self.sender is None or sender == self.sender)
                and (self.recipient is None or recipient == self.recipient)
                and (self.kind is None or kind == self.kind)
                and (self.since is None or ts >= self.since)
                and (self.until is None or ts <= self.until))


class Hit(Value):
    """One match: a message, or a log note (``note`` holds the record), and its score (higher is better)."""

    __slots__ = ("message", "note", "score")
    message: Message | None
    note: dict[str, Any] | None
    score: float

    def __init__(self, score: float, message: Message | None = None, note: dict[str, Any] | None = None) -> None:
        self.score, self.message, self.note = score, message, note

    @property
    def ts(self) -> str:
        return self.message.ts if self.message is not None else str(self.note["ts"])  # type: ignore[index]


def _count(haystack: list[str], term: tuple[str, ...]) -> int:
    n = len(term)
    return sum(1 for i in range(len(haystack) - n + 1) if tuple(haystack[i:i + n]) == term)


def scan_score(query: Query, subject: str, body: str) -> float:
    """0 when some term is missing; else weighted occurrences, damped by the body's length (as BM25 does)."""
    subj, text = words(subject), words(body)
    total = 0.0
    for term in query.terms:
        s, b = _count(subj, term), _count(text, term)
        if not s and not b:
            return 0.0
        total += SUBJECT_WEIGHT * s / (s + 1.0) + b / (b + 1.0 + len(text) / 200.0)
    return round(total, 4)


def rank(hits: list[Hit], limit: int) -> list[Hit]:
    """Best score first, then newest first."""
    return sorted(hits, key=lambda h: (-h.score, _neg(h.ts)))[:limit]


def _neg(ts: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in ts)


def scan(query: Query, messages: list[Message], notes: list[tuple[str, dict[str, Any]]]) -> list[Hit]:
    """Search without an index: every candidate record is scored (the memory store, and the no-FTS5 fallback)."""
    hits = []
    for m in messages:
        if query.admits(collab=m.collab, sender=m.sender, recipient=m.to, kind=m.kind, ts=m.ts):
            score = scan_score(query, m.subject, m.body)
            if score:
                hits.append(Hit(score, message=m))
    for collab, n in notes:
        if query.admits(collab=collab, sender=str(n.get("author")), recipient=None, kind="note", ts=str(n["ts"])):
            score = scan_score(query, "", str(n.get("text", "")))
            if score:
                hits.append(Hit(score, note=dict(n, collab=collab)))
    return rank(hits, query.limit)


def snippet(query: Query, text: str, width: int = 120) -> str:
    """About ``width`` characters of ``text`` around the first match of the first term, on one line."""
    first = query.terms[0]
    pattern = r"[^\w]+".join(re.escape(w) for w in first)
    found = re.search(rf"(?<![^\W_]){pattern}(?![^\W_])", text, re.IGNORECASE)
    start = max(0, found.start() - width // 3) if found else 0
    piece = text[start:start + width]
    flat = " ".join(piece.split())
    return ("…" if start else "") + flat + ("…" if start + width < len(text) else "")


class Found(Value):
    """What a search returns: the ranked hits, and how the backend found them (``index``, ``detail``)."""

    __slots__ = ("detail", "hits", "index")
    hits: list[Hit]
    index: str
    detail: str

    def __init__(self, hits: list[Hit], index: str, detail: str = "") -> None:
        self.hits, self.index, self.detail = hits, index, detail
