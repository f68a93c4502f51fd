"""Derived files: kept current as records are appended, checked when read, rebuilt from the journals.

Nothing here is fsynced: a derived file lost in a crash is rebuilt, and a
stale or damaged one is detected (``registry.yaml`` names the record it was
built from, an ids/ entry is checked against the record it points to, the
inbox map against the journals) and replaced.  A failure to update a view
never turns a stored record into a reported failure.
"""

from __future__ import annotations

import os
import time

from agentmsg import fsio, records
from agentmsg.backends.file import layout
from agentmsg.backends.file.inboxmap import InboxMap, record_at
from agentmsg.backends.file.journal import Journal
from agentmsg.domain import kinds, rules

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

    from agentmsg.backends.file.store import FileStore, FileTxn
    from agentmsg.domain.values import Message, Registry

REGISTRY_HEADER = (
    "# agentmsg registry: the alias -> participant map, rendered from collab.jsonl.\n"
    "# Nothing reads it to route mail (collab.jsonl decides); edits are reported by verify.\n"
    "# Written in YAML's JSON-compatible style so stdlib-only hooks can read it.\n"
)


def quietly(update: Callable[..., object], *args: Any, **kwargs: Any) -> None:
    """Update a derived view after the records are durable; a failure here is repaired later."""
    try:
        update(*args, **kwargs)
    except OSError:
        pass
    except Exception as exc:
        if type(exc).__name__ != "UnsafePath":
            raise


def collab_dir(root: str, collab: str, *, subdirs: bool = True) -> str | None:
    """The collaboration's directory, or None; a symlinked directory or subdirectory raises UnsafePath.

    ``subdirs=False`` leaves the subdirectories to the caller (a transaction
    checks them once it holds the lock: `FileTxn.__enter__`).
    """
    found = locate(root, collab)
    if found is None:
        return None
    if subdirs:
        for sub in layout.COLLAB_SUBDIRS:
            fsio.existing_dir(found[0], sub)
    return found[0]


def locate(root: str, collab: str, *, opened: bool = True) -> tuple[str, os.stat_result] | None:
    """The collaboration's directory and its ``lstat`` (a transaction keys what it checked on it), or None.

    ``opened=False`` leaves the opening record (``collab.jsonl``) to the
    caller: a transaction looks for it once it holds the lock.
    """
    if not layout.is_uuid(collab):
        return None
    parent = fsio.existing_dir(root, layout.COLLABS)
    if parent is None:
        return None
    base = layout.collab(root, collab)
    st = fsio.dir_stat(base)
    if st is None or (opened and not os.path.exists(f"{base}/{layout.EVENTS}")):
        return None
    return base, st


# ---- registry.yaml ------------------------------------------------------------------------


def registry_document(base: str, last: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """``registry.yaml`` if it was built from the newest event (``last``, else read); None when missing,
    damaged or stale.  `registry` asks only that (to render it again); ``verify`` compares its contents."""
    raw = fsio.read_bytes(f"{base}/{layout.REGISTRY}")
    if raw is None:
        return None
    try:
        doc = records.loads(b"\n".join(line for line in raw.splitlines() if not line.startswith(b"#")))
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("participants"), dict):
        return None
    if last is None:
        last = Journal(f"{base}/{layout.EVENTS}").last()
    if not last or doc.get("built_from") != {"seq": last["seq"], "sum": last["sum"]}:
        return None
    return doc


def registry(tx: FileTxn) -> Registry:
    """The registry, always replayed from ``collab.jsonl``: ``registry.yaml`` is rendered, never trusted.

    Recipients and bindings resolve through the registry, so a derived file
    must not decide them: an edited ``registry.yaml`` is ignored here (and
    reported by ``verify``), a missing or stale one is written again.  The
    replay reads membership events only, a few per participant, never the
    mail.  The store remembers the last one per collaboration, keyed by
    ``collab.jsonl``'s identity, size and modification time: a long-lived
    process (the MCP server) then reads nothing while membership stays the
    same.  Any event changes the key.
    """
    key = tx.events_key()
    cached = tx.store.registries.get(tx.collab)
    if key is not None and cached is not None and cached[0] == key:
        return cached[1]
    events = tx.events()
    reg = rules.replay(events)
    if reg is None:
        from agentmsg.errors import NotFound  # only here: agentmsg.errors costs every hook ~0.3 ms

        raise NotFound(f"collaboration {tx.collab} has no opening record")
    if registry_document(tx.base, events[-1]) is None:  # missing, damaged or stale: rendered again
        quietly(write_registry, tx, reg)
    if key is not None:
        tx.store.registries[tx.collab] = (key, reg)
    return reg


