"""An append-only, hash-chained record file.

Writers must hold the collaboration's write lock: the tail (last sequence
number and checksum) is read and extended under it, which is what makes the
sequence gap-free however many processes send at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from . import fsio, records
from .records import Record


@dataclass(frozen=True)
class Problem:
    """A line a reader skipped: torn (crash mid-write) or damaged."""

    path: str
    offset: int
    reason: str
    torn: bool


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path

    def last(self) -> Record | None:
        for line in fsio.last_lines(self.path):
            rec = records.peek(line)
            if rec is not None:
                return rec
        return None

    def append(self, fields: Record, before: Callable[[int, Record], None] | None = None) -> tuple[int, Record]:
        """Seal and durably append one record; returns (offset, record).

        ``before(offset, record)`` runs first, with the offset the record is
        about to land at: an index written there is a reservation that a
        crash can leave dangling but never missing.
        """
        tail = self.last()
        rec = records.seal(
            fields,
            seq=tail["seq"] + 1 if tail else 1,
            prev=tail["sum"] if tail else "",
            prev_ts=tail.get("ts") if tail else None,
        )
        if before is not None:
            before(fsio.next_offset(self.path), rec)
        offset = fsio.append(self.path, records.encode(rec))
        fsio.atomic_write(self.head_path, records.canonical({"seq": rec["seq"], "sum": rec["sum"]}), durable=False)
        return offset, rec

    @property
    def head_path(self) -> Path:
        """Sidecar naming the newest record: lets ``verify`` see records cut off the end."""
        return self.path.with_name(f".{self.path.name}.head")

    def head(self) -> Record | None:
        raw = fsio.read_bytes(self.head_path)
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def scan(self, offset: int = 0, problems: list[Problem] | None = None) -> Iterator[tuple[int, Record]]:
        """Valid records from ``offset``; skipped lines go to ``problems``."""
        for pos, line, complete in fsio.lines(self.path, offset):
            if not line:
                continue
            try:
                rec = records.decode(line)
            except records.BadRecord as bad:
                if problems is not None:
                    problems.append(Problem(str(self.path), pos, str(bad), bad.torn or not complete))
                continue
            if not complete:
                # Complete JSON but no newline yet: a write in progress or a
                # crash right before the newline; the next writer settles it.
                if problems is not None:
                    problems.append(Problem(str(self.path), pos, "unterminated last line", True))
                continue
            yield pos, rec

    def read_at(self, offset: int) -> Record | None:
        for _pos, rec in self.scan(offset):
            return rec
        return None

    def size(self) -> int:
        return fsio.file_size(self.path)
