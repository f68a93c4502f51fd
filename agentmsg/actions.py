"""What each command does, as plain functions returning JSON-ready payloads.

The typer layer only parses arguments and prints; everything a command
decides lives here, free of third-party imports, so other front ends (and
tests) get exactly the same behaviour.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import identity, model, notify, render
from .errors import IdentityError, NotifyFailed, SecretRefused, TamperDetected, UsageError, WatchTimeout
from .model import Message, Pin
from .paths import resolve_root
from .store import Draft, FileStore, Sent

Payload = dict[str, Any]


@dataclass
class Ctx:
    """The resolved state root and environment one command runs against."""

    root: Path
    root_source: str
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    @classmethod
    def create(cls, root_flag: str | None, env: Mapping[str, str] | None = None) -> Ctx:
        env = dict(os.environ) if env is None else env
        root, source = resolve_root(root_flag, env)
        return cls(root, source, env)

    @property
    def store(self) -> FileStore:
        return FileStore(self.root)

    def who(self, self_flag: str | None) -> Pin:
        return identity.resolve(self_flag, self.env)

    def collab(self, flag: str | None, who: Pin | None = None) -> str:
        """``--collab``, else ``AGENTMSG_COLLAB``, else the pin's only binding."""
        if flag:
            return model.collab_id(flag)
        if self.env.get("AGENTMSG_COLLAB"):
            return model.collab_id(self.env["AGENTMSG_COLLAB"])
        if who is not None:
            bound = self.store.bindings(str(who))
            if len(bound) == 1:
                return bound[0][0]
            if bound:
                raise UsageError(f"{who} is bound in {len(bound)} collaborations; pass --collab UUID")
        raise UsageError("no collaboration given: pass --collab UUID")


def message_payload(msg: Message) -> Payload:
    return {
        "id": msg.id, "collab": msg.collab, "from": msg.sender, "from_runtime": msg.sender_runtime,
        "to": msg.to, "kind": msg.kind, "priority": msg.priority, "subject": msg.subject,
        "body": msg.body, "reply_to": msg.reply_to, "broadcast": msg.broadcast, "ts": msg.ts,
        "seq": msg.seq, "flags": list(msg.flags),
    }


# ---- collaborations ------------------------------------------------------------


def open_collab(ctx: Ctx, self_flag: str | None, alias: str, label: str, task: str,
                notify_command: str | None = None) -> Payload:
    who = ctx.who(self_flag)
    _refuse_secrets(label=label, task=task)
    reg = ctx.store.open(
        who, model.alias(alias), model.text(label, "label", model.LABEL_MAX_CHARS, single_line=True),
        model.text(task, "task", model.TASK_MAX_CHARS), notify.command_config(notify_command),
    )
    return {"collab": reg.collab, "root": str(ctx.root), "root_source": ctx.root_source,
            "alias": alias, "pin": str(who), "label": reg.label, "task": reg.task}


def join(ctx: Ctx, collab: str | None, self_flag: str | None, alias: str, succeeds: str | None = None,
         reason: str | None = None, notify_command: str | None = None) -> Payload:
    who = ctx.who(self_flag)
    cid = ctx.collab(collab)
    old = model.pin(succeeds) if succeeds else None
    if reason is not None:
        model.text(reason, "reason", model.REASON_MAX_CHARS, single_line=True)
        _refuse_secrets(reason=reason)
    reg = ctx.store.join(cid, who, model.alias(alias), succeeds=old, reason=reason,
                         notify=notify.command_config(notify_command) if notify_command else None)
    return {"collab": cid, "root": str(ctx.root), "alias": alias, "pin": str(who),
            "succeeded": str(old) if old else None, "participants": sorted(reg.active())}


def leave(ctx: Ctx, collab: str | None, self_flag: str | None) -> Payload:
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    return {"collab": cid, "alias": ctx.store.leave(cid, who), "pin": str(who)}


def close(ctx: Ctx, collab: str | None, self_flag: str | None) -> Payload:
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    unresolved = ctx.store.close(cid, who)
    return {"collab": cid, "closed_by": str(who), "unresolved": unresolved,
            "unresolved_count": sum(len(v) for v in unresolved.values())}


# ---- messages --------------------------------------------------------------------


