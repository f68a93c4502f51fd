"""One record per line: canonical JSON with a checksum and a hash chain.

The checksum catches a damaged or hand-edited line; ``prev`` (the previous
record's checksum) catches removed or reordered lines.  Both are computed
over canonical JSON so any reader in any language can recheck them.

Lean on purpose: the hooks import this on every prompt with a bare
interpreter (``python3 -I -S``), where importing ``json``, ``re``,
``hashlib`` or ``typing`` costs milliseconds each.  So the JSON here is the
C accelerator behind the ``json`` module (``_json``), set up exactly as
``json.dumps(obj, sort_keys=True, separators=(",", ":"),
ensure_ascii=False)`` (:func:`dumps`), ``json.dumps(obj)`` (:func:`dumps_plain`)
and ``json.loads`` (:func:`loads`); sha256 is the builtin ``_sha256``
(``_sha2`` from CPython 3.12).  Elsewhere both fall back to ``json`` and
``hashlib``.  ``tests/backends/file/test_hookio.py`` checks them against ``json``.
"""

from __future__ import annotations

import time
from posix import urandom  # not os: the pre-tool hook imports this module and no os (agentmsg/pathops.py)

from agentmsg import TOOL

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Record = dict[str, Any]
else:
    Record = dict

_WS = " \t\n\r"

try:  # the C accelerators behind json.loads/json.dumps, without json's re-based modules
    from _json import encode_basestring as _encode_str
    from _json import encode_basestring_ascii as _encode_ascii
    from _json import make_encoder as _make_encoder
    from _json import make_scanner as _make_scanner

    class _ScanContext:
        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        parse_constant = float  # json.loads maps NaN/Infinity to floats too
        memo: dict[str, str] = {}  # noqa: RUF012 - the scanner's expected attribute

    _scan_once = _make_scanner(_ScanContext())  # type: ignore[arg-type]  # duck-typed like json.decoder

    def _default(obj: object) -> object:
        raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")

    # json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    _encode = _make_encoder(None, _default, _encode_str, None, ":", ",", True, False, True)
    # json.dumps(obj): the defaults, for derived files the store writes that way
    _encode_plain = _make_encoder(None, _default, _encode_ascii, None, ": ", ", ", False, False, True)

    def _loads(text: str) -> Any:
        start = len(text) - len(text.lstrip(_WS))
        try:
            obj, end = _scan_once(text, start)
        except StopIteration:
            raise ValueError("Expecting value") from None
        except SystemError:
            # CPython 3.11's scanner builds its error from json.decoder, which is
            # not imported here; it then fails with SystemError instead.
            raise ValueError("malformed JSON") from None
        if text[end:].strip(_WS):
            raise ValueError("Extra data")
        return obj

    def dumps(obj: object) -> str:
        """Canonical JSON text: sorted keys, compact, non-ASCII kept."""
        return "".join(_encode(obj, 0))

    def dumps_plain(obj: object) -> str:
        """``json.dumps(obj)`` with its defaults."""
        return "".join(_encode_plain(obj, 0))

except ImportError:  # not CPython: the pure-Python json module is the fallback
    import json as _json_mod

    _loads = _json_mod.loads  # type: ignore[assignment]
    dumps_plain = _json_mod.dumps

    def dumps(obj: object) -> str:
        return _json_mod.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


try:
    from _sha256 import sha256 as _sha256  # type: ignore[import-not-found,unused-ignore]  # CPython <= 3.11
except ImportError:
    try:
        from _sha2 import sha256 as _sha256  # type: ignore[import-not-found,no-redef,unused-ignore]  # >= 3.12
    except ImportError:
        from hashlib import sha256 as _sha256  # type: ignore[assignment,unused-ignore]


def loads(data: str | bytes | bytearray) -> Any:
    """``json.loads``: ``bytes`` are decoded as it decodes them (UTF-8, -16 or -32)."""
    if not isinstance(data, str):
        data = data.decode(_encoding(data), "surrogatepass")
    return _loads(data)


def _encoding(b: bytes | bytearray) -> str:
    """``json.detect_encoding``: a BOM, or the zero bytes of UTF-16/32 text."""
    if b[:4] in (b"\x00\x00\xfe\xff", b"\xff\xfe\x00\x00"):
        return "utf-32"
    if b[:2] in (b"\xfe\xff", b"\xff\xfe"):
        return "utf-16"
    if b[:3] == b"\xef\xbb\xbf":
        return "utf-8-sig"
    if len(b) >= 4:
        if not b[0]:
            return "utf-16-be" if b[1] else "utf-32-be"
        if not b[1]:
            return "utf-16-le" if b[2] or b[3] else "utf-32-le"
    elif len(b) == 2:
        if not b[0]:
            return "utf-16-be"
        if not b[1]:
            return "utf-16-le"
    return "utf-8"


