"""Typed handoffs in the service (issue 31): a typed draft made ready to send (its payload checked, its
artifacts hashed, its text scanned), and the views: a task's thread, every handoff, every gate.

The rules are :mod:`agentmsg.domain.handoffs`; reading YAML is the CLI's.  Artifacts are hashed at send
time, in the sender's checkout, and again when shown, in the reader's own checkout of the same repository
(:mod:`agentmsg.runtime.artifacts`, with the claims' repository rule).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from agentmsg.domain import handoffs, rules
from agentmsg.domain.values import Message, Pin
from agentmsg.runtime import artifacts
from agentmsg.service import readers
from agentmsg.service.context import Ctx

Payload = dict[str, Any]


# ---- sending ---------------------------------------------------------------------------


def prepare(given: Payload, *, attach: Iterable[str], cwd: str, redact: bool) -> tuple[Payload, int]:
    """A typed draft's ``handoff``: the payload validated (against its type's schema, or its hand-off template's),
    ``attach`` added, artifacts hashed, secrets refused (or redacted, with how many).  Raises before anything is
    stored."""
    type_ = given.get("type") or ""
    name = given.get("template")
    if name is not None and name not in handoffs.TEMPLATES:
        raise handoffs.invalid("--template", f"must be one of {' | '.join(handoffs.TEMPLATES)}")
    if type_ not in handoffs.TYPES:
        raise handoffs.invalid("--type", f"must be one of {' | '.join(handoffs.TYPES)}")
    payload = dict(given.get("payload") or {}) if isinstance(given.get("payload"), dict) else given.get("payload")
    attach = list(attach)
    declared = dict(given.get("declared") or {})
    if name is not None:
        if attach:
            raise handoffs.invalid("--attach", f"the {name} template carries its artifact in its payload")
        if isinstance(payload, dict):
            payload = {**declared, **payload}  # a template's from and to are its own fields
        payload = handoffs.validate_template(name, payload)
        declared = handoffs.template_parties(name, payload)
        field = "artifact" if handoffs.TEMPLATES[name].get("artifact", {}).get("kind") == "artifact" else None
    else:
        field = handoffs.artifacts_of(type_)
        if attach:
            if field is None:
                raise handoffs.invalid("--attach", f"a {type_} carries no artifacts (a task or a result does)")
            if isinstance(payload, dict):
                payload[field] = [*(payload.get(field) or []), *attach]
        payload = handoffs.validate(type_, payload)
    redacted = 0
    if redact:
        payload, redacted = _redact(payload)
    else:
        _refuse_secrets(type_, payload)
    where = name or type_
    if field and isinstance(payload.get(field), dict):  # a template's one artifact
        payload[field] = artifacts.pinned(f"{where}.{field}", payload[field], cwd)
    elif field and payload.get(field):
        payload[field] = [artifacts.pinned(f"{where}.{field}[{i}]", a, cwd) for i, a in enumerate(payload[field])]
    out: Payload = {"type": type_, "payload": payload,
                    **handoffs.envelope({k: given.get(k) for k in ("workflow_run_id", "phase")})}
    if name is not None:
        out["template"] = name
    if declared:
        out["declared"] = declared
    return out, redacted


def flags_text(handoff: Payload) -> str:
    """The text of a handoff the injection check reads (its payload as shown)."""
    return handoffs.render(handoff)


def _refuse_secrets(type_: str, payload: Payload) -> None:
    from agentmsg.errors import SecretRefused
    from agentmsg.text import secrets

    found = secrets.scan(handoffs.render({"type": type_, "payload": payload}))
    if found:
        raise SecretRefused(found[0].kind, found[0].line, "payload")


def _redact(value: Any) -> tuple[Any, int]:
    from agentmsg.text import secrets

    if isinstance(value, str):
        text, found = secrets.redact(value)
        return text, len(found)
    if isinstance(value, list):
        pairs = [_redact(v) for v in value]
        return [v for v, _n in pairs], sum(n for _v, n in pairs)
    if isinstance(value, dict):
        done = {k: _redact(v) for k, v in value.items()}
        return {k: v for k, (v, _n) in done.items()}, sum(n for _v, n in done.values())
    return value, 0


# ---- artifacts -------------------------------------------------------------------------


def artifact_state(art: Payload, here: artifacts.Checkout) -> Payload:
    """An artifact as it is now in the reader's checkout (runtime/artifacts.py)."""
    return artifacts.state(art, here)