def send(ctx: Ctx, collab: str | None, self_flag: str | None, to: str, kind: str, priority: str,
         subject: str, body: str, message_id: str | None = None, reply_to: str | None = None,
         redact: bool = False) -> Payload:
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    subject = model.text(subject, "subject", model.SUBJECT_MAX_CHARS)
    body = model.body(body)
    subject, body, redacted = _guard_secrets(subject, body, redact)
    if not to and not reply_to:
        raise UsageError("--to ALIAS is required (or --reply-to to answer a message)")
    draft = Draft(
        to=to, kind=model.choice(kind, model.KINDS, "kind"),
        priority=model.choice(priority, model.PRIORITIES, "priority"), subject=subject, body=body,
        id=model.message_id(message_id) if message_id else None, reply_to=reply_to,
    )
    results = [_notify(ctx.store, cid, sent) for sent in ctx.store.send(cid, who, draft)]
    payload: Payload = {"collab": cid, "redacted": redacted, "results": results}
    failed = [r for r in results if r["notify_error"]]
    if failed:
        err = NotifyFailed(failed[0]["notify_error"], f"agentmsg notify --retry {failed[0]['id']} --collab {cid}")
        err.result = payload
        raise err
    return payload


def _refuse_secrets(**fields: str) -> None:
    """Every text that other agents will read is checked, not only message bodies."""
    from . import secret_scan

    for where, text in fields.items():
        found = secret_scan.scan(text)
        if found:
            raise SecretRefused(found[0].kind, found[0].line, where)


def _guard_secrets(subject: str, body: str, redact: bool) -> tuple[str, str, int]:
    """Refuse (or redact) credentials before anything is stored."""
    from . import secret_scan as secrets

    if not redact:
        _refuse_secrets(subject=subject, body=body)
        return subject, body, 0
    subject, in_subject = secrets.redact(subject)
    body, in_body = secrets.redact(body)
    return subject, body, len(in_subject) + len(in_body)


def _notify(store: FileStore, cid: str, sent: Sent) -> Payload:
    msg = sent.message
    out: Payload = {"id": msg.id, "to": msg.to, "seq": msg.seq, "notify_error": None}
    if sent.already:
        out.update(state="already stored", detail="same id and content; nothing new was written")
        return out
    config = store.registry(cid).participants[msg.to].notify
    try:
        detail = notify.notify(config, msg)
    except notify.NotifyError as exc:
        out.update(state=f"stored, not yet surfaced (notify failed: {exc})", notify_error=str(exc), detail=None)
        store.receipt(cid, msg.to, {"type": "notify", "message": msg.id, "ok": False, "detail": str(exc)})
        return out
    if config.get("adapter", "hook") != "hook":
        store.receipt(cid, msg.to, {"type": "notify", "message": msg.id, "ok": True, "detail": detail})
    out.update(state="stored+notified", detail=detail)
    return out


def notify_retry(ctx: Ctx, collab: str | None, message_id: str) -> Payload:
    cid = ctx.collab(collab)
    msg = ctx.store.message(cid, model.message_id(message_id))
    result = _notify(ctx.store, cid, Sent(msg, already=False))
    if result["notify_error"]:
        err = NotifyFailed(result["notify_error"], f"agentmsg notify --retry {msg.id} --collab {cid}")
        err.result = {"collab": cid, "results": [result]}
        raise err
    return {"collab": cid, "results": [result]}


def inbox(ctx: Ctx, collab: str | None, self_flag: str | None, include_acked: bool = False,
          priority_first: bool = False) -> Payload:
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    alias = ctx.store.require_alias(ctx.store.registry(cid), who)
    box = ctx.store.inbox(cid, alias)
    msgs = list(ctx.store.messages(cid, alias)) if include_acked else box.messages
    if priority_first:
        msgs = sorted(msgs, key=lambda m: (m.priority != "high", m.seq))
    return {
        "collab": cid, "alias": alias, "count": len(box.messages),
        "messages": [message_payload(m) for m in msgs],
        "problems": [p.as_dict() for p in box.problems],
    }


def show(ctx: Ctx, collab: str | None, message_id: str) -> Payload:
    mid = model.message_id(message_id)
    store = ctx.store
    msg = store.message(ctx.collab(collab), mid) if collab or ctx.env.get("AGENTMSG_COLLAB") \
        else store.find_message(mid)
    state = store.state(msg.collab, msg)
    return {"message": message_payload(msg), "state": state.label, "states": asdict(state)}


def ack(ctx: Ctx, collab: str | None, self_flag: str | None, message_id: str) -> Payload:
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    rec, already = ctx.store.ack(cid, who, model.message_id(message_id))
    return {"collab": cid, "message": message_id, "acknowledged_at": rec["ts"], "already": already}


# ---- status and log ------------------------------------------------------------------


