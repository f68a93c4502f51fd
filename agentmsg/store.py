"""The mailbox on plain files: collaborations, registry, messages, receipts.

``Store`` is the small interface the CLI and the hooks use; ``FileStore`` is
the plain-file backend (see docs/ARCHITECTURE.md for the layout).  Every
write happens under the collaboration's lock and is fsynced before the
method returns, so a returned value means "durably stored".
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from . import fsio, mailbox, model, records
from .errors import Closed, Conflict, IdentityError, NotFound, UnknownAgent, UnsafePath, UsageError
from .journal import Journal, Problem
from .mailbox import COLLAB_SUBDIRS as COLLAB_SUBDIRS  # re-exported: the layout, as before
from .model import Message, Pin, Registry
from .paths import pin_key
from .records import Record


@dataclass(frozen=True)
class Draft:
    to: str
    kind: str
    priority: str
    subject: str
    body: str
    id: str | None = None
    reply_to: str | None = None


@dataclass(frozen=True)
class Sent:
    message: Message
    already: bool


@dataclass(frozen=True)
class Inbox:
    alias: str
    messages: list[Message]
    problems: list[Problem] = field(default_factory=list)


@dataclass(frozen=True)
class MessageState:
    enqueued: str
    presented: list[dict[str, Any]]
    acknowledged: str | None
    replied: list[str]
    notify: dict[str, Any] | None

    @property
    def label(self) -> str:
        if self.acknowledged:
            return "acknowledged"
        if self.presented:
            return "presented"
        return "enqueued"


class Store(Protocol):
    """What the CLI and hooks need; a PostgreSQL backend will satisfy it too."""

    root: Path

    def open(self, opener: Pin, alias: str, label: str, task: str, notify: dict[str, Any]) -> Registry: ...
    def join(self, collab: str, who: Pin, alias: str, *, succeeds: Pin | None = None,
             reason: str | None = None, notify: dict[str, Any] | None = None) -> Registry: ...
    def leave(self, collab: str, who: Pin) -> str: ...
    def close(self, collab: str, who: Pin) -> dict[str, list[str]]: ...
    def registry(self, collab: str) -> Registry: ...
    def send(self, collab: str, who: Pin, draft: Draft) -> list[Sent]: ...
    def inbox(self, collab: str, alias: str) -> Inbox: ...
    def message(self, collab: str, message_id: str) -> Message: ...
    def state(self, collab: str, msg: Message) -> MessageState: ...
    def ack(self, collab: str, who: Pin, message_id: str) -> tuple[Record, bool]: ...
    def receipt(self, collab: str, alias: str, fields: Record) -> Record: ...
    def log_append(self, collab: str, who: Pin, text: str, corrects: str | None) -> Record: ...
    def log_entries(self, collab: str) -> list[Record]: ...
    def events(self, collab: str) -> list[Record]: ...
    def bindings(self, who: str) -> list[tuple[str, str]]: ...
    def collabs(self) -> list[str]: ...


REGISTRY_HEADER = (
    "# agentmsg registry: authoritative alias -> participant map.\n"
    "# Rebuilt from collab.jsonl under the write lock; edits here are overwritten.\n"
    "# Written in YAML's JSON-compatible style so stdlib-only hooks can read it.\n"
)


class FileStore:
    def __init__(self, root: Path, *, lock_timeout: float = 30.0) -> None:
        # The root itself may be a link (e.g. onto a shared disk); links
        # *inside* it are refused.  Resolving once makes that rule uniform.
        self.root = Path(os.path.realpath(root))
        self.lock_timeout = lock_timeout

    # ---- paths -----------------------------------------------------------

    def _cdir(self, collab: str) -> Path:
        path = mailbox.collab_dir(self.root, collab)  # a planted link is refused before anything is read
        if path is None:
            raise NotFound(f"no collaboration {collab} under {self.root}")
        return path

    @contextmanager
    def _locked(self, collab: str) -> Iterator[Path]:
        base = self._cdir(collab)
        with fsio.locked(base / "write.lock", self.lock_timeout):
            yield base

    # ---- collaborations ----------------------------------------------------

    def open(self, opener: Pin, alias: str, label: str, task: str, notify: dict[str, Any]) -> Registry:
        collab = str(uuid.uuid4())
        self._check_pin_index(str(opener))  # refuse a planted link before writing anything
        base = fsio.ensure_dir(self.root, "collabs", collab)
        with fsio.locked(base / "write.lock", self.lock_timeout):
            ev = {"type": "opened", "collab": collab, "alias": alias, "pin": str(opener),
                  "runtime": opener.runtime, "label": label, "task": task, "notify": notify}
            # The pin index first: readers check every entry against the registry,
            # so an entry left by a crash before the event is harmless; a missing one is not.
            self._bind(str(opener), collab, alias)
            self._event(base, ev)
            reg = self._rebuild_registry(collab)
        return reg

    def join(self, collab: str, who: Pin, alias: str, *, succeeds: Pin | None = None,
             reason: str | None = None, notify: dict[str, Any] | None = None) -> Registry:
        self._check_pin_index(str(who))
        if succeeds is not None:
            self._check_pin_index(str(succeeds))
        with self._locked(collab) as base:
            reg = self._open_registry(collab)
            current = reg.alias_of(str(who))
            if succeeds is None and current == alias:
                self._bind(str(who), collab, alias)  # the same join again: repair the index, change nothing
                return reg
            if succeeds is None:
                if current is not None:
                    raise Conflict(f"{who} is already bound to alias {current} in this collaboration")
                if alias in reg.participants:
                    raise Conflict(
                        f"alias {alias} is taken by {reg.participants[alias].pin}; "
                        "use join --succeeds OLD_PIN --reason TEXT for a deliberate replacement"
                    )
                self._bind(str(who), collab, alias)
                self._event(base, {"type": "joined", "alias": alias, "pin": str(who), "runtime": who.runtime,
                                   "notify": notify or {"adapter": "hook"}})
            else:
                old = reg.participants.get(alias)
                if old is None or old.pin != str(succeeds):
                    raise Conflict(f"alias {alias} is not held by {succeeds}; nothing to succeed")
                if current is not None and current != alias:
                    raise Conflict(f"{who} is already bound to alias {current} in this collaboration")
                if not reason:
                    raise UsageError("--succeeds needs --reason TEXT: a takeover is recorded in the log")
                self._bind(str(who), collab, alias)
                self._event(base, {"type": "succeeded", "alias": alias, "pin": str(who),
                                   "old_pin": str(succeeds), "runtime": who.runtime, "reason": reason})
                self._unbind(str(succeeds), collab)
            return self._rebuild_registry(collab)

    def leave(self, collab: str, who: Pin) -> str:
        with self._locked(collab) as base:
            reg = self._open_registry(collab, allow_closed=True)
            alias = self.require_alias(reg, who)
            self._event(base, {"type": "left", "alias": alias, "pin": str(who)})
            self._rebuild_registry(collab)
            self._unbind(str(who), collab)
        return alias

    def close(self, collab: str, who: Pin) -> dict[str, list[str]]:
        with self._locked(collab) as base:
            reg = self._open_registry(collab)
            if str(who) != reg.opener and who.runtime != "human":
                raise IdentityError("only the opener or a human: pin may close a collaboration")
            unresolved = {a: [m.id for m in self.inbox(collab, a).messages] for a in reg.participants}
            unresolved = {a: ids for a, ids in unresolved.items() if ids}
            self._event(base, {"type": "closed", "by": str(who), "unresolved": unresolved})
            self._rebuild_registry(collab)
            for p in reg.participants.values():
                self._unbind(p.pin, collab)
        return unresolved

    def set_notify(self, collab: str, who: Pin, notify: dict[str, Any]) -> None:
        with self._locked(collab) as base:
            alias = self.require_alias(self._open_registry(collab), who)
            self._event(base, {"type": "notify-set", "alias": alias, "notify": notify})
            self._rebuild_registry(collab)

    def registry(self, collab: str) -> Registry:
        doc = mailbox.registry_document(self._cdir(collab))
        if doc is not None:
            try:
                return model.registry_from_document(doc)
            except (ValueError, KeyError, TypeError, AttributeError):
                pass  # damaged derived file: fall back to the records
        return self._replay(collab)

    def _replay(self, collab: str) -> Registry:
        reg: Registry | None = None
        for ev in self.events(collab):
            reg = model.apply_event(reg, ev)
        if reg is None:
            raise NotFound(f"collaboration {collab} has no opening record")
        return reg

    def _rebuild_registry(self, collab: str) -> Registry:
        reg = self._replay(collab)
        last = Journal(self._cdir(collab) / "collab.jsonl").last()
        # Names the record it was built from: a registry left behind by a crash
        # between the event and this rewrite reads as stale and is replayed.
        built_from = {"seq": last["seq"], "sum": last["sum"]} if last else None
        doc = _yaml_json(model.registry_document(reg) | {"built_from": built_from})
        fsio.atomic_write(self._cdir(collab) / "registry.yaml", REGISTRY_HEADER.encode() + doc.encode() + b"\n")
        return reg

    def _open_registry(self, collab: str, *, allow_closed: bool = False) -> Registry:
        reg = self.registry(collab)
        if reg.closed and not allow_closed:
            raise Closed(f"collaboration {collab} was closed at {reg.closed_at}; it accepts no changes")
        return reg

    def require_alias(self, reg: Registry, who: Pin) -> str:
        alias = reg.alias_of(str(who))
        if alias is None:
            raise IdentityError(f"{who} is not bound to any alias in collaboration {reg.collab}")
        return alias

    def events(self, collab: str) -> list[Record]:
        return [rec for _, rec in Journal(self._cdir(collab) / "collab.jsonl").scan()]

    def _event(self, base: Path, fields: Record) -> Record:
        from .render import event_section

        fields = dict(fields, cseq=self._next_cseq(base))
        fsio.refuse_link(base / "collaboration.md")
        rec = Journal(base / "collab.jsonl").append(fields)[1]
        _view(fsio.append, base / "collaboration.md", event_section(rec).encode())
        return rec

    def _next_cseq(self, base: Path) -> int:
        """One collaboration-wide order for the transcript, from the file tails."""
        files = [base / "collab.jsonl", base / "log.jsonl"]
        inbox = base / "inbox"
        if inbox.is_dir():
            files += sorted(inbox.glob("*.jsonl"))
        tails = (Journal(f).last() for f in files)
        return 1 + max((t.get("cseq", 0) for t in tails if t), default=0)

    def collabs(self) -> list[str]:
        base = fsio.existing_dir(self.root, "collabs")
        return sorted(p.name for p in base.iterdir() if mailbox.is_uuid(p.name)) if base else []

    # ---- pin index (derived) ----------------------------------------------

    def _check_pin_index(self, who: str) -> None:
        fsio.refuse_link(fsio.ensure_dir(self.root, "pins") / f"{pin_key(who)}.json")

    def bindings(self, who: str) -> list[tuple[str, str]]:
        """Active (collab, alias) bindings of a pin, confirmed against each registry."""
        return [(collab, alias) for collab, alias, _doc in mailbox.bindings(self.root, who, self._registry_document)]

    def _registry_document(self, collab: str) -> dict[str, Any] | None:
        try:
            return model.registry_document(self.registry(collab))
        except NotFound:
            return None

    @contextmanager
    def _pins(self, who: str) -> Iterator[tuple[Path, list[dict[str, str]]]]:
        base = fsio.ensure_dir(self.root, "pins")
        path = base / f"{pin_key(who)}.json"
        with fsio.locked(base / ".lock", self.lock_timeout):
            raw = fsio.read_bytes(path)
            entries: list[dict[str, str]] = json.loads(raw)["bindings"] if raw else []
            yield path, entries
            fsio.atomic_write(path, json.dumps({"pin": who, "bindings": entries}).encode())

    def _bind(self, who: str, collab: str, alias: str) -> None:
        with self._pins(who) as (_, entries):
            entries[:] = [e for e in entries if e["collab"] != collab] + [{"collab": collab, "alias": alias}]

    def _unbind(self, who: str, collab: str) -> None:
        with self._pins(who) as (_, entries):
            entries[:] = [e for e in entries if e["collab"] != collab]

    # ---- messages ----------------------------------------------------------

    def send(self, collab: str, who: Pin, draft: Draft) -> list[Sent]:
        with self._locked(collab) as base:
            reg = self._open_registry(collab)
            sender = self.require_alias(reg, who)
            parent = self._reply_target(collab, sender, draft.reply_to) if draft.reply_to else None
            to = draft.to or (_other_party(parent, sender) if parent else "")
            base_id = draft.id or str(uuid.uuid4())
            recipients = self._recipients(reg, sender, to)
            if draft.id:
                recipients = self._replayed_recipients(base, base_id, to, recipients)
            planned = []
            for alias in recipients:
                fields = {
                    "type": "message", "id": base_id if to != "all" else _copy_id(base_id, alias),
                    "collab": collab, "sender": sender, "sender_pin": str(who), "sender_runtime": who.runtime,
                    "to": alias, "kind": draft.kind, "priority": draft.priority, "subject": draft.subject,
                    "body": draft.body, "reply_to": f"{parent.to}/{parent.id}" if parent else None,
                    "broadcast": base_id if to == "all" else None,
                }
                fields["digest"] = _digest(fields)
                planned.append((fields, self._existing(base, fields)))
            # Every copy is checked (conflicts, planted links) before any is stored:
            # a refused broadcast leaves nothing behind.
            for fields, existing in planned:
                if existing is None:
                    for view in (fsio.ensure_dir(base, "transcripts") / f"{fields['to']}.md",
                                 base / "collaboration.md"):
                        fsio.refuse_link(view)
            if to == "all" and all(existing is None for _, existing in planned):
                mailbox.write_index(base, base_id, {"broadcast": recipients})
            return [Sent(Message.from_record(existing), already=True) if existing is not None
                    else self._store_message(base, fields, parent) for fields, existing in planned]

    def _replayed_recipients(self, base: Path, base_id: str, to: str, recipients: list[str]) -> list[str]:
        """A re-sent id keeps its first meaning: same kind (broadcast or not), same recipients."""
        found = mailbox.read_index(base, base_id)
        doc = found[0] if found else None
        if doc is None:
            return recipients
        if ("broadcast" in doc) != (to == "all"):
            what = "a broadcast" if "broadcast" in doc else "a direct message"
            raise Conflict(f"message id {base_id} is already stored as {what}; nothing was stored")
        return list(doc["broadcast"]) if to == "all" else recipients

    def _existing(self, base: Path, fields: Record) -> Record | None:
        """The stored record for this id if its content matches; Conflict if it differs."""
        found = self._lookup(base, fields["id"])
        if found is None:
            return None
        if found[1]["digest"] != fields["digest"]:
            raise Conflict(f"message id {fields['id']} is already stored with different content")
        return found[1]

    def _recipients(self, reg: Registry, sender: str, to: str) -> list[str]:
        if to == "all":
            others = sorted(a for a in reg.active() if a != sender)
            if not others:
                raise UnknownAgent("all (no other active participants)")
            return others
        if to not in reg.participants or not model.ALIAS_RE.fullmatch(to):
            raise UnknownAgent(_printable(to))
        if not reg.participants[to].active:
            raise Conflict(f"{to} has left this collaboration; nothing was stored")
        return [to]

    def _reply_target(self, collab: str, sender: str, ref: str) -> Message:
        who, _, mid = ref.rpartition("/")
        mid = model.message_id(mid)
        parent = self.message(collab, mid)
        if who and who not in (parent.to, parent.sender):
            raise NotFound(f"message {mid} is not in {who}'s conversation")
        if sender not in (parent.to, parent.sender):
            raise IdentityError(f"only {parent.sender} or {parent.to} may reply to {mid}")
        return parent

    def _store_message(self, base: Path, fields: Record, parent: Message | None) -> Sent:
        flagged = _flags(fields["subject"] + "\n" + fields["body"])
        if flagged:
            fields["flags"] = list(flagged)
        fields["cseq"] = self._next_cseq(base)
        inbox = Journal(fsio.ensure_dir(base, "inbox") / f"{fields['to']}.jsonl")
        if parent is not None:
            # Before the reply itself: a crash in between leaves a mark naming a message
            # that does not exist (``state`` skips it), never a reply that lost its mark.
            self._receipt(base, parent.to, {"type": "replied", "message": parent.id, "by": fields["id"]})
        _, rec = inbox.append(fields, before=lambda at, sealed: self._index(base, sealed, at))
        msg = Message.from_record(rec)
        self._transcribe(base, msg)
        return Sent(msg, already=False)

    def _index(self, base: Path, rec: Record, offset: int) -> None:
        doc = {"inbox": rec["to"], "offset": offset, "seq": rec["seq"], "digest": rec["digest"]}
        mailbox.write_index(base, rec["id"], doc)

    def _lookup(self, base: Path, mid: str) -> tuple[int, Record] | None:
        """(offset, record) for an id, checked against the inbox it points to.

        A pointer whose record is missing is a reservation left by a crash
        between indexing and appending; it counts as absent.
        """
        mid = model.message_id(mid)
        found = mailbox.read_index(base, mid) if fsio.existing_dir(base, "ids") else None
        doc = found[0] if found else None
        if doc is None or not isinstance(doc.get("inbox"), str) or not model.ALIAS_RE.fullmatch(doc["inbox"]):
            return None
        rec = Journal(base / "inbox" / f"{doc['inbox']}.jsonl").read_at(doc["offset"])
        return (doc["offset"], rec) if rec is not None and rec.get("id") == mid else None

    def message(self, collab: str, message_id: str) -> Message:
        found = self._lookup(self._cdir(collab), message_id)
        if found is None:
            raise NotFound(f"no message {message_id} in collaboration {collab}")
        return Message.from_record(found[1])

    def find_message(self, message_id: str) -> Message:
        for collab in self.collabs():
            try:
                base = self._cdir(collab)  # refuses a symlinked collaboration directory
            except NotFound:
                continue
            found = self._lookup(base, message_id)
            if found is not None:
                return Message.from_record(found[1])
        raise NotFound(f"no message {message_id} under {self.root}")

    def messages(self, collab: str, alias: str, problems: list[Problem] | None = None, *,
                 offset: int = 0) -> Iterator[Message]:
        """Messages addressed to ``alias`` from ``offset`` on, in sequence order."""
        path = self._cdir(collab) / "inbox" / f"{model.alias(alias)}.jsonl"
        for _, rec in Journal(path).scan(offset, problems):
            yield Message.from_record(rec)

    def inbox_end(self, collab: str, alias: str) -> int:
        """The offset new messages for ``alias`` will be appended at."""
        return fsio.next_offset(self._cdir(collab) / "inbox" / f"{model.alias(alias)}.jsonl")

    # ---- receipts and the read cursor ----------------------------------------

    def receipt(self, collab: str, alias: str, fields: Record) -> Record:
        with self._locked(collab) as base:
            return self._receipt(base, alias, fields)

    def _receipt(self, base: Path, alias: str, fields: Record) -> Record:
        alias = model.alias(alias)
        offset, rec = Journal(fsio.ensure_dir(base, "receipts") / f"{alias}.jsonl").append(fields)
        if "message" in fields:
            mailbox.index_receipt(base, fields["message"], offset)
        return rec

    def _message_receipts(self, base: Path, mid: str) -> list[Record]:
        found = mailbox.read_index(base, mid)
        if found is None or not isinstance(found[0].get("inbox"), str):
            return []
        journal = Journal(base / "receipts" / f"{model.alias(found[0]['inbox'])}.jsonl")
        recs = (journal.read_at(offset) for offset in found[1])
        return [rec for rec in recs if rec is not None and rec.get("message") == mid]

    def receipts(self, collab: str, alias: str, offset: int = 0) -> Iterator[tuple[int, Record]]:
        return Journal(self._cdir(collab) / "receipts" / f"{model.alias(alias)}.jsonl").scan(offset)

    def inbox(self, collab: str, alias: str) -> Inbox:
        """Unacknowledged messages, oldest first; cost follows unread, not history."""
        base = self._cdir(collab)
        model.alias(alias)
        problems: list[Problem] = []
        msgs, _view = mailbox.pending(base, alias, problems=problems)
        return Inbox(alias, [Message.from_record(rec) for rec in msgs], problems)

    def _advance(self, base: Path, alias: str) -> None:
        """Fold new acks into the cursor (caller holds the lock): unacknowledged offsets plus a scan mark."""
        cur = mailbox.cursor(base, alias)
        rcpt = Journal(base / "receipts" / f"{alias}.jsonl")
        acked = {rec["message"] for _, rec in rcpt.scan(cur["rcpt"]) if rec["type"] == "ack"}
        unacked, scanned = mailbox.classify(Journal(base / "inbox" / f"{alias}.jsonl"), cur, acked)
        doc = {"scanned": scanned, "unacked": [off for off, _rec in unacked], "rcpt": rcpt.size()}
        fsio.atomic_write(fsio.ensure_dir(base, "state") / f"{alias}.json", json.dumps(doc).encode(), durable=False)

    def ack(self, collab: str, who: Pin, message_id: str) -> tuple[Record, bool]:
        """Record the recipient's acknowledgment; returns (receipt, already)."""
        with self._locked(collab) as base:
            reg = self._open_registry(collab)
            alias = self.require_alias(reg, who)
            found = self._lookup(base, message_id)
            if found is None:
                raise NotFound(f"no message {message_id} in collaboration {collab}")
            offset, msg = found[0], Message.from_record(found[1])
            if msg.to != alias:
                raise IdentityError(f"only the recipient ({msg.to}) may acknowledge {message_id}")
            if self._is_acked(base, alias, message_id, offset):
                return self._first_ack(base, alias, message_id), True
            rec = self._receipt(base, alias, {"type": "ack", "message": message_id, "by": str(who)})
            self._advance(base, alias)
        return rec, False

    def _is_acked(self, base: Path, alias: str, message_id: str, offset: int) -> bool:
        cur = mailbox.cursor(base, alias)
        if offset < cur["scanned"] and offset not in cur["unacked"]:
            return True
        rcpt = Journal(base / "receipts" / f"{alias}.jsonl").scan(cur["rcpt"])
        return any(r["type"] == "ack" and r["message"] == message_id for _, r in rcpt)

    def _first_ack(self, base: Path, alias: str, message_id: str) -> Record:
        for rec in self._message_receipts(base, message_id):
            if rec["type"] == "ack":
                return rec
        for _, rec in Journal(base / "receipts" / f"{alias}.jsonl").scan():  # index lost in a crash
            if rec["type"] == "ack" and rec["message"] == message_id:
                return rec
        raise NotFound(f"acknowledgment of {message_id} is missing from the receipts")

    def state(self, collab: str, msg: Message) -> MessageState:
        """A message's distinct states, read from its own receipts only."""
        presented: list[dict[str, Any]] = []
        acked: str | None = None
        replied: list[str] = []
        notify: dict[str, Any] | None = None
        for rec in self._message_receipts(self._cdir(collab), msg.id):
            if rec["type"] == "presented":
                presented.append({"attempt": rec["attempt"], "ts": rec["ts"], "host": rec.get("host")})
            elif rec["type"] == "ack" and acked is None:
                acked = rec["ts"]
            elif rec["type"] == "replied" and self._lookup(self._cdir(collab), rec["by"]) is not None:
                replied.append(rec["by"])
            elif rec["type"] == "notify":
                notify = {"ok": rec["ok"], "detail": rec["detail"], "ts": rec["ts"]}
        return MessageState(msg.ts, presented, acked, replied, notify)

    def inbox_total(self, collab: str, alias: str) -> int:
        """How many messages ``alias`` was ever sent (the last sequence number)."""
        last = Journal(self._cdir(collab) / "inbox" / f"{model.alias(alias)}.jsonl").last()
        return last["seq"] if last else 0

    # ---- log and transcripts ---------------------------------------------------

    def log_append(self, collab: str, who: Pin, text: str, corrects: str | None) -> Record:
        with self._locked(collab) as base:
            reg = self._open_registry(collab, allow_closed=True)
            alias = reg.alias_of(str(who))
            if alias is None:
                if who.runtime != "human":
                    raise IdentityError(f"{who} is not bound in collaboration {collab}")
                alias = str(who)
            if corrects and not any(e["id"] == corrects for e in self.log_entries(collab)):
                raise NotFound(f"no log entry {corrects} to correct")
            fields = {"type": "note", "id": str(uuid.uuid4()), "author": alias, "text": text,
                      "corrects": corrects, "cseq": self._next_cseq(base)}
            fsio.refuse_link(base / "collaboration.md")
            rec = Journal(base / "log.jsonl").append(fields)[1]
            self._transcribe_entry(base, rec)
        return rec

    def log_entries(self, collab: str) -> list[Record]:
        return [rec for _, rec in Journal(self._cdir(collab) / "log.jsonl").scan()]

    def _transcribe(self, base: Path, msg: Message) -> None:
        """Keep the Markdown views current; ``render`` rebuilds them from records.

        The message is already durable here, so a failure to update a derived
        view must not turn a stored send into a reported failure.
        """
        _view(self._append_sections, base, msg)

    def _append_sections(self, base: Path, msg: Message) -> None:
        from .render import inbox_header, message_section

        section = message_section(msg).encode()
        inbox_md = fsio.ensure_dir(base, "transcripts") / f"{msg.to}.md"
        if not fsio.file_size(inbox_md):
            section = inbox_header(msg.collab, msg.to).encode() + section
        fsio.append(inbox_md, section)
        fsio.append(base / "collaboration.md", message_section(msg).encode())

    def _transcribe_entry(self, base: Path, rec: Record) -> None:
        from .render import log_section

        _view(fsio.append, base / "collaboration.md", log_section(rec).encode())

    def render(self, collab: str) -> list[Path]:
        """Regenerate every Markdown transcript of a collaboration from records."""
        from .render import collaboration_md, inbox_md

        with self._locked(collab) as base:
            reg = self.registry(collab)
            by_alias = {a: list(self.messages(collab, a)) for a in reg.participants}
            written = [base / "collaboration.md"]
            fsio.atomic_write(written[0], collaboration_md(reg, self.events(collab), by_alias,
                                                           self.log_entries(collab)).encode())
            for alias, msgs in by_alias.items():
                path = fsio.ensure_dir(base, "transcripts") / f"{alias}.md"
                fsio.atomic_write(path, inbox_md(reg, alias, msgs).encode())
                written.append(path)
        return written


