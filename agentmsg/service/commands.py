"""What each command does, as plain functions returning JSON-ready payloads.

The CLI (and any other front end) only parses arguments and prints.  Every
function takes the command context and keyword-only arguments; the acting
pin is resolved once, explicitly, from ``self_flag`` and the host's own
session variable.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from agentmsg import records
from agentmsg.domain import kinds, rules, validate
from agentmsg.domain.values import Draft, Message, Pin, Sent
from agentmsg.errors import NotFound, NotifyFailed, SecretRefused, TamperDetected, UsageError
from agentmsg.runtime import notify
from agentmsg.service import payloads, readers
from agentmsg.service.context import Ctx

Payload = dict[str, Any]
INBOX_MAX = 10_000


def _refuse_secrets(**fields: str) -> None:
    """Every text that other agents will read is checked, not only message bodies."""
    from agentmsg.text import secrets as secret_scan

    for where, text in fields.items():
        found = secret_scan.scan(text)
        if found:
            raise SecretRefused(found[0].kind, found[0].line, where)


def _flags(text: str) -> tuple[str, ...]:
    from agentmsg.text.injection import detect

    return tuple(detect(text))


# ---- collaborations ------------------------------------------------------------------


def open_collab(ctx: Ctx, *, self_flag: str | None, alias: str, label: str, task: str,
                notify_spec: str | None = None, notify_command: str | None = None,
                invite_only: bool = False) -> Payload:
    notify.refuse_command(notify_command)
    who = ctx.who(self_flag)
    _refuse_secrets(label=label, task=task)
    reg = ctx.mailbox.open(
        who, validate.alias(alias), validate.text(label, "label", validate.LABEL_MAX_CHARS, single_line=True),
        validate.text(task, "task", validate.TASK_MAX_CHARS),
        notify.from_option(notify_spec, ctx.env, str(ctx.root), str(who)),
        policy=kinds.INVITE_ONLY if invite_only else kinds.OPEN_POLICY)
    return {"collab": reg.collab, "root": str(ctx.root), "root_source": ctx.root_source,
            "alias": alias, "pin": str(who), "label": reg.label, "task": reg.task, "policy": reg.policy}


# ---- the contact policy: invite-only collaborations and one-time tickets (docs/LIFECYCLE.md) ------------------

#: What a ticket looks like: agentmsg's prefix, then 32 random URL-safe characters (192 bits).
TICKET_PREFIX = "amt-"


def ticket_hash(ticket: str) -> str:
    """The sha256 the collaboration records of a ticket: the ticket itself is printed once and stored nowhere."""
    import hashlib
    import re

    if not re.fullmatch(TICKET_PREFIX + r"[A-Za-z0-9_-]{32}", ticket):
        raise UsageError(f"--ticket: not a ticket (agentmsg invite prints one: {TICKET_PREFIX} and 32 characters)")
    return hashlib.sha256(ticket.encode()).hexdigest()


def invite(ctx: Ctx, *, collab: str | None, self_flag: str | None, alias: str | None,
           expires_in: str | None) -> Payload:
    import secrets
    import time

    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    seconds = (validate.duration(expires_in, "--expires-in", maximum=rules.TICKET_MAX) if expires_in
               else rules.TICKET_DEFAULT)
    ticket = TICKET_PREFIX + secrets.token_urlsafe(24)
    expires_at = time.time() + seconds
    for_alias = validate.alias(alias) if alias else None
    ctx.mailbox.invite(cid, who, ticket_hash(ticket), for_alias=for_alias, expires_at=expires_at)
    return {"collab": cid, "ticket": ticket, "alias": for_alias, "expires_at": records.iso_utc(expires_at),
            "by": str(who), "join": f"agentmsg join --collab {cid} --alias {for_alias or 'ALIAS'} --ticket {ticket}"}


def kill(ctx: Ctx, *, collab: str | None, self_flag: str | None, alias: str, force: bool) -> Payload:
    """Stop a participant's session through the host process its own hooks recorded, and record it."""
    from agentmsg.runtime import facts as sessionfacts

    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    reg = ctx.store.registry(cid)
    alias = validate.alias(alias)
    pin = reg.holder(alias)
    doc: dict[str, Any] = sessionfacts.load(str(ctx.root), pin) if pin else {}
    found = doc.get("facts")
    facts: dict[str, Any] = found if isinstance(found, dict) else {}
    pid = int(facts["pid"]) if type(facts.get("pid")) is int else 0
    rules.kill_event(reg, who, alias, force=force, pid=pid)  # refused before anything is signalled
    try:
        ended = sessionfacts.stop(facts)
    except LookupError as exc:
        raise NotFound(f"{alias}: {exc}; nothing was signalled") from None
    with ctx.store.transaction(cid) as tx:
        ev = tx.append_event(rules.kill_event(tx.registry(), who, alias, force=force, pid=pid))
    _claims_changed(ctx)
    return {"collab": cid, "alias": alias, "pin": ev["pin"], "pid": pid, "signal": ended, "by": str(who)}