def status(ctx: Ctx, collab: str | None, self_flag: str | None) -> Payload:
    try:
        who: Pin | None = ctx.who(self_flag)
    except (IdentityError, UsageError):  # status must work for an operator with no usable identity
        if self_flag:
            raise
        who = None
    store = ctx.store
    bindings = store.bindings(str(who)) if who else []
    if not collab and not ctx.env.get("AGENTMSG_COLLAB") and len(bindings) != 1:
        return {"root": str(ctx.root), "root_source": ctx.root_source, "self": str(who) if who else None,
                "bindings": [{"collab": c, "alias": a} for c, a in bindings], "collab": None,
                "collabs": store.collabs()}
    cid = ctx.collab(collab, who)
    reg = store.registry(cid)
    people = []
    awaiting: list[str] = []
    for alias, p in sorted(reg.participants.items()):
        row = {"alias": alias, "pin": p.pin, "runtime": p.runtime, "active": p.active,
               "notify": p.notify.get("adapter", "hook")}
        row.update(_mail_states(store, cid, alias, awaiting))
        people.append(row)
    return {
        "root": str(ctx.root), "root_source": ctx.root_source, "collab": cid, "label": reg.label,
        "task": reg.task, "self": str(who) if who else None,
        "binding": {"alias": reg.alias_of(str(who))} if who and reg.alias_of(str(who)) else None,
        "participants": people, "awaiting_notification": awaiting,
        "closed_at": reg.closed_at, "closed": reg.closed,
    }


def _mail_states(store: FileStore, cid: str, alias: str, awaiting: list[str]) -> Payload:
    """Counts per distinct state; reads only unacknowledged mail, never history."""
    pending = store.inbox(cid, alias).messages
    counts = {"pending": len(pending), "pending_requests": sum(m.kind == "request" for m in pending),
              "enqueued": 0, "presented": 0, "replied": 0,
              "acknowledged": store.inbox_total(cid, alias) - len(pending)}
    for msg in pending:
        state = store.state(cid, msg)
        counts["presented" if state.presented else "enqueued"] += 1
        counts["replied"] += bool(state.replied)
        if state.notify is not None and not state.notify["ok"]:
            awaiting.append(msg.id)
    return counts


def log_append(ctx: Ctx, collab: str | None, self_flag: str | None, text: str,
               corrects: str | None) -> Payload:
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    model.body(text, "log entry", model.LOG_MAX_BYTES)
    _refuse_secrets(note=text)
    rec = ctx.store.log_append(cid, who, text, model.as_uuid(corrects, "log entry id") if corrects else None)
    return {"collab": cid, "entry": _entry(rec)}


def _entry(rec: dict[str, Any]) -> Payload:
    return {k: rec.get(k) for k in ("id", "author", "text", "corrects", "ts", "seq")}


def log_render(ctx: Ctx, collab: str | None) -> Payload:
    cid = ctx.collab(collab)
    return {"collab": cid, "written": [str(p) for p in ctx.store.render(cid)]}


def log_show(ctx: Ctx, collab: str | None) -> Payload:
    """Notes and membership events (joins, takeovers, leaves, closure), in order."""
    cid = ctx.collab(collab)
    notes = [dict(_entry(r), kind="note", cseq=r["cseq"]) for r in ctx.store.log_entries(cid)]
    events = [{"kind": "event", "cseq": ev["cseq"], "ts": ev["ts"], "author": ev.get("alias") or ev.get("by"),
               "text": render.event_text(ev), "id": None, "corrects": None, "seq": ev["seq"]}
              for ev in ctx.store.events(cid)]
    return {"collab": cid, "entries": sorted(notes + events, key=lambda e: e["cseq"])}


def registry(ctx: Ctx, collab: str | None) -> Payload:
    cid = ctx.collab(collab)
    return model.registry_document(ctx.store.registry(cid))



# ---- watch -------------------------------------------------------------------------

WATCH_DEFAULT = 600.0
WATCH_MAX = 1800.0


def watch(ctx: Ctx, collab: str | None, self_flag: str | None, for_reply: str | None,
          timeout: str | None, emit: Callable[[str], None], poll: float = 0.5) -> Payload:
    """Block until a matching request or reply arrives; one line per event, then exit.

    Finite by construction: it never re-arms and never outlives its timeout.
    Lines carry id, sender and subject only, never the body.
    """
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    store = ctx.store
    alias = store.require_alias(store.registry(cid), who)
    wanted = model.message_id(for_reply) if for_reply else None
    seconds = model.duration(timeout, "--timeout", maximum=WATCH_MAX) if timeout else WATCH_DEFAULT
    if wanted:
        store.message(cid, wanted)  # fail fast on an unknown id

    def matches(msg: Message) -> bool:
        if wanted:
            return bool(msg.reply_to) and msg.reply_to.endswith("/" + wanted)  # type: ignore[union-attr]
        return msg.kind == "request"

    found = [m for m in store.inbox(cid, alias).messages if matches(m)] if wanted else []
    offset = store.inbox_end(cid, alias)
    deadline = time.monotonic() + seconds
    while not found:
        if time.monotonic() >= deadline:
            what = f"reply to {wanted}" if wanted else "request"
            raise WatchTimeout(f"no {what} for {alias} within {seconds:g}s")
        time.sleep(poll)
        found = [m for m in store.messages(cid, alias, offset=offset) if matches(m)]
    events = [{"id": m.id, "from": m.sender, "kind": m.kind, "subject": m.subject, "reply_to": m.reply_to}
              for m in found]
    for e in events:
        emit(f"{e['kind']} {e['id']} from {e['from']}: {render.one_line(e['subject'])}")
    return {"collab": cid, "alias": alias, "events": events}