def write_registry(tx: FileTxn, reg: Registry) -> None:
    last = Journal(f"{tx.base}/{layout.EVENTS}").last()
    built_from = {"seq": last["seq"], "sum": last["sum"]} if last else None
    doc = yaml_json(rules.registry_document(reg) | {"built_from": built_from})
    fsio.atomic_write(f"{tx.base}/{layout.REGISTRY}", REGISTRY_HEADER.encode() + doc.encode() + b"\n",
                      durable=False)


def yaml_json(doc: dict[str, Any]) -> str:
    """JSON that YAML parsers read back identically (C1 controls, NEL, LS/PS and BOM escaped)."""
    import json

    text = json.dumps(doc, indent=2, ensure_ascii=False)
    return "".join(f"\\u{ord(c):04x}" if _yaml_unsafe(c) else c for c in text)


def _yaml_unsafe(c: str) -> bool:
    o = ord(c)
    return 0x7F <= o <= 0x9F or o in (0x2028, 0x2029, 0xFEFF, 0xFFFE, 0xFFFF) or 0xD800 <= o <= 0xDFFF


# ---- the pin index --------------------------------------------------------------------------


def _pins_dir(root: str) -> str:
    return fsio.ensure_dir(root, layout.PINS)


def refuse_pin_links(root: str, pins: Iterable[str] = ()) -> None:
    """Refuse a planted link or non-regular file at the pin lock or these pins' index files, before a write."""
    base = fsio.ensure_dir(root, layout.PINS)
    fsio.refuse_link(os.path.join(base, ".lock"))
    for pin in pins:
        fsio.refuse_link(os.path.join(base, f"{layout.pin_key(pin)}.json"))


def pin_entries(root: str, pin: str) -> list[tuple[str, str]]:
    base = fsio.existing_dir(root, layout.PINS)
    raw = fsio.read_bytes(os.path.join(base, f"{layout.pin_key(pin)}.json")) if base is not None else None
    try:
        doc = records.loads(raw) if raw else {}
        entries = doc.get("bindings", []) if isinstance(doc, dict) else None
    except ValueError:
        entries = None
    if entries is None or not isinstance(entries, list):
        raise DamagedIndex(f"pin index of {pin[:60]} is damaged")
    return [(e["collab"], e["alias"]) for e in entries
            if isinstance(e, dict) and layout.is_uuid(e.get("collab")) and rules.is_alias(e.get("alias"))]


def _set_pin(root: str, pin: str, collab: str, alias: str | None) -> None:
    base = _pins_dir(root)
    path = os.path.join(base, f"{layout.pin_key(pin)}.json")
    with fsio.locked(os.path.join(base, ".lock"), 30.0):
        try:
            have = pin_entries(root, pin)
        except DamagedIndex:
            have = []
        entries = [{"collab": c, "alias": a} for c, a in have if c != collab]
        if alias is not None:
            entries.append({"collab": collab, "alias": alias})
        fsio.atomic_write(path, records.dumps_plain({"pin": pin, "bindings": entries}).encode(), durable=False)


class DamagedIndex(ValueError):
    """A derived index that does not parse: rebuilt from the registries."""


def update_pins(root: str, collab: str, before: Registry | None, after: Registry) -> None:
    """Bring the pin index in line with the registry for every pin the event could have changed."""
    pins = {p.pin for p in after.participants.values()}
    if before is not None:
        pins |= {p.pin for p in before.participants.values()}
    for pin in sorted(pins):
        alias = None if after.closed else after.alias_of(pin)
        was = None if before is None or before.closed else before.alias_of(pin)
        if alias != was or before is None:
            _set_pin(root, pin, collab, alias)


