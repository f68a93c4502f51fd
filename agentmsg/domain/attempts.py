"""The records of one delivery attempt, built in one place for every front end that shows peer text.

A hook that prints a delivery, the renderer that prepared it ahead, and the MCP server that returns an inbox
all write the same records: one ``presented`` receipt per message shown (never an acknowledgement), one
``attempt-complete`` once the text was handed over, and, for a Stop continuation, the envelope slot it spent.
Pure and lean (the hooks build them on every delivery).
"""

from __future__ import annotations

from agentmsg.domain import kinds

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


def presented(ids: Iterable[str], *, attempt: str, host: str, via: str, pin: str) -> list[dict[str, Any]]:
    """One receipt per message shown in ``attempt``; ``via`` is the hook event or the front end's name."""
    return [{"type": kinds.PRESENTED, "message": mid, "attempt": attempt, "host": host, "hook": via, "pin": pin}
            for mid in ids]


def complete(*, attempt: str, host: str, via: str, count: int) -> dict[str, Any]:
    """The attempt's text was handed over (a missing one only makes the attempt look interrupted)."""
    return {"type": kinds.COMPLETE, "attempt": attempt, "host": host, "hook": via, "messages": count}


def slot(*, envelope: str, number: int, alias: str, pin: str, host: str, attempt: str,
         messages: Iterable[str]) -> dict[str, Any]:
    """The Stop continuation slot ``number`` of ``envelope`` that ``attempt`` spent (never reused)."""
    return {"type": kinds.SLOT, "envelope": envelope, "slot": number, "alias": alias, "pin": pin, "host": host,
            "attempt": attempt, "messages": list(messages)}
