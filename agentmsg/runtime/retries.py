"""Deferred rings, waiting for the resident helper to ring them again (``wake/retry-<key>.json``).

A send whose wake-up was deferred (a draft on the recipient's prompt line, a busy turn) leaves one request per
binding here and makes sure the helper runs (:func:`agentmsg.resident.helper.ensure_for_retries`).  The helper
rings every request again each ``RETRY_EVERY`` seconds through the service (its consent and bounds decide, as
for the first ring) until it rings, may no longer ring, or ``RETRY_FOR`` seconds have passed since the send
that asked.  A second deferred send for the same binding replaces the request: its rings merge.

A request is local, never a message's only copy: the message is stored before any ring, and a lost request
costs a later wake-up, nothing more.  It records the sender's ``PATH`` (the programs a ring runs: ``tmux``,
a host's CLI), because the helper itself runs with no environment of its own.

Lean: the helper imports it (``os``; ``json`` and the service only when a request is due).
"""

from __future__ import annotations

import os
import time

from agentmsg import fsio, records
from agentmsg.backends.file import layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

RETRY_FOR = 300.0
RETRY_EVERY = 1.0
#: Outcomes after which a ring is worth trying again.
AGAIN = ("deferred", "recipient busy")


def request(root: str, collab: str, alias: str, path: str, *, now: float | None = None) -> None:
    """Leave (or replace) the binding's deferred ring for the helper."""
    fsio.ensure_dir(root, layout.WAKE)
    until = (time.time() if now is None else now) + RETRY_FOR
    doc = {"v": 1, "collab": collab, "alias": alias, "until": until, "path": path}
    fsio.atomic_write(layout.retry_file(root, collab, alias), records.dumps(doc).encode(), durable=False)


def pending(root: str) -> Iterator[tuple[str, dict[str, object]]]:
    """``(file, request)`` for every well-formed request under ``root``; a damaged one is removed."""
    folder = fsio.existing_dir(root, layout.WAKE)
    if folder is None:
        return
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return
    for name in names:
        if not (name.startswith(layout.RETRY_PREFIX) and name.endswith(layout.RETRY_SUFFIX)):
            continue
        path = os.path.join(folder, name)
        doc = _load(path)
        if doc is None or path != layout.retry_file(root, str(doc["collab"]), str(doc["alias"])):
            _unlink(path)  # damaged, or filed under another binding's name: never rung
            continue
        yield path, doc


def count(root: str) -> int:
    return sum(1 for _ in pending(root))


def tick(root: str, ring: Callable[[str, str], str], *, now: float | None = None) -> bool:
    """Ring every request once (``ring(collab, alias)`` returns the outcome); drop those that rang, may no
    longer ring, or expired.  True while any request is left."""
    left = False
    for path, doc in pending(root):
        t = time.time() if now is None else now
        if t >= float(doc["until"]):  # type: ignore[arg-type]  # checked by _load
            _unlink(path)
            continue
        outcome = _ring_with_path(ring, str(doc["collab"]), str(doc["alias"]), str(doc["path"]))
        if outcome.startswith(AGAIN):
            left = True
        else:
            _unlink_if_same(path, doc)
    return left


def _ring_with_path(ring: Callable[[str, str], str], collab: str, alias: str, path: str) -> str:
    """The ring, with the requester's ``PATH`` for the programs it runs; an error is an outcome (it stops)."""
    before = os.environ.get("PATH")
    os.environ["PATH"] = path or os.defpath
    try:
        return ring(collab, alias)
    except Exception as exc:  # a vanished collaboration, a store problem: this request is done
        return f"not rung ({type(exc).__name__})"
    finally:
        if before is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = before


def _load(path: str) -> dict[str, object] | None:
    raw = fsio.read_bytes(path) if os.path.isfile(path) and not os.path.islink(path) else None
    try:
        doc = records.loads(raw.decode("utf-8")) if raw else None
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("v") != 1:
        return None
    ok = (isinstance(doc.get("collab"), str) and isinstance(doc.get("alias"), str)
          and isinstance(doc.get("path"), str) and type(doc.get("until")) in (int, float))
    return doc if ok else None


def _unlink_if_same(path: str, doc: dict[str, object]) -> None:
    """Remove a request that rang, unless a newer send replaced it meanwhile (it asks for its own ring)."""
    now_there = _load(path)
    if now_there is not None and now_there.get("until") == doc.get("until"):
        _unlink(path)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