def ensure_pins(store: FileStore, *, force: bool = False) -> None:
    """A missing or damaged pin index is rebuilt from every registry (derived, like everything outside journals)."""
    if not force and (fsio.existing_dir(store.root, layout.PINS) is not None or not store.collabs()):
        return
    if force:
        base = fsio.ensure_dir(store.root, layout.PINS)
        for name in os.listdir(base):
            if name.endswith(".json"):
                os.unlink(os.path.join(base, name))
    for collab in store.collabs():
        try:
            reg = store.registry(collab)
        except Exception as exc:
            if type(exc).__name__ in ("NotFound", "UnsafePath"):
                continue
            raise
        for p in reg.active().values():
            if not reg.closed:
                _set_pin(store.root, p.pin, collab, p.alias)
    fsio.ensure_dir(store.root, layout.PINS)


# ---- ids/: message id -> where it is, and its receipts ------------------------------------------
#
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


def refuse_index_links(tx: FileTxn, messages: Iterable[str]) -> None:
    """Refuse a planted link at these messages' ids/ logs (checked before anything is written)."""
    for shard in dict.fromkeys(m[:2] for m in messages if layout.is_uuid(m)):
        fsio.refuse_link(layout.index_shard(tx.base, shard))


def _entries(tx: FileTxn, message: str) -> list[list[str]] | None:
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


def _read_index(tx: FileTxn, message: str) -> tuple[dict[str, Any], list[int]] | None:
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


def _write_index(tx: FileTxn, message: str, doc: dict[str, Any], offsets: list[int] | None = None) -> None:
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


def new_ids(tx: FileTxn) -> None:
    """A collaboration's ``ids/`` before its first entry: every shard's log, empty.

    All 256 exist from then on (`rebuild_ids` writes them all too), so a
    missing log always means a removed one, whose entries are rebuilt before
    a lookup misses them or a new entry hides them.
    """
    ids = tx.dir("ids")
    for shard in _SHARDS:
        fsio.append_entries(f"{ids}/{shard}.log", b"")  # created if missing; a planted link is refused


_SHARDS = tuple(f"{i:02x}" for i in range(256))


def _shard_lost(tx: FileTxn) -> bool:
    """A shard's log is missing: removed (messages are stored), or the first layout is there."""
    return bool(tx.aliases_with_inbox()) and any(fsio.file_size(layout.inbox(tx.base, a))
                                                  for a in tx.aliases_with_inbox())


def index_message(tx: FileTxn, rec: dict[str, Any], offset: int) -> None:
    _write_index(tx, rec["id"], {"inbox": rec["to"], "offset": offset, "seq": rec["seq"], "digest": rec["digest"]})


def index_receipt(tx: FileTxn, message: str, offset: int) -> None:
    """Point a message's entry at a receipt for it (only in a shard that exists: a lost one is rebuilt)."""
    if not layout.is_uuid(message) or tx.existing("ids") is None:
        return
    quietly(fsio.append_entries, layout.index(tx.base, message), f"\nr {message} {offset} .\n".encode(),
            create=False)


def receipt_offsets(tx: FileTxn, message: str) -> list[int]:
    found = _read_index(tx, message)
    if found is None or not found[0]:
        return list(_scan_receipts(tx, message))
    return found[1]


def _scan_receipts(tx: FileTxn, message: str) -> list[int]:
    lookup_rec = lookup(tx, message)
    if lookup_rec is None:
        return []
    return [pos for pos, rec in Journal(layout.receipts(tx.base, lookup_rec["to"])).scan()
            if rec.get("message") == message]


def _first_layout(tx: FileTxn) -> bool:
    """``ids/`` as the first layout left it: a directory per shard, holding a file per message."""
    ids = tx.existing("ids")
    return ids is not None and any(len(n) == 2 and os.path.isdir(f"{ids}/{n}") for n in os.listdir(ids))