def set_policy(ctx: Ctx, *, collab: str | None, self_flag: str | None, policy: str) -> Payload:
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    reg = ctx.mailbox.set_policy(cid, who, validate.choice(policy, kinds.POLICIES, "policy"))
    return {"collab": cid, "policy": reg.policy, "tickets": len(reg.tickets)}


def join(ctx: Ctx, *, collab: str | None, self_flag: str | None, alias: str, succeeds: str | None = None,
         reason: str | None = None, notify_spec: str | None = None, notify_command: str | None = None,
         ticket: str | None = None) -> Payload:
    notify.refuse_command(notify_command)
    who = ctx.who(self_flag)
    cid = ctx.collab(collab)
    old = validate.pin(succeeds) if succeeds else None
    if reason is not None:
        validate.text(reason, "reason", validate.REASON_MAX_CHARS, single_line=True)
        _refuse_secrets(reason=reason)
    config = notify.from_option(notify_spec, ctx.env, str(ctx.root), str(who)) if notify_spec else None
    ticket = ticket or ctx.env.get("AGENTMSG_TICKET") or None  # a spawned session's, from its environment
    reg = ctx.mailbox.join(cid, who, validate.alias(alias), succeeds=old, reason=reason, notify=config,
                           ticket=ticket_hash(ticket) if ticket else None)
    return {"collab": cid, "root": str(ctx.root), "alias": alias, "pin": str(who),
            "succeeded": str(old) if old else None, "participants": sorted(reg.active())}


def handover(ctx: Ctx, *, collab: str | None, self_flag: str | None, to: str, alias: str | None = None) -> Payload:
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    ev = ctx.mailbox.handover(cid, who, validate.pin(to), alias=validate.alias(alias) if alias else None)
    return {"collab": cid, "alias": ev["alias"], "to": ev["to"], "by": ev["by"]}


def leave(ctx: Ctx, *, collab: str | None, self_flag: str | None) -> Payload:
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    left = ctx.mailbox.leave(cid, who)
    _claims_changed(ctx)
    return {"collab": cid, "alias": left, "pin": str(who)}


def close(ctx: Ctx, *, collab: str | None, self_flag: str | None) -> Payload:
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    unresolved = ctx.mailbox.close(cid, who)
    _claims_changed(ctx)
    return {"collab": cid, "closed_by": str(who), "unresolved": unresolved,
            "unresolved_count": sum(len(v) for v in unresolved.values())}


# ---- messages ----------------------------------------------------------------------------


