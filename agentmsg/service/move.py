"""Move one collaboration from the file store to a database store, records verbatim.

The records are copied as they were sealed (``ports.Replica`` reads them),
so the hash chains, sequence numbers and ``cseq`` order are the same on both
sides, and ``verify`` is clean on both after.  The file copy is left as it
was: history is never removed.
"""

from __future__ import annotations

from typing import Any

from agentmsg.errors import TamperDetected
from agentmsg.ports import Record, Replica

#: Streams in the order they are stored: events first (they bind aliases to the acting role on a server).
_FIRST = ("events", "notes", "delivery")


def _order(name: str) -> tuple[int, str]:
    return (_FIRST.index(name), name) if name in _FIRST else (3 if name.startswith("inbox/") else 4, name)


def read_all(source: Replica, collab: str, page: int = 1000) -> dict[str, list[Record]]:
    """Every stream of ``collab``, in storing order, read by sequence a page at a time."""
    out: dict[str, list[Record]] = {}
    for stream in sorted(source.streams(collab), key=_order):
        recs: list[Record] = []
        while True:
            more = source.records_since(collab, stream, recs[-1]["seq"] if recs else 0, page)
            recs += more
            if len(more) < page:
                break
        out[stream] = recs
    return out


def move(source: Any, target: Any, collab: str) -> dict[str, Any]:
    """Copy ``collab`` from ``source`` (checked first) into ``target`` in one transaction; verify both after."""
    _count, findings = source.verify(collab)
    bad = [f for f in findings if f.get("tampering")]
    if bad:
        raise TamperDetected(f"{len(bad)} finding(s) in the source; first: {bad[0].get('detail')}; nothing moved")
    streams = read_all(source, collab)
    copied = target.copy_in(collab, streams)
    after = {"source": source.verify(collab)[1], "target": target.verify(collab)[1]}
    problems = [f for side in after.values() for f in side if f.get("tampering")]
    if problems:
        raise TamperDetected(f"verify after the move: {problems[0].get('detail')}")
    return {"collab": collab, "records": copied, "streams": {k: len(v) for k, v in streams.items()},
            "from": source.describe()["location"], "to": target.describe()["location"]}
