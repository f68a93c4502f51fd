"""Stop-delivery envelopes through the port: enable, disable, inspect, retry.

The envelope itself (what is active, how many slots are left) is a pure
fold in ``domain.envelope``; this module only decides who may change one
and writes the records, inside the collaboration's transaction.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from agentmsg.domain import envelope as env_
from agentmsg.domain import kinds, midturn, rules, validate
from agentmsg.domain.values import Pin, Registry
from agentmsg.errors import Closed, Conflict, DeliveryInactive, IdentityError, NotFound, UsageError
from agentmsg.ports import Store


def _pin(who: Pin | str) -> Pin:
    return who if isinstance(who, Pin) else validate.pin(who)


def _binding(reg: Registry, who: Pin) -> str:
    if reg.closed:
        raise Closed(f"collaboration {reg.collab} was closed at {reg.closed_at}; delivery stays inert")
    return rules.require_alias(reg, who)


def _current(tx: Any, who: Pin, now: float | None) -> tuple[str, str, float, env_.Envelope | None]:
    """``(alias, pin, now, the binding's newest envelope)`` inside a transaction."""
    alias = _binding(tx.registry(), who)
    t = time.time() if now is None else now
    return alias, str(who), t, env_.latest(env_.fold(tx.delivery_records()), alias, str(who))


def enable(store: Store, collab: str, who: Pin | str, *, expires_in: float = env_.DEFAULT_EXPIRES_IN,
           max_duration: float = env_.MAX_DURATION, slots: int = env_.DEFAULT_SLOTS, wait: float = 0.0,
           now: float | None = None) -> dict[str, Any]:
    """Create the immutable envelope for this exact binding (refused while one is active)."""
    if not 0 < max_duration <= env_.MAX_DURATION:
        raise UsageError(f"--max-duration must be more than 0 and at most {env_.MAX_DURATION / 3600:g}h")
    if not 0 < expires_in <= max_duration:
        raise UsageError(f"--expires-in must be more than 0 and at most --max-duration ({max_duration:g}s)")
    if not 1 <= slots <= env_.MAX_SLOTS:
        raise UsageError(f"--slots must be between 1 and {env_.MAX_SLOTS}")
    if not 0 <= wait <= env_.MAX_WAIT:
        raise UsageError(f"--wait must be between 0 and {env_.MAX_WAIT:g}s")
    with store.transaction(collab) as tx:
        alias, pin, t, current = _current(tx, _pin(who), now)
        if current is not None and current.status(t, holder=pin, closed=False) == "active":
            raise Conflict(f"delivery is already enabled for {alias} (envelope {current.id}, expires "
                           f"{env_.iso(current.expires_at)}); an envelope is never changed: disable it first")
        rec = tx.append_delivery({
            "type": kinds.ENABLED, "envelope": str(uuid.uuid4()), "collab": collab, "alias": alias, "pin": pin,
            "by": pin, "expires_at": int(t + expires_in), "expires": env_.iso(t + expires_in),
            "hard_cap_at": int(t + max_duration), "hard_cap": env_.iso(t + max_duration),
            "slots": slots, "wait": wait,
        })
    return env_.Envelope(rec).describe(t, holder=pin, closed=False) | {"collab": collab}


def disable(store: Store, collab: str, who: Pin | str, *, now: float | None = None) -> dict[str, Any]:
    with store.transaction(collab) as tx:
        alias, pin, t, current = _current(tx, _pin(who), now)
        status = current.status(t, holder=pin, closed=False) if current else None
        if current is None or status != "active":
            raise DeliveryInactive(f"no active delivery envelope for {alias}"
                                   + (f" (the last one is {status})" if status else ""))
        rec = tx.append_delivery({"type": kinds.DISABLED, "envelope": current.id, "alias": alias, "pin": pin,
                                  "by": pin})
        current.withdraw(rec["ts"])
    return current.describe(t, holder=pin, closed=False) | {"collab": collab}


def inspect(store: Store, collab: str, who: Pin | str, *, last_hook_run: dict[str, Any] | None = None,
            adapters: dict[str, Any] | None = None, env: Mapping[str, str] | None = None,
            now: float | None = None) -> dict[str, Any]:
    """The envelope of this binding and the evidence around it (interrupted attempts, hook runs, and the
    adapters the hosts' files under ``env``'s homes show installed)."""
    if adapters is None:
        import os

        from agentmsg.hosts import install as installer

        adapters = installer.detect_env(os.environ if env is None else env)
    pin = str(_pin(who))
    t = time.time() if now is None else now
    reg = store.registry(collab)
    envs = env_.fold(store.delivery_records(collab))
    alias = reg.alias_of(pin) or next((e.alias for e in reversed(envs.values()) if e.pin == pin), None)
    if alias is None:
        raise IdentityError(f"{pin} is not bound in collaboration {collab} and never enabled delivery there")
    holder = reg.holder(alias)
    mine = [e for e in envs.values() if e.alias == alias and e.pin == pin]
    described = [e.describe(t, holder=holder, closed=reg.closed) for e in mine]
    setting = midturn.latest(store.delivery_records(collab), alias, pin)
    return {
        "collab": collab, "alias": alias, "pin": pin,
        "envelope": described[-1] if described else None, "history": described[:-1],
        "midturn": setting.describe() if setting is not None else None,
        "interrupted": env_.interrupted(store.receipts(collab, alias), t), "last_hook_run": last_hook_run,
        "adapters": adapters or {},
    }


def set_midturn(store: Store, collab: str, who: Pin | str, *, on: bool, priority: str = midturn.DEFAULT_PRIORITY,
                min_gap: float = midturn.DEFAULT_GAP) -> dict[str, Any]:
    """Turn mid-turn (PostToolUse) delivery on or off for this exact binding: one record, newest wins."""
    priority = validate.choice(priority, midturn.PRIORITIES, "--priority")
    if not 0 <= min_gap <= midturn.MAX_GAP:
        raise UsageError(f"--min-gap must be between 0 and {midturn.MAX_GAP:g}s")
    who = _pin(who)
    with store.transaction(collab) as tx:
        alias = _binding(tx.registry(), who)
        rec = tx.append_delivery({"type": kinds.MIDTURN, "collab": collab, "alias": alias, "pin": str(who),
                                  "by": str(who), "on": on, "priority": priority, "min_gap": min_gap})
    return {"collab": collab, "alias": alias, "pin": str(who)} | midturn.Setting(rec).describe()


def retry(store: Store, collab: str, who: Pin | str, attempt: str, message: str) -> dict[str, Any]:
    """Ask the next prompt to present ``message`` again, because ``attempt`` was interrupted."""
    attempt, message = validate.as_uuid(attempt, "attempt id"), validate.message_id(message)
    who = _pin(who)
    with store.transaction(collab) as tx:
        alias = _binding(tx.registry(), who)
        receipts = _receipts(tx, alias)
        found = next((a for a in env_.attempts(receipts) if a["attempt"] == attempt), None)
        if found is None or message not in found["messages"]:
            raise NotFound(f"no presented attempt {attempt} of message {message} for {alias}")
        if found["complete"]:
            raise Conflict(f"attempt {attempt} completed (its output reached the host); nothing to retry")
        if message not in found["unacked"]:
            raise Conflict(f"message {message} is already acknowledged; nothing to retry")
        rec = tx.append_receipts(alias, [{"type": kinds.RETRY, "attempt": attempt, "message": message,
                                          "by": str(who)}])[0]
    return {"collab": collab, "alias": alias, "attempt": attempt, "message": message, "recorded": rec["ts"],
            "effect": "presented again at the next prompt of this session"}


def _receipts(tx: Any, alias: str) -> list[dict[str, Any]]:
    recs, _end = tx.receipts_since(alias, 0)
    return list(recs)
