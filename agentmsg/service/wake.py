"""Wake consent through the port: on, off, status, and the ring a send asks for.

The consent and every bound are pure rules in ``domain/wake.py``; this
module decides who may change a consent (only the recipient, for itself),
writes the records inside the collaboration's transaction, and picks the
mechanism (``agentmsg/runtime/wakeup.py``) for the session facts its hooks recorded.
Store first, then ring: a ring that fails or is refused never fails a send.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping
from typing import Any

from agentmsg.domain import kinds, validate
from agentmsg.domain import wake as rules
from agentmsg.domain.values import Pin, Registry
from agentmsg.errors import Closed, Conflict, DeliveryInactive, IdentityError, NothingCanRing, UsageError
from agentmsg.hosts import registry
from agentmsg.hosts.base import is_abs_path
from agentmsg.ports import Store, Txn
from agentmsg.runtime import facts as sessionfacts


def _binding(reg: Registry, who: Pin) -> str:
    from agentmsg.domain.rules import require_alias

    if reg.closed:
        raise Closed(f"collaboration {reg.collab} was closed at {reg.closed_at}; wake-ups stay off")
    return require_alias(reg, who)


def _current(tx: Txn, alias: str, pin: str) -> rules.Consent | None:
    return rules.latest(rules.fold(tx.delivery_records()), alias, pin)


def facts_for(root: str, pin: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The facts the session's hooks recorded at SessionStart, completed from this command's own session.

    A tmux pane in them, claimed by this command's environment or found in the recorded file, must be the
    session's own (``runtime/panes.py``): anything else is refused, nothing is recorded.
    """
    from agentmsg.runtime import panes

    runtime, _, session = pin.partition(":")
    host = registry.of_runtime(runtime)
    try:
        gathered = sessionfacts.gather(host.name if host is not None else runtime, session, env, strict=True)
        recorded = sessionfacts.load(root, pin).get("facts")
        facts = {**gathered, **(recorded if isinstance(recorded, dict) else {})}
        socket, pane = facts.get("tmux_socket"), facts.get("pane")
        if socket is not None or pane is not None:
            if not (isinstance(socket, str) and panes.is_pane(pane) and is_abs_path(socket)):
                raise panes.Refused("the recorded pane or socket is malformed")
            panes.verify(socket, str(pane), panes.holders(facts))
    except panes.Refused as exc:
        raise IdentityError(f"wake on: the tmux pane is not this session's own ({exc}); run it from inside the "
                            "session's own tmux pane, or without TMUX and TMUX_PANE") from None
    return facts


def on(store: Store, root: str, collab: str, who: Pin, env: Mapping[str, str], *,
       expires_in: float = rules.DEFAULT_EXPIRES_IN, now: float | None = None) -> dict[str, Any]:
    """Consent for this exact binding (refused while one is active: a consent is never changed)."""
    if not 0 < expires_in <= rules.MAX_DURATION:
        raise UsageError(f"--expires-in must be more than 0 and at most {rules.MAX_DURATION / 3600:g}h")
    pin = str(who)
    facts = facts_for(root, pin, env)
    from agentmsg.runtime import wakeup

    if not wakeup.Mechanism(root, pin, facts).reachable:  # issue 30: refuse what cannot work, record nothing
        raise NothingCanRing(f"wake on: nothing could ring {pin}: its host has no wake-up of its own and no tmux "
                             "pane of its own was recorded; run it inside the session (its tmux pane), or "
                             "leave wake off: the hooks show mail at the next prompt")
    with store.transaction(collab) as tx:
        reg = tx.registry()
        alias = _binding(reg, who)
        t = time.time() if now is None else now
        current = _current(tx, alias, pin)
        if current is not None and current.status(t, holder=pin, closed=False,
                                                  alive=sessionfacts.alive(current.facts)) == "active":
            raise Conflict(f"wake is already on for {alias} (consent {current.id}, expires "
                           f"{rules.iso(current.expires_at)}); a consent is never changed: wake off first")
        rec = tx.append_delivery({
            "type": kinds.WAKE_ON, "consent": str(uuid.uuid4()), "collab": collab, "alias": alias, "pin": pin,
            "by": pin, "expires_at": int(t + expires_in), "expires": rules.iso(t + expires_in),
            "hard_cap_at": int(t + rules.MAX_DURATION), "facts": facts,
        })
    consent = rules.Consent(rec)
    return {"collab": collab, "alias": alias, **consent.describe(t, holder=pin, closed=False,
                                                                 alive=sessionfacts.alive(facts))}


