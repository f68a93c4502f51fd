"""The per-inbox status map: flat-cost reads and acks, checked against the journals.

One status byte per message, by sequence number (``state/<alias>.map``,
after a one-line JSON header), and one 8-byte offset per message
(``state/<alias>.offsets``).  The byte says whether the message is
acknowledged, high priority and a request, so "the top 20 unacknowledged
messages by priority and age, and how many more" is a few ``bytes.find``
and ``bytes.count`` calls over the map, and the 20 records are read by
offset: the same cost at 10 and at 100,000 unread.

Derived data, never the source of truth.  The header names how far each
journal was folded in, by offset *and* checksum of the last record folded;
a header that does not match the journals (a truncated or rewritten file),
or a map whose bytes do not match the header's hash (a hand edit), is
discarded and the map rebuilt from the journals.  So an edited position can
cost one slow read, never hide a message.  Written only under the
collaboration's lock, and not fsynced: a map lost in a crash is rebuilt.
"""

from __future__ import annotations

import os

from agentmsg import fsio, records
from agentmsg.backends.file import layout
from agentmsg.backends.file.journal import Journal, Problem
from agentmsg.domain import kinds

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterator
    from typing import Any

PRESENT, ACKED, HIGH, REQUEST = 8, 1, 2, 4
VERSION = 2
_OFF = 8


def status_byte(rec: dict[str, Any]) -> int:
    return PRESENT | (HIGH if rec.get("priority") == kinds.HIGH else 0) | (
        REQUEST if rec.get("kind") == kinds.REQUEST else 0)


#: The status values of an acknowledged message (any priority and kind).
ACKED_VALUES = (PRESENT | ACKED, PRESENT | ACKED | HIGH, PRESENT | ACKED | REQUEST, PRESENT | ACKED | HIGH | REQUEST)

#: The unacknowledged status values, by what a reader asks for.
UNACKED_HIGH = (PRESENT | HIGH, PRESENT | HIGH | REQUEST)
UNACKED_NORMAL = (PRESENT, PRESENT | REQUEST)