def lookup(tx: FileTxn, message: str) -> dict[str, Any] | None:
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


def _reservation(tx: FileTxn, doc: dict[str, Any]) -> bool:
    """An entry written just before an append that a crash cut off: it names the next offset and seq, exactly."""
    journal = Journal(layout.inbox(tx.base, doc["inbox"]))
    last = journal.last()
    return doc["offset"] == fsio.next_offset(journal.path) and doc.get("seq") == (last["seq"] + 1 if last else 1)


def _scan_for(tx: FileTxn, message: str) -> dict[str, Any] | None:
    for alias in tx.aliases_with_inbox():
        for _pos, rec in Journal(layout.inbox(tx.base, alias)).scan():
            if rec.get("id") == message:
                return rec
    return None


def _reindex_one(tx: FileTxn, rec: dict[str, Any]) -> None:
    journal = Journal(layout.inbox(tx.base, rec["to"]))
    for pos, r in journal.scan():
        if r.get("id") == rec["id"]:
            offsets = [p for p, x in Journal(layout.receipts(tx.base, rec["to"])).scan()
                       if x.get("message") == rec["id"]]
            _write_index(tx, rec["id"], {"inbox": r["to"], "offset": pos, "seq": r["seq"],
                                         "digest": r["digest"]}, offsets)
            return


def seq_of(tx: FileTxn, message: object) -> int | None:
    if not isinstance(message, str):
        return None
    rec = lookup(tx, message)
    return int(rec["seq"]) if rec is not None else None


def broadcast(tx: FileTxn, base_id: str) -> tuple[bool | None, list[str]]:
    found = _read_index(tx, base_id)
    if found is None or not found[0]:
        return (False, []) if lookup(tx, base_id) is not None else (None, [])
    doc = found[0]
    if isinstance(doc.get("broadcast"), list):
        return True, [a for a in doc["broadcast"] if rules.is_alias(a)]
    return (False, []) if lookup(tx, base_id) is not None else (None, [])


def write_broadcast(tx: FileTxn, base_id: str, recipients: list[str]) -> None:
    _write_index(tx, base_id, {"broadcast": recipients})


def rebuild_ids(tx: FileTxn, only: Iterable[str] | None = None) -> None:
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
    for shard in _SHARDS if only is None else sorted(set(only)):
        lines = shards.get(shard)
        fsio.atomic_write(f"{ids}/{shard}.log", ("\n".join(lines) + "\n").encode() if lines else b"",
                          durable=False)
    for name in os.listdir(ids):
        path = f"{ids}/{name}"
        if len(name) == 2 and not os.path.islink(path) and os.path.isdir(path):
            import shutil  # the first layout's shard directories: derived, replaced by the logs above

            shutil.rmtree(path, ignore_errors=True)


# ---- transcripts -------------------------------------------------------------------------------


def transcribe_event(tx: FileTxn, rec: dict[str, Any]) -> None:
    from agentmsg.text import transcript as render

    quietly(_append_or_render, tx, f"{tx.base}/{layout.TRANSCRIPT}", render.event_section(rec).encode())


def transcribe_note(tx: FileTxn, rec: dict[str, Any]) -> None:
    from agentmsg.text import transcript as render

    quietly(_append_or_render, tx, f"{tx.base}/{layout.TRANSCRIPT}", render.log_section(rec).encode())


def open_transcripts(tx: FileTxn, alias: str, others: Iterable[str] = ()) -> tuple[fsio.Appender, fsio.Appender]:
    """``collaboration.md`` and ``alias``'s transcript, opened to append a message that is not stored yet.

    A planted link, FIFO or hard link at either raises here, before anything
    is stored; so does one at ``others``' transcripts (a broadcast's other
    recipients).  The open that checks is the one that writes: no ``lstat``
    beforehand.  The caller closes both.
    """
    path = f"{tx.base}/{layout.TRANSCRIPT}"
    collab_md = fsio.Appender(path, fd=tx.store.handles.take(path, tx.key))  # kept open between sends
    try:
        transcripts = tx.existing("transcripts")
        inbox_md = fsio.Appender(layout.transcript(tx.base, alias))  # no folder: missing, like the file
        try:
            for to in dict.fromkeys(others) if transcripts is not None else ():
                if to != alias:
                    fsio.refuse_link(layout.transcript(tx.base, to))
        except BaseException:
            inbox_md.close()
            raise
    except BaseException:
        collab_md.close()
        raise
    return collab_md, inbox_md