def canonical(obj: object) -> bytes:
    """Canonical JSON as UTF-8: what checksums and record lines are made of."""
    return dumps(obj).encode()


def sha256_hex(data: bytes) -> str:
    return str(_sha256(data).hexdigest())


def checksum(rec: Record) -> str:
    return str(_sha256(canonical({k: v for k, v in rec.items() if k != "sum"})).hexdigest())


def uuid4() -> str:
    """``str(uuid.uuid4())`` without ``uuid`` (the hooks'), at a third of its cost (a send names one)."""
    b = bytearray(urandom(16))
    b[6] = b[6] & 0x0F | 0x40
    b[8] = b[8] & 0x3F | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def iso_utc(t: float) -> str:
    """A time as UTC ISO-8601 with ``Z`` (seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def utc_words(t: float) -> str:
    """A time as people read it: ``2026-12-07 15:29:26 UTC`` (a claim's expiry in the lines agents see)."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def now_utc() -> str:
    """UTC ISO-8601 with milliseconds and ``Z``; sortable as text."""
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


def seal(fields: Record, *, seq: int, prev: str, prev_ts: str | None) -> Record:
    """Complete a record: sequence, time, chain link, tool version, checksum."""
    return _sealed(fields, seq, prev, prev_ts)[0]


def _sealed(fields: Record, seq: int, prev: str, prev_ts: str | None) -> tuple[Record, bytes]:
    """`seal`, and the record's line (`encode`) from the same JSON text: one encoding, not two.

    Canonical JSON sorts the keys, so the text without ``sum`` (what the
    checksum covers) and the line with it differ only by ``"sum":...``
    between the keys before it and the keys after it; each half is encoded
    once and the two texts are joined from them.
    """
    rec = dict(fields)
    rec.pop("sum", None)
    rec.update(seq=seq, prev=prev, tool=TOOL, ts=now_utc())
    if prev_ts is not None and rec["ts"] < prev_ts:
        rec["ts_backwards"] = True
    low = dumps({k: v for k, v in rec.items() if k < "sum"})[:-1]  # "{...", no closing brace
    high = dumps({k: v for k, v in rec.items() if k > "sum"})[1:]  # "...}", no opening brace
    lead, tail = ("," if len(low) > 1 else ""), ("," if len(high) > 1 else "")
    summ = rec["sum"] = str(_sha256((low + ("," if lead and tail else "") + high).encode()).hexdigest())
    return rec, f'{low}{lead}"sum":"{summ}"{tail}{high}\n'.encode()


def seal_next(fields: Record, tail: Record | None) -> Record:
    """Seal ``fields`` as the record after ``tail`` (None: the first of its journal); every backend chains this way."""
    return seal_next_line(fields, tail)[0]


def seal_next_line(fields: Record, tail: Record | None) -> tuple[Record, bytes]:
    """`seal_next`, and the sealed record's line (`encode`), for a writer that stores it at once."""
    if tail is None:
        return _sealed(fields, 1, "", None)
    return _sealed(fields, tail["seq"] + 1, tail["sum"], tail.get("ts"))


def encode(rec: Record) -> bytes:
    return canonical(rec) + b"\n"


class BadRecord(ValueError):
    """A line that is not a well-formed record; ``torn`` if it does not parse."""

    def __init__(self, reason: str, *, torn: bool) -> None:
        super().__init__(reason)
        self.torn = torn


def decode(line: bytes) -> Record:
    try:
        rec = loads(line)
    except ValueError:  # UnicodeDecodeError included
        raise BadRecord("line does not parse", torn=True) from None
    if not isinstance(rec, dict) or not isinstance(rec.get("seq"), int):
        raise BadRecord("not a record", torn=False)
    try:
        good = rec.get("sum") == checksum(rec)
    except UnicodeEncodeError:  # a lone surrogate escape: no writer could have summed it
        good = False
    if not good:
        raise BadRecord("checksum mismatch", torn=False)
    return rec


def peek(line: bytes) -> Record | None:
    """Parse without checking the checksum: for chain links and sequence numbers."""
    try:
        rec = loads(line)
    except ValueError:
        return None
    if isinstance(rec, dict) and isinstance(rec.get("seq"), int) and isinstance(rec.get("sum"), str):
        return rec
    return None
