"""Store-level reads every backend answers the same way: one short transaction each.

A backend mixes this in and provides ``transaction(collab)``; the reads
then see exactly what its transactions see (a file store folds derived
files under its lock).  Lean: the file store, which the hooks import,
uses it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable
    from typing import Any

    from agentmsg.domain.values import Message, Page, Registry
    from agentmsg.ports import Txn


class TxnReads:
    def transaction(self, collab: str) -> Txn:
        raise NotImplementedError

    def reading(self, collab: str) -> Txn:
        """A transaction to read in: the writers' lock here; a backend with snapshots reads without it."""
        return self.transaction(collab)

    def registry(self, collab: str) -> Registry:
        with self.reading(collab) as tx:
            return tx.registry()

    def bound_in(self, collabs: Iterable[str], pin: str) -> list[tuple[str, str]]:
        """(collab, alias) for each of ``collabs`` whose registry binds ``pin`` and is still open."""
        out = []
        for collab in collabs:
            reg = self.registry(collab)
            alias = reg.alias_of(pin)
            if alias is not None and not reg.closed:
                out.append((collab, alias))
        return out

    def message(self, collab: str, message_id: str) -> Message | None:
        with self.reading(collab) as tx:
            return tx.message(message_id)

    def unacked(self, collab: str, alias: str, *, limit: int, skip: Collection[int] = (),
                requests_only: bool = False, priority_first: bool = True) -> Page:
        with self.reading(collab) as tx:
            return tx.unacked(alias, limit=limit, skip=skip, requests_only=requests_only,
                              priority_first=priority_first)

    def since(self, collab: str, alias: str, seq: int) -> list[Message]:
        """Messages to ``alias`` after sequence number ``seq`` (what ``watch`` waits for)."""
        with self.reading(collab) as tx:
            return tx.since(alias, seq)

    def message_receipts(self, collab: str, message: Message) -> list[dict[str, Any]]:
        with self.reading(collab) as tx:
            return tx.message_receipts(message)
