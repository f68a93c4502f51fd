"""``ids/``: message id -> where its record is, and its receipts (derived, checked against the journals)."""

from __future__ import annotations

import os

from agentmsg import fsio
from agentmsg.backends.file import layout
from agentmsg.backends.file.derived import quietly
from agentmsg.backends.file.inboxmap import record_at
from agentmsg.backends.file.journal import Journal
from agentmsg.domain import rules

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from agentmsg.backends.file.protocols import Txn

# One append-only log per shard, ``ids/<first two hex digits>.log``: a send appends one line to a file
# that already exists, where one file per message cost an inode (the most expensive thing a send did
# besides its fsync).  Each entry is one line, written with a newline before it as well as after, so
# a line torn by a crash is cut off from the next entry instead of merging with it, and ending in
# `` .``, so that a torn line never reads as a shorter entry (``r <id> 1`` of ``r <id> 10469 .``):
#
#   m <id> <inbox> <offset> <seq> <digest> .     where the message's record is (the last one wins)
#   r <id> <offset> .                            a receipt for it in its inbox's receipts journal
#   b <id> <alias> ... .                         a broadcast id and the recipients it went to
#
# Lines that do not parse are skipped; an id whose only lines are damaged reads as damaged, and
# lookup() lets the journals decide.  A log holding anything but entries, a missing ``ids/`` with
# messages stored, and the first layout (one ``ids/<xx>/<id>.json`` per message, a directory per
# shard) are rebuilt whole from the journals.


def refuse_index_links(tx: Txn, messages: Iterable[str]) -> None:
    """Refuse a planted link at these messages' ids/ logs (checked before anything is written)."""
    for shard in dict.fromkeys(m[:2] for m in messages if layout.is_uuid(m)):
        fsio.refuse_link(layout.index_shard(tx.base, shard))


def _entries(tx: Txn, message: str) -> list[list[str]] | None:
    """Every line of the message's shard that names it, split; None when it has no line at all."""
    if not layout.is_uuid(message) or tx.existing("ids") is None:
        return None
    raw = fsio.read_bytes(layout.index(tx.base, message))
    if raw is None:
        if not _shard_lost(tx):
            return None
        rebuild_ids(tx)
        raw = fsio.read_bytes(layout.index(tx.base, message)) or b""
    if not _well_formed(raw):  # not the work of a crash, which tears at most the last line: rebuild all
        rebuild_ids(tx)
        raw = fsio.read_bytes(layout.index(tx.base, message)) or b""
    needle = f" {message}".encode()
    out: list[list[str]] = []
    at = raw.find(needle)
    while at >= 0:
        start = raw.rfind(b"\n", 0, at) + 1
        stop = raw.find(b"\n", at)
        if stop < 0:
            break  # the last line, torn (or still being written): not an entry yet
        line = raw[start:stop]
        try:
            fields = line.decode("ascii").split(" ")
        except UnicodeDecodeError:
            fields = ["?"]
        if len(fields) > 1 and fields[1] == message:
            out.append(fields)
        at = raw.find(needle, stop)
    return out if out else None


def _read_index(tx: Txn, message: str) -> tuple[dict[str, Any], list[int]] | None:
    """(the entry, receipt offsets); ``({}, offsets)`` when its lines are damaged; None when it has none."""
    found = _entries(tx, message)
    return None if found is None else _fold_entries(found)


