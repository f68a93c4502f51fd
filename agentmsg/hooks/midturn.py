"""PostToolUse (mid-turn delivery, opt-in per binding; rules in ``domain.midturn``): between tool calls,
the due messages the binding's setting lets interrupt a turn, at most once per gap."""

from __future__ import annotations

import time

from agentmsg import records
from agentmsg.hooks.base import HookBase, _mark_shown, _nothing, artifact_notes
from agentmsg.text import boundary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from agentmsg.domain.values import Message
    from agentmsg.hooks.base import Binding


def post_tool(hook: HookBase, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
    """Between tool calls: the due messages the binding opted to be interrupted by, gap permitting."""
    from agentmsg.domain import midturn  # PostToolUse only

    now = time.time()
    work = []
    due_all: list[Message] = []
    for collab, alias, reg in binds:
        with hook.txn(collab) as tx:
            setting = midturn.active(tx.delivery_records(), alias, hook.pin, holder=reg.holder(alias),
                                     closed=reg.closed)
            if setting is None:
                continue
            st = hook.load_state(tx, alias)
            wanted = [m for m in hook._due(tx, alias, st).messages if setting.wants(m)]
            if not wanted:
                continue
            last = st.get("mid")
            if not setting.may_inject(last if type(last) in (int, float) else None, now):
                hook.mid_busy = True  # due, held by the gap: time alone will let it through
                continue
        work.append((collab, alias, st, wanted))
        due_all += wanted
    if not due_all:
        return b"", _nothing
    aliases = ", ".join(sorted({alias for _c, alias, *_ in work}))
    collabs = list(dict.fromkeys(m.collab for m in due_all))
    where = f" in collaboration {collabs[0]}" if len(collabs) == 1 else ""
    n = len(due_all)

    def lead(shown: int) -> str:
        return (f"agentmsg (mid-turn delivery, between tool calls): {n} peer message{'s' * (n != 1)} for "
                f"{aliases}{where} {'are' if n != 1 else 'is'} unacknowledged and chosen to reach this "
                f"session before its turn ends; {shown} quoted below.\n")

    rendered = boundary.render(due_all, alias=aliases, cap=hook.cap, unit=hook.unit, lead=lead,
                               notes=artifact_notes(hook))
    included = set(rendered.included)
    if not included:
        hook.mid_busy = True  # nothing fit: still due, so no marker
        return b"", _nothing
    completers = []
    for collab, alias, st, wanted in work:
        ids = tuple(m.id for m in wanted if m.id in included)
        if not ids:
            continue
        with hook.txn(collab) as tx:
            completers.append(hook.claim(tx, alias, ids, records.uuid4(), durable=False))
            _mark_shown(st, [m.seq for m in wanted if m.id in included])
            st["mid"] = now
            hook.save_state(tx, alias, st)

    def after() -> None:
        for complete in completers:
            complete()

    return hook.output(rendered.text), after