def send(ctx: Ctx, *, collab: str | None, self_flag: str | None, draft: Draft, redact: bool = False,
         attach: Sequence[str] = (), cwd: str | None = None) -> Payload:
    """``draft.handoff`` (a typed message, issue 31): its payload checked, ``attach`` hashed in ``cwd``."""
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    subject = validate.text(draft.subject, "subject", validate.SUBJECT_MAX_CHARS)
    body = validate.body(draft.body)
    subject, body, redacted = _guard_secrets(subject, body, redact)
    typed_text = ""
    if draft.handoff is not None or attach:
        from agentmsg.service import handoffs

        if draft.handoff is None:
            raise UsageError("--attach needs --type task or --type result")
        typed, in_payload = handoffs.prepare(draft.handoff, attach=attach, cwd=cwd or os.getcwd(), redact=redact)
        draft, redacted, typed_text = draft.replace(handoff=typed), redacted + in_payload, handoffs.flags_text(typed)
    if not draft.to and not draft.reply_to:
        raise UsageError("--to ALIAS is required (or --reply-to to answer a message)")
    draft = draft.replace(
        subject=subject, body=body, kind=validate.choice(draft.kind, validate.KINDS, "kind"),
        priority=validate.choice(draft.priority, validate.PRIORITIES, "priority"),
        id=validate.message_id(draft.id) if draft.id else None, reply_to=_reply_ref(draft.reply_to),
        thread=validate.thread(draft.thread) if draft.thread is not None else None)
    sent = ctx.mailbox.send(cid, who, draft, flags=_flags(subject + "\n" + body + "\n" + typed_text))
    reg = ctx.mailbox.registry(cid)
    results = [_notify(ctx, cid, s, reg.participants[s.message.to].notify) for s in sent]
    _wake(ctx, cid, sent, results)
    _seen(ctx, cid, sent, results)
    payload: Payload = {"collab": cid, "redacted": redacted, "results": results}
    failed = [r for r in results if r["notify_error"]]
    if failed:
        err = NotifyFailed(failed[0]["notify_error"], f"agentmsg notify --retry {failed[0]['id']} --collab {cid}")
        err.result = payload
        raise err
    return payload


def _seen(ctx: Ctx, cid: str, sent: list[Sent], results: list[Payload]) -> None:
    """After storing and ringing: each recipient's presence and when it will see the message (never fails the
    send: it was stored)."""
    from agentmsg.service import roster

    for s, result in zip(sent, results, strict=True):
        try:
            result.update(roster.seen(ctx, cid, s.message, (result.get("wake") or {}).get("outcome")))
        except Exception as exc:  # store first, then tell: the send stands
            result.update(presence=None, next=f"{s.message.to}: presence unknown ({type(exc).__name__})")


def _wake(ctx: Ctx, cid: str, sent: list[Sent], results: list[Payload]) -> None:
    """After storing: ring each recipient whose wake consent allows it (issue 11); never fails the send."""
    from agentmsg.service import wake

    rung = wake.after_send(ctx.store, str(ctx.root), cid, [s.message.to for s in sent if not s.already], ctx.env)
    for result in results:
        result["wake"] = rung.get(result["to"], {"outcome": "not rung (already stored)", "mechanism": None})


def _reply_ref(ref: str | None) -> str | None:
    if not ref:
        return None
    named, _, mid = ref.rpartition("/")
    if named:
        validate.alias(named)
    return f"{named}/{validate.message_id(mid)}" if named else validate.message_id(mid)


def _guard_secrets(subject: str, body: str, redact: bool) -> tuple[str, str, int]:
    """Refuse (or redact) credentials before anything is stored."""
    from agentmsg.text import secrets

    if not redact:
        _refuse_secrets(subject=subject, body=body)
        return subject, body, 0
    subject, in_subject = secrets.redact(subject)
    body, in_body = secrets.redact(body)
    return subject, body, len(in_subject) + len(in_body)


def _notify(ctx: Ctx, cid: str, sent: Sent, config: dict[str, Any]) -> Payload:
    msg = sent.message
    out: Payload = {"id": msg.id, "to": msg.to, "seq": msg.seq, "notify_error": None}
    if sent.already:
        out.update(state="already stored", detail="same id and content; nothing new was written")
        return out
    try:
        detail = notify.notify(config, msg)
    except notify.NotifyError as exc:
        out.update(state=f"stored, not yet surfaced (notify failed: {exc})", notify_error=str(exc), detail=None)
        ctx.mailbox.record_notify(cid, msg, False, str(exc))
        return out
    if config.get("adapter", "hook") not in ("hook", "command"):
        ctx.mailbox.record_notify(cid, msg, True, detail)
    out.update(state="stored+notified", detail=detail)
    return out


