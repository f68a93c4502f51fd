"""Messaging over any store: open, join, send, read, acknowledge, log, close.

``Mailbox`` applies ``domain.rules`` inside one store transaction per
operation, so every backend gets exactly the same behaviour.  The acting
identity is always an explicit ``Pin`` argument; nothing here reads the
environment.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Collection

from agentmsg import records
from agentmsg.domain import kinds, rules
from agentmsg.domain.search import Found, Query
from agentmsg.domain.values import Draft, Message, MessageState, Page, Pin, Registry, Sent
from agentmsg.errors import IdentityError, NotFound, WatchTimeout
from agentmsg.ports import Combining, Record, Store, Txn
from agentmsg.service import attempts as written
from agentmsg.service import staging


class Mailbox:
    def __init__(self, store: Store) -> None:
        self.store = store

    # ---- membership -----------------------------------------------------------------

    def open(self, opener: Pin, alias: str, label: str, task: str, notify: dict[str, object] | None = None, *,
             policy: str = "open") -> Registry:
        collab = str(uuid.uuid4())
        with self.store.create(collab) as tx:
            tx.append_event(rules.opened_event(collab, opener, alias, label, task, dict(notify or {"adapter": "hook"}),
                                               policy=policy))
            return tx.registry()

    def join(self, collab: str, who: Pin, alias: str, *, succeeds: Pin | None = None, reason: str | None = None,
             notify: dict[str, object] | None = None, ticket: str | None = None) -> Registry:
        """``ticket``: the sha256 of the one-time ticket the joiner holds (an invite-only collaboration)."""
        with self.store.transaction(collab) as tx:
            ev = rules.join_event(tx.registry(), who, alias, succeeds=succeeds, reason=reason,
                                  notify=dict(notify) if notify else None, ticket=ticket)
            if ev is not None:
                tx.append_event(ev)
            else:
                tx.repair_binding(str(who))  # the same join again: repair what a crash cut short
            return tx.registry()

    def invite(self, collab: str, who: Pin, ticket: str, *, for_alias: str | None, expires_at: float) -> Record:
        with self.store.transaction(collab) as tx:
            return tx.append_event(rules.invite_event(tx.registry(), who, ticket, for_alias=for_alias,
                                                      expires_at=expires_at))

    def set_policy(self, collab: str, who: Pin, policy: str) -> Registry:
        with self.store.transaction(collab) as tx:
            ev = rules.policy_event(tx.registry(), who, policy)
            if ev is not None:
                tx.append_event(ev)
            return tx.registry()

    def handover(self, collab: str, who: Pin, to: Pin, *, alias: str | None = None) -> Record:
        with self.store.transaction(collab) as tx:
            return tx.append_event(rules.handover_event(tx.registry(), who, alias, to))

    def leave(self, collab: str, who: Pin) -> str:
        with self.store.transaction(collab) as tx:
            ev = rules.leave_event(tx.registry(), who)
            tx.append_event(ev)
            return str(ev["alias"])

    def close(self, collab: str, who: Pin) -> dict[str, list[str]]:
        with self.store.transaction(collab) as tx:
            reg = tx.registry()
            rules.may_close(reg, who)
            unresolved = rules.unresolved({a: tx.unacked_ids(a) for a in reg.participants})
            tx.append_event({"type": kinds.CLOSED, "by": str(who), "unresolved": unresolved})
            return unresolved

    def set_notify(self, collab: str, who: Pin, notify: dict[str, object]) -> None:
        with self.store.transaction(collab) as tx:
            reg = rules.require_open(tx.registry())
            tx.append_event({"type": kinds.NOTIFY_SET, "alias": rules.require_alias(reg, who), "notify": notify})

    def registry(self, collab: str) -> Registry:
        return self.store.registry(collab)

    def bindings(self, who: str) -> list[tuple[str, str]]:
        return self.store.bindings(who)

    def alias(self, collab: str, who: Pin) -> str:
        return rules.require_alias(self.store.registry(collab), who)

    # ---- sending ----------------------------------------------------------------------

    def send(self, collab: str, who: Pin, draft: Draft, *, flags: tuple[str, ...] = ()) -> list[Sent]:
        """Store ``draft`` (one copy per recipient for ``all``); every copy is checked before any is stored.

        On a store whose writers share commits (``ports.Combining``: PostgreSQL), the same steps run as a
        request, which the writer holding the collaboration's lock may apply for this one (docs/POSTGRES.md).
        """
        if isinstance(self.store, Combining):
            request = staging.send_request(who, draft, flags)
            return staging.sent(self.store.combine(collab, request, self._apply_send, staging.refused))
        with self.store.transaction(collab) as tx:
            return self._send(tx, who, draft, flags)

    def _apply_send(self, tx: Txn, request: str) -> str:
        who, draft, flags = staging.send_of(request)
        return staging.outcome(self._send(tx, who, draft, flags))

    def _send(self, tx: Txn, who: Pin, draft: Draft, flags: tuple[str, ...]) -> list[Sent]:
        collab = tx.collab
        reg = rules.require_open(tx.registry())
        sender = rules.require_alias(reg, who)
        try:
            parent, reply_to = self._reply(tx, sender, draft.reply_to)
        except NotFound as exc:
            if draft.handoff is None or draft.handoff["type"] not in ("result", "gate_response"):
                raise
            from agentmsg.errors import Conflict  # issue 31: nothing open to answer is exit 5

            raise Conflict(f"{exc}: a {draft.handoff['type']} has nothing open to answer; "
                           "nothing was stored") from None
        to = draft.to or (rules.other_party(parent, sender) if parent else "")
        base_id = draft.id or records.uuid4()
        wanted = rules.recipients(reg, sender, to)
        thread = rules.thread_for(parent, draft.thread, base_id)
        if draft.handoff is not None:  # a typed message (issue 31): checked against what it answers
            draft = self._typed(tx, draft, parent, base_id, sender, who, to, thread)
        if draft.id:
            was_broadcast, stored = tx.broadcast(base_id)
            wanted = rules.replayed_recipients(stored, was_broadcast, to, wanted, base_id)
        planned = []
        for alias in wanted:
            fields: Record = {
                "type": kinds.MESSAGE, "id": base_id if to != "all" else rules.copy_id(base_id, alias),
                "collab": collab, "sender": sender, "sender_pin": str(who), "sender_runtime": who.runtime,
                "to": alias, "kind": draft.kind, "priority": draft.priority, "subject": draft.subject,
                "body": draft.body, "reply_to": reply_to, "broadcast": base_id if to == "all" else None,
            }
            if draft.handoff is not None:
                fields["handoff"] = draft.handoff
            if thread != fields["id"]:  # a message that starts a thread is its own (rules.thread_of)
                fields["thread"] = thread
            fields["digest"] = rules.digest(fields)
            # A fresh id (no --id) names no stored message: only a caller's id needs the lookup.
            existing = tx.message(fields["id"]) if draft.id else None
            if existing is not None:
                rules.same_message(existing, fields["digest"])
            planned.append((fields, existing))
        fresh = to == "all" and all(existing is None for _f, existing in planned)
        if parent is not None and any(existing is None for _f, existing in planned):
            # Before the reply itself: a crash in between leaves a mark naming a message
            # that does not exist (``state`` skips it), never a reply that lost its mark.
            mark = {"type": kinds.REPLIED, "message": parent.id, "by": planned[0][0]["id"]}
            tx.append_receipts(parent.to, [mark])
        out = []
        for i, (fields, existing) in enumerate(planned):
            if existing is not None:
                out.append(Sent(existing, already=True))
                continue
            if flags:
                fields["flags"] = list(flags)
            copies = {f["to"]: f["id"] for f, _e in planned} if fresh and i == 0 else None
            out.append(Sent(tx.append_message(fields, broadcast_of=copies), already=False))
        return out

    @staticmethod
    def _typed(tx: Txn, draft: Draft, parent: Message | None, base_id: str, sender: str, who: Pin,
               to: str, thread: str) -> Draft:
        """A typed draft as stored: checked against the message it answers, in its thread, its body rendered."""
        from agentmsg.domain import handoffs, validate

        given = dict(draft.handoff or {})
        if to == "all":
            raise handoffs.invalid("--to", f"a {given['type']} goes to one recipient, not all")
        handoffs.declared_parties(given.pop("declared", None) or {}, sender, to)
        closed_by = None
        if parent is not None and given["type"] == "gate_response":
            for rec in tx.message_receipts(parent):
                # (a re-send of the answer itself, with its --id, is the same message: not a second answer)
                answer = tx.message(rec["by"]) if rec["type"] == kinds.REPLIED and rec["by"] != base_id else None
                if answer is not None and (answer.handoff or {}).get("type") == "gate_response":
                    closed_by = handoffs.gate_state(0, 1, answer.handoff["payload"]["decision"],  # type: ignore[index]
                                                    0)
        if given["type"] in handoffs.ANSWERS and parent is None:
            raise handoffs.invalid("correlation_id", f"required: a {given['type']} names what it answers "
                                                      "(--correlation-id MESSAGE_ID)")
        if parent is not None:
            handoffs.answer(given, parent.handoff, parent_id=parent.id, parent_to=parent.to, sender=sender,
                            sender_human=who.human, closed_by=closed_by)
            given["correlation_id"] = parent.id
        given["thread"] = thread
        body = handoffs.render(given) if not draft.body else f"{draft.body}\n\n{handoffs.render(given)}"
        return draft.replace(handoff=given, body=validate.body(body), kind=handoffs.KIND_OF[given["type"]],
                             subject=draft.subject or handoffs.subject(given)[:validate.SUBJECT_MAX_CHARS])

    def _reply(self, tx: Txn, sender: str, ref: str | None) -> tuple[Message | None, str | None]:
        if not ref:
            return None, None
        from agentmsg.domain import validate

        named, _, mid = ref.rpartition("/")
        parent = tx.message(validate.message_id(mid))
        if parent is None:
            raise NotFound(f"no message {mid} in collaboration {tx.collab}")
        return parent, rules.reply_target(parent, sender, named)

    def record_notify(self, collab: str, msg: Message, ok: bool, detail: str) -> None:
        with self.store.transaction(collab) as tx:
            tx.append_receipts(msg.to, [{"type": kinds.NOTIFY, "message": msg.id, "ok": ok, "detail": detail}])

    def notify_target(self, collab: str, who: Pin, message_id: str) -> tuple[Message, Registry]:
        with self.store.transaction(collab) as tx:
            msg = tx.message(message_id)
            if msg is None:
                raise NotFound(f"no message {message_id} in collaboration {collab}")
            reg = tx.registry()
            rules.may_notify(reg, who, msg)
            return msg, reg

    # ---- reading and acknowledging -------------------------------------------------------

    def inbox(self, collab: str, who: Pin, *, limit: int = rules.PAGE_DEFAULT, skip: Collection[int] = (),
              requests_only: bool = False, priority_first: bool = False) -> tuple[str, Page]:
        with self.store.transaction(collab) as tx:
            alias = rules.require_alias(tx.registry(), who)
            return alias, tx.unacked(alias, limit=limit, skip=skip, requests_only=requests_only,
                                     priority_first=priority_first)

    def message(self, collab: str, message_id: str) -> Message:
        msg = self.store.message(collab, message_id)
        if msg is None:
            raise NotFound(f"no message {message_id} in collaboration {collab}")
        return msg

    def find(self, message_id: str) -> Message:
        msg = self.store.find_message(message_id)
        if msg is None:
            raise NotFound(f"no message {message_id} under {self.store.describe()['location']}")
        return msg

    def state(self, msg: Message) -> MessageState:
        """A message's distinct states, from its own receipts only."""
        presented: list[dict[str, object]] = []
        acked: str | None = None
        replied: list[str] = []
        notify: dict[str, object] | None = None
        with self.store.transaction(msg.collab) as tx:
            for rec in tx.message_receipts(msg):
                if rec["type"] == kinds.PRESENTED:
                    presented.append({"attempt": rec["attempt"], "ts": rec["ts"], "host": rec.get("host")})
                elif rec["type"] == kinds.ACK and acked is None:
                    acked = rec["ts"]
                elif rec["type"] == kinds.REPLIED and tx.message(rec["by"]) is not None:
                    replied.append(rec["by"])
                elif rec["type"] == kinds.NOTIFY:
                    notify = {"ok": rec["ok"], "detail": rec["detail"], "ts": rec["ts"]}
        return MessageState(msg.ts, presented, acked, replied, notify)

    def everything(self, collab: str) -> tuple[Registry, list[Record], list[Message], list[Record],
                                               dict[str, MessageState]]:
        """One collaboration whole, for an overseer's page: registry, events, every message, notes, and
        each message's states (the same rules as :meth:`state`, from one read of each receipts journal)."""
        reg = self.store.registry(collab)
        aliases = self.inboxes(collab, reg)
        messages = [m for a in aliases for m in self.store.history(collab, a)]
        ids = {m.id for m in messages}
        states: dict[str, MessageState] = {}
        by_id = {m.id: m for m in messages}
        for alias in aliases:
            for rec in self.store.receipts(collab, alias):
                msg = by_id.get(str(rec.get("message")))
                if msg is None or msg.to != alias:
                    continue
                st = states.setdefault(msg.id, MessageState(msg.ts, [], None, [], None))
                if rec["type"] == kinds.PRESENTED:
                    st.presented.append({"attempt": rec.get("attempt"), "ts": rec["ts"], "host": rec.get("host")})
                elif rec["type"] == kinds.ACK and st.acknowledged is None:
                    states[msg.id] = st = st.replace(acknowledged=rec["ts"])
                elif rec["type"] == kinds.REPLIED and rec.get("by") in ids:
                    st.replied.append(rec["by"])
                elif rec["type"] == kinds.NOTIFY:
                    states[msg.id] = st.replace(notify={"ok": rec["ok"], "detail": rec["detail"], "ts": rec["ts"]})
        for m in messages:
            states.setdefault(m.id, MessageState(m.ts, [], None, [], None))
        return reg, self.store.events(collab), messages, self.store.notes(collab), states

    def inboxes(self, collab: str, reg: Registry | None = None) -> list[str]:
        """Every alias that can hold mail: each participant's, and any other inbox stream (an overseer's view
        shows each one's mail).  A registry name that is no alias (only a forged record holds one) has no
        inbox: views list that participant and read no mail for it, rather than fail."""
        reg = self.store.registry(collab) if reg is None else reg
        streams = getattr(self.store, "streams", None)  # every backend has it (the mirror's Replica port)
        found = [name[6:] for name in streams(collab) if name.startswith("inbox/")] if streams else []
        return sorted(a for a in set(reg.participants) | set(found) if rules.is_alias(a))

    def ack(self, collab: str, who: Pin, message_ids: list[str]) -> list[tuple[str, Record, bool]]:
        """Acknowledge messages as their exact recipient: ``(id, receipt, already)`` for each, in one write."""
        with self.store.transaction(collab) as tx:
            alias = rules.require_alias(rules.require_open(tx.registry()), who)
            found = []
            for mid in dict.fromkeys(message_ids):
                msg = tx.message(mid)
                if msg is None:
                    raise NotFound(f"no message {mid} in collaboration {collab}")
                rules.may_ack(msg, alias)
                found.append((msg, tx.acked(alias, msg)))
            new = [{"type": kinds.ACK, "message": m.id, "mseq": m.seq, "by": str(who)} for m, first in found
                   if first is None]
            written = iter(tx.append_receipts(alias, new)) if new else iter(())
            return [(m.id, first, True) if first is not None else (m.id, next(written), False)
                    for m, first in found]

    def present(self, collab: str, who: Pin, message_ids: list[str], *, attempt: str, host: str,
                via: str) -> tuple[str, list[str]]:
        """Record one presented attempt for the messages among ``message_ids`` addressed to ``who``.

        Presented is not acknowledged: the hooks write the same receipts (``domain.attempts``);
        a front end that shows peer text to a model (the MCP server) writes it through here.
        Returns ``(alias, ids recorded)``.
        """
        with self.store.transaction(collab) as tx:
            alias = rules.require_alias(tx.registry(), who)
            ids = [mid for mid in dict.fromkeys(message_ids)
                   if (msg := tx.message(mid)) is not None and msg.to == alias]
            if ids:
                written.present(tx, alias, ids, attempt=attempt, host=host, via=via, pin=str(who))
            return alias, ids

    def complete(self, collab: str, alias: str, *, attempt: str, host: str, via: str, count: int) -> None:
        """The attempt's text was handed over (not fsynced, as in the hooks: losing it only looks interrupted)."""
        with self.store.transaction(collab) as tx:
            written.complete(tx, alias, attempt=attempt, host=host, via=via, count=count)

    # ---- searching ----------------------------------------------------------------------

    def search(self, query: Query) -> Found:
        """Ranked matches over subjects, bodies and log notes (an overseer's read: no identity needed)."""
        if query.collab is not None:
            self.store.registry(query.collab)  # an unknown collaboration is NotFound, not "no hits"
        return self.store.search(query)

    # ---- the log ----------------------------------------------------------------------------

    def log_append(self, collab: str, who: Pin, text: str, corrects: str | None = None) -> Record:
        with self.store.transaction(collab) as tx:
            author = rules.log_author(tx.registry(), who)
            if corrects and not any(n["id"] == corrects for n in tx.notes()):
                raise NotFound(f"no log entry {corrects} to correct")
            return tx.append_note({"type": kinds.NOTE, "id": str(uuid.uuid4()), "author": author, "text": text,
                                   "corrects": corrects})

    # ---- waiting ----------------------------------------------------------------------------

    def watch(self, collab: str, who: Pin, *, for_reply: str | None, timeout: float) -> tuple[str, list[Message]]:
        """Until a matching request or reply arrives for ``who``; finite: never re-arms."""
        with self.store.transaction(collab) as tx:
            alias = rules.require_alias(tx.registry(), who)
            if for_reply and tx.message(for_reply) is None:
                raise NotFound(f"no message {for_reply} in collaboration {collab}")
            start = tx.total(alias)

        def matches(msg: Message) -> bool:
            if for_reply:
                return bool(msg.reply_to) and str(msg.reply_to).endswith("/" + for_reply)
            return msg.kind == kinds.REQUEST

        found: list[Message] = []
        if for_reply:
            found = [m for m in self._all_unacked(collab, alias) if matches(m)]
        deadline = time.monotonic() + timeout
        seen = start
        while not found:
            left = deadline - time.monotonic()
            if left <= 0 or not self.store.wait(collab, alias, seen, left):
                what = f"reply to {for_reply}" if for_reply else "request"
                raise WatchTimeout(f"no {what} for {alias} within {timeout:g}s")
            new = self.store.since(collab, alias, seen)
            seen = max([seen, *(m.seq for m in new)])
            found = [m for m in new if matches(m)]
        # The reading rule holds when the messages are read, not only when the wait began: a pin that left or
        # was taken over meanwhile gets the refusal (service/readers.py), never its successor's mail.
        if rules.require_alias(self.store.registry(collab), who) != alias:
            raise IdentityError(f"{who} is not bound to any alias in collaboration {collab}")
        return alias, found

    def _all_unacked(self, collab: str, alias: str) -> list[Message]:
        page = self.store.unacked(collab, alias, limit=200)
        return page.messages
