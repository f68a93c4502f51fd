"""``PgStore``: the port on PostgreSQL.  It stores and loads; it decides nothing.

Every journal of the file store is a *stream* of rows in one append-only
table (``events``, ``notes``, ``delivery``, ``inbox/<alias>``,
``receipts/<alias>``), each row the sealed record as canonical JSON, sealed
exactly as the file store seals it (``records.seal_next``, ``cseq``,
``ackn``), so a replica copies rows verbatim and ``verify`` checks the same
chains.  A write transaction locks its collaboration's row
(``SELECT ... FOR NO KEY UPDATE``): one writer per collaboration, gap-free
sequences.  A send that finds the row locked stages its request, and the
next holder applies every staged request of its role in one transaction
(``combine``; docs/POSTGRES.md, "Many writers, one collaboration").  Reads
run in a snapshot without the lock.  ``wait`` and
``wait_any`` sleep on LISTEN/NOTIFY (a trigger notifies on insert).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any, TypeVar

import psycopg
import psycopg.errors

from agentmsg import records
from agentmsg.backends.acks import count_acks
from agentmsg.backends.chains import chain_findings
from agentmsg.backends.postgres import schema
from agentmsg.backends.reads import TxnReads
from agentmsg.domain import kinds, rules, search
from agentmsg.domain.search import Found, Query
from agentmsg.domain.values import Message, Page, Registry
from agentmsg.errors import IdentityError, NotFound, StoreFailed, StoreUnreachable, TamperDetected, UsageError

Record = dict[str, Any]
T = TypeVar("T")

EVENTS, NOTES, DELIVERY = "events", "notes", "delivery"


def inbox(alias: str) -> str:
    return f"inbox/{alias}"


def receipts_of(alias: str) -> str:
    return f"receipts/{alias}"


def channel(collab: str) -> str:
    """The LISTEN/NOTIFY channel of a collaboration (what the insert trigger notifies)."""
    return "agentmsg_" + collab.replace("-", "")


def safe_location(url: str) -> str:
    """The URL with any password left out: for ``status``, ``doctor`` and error lines."""
    try:
        parts = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "postgresql://(unparsable URL)"
    parts.pop("password", None)
    return " ".join(f"{k}={v}" for k, v in sorted(parts.items()))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


@contextmanager
def db_errors(what: str) -> Iterator[None]:
    """Driver errors as the project's one-line errors, each with its exit code."""
    try:
        yield
    except psycopg.errors.InsufficientPrivilege as exc:
        raise IdentityError(f"the server refused to {what}: {_first_line(exc)}") from None
    except psycopg.OperationalError as exc:
        raise StoreUnreachable(f"{what}: {_first_line(exc)}; nothing was stored") from None
    except psycopg.Error as exc:
        raise StoreFailed(f"{what}: {_first_line(exc)}") from None


def _columns(stream: str, rec: Record) -> tuple[Any, ...]:
    """The lookup columns copied out of a record: (rtype, mid, ref, kind, priority, bcast, sender).

    ``sender`` is a message's sender alias, or the alias an event is about:
    what the server's row-level security checks against the acting role.
    """
    if stream.startswith("inbox/"):
        return (rec.get("type"), rec.get("id"), None, rec.get("kind"), rec.get("priority"), rec.get("broadcast"),
                rec.get("sender"))
    if stream == EVENTS:
        alias = rec.get("alias")
        return (rec.get("type"), None, None, None, None, None, alias if isinstance(alias, str) else None)
    ref = rec.get("message") if stream.startswith("receipts/") else None
    return (rec.get("type"), None, ref if isinstance(ref, str) else None, None, None, None, None)


#: What a reader selects: the row's own columns before the record, so it can check one against the other.
_ROW = "stream, seq, rtype, mid, ref, kind, priority, bcast, sender, body"


def row_problem(collab: str, row: tuple[Any, ...]) -> tuple[Record | None, str | None]:
    """The record of a ``_ROW`` row, and what is wrong with it (None when the record agrees with its row).

    The server (schema 3) refuses a row whose record disagrees with it; a
    reader checks again, so a row stored before that, or by a server
    without it, is never trusted on its columns alone.
    """
    stream, seq, *cols, body = row
    try:
        rec = records.loads(body)
    except ValueError:
        return None, "the record does not parse"
    if not isinstance(rec, dict):
        return None, "the record is not a JSON object"
    if rec.get("seq") != seq:
        return rec, f"the record's seq is {rec.get('seq')!r}"
    if tuple(cols) != _columns(stream, rec):
        return rec, "the record disagrees with its row's columns (type, id, sender, kind, priority or reference)"
    if "collab" in rec and rec["collab"] != collab:
        return rec, "the record names another collaboration"
    if stream.startswith("inbox/") and (rec.get("to") != stream[len("inbox/"):] or rec.get("type") != kinds.MESSAGE):
        return rec, "the record is not a message to this inbox"
    return rec, None


