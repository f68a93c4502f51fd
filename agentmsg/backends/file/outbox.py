"""The replica root's outbox: records the hooks write, on their way to the store the root mirrors.

A replica's journals hold only what the server sealed (the mirror copies them
verbatim), so a hook on a replica root cannot append its ``presented`` and
``attempt-complete`` receipts (or a Stop's spent slot) there.  It appends
one entry to ``ROOT/outbox.jsonl`` instead (fsynced, under
``outbox.lock``); ``agentmsg sync`` pushes each entry through the remote
port and removes it once its records have come back down.  Every item
carries the entry's id as ``outbox``: that is how the mirror recognises
an entry already stored (after a crash between push and removal) and never
stores it twice.

Lean: the hooks import it (stdlib only, like ``journal``).
"""

from __future__ import annotations

import os

from agentmsg import fsio, records
from agentmsg.backends.file import layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LOCK_TIMEOUT = 5.0


def put(root: str, collab: str, stream: str, items: list[dict[str, Any]], *, entry_id: str,
        durable: bool = True) -> dict[str, Any]:
    """Append one entry (``stream`` is ``receipts/<alias>`` or ``delivery``); returns it."""
    layout.stream("", stream)  # an unknown stream or a bad alias is refused before anything is written
    entry = {"id": entry_id, "collab": collab, "stream": stream,
             "items": [dict(item, outbox=entry_id) for item in items]}
    with fsio.locked(os.path.join(root, layout.OUTBOX_LOCK), LOCK_TIMEOUT):
        fsio.append(os.path.join(root, layout.OUTBOX), records.canonical(entry) + b"\n", durable=durable)
    return entry


def pending(root: str, collab: str | None = None) -> list[dict[str, Any]]:
    """The entries not yet seen back from the server (of one collaboration, if given)."""
    out = []
    for _pos, line, complete in fsio.lines(os.path.join(root, layout.OUTBOX)):
        if not line or not complete:
            continue  # a torn last line: its writer crashed before the fsync returned, so it never printed
        try:
            entry = records.loads(line)
        except ValueError:
            continue
        if (isinstance(entry, dict) and isinstance(entry.get("id"), str) and isinstance(entry.get("items"), list)
                and (collab is None or entry.get("collab") == collab)):
            out.append(entry)
    return out


def remove(root: str, done: set[str]) -> int:
    """Drop the entries whose records came back down; returns how many remain."""
    path = os.path.join(root, layout.OUTBOX)
    with fsio.locked(os.path.join(root, layout.OUTBOX_LOCK), LOCK_TIMEOUT):
        keep = [e for e in pending(root) if e["id"] not in done]
        if not done or fsio.file_size(path) == 0:
            return len(keep)
        fsio.atomic_write(path, b"".join(records.canonical(e) + b"\n" for e in keep))
    return len(keep)


def slots(root: str, collab: str) -> list[dict[str, Any]]:
    """Spent Stop slots not yet back from the server: a replica's Stop hook counts them, so none is reused."""
    return [item for e in pending(root, collab) if e.get("stream") == "delivery" for item in e["items"]
            if isinstance(item, dict)]
