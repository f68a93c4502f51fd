"""What the prompt and Stop hooks do for wake-ups (lean; called from ``hooks.py``).

* SessionStart records the session facts (``sessionfacts.record``).
* UserPromptSubmit notes that a turn runs and, while the binding's consent is
  active, records a ``wake-prompt``: a *human* prompt (one that is not a
  doorbell) resets the count of consecutive wakes; a doorbell prompt answers
  the pending ring.  Only when that changes something, so an ordinary
  prompt writes nothing durable.
* Stop notes that the turn ended (a ring left while it ran goes out through
  the next waiter).
"""

from __future__ import annotations

import time

from agentmsg.domain import kinds
from agentmsg.domain import wake as rules

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentmsg.backends.file.store import FileTxn
    from agentmsg.domain.values import Registry


def active(tx: FileTxn, alias: str, pin: str, reg: Registry) -> rules.Consent | None:
    consent = rules.latest(rules.fold(tx.delivery_records()), alias, pin)
    if consent is None or consent.status(time.time(), holder=reg.holder(alias), closed=reg.closed) != "active":
        return None
    return consent


def prompt(tx: FileTxn, alias: str, pin: str, reg: Registry, text: object) -> bool:
    """Record what this prompt means for the bounds; True when the binding's consent is active."""
    consent = active(tx, alias, pin, reg)
    if consent is None:
        return False
    human = not rules.is_doorbell(text)
    if (human and consent.consecutive) or (not human and consent.pending_since is not None):
        tx.append_delivery({"type": kinds.WAKE_PROMPT, "consent": consent.id, "alias": alias, "pin": pin,
                            "at": time.time(), "human": human})
    return True


def turn(root: str, pin: str, state: str) -> None:
    """Only for sessions whose wake consent is active: the facts module is imported then, not on every run."""
    from agentmsg.runtime import facts as sessionfacts

    sessionfacts.set_turn(root, pin, state)
