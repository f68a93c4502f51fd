"""Stop: a continuation only inside an enabled envelope, one durable slot per block, never reused."""

from __future__ import annotations

import time

from agentmsg import records
from agentmsg.backends.file.store import FileTxn
from agentmsg.domain import envelope
from agentmsg.hooks import wake as wakehook
from agentmsg.hooks.base import (
    CANDIDATES,
    HookBase,
    _mark_shown,
    _nothing,
)
from agentmsg.service import attempts as written
from agentmsg.text import boundary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from agentmsg.domain.values import Message, Registry

    Binding = tuple[str, str, Registry]

class StopEvent(HookBase):
    def stop(self, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
        again = data.get("stop_hook_active") is True
        for collab, alias, reg in binds:
            with self.txn(collab) as tx:
                self._pending(tx, alias, reg)
                env = self._envelope(tx, alias, reg)  # first: an unsafe delivery journal ends the hook here, once
                if self._wake_step(wakehook.active, tx, alias, self.pin, reg) is not None:
                    self.busy = True
                    self.stop_quiet = False
                    self._wake_step(wakehook.turn, self.root, self.pin, "idle")
                if env is None:
                    continue
                self.stop_quiet = False
                st = self.load_state(tx, alias)
                requests = self._requests(tx, alias, st)
            if not requests and env.wait > 0 and not again:
                requests = self._wait_for_request(collab, alias, st, env.wait)
            if not requests:
                continue
            if again and {m.id for m in requests} <= set(st["blocked"]) | _last_block(env):
                continue  # nothing new since the last block: let it stop, never loop
            return self._block(collab, alias, reg, st)
        return b"", _nothing

    def _requests(self, tx: FileTxn, alias: str, st: dict[str, Any]) -> list[Message]:
        self._fold_receipts(tx, alias, st)
        return tx.unacked(alias, limit=CANDIDATES, requests_only=True).messages

    def _wait_for_request(self, collab: str, alias: str, st: dict[str, Any], wait: float) -> list[Message]:
        deadline = time.monotonic() + min(wait, envelope.MAX_WAIT)
        seen = self.store.last_seq(collab, alias)
        while time.monotonic() < deadline:
            if not self.store.wait(collab, alias, seen, deadline - time.monotonic()):
                return []
            seen = self.store.last_seq(collab, alias)
            with self.txn(collab) as tx:
                found = self._requests(tx, alias, st)
            if found:
                return found
        return []

    def _block(self, collab: str, alias: str, reg: Registry, st: dict[str, Any]) -> tuple[bytes, Callable[[], None]]:
        """Spend one slot and present the pending requests, all under the lock, before printing."""
        with self.txn(collab) as tx:
            env = self._envelope(tx, alias, reg)  # again, under the lock: slots are never reused
            requests = self._requests(tx, alias, st)
            if env is None or not requests:
                return b"", _nothing
            slot = 1 + max((s["slot"] for s in env.spent), default=0)
            total = tx.unacked(alias, limit=1, requests_only=True).total

            def lead(shown: int) -> str:
                return (f"agentmsg: {total} unacknowledged request{'s' * (total != 1)} from peers "
                        f"{'are' if total != 1 else 'is'} waiting for {alias} in collaboration {collab}; "
                        f"{shown} quoted below. Stop continuations are enabled for this session until "
                        f"{envelope.iso(env.expires_at)}; this one used slot {slot} of {env.slots}.\n")

            rendered = boundary.render(requests, alias=alias, cap=self.cap, unit=self.unit, lead=lead,
                                       more=total - len(requests))
            if not rendered.included:
                return b"", _nothing
            attempt = records.uuid4()
            written.spend_slot(tx, envelope=env.id, number=slot, alias=alias, pin=self.pin, host=self.host,
                               attempt=attempt, messages=rendered.included, outbox=self.outbox(tx))
            complete = self.claim(tx, alias, rendered.included, attempt)
            st["blocked"] = [m.id for m in requests]
            _mark_shown(st, [m.seq for m in requests if m.id in rendered.included])
            self.save_state(tx, alias, st)
        return self.output(rendered.text), complete


def _last_block(env: envelope.Envelope) -> set[str]:
    """The messages the binding's last Stop block showed, from its slot record (truth): a hook state lost or
    reset since then must not make a continued stop look new and block again."""
    found = env.spent[-1].get("messages") if env.spent else None
    return {m for m in found if isinstance(m, str)} if isinstance(found, list) else set()