def artifacts_in(handoff: Payload | None) -> list[Payload]:
    """The artifacts a typed message carries: a task's inputs, a result's, a hand-off template's one."""
    return artifacts.of(handoff)


# ---- views -----------------------------------------------------------------------------


def _typed(ctx: Ctx, cids: list[str]) -> list[Message]:
    out: list[Message] = []
    for cid in cids:
        reg = ctx.store.registry(cid)
        for alias in reg.participants:
            if rules.is_alias(alias):  # a forged registry entry names no inbox: nothing typed to read there
                out += [m for m in ctx.store.history(cid, alias) if m.handoff]
    return sorted(out, key=lambda m: (m.ts, m.cseq, m.id))  # cseq: the collaboration's order within a millisecond


def _cids(ctx: Ctx, who: Pin | None, collab: str | None) -> list[str]:
    if collab or ctx.env.get("AGENTMSG_COLLAB"):
        return [readers.check(ctx, who, collab or ctx.env["AGENTMSG_COLLAB"])]
    return readers.collabs(ctx, who)


def _brief(m: Message, here: artifacts.Checkout | None = None) -> Payload:
    h = dict(m.handoff or {})
    out: Payload = {"id": m.id, "collab": m.collab, "from": m.sender, "to": m.to, "ts": m.ts, "subject": m.subject,
                    "type": h.get("type"), "payload": h.get("payload"), "thread": h.get("thread"),
                    "correlation_id": h.get("correlation_id"), "workflow_run_id": h.get("workflow_run_id"),
                    "phase": h.get("phase")}
    if h.get("template"):
        out["template"] = h["template"]
    if here is not None:
        out["artifacts"] = [artifact_state(a, here) for a in artifacts_in(h)]
    return out


def _epoch(ts: str) -> float:
    import calendar

    return calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + ts[19:].rstrip("Z"))


def _gate(req: Message, answers: list[Message], now: float) -> Payload:
    p = (req.handoff or {})["payload"]
    response = next((a for a in answers if (a.handoff or {}).get("type") == "gate_response"), None)
    decision = response.handoff["payload"]["decision"] if response and response.handoff else None
    expires = _epoch(req.ts) + 60 * int(p["timeout_minutes"])
    return {**_brief(req), "gate_id": p["gate_id"], "required_action": p["required_action"],
            "state": handoffs.gate_state(_epoch(req.ts), int(p["timeout_minutes"]), decision, now),
            "expires": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires)),
            "response": _brief(response) if response else None}


def _threads(msgs: list[Message]) -> dict[str, list[Message]]:
    by: dict[str, list[Message]] = {}
    for m in msgs:
        by.setdefault(str((m.handoff or {}).get("thread") or m.id), []).append(m)
    return by


def _answers(msgs: list[Message], mid: str) -> list[Message]:
    return [m for m in msgs if (m.handoff or {}).get("correlation_id") == mid]


def _task(task: Message, msgs: list[Message], cwd: artifacts.Checkout, now: float) -> Payload:
    answers = _answers(msgs, task.id)
    thread = [m for m in msgs if (m.handoff or {}).get("thread") == (task.handoff or {}).get("thread")]
    return {**_brief(task, cwd),
            "results": [_brief(m, cwd) for m in answers if (m.handoff or {}).get("type") == "result"],
            "statuses": [_brief(m) for m in answers if (m.handoff or {}).get("type") == "status"],
            "gates": [_gate(m, _answers(msgs, m.id), now) for m in thread
                      if (m.handoff or {}).get("type") == "gate_request"],
            "thread_messages": [{"id": m.id, "type": (m.handoff or {}).get("type"), "from": m.sender, "to": m.to,
                                 "ts": m.ts, "correlation_id": (m.handoff or {}).get("correlation_id")}
                                for m in thread]}


