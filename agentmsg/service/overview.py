"""An overseer's live picture of one or every collaboration, read in pages through the port.

``Overview`` is what ``agentmsg top`` draws from.  It reads only through
``ports.Store`` (so it works on any backend) and never whole histories:

* new messages: ``Store.last_seq`` per inbox, then ``Store.since`` from the
  last sequence number seen (at start, only the last ``recent`` of each inbox);
* unacknowledged requests and stuck messages: one ``Store.unacked`` page per
  inbox (``sample`` messages), each message's own receipts
  (``Store.message_receipts``);
* participants: ``Store.registry``; envelopes: ``Store.delivery_records``
  (bounded by the slots of each envelope).

Acting (reply, ack, close) goes through ``service.commands`` as the
overseer's own ``human:`` pin, under the same rules as the CLI.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from agentmsg.domain import envelope, kinds
from agentmsg.domain.values import Message, Pin, Registry
from agentmsg.errors import AgentmsgError
from agentmsg.ports import Store

#: A message shown this many times to its recipient and still not acknowledged is stuck.
STUCK_PRESENTED = 3


@dataclass
class Person:
    collab: str
    alias: str
    pin: str
    runtime: str
    active: bool
    notify: str
    pending: int = 0
    requests: int = 0
    delivery: dict[str, Any] | None = None
    #: working, idle, listening, gone or unknown (runtime/presence.py); None when the root is not known
    presence: str | None = None


@dataclass
class Stuck:
    message: Message
    reason: str


@dataclass
class Overview:
    store: Store
    only: str | None = None
    #: the state root, where this machine's presence is read (None: no presence column)
    root: str | None = None
    recent: int = 200
    sample: int = 30
    registries: dict[str, Registry] = field(default_factory=dict)
    people: list[Person] = field(default_factory=list)
    requests: list[Message] = field(default_factory=list)
    stuck: list[Stuck] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: live claims (docs/CLAIMS.md): (collaboration, claim), by repository and pattern
    claims: list[tuple[str, Any]] = field(default_factory=list)
    #: gates still waiting (docs/HANDOFFS.md): (collaboration, gate), oldest first
    gates: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: each collaboration's gate fold, fed each inbox's messages once (read on from the last seq read)
    _gate_fold: dict[str, Any] = field(default_factory=dict)
    _gate_upto: dict[tuple[str, str], int] = field(default_factory=dict)
    #: each collaboration's events read so far, for the claims' fold (read on from the last one, by seq)
    _events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seen_upto: dict[tuple[str, str], int] = field(default_factory=dict)
    #: The pin this view reads as (``service.readers``): None is the owner, who sees every collaboration;
    #: a pin sees those it is a current member of, asked again at every refresh (a takeover ends it).
    reader: Pin | None = None

    def collabs(self) -> list[str]:
        if self.reader is not None:
            mine = [cid for cid, _alias in self.store.bindings(str(self.reader))]
            return [c for c in mine if c == self.only] if self.only else mine
        return [self.only] if self.only else self.store.collabs()

    def total_messages(self) -> int:
        """Every message stored in the inboxes read (each inbox's last sequence number): ``messages`` holds
        only the newest ``recent``, and the view says how many it left out."""
        return sum(max(0, seen) for seen in self.seen_upto.values())

    def label(self, collab: str) -> str:
        reg = self.registries.get(collab)
        return reg.label if reg is not None else ""

    # ---- the cheap poll: new messages only ------------------------------------------------

    def poll(self) -> int:
        """Fold in messages appended since the last poll; how many arrived."""
        new: list[Message] = []
        for (cid, alias), seen in list(self.seen_upto.items()):
            try:
                last = self.store.last_seq(cid, alias)
                if last <= seen:
                    continue
                got = self.store.since(cid, alias, max(seen, last - self.recent))
            except (AgentmsgError, OSError) as exc:  # one unreadable inbox must not stop the view
                self._error(cid, alias, exc)
                continue
            self.seen_upto[(cid, alias)] = max([last, *(m.seq for m in got)])
            new.extend(got)
        if new:
            merged = {(m.collab, m.to, m.seq): m for m in self.messages + new}
            self.messages = sorted(merged.values(), key=lambda m: (m.ts, m.cseq or 0), reverse=True)[:self.recent]
        return len(new)

    # ---- the full refresh: registries, pages, envelopes ---------------------------------------

    def refresh(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        self.errors = []
        people: list[Person] = []
        requests: list[Message] = []
        stuck: list[Stuck] = []
        for cid in self.collabs():
            try:
                reg = self.store.registry(cid)
            except (AgentmsgError, OSError) as exc:
                self._error(cid, "", exc)
                continue
            self.registries[cid] = reg
            envs = self._envelopes(cid)
            for alias, p in sorted(reg.participants.items()):
                self.seen_upto.setdefault((cid, alias), -1)
                person = Person(cid, alias, p.pin, p.runtime, p.active, str(p.notify.get("adapter", "hook")))
                env = envelope.latest(envs, alias, p.pin) if envs else None
                if env is not None:
                    person.delivery = env.describe(now, holder=reg.holder(alias), closed=reg.closed)
                if self.root is not None:
                    person.presence = self._presence(cid, reg, alias, p.pin, now)
                try:
                    page = self.store.unacked(cid, alias, limit=self.sample, priority_first=False)
                    reqs = self.store.unacked(cid, alias, limit=self.sample, requests_only=True, priority_first=False)
                    person.pending, person.requests = page.total, page.requests
                    requests.extend(reqs.messages)
                    stuck.extend(self._stuck(cid, page.messages))
                except (AgentmsgError, OSError) as exc:
                    self._error(cid, alias, exc)
                people.append(person)
        for key in [k for k in self.seen_upto if self.seen_upto[k] < 0]:
            try:
                self.seen_upto[key] = max(0, self.store.last_seq(*key) - self.recent)
            except (AgentmsgError, OSError) as exc:
                self._error(key[0], key[1], exc)
                del self.seen_upto[key]
        self.people = people
        self.claims = self._claims(now)
        self.gates = self._gates(now)
        self.requests = sorted(requests, key=lambda m: m.ts)
        self.stuck = stuck
        self.poll()

    def _claims(self, now: float) -> list[tuple[str, Any]]:
        """Live claims, folded from the events read since the last refresh (a page, never the whole history)."""
        from agentmsg.domain import claims

        out: list[tuple[str, Any]] = []
        for cid in self.registries:
            try:
                seen = self._events.setdefault(cid, [])
                last = seen[-1]["seq"] if seen else 0
                seen += self.store.records_since(cid, "events", last, 1 << 30)  # type: ignore[attr-defined]
                out += [(cid, c) for c in claims.live(claims.fold(seen), now)]
            except (AgentmsgError, OSError, KeyError, TypeError) as exc:
                self._error(cid, "", exc if isinstance(exc, (AgentmsgError, OSError)) else OSError(str(exc)))
        return out

    def _gates(self, now: float) -> list[tuple[str, dict[str, Any]]]:
        """Gates still waiting, folded from the messages read since the last refresh (never the whole history
        again)."""
        from agentmsg.domain import handoffs

        out: list[tuple[str, dict[str, Any]]] = []
        for cid, reg in self.registries.items():
            fold = self._gate_fold.setdefault(cid, handoffs.Gates())
            for alias in reg.participants:
                upto = self._gate_upto.get((cid, alias), 0)
                try:
                    last = self.store.last_seq(cid, alias)
                    if last > upto:
                        for m in self.store.since(cid, alias, upto):
                            fold.add(m)
                        self._gate_upto[(cid, alias)] = last
                except (AgentmsgError, OSError, ValueError):  # a forged name: no inbox; an unreadable one: said
                    continue
            out += [(cid, g) for g in fold.listing(now, open_only=True)]
        return out

    def _presence(self, cid: str, reg: Registry, alias: str, pin: str, now: float) -> str:
        from agentmsg.runtime import presence
        from agentmsg.service import wake

        try:
            found = wake.describe(self.store, cid, alias, pin, reg, now)
            listening = found is not None and found["status"] == "active"
            return presence.of(str(self.root), pin, listening=listening, now=now).state
        except (AgentmsgError, OSError) as exc:
            self._error(cid, alias, exc)
            return "unknown"

    def _envelopes(self, cid: str) -> dict[str, envelope.Envelope]:
        try:
            return envelope.fold(self.store.delivery_records(cid))
        except (AgentmsgError, OSError) as exc:
            self._error(cid, "", exc)
            return {}

    def _stuck(self, cid: str, msgs: list[Message]) -> list[Stuck]:
        out = []
        for msg in msgs:
            presented, failed = 0, None
            for rec in self.store.message_receipts(cid, msg):
                if rec["type"] == kinds.PRESENTED:
                    presented += 1
                elif rec["type"] == kinds.NOTIFY:
                    failed = None if rec.get("ok") else str(rec.get("detail", ""))
            if failed is not None:
                out.append(Stuck(msg, f"notify failed: {failed}"))
            elif presented >= STUCK_PRESENTED:
                out.append(Stuck(msg, f"presented {presented} times, never acknowledged"))
        return out

    def _error(self, cid: str, alias: str, exc: BaseException) -> None:
        self.errors.append(f"{cid[:8]}{'/' + alias if alias else ''}: {exc}")

    def find(self, collab: str, message_id: str) -> Message | None:
        for msg in self.messages + self.requests + [s.message for s in self.stuck]:
            if msg.collab == collab and msg.id == message_id:
                return msg
        return self.store.message(collab, message_id)
