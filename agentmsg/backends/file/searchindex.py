"""The full-text search index: ``ROOT/search.sqlite``, SQLite FTS5 from the standard library.

Derived data, like everything outside the journals: deleting the file
loses nothing.  It is caught up *at search time* from the journals (the
send path never touches it, so sends pay nothing for search): for each
journal (every ``inbox/<alias>.jsonl`` and ``log.jsonl``) the table
``folded`` remembers how far it was read, by end offset and by the offset
and checksum of the last record read, the way the inbox map does.  A
journal that is shorter than that, or whose record there no longer has that
checksum, was rewritten: that collaboration is dropped from the index and
read again from zero.  A file that is missing, damaged, of another schema
version, or not SQLite at all is recreated from the journals.

Hits are re-read from the journals by offset before anyone sees them, and a
hit whose record is not there (a stale index) makes the collaboration be
re-read, so a stale or edited index can cost time, never show text that is
not stored.  When this Python's ``sqlite3`` has no FTS5 the store searches
by reading every record instead (:func:`agentmsg.domain.search.scan`) and
says so.

Not fsynced (``synchronous=OFF``), written only by searches and ``repair``;
concurrent searches serialize on SQLite's own lock.
"""

from __future__ import annotations

import os
import sqlite3

from agentmsg import fsio
from agentmsg.backends.file import layout
from agentmsg.backends.file.inboxmap import record_at
from agentmsg.backends.file.journal import Journal
from agentmsg.domain import kinds, rules
from agentmsg.domain.search import SUBJECT_WEIGHT, Found, Hit, Query, fts_expression, scan
from agentmsg.domain.values import Message

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agentmsg.backends.file.protocols import Root

VERSION = 1
LOG_SOURCE = "log.jsonl"
_SCHEMA = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5("
    "subject, body, collab UNINDEXED, id UNINDEXED, sender UNINDEXED, recipient UNINDEXED, kind UNINDEXED, "
    "ts UNINDEXED, src UNINDEXED, off UNINDEXED, tokenize='unicode61 remove_diacritics 0')",
    "CREATE TABLE IF NOT EXISTS folded(collab TEXT NOT NULL, src TEXT NOT NULL, end_ INTEGER NOT NULL, "
    "last INTEGER NOT NULL, sum TEXT NOT NULL, PRIMARY KEY (collab, src))",
)
_FTS5: list[bool] = []


def fts5_available() -> bool:
    if not _FTS5:
        try:
            conn = sqlite3.connect(":memory:")
            try:
                conn.execute("CREATE VIRTUAL TABLE t USING fts5(a)")
                _FTS5.append(True)
            finally:
                conn.close()
        except sqlite3.Error:
            _FTS5.append(False)
    return _FTS5[0]


def path(store: Root) -> str:
    return os.path.join(store.root, layout.SEARCH)


def _sources(base: str) -> list[tuple[str, str]]:
    """``(source name, journal path)`` of every searchable journal of a collaboration."""
    out = [(LOG_SOURCE, os.path.join(base, layout.LOG))]
    inbox = fsio.existing_dir(base, "inbox")
    if inbox is not None:
        for name in sorted(os.listdir(inbox)):
            if name.endswith(".jsonl") and rules.is_alias(name[:-6]):
                out.append((f"inbox/{name[:-6]}", layout.inbox(base, name[:-6])))
    return out


def _source_path(base: str, src: str) -> str | None:
    """The journal a stored source name stands for: only names this module writes are accepted."""
    if src == LOG_SOURCE:
        return os.path.join(base, layout.LOG)
    if src.startswith("inbox/") and rules.is_alias(src[6:]):
        return layout.inbox(base, src[6:])
    return None