def trusted(collab: str, row: tuple[Any, ...]) -> Record:
    """The record of a ``_ROW`` row, or TamperDetected (exit 13) when it disagrees with its row."""
    rec, problem = row_problem(collab, row)
    if problem is not None or rec is None:
        raise TamperDetected(f"postgresql:{collab}/{row[0]} record {row[1]}: {problem}; it is not shown "
                             "(`agentmsg verify` lists every such record)")
    return rec


_INSERT = ("INSERT INTO agentmsg_records (collab, stream, seq, body, rtype, mid, ref, kind, priority, bcast, sender) "
           "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)")
_INSERT_ORDERED = "WITH o AS (UPDATE agentmsg_collabs SET cseq = greatest(cseq, %s) WHERE id = %s) " + _INSERT

#: The collaboration's order counter, how many events it has (the registry, replayed from the events, is
#: kept per store and reused while that count is unchanged), and whether requests of this role are staged
#: there (``combine``); no row for a collaboration this role is not in (migration 010).
_LOOK = "SELECT * FROM agentmsg_look(%s)"

#: Whoever locks a collaboration's row also holds its *turn*, an advisory transaction lock, taken after the
#: row (never before: no lock-order cycle); a writer whose request is staged waits for the turn in shared
#: mode, so it wakes when the holder's transaction ends without queueing on the row (docs/POSTGRES.md).
_TURN = "SELECT pg_advisory_xact_lock(1634168179, hashtext(%s))"  # ('agms', the collaboration)
#: The row locked without waiting (no row: locked by another, or no such collaboration), then the turn.
#: MATERIALIZED: the row is locked before the outer projection takes the turn; the statement never
#: waits, so its snapshot is the one after the lock.
_LOCK_NOW = ("WITH l AS MATERIALIZED (SELECT c.id FROM agentmsg_collabs c WHERE c.id = %s "
             "FOR NO KEY UPDATE OF c SKIP LOCKED) "
             "SELECT look.*, pg_advisory_xact_lock(1634168179, hashtext(l.id::text)) IS NULL "
             "FROM l, agentmsg_look(l.id) look")
#: Waiting for the row: this statement's snapshot predates the wait, so the collaboration is read again after.
_LOCK_WAIT = "SELECT 1 FROM agentmsg_collabs c WHERE c.id = %s FOR NO KEY UPDATE OF c"
#: ``combine``: the lock now, or the request staged (migration 010); then waiting for either answer.
_LOCK_OR_STAGE = "SELECT * FROM agentmsg_lock_or_stage(%s, %s)"
_AWAIT = "SELECT * FROM agentmsg_await(%s, %s)"
#: Holding the lock: this writer's own staged request taken out (with its outcome, if a holder before it
#: answered it), every other pending request of this role, oldest first, and the requests of sessions
#: that are gone (a writer that died, a server restarted since) removed unanswered: they are never applied.
_PENDING = ("WITH gone AS (DELETE FROM agentmsg_staged s WHERE s.collab = %s AND s.role = session_user "
            "AND (s.id = %s OR pg_try_advisory_xact_lock(1634168180, agentmsg_staged_key(s.id))) "
            "RETURNING s.id, s.request, s.outcome) "
            "SELECT id, request, outcome FROM gone WHERE id = %s UNION ALL "
            "SELECT s.id, s.request, s.outcome FROM agentmsg_staged s WHERE s.collab = %s "
            "AND s.role = session_user AND s.outcome IS NULL AND s.id NOT IN (SELECT id FROM gone) ORDER BY 1")
#: This writer's own staged request answered by itself: the session lock it held while waiting let go.
_UNSTAGED = "SELECT pg_advisory_unlock(1634168180, agentmsg_staged_key(%s))"
_ANSWER = ("UPDATE agentmsg_staged s SET outcome = v.outcome FROM unnest(%s::bigint[], %s::text[]) v(id, outcome) "
           "WHERE s.id = v.id")

_UNACKED = ("SELECT m.seq, m.kind, m.priority, m.mid FROM agentmsg_records m WHERE m.collab = %s AND m.stream = %s "
            "AND NOT EXISTS (SELECT 1 FROM agentmsg_records a WHERE a.collab = m.collab AND a.stream = %s "
            "AND a.ref = m.mid AND a.rtype = 'ack') ORDER BY m.seq")


