"""``ackn``: how many messages of an inbox a receipt says are acknowledged; one count for every backend.

Each receipt carries the running count, so a replica copied record by
record, and ``verify``, see the same number the writer saw.  Lean: the
file store, which the hooks import, uses it.
"""

from __future__ import annotations

from agentmsg.domain import kinds

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def count_acks(last: dict[str, Any] | None, items: list[dict[str, Any]], *, acked_now: Callable[[], int],
               is_acked: Callable[[int], bool],
               seq_of: Callable[[object], int | None]) -> list[dict[str, Any]]:
    """``items`` with ``ackn`` added: the tail's count (or ``acked_now()``), plus each ack of a not-yet-acked seq."""
    n = last["ackn"] if last is not None and type(last.get("ackn")) is int else acked_now()
    seen: set[int] = set()
    out = []
    for fields in items:
        if fields.get("type") == kinds.ACK:
            seq = fields.get("mseq")
            if type(seq) is not int:
                seq = seq_of(fields.get("message"))
            if type(seq) is int and not is_acked(seq) and seq not in seen:
                seen.add(seq)
                n += 1
        out.append(dict(fields, ackn=n))
    return out
