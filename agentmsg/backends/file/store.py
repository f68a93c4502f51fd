"""``FileStore``: the port on plain files.  It stores and loads; it decides nothing.

Every write happens inside :meth:`FileStore.transaction` (the
collaboration's ``write.lock``).  Only the journals are fsynced: the
record a caller is told about is durable, and everything else here
(registry.yaml, the pin index, ids/, state/, transcripts) is derived from
the journals, kept current on the way, checked when read and rebuilt when
missing or stale (:mod:`.derived`: one module per view; :mod:`.placed`
updates them after every append, the writer's and a mirror's import alike).
"""

from __future__ import annotations

import os
import stat
import time

from agentmsg import fsio, records
from agentmsg.backends.acks import count_acks
from agentmsg.backends.file import idindex, layout, pinindex, registryview
from agentmsg.backends.file.derived import quietly
from agentmsg.backends.file.handles import Handles
from agentmsg.backends.file.inboxmap import ACKED_VALUES, InboxMap, record_at
from agentmsg.backends.file.journal import Journal
from agentmsg.backends.file.placed import (
    delivery_placed,
    events_placed,
    messages_placed,
    notes_placed,
    receipts_placed,
)
from agentmsg.backends.reads import TxnReads
from agentmsg.domain import kinds, rules
from agentmsg.domain.values import Message, Page, Registry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterator
    from typing import Any

    from agentmsg.backends.file.protocols import WakeCallback
    from agentmsg.domain.search import Found, Query