class PgStore(TxnReads):
    """One PostgreSQL database; one connection per thread, opened on first use."""

    kind = "postgresql"

    def __init__(self, url: str, *, connect_timeout: int = 10) -> None:
        self.url = url
        self.connect_timeout = connect_timeout
        self._local = threading.local()
        self._registries: dict[str, tuple[int, Registry]] = {}

    # ---- connections ------------------------------------------------------------------

    def connect(self, *, checked: bool = True) -> psycopg.Connection[Any]:
        """A new autocommit connection (its own: LISTEN, migrations); the schema checked unless told not to."""
        with db_errors(f"connect to {safe_location(self.url)}"):
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=self.connect_timeout)
        if checked:
            try:
                with db_errors("read the schema version"):
                    schema.check(conn)
            except BaseException:
                conn.close()
                raise
        return conn

    def conn(self) -> psycopg.Connection[Any]:
        """This thread's connection; a broken one is replaced (the server restarted)."""
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                conn.close()
            conn = self.connect()
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def retrying(self, what: str, step: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``step`` on this thread's connection; once more on a new one if the server had dropped the old.

        Only for a first step, before anything is sent in a transaction: a
        server restart since the last command then costs nothing, and a
        server that is down is still a loud failure.
        """
        for attempt in (0, 1):
            conn = self.conn()
            try:
                with db_errors(what):
                    return step(conn)
            except StoreUnreachable:
                if attempt or not conn.broken:
                    raise
                self.close()
        raise AssertionError("unreachable")

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.retrying("read from the store", lambda conn: conn.execute(sql, params).fetchall())

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"store": "postgresql", "location": safe_location(self.url)}
        try:
            conn = self.connect(checked=False)
        except StoreUnreachable as exc:
            return dict(out, reachable=False, problem=str(exc))
        try:
            with db_errors("read the schema version"):
                version = schema.current_version(conn)
                user = conn.execute("SELECT session_user").fetchone()
        except (StoreUnreachable, StoreFailed) as exc:
            return dict(out, reachable=False, problem=str(exc))
        finally:
            conn.close()
        return dict(out, reachable=True, schema=version, schema_known=schema.known_version(),
                    role=user[0] if user else None)

    # ---- collaborations ---------------------------------------------------------------

    def collabs(self) -> list[str]:
        rows = self.query("SELECT c.id::text FROM agentmsg_collabs c WHERE EXISTS (SELECT 1 FROM agentmsg_records r "
                          "WHERE r.collab = c.id AND r.stream = 'events' AND r.seq = 1) ORDER BY 1")
        return [r[0] for r in rows]

    def transaction(self, collab: str) -> PgTxn:
        return PgTxn(self, collab)

    def create(self, collab: str) -> PgTxn:
        return PgTxn(self, collab, fresh=True)

    def reading(self, collab: str) -> PgTxn:
        return PgTxn(self, collab, lock=False)

    # ---- reads ------------------------------------------------------------------------

    def events(self, collab: str) -> list[Record]:
        with self.reading(collab) as tx:
            return tx.events()

    def find_message(self, message_id: str) -> Message | None:
        rows = self.query(f"SELECT collab::text, {_ROW} FROM agentmsg_records WHERE mid = %s ORDER BY collab LIMIT 1",
                          (message_id,))
        return Message.from_record(trusted(rows[0][0], rows[0][1:])) if rows else None

    def history(self, collab: str, alias: str) -> Iterator[Message]:
        with self.reading(collab) as tx:
            found = tx.since(alias, 0)
        yield from found

    def last_seq(self, collab: str, alias: str) -> int:
        with self.reading(collab) as tx:
            return tx.total(alias)

    def wait(self, collab: str, alias: str, seq: int, timeout: float, *, poll: float = 0.2) -> bool:
        """Until a message after ``seq`` arrives for ``alias`` (True) or ``timeout`` passes: LISTEN, no polling."""
        deadline = time.monotonic() + timeout
        conn = self.connect()
        try:
            with db_errors("wait for a message"):
                conn.execute(f'LISTEN "{channel(collab)}"')
                while self.last_seq(collab, alias) <= seq:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    for _note in conn.notifies(timeout=left, stop_after=1):
                        pass
            return True
        finally:
            conn.close()

    def receipts(self, collab: str, alias: str) -> list[Record]:
        with self.reading(collab) as tx:
            return tx.stream(receipts_of(tx.alias(alias)))

    def notes(self, collab: str) -> list[Record]:
        with self.reading(collab) as tx:
            return tx.notes()

    def delivery_records(self, collab: str) -> list[Record]:
        with self.reading(collab) as tx:
            return tx.delivery_records()

    def bindings(self, pin: str) -> list[tuple[str, str]]:
        """Active (collab, alias) bindings of a pin: the registry of each collaboration an event gave it to."""
        named = self.query("SELECT DISTINCT collab::text FROM agentmsg_records WHERE stream = 'events' "
                           "AND rtype IN ('opened', 'joined', 'succeeded') AND body::jsonb ->> 'pin' = %s "
                           "ORDER BY 1", (pin,))
        return self.bound_in([collab for (collab,) in named], pin)

    def search(self, query: Query) -> Found:
        """A scan of the messages and notes this role may read: no index to keep."""
        msgs: list[Message] = []
        notes: list[tuple[str, Record]] = []
        for cid in [query.collab] if query.collab else self.collabs():
            with self.reading(cid) as tx:
                for stream in tx.streams():
                    if stream.startswith("inbox/"):
                        msgs += [Message.from_record(r) for r in tx.stream(stream)]
                notes += [(cid, n) for n in tx.notes() if n.get("type") == kinds.NOTE]
        return Found(search.scan(query, msgs, notes), "scan", "postgresql store: every record was read")

    # ---- derived data and checks ------------------------------------------------------

    def rebuild(self, collab: str) -> list[str]:
        with self.reading(collab):
            return []  # nothing derived is kept apart from the records

    def verify(self, collab: str | None) -> tuple[int, list[Record]]:
        findings: list[Record] = []
        count = 0
        for cid in [collab] if collab else self.collabs():
            with self.reading(cid) as tx:
                for stream in tx.streams():
                    count += 1
                    recs, disagree = tx.checked_stream(stream)
                    findings += disagree + chain_findings(f"postgresql:{cid}/{stream}", recs)
        return count, findings

    def clean_temp(self, older_than: float = 3600.0) -> int:
        return 0

    # ---- replication (ports.Replica) ----------------------------------------------------

    def streams(self, collab: str) -> dict[str, int]:
        with self.reading(collab) as tx:
            return tx.streams()

    def records_since(self, collab: str, stream: str, seq: int, limit: int = 1000) -> list[Record]:
        with self.reading(collab) as tx:
            return tx.stream(stream, after=seq, limit=limit)

    def wait_any(self, collabs: Collection[str], timeout: float) -> bool:
        """True as soon as any of ``collabs`` gets a record, False after ``timeout``: LISTEN/NOTIFY.

        The listening connection is kept from one call to the next (the mirror calls this in a loop), so a
        record committed between a catch-up and the next wait is still announced: nothing is missed.  A
        broken connection (the server restarted) is dropped and the next call listens afresh.
        """
        conn: psycopg.Connection[Any] | None = getattr(self, "_listener", None)
        if conn is None or conn.closed or conn.broken:
            conn = self.connect()
            self._listener: psycopg.Connection[Any] | None = conn
            self._listening: set[str] = set()
        try:
            with db_errors("wait for a change"):
                for cid in set(collabs) - self._listening:
                    conn.execute(f'LISTEN "{channel(cid)}"')
                    self._listening.add(cid)
                return any(True for _n in conn.notifies(timeout=max(0.0, timeout), stop_after=1))
        except BaseException:
            conn.close()
            self._listener = None
            raise

    def report_presence(self, collab: str, alias: str, fields: Record) -> None:
        """One row per alias, replaced; the server stamps the time and the role and lets only the alias's
        holder write it (migration 007)."""
        quiet = fields.get("quiet")
        params = (collab, alias, str(fields.get("pin", "")), str(fields.get("state", "")),
                  float(quiet) if isinstance(quiet, (int, float)) else None)
        self.retrying(f"report {alias}'s presence", lambda conn: conn.execute(
            "INSERT INTO agentmsg_presence (collab, alias, pin, state, quiet) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (collab, alias) DO UPDATE SET pin = EXCLUDED.pin, state = EXCLUDED.state, "
            "quiet = EXCLUDED.quiet", params))

    def presence(self, collab: str) -> dict[str, Record]:
        rows = self.query("SELECT alias, pin, state, quiet, extract(epoch FROM now() - reported_at)::float8 "
                          "FROM agentmsg_presence WHERE collab = %s", (collab,))
        return {a: {"pin": pin, "state": state, "quiet": quiet, "age": max(0.0, float(age))}
                for a, pin, state, quiet, age in rows}

    def grant(self, collab: str, role: str) -> bool:
        """Let ``role`` into ``collab`` (a member's act; the server checks it); False if it was already in."""
        with self.transaction(collab) as tx, db_errors(f"let {role} into {collab}"):
            cur = tx.conn.execute("INSERT INTO agentmsg_members (collab, role) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                                  (collab, role))
            return cur.rowcount == 1

    def copy_in(self, collab: str, streams: dict[str, list[Record]]) -> int:
        """Store sealed records verbatim (a move, a replica): one transaction; returns how many."""
        with self.create(collab) as tx:
            if tx.streams():
                raise UsageError(f"collaboration {collab} already has records in {safe_location(self.url)}")
            return tx.copy(streams)

    # ---- many writers, one collaboration (ports.Combining) --------------------------------

    def combine(self, collab: str, request: str, apply: Callable[[Any, str], str],
                refused: Callable[[Exception], str]) -> str:
        """``apply(tx, request)`` under the collaboration's lock; its outcome, durable (docs/POSTGRES.md).

        The lock free: this writer takes it, applies the requests staged by its role's other writers and
        its own, and commits them together.  The lock held: the request is staged, and the writer waits
        for the holder's turn to end (the holder may have applied it) or takes the lock itself.
        """
        with PgTxn(self, collab, request=request) as tx:
            if tx.locked:
                return tx.sequence(None, request, apply, refused)
            staged, conn = tx.staged, tx.conn
        try:
            with PgTxn(self, collab, awaiting=staged, on=conn) as tx:
                if tx.answer is not None:
                    return tx.answer
                return tx.sequence(staged, None, apply, refused)
        except BaseException:
            if not (conn.broken or conn.closed):  # the wait was interrupted: this session waits no more
                with suppress(psycopg.Error):
                    conn.execute(_UNSTAGED, (staged,))
            raise


class PgTxn:
    """One collaboration: its row locked (a writer) or a snapshot (a reader), in one database transaction."""

    def __init__(self, store: PgStore, collab: str, *, fresh: bool = False, lock: bool = True,
                 request: str | None = None, awaiting: int | None = None,
                 on: psycopg.Connection[Any] | None = None) -> None:
        """``request``: take the lock if it is free, else stage the request (``staged``, committed with this
        transaction); ``awaiting``: wait for the staged request's ``answer``, or for the lock (``combine``)."""
        self.store, self.collab, self.fresh, self.lock = store, collab, fresh, lock
        self.request, self.awaiting, self.on = request, awaiting, on
        self.locked = False
        self.staged = 0
        self.answer: str | None = None
        self._pending = False  # requests of this role are staged here (``combine``)
        self._tails: dict[str, Record | None] = {}
        self._registry: Registry | None = None
        self._cseq = 0
        self._events_seq = 0
        self._durable = True  # what this transaction's commit waits for
        self._wrote = False
        self._pending_broadcasts: dict[str, list[str]] = {}
        self._order_later = False  # a batch (``sequence``) moves the order counter once, at its end
        self._order_to = 0

    def __enter__(self) -> PgTxn:
        first = self._first()

        def begin(conn: psycopg.Connection[Any]) -> tuple[psycopg.Connection[Any], AbstractContextManager[Any],
                                                           Any]:
            # BEGIN and the first statements in one round trip (a pipeline): nothing is committed before
            # they answer, so a server that dropped the connection costs a retry, never a half-done step
            with conn.pipeline():
                tx = conn.transaction()
                tx.__enter__()
                cur = None
                for sql, params in first:
                    cur = conn.execute(sql, params)
            return conn, tx, cur

        if self.on is None:
            self.conn, self._tx, cur = self.store.retrying("begin a transaction", begin)
        elif self.on.closed or self.on.broken or self.on is not self.store.conn():
            # the session that staged the request is gone, and its request with it (docs/POSTGRES.md)
            raise StoreUnreachable("the connection to the server was lost while the send waited for its turn; "
                                   "a retry with the same id stores it once")
        else:
            with db_errors("wait for the collaboration"):
                self.conn, self._tx, cur = begin(self.on)
        try:
            with db_errors("lock the collaboration"):
                row = self._lock(cur)
            if row is None:
                raise NotFound(f"no collaboration {self.collab} in {safe_location(self.store.url)}")
        except BaseException as exc:
            self._abort(exc)
            raise
        if row[0] is not None:
            self.locked = self.lock
            self._cseq, self._events_seq, self._pending = int(row[0]), int(row[1]), bool(row[2])
        return self

    def _first(self) -> list[tuple[str, tuple[Any, ...]]]:
        """The statements sent with BEGIN, when what follows them does not depend on their answers."""
        if not self.lock:
            return [("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY", ()), (_LOOK, (self.collab,))]
        if self.request is not None:
            return [(_LOCK_OR_STAGE, (self.collab, self.request))]
        if self.awaiting is not None:
            return [(_AWAIT, (self.collab, self.awaiting))]
        return []

    def _lock(self, cur: Any) -> tuple[Any, ...] | None:
        """(cseq, events, pending) of the collaboration, its lock taken for a writer; (None, ...) when
        ``combine`` staged its request or got its answer instead; None: no such collaboration.  ``cur``:
        the answer of the ``_first`` statements."""
        conn = self.conn
        if not self.lock:
            return cur.fetchone()  # type: ignore[no-any-return]
        if self.request is not None:
            row = cur.fetchone()
            if row is not None and row[3] is not None:
                self.staged = int(row[3])
            return row  # type: ignore[no-any-return]
        if self.awaiting is not None:
            got = cur.fetchone()
            if got is None:
                raise StoreFailed("wait for the collaboration: the server answered nothing")
            self.answer = None if got[0] is None else str(got[0])
            return tuple(got[1:])
        if self.fresh:
            conn.execute("INSERT INTO agentmsg_collabs (id) VALUES (%s) ON CONFLICT DO NOTHING", (self.collab,))
        row = conn.execute(_LOCK_NOW, (self.collab,)).fetchone()
        if row is None and conn.execute(_LOCK_WAIT, (self.collab,)).fetchone() is not None:
            conn.execute(_TURN, (self.collab,))
            row = conn.execute(_LOOK, (self.collab,)).fetchone()
        return row

    def _abort(self, exc: BaseException) -> None:
        try:
            self._tx.__exit__(type(exc), exc, exc.__traceback__)
        except psycopg.Error:
            pass  # the connection went away: nothing was committed

    def __exit__(self, *exc: object) -> None:
        if isinstance(exc[1], BaseException):
            self._abort(exc[1])
            return
        with db_errors("commit"):
            self._tx.__exit__(None, None, None)

    # ---- rows ---------------------------------------------------------------------------

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with db_errors("read from the store"):
            return self.conn.execute(sql, params).fetchall()

    def _records(self, sql: str, params: tuple[Any, ...]) -> list[Record]:
        """The records of a ``SELECT {_ROW} ...``, each checked against its row (``trusted``)."""
        return [trusted(self.collab, r) for r in self._rows(sql, params)]

    def stream(self, stream: str, *, after: int = 0, limit: int | None = None) -> list[Record]:
        sql = f"SELECT {_ROW} FROM agentmsg_records WHERE collab = %s AND stream = %s AND seq > %s ORDER BY seq"
        params: tuple[Any, ...] = (self.collab, stream, after)
        if limit is not None:
            sql, params = sql + " LIMIT %s", (*params, limit)
        return self._records(sql, params)

    def checked_stream(self, stream: str) -> tuple[list[Record], list[Record]]:
        """Every record of ``stream`` (for the chain check), and a ``verify`` finding per record that
        disagrees with its row."""
        rows = self._rows(f"SELECT {_ROW} FROM agentmsg_records WHERE collab = %s AND stream = %s ORDER BY seq",
                          (self.collab, stream))
        recs: list[Record] = []
        findings: list[Record] = []
        for row in rows:
            rec, problem = row_problem(self.collab, row)
            recs.append(rec if rec is not None else {})
            if problem is not None:
                findings.append({"path": f"postgresql:{self.collab}/{stream}", "line": int(row[1]),
                                 "kind": "row-disagrees", "detail": f"record {row[1]}: {problem}", "tampering": True})
        return recs, findings

    def streams(self) -> dict[str, int]:
        rows = self._rows("SELECT stream, max(seq) FROM agentmsg_records WHERE collab = %s GROUP BY stream "
                          "ORDER BY stream", (self.collab,))
        return {r[0]: int(r[1]) for r in rows}

    def _tail(self, stream: str) -> Record | None:
        if stream not in self._tails:
            found = self._records(f"SELECT {_ROW} FROM agentmsg_records WHERE collab = %s AND stream = %s "
                                  "ORDER BY seq DESC LIMIT 1", (self.collab, stream))
            self._tails[stream] = found[0] if found else None
        return self._tails[stream]

    def _insert(self, stream: str, rec: Record) -> None:
        """One statement, one round trip: the record, and the collaboration's order counter when it carries ``cseq``."""
        row = (self.collab, stream, rec["seq"], records.dumps(rec), *_columns(stream, rec))
        cseq = rec.get("cseq")
        with db_errors("store a record"):
            if type(cseq) is int and self._order_later:
                self.conn.execute(_INSERT, row)
                self._order_to = max(self._order_to, cseq)
            elif type(cseq) is int:
                self.conn.execute(_INSERT_ORDERED, (cseq, self.collab, *row))
            else:
                self.conn.execute(_INSERT, row)
        self._tails[stream] = rec

    def _append(self, stream: str, fields: Record, *, durable: bool = True) -> Record:
        """Seal and insert; the commit waits for the WAL flush unless every write in it said ``durable=False``."""
        if durable != self._durable:
            if durable or not self._wrote:
                with db_errors("store a record"):
                    self.conn.execute(f"SET LOCAL synchronous_commit = {'on' if durable else 'off'}")
                self._durable = durable
        rec = records.seal_next(fields, self._tail(stream))
        self._insert(stream, rec)
        self._wrote = True
        return rec

    def _next_cseq(self) -> int:
        self._cseq += 1
        return self._cseq

    def copy(self, streams: dict[str, list[Record]]) -> int:
        """Insert already-sealed records as they are; the collaboration's order counter follows them."""
        n = 0
        for stream, recs in streams.items():
            for rec in recs:
                self._insert(stream, rec)
                self._cseq = max(self._cseq, int(rec.get("cseq", 0)))
                n += 1
        return n

    # ---- sequencing staged requests (PgStore.combine) ------------------------------------------

    def sequence(self, staged: int | None, request: str | None, apply: Callable[[Any, str], str],
                 refused: Callable[[Exception], str]) -> str:
        """Holding the lock: apply every pending request of this role, oldest first, and this writer's own
        (``request``, not staged, or the one numbered ``staged``); write each other writer's outcome into its
        row; return this writer's.  All of it commits with this transaction, durably, or none of it.

        A request that fails (refused by the service, or a record refused by the server) sends the whole batch
        back to its start, and the batch is applied again with a savepoint around each request, so that only the
        failing one is undone (:meth:`_apply_all`); the common batch, where nothing fails, pays no savepoint per
        request.
        """
        pending: list[tuple[int, str, Any]] = []
        if self._pending or staged is not None:
            rows = self._rows(_PENDING, (self.collab, staged, staged, self.collab))
            pending = [(int(i), str(r), o) for i, r, o in rows]
        todo = [(i, r) for i, r, o in pending if o is None]
        if request is not None:
            todo.append((0, request))  # (0: no staged row)
        self._order_later = True
        outcomes = self._apply_all(todo, apply, refused, alone=request is not None and len(todo) == 1)
        self._order_later = False
        answers = [(i, out) for i, out in outcomes.items() if i not in (0, staged)]
        with db_errors("store the outcomes"), self.conn.pipeline():
            if self._order_to:
                self.conn.execute("UPDATE agentmsg_collabs SET cseq = greatest(cseq, %s) WHERE id = %s",
                                  (self._order_to, self.collab))
            if answers:
                self.conn.execute(_ANSWER, ([i for i, _o in answers], [o for _i, o in answers]))
            if staged is not None:
                self.conn.execute(_UNSTAGED, (staged,))
        if staged is None:
            return outcomes[0]
        own = [o for i, _r, o in pending if i == staged]
        if not own:
            raise StoreFailed("a staged request was removed unanswered; nothing of it was stored")
        return outcomes[staged] if own[0] is None else str(own[0])  # (answered by an earlier holder)

    def _apply_all(self, todo: list[tuple[int, str]], apply: Callable[[Any, str], str],
                   refused: Callable[[Exception], str], *, alone: bool) -> dict[int, str]:
        """Each request's outcome.  ``alone`` (this writer's own request, nothing staged): what it raises is
        raised, and the transaction rolls back as any other.  Else the batch is sent in one pipeline (its
        inserts do not wait for each other's answers), after a savepoint; if any request fails, the batch
        goes back to the savepoint and is applied again with a savepoint around each request, whose failure
        undoes that request only and is its outcome."""
        if alone:
            return {sid: apply(self, req) for sid, req in todo}
        with db_errors("store a record"):
            self.conn.execute("SAVEPOINT agentmsg_batch")
        start = self._state()
        out: dict[int, str] = {}
        try:
            with db_errors("store a record"), self.conn.pipeline():
                for sid, req in todo:
                    out[sid] = apply(self, req)
            return out
        except Exception:
            status = self.conn.info.transaction_status
            if status not in (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR):
                raise  # the connection failed: the whole transaction is lost, nothing of it stored
        with db_errors("store a record"):
            self.conn.execute("ROLLBACK TO SAVEPOINT agentmsg_batch")
        self._restore(start)
        out = {}
        for sid, req in todo:
            kept = self._state()
            try:
                with db_errors("store a record"), self.conn.transaction():  # (a savepoint)
                    out[sid] = apply(self, req)
            except Exception as exc:
                if self.conn.info.transaction_status != psycopg.pq.TransactionStatus.INTRANS:
                    raise  # the connection failed: the whole transaction is lost, nothing of it stored
                self._restore(kept)  # its savepoint undid its writes
                out[sid] = refused(exc)
        return out

    def _state(self) -> tuple[Any, ...]:
        """What this transaction caches about its writes, to be put back when they are undone."""
        return (dict(self._tails), self._registry, self._cseq, self._events_seq, self._durable, self._wrote,
                {k: list(v) for k, v in self._pending_broadcasts.items()}, self._order_to,
                self.store._registries.get(self.collab))

    def _restore(self, state: tuple[Any, ...]) -> None:
        (self._tails, self._registry, self._cseq, self._events_seq, self._durable, self._wrote,
         self._pending_broadcasts, self._order_to, cached) = state
        if cached is None:
            self.store._registries.pop(self.collab, None)
        else:
            self.store._registries[self.collab] = cached

    def alias(self, alias: str) -> str:
        if not rules.is_alias(alias):
            raise UsageError(f"invalid alias {str(alias)[:40]!r}: must match ^[a-z][a-z0-9_-]{{0,31}}$")
        return alias

    # ---- membership -----------------------------------------------------------------------

    def registry(self) -> Registry:
        if self._registry is None:
            cached = self.store._registries.get(self.collab)
            if cached is not None and cached[0] == self._events_seq:
                self._registry = cached[1]
                return cached[1]
            reg = rules.replay(self.events())
            if reg is None:
                raise NotFound(f"collaboration {self.collab} has no opening record")
            self._registry = reg
            self.store._registries[self.collab] = (self._events_seq, reg)
        return self._registry

    def events(self) -> list[Record]:
        return self.stream(EVENTS)

    def append_event(self, fields: Record) -> Record:
        rec = self._append(EVENTS, dict(fields, cseq=self._next_cseq()))
        self._registry = None
        self._events_seq = int(rec["seq"])
        return rec

    def repair_binding(self, pin: str) -> None:
        pass  # nothing derived is kept apart from the records

    # ---- messages -------------------------------------------------------------------------

    def message(self, message_id: str) -> Message | None:
        found = self._records(f"SELECT {_ROW} FROM agentmsg_records WHERE collab = %s AND mid = %s",
                              (self.collab, message_id))
        return Message.from_record(found[0]) if found else None

    def broadcast(self, base_id: str) -> tuple[bool | None, list[str]]:
        """How an id was first used: (True, recipients) for a broadcast, (False, []) direct, (None, []) unused."""
        if base_id in self._pending_broadcasts:
            return True, list(self._pending_broadcasts[base_id])
        rows = self._rows("SELECT stream FROM agentmsg_records WHERE collab = %s AND bcast = %s ORDER BY stream",
                          (self.collab, base_id))
        if rows:
            return True, [r[0].split("/", 1)[1] for r in rows]
        return (False, []) if self.message(base_id) is not None else (None, [])

    def append_message(self, fields: Record, *, broadcast_of: dict[str, str] | None = None) -> Message:
        if broadcast_of is not None:
            self._pending_broadcasts[fields["broadcast"]] = list(broadcast_of)
        rec = self._append(inbox(self.alias(fields["to"])), dict(fields, cseq=self._next_cseq()))
        return Message.from_record(rec)

    def since(self, alias: str, seq: int) -> list[Message]:
        return [Message.from_record(r) for r in self.stream(inbox(self.alias(alias)), after=seq)]

    def _unacked(self, alias: str) -> list[tuple[Any, ...]]:
        """(seq, kind, priority, id) of each unacknowledged message, oldest first."""
        return self._rows(_UNACKED, (self.collab, inbox(alias), receipts_of(alias)))

    def unacked(self, alias: str, *, limit: int, skip: Collection[int] = (), requests_only: bool = False,
                priority_first: bool = True) -> Page:
        every = self._unacked(self.alias(alias))
        if priority_first:
            every = sorted(every, key=lambda r: (r[2] != kinds.HIGH, r[0]))
        pool = [r for r in every if not requests_only or r[1] == kinds.REQUEST]
        chosen = [r[0] for r in pool if r[0] not in skip][:limit]
        bodies = {int(r["seq"]): r for r in self._records(
            f"SELECT {_ROW} FROM agentmsg_records WHERE collab = %s AND stream = %s AND seq = ANY(%s)",
            (self.collab, inbox(alias), chosen))} if chosen else {}
        return Page([Message.from_record(bodies[s]) for s in chosen if s in bodies], len(pool),
                    requests=sum(r[1] == kinds.REQUEST for r in every),
                    high=sum(r[2] == kinds.HIGH for r in every),
                    skipped=sum(1 for r in pool if r[0] in skip))

    def unacked_ids(self, alias: str) -> list[str]:
        return [r[3] for r in self._unacked(self.alias(alias))]

    def total(self, alias: str) -> int:
        tail = self._tail(inbox(self.alias(alias)))
        return int(tail["seq"]) if tail else 0

    # ---- receipts -----------------------------------------------------------------------------

    def _acked_seqs(self, alias: str) -> set[int]:
        rows = self._rows("SELECT DISTINCT m.seq FROM agentmsg_records m JOIN agentmsg_records a "
                          "ON a.collab = m.collab AND a.stream = %s AND a.ref = m.mid AND a.rtype = 'ack' "
                          "WHERE m.collab = %s AND m.stream = %s", (receipts_of(alias), self.collab, inbox(alias)))
        return {int(r[0]) for r in rows}

    def _seq_of(self, message_id: object) -> int | None:
        if not isinstance(message_id, str):
            return None
        msg = self.message(message_id)
        return msg.seq if msg is not None else None

    def append_receipts(self, alias: str, items: list[Record], *, durable: bool = True,
                        head: bool = True) -> list[Record]:
        """Append receipts in order; ``durable=False`` commits them without waiting for the disk flush."""
        stream = receipts_of(self.alias(alias))
        acked: set[int] | None = None

        def acked_set() -> set[int]:
            nonlocal acked
            if acked is None:
                acked = self._acked_seqs(alias)
            return acked

        counted = count_acks(self._tail(stream), items, acked_now=lambda: len(acked_set()),
                             is_acked=lambda seq: seq in acked_set(), seq_of=self._seq_of)
        return [self._append(stream, fields, durable=durable) for fields in counted]

    def acked(self, alias: str, message: Message) -> Record | None:
        found = self._records(f"SELECT {_ROW} FROM agentmsg_records WHERE collab = %s AND stream = %s AND ref = %s "
                              "AND rtype = 'ack' ORDER BY seq LIMIT 1", (self.collab, receipts_of(self.alias(alias)),
                                                                        message.id))
        return found[0] if found else None

    def message_receipts(self, message: Message) -> list[Record]:
        return self._records(f"SELECT {_ROW} FROM agentmsg_records WHERE collab = %s AND stream = %s AND ref = %s "
                             "ORDER BY seq", (self.collab, receipts_of(self.alias(message.to)), message.id))

    def receipts_since(self, alias: str, position: int) -> tuple[list[Record], int]:
        """Receipts after ``position`` (the last sequence number seen), and the new position."""
        stream = receipts_of(self.alias(alias))
        tail = self._tail(stream)
        last = int(tail["seq"]) if tail else 0
        if position > last:
            position = 0
        return self.stream(stream, after=position), last

    # ---- log, delivery --------------------------------------------------------------------------

    def notes(self) -> list[Record]:
        return self.stream(NOTES)

    def append_note(self, fields: Record) -> Record:
        return self._append(NOTES, dict(fields, cseq=self._next_cseq()))

    def delivery_records(self) -> list[Record]:
        return self.stream(DELIVERY)

    def append_delivery(self, fields: Record) -> Record:
        return self._append(DELIVERY, dict(fields))
