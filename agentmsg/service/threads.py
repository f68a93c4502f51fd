"""Threads (issue 31, docs/HANDOFFS.md "Threads"): every message belongs to one, the root of its reply and
correlation chain or the name ``send --thread NAME`` gave it (``domain.rules.thread_of``).  ``inbox``,
``log show`` and ``search`` take ``--thread`` to keep one thread's messages."""

from __future__ import annotations

from agentmsg.domain import rules, validate
from agentmsg.domain.values import Message
from agentmsg.service.context import Ctx


def messages(ctx: Ctx, cid: str) -> list[Message]:
    """Every message of a collaboration, in its order (every inbox, acknowledged or not)."""
    out = [m for alias in ctx.mailbox.inboxes(cid) for m in ctx.store.history(cid, alias)]
    return sorted(out, key=lambda m: (m.cseq, m.ts, m.id))


def resolve(value: str, msgs: list[Message]) -> str:
    """The thread ``--thread VALUE`` names: a thread's name, or the id of any message of it."""
    validate.thread(value)
    if any(rules.thread_of(m) == value for m in msgs):
        return value
    named = next((m for m in msgs if m.id == value.lower()), None)
    return rules.thread_of(named) if named is not None else value


def of(ctx: Ctx, cid: str, value: str) -> tuple[str, list[Message]]:
    """The thread ``value`` names in collaboration ``cid`` and its messages, in order."""
    msgs = messages(ctx, cid)
    thread = resolve(value, msgs)
    return thread, [m for m in msgs if rules.thread_of(m) == thread]
