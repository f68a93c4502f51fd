"""An append-only, hash-chained record file.

Writers must hold the collaboration's write lock: the tail (last sequence
number and checksum) is read and extended under it, which is what makes the
sequence gap-free however many processes send at once.

Lean like records.py (the hooks append and scan with it); the path may be a
``str`` or a ``pathlib.Path``.
"""

from __future__ import annotations

import os

from agentmsg import fsio, records

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from agentmsg.fsio import StrPath
    from agentmsg.records import Record


class Problem:
    """A line a reader skipped: torn (crash mid-write) or damaged."""

    __slots__ = ("offset", "path", "reason", "torn")

    def __init__(self, path: str, offset: int, reason: str, torn: bool) -> None:
        self.path, self.offset, self.reason, self.torn = path, offset, reason, torn

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "offset": self.offset, "reason": self.reason, "torn": self.torn}

    def _key(self) -> tuple[str, int, str, bool]:
        return self.path, self.offset, self.reason, self.torn

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Problem) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Problem(path={self.path!r}, offset={self.offset!r}, reason={self.reason!r}, torn={self.torn!r})"


_TAILS: dict[tuple[str, int, int, int], Record | None] = {}


def _remember(path: str, st: os.stat_result, tail: Record | None) -> None:
    if len(_TAILS) >= 256:
        _TAILS.clear()
    _TAILS[(path, st.st_ino, st.st_size, st.st_mtime_ns)] = tail


