"""The in-memory store: the contract suite's reference backend, and fast tests.

Same port as the file store, with dicts instead of journals.  Records get
``seq``, ``ts`` and ``cseq`` the way the file store gives them; nothing is
durable (it lives as long as the object).  It decides nothing either.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterator
from typing import Any

from agentmsg import records
from agentmsg.backends.chains import chain_findings
from agentmsg.backends.reads import TxnReads
from agentmsg.domain import kinds, rules, search
from agentmsg.domain.search import Found, Query
from agentmsg.domain.values import Message, Page, Registry
from agentmsg.errors import NotFound

Record = dict[str, Any]


class _Collab:
    def __init__(self) -> None:
        self.events: list[Record] = []
        self.inboxes: dict[str, list[Record]] = {}
        self.receipts: dict[str, list[Record]] = {}
        self.notes: list[Record] = []
        self.delivery: list[Record] = []
        self.ids: dict[str, tuple[str, int]] = {}  # message id -> (alias, seq)
        self.broadcasts: dict[str, list[str]] = {}
        self.acked: dict[str, set[int]] = {}
        self.cseq = 0


def _seal(log: list[Record], fields: Record) -> Record:
    return records.seal_next(fields, log[-1] if log else None)


class MemoryStore(TxnReads):
    kind = "memory"

    def __init__(self) -> None:
        self._collabs: dict[str, _Collab] = {}
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._version = self._waited = 0  # transactions ended; as of the last wait_any
        self._presence: dict[str, dict[str, tuple[Record, float]]] = {}  # collab -> alias -> (report, when)

    def describe(self) -> dict[str, Any]:
        return {"store": "memory", "location": f"memory:{id(self):x}", "reachable": True}

    def _get(self, collab: str) -> _Collab:
        c = self._collabs.get(collab)
        if c is None or not c.events:
            raise NotFound(f"no collaboration {collab} in this store")
        return c

    def collabs(self) -> list[str]:
        return sorted(k for k, c in self._collabs.items() if c.events)

    def transaction(self, collab: str) -> MemoryTxn:
        return MemoryTxn(self, collab, self._get(collab))

    def create(self, collab: str) -> MemoryTxn:
        return MemoryTxn(self, collab, self._collabs.setdefault(collab, _Collab()))

    def events(self, collab: str) -> list[Record]:
        return list(self._get(collab).events)

    def find_message(self, message_id: str) -> Message | None:
        for collab in self.collabs():
            found = self.message(collab, message_id)
            if found is not None:
                return found
        return None

    def history(self, collab: str, alias: str) -> Iterator[Message]:
        for rec in list(self._get(collab).inboxes.get(alias, [])):
            yield Message.from_record(rec)

    def last_seq(self, collab: str, alias: str) -> int:
        return len(self._get(collab).inboxes.get(alias, []))

    def wait(self, collab: str, alias: str, seq: int, timeout: float, *, poll: float = 0.2) -> bool:
        deadline = time.monotonic() + timeout
        with self._changed:
            while self.last_seq(collab, alias) <= seq:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    # ---- replication (ports.Replica) ---------------------------------------------------------

    def _streams(self, collab: str) -> dict[str, list[Record]]:
        c = self._get(collab)
        out = {"events": c.events, "notes": c.notes, "delivery": c.delivery}
        out.update({f"inbox/{a}": log for a, log in c.inboxes.items()})
        out.update({f"receipts/{a}": log for a, log in c.receipts.items()})
        return out

    def streams(self, collab: str) -> dict[str, int]:
        with self._lock:
            return {name: log[-1]["seq"] for name, log in self._streams(collab).items() if log}

    def records_since(self, collab: str, stream: str, seq: int, limit: int = 1000) -> list[Record]:
        with self._lock:
            return [dict(r) for r in self._streams(collab).get(stream, [])[seq:seq + limit]]

    def wait_any(self, collabs: Collection[str], timeout: float) -> bool:
        """Until a transaction ends after the previous call (True) or ``timeout`` passes (False)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._version == self._waited:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            self._waited = self._version
            return True

    def report_presence(self, collab: str, alias: str, fields: Record) -> None:
        with self._lock:
            self._get(collab)  # NotFound for an unknown collaboration
            self._presence.setdefault(collab, {})[alias] = (dict(fields), time.monotonic())

    def presence(self, collab: str) -> dict[str, Record]:
        with self._lock:
            now = time.monotonic()
            return {a: {**f, "age": now - t} for a, (f, t) in self._presence.get(collab, {}).items()}

    def receipts(self, collab: str, alias: str) -> list[Record]:
        return list(self._get(collab).receipts.get(alias, []))

    def notes(self, collab: str) -> list[Record]:
        return list(self._get(collab).notes)

    def delivery_records(self, collab: str) -> list[Record]:
        return list(self._get(collab).delivery)

    def bindings(self, pin: str) -> list[tuple[str, str]]:
        return self.bound_in(self.collabs(), pin)

    def search(self, query: Query) -> Found:
        """A scan of every record: no index to keep."""
        msgs: list[Message] = []
        notes: list[tuple[str, Record]] = []
        for cid in [query.collab] if query.collab else self.collabs():
            c = self._get(cid)
            msgs += [Message.from_record(r) for recs in c.inboxes.values() for r in recs]
            notes += [(cid, n) for n in c.notes if n.get("type") == kinds.NOTE]
        return Found(search.scan(query, msgs, notes), "scan", "memory store: every record was read")

    def rebuild(self, collab: str) -> list[str]:
        self._get(collab)
        return []  # nothing derived is kept apart from the records

    def verify(self, collab: str | None) -> tuple[int, list[Record]]:
        findings: list[Record] = []
        count = 0
        for cid in [collab] if collab else self.collabs():
            c = self._get(cid)
            logs = [c.events, c.notes, c.delivery, *c.inboxes.values(), *c.receipts.values()]
            count += len(logs)
            for log in logs:
                findings += chain_findings(f"memory:{cid}", log)
        return count, findings

    def clean_temp(self, older_than: float = 3600.0) -> int:
        return 0


