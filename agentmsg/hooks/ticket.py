"""SessionStart of a session ``agentmsg spawn`` started: its one-time ticket binds it to its alias.

The spawner leaves the ticket in the new session's environment (``AGENTMSG_TICKET``) with the collaboration
it admits to (``AGENTMSG_TICKET_COLLAB``); the collaboration recorded only the ticket's sha256 and the alias
it is for.  This session's own SessionStart hook consumes it: it joins as that alias, under the join rules
(``rules.join_event``: the ticket must be unused, unexpired and for that alias).  The only join a hook ever
makes, and only with a ticket its own environment holds; the binding never depends on the session guessing
who it is.  A later SessionStart (resume, clear, compact) finds the ticket used and changes nothing.

Imported only at a SessionStart whose environment holds a ticket.
"""

from __future__ import annotations

from agentmsg.backends.file import layout
from agentmsg.domain import rules
from agentmsg.domain.values import Pin
from agentmsg.runtime.spawn import TICKET_COLLAB_VAR, TICKET_VAR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def admit(hook: Any, env: Mapping[str, str]) -> str | None:
    """Join with the environment's ticket; the alias joined, or None when there is nothing to do.  ``hook``: the
    running ``hooks.base.HookBase`` (its store, pin and locked transactions; not imported: it imports this)."""
    import hashlib

    ticket, collab = env.get(TICKET_VAR, ""), env.get(TICKET_COLLAB_VAR, "")
    if not ticket or not layout.is_uuid(collab) or hook.store.replica_of is not None:
        return None  # a replica root's hooks write no events: spawn refuses such roots
    digest = hashlib.sha256(ticket.encode()).hexdigest()
    runtime, _, session = hook.pin.partition(":")
    with hook.txn(collab) as tx:
        reg = tx.registry()
        entry = reg.tickets.get(digest)
        if entry is not None and entry.get("succeeds"):  # a resume's: moves the alias only to a new session id
            moved = rules.resume_takeover(reg, Pin(runtime, session), digest)
            if moved is not None:
                tx.append_event(moved)
            return str(moved["alias"]) if moved is not None else None
        alias = entry.get("for") if entry is not None else None
        if not rules.is_alias(alias):
            return None  # used already (this session, started again), revoked, or not a spawn's ticket
        assert isinstance(alias, str)
        ev = rules.join_event(reg, Pin(runtime, session), alias, ticket=digest)
        if ev is not None:
            tx.append_event(ev)
        return alias