def _view(update: Callable[..., None], *args: Any) -> None:
    """Update a derived Markdown view after the records are durable.

    ``log render`` rebuilds views from records, so a failure here (full disk,
    a planted symlink) must not report a stored message as not stored.
    """
    try:
        update(*args)
    except (OSError, UnsafePath):
        pass


_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")


def _yaml_json(doc: dict[str, Any]) -> str:
    """JSON that YAML parsers read back identically (astral characters stay literal)."""
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _other_party(parent: Message, sender: str) -> str:
    return parent.sender if parent.to == sender else parent.to


def _copy_id(base_id: str, alias: str) -> str:
    """Each broadcast copy gets its own stable id, derived from the broadcast id."""
    return str(uuid.uuid5(uuid.UUID(base_id), alias))


def _digest(fields: Record) -> str:
    keys = ("sender", "to", "kind", "priority", "subject", "body", "reply_to")
    return records.sha256_hex(records.canonical({k: fields[k] for k in keys}))


def _flags(text: str) -> tuple[str, ...]:
    from .flags import detect

    return detect(text)


def _printable(name: str) -> str:
    """A raw recipient name, made safe to print on one line."""
    shown = name.encode("unicode_escape", "backslashreplace").decode("ascii")
    return shown[:64] + ("..." if len(shown) > 64 else "")
