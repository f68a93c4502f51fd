"""The file store on both ends of a mirror (``agentmsg sync``).

As a source it is a ``ports.Replica``: each journal is a stream of sealed
records read by sequence, and "something changed" is a poll of the journal
sizes (plain files have nothing to subscribe to).  As a target it imports
records another store sealed, verbatim (:meth:`..journal.Journal.append_sealed`
checks the chain and skips what it already holds), then brings the derived
files up to date exactly as the writer would have: registry, pin index, id
index, inbox maps, transcripts, and the launcher's idle markers.
"""

from __future__ import annotations

import os
import time

from agentmsg import fsio, records
from agentmsg.backends.file import layout, views
from agentmsg.backends.file.journal import Journal
from agentmsg.domain import rules
from agentmsg.domain.values import Message

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection
    from typing import Any

    from agentmsg.backends.file.store import FileStore, FileTxn

#: Streams whose records carry ``cseq`` (one order across the collaboration): imported in that order.
ORDERED = ("events", "notes")


def stream_names(base: str) -> list[str]:
    """Every stream a collaboration directory holds a journal for."""
    names = [name for name, file in layout.STREAM_FILES.items() if os.path.lexists(os.path.join(base, file))]
    for kind in ("inbox", "receipts"):
        folder = fsio.existing_dir(base, kind)
        if folder is not None:
            names += [f"{kind}/{n[:-6]}" for n in sorted(os.listdir(folder))
                      if n.endswith(".jsonl") and rules.is_alias(n[:-6])]
    return names


def streams(store: FileStore, collab: str) -> dict[str, int]:
    base = store.base(collab)
    out = {}
    for name in stream_names(base):
        last = Journal(layout.stream(base, name)).last()
        if last is not None:
            out[name] = int(last["seq"])
    return out


def records_since(store: FileStore, collab: str, stream: str, seq: int, limit: int = 1000) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _pos, rec in Journal(layout.stream(store.base(collab), stream)).scan():
        if rec["seq"] > seq:
            out.append(rec)
            if len(out) >= limit:
                break
    return out


def _snapshot(store: FileStore, collabs: Collection[str]) -> tuple[object, ...]:
    seen: list[object] = [tuple(store.collabs())]
    for collab in collabs:
        base = views.collab_dir(store.root, collab)
        if base is None:
            continue
        for name in stream_names(base):
            seen.append((collab, name, fsio.file_size(layout.stream(base, name))))
    return tuple(seen)


_SEEN: dict[tuple[str, tuple[str, ...]], tuple[object, ...]] = {}


def wait_any(store: FileStore, collabs: Collection[str], timeout: float, poll: float = 0.05) -> bool:
    """Until a journal of ``collabs`` grows or a collaboration appears (True), or ``timeout`` (False).

    Compared with what the previous call saw (as a kept LISTEN connection would), so a change made
    between two calls (while the mirror was copying) is announced at once, not lost.
    """
    key = (store.root, tuple(sorted(collabs)))
    deadline = time.monotonic() + timeout
    before = _SEEN.get(key)
    now = _snapshot(store, collabs)
    while now == before or before is None:
        if before is None:
            before = now
        if time.monotonic() >= deadline:
            _SEEN[key] = now
            return False
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
        now = _snapshot(store, collabs)
    _SEEN[key] = now
    return True


# ---- the target side -------------------------------------------------------------------------------


