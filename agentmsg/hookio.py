"""The on-disk format, read and appended with a bare interpreter, for the hooks.

The hooks run on every prompt as ``python3 -I -S``.  Importing ``json``,
``re``, ``pathlib``, ``dataclasses``, ``hashlib``, ``uuid`` or ``typing``
costs several milliseconds each on a bare interpreter, and importing
``store.py`` costs about six times the interpreter's own start-up
(docs/BENCHMARKS.md, "Hook").  So this module uses only ``os``, ``fcntl``,
``time`` and the C halves of ``json`` (``_json``) and sha256 (``_sha256``),
and works on plain ``str`` paths.

It reproduces, byte for byte, the pieces of the core modules the hooks need;
``tests/test_hookio.py`` checks each one against the original:

========================  ==================================================
here                      original
========================  ==================================================
``canonical/checksum``    ``records.canonical`` / ``records.checksum``
``decode/peek``           ``records.decode`` / ``records.peek``
``append_records``        ``Journal.append`` (seal, torn-tail newline,
                          fsync, directory fsync, ``.head`` sidecar), for
                          one or more records with one fsync
``index_receipts``        ``FileStore._index_receipt``
``scan``                  ``Journal.scan`` (torn and damaged lines skipped)
``atomic_write``          ``fsio.atomic_write``
``locked``                ``fsio.locked`` (the same ``flock``)
``resolve_root``          ``paths.resolve_root`` without ``--root``
``pin_key``               ``paths.pin_key``
``collab_dir``            ``FileStore._cdir`` (no symlinked subdirectory)
``registry/bindings``     ``FileStore.registry`` / ``FileStore.bindings``
``pending``               ``FileStore.inbox``
========================  ==================================================

Anything unusual (a damaged ``registry.yaml``) falls back to the full store.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time

from . import TOOL

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

    Record = dict[str, Any]

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_WS = " \t\n\r"

try:  # the C accelerators behind json.loads/json.dumps, without json's re-based module
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

    _scan_once = _make_scanner(_ScanContext())

    def _default(obj: object) -> object:
        raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")

    # json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    _encode = _make_encoder(None, _default, _encode_str, None, ":", ",", True, False, True)
    # json.dumps(obj): the defaults, for derived files the store writes that way
    _encode_plain = _make_encoder(None, _default, _encode_ascii, None, ": ", ", ", False, False, True)

    def loads(text: str) -> Any:
        """``json.loads`` for a ``str``."""
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

    loads = _json_mod.loads
    dumps_plain = _json_mod.dumps

    def dumps(obj: object) -> str:
        return _json_mod.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


try:
    from _sha256 import sha256 as _sha256  # CPython <= 3.11
except ImportError:
    try:
        from _sha2 import sha256 as _sha256  # type: ignore[import-not-found,no-redef]  # CPython >= 3.12
    except ImportError:
        from hashlib import sha256 as _sha256  # type: ignore[assignment]


class HookIOError(Exception):
    """Something on disk is not as the store writes it; the hook fails open."""


class LockTimeout(HookIOError):
    pass


class BadLine(ValueError):
    def __init__(self, reason: str, *, torn: bool) -> None:
        super().__init__(reason)
        self.torn = torn


# ---- records ---------------------------------------------------------------


def canonical(obj: object) -> bytes:
    return dumps(obj).encode()


def checksum(rec: Record) -> str:
    return _sha256(canonical({k: v for k, v in rec.items() if k != "sum"})).hexdigest()


def now_utc() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


def _text(line: bytes) -> str:
    if line[:3] == b"\xef\xbb\xbf":  # json.loads(bytes) accepts a UTF-8 BOM
        line = line[3:]
    return line.decode("utf-8", "surrogatepass")


def decode(line: bytes) -> Record:
    """A checked record, as ``records.decode``."""
    try:
        rec = loads(_text(line))
    except (ValueError, UnicodeDecodeError):
        raise BadLine("line does not parse", torn=True) from None
    if not isinstance(rec, dict) or not isinstance(rec.get("seq"), int):
        raise BadLine("not a record", torn=False)
    try:
        good = rec.get("sum") == checksum(rec)
    except (UnicodeEncodeError, TypeError):
        good = False
    if not good:
        raise BadLine("checksum mismatch", torn=False)
    return rec


def peek(line: bytes) -> Record | None:
    try:
        rec = loads(_text(line))
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(rec, dict) and isinstance(rec.get("seq"), int) and isinstance(rec.get("sum"), str):
        return rec
    return None


def seal(fields: Record, tail: Record | None) -> Record:
    rec = dict(fields)
    rec.update(seq=tail["seq"] + 1 if tail else 1, prev=tail["sum"] if tail else "", tool=TOOL, ts=now_utc())
    prev_ts = tail.get("ts") if tail else None
    if prev_ts is not None and rec["ts"] < prev_ts:
        rec["ts_backwards"] = True
    rec["sum"] = checksum(rec)
    return rec


# ---- files ---------------------------------------------------------------------


def _open(path: str, flags: int, mode: int = 0o600) -> int:
    try:
        return os.open(path, flags | _NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise HookIOError(f"{path} is a symlink; refusing to follow it") from None
        raise


def read_file(path: str, offset: int = 0) -> bytes | None:
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        chunks = []
        while True:
            chunk = os.pread(fd, 1 << 20, offset)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            offset += len(chunk)
    finally:
        os.close(fd)


def size(path: str) -> int:
    try:
        return os.lstat(path).st_size
    except FileNotFoundError:
        return 0


def existing_dir(root: str, *parts: str) -> str | None:
    """``root/parts`` if it exists; a symlinked component is refused."""
    path = root
    for part in parts:
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        if not _isdir(st.st_mode):
            raise HookIOError(f"{path} is a symlink or not a directory")
    return path


def ensure_dir(root: str, *parts: str) -> str:
    path = root
    for part in parts:
        path = os.path.join(path, part)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        if not _isdir(os.lstat(path).st_mode):
            raise HookIOError(f"{path} is a symlink or not a directory")
    return path


def _isdir(mode: int) -> bool:
    return mode & 0o170000 == 0o040000


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, *, durable: bool = True) -> None:
    head, name = os.path.split(path)
    tmp = os.path.join(head, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = _open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        _write_all(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(head)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def append_line(path: str, line: bytes) -> None:
    """Best-effort, not durable: for ``hooks.log``."""
    fd = _open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        _write_all(fd, line)
    finally:
        os.close(fd)


class locked:  # named like fsio.locked, used the same way
    """``flock`` on a lock file that is never deleted, waiting at most ``timeout``."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path, self.timeout, self.fd = path, timeout, -1

    def __enter__(self) -> locked:
        self.fd = _open(self.path, os.O_RDWR | os.O_CREAT)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    self.__exit__()
                    raise
            if time.monotonic() >= deadline:
                self.__exit__()
                raise LockTimeout(f"lock {self.path} held for more than {self.timeout:g}s")
            time.sleep(0.005)

    def __exit__(self, *_exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


# ---- journals ----------------------------------------------------------------


def scan(path: str, offset: int = 0, problems: list[str] | None = None) -> Iterator[tuple[int, Record, int]]:
    """``(offset, record, end)`` for each valid, newline-terminated record."""
    data = read_file(path, offset)
    if not data:
        return
    pos = offset
    start = 0
    while True:
        nl = data.find(b"\n", start)
        if nl < 0:
            if start < len(data) and problems is not None:
                problems.append(f"{path}@{pos}: unterminated last line")
            return
        line = data[start:nl]
        end = pos + len(line) + 1
        if line:
            try:
                yield pos, decode(line), end
            except BadLine as bad:
                if problems is not None:
                    problems.append(f"{path}@{pos}: {bad}")
        start, pos = nl + 1, end


def tail(path: str) -> Record | None:
    """The last record that peeks valid, as ``Journal.last``."""
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        pos = os.fstat(fd).st_size
        buf = b""
        step = 4096
        while pos > 0:
            step = min(step * 2, 1 << 16, pos)
            pos -= step
            parts = (os.pread(fd, step, pos) + buf).split(b"\n")
            buf = parts[0]
            for part in reversed(parts[1:]):
                rec = peek(part) if part else None
                if rec is not None:
                    return rec
        return peek(buf) if buf else None
    finally:
        os.close(fd)


def append_records(path: str, fields: list[Record], *, durable: bool = True,
                   head: bool = True) -> list[tuple[int, Record]]:
    """Seal and append records with one write (and one fsync when ``durable``); returns (offset, record)s.

    The caller holds the collaboration's write lock, as for ``Journal.append``.
    ``head=False`` leaves the ``.head`` sidecar behind, which ``verify``
    accepts (it may lag the file, never lead it); the caller's next append
    brings it up to date.
    """
    prev = tail(path)
    sealed = []
    for item in fields:
        prev = seal(item, prev)
        sealed.append(prev)
    data = b"".join(canonical(rec) + b"\n" for rec in sealed)
    fd = _open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        end = os.fstat(fd).st_size
        at = end
        if end and os.pread(fd, 1, end - 1) != b"\n":
            data = b"\n" + data
            at += 1
        _write_all(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    folder, name = os.path.split(path)
    if not end and durable:
        fsync_dir(folder)
    if head:
        last = sealed[-1]
        atomic_write(os.path.join(folder, f".{name}.head"), canonical({"seq": last["seq"], "sum": last["sum"]}),
                     durable=False)
    placed = []
    for rec in sealed:
        placed.append((at, rec))
        at += len(canonical(rec)) + 1
    return placed


def index_receipts(base: str, placed: list[tuple[int, Record]]) -> None:
    """Point each message's id index entry at its new receipt, as ``FileStore._index_receipt``."""
    for offset, rec in placed:
        mid = rec.get("message")
        if not is_uuid(mid):
            continue
        path = os.path.join(base, "ids", mid[:2], f"{mid}.json")
        raw = read_file(path)
        try:
            doc = loads(raw.decode()) if raw is not None else None
        except (UnicodeDecodeError, ValueError):
            doc = None  # a damaged derived entry: the receipt itself is stored; showing goes on
        if not isinstance(doc, dict):
            continue
        doc.setdefault("receipts", []).append(offset)
        atomic_write(path, dumps_plain(doc).encode(), durable=False)


# ---- names -------------------------------------------------------------------

_HEX = frozenset("0123456789abcdef")
_ALIAS_REST = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")
_SESSION_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_SESSION_REST = _SESSION_FIRST | frozenset("._@-")


def is_uuid(value: object) -> bool:
    """Canonical lowercase UUID text, as ``model.as_uuid`` returns it."""
    return (isinstance(value, str) and len(value) == 36
            and all(value[i] == "-" for i in (8, 13, 18, 23))
            and set(value.replace("-", "")) <= _HEX and value.count("-") == 4)


def is_alias(value: object) -> bool:
    return (isinstance(value, str) and 0 < len(value) <= 32 and "a" <= value[0] <= "z"
            and set(value) <= _ALIAS_REST)


def is_session(value: object) -> bool:
    return (isinstance(value, str) and 0 < len(value) <= 128 and value[0] in _SESSION_FIRST
            and set(value) <= _SESSION_REST)


def uuid4() -> str:
    b = bytearray(os.urandom(16))
    b[6] = b[6] & 0x0F | 0x40
    b[8] = b[8] & 0x3F | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def pin_key(pin: str) -> str:
    return _sha256(pin.encode()).hexdigest()[:32]


def resolve_root(env: Mapping[str, str]) -> str:
    """``paths.resolve_root(None, env)`` as a ``str``; ValueError when unresolvable."""
    for var, suffix in (("AGENTMSG_HOME", ()), ("XDG_STATE_HOME", ("agentmsg",)),
                        ("HOME", (".local", "state", "agentmsg"))):
        value = env.get(var)
        if value:
            path = os.path.expanduser(value)
            if not os.path.isabs(path):
                raise ValueError(f"{var} must be an absolute path")
            return os.path.normpath(os.path.join(path, *suffix))
    raise ValueError("cannot resolve the state root: set AGENTMSG_HOME or HOME")


# ---- the store, read only --------------------------------------------------------


COLLAB_SUBDIRS = ("inbox", "receipts", "state", "ids", "transcripts")  # store.COLLAB_SUBDIRS


def collab_dir(root: str, collab: str) -> str | None:
    """The collaboration's directory; a symlinked one, or subdirectory, is refused."""
    if not is_uuid(collab):
        return None
    base = existing_dir(root, "collabs", collab)
    if base is None or not os.path.exists(os.path.join(base, "collab.jsonl")):
        return None
    for sub in COLLAB_SUBDIRS:
        existing_dir(base, sub)
    return base


def registry(root: str, collab: str) -> dict[str, Any] | None:
    """The registry document (``model.registry_document`` shape), or None."""
    base = collab_dir(root, collab)
    if base is None:
        return None
    raw = read_file(os.path.join(base, "registry.yaml"))
    if raw is not None:
        try:
            doc = loads(b"\n".join(ln for ln in raw.splitlines() if not ln.startswith(b"#")).decode())
            if isinstance(doc, dict) and isinstance(doc.get("participants"), dict):
                return doc
        except (ValueError, UnicodeDecodeError):
            pass
    return _registry_from_records(root, collab)


def _registry_from_records(root: str, collab: str) -> dict[str, Any]:
    """A damaged derived file: replay the records with the full store (slow, rare)."""
    from pathlib import Path

    from . import model
    from .store import FileStore

    return model.registry_document(FileStore(Path(root)).registry(collab))


def holder(doc: dict[str, Any], alias: str) -> str | None:
    """The pin actively holding ``alias``, if any."""
    p = doc["participants"].get(alias)
    return p["pin"] if isinstance(p, dict) and p.get("active") else None


def bindings(root: str, pin: str) -> list[tuple[str, str, dict[str, Any]]]:
    """Active ``(collab, alias, registry)`` of a pin, confirmed against each registry."""
    base = existing_dir(root, "pins")
    raw = read_file(os.path.join(base, f"{pin_key(pin)}.json")) if base else None
    if raw is None:
        return []
    found = []
    for entry in loads(raw.decode())["bindings"]:
        collab, alias = entry["collab"], entry["alias"]
        if not (is_uuid(collab) and is_alias(alias)):
            raise HookIOError(f"pin index entry names an invalid collaboration or alias: {entry!r:.80}")
        doc = registry(root, collab)
        if doc is not None and doc.get("closed_at") is None and holder(doc, alias) == pin:
            found.append((collab, alias, doc))
    return found


def cursor(base: str, alias: str) -> dict[str, Any]:
    """The store's read cursor; anything malformed reads as "from the start"."""
    raw = read_file(os.path.join(base, "state", f"{alias}.json"))
    try:
        cur = loads(raw.decode()) if raw else None
    except (ValueError, UnicodeDecodeError):
        cur = None
    if (isinstance(cur, dict) and type(cur.get("low")) is int and type(cur.get("rcpt")) is int
            and isinstance(cur.get("acked"), list) and cur["low"] >= 0 and cur["rcpt"] >= 0):
        return cur
    return {"low": 0, "rcpt": 0, "acked": []}


class ReceiptView:
    """What the hook remembers of the receipts: acks and retries seen so far.

    ``FileStore.inbox`` rescans every receipt after the cursor's ``rcpt``; the
    hook's own presented/complete receipts pile up there between acks, so the
    hook keeps its place (``upto``) and reads only what is new.  ``since``
    is where it started: if the store's cursor ever moves below it (a reset
    cursor), the view starts again from there.
    """

    __slots__ = ("acks", "retries", "since", "upto")

    def __init__(self, doc: object, rcpt: int, end: int) -> None:
        ok = (isinstance(doc, dict) and type(doc.get("since")) is int and type(doc.get("upto")) is int
              and isinstance(doc.get("acks"), list) and rcpt >= doc["since"] and doc["upto"] <= end)
        self.since: int = doc["since"] if ok else rcpt  # type: ignore[index]
        self.upto: int = doc["upto"] if ok else rcpt  # type: ignore[index]
        self.acks: set[str] = set(doc["acks"]) if ok else set()  # type: ignore[index]
        self.retries: list[str] = []

    def update(self, path: str) -> None:
        for _pos, rec, end in scan(path, self.upto):
            kind = rec.get("type")
            if kind == "ack":
                self.acks.add(rec.get("message"))
            elif kind == "retry":
                self.retries.append(rec.get("message"))
            self.upto = end

    def document(self, keep: set[str]) -> dict[str, Any]:
        return {"since": self.since, "upto": self.upto, "acks": sorted(self.acks & keep)}


def pending(base: str, alias: str, view_doc: object = None) -> tuple[list[Record], ReceiptView, list[str]]:
    """Unacknowledged messages of ``alias`` (as records, oldest first), as ``FileStore.inbox``."""
    cur = cursor(base, alias)
    rpath = os.path.join(base, "receipts", f"{alias}.jsonl")
    view = ReceiptView(view_doc, cur["rcpt"], size(rpath))
    view.update(rpath)
    acked = view.acks | set(cur["acked"])
    problems: list[str] = []
    seen: set[str] = set()
    msgs = []
    for _pos, rec, _end in scan(os.path.join(base, "inbox", f"{alias}.jsonl"), cur["low"], problems):
        seen.add(rec["id"])
        if rec["id"] not in acked:
            msgs.append(rec)
    view.acks &= seen
    return msgs, view, problems
