"""The ``agentmsg delivery`` commands: arguments -> ``service.delivery`` -> payloads."""

from __future__ import annotations

from typing import Any

from agentmsg.domain import envelope, validate
from agentmsg.service import delivery
from agentmsg.service.context import Ctx

Payload = dict[str, Any]


def enable(ctx: Ctx, *, collab: str | None, self_flag: str | None, expires_in: str, max_duration: str,
           slots: int, wait: str) -> Payload:
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    return delivery.enable(
        ctx.store, cid, who,
        expires_in=validate.duration(expires_in, "--expires-in", maximum=envelope.MAX_DURATION),
        max_duration=validate.duration(max_duration, "--max-duration", maximum=envelope.MAX_DURATION),
        slots=slots, wait=validate.duration(wait, "--wait", maximum=envelope.MAX_WAIT, allow_zero=True),
    )


def disable(ctx: Ctx, *, collab: str | None, self_flag: str | None) -> Payload:
    who = ctx.who(self_flag)
    return delivery.disable(ctx.store, ctx.collab(collab, who), who)


def midturn(ctx: Ctx, *, state: str, priority: str, min_gap: str, collab: str | None,
            self_flag: str | None) -> Payload:
    from agentmsg.domain import midturn as mt

    on = validate.choice(state, ("on", "off"), "state") == "on"
    who = ctx.who(self_flag)
    return delivery.set_midturn(ctx.store, ctx.collab(collab, who), who, on=on, priority=priority,
                                min_gap=validate.duration(min_gap, "--min-gap", maximum=mt.MAX_GAP, allow_zero=True))


def inspect(ctx: Ctx, *, collab: str | None, self_flag: str | None) -> Payload:
    from agentmsg.hosts import install as installer

    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    from agentmsg.service import wake

    out = delivery.inspect(ctx.store, cid, who, last_hook_run=_last_hook_run(ctx, cid, str(who)),
                           adapters=installer.detect_env(ctx.env))
    out["wake"] = wake.describe(ctx.store, cid, out["alias"], str(who)) or {"status": "off"}
    return out


def _last_hook_run(ctx: Ctx, cid: str, pin: str) -> dict[str, Any] | None:
    """The hooks' own note of their last run (file store only: hooks read local files)."""
    if ctx.store.kind != "file":
        return None
    from agentmsg import fsio, records
    from agentmsg.backends.file import layout

    reg = ctx.store.registry(cid)
    alias = reg.alias_of(pin)
    if alias is None:
        return None
    raw = fsio.read_bytes(layout.hook_state(layout.collab(str(ctx.root), cid), alias))
    try:
        doc = records.loads(raw.decode()) if raw else None
    except (ValueError, UnicodeDecodeError):
        return None
    return doc.get("seen") if isinstance(doc, dict) and doc.get("pin") == pin else None


def retry(ctx: Ctx, *, collab: str | None, self_flag: str | None, attempt: str, message: str) -> Payload:
    who = ctx.who(self_flag)
    return delivery.retry(ctx.store, ctx.collab(collab, who), who, attempt, message)
