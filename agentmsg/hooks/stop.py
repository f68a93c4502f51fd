"""Stop: a continuation only inside an enabled envelope, one durable slot per block, never reused."""

from __future__ import annotations

import time

from agentmsg import records
from agentmsg.backends.file.store import FileTxn
from agentmsg.domain import envelope
from agentmsg.hooks import wake as wakehook
from agentmsg.hooks.base import CANDIDATES, HookBase, _mark_shown, _nothing, artifact_notes
from agentmsg.service import attempts as written
from agentmsg.text import boundary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from agentmsg.domain.values import Message, Registry
    from agentmsg.hooks.base import Binding


def stop(hook: HookBase, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
    again = data.get("stop_hook_active") is True
    for collab, alias, reg in binds:
        with hook.txn(collab) as tx:
            hook._pending(tx, alias, reg)
            env = hook._envelope(tx, alias, reg)  # first: an unsafe delivery journal ends the hook here, once
            if hook._wake_step(wakehook.active, tx, alias, hook.pin, reg) is not None:
                hook.busy = True
                hook.stop_quiet = False
                hook._wake_step(wakehook.turn, hook.root, hook.pin, "idle")
            if env is None:
                continue
            hook.stop_quiet = False
            st = hook.load_state(tx, alias)
            requests = _requests(hook, tx, alias, st)
        if not requests and env.wait > 0 and not again:
            requests = _wait_for_request(hook, collab, alias, st, env.wait)
        if not requests:
            continue
        if again and {m.id for m in requests} <= set(st["blocked"]) | _last_block(env):
            continue  # nothing new since the last block: let it stop, never loop
        return _block(hook, collab, alias, reg, st)
    return b"", _nothing


def _requests(hook: HookBase, tx: FileTxn, alias: str, st: dict[str, Any]) -> list[Message]:
    hook._fold_receipts(tx, alias, st)
    return tx.unacked(alias, limit=CANDIDATES, requests_only=True).messages


def _wait_for_request(hook: HookBase, collab: str, alias: str, st: dict[str, Any], wait: float) -> list[Message]:
    deadline = time.monotonic() + min(wait, envelope.MAX_WAIT)
    seen = hook.store.last_seq(collab, alias)
    while time.monotonic() < deadline:
        if not hook.store.wait(collab, alias, seen, deadline - time.monotonic()):
            return []
        seen = hook.store.last_seq(collab, alias)
        with hook.txn(collab) as tx:
            found = _requests(hook, tx, alias, st)
        if found:
            return found
    return []


def _block(hook: HookBase, collab: str, alias: str, reg: Registry,
           st: dict[str, Any]) -> tuple[bytes, Callable[[], None]]:
    """Spend one slot and present the pending requests, all under the lock, before printing."""
    with hook.txn(collab) as tx:
        env = hook._envelope(tx, alias, reg)  # again, under the lock: slots are never reused
        requests = _requests(hook, tx, alias, st)
        if env is None or not requests:
            return b"", _nothing
        slot = 1 + max((s["slot"] for s in env.spent), default=0)
        total = tx.unacked(alias, limit=1, requests_only=True).total

        def lead(shown: int) -> str:
            return (f"agentmsg: {total} unacknowledged request{'s' * (total != 1)} from peers "
                    f"{'are' if total != 1 else 'is'} waiting for {alias} in collaboration {collab}; "
                    f"{shown} quoted below. Stop continuations are enabled for this session until "
                    f"{envelope.iso(env.expires_at)}; this one used slot {slot} of {env.slots}.\n")

        rendered = boundary.render(requests, alias=alias, cap=hook.cap, unit=hook.unit, lead=lead,
                                   more=total - len(requests), notes=artifact_notes(hook))
        if not rendered.included:
            return b"", _nothing
        attempt = records.uuid4()
        written.spend_slot(tx, envelope=env.id, number=slot, alias=alias, pin=hook.pin, host=hook.host,
                           attempt=attempt, messages=rendered.included, outbox=hook.outbox(tx))
        complete = hook.claim(tx, alias, rendered.included, attempt)
        st["blocked"] = [m.id for m in requests]
        _mark_shown(st, [m.seq for m in requests if m.id in rendered.included])
        hook.save_state(tx, alias, st)
    return hook.output(rendered.text), complete


def _last_block(env: envelope.Envelope) -> set[str]:
    """The messages the binding's last Stop block showed, from its slot record (truth): a hook state lost or
    reset since then must not make a continued stop look new and block again."""
    found = env.spent[-1].get("messages") if env.spent else None
    return {m for m in found if isinstance(m, str)} if isinstance(found, list) else set()
