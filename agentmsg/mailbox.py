"""The read side of the plain-file mailbox, shared by ``FileStore`` and the hooks.

One implementation of each piece both need: the collaboration directory
and its symlink checks, the derived registry document, a pin's bindings,
the read cursor, the unacknowledged messages of an alias, and the id
index's receipt offsets.  ``FileStore`` wraps these in its richer API
(``Registry``, ``Message``, ``Inbox``); the hooks use them as they are, on
plain ``str`` paths and records.  Lean like records.py: the hooks import it
on every prompt.
"""

from __future__ import annotations

import os

from . import fsio, records
from .journal import Journal
from .paths import pin_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .fsio import P
    from .journal import Problem
    from .records import Record

#: Subdirectories of a collaboration; each is checked for a symlink on every access.
COLLAB_SUBDIRS = ("inbox", "receipts", "state", "ids", "transcripts")

_HEX = frozenset("0123456789abcdef")
_ALIAS_REST = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


def is_uuid(value: object) -> bool:
    """Canonical lowercase UUID text, as ``model.as_uuid`` returns it."""
    return (isinstance(value, str) and len(value) == 36
            and all(value[i] == "-" for i in (8, 13, 18, 23))
            and set(value.replace("-", "")) <= _HEX and value.count("-") == 4)


def is_alias(value: object) -> bool:
    """``model.ALIAS_RE`` without ``re``."""
    return (isinstance(value, str) and 0 < len(value) <= 32 and "a" <= value[0] <= "z"
            and set(value) <= _ALIAS_REST)


def collab_dir(root: P, collab: str) -> P | None:
    """The collaboration's directory, or None when there is none.

    A symlinked directory, or subdirectory, raises UnsafePath before
    anything is read or written.
    """
    if not is_uuid(collab):
        return None
    base = fsio.existing_dir(root, "collabs", collab)
    if base is None or not os.path.exists(fsio.join(base, "collab.jsonl")):
        return None
    for sub in COLLAB_SUBDIRS:
        fsio.existing_dir(base, sub)
    return base


def registry_document(base: P) -> dict[str, Any] | None:
    """``registry.yaml`` (JSON under a comment header), or None when it is missing or damaged.

    It is derived from ``collab.jsonl``: on None the caller replays the records.
    """
    raw = fsio.read_bytes(fsio.join(base, "registry.yaml"))
    if raw is None:
        return None
    try:
        doc = records.loads(b"\n".join(line for line in raw.splitlines() if not line.startswith(b"#")))
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("participants"), dict):
        return None
    last = Journal(fsio.join(base, "collab.jsonl")).last()
    if not last or doc.get("built_from") != {"seq": last["seq"], "sum": last["sum"]}:
        return None  # stale: a crash came between an event and the rewrite
    return doc


def holder(doc: dict[str, Any], alias: str) -> str | None:
    """The pin actively holding ``alias`` in a registry document, if any."""
    p = doc["participants"].get(alias)
    return p["pin"] if isinstance(p, dict) and p.get("active") else None


def bindings(root: P, pin: str,
             registry: Callable[[str], dict[str, Any] | None]) -> list[tuple[str, str, dict[str, Any]]]:
    """Active ``(collab, alias, registry document)`` of a pin, confirmed against each registry.

    The pin index (``pins/<key>.json``) is derived and may be stale; only a
    registry that is open and has ``pin`` actively holding the alias
    counts.  ``registry(collab)`` returns a collaboration's registry
    document, or None when there is no such collaboration.  An entry naming
    no valid collaboration or alias names nothing.
    """
    base = fsio.existing_dir(root, "pins")
    raw = fsio.read_bytes(fsio.join(base, f"{pin_key(pin)}.json")) if base is not None else None
    found = []
    for entry in records.loads(raw)["bindings"] if raw else []:
        collab, alias = entry["collab"], entry["alias"]
        if not (is_uuid(collab) and is_alias(alias)):
            continue
        doc = registry(collab)
        if doc is not None and doc.get("closed_at") is None and holder(doc, alias) == pin:
            found.append((collab, alias, doc))
    return found


def cursor(base: P, alias: str) -> dict[str, Any]:
    """The read cursor ``{"scanned", "unacked", "rcpt"}``; anything malformed reads as "from the start".

    ``scanned``: inbox offset up to which every message is classified;
    ``unacked``: offsets of the messages before it not yet acknowledged;
    ``rcpt``: receipts offset up to which acks are folded in.  A read costs
    the unacknowledged messages plus what arrived since, never the history,
    however old the oldest unread message is.  Only ``FileStore`` writes it.
    """
    state = fsio.existing_dir(base, "state")
    raw = fsio.read_bytes(fsio.join(state, f"{alias}.json")) if state is not None else None
    try:
        cur = records.loads(raw) if raw else None
    except ValueError:
        cur = None
    if (isinstance(cur, dict) and type(cur.get("scanned")) is int and type(cur.get("rcpt")) is int
            and isinstance(cur.get("unacked"), list) and all(type(o) is int for o in cur["unacked"])
            and cur["scanned"] >= 0 and cur["rcpt"] >= 0):
        return cur
    return {"scanned": 0, "unacked": [], "rcpt": 0}


def record_at(journal: Journal, offset: int) -> Record | None:
    """The record that starts exactly at ``offset`` (not the next one after a damaged line)."""
    for pos, rec, _end in journal.entries(offset):
        return rec if pos == offset else None
    return None