class Journal:
    def __init__(self, path: StrPath) -> None:
        self.path = path

    def last(self, st: os.stat_result | None = None) -> Record | None:
        """The newest record (chain link and sequence number), read from the end.

        Remembered per file by identity, size and modification time: a
        process that appends many records (a benchmark, the MCP server, a
        hook reading several journals) reads each tail once; any write
        changes the key.  A symlink is refused as before (``lstat``).
        ``st``: the file's ``lstat``, taken by a caller that holds the lock.
        """
        if st is None:
            try:
                st = os.lstat(self.path)
            except FileNotFoundError:
                return None
        key = (os.fspath(self.path), st.st_ino, st.st_size, st.st_mtime_ns)
        if key in _TAILS:
            return _TAILS[key]
        found = None
        for line in fsio.last_lines(self.path):
            rec = records.peek(line)
            if rec is not None:
                found = rec
                break
        _remember(key[0], st, found)
        return found

    def append(self, fields: Record, before: Callable[[int, Record], None] | None = None, *,
               head: bool = True, st: os.stat_result | None = None, fd: int | None = None,
               meanwhile: Callable[[], None] | None = None) -> tuple[int, Record]:
        """Seal and durably append one record; returns (offset, record).

        ``before(offset, record)`` runs first, with the offset the record is
        about to land at: an index written there is a reservation that a
        crash can leave dangling but never missing.  ``head``, ``st``, ``fd``
        and ``meanwhile``: as for :meth:`append_many`.
        """
        return self.append_many([fields], before=before, head=head, st=st, fd=fd, meanwhile=meanwhile)[0]

    def append_many(self, items: Sequence[Record], *, before: Callable[[int, Record], None] | None = None,
                    durable: bool = True, head: bool = True,
                    st: os.stat_result | None = None, fd: int | None = None,
                    meanwhile: Callable[[], None] | None = None) -> list[tuple[int, Record]]:
        """Seal records and append them with one write; returns (offset, record) for each.

        ``before`` runs for each record first, as for :meth:`append`.  By
        default the records are durable (fsynced, and the directory of a new
        file) and the ``.head`` sidecar names the last one, as one
        :meth:`append` per record would leave them.  ``durable=False`` skips
        the fsyncs, for records whose loss in a crash is harmless.
        ``head=False`` leaves the sidecar as it was: ``verify`` accepts a
        sidecar that lags the file (never one that leads it), and the next
        append with ``head=True`` brings it up to date.  ``st``: as for :meth:`last`; ``fd``: the file, already open
        (`fsio.open_append`), left open.  ``meanwhile``: as for `fsio.append` (between the write and the fsync).
        """
        if not items:
            return []
        tail = self.last(st)
        sealed, lines = [], []
        for fields in items:
            tail, line = records.seal_next_line(fields, tail)
            sealed.append(tail)
            lines.append(line)
        def reserve(at: int) -> None:
            assert before is not None
            for rec, line in zip(sealed, lines, strict=True):
                before(at, rec)
                at += len(line)

        def remember(st: os.stat_result) -> None:  # our record is the tail now: the next last() reads nothing
            _remember(os.fspath(self.path), st, dict(tail) if tail is not None else None)

        try:
            at = fsio.append(self.path, b"".join(lines), durable=durable, first=reserve if before else None,
                             written=remember, fd=fd, meanwhile=meanwhile)
        except OSError as exc:  # fsio cut the file back: no part of these records is on disk
            from agentmsg.errors import StoreFailed

            raise StoreFailed(f"cannot append to {os.fspath(self.path)}: {exc.strerror or exc}; "
                              "nothing was stored") from None
        assert at is not None  # append creates the file
        if head:
            assert tail is not None  # items is not empty
            self.write_head(tail)
        return _placed(at, sealed, lines)

    def write_head(self, tail: Record, fd: int | None = None) -> bool:
        """Name ``tail`` in the ``.head`` sidecar; ``fd``: the sidecar, already open (left open).

        False when ``fd`` could not be written through (the caller closes
        it): the sidecar was then written by path, as without one.
        """
        data = records.canonical({"seq": tail["seq"], "sum": tail["sum"]})
        if fd is not None:
            try:
                fsio.overwrite(self.head_path, data, fd=fd)
                return True
            except Exception as exc:  # an OSError, or UnsafePath (a hard link made to it): by path, as below
                from agentmsg.errors import UnsafePath

                if not isinstance(exc, (OSError, UnsafePath)):
                    raise
        try:
            fsio.overwrite_or_replace(self.head_path, data)
        except OSError:
            pass  # the records are stored; verify accepts a sidecar that lags, and the next append fixes it
        return False

    def append_sealed(self, recs: Sequence[Record], *, before: Callable[[int, Record], None] | None = None
                      ) -> list[tuple[int, Record]]:
        """Append records another store sealed, verbatim, in one durable write (a mirror's import).

        Each must carry its own checksum and continue the chain exactly (``seq`` one more, ``prev``
        the last ``sum``); records this file already holds are skipped, so a repeated import is a
        no-op.  Anything else is refused before a byte is written: a mirror never forks history.
        """
        from agentmsg.errors import StoreFailed, TamperDetected

        if fsio.file_size(self.path):
            fsio.cut_partial_line(self.path)  # this replica's own torn write: those records come again whole
        tail = self.last()
        lines, fresh = [], []
        for rec in recs:
            seq, last = rec.get("seq"), (tail["seq"] if tail else 0)
            if type(seq) is int and seq <= last:
                if seq == last and tail is not None and rec.get("sum") != tail.get("sum"):
                    raise TamperDetected(f"{os.fspath(self.path)}: record {seq} differs from the one stored; "
                                      "the replica and its source have diverged")
                continue
            if seq != last + 1 or rec.get("prev") != (tail["sum"] if tail else "") or \
                    rec.get("sum") != records.checksum(rec):
                raise TamperDetected(f"{os.fspath(self.path)}: record {seq} does not continue the chain at {last} "
                                  "(the replica and its source have diverged); nothing was imported")
            tail = rec
            fresh.append(rec)
            lines.append(records.encode(rec))
        if not fresh:
            return []
        if before is not None:
            at = fsio.next_offset(self.path)
            for rec, line in zip(fresh, lines, strict=True):
                before(at, rec)
                at += len(line)
        try:
            end = fsio.append(self.path, b"".join(lines), durable=True)
        except OSError as exc:
            raise StoreFailed(f"cannot append to {os.fspath(self.path)}: {exc.strerror or exc}; "
                              "nothing was stored") from None
        assert end is not None  # append creates the file
        self.write_head(fresh[-1])
        return _placed(end, fresh, lines)

    @property
    def head_path(self) -> StrPath:
        """Sidecar naming the newest record: lets ``verify`` see records cut off the end."""
        return fsio.sibling(self.path, f".{os.path.basename(self.path)}.head")  # type: ignore[type-var]

    def head(self) -> Record | None:
        raw = fsio.read_bytes(self.head_path)
        try:
            return records.loads(raw) if raw else None
        except ValueError:
            return None

    def entries(self, offset: int = 0, problems: list[Problem] | None = None) -> Iterator[tuple[int, Record, int]]:
        """``(offset, record, end)`` of each valid record from ``offset``; skipped lines go to ``problems``."""
        for pos, line, complete in fsio.lines(self.path, offset):
            if not line:
                continue
            try:
                rec = records.decode(line)
            except records.BadRecord as bad:
                if problems is not None:
                    problems.append(Problem(os.fspath(self.path), pos, str(bad), bad.torn or not complete))
                continue
            if not complete:
                # Complete JSON but no newline yet: a write in progress or a
                # crash right before the newline; the next writer settles it.
                if problems is not None:
                    problems.append(Problem(os.fspath(self.path), pos, "unterminated last line", True))
                continue
            yield pos, rec, pos + len(line) + 1

    def scan(self, offset: int = 0, problems: list[Problem] | None = None) -> Iterator[tuple[int, Record]]:
        """Valid records from ``offset``; skipped lines go to ``problems``."""
        for pos, rec, _end in self.entries(offset, problems):
            yield pos, rec

    def read_at(self, offset: int) -> Record | None:
        for _pos, rec, _end in self.entries(offset):
            return rec
        return None

    def size(self) -> int:
        return fsio.file_size(self.path)


def _placed(at: int, recs: Sequence[Record], lines: Sequence[bytes]) -> list[tuple[int, Record]]:
    """Each record with the offset it was written at, from the first one's ``at``."""
    placed = []
    for rec, line in zip(recs, lines, strict=True):
        placed.append((at, rec))
        at += len(line)
    return placed
