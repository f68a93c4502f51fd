"""``agentmsg roster``: who is in a collaboration and whether anyone is there (docs/LIFECYCLE.md).

For each participant: alias, pin and host; presence (``runtime/presence.py``: working, idle, listening, gone,
unknown and why) with the age of its last activity; unread messages and the age of the oldest ("behind"); and
whether wake-ups and mid-turn delivery are on.  The same presence words every send's result line
(:func:`seen`).  Read through the port, so it works on every backend; presence itself is this machine's.
"""

from __future__ import annotations

import calendar
import time
from typing import Any

from agentmsg.domain import midturn, presence
from agentmsg.domain.values import Message, Registry
from agentmsg.errors import UsageError
from agentmsg.hosts import registry as hosts
from agentmsg.ports import Store
from agentmsg.runtime import presence as reading
from agentmsg.service.context import Ctx

Payload = dict[str, Any]


def roster(ctx: Ctx, *, collab: str | None, self_flag: str | None) -> Payload:
    from agentmsg.service import readers

    who = readers.reader(ctx, self_flag)  # None: the state root's owner, who reads every roster
    cid = readers.check(ctx, who, ctx.collab(collab, who))  # the one reading rule (docs/SECURITY.md)
    reg = ctx.store.registry(cid)
    now = time.time()
    rows = [row(ctx, cid, reg, alias, now) for alias in sorted(reg.participants)]
    from agentmsg.service import claims, handoffs  # docs/CLAIMS.md; docs/HANDOFFS.md "Gates"

    return {"collab": cid, "label": reg.label, "self": str(who) if who else None, "at": now, "participants": rows,
            "claims": claims.shown(ctx, cid), "open_gates": handoffs.open_gates(ctx, cid, now)}


def row(ctx: Ctx, cid: str, reg: Registry, alias: str, now: float) -> Payload:
    """One participant's line of the roster (also each participant of ``status``)."""
    p = reg.participants[alias]
    host = hosts.of_runtime(p.runtime)
    wake = _wake(ctx.store, cid, alias, p.pin, reg)
    found = reading.of(str(ctx.root), p.pin, listening=wake == "active", now=now)
    setting = midturn.latest(ctx.store.delivery_records(cid), alias, p.pin)
    out: Payload = {"alias": alias, "pin": p.pin, "host": host.name if host is not None else p.runtime,
                    "active": p.active, "presence": reading.payload(found, now), "wake": wake,
                    "midturn": bool(setting is not None and setting.on), "unread": 0, "behind": None}
    try:
        page = ctx.store.unacked(cid, alias, limit=1, priority_first=False)
    except (UsageError, ValueError):  # a forged registry name: no inbox can exist for it
        return out
    out["unread"] = page.total
    if page.messages:
        out["behind"] = round(max(0.0, now - _epoch(page.messages[0].ts)), 1)
    return out


def seen(ctx: Ctx, cid: str, msg: Message, wake_outcome: str | None) -> Payload:
    """After storing ``msg``: its recipient's presence and what happens next (the send's result line)."""
    reg = ctx.store.registry(cid)
    p = reg.participants.get(msg.to)
    if p is None:
        return {"presence": None, "next": f"{msg.to} is not a participant"}
    now = time.time()
    wake = _wake(ctx.store, cid, msg.to, p.pin, reg)
    found = reading.of(str(ctx.root), p.pin, listening=wake == "active", now=now)
    setting = midturn.active(ctx.store.delivery_records(cid), msg.to, p.pin, holder=reg.holder(msg.to),
                             closed=reg.closed)
    line = presence.next_step(found, msg.to, rang=wake_outcome == "rang",
                              midturn=setting is not None and setting.wants(msg), now=now)
    return {"presence": reading.payload(found, now), "next": line}


def _wake(store: Store, cid: str, alias: str, pin: str, reg: Registry) -> str:
    from agentmsg.service import wake

    found = wake.describe(store, cid, alias, pin, reg)
    return "off" if found is None else str(found["status"])


def _epoch(ts: str) -> float:
    try:
        return float(calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")))
    except (ValueError, TypeError):
        return time.time()
