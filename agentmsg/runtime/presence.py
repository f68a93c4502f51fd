"""Reading a session's presence from what its hooks left on this machine (rules: ``domain/presence.py``).

* ``ROOT/wake/<pin key>.json``: the host process (pid and start time) its SessionStart recorded
  (``runtime/facts.py``);
* ``idle/<runtime>/<session>.turn`` and ``.rest``: modification times only, touched by the launcher (no
  interpreter) and by every full hook run: the last prompt or tool call, the last Stop or start;
* on a replica root, for a session whose hooks never ran here: ``presence.remote.json``, what the machine it
  runs on reported through the store, as this root's mirror last pulled it (``resident/mirror.py``).

Derived and local: nothing here is a journal record, and an idle prompt still starts no interpreter.
"""

from __future__ import annotations

import os
import time

from agentmsg.backends.file import idle, layout
from agentmsg.backends.file import presence as reports
from agentmsg.domain import presence
from agentmsg.hosts import registry
from agentmsg.runtime import facts as sessionfacts


def of(root: str, pin: str, *, listening: bool, now: float | None = None) -> presence.Presence:
    """``pin``'s presence; ``listening``: its wake-up consent is active."""
    t = time.time() if now is None else now
    found = here(root, pin, listening=listening, now=t)
    if found.state == presence.UNKNOWN and found.why in (presence.REMOTE, presence.NEVER):
        return presence.from_report(reports.pulled(root, pin), pin, t) or found
    return found


def here(root: str, pin: str, *, listening: bool, now: float | None = None) -> presence.Presence:
    """``pin``'s presence from what its hooks left on this machine only."""
    t = time.time() if now is None else now
    runtime = pin.partition(":")[0]
    if runtime == registry.NO_HOST:
        return presence.decide(human=True, seen=False, remote=False, alive=None, turn_at=None, rest_at=None,
                               listening=False, now=t)
    doc = sessionfacts.load(root, pin)
    facts = doc.get("facts") if isinstance(doc.get("facts"), dict) else None
    turn_at, rest_at = idle.presence_marks(root, pin)
    alive = sessionfacts.alive(facts) if facts is not None and type(facts.get("pid")) is int else None
    seen = facts is not None or turn_at is not None or rest_at is not None
    remote = os.path.isfile(os.path.join(root, layout.REPLICA))
    return presence.decide(human=False, seen=seen, remote=remote, alive=alive, turn_at=turn_at, rest_at=rest_at,
                           listening=listening, now=t)


def payload(p: presence.Presence, now: float | None = None) -> dict[str, object]:
    """For ``--json``, ``status``, ``roster`` and the MCP tools."""
    t = time.time() if now is None else now
    return {"state": p.state, "why": p.why or None, "last_activity": p.last,
            "last_activity_age": None if p.last is None else round(max(0.0, t - p.last), 1)}