def close_transcripts(tx: FileTxn, opened: tuple[fsio.Appender, fsio.Appender]) -> None:
    """After `open_transcripts`: ``collaboration.md``'s descriptor is kept for the next send (handles.py)."""
    tx.store.handles.give(opened[0].path, tx.key, opened[0].detach())
    opened[1].close()


def _append_view(view: str | fsio.Appender, section: bytes) -> int | None:
    """Append to a view that exists (None when it is missing or empty), by path or already opened."""
    if isinstance(view, fsio.Appender):
        return view.append(section)
    return fsio.append(view, section, durable=False, create=False)


def message_section(msg: Message) -> bytes:
    """The message's transcript section: pure, so a send renders it while its record is being written back,
    before the fsync (`fsio.append`'s ``meanwhile``), and only writes it after."""
    from agentmsg.text import transcript as render

    return render.message_section(msg).encode()


def transcribe_message(tx: FileTxn, msg: Message, opened: tuple[fsio.Appender, fsio.Appender] | None = None,
                       section: bytes | None = None) -> None:
    """Append the message to its inbox's transcript and to ``collaboration.md`` (``opened``: `open_transcripts`;
    ``section``: `message_section`, rendered already)."""
    if section is None:
        section = message_section(msg)
    appended = True
    try:  # one open: it refuses a link, a FIFO or a hard link, and says whether the view is there
        view = opened[1] if opened else f"{tx.dir('transcripts')}/{msg.to}.md"
        appended = _append_view(view, section) is not None
    except OSError:
        pass
    except Exception as exc:
        if type(exc).__name__ != "UnsafePath":
            raise
    if not appended:
        if msg.seq > 1:  # a view lost with history behind it: render every view whole, once
            quietly(render_all, tx)
            return
        from agentmsg.text import transcript as render

        head = render.inbox_header(msg.collab, msg.to).encode()  # the inbox's first message
        quietly(fsio.append, f"{tx.dir('transcripts')}/{msg.to}.md", head + section, durable=False)
    quietly(_append_or_render, tx, opened[0] if opened else f"{tx.base}/{layout.TRANSCRIPT}", section)


def _append_or_render(tx: FileTxn, view: str | fsio.Appender, section: bytes) -> None:
    """Append to a view that exists; a missing one with history behind it is re-rendered whole."""
    if _append_view(view, section) is not None:
        return
    if tx.next_cseq() <= 2:
        fsio.append(view.path if isinstance(view, fsio.Appender) else view, section, durable=False)
    else:
        render_all(tx)


def restore_missing(tx: FileTxn) -> None:
    """Write the derived files that are missing, as the first command to need each would (for ``verify``).

    Only missing ones: a deleted derived file is not a finding, while one
    that is there and disagrees with the journals stays for ``verify`` to
    report (``repair`` rewrites it).
    """
    if rules.replay(tx.events()) is None:
        return  # no opening record left (verify reports the journal): nothing to render from
    tx.registry()  # a missing or stale registry.yaml is rendered again
    ids = tx.existing("ids")
    if tx.aliases_with_inbox():
        if ids is None or _first_layout(tx):
            rebuild_ids(tx)
        else:
            lost = [s for s in _SHARDS if not os.path.lexists(f"{ids}/{s}.log")]
            if lost:
                rebuild_ids(tx, only=lost)
    paths = [f"{tx.base}/{layout.TRANSCRIPT}", *(layout.transcript(tx.base, a) for a in _view_aliases(tx))]
    if all(os.path.lexists(path) for path in paths):
        return  # the usual case: nothing to render
    for i, (path, text) in enumerate(rendered_views(tx)):
        if not os.path.lexists(path):
            if i:  # an inbox's: its folder may be gone too
                tx.dir("transcripts")
            fsio.atomic_write(path, text, durable=False)