def notify_retry(ctx: Ctx, *, collab: str | None, self_flag: str | None, message_id: str) -> Payload:
    mid = validate.message_id(message_id)
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    msg, reg = ctx.mailbox.notify_target(cid, who, mid)
    result = _notify(ctx, cid, Sent(msg, already=False), reg.participants[msg.to].notify)
    if result["notify_error"]:
        err = NotifyFailed(result["notify_error"], f"agentmsg notify --retry {msg.id} --collab {cid}")
        err.result = {"collab": cid, "results": [result]}
        raise err
    return {"collab": cid, "results": [result]}


def inbox(ctx: Ctx, *, collab: str | None, self_flag: str | None, limit: int = rules.PAGE_DEFAULT,
          offset: int = 0, everything: bool = False, include_acked: bool = False,
          priority_first: bool = False, thread: str | None = None) -> Payload:
    """Unacknowledged messages, bounded: ``limit`` from ``offset``, or ``everything``; ``thread``: of one thread
    only (its name, or any of its messages' ids)."""
    who = ctx.who(self_flag)
    cid = readers.check(ctx, who, ctx.collab(collab, who))
    if limit < 1 or offset < 0:
        raise UsageError("--limit must be at least 1 and --offset at least 0")
    want = INBOX_MAX if everything else limit
    in_thread = None
    if thread is not None:
        from agentmsg.service import threads

        thread, members = threads.of(ctx, cid, thread)
        in_thread = {m.id for m in members}
    alias, page = ctx.mailbox.inbox(cid, who, limit=INBOX_MAX if in_thread is not None else offset + want,
                                    priority_first=priority_first)
    if in_thread is not None:
        kept = [m for m in page.messages if m.id in in_thread]
        page = page.replace(messages=kept[:offset + want], total=len(kept), skipped=0,
                            requests=sum(1 for m in kept if m.kind == "request"),
                            high=sum(1 for m in kept if m.priority == "high"))
    page = page.replace(messages=page.messages[offset:])
    out = {"collab": cid, "alias": alias, **payloads.page(page, offset=offset),
           "problems": page.problems}
    if thread is not None:
        out["thread"] = thread
    if include_acked:
        history = [m for m in ctx.store.history(cid, alias) if in_thread is None or m.id in in_thread]
        chosen = history if everything else history[offset:offset + limit]
        out["messages"] = [payloads.message(m) for m in chosen]
        out["history"] = len(history)
        out["shown"], out["more"] = len(chosen), max(0, len(history) - offset - len(chosen))
    return out


def show(ctx: Ctx, *, collab: str | None, message_id: str, self_flag: str | None = None,
         cwd: str | None = None) -> Payload:
    """One message, if the reader may read its collaboration (``readers``: a member, or the owner); a typed
    message's artifacts as they are in the checkout ``cwd`` (default: the working directory) is in."""
    msg = shown(ctx, readers.reader(ctx, self_flag), collab, message_id)
    state = ctx.mailbox.state(msg)
    out: Payload = {"message": payloads.message(msg), "state": state.label, "states": state.as_dict()}
    if msg.handoff:  # a typed message: the other messages of its thread (issue 31; task show has them in full)
        from agentmsg.runtime import artifacts
        from agentmsg.service import handoffs

        out["thread"] = handoffs.thread_of(ctx, msg)
        carried = artifacts.of(msg.handoff)
        if carried:  # each as it is now in the reader's own checkout of the same repository
            here = artifacts.Checkout(cwd or os.getcwd())
            out["artifacts"] = [artifacts.state(a, here) for a in carried]
    return out