def _fold_entries(found: list[list[str]]) -> tuple[dict[str, Any], list[int]]:
    """The last whole entry wins; a torn or damaged line after it makes the id's entry damaged (``{}``).

    So does a broadcast entry after a message entry: an id that names a
    stored message never names a broadcast (the service refuses to reuse it
    either way), so the pair is damage, and the journals decide.
    """
    doc: dict[str, Any] = {}
    offsets: list[int] = []
    named_message = False
    for fields in found:
        kind, whole = fields[0], len(fields) > 2 and fields[-1] == "."
        if kind == "m" and whole and len(fields) == 7 and rules.is_alias(fields[2]) and fields[3].isdigit() \
                and fields[4].isdigit() and _is_hex(fields[5]):
            doc = {"inbox": fields[2], "offset": int(fields[3]), "seq": int(fields[4]), "digest": fields[5]}
            named_message = True
        elif kind == "r" and whole and len(fields) == 4 and fields[2].isdigit():
            offsets.append(int(fields[2]))
        elif kind == "r":
            continue  # a torn receipt pointer: the receipt is still in its journal (acked() scans for an ack)
        elif kind == "b" and whole and len(fields) > 3 and all(rules.is_alias(a) for a in fields[2:-1]) \
                and not named_message:
            doc = {"broadcast": fields[2:-1]}
        else:
            doc = {}  # a damaged line after the last good entry: the journals decide
    return doc, list(dict.fromkeys(offsets))


def _well_formed(raw: bytes) -> bool:
    """Every complete line empty or an entry's start, and a torn last line the start of one."""
    cut = raw.rfind(b"\n") + 1
    tail = raw[cut:]
    if tail and tail[:2] not in _STARTS and tail not in (b"m", b"r", b"b"):
        return False
    return {line[:2] for line in raw[:cut].split(b"\n")} <= _STARTS


_STARTS = frozenset((b"", b"m ", b"r ", b"b "))


def _is_hex(value: str) -> bool:
    return 0 < len(value) <= 128 and set(value) <= _HEX


_HEX = frozenset("0123456789abcdef")


def _index_line(message: str, doc: dict[str, Any]) -> str:
    if "broadcast" in doc:
        return " ".join(["b", message, *doc["broadcast"], "."])
    return f"m {message} {doc['inbox']} {doc['offset']} {doc['seq']} {doc['digest']} ."


def _write_index(tx: Txn, message: str, doc: dict[str, Any], offsets: list[int] | None = None) -> None:
    """Append the message's entry (and receipt pointers) to its shard's log: every log exists (`new_ids`)."""
    lines = [_index_line(message, doc), *(f"r {message} {o} ." for o in offsets or ())]
    data = ("\n" + "\n".join(lines) + "\n").encode()
    path = layout.index(tx.base, message)
    if tx.existing("ids") is not None and fsio.append_entries(path, data, create=False):
        return
    if _shard_lost(tx):  # ids/ or a log removed, or the first layout: the older entries come back first
        rebuild_ids(tx)
    else:
        new_ids(tx)
    fsio.append_entries(path, data)


def new_ids(tx: Txn) -> None:
    """A collaboration's ``ids/`` before its first entry: every shard's log, empty.

    All 256 exist from then on (`rebuild_ids` writes them all too), so a
    missing log always means a removed one, whose entries are rebuilt before
    a lookup misses them or a new entry hides them.
    """
    ids = tx.dir("ids")
    for shard in SHARDS:
        fsio.append_entries(f"{ids}/{shard}.log", b"")  # created if missing; a planted link is refused


SHARDS = tuple(f"{i:02x}" for i in range(256))


def _shard_lost(tx: Txn) -> bool:
    """A shard's log is missing: removed (messages are stored), or the first layout is there."""
    return bool(tx.aliases_with_inbox()) and any(fsio.file_size(layout.inbox(tx.base, a))
                                                  for a in tx.aliases_with_inbox())


def index_message(tx: Txn, rec: dict[str, Any], offset: int) -> None:
    _write_index(tx, rec["id"], {"inbox": rec["to"], "offset": offset, "seq": rec["seq"], "digest": rec["digest"]})


def index_receipt(tx: Txn, message: str, offset: int) -> None:
    """Point a message's entry at a receipt for it (only in a shard that exists: a lost one is rebuilt)."""
    if not layout.is_uuid(message) or tx.existing("ids") is None:
        return
    quietly(fsio.append_entries, layout.index(tx.base, message), f"\nr {message} {offset} .\n".encode(),
            create=False)