def thread_of(ctx: Ctx, msg: Message) -> list[Payload]:
    """Every typed message of ``msg``'s thread, in order: id, type, sender, recipient, time, what it answers."""
    thread = str((msg.handoff or {}).get("thread") or msg.id)
    return [{"id": m.id, "type": (m.handoff or {}).get("type"), "from": m.sender, "to": m.to, "ts": m.ts,
             "correlation_id": (m.handoff or {}).get("correlation_id")}
            for m in _typed(ctx, [msg.collab]) if (m.handoff or {}).get("thread") == thread]


def task_show(ctx: Ctx, *, collab: str | None, self_flag: str | None, message_id: str, cwd: str) -> Payload:
    """One typed message's thread: the task with its results, statuses and gates, each artifact's state now."""
    who = readers.reader(ctx, self_flag)
    cid = ctx.collab(collab, who) if collab or ctx.env.get("AGENTMSG_COLLAB") else None
    msg = readers.message(ctx, who, message_id, cid)  # as ``show`` reads it (commands.shown)
    if not msg.handoff:
        from agentmsg.errors import NotFound

        raise NotFound(f"message {msg.id} is not a typed handoff")
    msgs = _typed(ctx, [msg.collab])
    thread = str(msg.handoff.get("thread") or msg.id)
    root = next((m for m in msgs if m.id == thread), msg)
    here = artifacts.Checkout(cwd)
    if (root.handoff or {}).get("type") == "task":
        return {"collab": msg.collab, "task": _task(root, msgs, here, time.time())}
    return {"collab": msg.collab, "task": None,
            "thread_messages": [_brief(m, here) for m in msgs if (m.handoff or {}).get("thread") == thread]}


def listing(ctx: Ctx, *, collab: str | None, self_flag: str | None, cwd: str, workflow_run_id: str | None = None,
            phase: str | None = None) -> Payload:
    """Every task (optionally of one run and phase) with its results tied to it and its artifacts' states."""
    msgs = _typed(ctx, _cids(ctx, readers.reader(ctx, self_flag), collab))
    now = time.time()
    tasks = [m for m in msgs if (m.handoff or {}).get("type") == "task"
             and (workflow_run_id is None or (m.handoff or {}).get("workflow_run_id") == workflow_run_id)
             and (phase is None or (m.handoff or {}).get("phase") == phase)]
    here = artifacts.Checkout(cwd)
    return {"tasks": [_task(t, msgs, here, now) for t in tasks]}


def open_gates(ctx: Ctx, cid: str, now: float | None = None) -> list[Payload]:
    """A collaboration's gates still waiting (open or timed out), oldest first: ``status`` and ``roster`` show
    them.  The reader was checked by the caller."""
    fold = handoffs.Gates()
    for m in _typed(ctx, [cid]):
        fold.add(m)
    now = time.time() if now is None else now
    return [{"id": g["message"].id, "gate_id": g["gate_id"], "required_action": g["required_action"],
             "from": g["message"].sender, "to": g["message"].to, "state": g["state"],
             "expires": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(g["expires_at"]))}
            for g in fold.listing(now, open_only=True)]


def gates(ctx: Ctx, *, collab: str | None, self_flag: str | None, open_only: bool = False) -> Payload:
    """Every gate with its state: open, approved, aborted or timed out (``open_only``: open and timed out)."""
    msgs = _typed(ctx, _cids(ctx, readers.reader(ctx, self_flag), collab))
    now = time.time()
    out = [_gate(m, _answers(msgs, m.id), now) for m in msgs if (m.handoff or {}).get("type") == "gate_request"]
    if open_only:
        out = [g for g in out if g["state"] in ("open", "timed out")]
    return {"gates": out}