class FileStore(TxnReads):
    """Plain files under one state root (docs/ARCHITECTURE.md has the layout)."""

    kind = "file"

    def __init__(self, root: str | os.PathLike[str], *, lock_timeout: float = 30.0,
                 on_wake: WakeCallback | None = None) -> None:
        """``on_wake(root, pins)``: told after a write woke pins that have fast-path markers, so the runtime
        can ring its renderer (``runtime.doorbell.nudge``); whoever builds the store supplies it."""
        # The root itself may be a link (onto a shared disk, say); links *inside* it are refused.
        self.root: str = os.path.realpath(os.fspath(root))
        self.lock_timeout = lock_timeout
        self.on_wake = on_wake
        # collab -> (collab.jsonl's dev, inode, size, mtime; its registry): see registryview.registry
        self.registries: dict[str, tuple[tuple[int, int, int, int], Registry]] = {}
        self._replica: str | bool | None = False  # not read yet
        # collab -> (its directory's fsio.dir_key; the subdirectories then checked, that were directories)
        self.subdirs: dict[str, tuple[tuple[int, int, int, int], tuple[tuple[str, str], ...]]] = {}
        # inbox directory -> (its fsio.dir_key; its entries, sorted): see FileTxn.inbox_names
        self.listings: dict[str, tuple[tuple[int, int, int, int], tuple[str, ...]]] = {}
        # a journal found missing -> its collaboration directory's fsio.dir_key then: see FileTxn._absent
        self.absent: dict[str, tuple[int, int, int, int]] = {}
        self.handles = Handles()  # descriptors kept open between transactions (handles.py)
        # inbox map path -> the map as the last transaction left it: see FileTxn.map
        self.maps: dict[str, InboxMap] = {}

    def close(self) -> None:
        """Close what the store keeps open between transactions (it opens them again if used after)."""
        self.handles.close()
        self.maps.clear()

    def describe(self) -> dict[str, Any]:
        """A root that does not exist yet is fine (the first write creates it); anything else there is not."""
        out: dict[str, Any] = {"store": "file", "location": self.root, "reachable": True}
        if os.path.lexists(self.root) and not os.path.isdir(self.root):
            out.update(reachable=False, problem="it is not a directory")
        elif not os.path.lexists(self.root):
            out["created"] = False
        return out

    # ---- collaborations ---------------------------------------------------------------

    def base(self, collab: str) -> str:
        found = layout.collab_dir(self.root, collab)
        if found is None:
            raise _no_collab(self.root, collab)
        return found

    def collabs(self) -> list[str]:
        base = fsio.existing_dir(self.root, layout.COLLABS)
        if base is None:
            return []
        return sorted(name for name in os.listdir(base) if layout.is_uuid(name))

    def transaction(self, collab: str) -> FileTxn:
        """The collaboration's lock, and the only way to write (``with store.transaction(c) as tx:``)."""
        # Its subdirectories, and its opening record, are checked under the lock (`FileTxn.__enter__`).
        found = layout.locate(self.root, collab, opened=False)
        if found is None:
            raise _no_collab(self.root, collab)
        return FileTxn(self, collab, found[0], located=found[1], opened=True)

    def create(self, collab: str) -> FileTxn:
        """A transaction on a new, empty collaboration."""
        self.writable()
        pinindex.refuse_pin_links(self.root)
        return FileTxn(self, collab, fsio.ensure_dir(self.root, layout.COLLABS, collab), fresh=True)

    # ---- reads (each takes the lock briefly: derived files may be brought up to date) ----

    def events(self, collab: str) -> list[dict[str, Any]]:
        return [rec for _pos, rec in Journal(os.path.join(self.base(collab), layout.EVENTS)).scan()]

    def find_message(self, message_id: str) -> Message | None:
        for collab in self.collabs():
            if layout.collab_dir(self.root, collab) is None:
                continue
            found = self.message(collab, message_id)
            if found is not None:
                return found
        return None

    def history(self, collab: str, alias: str) -> Iterator[Message]:
        for _pos, rec in Journal(layout.inbox(self.base(collab), alias)).scan():
            yield Message.from_record(rec)

    def last_seq(self, collab: str, alias: str) -> int:
        last = Journal(layout.inbox(self.base(collab), alias)).last()
        return int(last["seq"]) if last else 0

    def wait(self, collab: str, alias: str, seq: int, timeout: float, *, poll: float = 0.2) -> bool:
        """Until a message after ``seq`` arrives for ``alias`` (True) or ``timeout`` passes (False).

        Plain files have nothing to subscribe to, so this polls the inbox's size.
        """
        deadline = time.monotonic() + timeout
        path = layout.inbox(self.base(collab), alias)
        while True:
            if self.last_seq(collab, alias) > seq:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            size = fsio.file_size(path)
            while fsio.file_size(path) == size and time.monotonic() < deadline:
                time.sleep(min(poll, max(0.0, deadline - time.monotonic())))

    def receipts(self, collab: str, alias: str) -> list[dict[str, Any]]:
        return [rec for _pos, rec in Journal(layout.receipts(self.base(collab), alias)).scan()]

    def notes(self, collab: str) -> list[dict[str, Any]]:
        return [rec for _pos, rec in Journal(os.path.join(self.base(collab), layout.LOG)).scan()]

    def delivery_records(self, collab: str) -> list[dict[str, Any]]:
        return [rec for _pos, rec in Journal(os.path.join(self.base(collab), layout.DELIVERY)).scan()]

    def bindings(self, pin: str) -> list[tuple[str, str]]:
        """Active (collab, alias) bindings of a pin, confirmed against each registry."""
        return [(collab, alias) for collab, alias, _reg in self.bound(pin)]

    def bound(self, pin: str) -> list[tuple[str, str, Registry]]:
        """The bindings with the registry each was confirmed against (the hooks need both, once)."""
        pinindex.ensure_pins(self)
        try:
            entries = pinindex.pin_entries(self.root, pin)
        except pinindex.DamagedIndex:
            pinindex.ensure_pins(self, force=True)
            entries = pinindex.pin_entries(self.root, pin)
        found = []
        for collab, alias in entries:
            if layout.collab_dir(self.root, collab) is None:
                continue  # a vanished collaboration names nothing; a damaged one is an error (hooks log it)
            reg = self.registry(collab)
            if not reg.closed and reg.holder(alias) == pin:
                found.append((collab, alias, reg))
        return found

    # ---- replication (ports.Replica; agentmsg sync) ----------------------------------------

    def streams(self, collab: str) -> dict[str, int]:
        from agentmsg.backends.file import replica

        return replica.streams(self, collab)

    def records_since(self, collab: str, stream: str, seq: int, limit: int = 1000) -> list[dict[str, Any]]:
        from agentmsg.backends.file import replica

        return replica.records_since(self, collab, stream, seq, limit)

    def wait_any(self, collabs: Collection[str], timeout: float) -> bool:
        from agentmsg.backends.file import replica

        return replica.wait_any(self, collabs, timeout)

    def report_presence(self, collab: str, alias: str, fields: dict[str, Any]) -> None:
        from agentmsg.backends.file import presence

        with self.transaction(collab):  # the collaboration's lock: reports never interleave
            presence.report(self.root, collab, alias, fields)

    def presence(self, collab: str) -> dict[str, dict[str, Any]]:
        from agentmsg.backends.file import presence

        return presence.reports(self.root, collab)

    def import_records(self, collab: str, stream: str, recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A mirror's write: records sealed by the store this root mirrors, verbatim (chain-checked, idempotent)."""
        return import_records(self, collab, stream, recs)

    @property
    def replica_of(self) -> str | None:
        """The store this root mirrors (``agentmsg sync``), read once; None for an ordinary root."""
        if self._replica is False:
            if not os.path.lexists(os.path.join(self.root, layout.REPLICA)):
                self._replica = None  # an ordinary root: the replica module is not even imported
            else:
                from agentmsg.backends.file.replica import replica_of

                self._replica = replica_of(self.root)
        return self._replica  # type: ignore[return-value]

    def writable(self) -> None:
        """A replica root takes no direct writes: they go to the store it mirrors, then come back down."""
        url = self.replica_of
        if url is not None:
            from agentmsg.errors import UsageError

            raise UsageError(f"{self.root} is a replica of {url} (agentmsg sync); writes go to that store: "
                             "set AGENTMSG_STORE to it")

    def search(self, query: Query) -> Found:
        """Ranked matches from the derived FTS5 index, caught up from the journals first (:mod:`.searchindex`)."""
        from agentmsg.backends.file.searchindex import SearchIndex

        return SearchIndex(self).search(query)

    # ---- derived data -----------------------------------------------------------------

    def rebuild(self, collab: str) -> list[str]:
        """Rewrite every derived file of a collaboration from its journals; returns what was rewritten."""
        with self.transaction(collab) as tx:
            from agentmsg.backends.file import rebuild  # repair and restore only

            return rebuild.rebuild(tx)

    def verify(self, collab: str | None) -> tuple[int, list[dict[str, Any]]]:
        from agentmsg.backends.file.integrity import verify

        return verify(self, collab)

    def clean_temp(self, older_than: float = 3600.0) -> int:
        from agentmsg.backends.file import rebuild

        return rebuild.clean_temp(self.root, older_than)


def _no_collab(root: str, collab: str) -> Exception:
    from agentmsg.errors import NotFound  # only here: the hooks never import errors on their way

    return NotFound(f"no collaboration {collab} under {root}")


#: Inbox maps a long-lived store keeps between transactions (each about a byte per message).
_KEPT_MAPS = 16


class FileTxn:
    """Everything a command reads and writes while it holds one collaboration's lock."""

    def __init__(self, store: FileStore, collab: str, base: str, *, fresh: bool = False,
                 located: os.stat_result | None = None, opened: bool = False) -> None:
        """``opened``: the collaboration must have its opening record (checked under the lock)."""
        self.store, self.collab, self.base, self.fresh = store, collab, base, fresh
        self._opened = opened
        self._located = located  # the ``lstat`` of ``base`` that found it (FileStore.transaction)
        # what that lstat says of base's entries (None: fresh, or changed within 2 s): `_check_subdirs`, and
        # the descriptors of base's files kept between transactions (handles.py)
        self.key = fsio.dir_key(located) if located is not None else None
        lock = f"{base}/{layout.LOCK}"
        # A collaboration's lock is made with it (FileStore.create); one missing from a directory with no
        # opening record is not made by a transaction that must find that record (NotFound, nothing left).
        events = f"{base}/{layout.EVENTS}"
        self._lock = fsio.locked(lock, store.lock_timeout, fd=store.handles.take(lock, self.key),
                                 create_if=(lambda: os.path.lexists(events)) if opened else None)
        self._listed: dict[str, tuple[int, int, int, int] | None] = {}  # directory -> its key, when listed
        self._registry: Registry | None = None
        self._maps: dict[str, InboxMap] = {}
        self._dirs: dict[tuple[str, ...], str] = {}
        self._cseq: int | None = None  # the highest cseq stored, once read: the lock keeps it current
        self._delivery: list[dict[str, Any]] | None = None  # delivery.jsonl, once read: the same
        self._stats: dict[str, os.stat_result | None] = {}  # journal -> its lstat, until this transaction writes it

    def __enter__(self) -> FileTxn:
        try:
            self._lock.__enter__()
        except FileNotFoundError:
            if not self._opened:
                raise
            raise _no_collab(self.root, self.collab) from None  # no lock file and no opening record
        try:
            self._check_subdirs()
            if self._opened and self.lstat(f"{self.base}/{layout.EVENTS}") is None:
                raise _no_collab(self.root, self.collab)  # a directory with no opening record
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                for m in self._maps.values():
                    quietly(m.save)
                self._keep_maps()
        finally:
            if self.key is not None:
                self.store.handles.give(f"{self.base}/{layout.LOCK}", self.key, self._lock.unlock_keep())
            else:
                self._lock.__exit__(*exc)
            if exc[0] is not None and self.fresh:
                self._drop_unopened()

    def _drop_unopened(self) -> None:
        """A failed open leaves no collaboration behind: only its lock file, never a record, is removed."""
        if os.path.lexists(f"{self.base}/{layout.EVENTS}"):
            return
        try:
            os.unlink(f"{self.base}/{layout.LOCK}")
            os.rmdir(self.base)  # fails, harmlessly, if anything else is in it
        except OSError:
            pass

    def _check_subdirs(self) -> None:
        """A symlinked subdirectory is refused before any use: checked once per directory change, not per send.

        The store keeps, per collaboration, which subdirectories were checked
        to be directories, keyed by the collaboration directory's
        `fsio.dir_key` from the ``lstat`` that found it: swapping a
        subdirectory for a link, or creating one, changes that key, and the
        next transaction checks them all again.  A subdirectory that was
        absent is not remembered: `existing` checks it when it is used.
        """
        key = self.key
        cached = self.store.subdirs.get(self.collab)
        if key is not None and cached is not None and cached[0] == key:
            for sub, path in cached[1]:
                self._dirs[(sub,)] = path
            return
        found = [(sub, self.existing(sub)) for sub in layout.COLLAB_SUBDIRS]
        if key is not None:
            self.store.subdirs[self.collab] = (key, tuple((sub, path) for sub, path in found if path is not None))

    @property
    def root(self) -> str:
        return self.store.root

    def dir(self, *parts: str) -> str:
        """``base/parts...``, created 0700 if missing; checked (a directory, no link) once per transaction.

        Once is enough under the lock: nothing of ours removes a directory,
        and a hostile swap after the check could as well come between any
        check and its use. Each repeated check cost a system call per send.
        """
        found = self.existing(*parts, create=True)
        assert found is not None
        return found

    def existing(self, *parts: str, create: bool = False) -> str | None:
        """``base/parts...`` when it is a directory (checked once per transaction), else None."""
        found = self._dirs.get(parts)
        if found is not None:
            return found
        if not parts:
            found = fsio.ensure_dir(self.base) if create else self.base
        else:
            parent = self.existing(*parts[:-1], create=create) if len(parts) > 1 or create else self.base
            if parent is None:
                return None
            found = fsio.subdir(parent, parts[-1]) if create else fsio.existing_dir(parent, parts[-1])
        if found is not None:
            self._dirs[parts] = found
        return found

    def lstat(self, path: str) -> os.stat_result | None:
        """A journal's ``lstat`` (None: missing), taken once per transaction until it appends to it.

        The lock keeps it current: the registry's key, the ``cseq`` tails and
        the append's own tail all read the same files in one send.
        """
        if path in self._stats:
            return self._stats[path]
        try:
            st: os.stat_result | None = os.lstat(path)
        except FileNotFoundError:
            st = None
        self._stats[path] = st
        return st

    def wrote(self, path: str) -> None:
        """``path`` was appended to: its next `lstat` is taken afresh."""
        self._stats.pop(path, None)

    def events_key(self) -> tuple[int, int, int, int] | None:
        """``collab.jsonl``'s identity, size and modification time (the registry's key), or None."""
        st = self.lstat(f"{self.base}/{layout.EVENTS}")
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) if st is not None else None

    def _tail(self, path: str) -> dict[str, Any] | None:
        st = self.lstat(path)
        return Journal(path).last(st) if st is not None else None

    # ---- membership ---------------------------------------------------------------------

    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = registryview.registry(self)
        return self._registry

    def set_registry(self, reg: Registry | None) -> None:
        """The registry as just replayed (``rebuild``), or None after an event was appended: read again."""
        self._registry = reg

    def events(self) -> list[dict[str, Any]]:
        return [rec for _pos, rec in Journal(f"{self.base}/{layout.EVENTS}").scan()]

    def append_event(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Durably append a membership or lifecycle event, then bring the registry and pin index up to date."""
        self.store.writable()
        before = self._registry if os.path.exists(f"{self.base}/{layout.EVENTS}") else None
        fsio.refuse_link(f"{self.base}/{layout.TRANSCRIPT}")
        pins = {fields[k] for k in ("pin", "to") if isinstance(fields.get(k), str)}
        if os.path.exists(f"{self.base}/{layout.EVENTS}"):
            pins |= {p.pin for p in self.registry().participants.values()}
        pinindex.refuse_pin_links(self.root, pins)
        cseq = self.next_cseq()
        self.wrote(f"{self.base}/{layout.EVENTS}")
        rec = Journal(f"{self.base}/{layout.EVENTS}").append(dict(fields, cseq=cseq))[1]
        self._cseq = rec["cseq"]
        events_placed(self, before, [rec], pins)
        return rec

    def repair_binding(self, pin: str) -> None:
        """Bring the pin index in line with the registry for one pin (a crash may have cut it short)."""
        reg = self.registry()
        pinindex.update_pins(self.root, self.collab, None, reg.replace(participants={
            a: p for a, p in reg.participants.items() if p.pin == pin}))

    # ---- messages ----------------------------------------------------------------------------

    def message(self, message_id: str) -> Message | None:
        rec = idindex.lookup(self, message_id)
        return Message.from_record(rec) if rec is not None else None

    def broadcast(self, base_id: str) -> tuple[bool | None, list[str]]:
        """How an id was first used: (True, recipients) for a broadcast, (False, []) direct, (None, []) unused."""
        return idindex.broadcast(self, base_id)

    def append_message(self, fields: dict[str, Any], *, broadcast_of: dict[str, str] | None = None) -> Message:
        """Durably append one message to its recipient's inbox: the one fsync of a send."""
        from agentmsg.backends.file import transcripts  # a send's, not a hook's: hooks append receipts only

        self.store.writable()
        alias = fields["to"]
        # A planted link, FIFO or hard link at a transcript is refused before anything is stored
        # (for a broadcast, every recipient's transcript before its first copy).
        opened = transcripts.open_transcripts(self, alias, broadcast_of or ())
        try:
            if broadcast_of is not None:
                # Every copy's ids/ log too (the ids the service chose), before the first copy is stored:
                # never a broadcast cut short.
                base_id = fields["broadcast"]
                idindex.refuse_index_links(self, [base_id, *broadcast_of.values()])
                idindex.write_broadcast(self, base_id, list(broadcast_of))
            fields = dict(fields, cseq=self.next_cseq())
            self.dir("inbox")
            path = layout.inbox(self.base, alias)
            st = self.lstat(path)
            self.wrote(path)  # this transaction writes it now
            journal = Journal(path)
            # Kept between transactions while the inbox directory's key (listed for `next_cseq`, before
            # this use) holds; a missing inbox is created by the append, as before.
            key = self._listed.get(self.dir("inbox"))
            fd = self._kept(path, key, fsio.open_append)
            placed: list[dict[str, Any]] = []
            stored: list[Message] = []
            sections: list[bytes] = []

            def before(at: int, sealed: dict[str, Any]) -> None:
                # The id index entry first, as a reservation: a crash in between leaves
                # an entry naming no record (read as absent), never a record with no entry.
                idindex.index_message(self, sealed, at)
                placed.append(sealed)

            def meanwhile() -> None:  # pure work, done while the record is being written back
                stored.append(Message.from_record(placed[0]))
                sections.append(transcripts.message_section(stored[0]))  # written after the fsync

            # A write or fsync that fails cuts the record back and leaves its reservation, which the
            # next record overtakes (idindex.overtaken): read as absent, by lookups and verify alike.
            try:
                _pos, rec = journal.append(fields, before=before, head=False, st=st, fd=fd, meanwhile=meanwhile)
            except BaseException:
                if fd is not None:
                    os.close(fd)
                raise
            self.store.handles.give(path, key, fd)
            self._write_head(journal, rec, key)
            self._cseq = rec["cseq"]
            msg = stored[0]
            messages_placed(self, alias, [msg], opened, sections)
        finally:
            transcripts.close_transcripts(self, opened)
        return msg

    def _write_head(self, journal: Journal, rec: dict[str, Any], key: tuple[int, int, int, int] | None) -> None:
        """The inbox's ``.head`` sidecar (verify's witness of its last record), through a kept descriptor."""
        path = os.fspath(journal.head_path)
        fd = self._kept(path, key, fsio.open_overwrite)
        if journal.write_head(rec, fd):
            self.store.handles.give(path, key, fd)
        elif fd is not None:
            os.close(fd)

    def _kept(self, path: str, key: tuple[int, int, int, int] | None,
              opener: Callable[[str], int | None]) -> int | None:
        """``path``'s kept descriptor, else one opened to keep while its directory's ``key`` holds.

        None when there is no key, or the open fails: the caller then writes
        by path, whose open refuses (or replaces) what this one could not use.
        """
        fd = self.store.handles.take(path, key)
        if fd is None and key is not None:
            try:
                fd = opener(path)
            except Exception as exc:  # a planted link or FIFO, say
                from agentmsg.errors import UnsafePath

                if not isinstance(exc, (OSError, UnsafePath)):
                    raise
        return fd

    def since(self, alias: str, seq: int) -> list[Message]:
        m = self.map(alias)
        out = []
        for s in range(seq + 1, len(m.status) + 1):
            rec = self._record(m, s)
            if rec is not None:
                out.append(Message.from_record(rec))
        return out

    # ---- the inbox map: unacknowledged mail at flat cost ---------------------------------------

    def map(self, alias: str) -> InboxMap:
        """``alias``'s inbox map, folded up to the journals' ends.

        A long-lived store (the MCP server) keeps each map between
        transactions, so a read at 100,000 unread does not parse and checksum
        the whole file again (`InboxMap.load`).  A transaction takes the kept
        map for itself and gives it back only when it ends cleanly: a failed
        one, or another thread, never sees a map half-way through a change.
        """
        m = self._maps.get(alias)
        if m is None:
            path = layout.inbox_map(self.base, alias)
            m = InboxMap.load(self.base, alias, self.store.maps.pop(path, None))
            self._maps[alias] = m
        return m.fold(lambda mid: idindex.seq_of(self, mid))

    def drop_map(self, alias: str) -> None:
        """Forget ``alias``'s map in this transaction (``rebuild`` removed its files: it is folded afresh)."""
        self._maps.pop(alias, None)

    def _keep_maps(self) -> None:
        """Give this transaction's maps back to the store, each only as it is on disk (saved, or read unchanged)."""
        kept = self.store.maps
        for alias, m in self._maps.items():
            if m.saved is None or m.changed:
                continue
            path = layout.inbox_map(self.base, alias)
            kept.pop(path, None)
            while len(kept) >= _KEPT_MAPS:
                kept.pop(next(iter(kept)))
            kept[path] = m

    def _record(self, m: InboxMap, seq: int, problems: list[Any] | None = None,
                readers: tuple[fsio.LineReader, fsio.LineReader] | None = None) -> dict[str, Any] | None:
        """Message ``seq``'s record; ``readers`` (offsets file, inbox) already open for a page of them."""
        journal = Journal(layout.inbox(self.base, m.alias))
        if readers is None:
            off = m.offset(seq)
            rec = record_at(journal, off) if off is not None else None
        else:
            off = m.offset(seq, readers[0])
            rec = _line_record(readers[1], off) if off is not None else None
        if rec is None and off is not None and problems is not None:
            for _ in journal.entries(off, problems):  # a damaged record: say so, the journals decide
                break
            if problems and problems[-1].offset == off:
                return None
        if rec is None or rec.get("seq") != seq:
            # a short or damaged offsets file: find it the slow way, and have the map rewrite its offsets
            m.changed = True
            m.offsets_from = 0
            rec = next((r for _p, r in journal.scan() if r.get("seq") == seq), None)
        return rec

    def unacked(self, alias: str, *, limit: int, skip: Collection[int] = (), requests_only: bool = False,
                priority_first: bool = True) -> Page:
        m = self.map(alias)
        seqs = m.select(limit, skip=skip, requests_only=requests_only, priority_first=priority_first)
        problems = m.skipped_lines()
        with m.offsets_reader() as offsets, fsio.LineReader(layout.inbox(self.base, alias)) as inbox:
            found_recs = [self._record(m, s, problems, (offsets, inbox)) for s in seqs]
        msgs = [Message.from_record(rec) for rec in found_recs if rec is not None]
        from agentmsg.backends.file.inboxmap import REQUEST, UNACKED_HIGH, UNACKED_NORMAL

        every = UNACKED_HIGH + UNACKED_NORMAL
        requests = tuple(v for v in every if v & REQUEST)
        total = m.count(requests if requests_only else every)
        wanted = requests if requests_only else every
        skipped = sum(1 for s in skip if 0 < s <= len(m.status) and m.status[s - 1] in wanted)
        found = list({p.offset: p.as_dict() for p in problems}.values())
        return Page(msgs, total, requests=m.count(requests), high=m.count(UNACKED_HIGH), skipped=skipped,
                    problems=found)

    def unacked_ids(self, alias: str) -> list[str]:
        m = self.map(alias)
        out = []
        for seq in sorted(m.unacked()):
            rec = self._record(m, seq)
            if rec is not None:
                out.append(rec["id"])
        return out

    def total(self, alias: str) -> int:
        return len(self.map(alias).status)

    # ---- receipts ---------------------------------------------------------------------------------

    def append_receipts(self, alias: str, items: list[dict[str, Any]], *, durable: bool = True,
                        head: bool = True) -> list[dict[str, Any]]:
        """Append receipts (acks, presented attempts, notify results, replied marks) in one write."""
        self.store.writable()
        # a planted link in ids/ is refused before anything is written
        idindex.refuse_index_links(self, [f["message"] for f in items if isinstance(f.get("message"), str)])
        path = layout.receipts(self.base, alias)  # a bad alias is refused before anything is created
        self.dir("receipts")
        journal = Journal(path)
        placed = journal.append_many(self._count_acks(alias, journal, items), durable=durable, head=head)
        receipts_placed(self, alias, placed)
        return [rec for _o, rec in placed]

    def _count_acks(self, alias: str, journal: Journal, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Every receipt states how many messages of this inbox are acknowledged (``ackn``).

        The count lives in the journal, the truth: the inbox map is checked
        against it when loaded, so a map edited to mark unread mail
        acknowledged (checksum and all) is caught at the next read, not only
        by ``verify``.
        """
        # The map only when an ack may change the count or the journal does not state it: a presented or
        # completion receipt after a stated count loads no map (the hooks append two of them per prompt).
        maps: list[InboxMap] = []

        def inbox_map() -> InboxMap:
            if not maps:
                maps.append(self.map(alias))
            return maps[0]

        return count_acks(journal.last(), items, acked_now=lambda: inbox_map().count(ACKED_VALUES),
                          is_acked=lambda seq: inbox_map().acked(seq), seq_of=lambda mid: idindex.seq_of(self, mid))

    def acked(self, alias: str, message: Message) -> dict[str, Any] | None:
        """The first acknowledgment of ``message``, or None."""
        if not self.map(alias).acked(message.seq):
            return None
        for rec in self.message_receipts(message):
            if rec["type"] == kinds.ACK:
                return rec
        for _pos, rec in Journal(layout.receipts(self.base, alias)).scan():  # its index pointer was lost
            if rec.get("type") == kinds.ACK and rec.get("message") == message.id:
                return rec
        return None

    def message_receipts(self, message: Message) -> list[dict[str, Any]]:
        journal = Journal(layout.receipts(self.base, message.to))
        recs = (record_at(journal, off) for off in idindex.receipt_offsets(self, message.id))
        found = [rec for rec in recs if rec is not None and rec.get("message") == message.id]
        if not any(rec["type"] == kinds.ACK for rec in found) and self.map(message.to).acked(message.seq):
            # Acknowledged, and no pointer to its ack: a pointer lost or torn by a crash.  The journal
            # decides, and the pointers it names are put back.
            placed = [(pos, rec) for pos, rec in journal.scan() if rec.get("message") == message.id]
            for pos, rec in placed:
                if rec not in found:
                    quietly(idindex.index_receipt, self, message.id, pos)
            found = [rec for _pos, rec in placed]
        return found

    def receipts_since(self, alias: str, position: int) -> tuple[list[dict[str, Any]], int]:
        """Receipts appended after ``position`` (an opaque number from an earlier call), and the new position."""
        journal = Journal(layout.receipts(self.base, alias))
        if position > journal.size():
            position = 0
        out, end = [], position
        for _pos, rec, stop in journal.entries(position):
            out.append(rec)
            end = stop
        return out, end

    # ---- log, delivery, order ------------------------------------------------------------------------

    def notes(self) -> list[dict[str, Any]]:
        return [rec for _pos, rec in Journal(f"{self.base}/{layout.LOG}").scan()]

    def append_note(self, fields: dict[str, Any]) -> dict[str, Any]:
        self.store.writable()
        fsio.refuse_link(f"{self.base}/{layout.TRANSCRIPT}")
        cseq = self.next_cseq()
        self.wrote(f"{self.base}/{layout.LOG}")
        rec = Journal(f"{self.base}/{layout.LOG}").append(dict(fields, cseq=cseq))[1]
        self._cseq = rec["cseq"]
        notes_placed(self, [rec])
        return rec

    def delivery_records(self) -> list[dict[str, Any]]:
        """Read once per transaction: a Stop hook asks for its envelope and its wake consent in one."""
        if self._delivery is None:
            self._delivery = [rec for _pos, rec in Journal(f"{self.base}/{layout.DELIVERY}").scan()]
        return list(self._delivery)

    def append_delivery(self, fields: dict[str, Any]) -> dict[str, Any]:
        self.store.writable()
        rec = Journal(f"{self.base}/{layout.DELIVERY}").append(fields)[1]
        self.delivery_placed([rec])
        return rec

    def delivery_placed(self, recs: list[dict[str, Any]]) -> None:
        """After delivery records were appended, by a writer or a replica's import: an envelope or a setting
        that changed makes its owner's hooks run again (a spent slot does not)."""
        if self._delivery is not None:
            self._delivery += recs
        delivery_placed(self, recs)

    def next_cseq(self) -> int:
        """One collaboration-wide order (transcripts, and ``verify``'s gap check), from the journal tails.

        Read once per transaction, then kept: only this transaction appends
        while it holds the lock (a broadcast to n recipients lists and reads
        the tails once, not n times).
        """
        if self._cseq is None:
            files, log = [f"{self.base}/{layout.EVENTS}"], f"{self.base}/{layout.LOG}"
            if not self._absent(log):
                files.append(log)
            inbox = self.existing("inbox")
            if inbox is not None:
                files += [f"{inbox}/{n}" for n in self.inbox_names(inbox) if n.endswith(".jsonl")]
            tails = (self._tail(f) for f in files)
            self._cseq = max((int(t.get("cseq", 0)) for t in tails if t), default=0)
        return self._cseq + 1

    def aliases_with_inbox(self) -> list[str]:
        inbox = self.existing("inbox")
        if inbox is None:
            return []
        return sorted(n[:-6] for n in self.inbox_names(inbox) if n.endswith(".jsonl") and rules.is_alias(n[:-6]))

    def inbox_names(self, inbox: str) -> tuple[str, ...]:
        """The entries of ``inbox`` (checked by `existing`), sorted: listed again only after it changed.

        Every send needs them (`next_cseq` reads each inbox's tail), and a
        listing costs five system calls where the directory's ``lstat`` costs
        one: the store keeps the last listing per directory, keyed by its
        `fsio.dir_key`.  A new inbox file, made by any process, changes the key.
        """
        st = os.lstat(inbox)
        key = fsio.dir_key(st) if stat.S_ISDIR(st.st_mode) else None  # a link swapped in: listed, not kept
        self._listed[inbox] = key
        cached = self.store.listings.get(inbox)
        if key is not None and cached is not None and cached[0] == key:
            return cached[1]
        names = tuple(sorted(os.listdir(inbox)))
        if key is not None:
            self.store.listings[inbox] = (key, names)
        return names

    def _absent(self, path: str) -> bool:
        """A journal directly in ``base`` is missing: remembered while the directory keeps its key.

        Saves the failed ``lstat`` of a journal most collaborations never
        have (``log.jsonl``) in every later send; creating it changes the
        directory's key (the ``lstat`` that found it, taken before this one),
        so one created since is never missed.
        """
        if self.key is None:
            return False
        if self.store.absent.get(path) == self.key:
            return True
        if self.lstat(path) is None:
            self.store.absent[path] = self.key
            return True
        return False


def _line_record(reader: fsio.LineReader, offset: int) -> dict[str, Any] | None:
    """``inboxmap.record_at`` through an open reader: the record starting exactly at ``offset``, else None."""
    found = reader.line_at(offset)
    if found is None or not found[0] or not found[1]:
        return None
    try:
        return records.decode(found[0])
    except records.BadRecord:
        return None


# ---- a mirror's import: the target side of ``ports.Replica`` (agentmsg sync; the source side: replica.py) ----


def import_records(store: FileStore, collab: str, stream: str, recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Append records sealed elsewhere to ``stream`` (idempotent), then refresh what derives from them.

    :meth:`.journal.Journal.append_sealed` checks the chain and skips what it
    already holds; the derived files then come up to date exactly as the
    writer's did (:mod:`.placed`): registry, pin index, id index, inbox maps,
    transcripts, and the launcher's idle markers.
    """
    if not recs:
        return []
    base = layout.collab_dir(store.root, collab) or fsio.ensure_dir(store.root, layout.COLLABS, collab)
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
    placed = _append_sealed(tx, journal, kind, alias, recs, transcribe=not whole)
    if whole and placed and kind in ("events", "notes", "inbox"):
        from agentmsg.backends.file import transcripts

        quietly(transcripts.render_all, tx)
    return placed


def _append_sealed(tx: FileTxn, journal: Journal, kind: str, alias: str, recs: list[dict[str, Any]], *,
                   transcribe: bool) -> list[dict[str, Any]]:
    path = journal.path
    if kind == "events":
        before = tx.registry() if os.path.exists(path) else None
        placed = journal.append_sealed(recs)
        tx.wrote(os.fspath(path))
        if placed:
            pins = {r[k] for _o, r in placed for k in ("pin", "to") if isinstance(r.get(k), str)}
            events_placed(tx, before, [rec for _o, rec in placed] if transcribe else [], pins)
    elif kind == "inbox":
        placed = journal.append_sealed(recs, before=lambda at, rec: _index_copy(tx, alias, rec, at))
        tx.wrote(os.fspath(path))
        if placed:
            messages_placed(tx, alias, [Message.from_record(rec) for _o, rec in placed] if transcribe else [])
    elif kind == "receipts":
        placed = journal.append_sealed(recs)
        receipts_placed(tx, alias, placed)
    elif kind == "notes":
        placed = journal.append_sealed(recs)
        tx.wrote(os.fspath(path))
        notes_placed(tx, [rec for _o, rec in placed] if transcribe else [])
    else:  # delivery
        placed = journal.append_sealed(recs)
        tx.delivery_placed([rec for _o, rec in placed])
    return [rec for _o, rec in placed]


def _index_copy(tx: FileTxn, alias: str, rec: dict[str, Any], offset: int) -> None:
    """A broadcast copy adds its recipient to the base id; then the copy's entry, as the writer's reservation.

    In that order: reading the base id may rebuild ids/ from the journals (a damaged log), which
    holds no entry yet for a record that is not written yet.
    """
    base_id = rec.get("broadcast")
    if isinstance(base_id, str) and layout.is_uuid(base_id):
        _was, recipients = idindex.broadcast(tx, base_id)
        idindex.write_broadcast(tx, base_id, sorted({*recipients, alias}))
    idindex.index_message(tx, rec, offset)