def receipt_offsets(tx: Txn, message: str) -> list[int]:
    found = _read_index(tx, message)
    if found is None or not found[0]:
        return list(_scan_receipts(tx, message))
    return found[1]


def _scan_receipts(tx: Txn, message: str) -> list[int]:
    lookup_rec = lookup(tx, message)
    if lookup_rec is None:
        return []
    return [pos for pos, rec in Journal(layout.receipts(tx.base, lookup_rec["to"])).scan()
            if rec.get("message") == message]


def first_layout(tx: Txn) -> bool:
    """``ids/`` as the first layout left it: a directory per shard, holding a file per message."""
    ids = tx.existing("ids")
    return ids is not None and any(len(n) == 2 and os.path.isdir(f"{ids}/{n}") for n in os.listdir(ids))


def lookup(tx: Txn, message: str) -> dict[str, Any] | None:
    """The stored record of a message id, checked against the inbox its entry points to.

    An entry whose record is missing is a reservation left by a crash or a
    failed write: absent.  A damaged entry, a missing ``ids/`` with messages
    stored, or the first layout is rebuilt from the inboxes.
    """
    if not layout.is_uuid(message):
        return None
    if tx.existing("ids") is None and tx.aliases_with_inbox():
        rebuild_ids(tx)
    found = _read_index(tx, message)
    if found is None:
        return None
    doc = found[0]
    if rules.is_alias(doc.get("inbox")) and type(doc.get("offset")) is int:
        rec = record_at(Journal(layout.inbox(tx.base, doc["inbox"])), doc["offset"])
        if rec is not None and rec.get("id") == message:
            return rec
        if "broadcast" not in doc and (overtaken(message, doc, rec) or _reservation(tx, doc)):
            return None  # a reservation that never became a record
    # A damaged entry, or a broadcast's: the journals decide.  A broadcast's own id names no message, but an
    # entry alone must not hide one (a line written over a message's), so that rare lookup scans too.
    rec = _scan_for(tx, message)
    if rec is not None:
        quietly(_reindex_one, tx, rec)
    return rec


def overtaken(message: str, doc: dict[str, Any], rec: dict[str, Any] | None) -> bool:
    """``message``'s entry is a reservation whose record was never stored (a crash, a failed write), and the
    next record took its place: same seq, another id.  A record removed from the journal leaves its chain
    broken instead (``verify`` says so), not another record of the same seq at its offset."""
    return rec is not None and rec.get("seq") == doc.get("seq") and rec.get("id") != message


def _reservation(tx: Txn, doc: dict[str, Any]) -> bool:
    """An entry written just before an append that a crash cut off: it names the next offset and seq, exactly."""
    journal = Journal(layout.inbox(tx.base, doc["inbox"]))
    last = journal.last()
    return doc["offset"] == fsio.next_offset(journal.path) and doc.get("seq") == (last["seq"] + 1 if last else 1)


def _scan_for(tx: Txn, message: str) -> dict[str, Any] | None:
    for alias in tx.aliases_with_inbox():
        for _pos, rec in Journal(layout.inbox(tx.base, alias)).scan():
            if rec.get("id") == message:
                return rec
    return None


def _reindex_one(tx: Txn, rec: dict[str, Any]) -> None:
    journal = Journal(layout.inbox(tx.base, rec["to"]))
    for pos, r in journal.scan():
        if r.get("id") == rec["id"]:
            offsets = [p for p, x in Journal(layout.receipts(tx.base, rec["to"])).scan()
                       if x.get("message") == rec["id"]]
            _write_index(tx, rec["id"], {"inbox": r["to"], "offset": pos, "seq": r["seq"],
                                         "digest": r["digest"]}, offsets)
            return