def rendered_views(tx: FileTxn) -> list[tuple[str, bytes]]:
    """Every Markdown transcript of a collaboration as its records render it: ``(path, text)``, collab first.

    What a run of appends wrote, byte for byte (``verify`` compares the two).
    """
    from agentmsg.domain.values import Message
    from agentmsg.text import transcript as render

    reg = tx.registry()
    by_alias = {a: [Message.from_record(r) for _p, r in Journal(layout.inbox(tx.base, a)).scan()]
                for a in _view_aliases(tx)}
    views = [(f"{tx.base}/{layout.TRANSCRIPT}", render.collaboration_md(reg, tx.events(), by_alias, tx.notes()))]
    views += [(layout.transcript(tx.base, a), render.inbox_md(reg, a, msgs)) for a, msgs in by_alias.items()]
    return [(path, text.encode()) for path, text in views]


def _view_aliases(tx: FileTxn) -> list[str]:
    """Every alias with a transcript: each participant, and each inbox (a departed one's too)."""
    return sorted(set(tx.registry().participants) | set(tx.aliases_with_inbox()))


def render_all(tx: FileTxn) -> list[str]:
    """Regenerate every Markdown transcript of a collaboration from its records."""
    views = rendered_views(tx)
    fsio.refuse_link(views[0][0])
    if len(views) > 1:
        tx.dir("transcripts")
    for path, text in views:
        fsio.atomic_write(path, text, durable=False)
    return [path for path, _text in views]


def write_html(tx: FileTxn, page: bytes) -> str:
    """``collaboration.html``: the overseer's page, derived like the Markdown (``log render --html``)."""
    path = f"{tx.base}/{layout.HTML}"
    fsio.atomic_write(path, page, durable=False)  # a planted link is replaced, never written through
    return path


# ---- rebuilding and cleaning -----------------------------------------------------------------------


def hook_state(raw: bytes) -> dict[str, Any] | None:
    """A binding's hook state (``state/<alias>.hook.json``, v2) as the hooks can use it; None when damaged."""
    try:
        doc = records.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    ok = (isinstance(doc, dict) and doc.get("v") == 2 and type(doc.get("prompt")) is int
          and isinstance(doc.get("shown"), dict) and isinstance(doc.get("blocked"), list)
          and type(doc.get("rpos")) is int and all(type(v) is int for v in doc["shown"].values()))
    return doc if ok else None


def damaged_hook_states(tx: FileTxn) -> list[str]:
    """The hook states of this collaboration that the hooks would reset (and fail a run over)."""
    state = tx.existing("state")
    if state is None:
        return []
    out = []
    for name in sorted(os.listdir(state)):
        if name.endswith(".hook.json") and not name.startswith("."):
            raw = fsio.read_bytes(os.path.join(state, name))
            if raw is not None and hook_state(raw) is None:
                out.append(os.path.join(state, name))
    return out


def rebuild(tx: FileTxn) -> list[str]:
    """Rewrite every derived file of one collaboration from its journals."""
    reg = rules.replay(tx.events())
    if reg is None:
        from agentmsg.errors import NotFound

        raise NotFound(f"collaboration {tx.collab} has no opening record")
    write_registry(tx, reg)
    tx._registry = reg
    update_pins(tx.root, tx.collab, None, reg)
    wake(tx.root, {p.pin for p in reg.participants.values()})
    rebuild_ids(tx)
    done = ["registry.yaml", "pins/", "ids/"]
    for alias in sorted(set(reg.participants) | set(tx.aliases_with_inbox())):
        for path in (layout.inbox_map(tx.base, alias), layout.inbox_offsets(tx.base, alias)):
            if os.path.lexists(path):
                os.unlink(path)
        tx._maps.pop(alias, None)
        tx.map(alias).save()
        done.append(f"state/{alias}.map")
    for path in damaged_hook_states(tx):  # not derivable, only reset: its messages look never shown
        os.unlink(path)
        done.append(f"state/{os.path.basename(path)} (damaged: reset)")
    render_all(tx)
    done.append("transcripts")
    from agentmsg.backends.file.searchindex import SearchIndex

    quietly(SearchIndex(tx.store).reindex, tx.collab)
    done.append(layout.SEARCH)
    return done