def shown(ctx: Ctx, who: Pin | None, collab: str | None, message_id: str) -> Message:
    """The message ``show`` gives (the CLI's and the MCP tool's): in ``--collab``/AGENTMSG_COLLAB, else by id."""
    validate.message_id(message_id)  # a malformed id is a usage error before anything is looked up
    cid = ctx.collab(collab, who) if collab or ctx.env.get("AGENTMSG_COLLAB") else None
    return readers.message(ctx, who, message_id, cid)


def ack(ctx: Ctx, *, collab: str | None, self_flag: str | None, message_ids: list[str]) -> Payload:
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    if not message_ids:
        raise UsageError("give at least one message id: --message ID (repeatable)")
    done = ctx.mailbox.ack(cid, who, [validate.message_id(m) for m in message_ids])
    results = [{"message": mid, "acknowledged_at": rec["ts"], "already": already} for mid, rec, already in done]
    first = results[0]
    return {"collab": cid, "message": first["message"], "acknowledged_at": first["acknowledged_at"],
            "already": first["already"], "results": results}


# ---- status and log --------------------------------------------------------------------

STATUS_SAMPLE = 100


def status(ctx: Ctx, *, collab: str | None, self_flag: str | None) -> Payload:
    who = readers.reader(ctx, self_flag)  # None: the owner at their own terminal, who may read every collaboration
    store = ctx.store
    bindings = store.bindings(str(who)) if who else []
    from agentmsg.runtime import doorbell, presence

    base: Payload = {"root": str(ctx.root), "root_source": ctx.root_source, "store": store.describe(),
                     "mirror": doorbell.mirror_state(str(ctx.root)),  # agentmsg sync: docs/MIRROR.md
                     "renderer": doorbell.state(str(ctx.root)),  # docs/DELIVERY.md, "Rendered ahead"
                     "processes": doorbell.processes(str(ctx.root))}  # what runs in the background, and why
    if not collab and not ctx.env.get("AGENTMSG_COLLAB") and len(bindings) != 1:
        return {**base, "self": str(who) if who else None,
                "bindings": [{"collab": c, "alias": a} for c, a in bindings], "collab": None,
                "collabs": readers.collabs(ctx, who), "collaborations": _listing(ctx, who)}
    cid = readers.check(ctx, who, ctx.collab(collab, who))
    reg = store.registry(cid)
    people = []
    awaiting: list[str] = []
    for alias, p in sorted(reg.participants.items()):
        row = {"alias": alias, "pin": p.pin, "runtime": p.runtime, "active": p.active,
               "notify": p.notify.get("adapter", "hook")}
        if rules.is_alias(alias):
            row.update(_mail_states(ctx, cid, alias, awaiting))
        else:  # only a forged registry record names one: no inbox can exist for it; say so, show the rest
            row.update(dict.fromkeys(("pending", "pending_requests", "enqueued", "presented", "replied",
                                      "acknowledged"), 0), sampled=False, problem="not a valid alias: no inbox")
        row["wake"] = _wake_state(ctx, cid, alias, p.pin, reg)
        row["presence"] = presence.payload(presence.of(str(ctx.root), p.pin, listening=row["wake"] == "active"))
        people.append(row)
    return {
        **base, "collab": cid, "label": reg.label, "task": reg.task, "self": str(who) if who else None,
        "binding": {"alias": reg.alias_of(str(who))} if who and reg.alias_of(str(who)) else None,
        "participants": people, "awaiting_notification": awaiting, "policy": reg.policy,
        "closed_at": reg.closed_at, "closed": reg.closed, "claims": _claims_of(ctx, cid),
        "open_gates": _open_gates(ctx, cid),
    }


def _open_gates(ctx: Ctx, cid: str) -> list[Payload]:
    """The collaboration's gates still waiting for their answer (issue 31, docs/HANDOFFS.md "Gates")."""
    from agentmsg.service import handoffs

    return handoffs.open_gates(ctx, cid)


def _claims_changed(ctx: Ctx) -> None:
    """A holder left, was killed, or the collaboration closed: its claims no longer hold (docs/CLAIMS.md)."""
    from agentmsg.service import claims

    claims.refresh_if_indexed(ctx)


