"""``verify`` on plain files: every journal, and every derived file against the journals.

Each record's checksum catches an edited line; each ``prev`` link and the
gap-free ``seq`` catch removed and reordered lines; the ``.head`` sidecar
catches records cut off the end.  A torn line (a crash mid-write) is
reported as torn, not as tampering: it never parses, and the records
around it still chain.

Derived files are witnesses too.  The collaboration-wide ``cseq`` is
gap-free across journals, so a deleted inbox shows as a gap; the id index,
the inbox maps and ``collaboration.md`` name records, so a record cut off
the end with its sidecar shows as a record they name and no journal holds;
a map that marks a message acknowledged with no ack receipt (an edited
position hiding mail) disagrees with the map folded afresh.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentmsg import fsio, records
from agentmsg.backends.file import hookstate, idindex, layout, pinindex, rebuild, registryview, transcripts
from agentmsg.backends.file.derived import quietly
from agentmsg.backends.file.journal import Journal
from agentmsg.domain import kinds, rules

if TYPE_CHECKING:
    from agentmsg.backends.file.protocols import Root, Txn
    from agentmsg.domain.values import Registry


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    kind: str  # edited | removed | reordered | truncated | damaged | derived, and torn | healed (no tampering)
    detail: str

    @property
    def tampering(self) -> bool:
        return self.kind not in ("torn", "healed")


def journals(root: Path, collab: str | None = None) -> Iterator[Path]:
    base = fsio.existing_dir(root, "collabs")
    if base is None:
        return
    for cdir in sorted(base.iterdir()) if collab is None else [base / collab]:
        fsio.existing_dir(base, cdir.name)
        layout.collab_dir(str(root), cdir.name)  # a symlinked subdirectory is refused, not skipped
        yield from sorted(p for p in cdir.rglob("*.jsonl") if not p.is_symlink())


def verify_file(path: Path) -> list[Finding]:
    found: list[Finding] = []
    prev_sum = ""
    prev_seq = 0
    name = str(path)
    rows = [(n, line, complete, records.peek(line))
            for n, (_pos, line, complete) in enumerate(fsio.lines(path), start=1) if line]
    present = {rec["seq"] for *_, rec in rows if rec is not None}
    for number, _line, complete, rec in rows:
        if rec is None:
            where = "at the end" if not complete else "mid-file, after which writing continued"
            found.append(Finding(name, number, "torn", f"incomplete record {where} (crash mid-write)"))
            continue
        seq = rec["seq"]
        if rec["sum"] != records.checksum(rec):
            found.append(Finding(name, number, "edited", f"checksum mismatch on seq {seq}"))
        elif seq == prev_seq + 1 and rec.get("prev") != prev_sum:
            found.append(Finding(name, number - 1, "edited",
                                 f"seq {prev_seq} changed after seq {seq} was chained to it"))
        elif seq != prev_seq + 1 or rec.get("prev") != prev_sum:
            missing = [s for s in range(prev_seq + 1, seq) if s not in present]
            kind = "removed" if seq > prev_seq and len(missing) == seq - prev_seq - 1 else "reordered"
            found.append(Finding(name, number, kind, f"seq {seq} follows seq {prev_seq}"))
        prev_sum, prev_seq = rec["sum"], seq
    found += _check_head(path, prev_seq, prev_sum, len(rows))
    return found


def _check_head(path: Path, last_seq: int, last_sum: str, lines: int) -> list[Finding]:
    """The sidecar may lag the file after a crash, but never lead it."""
    head = Journal(path).head()
    if not head or not isinstance(head.get("seq"), int):
        return []
    if head["seq"] > last_seq:
        return [Finding(str(path), lines + 1, "truncated",
                        f"last record is seq {last_seq} but seq {head['seq']} was written")]
    if head["seq"] == last_seq and head.get("sum") != last_sum:
        return [Finding(str(path), lines, "edited", f"seq {last_seq} differs from the one written")]
    return []


def check_registry(cdir: Path) -> list[Finding]:
    """``registry.yaml`` is a rendered view that nothing routes through; one edited in place is still reported:
    a person reads it, and someone changed a file under the state root."""
    reg = rules.replay(rec for _, rec in Journal(cdir / layout.EVENTS).scan())
    actual = registryview.registry_document(str(cdir))  # None when stale: then it is replayed, never trusted
    if reg is None or actual is None or {k: v for k, v in actual.items() if k != "built_from"} == \
            rules.registry_document(reg):
        return []
    return [Finding(str(cdir / layout.REGISTRY), 1, "edited",
                    "differs from the registry replayed from collab.jsonl, which routes mail "
                    "(agentmsg repair renders it again)")]


def verify(store: Root, collab: str | None = None) -> tuple[int, list[dict[str, Any]]]:
    """(files checked, findings) for the whole root or one collaboration."""
    root = Path(store.root)
    files = list(journals(root, collab))
    findings = [f for path in files for f in verify_file(path)]
    quietly(pinindex.ensure_pins, store)  # a missing pin index is written back, as the hooks' lookup would
    for cdir in sorted({path.parent for path in files if path.name == layout.EVENTS}):
        # A damaged record is reported once, by the journal check: the views it also changes are left alone.
        journals_clean = not any(f.path.startswith(f"{cdir}{os.sep}") for f in findings)
        with store.transaction(cdir.name) as tx:  # under the lock: no event lands between replay and read
            findings += check_registry(cdir)
            findings += check_derived(tx, journals_clean=journals_clean)
    return len(files), [as_dict(f) for f in findings]


_ID_LINE = re.compile(r"^- id: `([0-9a-f-]{36})` \(inbox seq (\d+)\)$", re.M)


def check_derived(tx: Txn, *, journals_clean: bool = True) -> list[Finding]:
    """Records the derived files name that no journal holds, and derived files that disagree.

    The views that follow from the records as a whole (the pin index, the
    transcripts) are compared only when ``journals_clean``: a damaged record
    changes them too, and is reported as itself.  The transcripts, only when
    nothing else is found either (a removed record changes the render).
    """
    found: list[Finding] = []
    base = tx.base
    quietly(rebuild.restore_missing, tx)  # a root it cannot write to still gets its report
    messages: dict[str, dict[str, Any]] = {}
    cseqs: set[int] = set()
    aliases = tx.aliases_with_inbox()
    # Damaged lines count as present here: the journal checks above report them once, as edits.
    for rec in _peek_all(os.path.join(base, layout.EVENTS)) + _peek_all(os.path.join(base, layout.LOG)):
        cseqs.add(rec.get("cseq", 0))
    at: dict[str, int] = {}  # message id -> where its record starts in its inbox
    starts: dict[str, dict[int, int]] = {}  # alias -> seq -> the same (the offsets file's truth)
    for alias in aliases:
        for pos, rec in _peek_at(layout.inbox(base, alias)):
            if isinstance(rec.get("id"), str):
                messages[rec["id"]] = rec
                at[rec["id"]] = pos
            if type(rec.get("seq")) is int:
                starts.setdefault(alias, {})[rec["seq"]] = pos
            cseqs.add(rec.get("cseq", 0))
    cseqs.discard(0)
    if cseqs:
        gaps = sorted(set(range(1, max(cseqs) + 1)) - cseqs)
        if gaps:
            found.append(Finding(base, 0, "removed", f"{len(gaps)} record(s) missing from the collaboration "
                                 f"order (cseq {', '.join(map(str, gaps[:5]))}{'...' if len(gaps) > 5 else ''}): "
                                 "a journal or its last records were deleted"))
    reg = rules.replay(tx.events())
    known = set(aliases) | (set(reg.participants) if reg else set())
    for alias in sorted(a for a in known if not rules.is_alias(a)):  # only a forged event names one: no inbox
        found.append(Finding(f"{base}/{layout.EVENTS}", 0, "edited",
                             f"the registry names a participant {rules.printable(alias)} that is not an alias"))
        known.discard(alias)
    found += _check_pins(tx, reg) if journals_clean else []
    entries = idindex.index_entries(tx)
    by_seq = {(rec["to"], rec["seq"]): rec for rec in messages.values()}
    copies: dict[str, set[str]] = {}  # broadcast id -> the recipients of its stored copies
    for rec in messages.values():
        if isinstance(rec.get("broadcast"), str):
            copies.setdefault(rec["broadcast"], set()).add(rec["to"])
    for mid, doc in entries.items():
        path = layout.index(base, mid)
        if not doc:
            found.append(Finding(path, 1, "damaged", f"index entry of {mid} does not parse, or names both a "
                                 "message and a broadcast (run agentmsg repair)"))
        elif "broadcast" in doc:
            # A broadcast cut short by a crash has fewer copies than its entry names (a re-send completes
            # it); a copy the entry does not name, or a message under the broadcast's own id, is damage.
            if mid in messages or not copies.get(mid, set()) <= set(doc["broadcast"]):
                found.append(Finding(path, 1, "damaged", f"broadcast entry of {mid} disagrees with the stored "
                                     "messages (run agentmsg repair)"))
        elif mid not in messages:
            inbox = doc.get("inbox")
            size = fsio.file_size(layout.inbox(base, str(inbox))) if rules.is_alias(inbox) else 0
            if not rules.is_alias(inbox) or type(doc.get("offset")) is not int:
                found.append(Finding(path, 1, "damaged", f"index entry of {mid} is malformed"))
            elif idindex.overtaken(mid, doc, by_seq.get((inbox, doc.get("seq")))):
                continue  # a reservation a crash or failed write left, whose place the next record took
            elif (size == 0 and doc.get("seq", 0) > 1) or 0 < doc["offset"] < size:
                found.append(Finding(path, 1, "removed", f"index names message {mid} at inbox/{inbox}.jsonl "
                                     f"offset {doc['offset']}, which no journal holds"))
        else:
            rec = messages[mid]
            if doc.get("inbox") != rec["to"] or doc.get("seq") != rec["seq"] or doc.get("digest") != rec["digest"] \
                    or (journals_clean and doc.get("offset") != at[mid]):  # an edited record moves the rest
                found.append(Finding(path, 1, "damaged", f"index entry of {mid} disagrees with its record "
                                     "(run agentmsg repair)"))
    for mid in [*messages, *copies]:
        if mid not in entries:
            what = "message" if mid in messages else "broadcast"
            found.append(Finding(layout.index(base, mid), 0, "derived",
                                 f"{what} {mid} has no index entry (run agentmsg repair)"))
    for alias in sorted(known):
        for _pos, rec in Journal(layout.receipts(base, alias)).scan():
            named = rec.get("message")
            if rec.get("type") in (kinds.ACK, kinds.PRESENTED) and isinstance(named, str) and named not in messages:
                found.append(Finding(layout.receipts(base, alias), rec["seq"], "removed",
                                     f"{rec['type']} receipt names message {named}, which no journal holds"))
                break
        found += _check_map(tx, alias, starts.get(alias, {}) if journals_clean else None)
    for path in hookstate.damaged_hook_states(tx):
        found.append(Finding(path, 1, "derived", "hook state does not parse: the hooks reset it and skip a prompt "
                             "(run agentmsg repair)"))
    md = fsio.read_bytes(os.path.join(base, layout.TRANSCRIPT))
    if md:
        for mid in dict.fromkeys(_ID_LINE.findall(md.decode("utf-8", "replace"))):
            if mid[0] not in messages:
                found.append(Finding(os.path.join(base, layout.TRANSCRIPT), 0, "removed",
                                     f"the transcript shows message {mid[0]}, which no journal holds"))
    # Last, and only when nothing else is wrong: a record removed or damaged changes the render too.
    for path, text in transcripts.rendered_views(tx) if reg is not None and journals_clean and not found else ():
        held = fsio.read_bytes(path)
        if held in (text, None):
            continue
        if _behind(held, text):  # a command cut short after its record was stored: written again
            fsio.atomic_write(path, text, durable=False)
            found.append(Finding(path, 0, "healed", "was behind its records (a command cut short before it "
                                 "was written); rendered again"))
        else:
            found.append(Finding(path, 0, "derived", "differs from the transcript its records render: "
                                 "edited (run agentmsg repair)"))
    return found


_SECTION = re.compile(rb"(?m)^(?=#)")  # every section starts a line with "#"; a body's lines never do


def _behind(held: bytes, rendered: bytes) -> bool:
    """``held`` is ``rendered`` with whole sections missing and none changed: appends that never happened."""
    want = iter(_SECTION.split(rendered))
    return all(any(section == w for w in want) for section in _SECTION.split(held))


def _check_pins(tx: Txn, reg: Registry | None) -> list[Finding]:
    """Each active participant of an open collaboration is bound in the pin index under its alias, and only
    that one: the hooks and the CLI find a session's bindings there (confirmed against the registry, so a
    wrong entry misroutes nothing, but a missing one leaves the session unbound)."""
    if reg is None or reg.closed:
        return []
    found = []
    for alias, p in sorted(reg.active().items()):
        try:
            mine = [a for c, a in pinindex.pin_entries(tx.root, p.pin) if c == tx.collab]
        except pinindex.DamagedIndex:
            mine = []
        if mine != [alias]:
            path = os.path.join(tx.root, layout.PINS, f"{layout.pin_key(p.pin)}.json")
            found.append(Finding(path, 0, "derived", f"the pin index does not bind {rules.printable(p.pin)} to "
                                 f"{alias} in {tx.collab} (run agentmsg repair)"))
    return found


def _edited_in_place(tx: Txn, stored: Any) -> bool:
    """The records the map names are still there, only edited (the journal check reports that)."""
    for path, end, last in ((layout.inbox(tx.base, stored.alias), stored.ie, stored.il),
                            (layout.receipts(tx.base, stored.alias), stored.re, stored.rl)):
        if end and not any(pos == last for pos, _l, _c in fsio.lines(path, last)):
            return False
        if end and fsio.file_size(path) < end:
            return False
    return True


def _peek_all(path: str) -> list[dict[str, Any]]:
    return [rec for _pos, rec in _peek_at(path)]


def _peek_at(path: str) -> list[tuple[int, dict[str, Any]]]:
    """Every line that reads as a record, with where it starts (damaged ones too: see `check_derived`)."""
    out = []
    for pos, line, _complete in fsio.lines(path):
        rec = records.peek(line) if line else None
        if rec is not None:
            out.append((pos, rec))
    return out


def _check_map(tx: Txn, alias: str, starts: dict[int, int] | None) -> list[Finding]:
    """``starts``: where each message's record starts (None: the journals are damaged, which moves them)."""
    from agentmsg.backends.file.inboxmap import ACKED, InboxMap

    path = layout.inbox_map(tx.base, alias)
    raw = fsio.read_bytes(path)
    if raw is None:
        return []
    stored = InboxMap(tx.base, alias)
    if not stored._parse(raw):
        return [Finding(path, 1, "edited", "inbox map does not match its own checksum (run agentmsg repair)")]
    if not stored._matches_journals() and not _edited_in_place(tx, stored):
        return [Finding(path, 1, "removed", "inbox map names records the journals no longer hold "
                        "(a record was cut off the end, or the journal replaced)")]
    found = _check_offsets(tx, alias, starts) if starts is not None else []
    if found:
        return found
    fresh = rebuild.fresh_map(tx, alias)
    for i, byte in enumerate(stored.status):
        want = fresh.status[i] if i < len(fresh.status) else None
        if not want:
            continue  # a damaged or missing record: the journal checks and the other witnesses report it
        if byte != want:
            hides = want is not None and byte & ACKED and not want & ACKED
            return [Finding(path, 1, "edited" if hides else "derived",
                            f"inbox map entry for seq {i + 1} disagrees with the journals"
                            + (": it hides an unacknowledged message" if hides else "") + " (run agentmsg repair)")]
    return []


def _check_offsets(tx: Txn, alias: str, starts: dict[int, int]) -> list[Finding]:
    """The offsets file beside the map: each entry it holds must be where that message's record starts."""
    from agentmsg.backends.file.inboxmap import _OFF

    path = layout.inbox_offsets(tx.base, alias)
    raw = fsio.read_bytes(path) or b""
    for i in range(len(raw) // _OFF):
        want = starts.get(i + 1)
        if want is not None and int.from_bytes(raw[i * _OFF:(i + 1) * _OFF], "little") != want:
            return [Finding(path, 1, "derived", f"offsets entry for seq {i + 1} does not point at its record "
                            "(run agentmsg repair)")]
    return []


def as_dict(f: Finding) -> dict[str, object]:
    return {"path": f.path, "line": f.line, "kind": f.kind, "detail": f.detail, "tampering": f.tampering}