#: A temp file younger than this whose writer is running may be a write in flight (``fsio.atomic_write``).
IN_FLIGHT_S = 60.0


def clean_temp(root: str, older_than: float) -> int:
    """Remove ``.*.tmp`` files a killed writer left behind (older than ``older_than`` seconds).

    Never one a running writer may still rename into place: the name holds
    the writer's pid (``.NAME.PID.RANDOM.tmp``), and a young temp file of a
    live process is left alone (other locks than the collaboration's guard
    the pin index and the root's own files).
    """
    removed = 0
    now = time.time()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            if name.startswith(".") and name.endswith(".tmp"):
                path = os.path.join(dirpath, name)
                try:
                    age = now - os.lstat(path).st_mtime
                    if age > older_than and not (age < IN_FLIGHT_S and _running(name)):
                        os.unlink(path)
                        removed += 1
                except OSError:
                    pass
    return removed


def _running(temp_name: str) -> bool:
    """Whether the pid a temp file's name holds is a live process (a name without one: no)."""
    parts = temp_name.split(".")
    pid = parts[-3] if len(parts) >= 5 else ""
    if not pid.isdigit() or int(pid) <= 0:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    except (OverflowError, OSError):
        return False
    return True


def index_entries(tx: FileTxn) -> dict[str, dict[str, Any]]:
    """Every id the ids/ logs name, with its entry (``{}`` when damaged), for ``verify``: each log read once."""
    out: dict[str, dict[str, Any]] = {}
    ids = tx.existing("ids")
    if ids is None:
        return out
    if _first_layout(tx):  # a root from before the logs: brought up to date, not reported
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


def fresh_map(tx: FileTxn, alias: str) -> InboxMap:
    """A map folded from zero, in memory (for ``verify``)."""
    m = InboxMap(tx.base, alias)
    return m.fold(lambda mid: seq_of(tx, mid))



# ---- idle/: the hook fast path's markers (docs/DELIVERY.md, "Fast path") ---------------------------
#
# Per pin two files, ``<session>.gen`` (a random generation token) and
# ``<session>.idle`` (a copy of the token).  ``hooks/run`` exits without an
# interpreter only when both are plain files holding the same non-empty line.
# A hook that finds nothing for a pin copies the generation it read *before*
# it read any state into ``.idle``; every writer that could give the pin
# something to show deletes ``.gen`` *after* its record is stored.  So either
# the writer's record was visible to the hook (which then writes no marker),
# or the ``.gen`` the marker names is gone and no later token equals it.  No
# lock is needed; a lost, stale or damaged file only costs one full hook run.


def wake(root: str, pins: Iterable[str]) -> None:
    """Tell the launcher these pins may have something to show (derived, best effort, no fsync), and the
    renderer of deliveries ahead that their next prompt changed (``aheadstart.nudge``)."""
    woken = []
    for pin in pins:
        files = layout.idle_files(root, pin) if isinstance(pin, str) else None
        if files is None:
            continue
        try:
            if fsio.existing_dir(root, layout.IDLE, pin.partition(":")[0]) is None:  # idle_files' runtime
                continue  # no marker was ever written for this runtime
            woken.append(pin)
            os.unlink(files[0])
        except FileNotFoundError:
            pass
        except OSError:  # cannot remove it: nothing may ever match it again
            quietly(_invalidate, files)
        except Exception as exc:  # a planted link at idle/: the hooks refuse it too, and run in full
            if type(exc).__name__ != "UnsafePath":
                raise
    if woken:
        from agentmsg.runtime import doorbell as aheadstart

        quietly(aheadstart.nudge, root, woken)