def _claims_of(ctx: Ctx, cid: str) -> list[Payload]:
    from agentmsg.service import claims  # docs/CLAIMS.md

    return claims.shown(ctx, cid)


def collaborations(ctx: Ctx, *, self_flag: str | None) -> Payload:
    """Every collaboration the reader may read (the owner: all under the root), each with its id, label,
    participants and unread count: what a person needs to name one (issue 30)."""
    who = readers.reader(ctx, self_flag)
    return {"root": str(ctx.root), "self": str(who) if who else None, "collaborations": _listing(ctx, who)}


def _listing(ctx: Ctx, who: Pin | None) -> list[Payload]:
    """Open ones first, oldest first; one that cannot be read is listed with its problem, not left out."""
    from agentmsg.errors import AgentmsgError
    from agentmsg.service import collabs

    rows = []
    for cid in readers.collabs(ctx, who):
        try:
            rows.append(collabs.row(ctx.store, cid, who))
        except AgentmsgError as exc:
            rows.append({"collab": cid, "label": "", "task": "", "alias": None, "participants": [], "unread": 0,
                         "closed": False, "opened_at": "", "problem": exc.line()})
    return sorted(rows, key=lambda r: (r["closed"], r["opened_at"]))


def _wake_state(ctx: Ctx, cid: str, alias: str, pin: str, reg: Any) -> str:
    from agentmsg.service import wake

    found = wake.describe(ctx.store, cid, alias, pin, reg)
    return "off" if found is None else str(found["status"])


def _mail_states(ctx: Ctx, cid: str, alias: str, awaiting: list[str]) -> Payload:
    """Counts per distinct state; the per-message states of at most STATUS_SAMPLE messages are read."""
    page = ctx.store.unacked(cid, alias, limit=STATUS_SAMPLE)
    counts = {"pending": page.total, "pending_requests": page.requests, "enqueued": 0, "presented": 0,
              "replied": 0, "acknowledged": ctx.store.last_seq(cid, alias) - page.total,
              "sampled": len(page.messages) < page.total}
    for msg in page.messages:
        state = ctx.mailbox.state(msg)
        counts["presented" if state.presented else "enqueued"] += 1
        counts["replied"] += bool(state.replied)
        if state.notify is not None and not state.notify["ok"]:
            awaiting.append(msg.id)
    return counts


def log_append(ctx: Ctx, *, collab: str | None, self_flag: str | None, text: str, corrects: str | None) -> Payload:
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    validate.body(text, "log entry", validate.LOG_MAX_BYTES)
    _refuse_secrets(note=text)
    rec = ctx.mailbox.log_append(cid, who, text, validate.as_uuid(corrects, "log entry id") if corrects else None)
    return {"collab": cid, "entry": payloads.note(rec)}


def log_render(ctx: Ctx, *, collab: str | None, as_html: bool = False, out: str | None = None,
               self_flag: str | None = None) -> Payload:
    from agentmsg.backends.file import transcripts

    who = readers.reader(ctx, self_flag)
    cid = readers.check(ctx, who, ctx.collab(collab, who))
    store = ctx.store
    if as_html or out:
        return _render_html(ctx, cid, out)
    if store.kind != "file":
        raise UsageError(f"log render writes Markdown files next to the records; the {store.kind} store has none")
    with store.transaction(cid) as tx:
        return {"collab": cid, "written": transcripts.render_all(tx)}  # type: ignore[arg-type]


