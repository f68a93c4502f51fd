"""The file store on both ends of a mirror (``agentmsg sync``).

As a source it is a ``ports.Replica``: each journal is a stream of sealed
records read by sequence, and "something changed" is a poll of the journal
sizes (plain files have nothing to subscribe to).  As a target it imports
records another store sealed, verbatim: :func:`.store.import_records`, beside
the transaction it writes through.  The replica mark (``replica.json``) says
which store a root mirrors.
"""

from __future__ import annotations

import os
import time

from agentmsg import fsio, records
from agentmsg.backends.file import layout
from agentmsg.backends.file.journal import Journal
from agentmsg.domain import rules

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection
    from typing import Any

    from agentmsg.backends.file.protocols import Root

#: Streams whose records carry ``cseq`` (one order across the collaboration): imported in that order.
ORDERED = ("events", "notes")


def stream_names(base: str) -> list[str]:
    """Every stream a collaboration directory holds a journal for."""
    names = [name for name, file in layout.STREAM_FILES.items() if os.path.lexists(os.path.join(base, file))]
    for kind in ("inbox", "receipts"):
        folder = fsio.existing_dir(base, kind)
        if folder is not None:
            names += [f"{kind}/{n[:-6]}" for n in sorted(os.listdir(folder))
                      if n.endswith(".jsonl") and rules.is_alias(n[:-6])]
    return names


def streams(store: Root, collab: str) -> dict[str, int]:
    base = store.base(collab)
    out = {}
    for name in stream_names(base):
        last = Journal(layout.stream(base, name)).last()
        if last is not None:
            out[name] = int(last["seq"])
    return out


def records_since(store: Root, collab: str, stream: str, seq: int, limit: int = 1000) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _pos, rec in Journal(layout.stream(store.base(collab), stream)).scan():
        if rec["seq"] > seq:
            out.append(rec)
            if len(out) >= limit:
                break
    return out


def _snapshot(store: Root, collabs: Collection[str]) -> tuple[object, ...]:
    seen: list[object] = [tuple(store.collabs())]
    for collab in collabs:
        base = layout.collab_dir(store.root, collab)
        if base is None:
            continue
        for name in stream_names(base):
            seen.append((collab, name, fsio.file_size(layout.stream(base, name))))
    return tuple(seen)


_SEEN: dict[tuple[str, tuple[str, ...]], tuple[object, ...]] = {}


def wait_any(store: Root, collabs: Collection[str], timeout: float, poll: float = 0.05) -> bool:
    """Until a journal of ``collabs`` grows or a collaboration appears (True), or ``timeout`` (False).

    Compared with what the previous call saw (as a kept LISTEN connection would), so a change made
    between two calls (while the mirror was copying) is announced at once, not lost.
    """
    key = (store.root, tuple(sorted(collabs)))
    deadline = time.monotonic() + timeout
    before = _SEEN.get(key)
    now = _snapshot(store, collabs)
    while now == before or before is None:
        if before is None:
            before = now
        if time.monotonic() >= deadline:
            _SEEN[key] = now
            return False
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
        now = _snapshot(store, collabs)
    _SEEN[key] = now
    return True


# ---- the replica mark --------------------------------------------------------------------------------


def replica_of(root: str) -> str | None:
    """The store URL this root mirrors (``replica.json``), or None for an ordinary root."""
    raw = fsio.read_bytes(os.path.join(root, layout.REPLICA))
    if not raw:
        return None
    try:
        doc = records.loads(raw)
    except ValueError:
        return "?"  # a damaged mark still marks a replica: refusing a write is the safe side
    return str(doc.get("store") or "?") if isinstance(doc, dict) else "?"


def mark_replica(root: str, url: str) -> None:
    fsio.ensure_dir(root)
    fsio.atomic_write(os.path.join(root, layout.REPLICA),
                      (records.dumps({"store": redact(url), "since": records.now_utc()}) + "\n").encode())


def redact(url: str) -> str:
    """A store URL without its password (the mark is a file anyone with the root can read)."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return url
    cred, _at, host = rest.partition("@")
    user = cred.split(":", 1)[0]
    return f"{scheme}://{user}@{host}" if user else f"{scheme}://{host}"