def _invalidate(files: tuple[str, str]) -> None:
    base = files[0][: -len(".gen")]
    for path in (files[1], base + ".mid", base + ".stop", base + ".ready"):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def wake_aliases(tx: FileTxn, aliases: Iterable[str]) -> None:
    """:func:`wake` the pins that hold these aliases of ``tx``'s collaboration."""
    parts = tx.registry().participants
    wake(tx.root, [parts[a].pin for a in aliases if a in parts])


def idle_token(root: str, pin: str) -> str | None:
    """The pin's generation token, created if missing: read before anything that decides "nothing to show"."""
    files = layout.idle_files(root, pin)
    if files is None:
        return None
    token = idle_token_now(root, pin)
    if token is None:
        token = os.urandom(16).hex()
        runtime = os.path.basename(os.path.dirname(files[0]))
        fsio.ensure_dir(fsio.ensure_dir(root, layout.IDLE), runtime)
        fsio.atomic_write(files[0], (token + "\n").encode(), durable=False)
    return token


def idle_token_now(root: str, pin: str) -> str | None:
    """The pin's generation token as it is on disk now (never created): None when a writer deleted it."""
    files = layout.idle_files(root, pin)
    raw = fsio.read_bytes(files[0]) if files is not None else None
    token = raw.decode("ascii", "replace").strip() if raw else ""
    return token if len(token) == 32 and set(token) <= _HEX else None


def mark_idle(root: str, pin: str, token: str) -> None:
    """Record that the pin had nothing to show as of generation ``token`` (the launcher may skip Python)."""
    files = layout.idle_files(root, pin)
    if files is not None:
        fsio.atomic_write(files[1], (token + "\n").encode(), durable=False)


def clear_idle(root: str, pin: str) -> None:
    """Drop the pin's idle marker: the next hook runs in full."""
    files = layout.idle_files(root, pin)
    if files is not None:
        quietly(_invalidate, files)


# The mid-turn marker, ``<session>.mid``: the same generation scheme as ``.idle``, for PostToolUse
# (``hooks/run claude midturn``).  A PostToolUse hook that finds nothing due between tool calls copies
# the generation it read first into it.  Every writer's :func:`wake` voids it with ``.gen``; a full
# prompt or SessionStart run that may change what is due (a prompt counted, a cleared context) drops it.


def _mark(root: str, pin: str, suffix: str, token: str) -> None:
    path = layout.marker_file(root, pin, suffix)
    if path is not None:
        fsio.atomic_write(path, (token + "\n").encode(), durable=False)


def _clear(root: str, pin: str, suffix: str) -> None:
    path = layout.marker_file(root, pin, suffix)
    if path is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def mark_midturn_quiet(root: str, pin: str, token: str) -> None:
    """Record that nothing was due mid-turn for the pin as of generation ``token``."""
    _mark(root, pin, ".mid", token)


def clear_midturn(root: str, pin: str) -> None:
    """Drop the pin's mid-turn marker: the next PostToolUse hook runs in full."""
    _clear(root, pin, ".mid")


def mark_stop_quiet(root: str, pin: str, token: str) -> None:
    """Record that a Stop hook had nothing to do for the pin as of generation ``token`` (no active envelope,
    no active wake consent): ``hooks/run <host> stop`` may exit without Python while unread mail waits."""
    _mark(root, pin, ".stop", token)


def clear_stop(root: str, pin: str) -> None:
    """Drop the pin's Stop marker: the next Stop hook runs in full."""
    _clear(root, pin, ".stop")


def receipts_placed(tx: FileTxn, alias: str, placed: list[tuple[int, dict[str, Any]]]) -> None:
    """Derived data after receipts were appended, by a writer or by a replica's import: ``ids/``, the
    inbox map (an ack), and the fast-path markers (a retry shows a message again at the next prompt)."""
    for offset, rec in placed:
        if rec.get("message"):
            index_receipt(tx, rec["message"], offset)
    acked = any(rec.get("type") == kinds.ACK for _o, rec in placed)
    if acked:
        tx.map(alias)
    # A retry shows a message again; an ack takes one out of a delivery rendered ahead.
    if acked or any(rec.get("type") == kinds.RETRY for _o, rec in placed):
        wake_aliases(tx, (alias,))