class SearchIndex:
    def __init__(self, store: Root) -> None:
        self.store = store
        self.path = path(store)

    # ---- the file ------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        fsio.ensure_dir(self.store.root)
        fsio.refuse_link(self.path)
        if not os.path.lexists(self.path):
            try:
                os.close(os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0),
                                 0o600))
            except FileExistsError:
                pass
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        try:
            conn.execute("PRAGMA synchronous=OFF")
            if conn.execute("PRAGMA user_version").fetchone()[0] != VERSION:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DROP TABLE IF EXISTS docs")
                conn.execute("DROP TABLE IF EXISTS folded")
                for stmt in _SCHEMA:
                    conn.execute(stmt)
                conn.execute(f"PRAGMA user_version={VERSION}")
                conn.execute("COMMIT")
        except BaseException:
            conn.close()
            raise
        return conn

    def _discard(self) -> None:
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                os.unlink(self.path + suffix)
            except FileNotFoundError:
                pass

    def _with_conn(self, work: Any) -> Any:
        """Run ``work(conn)``; a file SQLite cannot use is deleted and rebuilt from the journals, once."""
        for attempt in (1, 2):
            conn = None
            try:
                conn = self._connect()
                return work(conn)
            except sqlite3.DatabaseError as exc:
                if attempt == 2 or "locked" in str(exc) or "busy" in str(exc):
                    raise
                conn, _ = None, conn.close() if conn is not None else None
                self._discard()
            finally:
                if conn is not None:
                    conn.close()
        raise AssertionError("unreachable")

    # ---- catching up from the journals ------------------------------------------------------

    def _catch_up(self, conn: sqlite3.Connection, collabs: list[str]) -> int:
        """Fold in every record appended since the last search; returns how many were added."""
        added = 0
        conn.execute("BEGIN IMMEDIATE")
        try:
            known = {c for (c,) in conn.execute("SELECT DISTINCT collab FROM folded")}
            for gone in known - set(self.store.collabs()):
                self._forget(conn, gone)
            for collab in collabs:
                added += self._catch_up_collab(conn, collab)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return added

    def _catch_up_collab(self, conn: sqlite3.Connection, collab: str) -> int:
        base = layout.collab_dir(self.store.root, collab)
        if base is None:
            self._forget(conn, collab)
            return 0
        folded = {src: (end, last, summ) for src, end, last, summ in
                  conn.execute("SELECT src, end_, last, sum FROM folded WHERE collab = ?", (collab,))}
        sources = _sources(base)
        if any(not self._still_there(p, *folded[src]) for src, p in sources if src in folded) or \
                set(folded) - {src for src, _p in sources}:
            self._forget(conn, collab)  # a journal was cut or rewritten: read the collaboration again
            folded = {}
        added = 0
        for src, p in sources:
            start = folded[src][0] if src in folded else 0
            if fsio.file_size(p) <= start:
                continue
            rows, end, last, summ = [], start, None, ""
            for pos, rec, stop in Journal(p).entries(start):
                row = _row(collab, src, pos, rec)
                if row is not None:
                    rows.append(row)
                end, last, summ = stop, pos, rec.get("sum", "")
            if last is None:
                continue
            conn.executemany("INSERT INTO docs(subject, body, collab, id, sender, recipient, kind, ts, src, off) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            conn.execute("INSERT OR REPLACE INTO folded(collab, src, end_, last, sum) VALUES (?, ?, ?, ?, ?)",
                         (collab, src, end, last, summ))
            added += len(rows)
        return added

    @staticmethod
    def _still_there(journal: str, end: int, last: int, summ: str) -> bool:
        if fsio.file_size(journal) < end:
            return False
        rec = record_at(Journal(journal), last)
        return rec is not None and rec.get("sum") == summ

    @staticmethod
    def _forget(conn: sqlite3.Connection, collab: str) -> None:
        conn.execute("DELETE FROM docs WHERE collab = ?", (collab,))
        conn.execute("DELETE FROM folded WHERE collab = ?", (collab,))

    # ---- the port's operations ------------------------------------------------------------------

    def reindex(self, collab: str) -> None:
        """Drop one collaboration from the index and read it again from its journals (``repair``)."""
        if not fts5_available():
            return

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            self._forget(conn, collab)
            conn.execute("COMMIT")
            self._catch_up(conn, [collab])

        self._with_conn(work)

    def search(self, query: Query) -> Found:
        if not fts5_available():
            return self._scan(query)
        collabs = [query.collab] if query.collab else self.store.collabs()

        def work(conn: sqlite3.Connection) -> Found:
            added = self._catch_up(conn, collabs)
            hits, stale = self._query(conn, query)
            if stale:  # the index named a record that is not there: re-read those collaborations, once
                conn.execute("BEGIN IMMEDIATE")
                for collab in stale:
                    self._forget(conn, collab)
                conn.execute("COMMIT")
                added += self._catch_up(conn, sorted(stale))
                hits, stale = self._query(conn, query)
            detail = f"{self.path}; {added} new record(s) indexed" if added else self.path
            return Found(hits, "sqlite-fts5", detail)

        found: Found = self._with_conn(work)
        return found

    def _query(self, conn: sqlite3.Connection, query: Query) -> tuple[list[Hit], set[str]]:
        where, args = ["docs MATCH ?"], [fts_expression(query.terms)]
        for column, value in (("collab", query.collab), ("sender", query.sender),
                              ("recipient", query.recipient), ("kind", query.kind)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if query.since is not None:
            where.append("ts >= ?")
            args.append(query.since)
        if query.until is not None:
            where.append("ts <= ?")
            args.append(query.until)
        sql = (f"SELECT collab, src, off, id, bm25(docs, {SUBJECT_WEIGHT}, 1.0) AS r FROM docs "
               f"WHERE {' AND '.join(where)} ORDER BY r, ts DESC LIMIT ?")
        hits, stale = [], set()
        for collab, src, off, rid, r in conn.execute(sql, (*args, query.limit)):
            base = layout.collab_dir(self.store.root, collab)
            journal = _source_path(base, src) if base is not None else None
            rec = record_at(Journal(journal), off) if journal is not None and type(off) is int else None
            if rec is None or rec.get("id") != rid:
                stale.add(collab)
                continue
            score = float(f"{-r:.6g}")
            if src == LOG_SOURCE:
                hits.append(Hit(score, note=dict(rec, collab=collab)))
            else:
                hits.append(Hit(score, message=Message.from_record(rec)))
        return hits, stale

    def _scan(self, query: Query) -> Found:
        store = self.store
        collabs = [query.collab] if query.collab else store.collabs()
        msgs: list[Message] = []
        notes: list[tuple[str, dict[str, Any]]] = []
        for collab in collabs:
            base = layout.collab_dir(store.root, collab)
            if base is None:
                continue
            for src, p in _sources(base):
                for _pos, rec in Journal(p).scan():
                    if src == LOG_SOURCE and rec.get("type") == kinds.NOTE:
                        notes.append((collab, rec))
                    elif src != LOG_SOURCE and rec.get("type") == kinds.MESSAGE:
                        msgs.append(Message.from_record(rec))
        return Found(scan(query, msgs, notes), "scan",
                     "this Python's sqlite3 has no FTS5: every record was read (no index kept)")


def _row(collab: str, src: str, pos: int, rec: dict[str, Any]) -> tuple[Any, ...] | None:
    if src == LOG_SOURCE:
        if rec.get("type") != kinds.NOTE:
            return None
        return ("", str(rec.get("text", "")), collab, rec.get("id"), rec.get("author"), None, "note",
                rec.get("ts"), src, pos)
    if rec.get("type") != kinds.MESSAGE:
        return None
    return (str(rec.get("subject", "")), str(rec.get("body", "")), collab, rec.get("id"), rec.get("sender"),
            rec.get("to"), rec.get("kind"), rec.get("ts"), src, pos)