def classify(inbox: Journal, cur: dict[str, Any], acked: set[str],
             problems: list[Problem] | None = None) -> tuple[list[tuple[int, Record]], int]:
    """``[(offset, record)]`` of unacknowledged messages, and how far the inbox was read."""
    out = []
    for off in cur["unacked"]:
        rec = record_at(inbox, off)
        if rec is not None:
            out.append((off, rec))
    scanned = cur["scanned"]
    for pos, rec, end in inbox.entries(scanned, problems):
        out.append((pos, rec))
        scanned = end
    return [(off, rec) for off, rec in out if rec["id"] not in acked], scanned


class ReceiptView:
    """The acks and retries in an alias's receipts after the read cursor, read incrementally.

    The cursor folds in the receipts up to its ``rcpt``; the ones after it
    are read here.  A reader that comes back often (the hooks, on every
    prompt, whose own presented/complete receipts pile up there between
    acks) keeps the view's :meth:`document` and passes it back to
    :func:`pending`, which then reads only receipts it has not seen
    (``upto`` on).  ``since`` is the cursor position the view started from:
    if the cursor moves below it (a reset cursor), or the receipts file is
    shorter than ``upto``, the view starts again from the cursor.
    """

    __slots__ = ("acks", "retries", "since", "upto")

    def __init__(self, doc: object, rcpt: int, end: int) -> None:
        ok = (isinstance(doc, dict) and type(doc.get("since")) is int and type(doc.get("upto")) is int
              and isinstance(doc.get("acks"), list) and rcpt >= doc["since"] and doc["upto"] <= end)
        self.since: int = doc["since"] if ok else rcpt  # type: ignore[index]
        self.upto: int = doc["upto"] if ok else rcpt  # type: ignore[index]
        self.acks: set[str] = set(doc["acks"]) if ok else set()  # type: ignore[index]
        #: messages a ``retry`` receipt asked to present again, among the receipts read this time
        self.retries: list[str] = []

    def update(self, receipts: Journal) -> None:
        for _pos, rec, end in receipts.entries(self.upto):
            kind = rec.get("type")
            if kind == "ack":
                self.acks.add(rec.get("message"))  # type: ignore[arg-type]
            elif kind == "retry":
                self.retries.append(rec.get("message"))  # type: ignore[arg-type]
            self.upto = end

    def document(self) -> dict[str, Any]:
        """What to pass back to :func:`pending` next time (JSON-ready)."""
        return {"since": self.since, "upto": self.upto, "acks": sorted(self.acks)}


def pending(base: P, alias: str, view: object = None,
            problems: list[Problem] | None = None) -> tuple[list[Record], ReceiptView]:
    """Unacknowledged messages of ``alias`` as records, oldest first, and the receipt view.

    Cost follows what is unacknowledged, not history: the cursor's
    unacknowledged offsets and the inbox after its ``scanned`` mark, the
    receipts from its ``rcpt`` (or from where the ``view`` document, from an
    earlier call, stopped).  Skipped inbox lines go to ``problems``.
    """
    cur = cursor(base, alias)
    receipts = Journal(fsio.join(base, "receipts", f"{alias}.jsonl"))
    rv = ReceiptView(view, cur["rcpt"], receipts.size())
    rv.update(receipts)
    inbox = Journal(fsio.join(base, "inbox", f"{alias}.jsonl"))
    found, _scanned = classify(inbox, cur, set(), problems)
    seen = {rec["id"] for _off, rec in found}
    msgs = [rec for _off, rec in found if rec["id"] not in rv.acks]
    rv.acks &= seen  # acks of messages the cursor has passed are not needed again
    return msgs, rv


def index_path(base: P, message: str) -> P:
    """``ids/<2 hex>/<id>.json``; a symlinked shard raises UnsafePath."""
    fsio.existing_dir(base, "ids", message[:2])
    return fsio.join(base, "ids", message[:2], f"{message}.json")


def read_index(base: P, message: str) -> tuple[dict[str, Any], list[int]] | None:
    """An id's index entry and the offsets of its receipts, or None.

    The entry is one JSON line (where the message is, or which copies a
    broadcast made), then one line per receipt offset, appended without a
    rewrite.  A damaged line is skipped: this is derived data.
    """
    if not is_uuid(message):
        return None
    raw = fsio.read_bytes(index_path(base, message))
    if raw is None:
        return None
    head, _, tail = raw.partition(b"\n")
    try:
        doc = records.loads(head.decode())
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    offsets = [int(line) for line in tail.split(b"\n") if line.isdigit()]
    return doc, offsets


def write_index(base: P, message: str, doc: dict[str, Any]) -> None:
    fsio.ensure_dir(base, "ids", message[:2])
    fsio.atomic_write(index_path(base, message), records.dumps_plain(doc).encode() + b"\n")


def index_receipt(base: P, message: str, offset: int) -> None:
    """Point a message's index entry at a receipt for it, so ``FileStore.state`` never scans history.

    An append, not a rewrite: a prompt that shows twenty messages pays for
    twenty small appends.  A missing entry is left alone (the receipt itself
    is stored, which is what counts).
    """
    if not is_uuid(message):
        return
    path = index_path(base, message)
    if fsio.file_size(path):
        fsio.append(path, f"{offset}\n".encode(), durable=False)
