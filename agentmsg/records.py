"""One record per line: canonical JSON with a checksum and a hash chain.

The checksum catches a damaged or hand-edited line; ``prev`` (the previous
record's checksum) catches removed or reordered lines.  Both are computed
over canonical JSON so any reader in any language can recheck them.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from . import TOOL

Record = dict[str, Any]


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def checksum(rec: Record) -> str:
    body = {k: v for k, v in rec.items() if k != "sum"}
    return hashlib.sha256(canonical(body)).hexdigest()


def now_utc() -> str:
    """UTC ISO-8601 with milliseconds and ``Z``; sortable as text."""
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


def seal(fields: Record, *, seq: int, prev: str, prev_ts: str | None) -> Record:
    """Complete a record: sequence, time, chain link, tool version, checksum."""
    rec = dict(fields)
    rec.update(seq=seq, prev=prev, tool=TOOL, ts=now_utc())
    if prev_ts is not None and rec["ts"] < prev_ts:
        rec["ts_backwards"] = True
    rec["sum"] = checksum(rec)
    return rec


def encode(rec: Record) -> bytes:
    return canonical(rec) + b"\n"


class BadRecord(ValueError):
    """A line that is not a well-formed record; ``torn`` if it does not parse."""

    def __init__(self, reason: str, *, torn: bool) -> None:
        super().__init__(reason)
        self.torn = torn


def decode(line: bytes) -> Record:
    try:
        rec = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        raise BadRecord("line does not parse", torn=True) from None
    if not isinstance(rec, dict) or not isinstance(rec.get("seq"), int):
        raise BadRecord("not a record", torn=False)
    if rec.get("sum") != checksum(rec):
        raise BadRecord("checksum mismatch", torn=False)
    return rec


def peek(line: bytes) -> Record | None:
    """Parse without checking the checksum: for chain links and sequence numbers."""
    try:
        rec = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(rec, dict) and isinstance(rec.get("seq"), int) and isinstance(rec.get("sum"), str):
        return rec
    return None
