"""Writing a delivery attempt, for every front end that shows peer text to a model.

Presented receipts are written before the text is shown, the completion after it, and a Stop continuation
spends its slot beside them; never an acknowledgement.  The hooks (every prompt, every stop), the renderer
that prepares a prompt ahead, and the MCP server (through ``Mailbox``) all write them here, inside the
transaction they already hold.  On a mirrored root the hooks hand an ``Outbox`` instead: there the records
travel to the server through the root's outbox (docs/MIRROR.md).

Lean: the hooks import it on every run (the only module of ``service/`` they import).
"""

from __future__ import annotations

from agentmsg import records
from agentmsg.domain import attempts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, Protocol

    from agentmsg.ports import Txn

    class Outbox(Protocol):
        """A mirrored root's outbox for one collaboration (``backends.file.outbox.put``)."""

        def put(self, stream: str, recs: list[dict[str, Any]], *, durable: bool) -> None: ...


def present(tx: Txn | None, alias: str, ids: Iterable[str], *, attempt: str, host: str, via: str, pin: str,
            durable: bool = True, outbox: Outbox | None = None) -> None:
    """One ``presented`` receipt per message shown in ``attempt``.  ``durable=False`` skips the fsync: a lost
    receipt only makes its messages come due again (docs/DELIVERY.md); an outbox entry stays durable."""
    recs = attempts.presented(ids, attempt=attempt, host=host, via=via, pin=pin)
    if outbox is not None:
        outbox.put(f"receipts/{alias}", recs, durable=True)
    elif tx is not None:
        tx.append_receipts(alias, recs, durable=durable, head=False)


def complete(tx: Txn | None, alias: str, *, attempt: str, host: str, via: str, count: int,
             outbox: Outbox | None = None) -> None:
    """The attempt's text was handed over.  Never fsynced: losing it only makes the attempt look interrupted
    (``delivery retry`` exists)."""
    rec = attempts.complete(attempt=attempt, host=host, via=via, count=count)
    if outbox is not None:
        outbox.put(f"receipts/{alias}", [rec], durable=False)
    elif tx is not None:
        tx.append_receipts(alias, [rec], durable=False)


def spend_slot(tx: Txn, *, envelope: str, number: int, alias: str, pin: str, host: str, attempt: str,
               messages: Iterable[str], outbox: Outbox | None = None) -> None:
    """The Stop continuation's slot, durable before the text is shown (slots are never reused)."""
    rec = attempts.slot(envelope=envelope, number=number, alias=alias, pin=pin, host=host, attempt=attempt,
                        messages=messages)
    if outbox is not None:
        outbox.put("delivery", [dict(rec, ts=records.now_utc())], durable=True)
    else:
        tx.append_delivery(rec)