def seq_of(tx: Txn, message: object) -> int | None:
    if not isinstance(message, str):
        return None
    rec = lookup(tx, message)
    return int(rec["seq"]) if rec is not None else None


def broadcast(tx: Txn, base_id: str) -> tuple[bool | None, list[str]]:
    found = _read_index(tx, base_id)
    if found is None or not found[0]:
        return (False, []) if lookup(tx, base_id) is not None else (None, [])
    doc = found[0]
    if isinstance(doc.get("broadcast"), list):
        return True, [a for a in doc["broadcast"] if rules.is_alias(a)]
    return (False, []) if lookup(tx, base_id) is not None else (None, [])


def write_broadcast(tx: Txn, base_id: str, recipients: list[str]) -> None:
    _write_index(tx, base_id, {"broadcast": recipients})


def rebuild_ids(tx: Txn, only: Iterable[str] | None = None) -> None:
    """Every id entry from the inboxes and receipts: all 256 shard logs written whole (empty ones too).

    ``only``: just these shards' logs (``verify`` writing back the missing ones leaves the rest as found).
    """
    shards: dict[str, list[str]] = {}
    by_id: dict[str, tuple[dict[str, Any], list[int]]] = {}
    broadcasts: dict[str, list[str]] = {}
    for alias in tx.aliases_with_inbox():
        for pos, rec in Journal(layout.inbox(tx.base, alias)).scan():
            by_id[rec["id"]] = ({"inbox": alias, "offset": pos, "seq": rec["seq"], "digest": rec["digest"]}, [])
            if rec.get("broadcast"):
                broadcasts.setdefault(rec["broadcast"], []).append(alias)
        for pos, rec in Journal(layout.receipts(tx.base, alias)).scan():
            if rec.get("message") in by_id:
                by_id[rec["message"]][1].append(pos)
    for bid, aliases in broadcasts.items():  # before its copies' entries, as a send writes them
        shards.setdefault(bid[:2], []).append(_index_line(bid, {"broadcast": sorted(aliases)}))
    for mid, (doc, offsets) in by_id.items():
        shards.setdefault(mid[:2], []).extend([_index_line(mid, doc), *(f"r {mid} {o} ." for o in offsets)])
    ids = tx.dir("ids")
    # a planted link is replaced, never written through
    for shard in SHARDS if only is None else sorted(set(only)):
        lines = shards.get(shard)
        fsio.atomic_write(f"{ids}/{shard}.log", ("\n".join(lines) + "\n").encode() if lines else b"",
                          durable=False)
    for name in os.listdir(ids):
        path = f"{ids}/{name}"
        if len(name) == 2 and not os.path.islink(path) and os.path.isdir(path):
            import shutil  # the first layout's shard directories: derived, replaced by the logs above

            shutil.rmtree(path, ignore_errors=True)


def index_entries(tx: Txn) -> dict[str, dict[str, Any]]:
    """Every id the ids/ logs name, with its entry (``{}`` when damaged), for ``verify``: each log read once."""
    out: dict[str, dict[str, Any]] = {}
    ids = tx.existing("ids")
    if ids is None:
        return out
    if first_layout(tx):  # a root from before the logs: brought up to date, not reported
        rebuild_ids(tx)
    for name in sorted(os.listdir(ids)):
        if not name.endswith(".log") or name.startswith("."):
            continue
        raw = fsio.read_bytes(os.path.join(ids, name)) or b""
        by_id: dict[str, list[list[str]]] = {}
        complete = raw[: raw.rfind(b"\n") + 1]  # a torn last line is not an entry yet
        for line in complete.split(b"\n"):
            fields = line.decode("ascii", "replace").split(" ")
            if len(fields) > 1 and layout.is_uuid(fields[1]) and fields[1][:2] == name[:-4]:
                by_id.setdefault(fields[1], []).append(fields)
        for mid, found in by_id.items():
            out[mid] = _fold_entries(found)[0]
    return out