class InboxMap:
    """The folded state of one alias's inbox and receipts."""

    __slots__ = ("_counts", "alias", "bad", "base", "changed", "ie", "il", "is_", "new_offsets", "offsets_from",
                 "problems", "re", "rl", "rs", "saved", "status")

    def __init__(self, base: str, alias: str) -> None:
        self.base, self.alias = base, alias
        self.status = bytearray()
        self.ie = self.il = self.re = self.rl = 0  # journal ends and last-record offsets folded so far
        self.is_ = self.rs = ""  # checksums of those last records
        self.new_offsets: list[int] = []
        self.offsets_from = 0  # status entries before this already have offsets on disk
        self.changed = False
        self.problems: list[Problem] = []  # lines skipped while folding (torn tails, damaged records)
        #: skipped lines folded past, kept as ``[offset, reason, torn]`` so every later read still reports them
        self.bad: list[list[Any]] = []
        self._counts: dict[tuple[int, ...], int] = {}  # count() per value set, until a fold changes the bytes
        #: the map file's `file_key` when these bytes were read from it or written to it (None: neither)
        self.saved: tuple[int, ...] | None = None

    # ---- loading and checking ---------------------------------------------------------

    @classmethod
    def load(cls, base: str, alias: str, kept: InboxMap | None = None) -> InboxMap:
        """The stored map if it still matches the journals, else an empty one (to be folded from zero).

        ``kept``: this map as a long-lived store last saved or read it.  While
        the file is the one it was (`file_key`), it is used instead of reading
        and checksumming the file again (the whole map: at 100,000 messages
        most of a page's cost).  It is a fold of the journals either way, so
        it is checked against them as the file would be, and the caller folds
        it forward; a file written since by anyone is read as before.
        """
        path = layout.inbox_map(base, alias)
        if kept is not None and kept.saved is not None and kept.saved == file_key(path) and kept._matches_journals():
            m = kept
        else:  # one open reads the file and says what it was (no lstat when nothing is kept: the hooks' case)
            m = cls(base, alias)
            found = fsio.read_stat(path)
            if not (found and found[0] and m._parse(found[0]) and m._matches_journals()):
                fresh = cls(base, alias)
                fresh.changed = True
                return fresh
            m.saved = _key(found[1])  # the open's fstat: a write after it reads as changed next time
        m.offsets_from = min(len(m.status), fsio.file_size(layout.inbox_offsets(base, alias)) // _OFF)
        return m

    def _parse(self, raw: bytes) -> bool:
        head, sep, body = raw.partition(b"\n")
        if not sep:
            return False
        try:
            doc = records.loads(head)
        except ValueError:
            return False
        want = ("v", "n", "ie", "il", "is", "re", "rl", "rs", "h")
        if not isinstance(doc, dict) or any(k not in doc for k in want) or doc["v"] != VERSION:
            return False
        if len(body) != doc["n"] or records.sha256_hex(body) != doc["h"]:
            return False  # edited by hand, or torn: the journals decide
        self.status = bytearray(body)
        self.ie, self.il, self.is_ = doc["ie"], doc["il"], doc["is"]
        self.re, self.rl, self.rs = doc["re"], doc["rl"], doc["rs"]
        bad = doc.get("bad", [])
        self.bad = [b for b in bad if isinstance(b, list) and len(b) == 3 and type(b[0]) is int][:100] \
            if isinstance(bad, list) else []
        return all(type(v) is int and v >= 0 for v in (self.ie, self.il, self.re, self.rl))

    def _matches_journals(self) -> bool:
        """The records the header names are still where it says, with the same checksums."""
        if self.re == 0 and self.count(ACKED_VALUES):
            return False  # acknowledged with no receipt at all
        for path, end, last, summ, seq in (
                (layout.inbox(self.base, self.alias), self.ie, self.il, self.is_, len(self.status)),
                (layout.receipts(self.base, self.alias), self.re, self.rl, self.rs, None)):
            if end == 0:
                if seq:
                    return False
                continue
            if fsio.file_size(path) < end:
                return False
            rec = record_at(Journal(path), last)
            if rec is None or rec.get("sum") != summ or (seq is not None and rec.get("seq") != seq):
                return False
            if seq is None and type(rec.get("ackn")) is int and rec["ackn"] != self.count(ACKED_VALUES):
                return False  # the journal says otherwise: an edited map (maybe hiding mail) is rebuilt
        return True

    # ---- folding new records in --------------------------------------------------------

    def fold(self, lookup_seq: Any = None) -> InboxMap:
        """Fold records appended since the last fold: new messages, then new acks.

        ``lookup_seq(message_id)`` finds the sequence number of an ack that
        does not carry one (receipts written before this map existed).
        """
        inbox = Journal(layout.inbox(self.base, self.alias))
        self.problems = []
        for pos, rec, end in inbox.entries(self.ie, self.problems):
            seq = rec.get("seq")
            if type(seq) is not int or seq <= len(self.status):
                continue  # already folded: never count a message twice
            while len(self.status) < seq - 1:  # a damaged line holds the seqs between: hide nothing after it
                self.status.append(0)
                self.new_offsets.append(0)
            self.status.append(status_byte(rec))
            self.new_offsets.append(pos)
            self.ie, self.il, self.is_ = end, pos, rec["sum"]
            self.changed = True
            self._counts.clear()
        known = {b[0] for b in self.bad}
        for p in self.problems:
            if p.offset < self.ie and p.offset not in known and len(self.bad) < 100:
                self.bad.append([p.offset, p.reason, p.torn])
                known.add(p.offset)
                self.changed = True
        receipts = Journal(layout.receipts(self.base, self.alias))
        for pos, rec, end in receipts.entries(self.re):
            if rec.get("type") == kinds.ACK:
                seq = rec.get("mseq")  # the message's inbox seq (the receipt's own "seq" is its place here)
                if type(seq) is not int and lookup_seq is not None:
                    seq = lookup_seq(rec.get("message"))
                if type(seq) is int and 0 < seq <= len(self.status):
                    self.status[seq - 1] |= ACKED
                    self._counts.clear()
            self.re, self.rl, self.rs = end, pos, rec["sum"]
            self.changed = True
        return self

    def save(self) -> None:
        """Write what changed (the caller holds the collaboration's lock); not fsynced."""
        if not self.changed:
            return
        fsio.ensure_dir(self.base, "state")
        offsets = layout.inbox_offsets(self.base, self.alias)
        have = fsio.file_size(offsets)
        start = len(self.status) - len(self.new_offsets)
        if start == 0:
            fsio.atomic_write(offsets, _pack(self.new_offsets), durable=False)
        elif self.new_offsets and have == start * _OFF:
            fsio.append_raw(offsets, _pack(self.new_offsets))
        elif have != len(self.status) * _OFF:
            fsio.atomic_write(offsets, _pack(self._all_offsets()), durable=False)
        body = bytes(self.status)
        head = records.dumps({"v": VERSION, "n": len(body), "ie": self.ie, "il": self.il, "is": self.is_,
                              "re": self.re, "rl": self.rl, "rs": self.rs, "h": records.sha256_hex(body),
                              "bad": self.bad})
        path = layout.inbox_map(self.base, self.alias)
        self.saved = None  # until it is written whole
        fsio.overwrite(path, head.encode() + b"\n" + body)
        self.saved = file_key(path)
        self.offsets_from, self.new_offsets, self.changed = len(self.status), [], False

    def _all_offsets(self) -> list[int]:
        """Every message's offset, from the inbox itself (the offsets file was short or damaged)."""
        out = [pos for pos, rec, _end in Journal(layout.inbox(self.base, self.alias)).entries()
               if type(rec.get("seq")) is int]
        return out[:len(self.status)]

    # ---- queries ------------------------------------------------------------------------

    def offset(self, seq: int, reader: fsio.LineReader | None = None) -> int | None:
        """Where message ``seq`` starts in the inbox (checked by the caller against the record).

        ``reader``: the offsets file, already open (:meth:`offsets_reader`), for a page of lookups.
        """
        first_new = len(self.status) - len(self.new_offsets)
        if seq > first_new:
            return self.new_offsets[seq - first_new - 1]
        if reader is not None:
            raw = reader.read_at((seq - 1) * _OFF, _OFF)
        else:
            raw = fsio.read_bytes_at(layout.inbox_offsets(self.base, self.alias), (seq - 1) * _OFF, _OFF)
        off = int.from_bytes(raw, "little") if raw is not None and len(raw) == _OFF else None
        return off if off is not None and off < self.ie else None  # past the folded inbox: damaged

    def offsets_reader(self) -> fsio.LineReader:
        return fsio.LineReader(layout.inbox_offsets(self.base, self.alias))

    def skipped_lines(self) -> list[Problem]:
        """Every line skipped so far: kept ones, then this fold's."""
        path = layout.inbox(self.base, self.alias)
        kept = [Problem(path, b[0], str(b[1]), bool(b[2])) for b in self.bad]
        return kept + [p for p in self.problems if p.offset not in {b[0] for b in self.bad}]

    def acked(self, seq: int) -> bool:
        return 0 < seq <= len(self.status) and bool(self.status[seq - 1] & ACKED)

    def count(self, values: tuple[int, ...]) -> int:
        found = self._counts.get(values)
        if found is None:
            found = self._counts[values] = sum(self.status.count(v) for v in values)
        return found

    def unacked(self, *, requests_only: bool = False, priority_first: bool = True) -> Iterator[int]:
        """Sequence numbers of unacknowledged messages: oldest first, high priority before the rest if asked."""
        high = UNACKED_HIGH[1:] if requests_only else UNACKED_HIGH
        normal = UNACKED_NORMAL[1:] if requests_only else UNACKED_NORMAL
        if priority_first:
            yield from _positions(self.status, high)
            yield from _positions(self.status, normal)
        else:
            yield from _positions(self.status, high + normal)

    def select(self, limit: int, *, skip: Collection[int] = (), requests_only: bool = False,
               priority_first: bool = True) -> list[int]:
        out = []
        for seq in self.unacked(requests_only=requests_only, priority_first=priority_first):
            if seq in skip:
                continue
            out.append(seq)
            if len(out) >= limit:
                break
        return out


def file_key(path: str) -> tuple[int, ...] | None:
    """A file's identity, size and times: equal while nobody has written it (no user can set the ctime)."""
    try:
        return _key(os.lstat(path))
    except OSError:
        return None


def _key(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _pack(offsets: list[int]) -> bytes:
    return b"".join(o.to_bytes(_OFF, "little") for o in offsets)


def _positions(status: bytearray, values: tuple[int, ...]) -> Iterator[int]:
    """1-based positions holding any of ``values``, ascending (C-speed finds, merged)."""
    nxt = {v: status.find(v) for v in values}
    while True:
        live = [(p, v) for v, p in nxt.items() if p >= 0]
        if not live:
            return
        p, v = min(live)
        yield p + 1
        nxt[v] = status.find(v, p + 1)


def record_at(journal: Journal, offset: int) -> dict[str, Any] | None:
    """The record that starts exactly at ``offset`` (not the next one after a damaged line)."""
    for pos, rec, _end in journal.entries(offset):
        return rec if pos == offset else None
    return None