def import_records(store: FileStore, collab: str, stream: str, recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Append records sealed elsewhere to ``stream`` (idempotent), then refresh what derives from them."""
    if not recs:
        return []
    from agentmsg.backends.file.store import FileTxn

    base = views.collab_dir(store.root, collab) or fsio.ensure_dir(store.root, layout.COLLABS, collab)
    with FileTxn(store, collab, base) as tx:
        return _import(tx, stream, recs)


def _import(tx: FileTxn, stream: str, recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kind, _sep, alias = stream.partition("/")
    path = layout.stream(tx.base, stream)
    if kind in ("inbox", "receipts"):
        fsio.ensure_dir(tx.base, kind)
    journal = Journal(path)
    # A view that is missing with history behind it is rendered whole once, after the import (as a
    # writer would); appending each record to it as well would show them twice.
    whole = not fsio.file_size(os.path.join(tx.base, layout.TRANSCRIPT)) or (
        kind == "inbox" and recs[0].get("seq", 1) > 1 and not fsio.file_size(layout.transcript(tx.base, alias)))
    placed = _append(tx, journal, kind, alias, recs, transcribe=not whole)
    if whole and placed and kind in ("events", "notes", "inbox"):
        views.quietly(views.render_all, tx)
    return placed


def _append(tx: FileTxn, journal: Journal, kind: str, alias: str, recs: list[dict[str, Any]], *,
            transcribe: bool) -> list[dict[str, Any]]:
    path = journal.path
    if kind == "events":
        before = tx.registry() if os.path.exists(path) else None
        placed = journal.append_sealed(recs)
        tx.wrote(os.fspath(path))
        if placed:
            tx._registry = None
            after = tx.registry()
            views.write_registry(tx, after)
            views.update_pins(tx.root, tx.collab, before, after)
            pins = {r[k] for _o, r in placed for k in ("pin", "to") if isinstance(r.get(k), str)}
            views.wake(tx.root, pins | {p.pin for p in after.participants.values()})
            for _o, rec in placed if transcribe else ():
                views.transcribe_event(tx, rec)
    elif kind == "inbox":
        placed = journal.append_sealed(recs, before=lambda at, rec: _index(tx, alias, rec, at))
        tx.wrote(os.fspath(path))
        if placed:
            views.wake_aliases(tx, (alias,))
            for _o, rec in placed if transcribe else ():
                views.transcribe_message(tx, Message.from_record(rec))
    elif kind == "receipts":
        placed = journal.append_sealed(recs)
        views.receipts_placed(tx, alias, placed)
    elif kind == "notes":
        placed = journal.append_sealed(recs)
        tx.wrote(os.fspath(path))
        for _o, rec in placed if transcribe else ():
            views.transcribe_note(tx, rec)
    else:  # delivery
        placed = journal.append_sealed(recs)
        tx.delivery_placed([rec for _o, rec in placed])
    return [rec for _o, rec in placed]


def _index(tx: FileTxn, alias: str, rec: dict[str, Any], offset: int) -> None:
    """A broadcast copy adds its recipient to the base id; then the copy's entry, as the writer's reservation.

    In that order: reading the base id may rebuild ids/ from the journals (a damaged log), which
    holds no entry yet for a record that is not written yet.
    """
    base_id = rec.get("broadcast")
    if isinstance(base_id, str) and layout.is_uuid(base_id):
        _was, recipients = views.broadcast(tx, base_id)
        views.write_broadcast(tx, base_id, sorted({*recipients, alias}))
    views.index_message(tx, rec, offset)


# ---- the replica mark --------------------------------------------------------------------------------


def replica_of(root: str) -> str | None:
    """The store URL this root mirrors (``replica.json``), or None for an ordinary root."""
    raw = fsio.read_bytes(os.path.join(root, layout.REPLICA))
    if not raw:
        return None
    try:
        doc = records.loads(raw)
    except ValueError:
        return "?"  # a damaged mark still marks a replica: refusing a write is the safe side
    return str(doc.get("store") or "?") if isinstance(doc, dict) else "?"


def mark_replica(root: str, url: str) -> None:
    fsio.ensure_dir(root)
    fsio.atomic_write(os.path.join(root, layout.REPLICA),
                      (records.dumps({"store": redact(url), "since": records.now_utc()}) + "\n").encode())


def redact(url: str) -> str:
    """A store URL without its password (the mark is a file anyone with the root can read)."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return url
    cred, _at, host = rest.partition("@")
    user = cred.split(":", 1)[0]
    return f"{scheme}://{user}@{host}" if user else f"{scheme}://{host}"
