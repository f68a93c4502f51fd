"""Collision notices' local state, ``ROOT/edits/`` (docs/CLAIMS.md, "Collision notices").

* ``edits/<sha256(real path)[:32]>.log``: this machine's recent edits of one file, one JSON line each (an edit
  ``{"t", "pin", "alias", "collab"}``, or a notice given ``{"t", "pair"}``: domain/collisions.py).  Appended
  without fsync; read from its last :data:`TAIL` bytes; past :data:`LOG_MAX` it is rewritten with the lines
  of the window.  Local and disposable: losing it costs at most one notice.
* ``edits/<pin key>.notice``: notices waiting for a session's next prompt or tool call, one JSON line each;
  taken (renamed away, then read) by the hook that shows them.

Lean: the post-tool edit hook and the prompt hook import it.
"""

from __future__ import annotations

import os

from agentmsg import fsio, records
from agentmsg.backends.file import layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TAIL = 16 << 10
LOG_MAX = 64 << 10
#: Notices kept waiting for one session (the oldest beyond it are dropped when taken).
PENDING_MAX = 20


def log_path(root: str, real: str) -> str:
    return os.path.join(root, layout.EDITS, records.sha256_hex(real.encode("utf-8", "surrogateescape"))[:32]
                        + layout.EDIT_LOG)


def notice_path(root: str, pin: str) -> str:
    return os.path.join(root, layout.EDITS, layout.pin_key(pin) + layout.NOTICE)


def recent(root: str, real: str) -> list[dict[str, Any]]:
    """The file's entries from the log's tail (a damaged line is skipped)."""
    path = log_path(root, real)
    size = fsio.file_size(path)
    raw = fsio.read_bytes(path, max(0, size - TAIL)) if size else None
    if not raw:
        return []
    lines = raw.split(b"\n")
    return _objects(lines[1:] if size > TAIL else lines)  # past TAIL, the first line may be cut


def _objects(lines: list[bytes]) -> list[dict[str, Any]]:
    """The JSON objects among ``lines``; anything else (a torn or foreign line) is passed over."""
    out = []
    for line in lines:
        try:
            doc = records.loads(line) if line.strip() else None
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


def add(root: str, real: str, entries: list[dict[str, Any]], *, keep_after: float) -> None:
    """Append entries to the file's log; a log past LOG_MAX is first cut to the entries after ``keep_after``."""
    fsio.ensure_dir(root, layout.EDITS)
    path = log_path(root, real)
    data = b"".join(records.dumps_plain(e).encode() + b"\n" for e in entries)
    if fsio.file_size(path) + len(data) > LOG_MAX:
        kept = [e for e in recent(root, real) if type(e.get("t")) in (int, float) and e["t"] >= keep_after]
        fsio.atomic_write(path, b"".join(records.dumps_plain(e).encode() + b"\n" for e in kept) + data,
                          durable=False)
        return
    fsio.append_entries(path, data)


def leave_notice(root: str, pin: str, doc: dict[str, Any]) -> None:
    fsio.ensure_dir(root, layout.EDITS)
    fsio.append_entries(notice_path(root, pin), records.dumps_plain(doc).encode() + b"\n")


def pending(root: str, pin: str) -> bool:
    return os.path.lexists(notice_path(root, pin))


def take(root: str, pin: str) -> list[dict[str, Any]]:
    """The session's waiting notices, removed (renamed away first: a notice left meanwhile waits for the next)."""
    path = notice_path(root, pin)
    if not os.path.lexists(path):
        return []
    taking = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        os.rename(path, taking)
    except FileNotFoundError:
        return []
    try:
        raw = fsio.read_bytes(taking) or b""
    finally:
        try:
            os.unlink(taking)
        except FileNotFoundError:
            pass
    return _objects(raw.split(b"\n"))[-PENDING_MAX:]