def _render_html(ctx: Ctx, cid: str, out: str | None) -> Payload:
    """One self-contained HTML page: next to the records (file store), or at ``out``."""
    import os

    from agentmsg import fsio
    from agentmsg.text import html

    page = html.collaboration_html(*ctx.mailbox.everything(cid)).encode("utf-8")
    if out:
        path = os.path.abspath(os.path.expanduser(out))
        try:  # the folder is the user's to name; a link planted at the file is refused, never written through
            fsio.write_outside(os.path.dirname(path), os.path.basename(path), page, create_base=False)
        except (OSError, ValueError) as exc:  # a path the user gave: bad input, not an internal error
            raise UsageError(f"cannot write --out {path}: {getattr(exc, 'strerror', None) or exc}") from None
        return {"collab": cid, "written": [path]}
    store = ctx.store
    if store.kind != "file":
        raise UsageError(f"the {store.kind} store keeps no files: give --out FILE for the HTML page")
    from agentmsg.backends.file import transcripts

    with store.transaction(cid) as tx:
        return {"collab": cid, "written": [transcripts.write_html(tx, page)]}  # type: ignore[arg-type]


def log_show(ctx: Ctx, *, collab: str | None, self_flag: str | None = None, thread: str | None = None) -> Payload:
    """Notes and membership events (joins, takeovers, leaves, closure), in order, and how many messages it
    leaves out (every one: they are not log entries) and where they are shown.  ``thread``: instead, the
    messages of one thread, in the collaboration's order (a thread holds messages, not notes)."""
    from agentmsg.text import transcript as render

    who = readers.reader(ctx, self_flag)
    cid = readers.check(ctx, who, ctx.collab(collab, who))
    if thread is not None:
        from agentmsg.service import threads

        thread, members = threads.of(ctx, cid, thread)
        return {"collab": cid, "thread": thread,
                "entries": [{"kind": "message", "cseq": m.cseq, "ts": m.ts, "author": m.sender, "to": m.to,
                             "id": m.id, "subject": m.subject, "text": m.body, "reply_to": m.reply_to,
                             "type": (m.handoff or {}).get("type"), "corrects": None, "seq": m.seq}
                            for m in members],
                "left_out": {"messages": 0, "why": "notes and membership events belong to no thread",
                             "see": f"agentmsg log show --collab {cid}"}}
    notes = [dict(payloads.note(r), kind="note", cseq=r["cseq"]) for r in ctx.store.notes(cid)]
    events = [{"kind": "event", "cseq": ev["cseq"], "ts": ev["ts"], "author": ev.get("alias") or ev.get("by"),
               "text": render.event_text(ev), "id": None, "corrects": None, "seq": ev["seq"]}
              for ev in ctx.store.events(cid)]
    count = sum(ctx.store.last_seq(cid, a) for a in ctx.mailbox.inboxes(cid))
    return {"collab": cid, "entries": sorted(notes + events, key=lambda e: e["cseq"]),
            "left_out": {"messages": count, "why": "the log holds notes and membership events; messages are "
                         "in the inboxes", "see": f"agentmsg log render --html --collab {cid}"}}


def search(ctx: Ctx, *, text: str, collab: str | None = None, sender: str | None = None, to: str | None = None,
           kind: str | None = None, since: str | None = None, until: str | None = None,
           limit: int = 20, root_flag: str | None = None, self_flag: str | None = None,
           thread: str | None = None) -> Payload:
    """Full-text search over every collaboration the reader may read (the owner: all under the root), or one;
    ``thread``: only the messages of that thread (its name, or any of its messages' ids), in each collaboration."""
    from agentmsg.domain.search import LIMIT_MAX, Found, Query

    who = readers.reader(ctx, self_flag)
    query = Query(text, collab=readers.check(ctx, who, ctx.named(collab, who)) if collab else None,
                  sender=validate.alias(sender) if sender else None, recipient=validate.alias(to) if to else None,
                  kind=kind, since=since, until=until, limit=limit)
    if thread is not None:
        validate.thread(thread)
        query = query.replace(limit=LIMIT_MAX)  # the thread's hits are among the best LIMIT_MAX: kept, then cut
    if who is None or query.collab is not None:
        found = ctx.mailbox.search(query)
    else:  # a pin searches its own collaborations, one by one, and the best hits of all of them are kept
        parts = [ctx.mailbox.search(query.replace(collab=cid)) for cid in readers.collabs(ctx, who)]
        hits = sorted((h for f in parts for h in f.hits), key=lambda h: -h.score)[:query.limit]
        found = Found(hits, parts[0].index if parts else "none",
                      parts[0].detail if parts else f"{who} is a current member of no collaboration")
    if thread is not None:
        from agentmsg.service import threads

        members: dict[str, set[str]] = {}
        for cid in {h.message.collab for h in found.hits if h.message is not None}:
            members[cid] = {m.id for m in threads.of(ctx, cid, thread)[1]}
        found = Found([h for h in found.hits if h.message is not None and h.message.id in
                       members.get(h.message.collab, set())][:limit], found.index, found.detail)
        query = query.replace(limit=limit)
    return {"query": text, "terms": [" ".join(t) for t in query.terms],
            "filters": {"collab": query.collab, "from": query.sender, "to": query.recipient, "kind": query.kind,
                        "since": since, "until": until, "limit": limit, "thread": thread},
            "index": {"kind": found.index, "detail": found.detail}, "count": len(found.hits),
            "hits": [payloads.hit(h, query, root_flag) for h in found.hits]}