class MemoryTxn:
    def __init__(self, store: MemoryStore, collab: str, data: _Collab) -> None:
        self.store, self.collab, self.data = store, collab, data

    def __enter__(self) -> MemoryTxn:
        self.store._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.store._version += 1
        self.store._changed.notify_all()
        self.store._lock.release()

    def _alias(self, alias: str) -> str:
        if not rules.is_alias(alias):
            from agentmsg.errors import UsageError

            raise UsageError(f"invalid alias {str(alias)[:40]!r}: must match ^[a-z][a-z0-9_-]{{0,31}}$")
        return alias

    def _cseq(self) -> int:
        self.data.cseq += 1
        return self.data.cseq

    def registry(self) -> Registry:
        reg = rules.replay(self.data.events)
        if reg is None:
            raise NotFound(f"collaboration {self.collab} has no opening record")
        return reg

    def events(self) -> list[Record]:
        return list(self.data.events)

    def append_event(self, fields: Record) -> Record:
        rec = _seal(self.data.events, dict(fields, cseq=self._cseq()))
        self.data.events.append(rec)
        return rec

    def message(self, message_id: str) -> Message | None:
        where = self.data.ids.get(message_id)
        if where is None:
            return None
        return Message.from_record(self.data.inboxes[where[0]][where[1] - 1])

    def broadcast(self, base_id: str) -> tuple[bool | None, list[str]]:
        if base_id in self.data.broadcasts:
            return True, list(self.data.broadcasts[base_id])
        return (False, []) if base_id in self.data.ids else (None, [])

    def append_message(self, fields: Record, *, broadcast_of: dict[str, str] | None = None) -> Message:
        if broadcast_of is not None:
            self.data.broadcasts[fields["broadcast"]] = list(broadcast_of)
        inbox = self.data.inboxes.setdefault(fields["to"], [])
        rec = _seal(inbox, dict(fields, cseq=self._cseq()))
        inbox.append(rec)
        self.data.ids[rec["id"]] = (rec["to"], rec["seq"])
        return Message.from_record(rec)

    def repair_binding(self, pin: str) -> None:
        pass  # nothing derived is kept apart from the records

    def since(self, alias: str, seq: int) -> list[Message]:
        return [Message.from_record(r) for r in self.data.inboxes.get(alias, [])[seq:]]

    def _unacked(self, alias: str, priority_first: bool = True) -> list[Record]:
        acked = self.data.acked.get(alias, set())
        recs = [r for r in self.data.inboxes.get(alias, []) if r["seq"] not in acked]
        return sorted(recs, key=lambda r: (priority_first and r["priority"] != kinds.HIGH, r["seq"]))

    def unacked(self, alias: str, *, limit: int, skip: Collection[int] = (), requests_only: bool = False,
                priority_first: bool = True) -> Page:
        self._alias(alias)
        every = self._unacked(alias, priority_first)
        pool = [r for r in every if not requests_only or r["kind"] == kinds.REQUEST]
        chosen = [Message.from_record(r) for r in pool if r["seq"] not in skip][:limit]
        return Page(chosen, len(pool), requests=sum(r["kind"] == kinds.REQUEST for r in every),
                    high=sum(r["priority"] == kinds.HIGH for r in every),
                    skipped=sum(1 for r in pool if r["seq"] in skip))

    def unacked_ids(self, alias: str) -> list[str]:
        return [r["id"] for r in sorted(self._unacked(alias), key=lambda r: r["seq"])]

    def total(self, alias: str) -> int:
        return len(self.data.inboxes.get(alias, []))

    def append_receipts(self, alias: str, items: list[Record], *, durable: bool = True,
                        head: bool = True) -> list[Record]:
        log = self.data.receipts.setdefault(alias, [])
        out = []
        for fields in items:
            rec = _seal(log, dict(fields))
            log.append(rec)
            out.append(rec)
            if rec.get("type") == kinds.ACK and rec.get("message") in self.data.ids:
                self.data.acked.setdefault(alias, set()).add(self.data.ids[rec["message"]][1])
        return out

    def acked(self, alias: str, message: Message) -> Record | None:
        return next((r for r in self.data.receipts.get(alias, [])
                     if r.get("type") == kinds.ACK and r.get("message") == message.id), None)

    def message_receipts(self, message: Message) -> list[Record]:
        return [r for r in self.data.receipts.get(message.to, []) if r.get("message") == message.id]

    def receipts_since(self, alias: str, position: int) -> tuple[list[Record], int]:
        log = self.data.receipts.get(alias, [])
        position = position if position <= len(log) else 0
        return list(log[position:]), len(log)

    def notes(self) -> list[Record]:
        return list(self.data.notes)

    def append_note(self, fields: Record) -> Record:
        rec = _seal(self.data.notes, dict(fields, cseq=self._cseq()))
        self.data.notes.append(rec)
        return rec

    def delivery_records(self) -> list[Record]:
        return list(self.data.delivery)

    def append_delivery(self, fields: Record) -> Record:
        rec = _seal(self.data.delivery, dict(fields))
        self.data.delivery.append(rec)
        return rec