def version(ctx: Ctx) -> Payload:
    """What ``doctor`` compares across entry points: a stale copy shows up here."""
    from . import TOOL, __version__

    return {"version": __version__, "tool": TOOL, "python": sys.executable,
            "package": str(Path(__file__).resolve().parent), "root": str(ctx.root), "root_source": ctx.root_source}


# ---- integrity ---------------------------------------------------------------------


def verify(ctx: Ctx, collab: str | None) -> Payload:
    """Check every record file; tampering is an error, a torn tail only a warning."""
    from .verify import as_dict
    from .verify import verify as walk

    cid = model.collab_id(collab) if collab else None
    if cid:
        ctx.store.registry(cid)  # unknown collaboration -> not found
    files, findings = walk(ctx.root, cid)
    payload = {"root": str(ctx.root), "files": files, "findings": [as_dict(f) for f in findings],
               "tampering": sum(f.tampering for f in findings), "torn": sum(not f.tampering for f in findings)}
    if payload["tampering"]:
        first = next(f for f in findings if f.tampering)
        err = TamperDetected(f"{payload['tampering']} problem(s); first: {first.kind} record at "
                             f"{first.path}:{first.line} ({first.detail})")
        err.result = payload
        raise err
    return payload


# ---- delivery and host adapters -------------------------------------------------------


def delivery_enable(ctx: Ctx, collab: str | None, self_flag: str | None, expires_in: str, max_duration: str,
                    slots: int, wait: str) -> Payload:
    from . import delivery

    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    return delivery.enable(
        ctx.store, cid, who,
        expires_in=model.duration(expires_in, "--expires-in", maximum=delivery.MAX_DURATION),
        max_duration=model.duration(max_duration, "--max-duration", maximum=delivery.MAX_DURATION),
        slots=slots, wait=model.duration(wait, "--wait", maximum=delivery.MAX_WAIT, allow_zero=True),
    )


def delivery_disable(ctx: Ctx, collab: str | None, self_flag: str | None) -> Payload:
    from . import delivery

    who = ctx.who(self_flag)
    return delivery.disable(ctx.store, ctx.collab(collab, who), who)


def delivery_inspect(ctx: Ctx, collab: str | None, self_flag: str | None) -> Payload:
    from . import delivery

    who = ctx.who(self_flag)
    return delivery.inspect(ctx.store, ctx.collab(collab, who), who, home=ctx.env.get("HOME"),
                            codex_home=ctx.env.get("CODEX_HOME"))


def delivery_retry(ctx: Ctx, collab: str | None, self_flag: str | None, attempt: str, message: str) -> Payload:
    from . import delivery

    who = ctx.who(self_flag)
    return delivery.retry(ctx.store, ctx.collab(collab, who), who, attempt, message)


def doctor(ctx: Ctx) -> Payload:
    """Every entry point's version, interpreter and root; disagreement is an error (exit 16)."""
    from . import doctor as checks
    from .errors import Disagreement

    # Probes get this environment unchanged: the question is which root each
    # entry point resolves on its own, not whether it can be told one.
    payload = checks.run(ctx.env, str(ctx.root))
    if payload["warnings"]:
        err = Disagreement(f"{len(payload['warnings'])} warning(s); first: {payload['warnings'][0]}")
        err.result = payload
        raise err
    return payload


def install_codex(ctx: Ctx, codex_home: str | None) -> Payload:
    from . import installer

    root = installer.plugin_root()
    if root is None:
        raise UsageError("this agentmsg has no hook files (neither a plugin checkout nor a wheel with "
                         "agentmsg/_plugin); reinstall it, or install the plugin instead")
    cli = installer.cli_path() if root.name == "_plugin" else None  # a wheel: hook text names its console script
    return installer.install_codex(codex_home or installer.default_codex_home(ctx.env.get("HOME")), root,
                                   home=ctx.env.get("HOME"), cli=cli)


def uninstall(ctx: Ctx, host: str, codex_home: str | None, keep_plugin: bool, purge: bool) -> Payload:
    from . import installer

    return installer.uninstall(host, ctx.env, codex_home=codex_home, state_root=str(ctx.root),
                               keep_plugin=keep_plugin, purge=purge)