def registry(ctx: Ctx, *, collab: str | None, self_flag: str | None = None) -> Payload:
    who = readers.reader(ctx, self_flag)
    cid = readers.check(ctx, who, ctx.collab(collab, who))
    return rules.registry_document(ctx.mailbox.registry(cid))


# ---- watch -------------------------------------------------------------------------------

WATCH_DEFAULT = 600.0
WATCH_MAX = 1800.0


def watch(ctx: Ctx, *, collab: str | None, self_flag: str | None, for_reply: str | None,
          timeout: str | None, emit: Any) -> Payload:
    """Block until a matching request or reply arrives; one line per event, then exit.

    Finite by construction: it never re-arms and never outlives its timeout.
    Lines carry id, sender and subject only, never the body.
    """
    from agentmsg.text import transcript as render

    who = ctx.who(self_flag)
    cid = readers.check(ctx, who, ctx.collab(collab, who))
    wanted = validate.message_id(for_reply) if for_reply else None
    seconds = validate.duration(timeout, "--timeout", maximum=WATCH_MAX) if timeout else WATCH_DEFAULT
    alias, found = ctx.mailbox.watch(cid, who, for_reply=wanted, timeout=seconds)
    events = [_event(m) for m in found]
    for e in events:
        emit(f"{e['kind']} {e['id']} from {e['from']}: {render.one_line(e['subject'])}")
    return {"collab": cid, "alias": alias, "events": events}


def _event(m: Message) -> Payload:
    return {"id": m.id, "from": m.sender, "kind": m.kind, "subject": m.subject, "reply_to": m.reply_to}


# ---- integrity ------------------------------------------------------------------------------


def verify(ctx: Ctx, *, collab: str | None) -> Payload:
    """Check every record, and every derived file against the records; tampering is an error."""
    cid = ctx.named(collab) if collab else None
    files, findings = ctx.store.verify(cid)
    if cid and not files:
        ctx.store.registry(cid)  # nothing to check: an unknown collaboration is not found, as the store says it
    payload = {"root": str(ctx.root), "files": files, "findings": findings,
               "tampering": sum(bool(f["tampering"]) for f in findings),
               "torn": sum(f["kind"] == "torn" for f in findings),
               "healed": sum(f["kind"] == "healed" for f in findings)}
    if payload["tampering"]:
        first = next(f for f in findings if f["tampering"])
        err = TamperDetected(f"{payload['tampering']} problem(s); first: {first['kind']} record at "
                             f"{first['path']}:{first['line']} ({first['detail']})")
        err.result = payload
        raise err
    return payload


def repair(ctx: Ctx, *, collab: str | None) -> Payload:
    """Rebuild every derived file from the journals, and clean up temp files a killed writer left."""
    store = ctx.store
    cids = [ctx.collab(collab)] if collab else store.collabs()
    rebuilt = {cid: store.rebuild(cid) for cid in cids}
    return {"root": str(ctx.root), "rebuilt": rebuilt, "temp_files_removed": store.clean_temp(0.0)}