def off(store: Store, collab: str, who: Pin, *, now: float | None = None) -> dict[str, Any]:
    pin = str(who)
    with store.transaction(collab) as tx:
        reg = tx.registry()
        alias = _binding(reg, who)
        t = time.time() if now is None else now
        current = _current(tx, alias, pin)
        status = current.status(t, holder=pin, closed=False) if current else None
        if current is None or status != "active":
            raise DeliveryInactive(f"wake is not on for {alias}" + (f" (the last consent is {status})"
                                                                   if status else ""))
        rec = tx.append_delivery({"type": kinds.WAKE_OFF, "consent": current.id, "alias": alias, "pin": pin,
                                  "by": pin})
        current.withdraw(rec["ts"])
    return {"collab": collab, "alias": alias, **current.describe(t, holder=pin, closed=False)}


def describe(store: Store, collab: str, alias: str, pin: str, reg: Registry | None = None,
             now: float | None = None) -> dict[str, Any] | None:
    """The binding's newest consent as ``status`` and ``delivery inspect`` show it (None: never turned on)."""
    reg = reg or store.registry(collab)
    consent = rules.latest(rules.fold(store.delivery_records(collab)), alias, pin)
    if consent is None:
        return None
    t = time.time() if now is None else now
    return consent.describe(t, holder=reg.holder(alias), closed=reg.closed, alive=sessionfacts.alive(consent.facts))


def status(store: Store, collab: str, who: Pin) -> dict[str, Any]:
    reg = store.registry(collab)
    alias = _binding(reg, who)
    found = describe(store, collab, alias, str(who), reg)
    return {"collab": collab, "alias": alias, "pin": str(who), "wake": found or {"status": "off"}}


# ---- the ring a send asks for ------------------------------------------------------------------


def ring(store: Store, root: str, collab: str, alias: str, *, now: float | None = None,
         retry: bool = False, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Ring ``alias``'s session if its consent and the bounds allow; ``{"outcome", "mechanism"}``.

    Decided and recorded under the collaboration's lock, so two sends merge
    into one ring.  The doorbell names the unacknowledged messages by id.  A
    deferred ring is left for the resident helper (``env``: the sender's, for
    the programs a ring runs and the store it mirrors).
    """
    from agentmsg.runtime import wakeup

    with store.transaction(collab) as tx:
        reg = tx.registry()
        part = reg.participants.get(alias)
        if part is None or not part.active:
            return {"outcome": "wake off", "mechanism": None}
        pin = part.pin
        consent = _current(tx, alias, pin)
        if consent is None:
            return {"outcome": "wake off", "mechanism": None}
        t = time.time() if now is None else now
        turn = sessionfacts.load(root, pin)
        mech = wakeup.Mechanism(root, pin, consent.facts)
        reason = rules.decide(consent, t, holder=reg.holder(alias), closed=reg.closed,
                              alive=sessionfacts.alive(consent.facts),
                              busy=sessionfacts.busy(turn, t) and not mech.queues)
        ids = tx.unacked_ids(alias)
        if not ids:
            return {"outcome": "nothing unacknowledged", "mechanism": None}
        line = rules.doorbell(len(ids), alias, ids[::-1])
        if reason is None:
            outcome, used = mech.ring(line, {"collab": collab, "alias": alias, "consent": consent.id,
                                             "messages": ids}, busy=sessionfacts.busy(turn, t))
        else:
            outcome, used = reason, None
        if outcome == rules.RANG or not (retry or outcome.startswith("wake off")):  # an inert consent: no record
            tx.append_delivery({"type": kinds.WAKE_RING, "consent": consent.id, "alias": alias, "pin": pin,
                                "at": t, "outcome": outcome, "mechanism": used, "messages": ids[-20:]})
    if outcome.startswith(("deferred", "recipient busy")) and not mech.retries_itself(used) and not retry:
        wakeup.retry_later(root, collab, alias, os.environ if env is None else env)
    return {"outcome": outcome, "mechanism": used}


def after_send(store: Store, root: str, collab: str, aliases: list[str],
               env: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """One ring per recipient of a send; a failure is reported, never raised (the message is stored)."""
    out = {}
    for alias in dict.fromkeys(aliases):
        try:
            out[alias] = ring(store, root, collab, alias, env=env)
        except Exception as exc:  # store first, then notify: the send stands
            out[alias] = {"outcome": f"not rung ({type(exc).__name__}: {str(exc)[:160]})", "mechanism": None}
    return out


def valid_duration(text: str) -> float:
    return validate.duration(text, "--expires-in", maximum=rules.MAX_DURATION)
