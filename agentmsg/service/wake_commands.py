"""The ``agentmsg wake`` commands: arguments -> ``service.wake`` -> payloads."""

from __future__ import annotations

from typing import Any

from agentmsg.service import wake
from agentmsg.service.context import Ctx

Payload = dict[str, Any]


def on(ctx: Ctx, *, collab: str | None, self_flag: str | None, expires_in: str) -> Payload:
    who = ctx.who(self_flag)
    return wake.on(ctx.store, str(ctx.root), ctx.collab(collab, who), who, ctx.env,
                   expires_in=wake.valid_duration(expires_in))


def off(ctx: Ctx, *, collab: str | None, self_flag: str | None) -> Payload:
    who = ctx.who(self_flag)
    return wake.off(ctx.store, ctx.collab(collab, who), who)


def status(ctx: Ctx, *, collab: str | None, self_flag: str | None) -> Payload:
    who = ctx.who(self_flag)
    return wake.status(ctx.store, ctx.collab(collab, who), who)
