"""Safe file I/O under the state root.

Rules that hold for every path built here: components are created 0700
(files 0600), no component may be a symlink (``O_NOFOLLOW`` plus ``lstat``),
every file is opened ``O_NONBLOCK`` and must be a regular file (a planted
FIFO, socket or device is refused, never waited on), an append never writes
through a file with other hard links, a failed append is cut back to the
size it had (no torn record), appends are fsynced before returning (unless
the caller marks the data expendable), small state files are replaced
atomically, and a new file's directory is fsynced so the name is durable.

Paths are ``str`` or ``pathlib.Path``; a function that builds a path returns
the kind it was given.  The hooks use ``str``: this module imports neither
``pathlib`` nor ``typing``, and ``errors``/``fcntl`` only when it raises or
locks (see records.py for why).
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import IO, Any, TypeVar

    from agentmsg.errors import UnsafePath

    P = TypeVar("P", str, Path)
    StrPath = str | os.PathLike[str]
    LockFn = Callable[[IO[Any]], None]

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # O_NONBLOCK: a planted FIFO never blocks the open
_NOT_REGULAR = "is not a regular file (a FIFO, socket, device or directory); refusing to use it"
CHUNK = 1 << 16


# The CLI swaps in portalocker (see cli/__init__); the hook path keeps plain
# flock, which is what portalocker uses on POSIX, so the two exclude each other.
def _flock_nb(fh: IO[Any]) -> None:
    import fcntl  # on first lock: most hook runs take none

    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


lock_nonblocking: LockFn = _flock_nb
wait_notice: Callable[[str], None] | None = None


def join(root: P, *parts: str) -> P:
    """``root/parts...``, as the same kind of path as ``root``."""
    return os.path.join(root, *parts) if isinstance(root, str) else root.joinpath(*parts)


def sibling(path: P, name: str) -> P:
    """The file called ``name`` in ``path``'s directory, as the same kind of path."""
    return os.path.join(os.path.dirname(path), name) if isinstance(path, str) else path.with_name(name)


def _parent(path: StrPath) -> str:
    return os.path.dirname(os.path.normpath(os.fspath(path))) or "."


_LINK_INSIDE = "is a symlink; refusing to follow it inside the state root"


def _unsafe(path: StrPath, what: str = _LINK_INSIDE) -> UnsafePath:
    # errors.py is imported when an error is raised, not on every hook run (it costs ~0.3 ms bare)
    from agentmsg.errors import UnsafePath

    return UnsafePath(f"{os.fspath(path)} {what}")


def ensure_dir(root: P, *parts: str) -> P:
    """Create ``root/parts...`` as 0700 dirs, refusing any symlinked component."""
    path = root
    for part in ("", *parts):
        if part:
            path = join(path, part)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if not part:  # the root itself: its parents may be missing too (fresh ~/.local/state)
                os.makedirs(_parent(path), 0o700, exist_ok=True)
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                pass
            st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            raise _unsafe(path)
        if not stat.S_ISDIR(st.st_mode):
            raise _unsafe(path, "is not a directory")
    return path


def subdir(parent: P, name: str) -> P:
    """``parent/name`` created 0700 if missing, refusing a symlink; ``parent`` itself is not checked again."""
    found = existing_dir(parent, name)
    if found is None:
        try:
            os.mkdir(join(parent, name), 0o700)
        except FileExistsError:
            pass
        found = existing_dir(parent, name)
        if found is None:
            raise FileNotFoundError(errno.ENOENT, "vanished after mkdir", os.fspath(join(parent, name)))
    return found


def existing_dir(root: P, *parts: str) -> P | None:
    """Like ensure_dir but never creates: None when absent."""
    path = root
    for part in parts:
        path = join(path, part)
        if dir_stat(path) is None:
            return None
    return path


def dir_stat(path: StrPath) -> os.stat_result | None:
    """``lstat`` of a directory that must not be a link; None when absent (`existing_dir`, one component)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise _unsafe(path)
    if not stat.S_ISDIR(st.st_mode):
        raise _unsafe(path, "is not a directory")
    return st


#: How long a directory must have stood unchanged before `dir_key` vouches for it.
SETTLED_NS = 2_000_000_000


def dir_key(st: os.stat_result) -> tuple[int, int, int, int] | None:
    """What a directory's ``lstat`` says about its entries: a cache of them stays true while this is equal.

    Creating, removing or renaming an entry (swapping a subdirectory for a
    link, say) sets the directory's mtime and ctime, and no user can set the
    ctime.  But timestamps are coarse (a clock tick; a second or two on some
    file systems), so a change in the same tick as the last one would leave
    them equal: a directory changed within `SETTLED_NS` gets no key (the
    racy-git rule).  Call it before reading what the key is to stand for.
    """
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < SETTLED_NS:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns


def refuse_link(path: StrPath) -> None:
    """Raise unless ``path`` is absent or a regular file with one name.

    Checked before a write that must not fail later: a symlink, a FIFO (or
    other non-regular file) or a hard link to a file elsewhere is refused.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise _unsafe(path)
    _check_regular(path, st, write=True)


def _check_regular(path: StrPath, st: os.stat_result, *, write: bool) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise _unsafe(path, _NOT_REGULAR)
    if write and st.st_nlink > 1:
        raise _unsafe(path, f"has {st.st_nlink} hard links; refusing to write through it")


def _open(path: StrPath, flags: int, mode: int = 0o600, *, write: bool = False) -> int:
    """``os.open`` that refuses symlinks and anything but a regular file (with one name, for ``write``)."""
    return _open_stat(path, flags, mode, write=write)[0]


def _open_stat(path: StrPath, flags: int, mode: int = 0o600, *, write: bool = False,
               link: str = "is a symlink; refusing to follow it") -> tuple[int, os.stat_result]:
    """`_open`, also returning the ``fstat`` it checked (a caller needing the size asks no second time)."""
    try:
        fd = os.open(path, flags | _NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _unsafe(path, link) from None
        if exc.errno in (errno.ENXIO, errno.EISDIR, errno.ENODEV, errno.EOPNOTSUPP):  # a socket, a directory
            raise _unsafe(path, _NOT_REGULAR) from None
        raise
    try:
        st = os.fstat(fd)
        _check_regular(path, st, write=write)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_regular(path: StrPath) -> tuple[int, os.stat_result]:
    """A read-only descriptor on a regular file (no link, no FIFO) and its ``fstat``; the caller closes it."""
    return _open_stat(path, os.O_RDONLY)


def fsync_dir(path: StrPath) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def append_entries(path: StrPath, data: bytes, *, create: bool = True) -> bool:
    """Append to a derived log whose entries carry their own leading newline (no torn-line check, no fsync).

    The cheapest checked write there is: one open (refusing a link, a FIFO or a hard link), one write.
    ``create=False``: a missing file is left alone (False).
    """
    try:
        fd = _open(path, os.O_WRONLY | os.O_APPEND | (os.O_CREAT if create else 0), write=True)
    except FileNotFoundError:
        if create:
            raise
        return False
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)
    return True


def append(path: StrPath, data: bytes, *, durable: bool = True, create: bool = True,
           first: Callable[[int], None] | None = None,
           written: Callable[[os.stat_result], None] | None = None, fd: int | None = None,
           meanwhile: Callable[[], None] | None = None) -> int | None:
    """Append ``data``; returns the offset it was written at.

    A torn last line (no trailing newline) is terminated first, so it stays
    on disk as evidence and cannot merge with the new record.  ``durable``
    (the default) fsyncs the file, and its directory when the file is new,
    before returning; ``durable=False`` is for data whose loss in a crash
    is harmless.  ``create=False``: a missing or empty file is left alone
    and None returned.  ``first(offset)`` runs before anything is written
    (an index entry as a reservation); ``written(stat)`` after the write,
    with the file's new ``fstat`` (a tail cache keyed on it). One open
    serves all of it: each system call costs as much as a tenth of an fsync.
    ``fd``: the file, already open (`open_append`); it is checked as an open
    is, and left open.  ``meanwhile()`` runs after the write and before the
    fsync, while the data is being written back (`start_writeback`): work the
    caller would do after the fsync anyway, that writes nothing.  If it
    raises, the data is cut back as when the fsync fails.
    """
    kept = fd is not None
    if fd is not None:
        st = _kept_stat(path, fd)
    else:
        try:
            fd, st = _open_stat(path, os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0), write=True)
        except FileNotFoundError:
            if create:
                raise
            return None
    try:
        at = _append_fd(fd, st, data, durable=durable, create=create, first=first, written=written,
                        meanwhile=meanwhile)
    finally:
        if not kept:
            os.close(fd)
    if at is not None and not st.st_size and durable:  # a new file: its name made durable too
        fsync_dir(_parent(path))
    return at


#: ``posix_fadvise`` where it starts write-back (Linux); elsewhere the fsync alone writes the data.
_FADVISE = getattr(os, "posix_fadvise", None) if sys.platform.startswith("linux") else None
_PAGE = 4096  # the smallest page size: a range under it holds no whole page of any larger size either


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Start writing ``length`` bytes at ``offset`` back to the disk now, without waiting for it.

    The fsync that follows then finds the data written, or on its way, and
    only waits for it and commits: work done in between overlaps the write
    (about a third of an fsync here; bench/store_bench.py).  Python has no
    ``sync_file_range``; on Linux ``POSIX_FADV_DONTNEED`` starts the same
    write-back, as PostgreSQL's ``pg_flush_data`` uses it where that call is
    missing.  It also drops whole clean pages in its range from the cache, so
    the range stops one byte short of the end and is kept under a page: it
    holds no whole page, and the next append's read of the last byte stays
    in memory.  A longer write is left to the fsync.  Only a hint: a failure
    changes nothing.
    """
    if _FADVISE is None or not 1 < length < _PAGE:
        return
    try:
        _FADVISE(fd, offset, length - 1, os.POSIX_FADV_DONTNEED)
    except OSError:
        pass


def _kept_stat(path: StrPath, fd: int) -> os.stat_result:
    """The ``fstat`` of a descriptor a caller kept open on ``path``, checked as `_open_stat` checks an open."""
    st = os.fstat(fd)
    _check_regular(path, st, write=True)
    return st


def open_append(path: StrPath) -> int | None:
    """A descriptor to `append` through, for a caller that keeps it open; None when the file is missing."""
    try:
        return _open(path, os.O_RDWR | os.O_APPEND, write=True)
    except FileNotFoundError:
        return None


def _append_fd(fd: int, st: os.stat_result, data: bytes, *, durable: bool, create: bool,
               first: Callable[[int], None] | None = None,
               written: Callable[[os.stat_result], None] | None = None,
               meanwhile: Callable[[], None] | None = None) -> int | None:
    """`append` on a descriptor opened (and checked) as it opens one; ``st`` is that open's ``fstat``."""
    size = before = st.st_size
    if not size and not create:
        return None
    if size and os.pread(fd, 1, size - 1) != b"\n":
        data = b"\n" + data
        size += 1
    if first is not None:
        first(size)
    try:
        _write_all(fd, data)
        if meanwhile is not None:
            if durable:
                start_writeback(fd, before, len(data))  # where the write began: a torn tail's newline too
            meanwhile()
        if durable:
            os.fsync(fd)
    except BaseException:
        _cut_back(fd, before)
        raise
    if written is not None:
        try:
            st = os.fstat(fd)
        except OSError:
            pass  # the data is stored: a cache that is not primed is only slower
        else:
            written(st)
    return size


class Appender:
    """``append(path, data, durable=False, create=False)`` in two steps: open and check now, write later.

    The open refuses what `refuse_link` refuses, in its words (a link, a FIFO
    or other non-regular file, a hard link: UnsafePath), so a caller can refuse them
    before it stores anything and then write with no second lookup.  Any
    other OSError of the open (the file is missing, say) is held and
    `append` acts on it as the one-step append would.  One append each.
    """

    __slots__ = ("_error", "_fd", "_st", "path")

    def __init__(self, path: str, fd: int | None = None) -> None:
        """``fd``: the file, already open (kept by the caller): checked as the open would check it."""
        self.path = path
        self._fd: int | None = None
        self._st: os.stat_result | None = None
        self._error: OSError | None = None
        try:
            if fd is None:
                self._fd, self._st = _open_stat(path, os.O_RDWR | os.O_APPEND, write=True, link=_LINK_INSIDE)
            else:
                try:
                    self._st = _kept_stat(path, fd)
                except BaseException:
                    os.close(fd)
                    raise
                self._fd = fd
        except OSError as exc:
            self._error = exc

    def append(self, data: bytes) -> int | None:
        """The offset ``data`` was written at (not fsynced); None when the file was missing or empty."""
        if self._fd is None or self._st is None:
            if isinstance(self._error, FileNotFoundError):
                return None
            assert self._error is not None
            raise self._error
        return _append_fd(self._fd, self._st, data, durable=False, create=False)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def detach(self) -> int | None:
        """The descriptor, for the caller to keep (None if the open failed); `close` then does nothing."""
        fd, self._fd = self._fd, None
        return fd


def _cut_back(fd: int, size: int) -> None:
    """Undo a failed or partial append (full disk, I/O error, file size limit): no torn record stays."""
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    except OSError:
        pass  # the disk is failing; a reader skips a torn last line and the next writer terminates it


def next_offset(path: StrPath) -> int:
    """Where ``append`` will put its data (a torn tail gets a newline first)."""
    try:
        fd, st = _open_stat(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        size = st.st_size
        return size + 1 if size and os.pread(fd, 1, size - 1) != b"\n" else size
    finally:
        os.close(fd)


def atomic_write(path: StrPath, data: bytes, *, durable: bool = True) -> None:
    head, name = os.path.split(os.fspath(path))
    tmp = os.path.join(head, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = _open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, write=True)
    try:
        try:
            _write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)  # a link, FIFO or hard link at ``path`` is replaced, never written through
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        fsync_dir(head or ".")


def read_bytes(path: StrPath, offset: int = 0) -> bytes | None:
    """The file's bytes from ``offset`` on; None when it does not exist."""
    found = read_stat(path, offset)
    return found[0] if found is not None else None


def read_stat(path: StrPath, offset: int = 0) -> tuple[bytes, os.stat_result] | None:
    """`read_bytes`, with the ``fstat`` its open checked (what the file was when it was read)."""
    try:
        fd, st = _open_stat(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        chunks = []
        want = max(st.st_size - offset, 0) + 1  # one read, unless the file grows meanwhile
        while True:
            chunk = os.pread(fd, want, offset)
            chunks.append(chunk)
            if len(chunk) < want:
                return b"".join(chunks), st
            offset += len(chunk)
            want = CHUNK
    finally:
        os.close(fd)


def file_size(path: StrPath) -> int:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0
    if stat.S_ISLNK(st.st_mode):
        raise _unsafe(path, "is a symlink; refusing to follow it")
    _check_regular(path, st, write=False)
    return st.st_size


def lines(path: StrPath, offset: int = 0) -> Iterator[tuple[int, bytes, bool]]:
    """Yield ``(offset, line, complete)`` from ``offset``; the last may be torn."""
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    with os.fdopen(fd, "rb") as fh:
        fh.seek(offset)
        pos = offset
        for raw in fh:
            complete = raw.endswith(b"\n")
            yield pos, raw[:-1] if complete else raw, complete
            pos += len(raw)


def last_lines(path: StrPath) -> Iterator[bytes]:
    """Complete lines from the end backwards, reading only what is needed."""
    try:
        fd, st = _open_stat(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        pos = st.st_size
        buf = b""
        step = 4096
        while pos > 0:
            step = min(step * 2, CHUNK, pos)
            pos -= step
            parts = (os.pread(fd, step, pos) + buf).split(b"\n")
            buf = parts[0]
            for part in reversed(parts[1:]):
                if part:
                    yield part
        if buf:
            yield buf
    finally:
        os.close(fd)


class _Descriptor:
    """A lock file's descriptor, with the two methods `locked` and `_flock_nb` use."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        os.close(self.fd)


class locked:  # lower case: used like the function it replaced, ``with fsio.locked(path, timeout):``
    """Exclusive lock on a lock file that is never deleted, waiting at most ``timeout`` seconds.

    Raises StoreFailed when the lock stays held that long.
    """

    __slots__ = ("_fd", "_fh", "create_if", "path", "timeout")

    def __init__(self, path: StrPath, timeout: float, fd: int | None = None,
                 create_if: Callable[[], bool] | None = None) -> None:
        """``fd``: the lock file, already open (`unlock_keep` gave it back), or None to open it.

        ``create_if``: a missing lock file is created only if this says so
        (else FileNotFoundError), so looking into a directory that is not what
        the caller wants leaves nothing behind; by default it is created.
        """
        self.path, self.timeout, self.create_if = path, timeout, create_if
        self._fh: IO[Any] | None = None
        self._fd = fd

    def _open(self) -> int:
        if self.create_if is None:
            return _open(self.path, os.O_RDWR | os.O_CREAT)
        try:
            return _open(self.path, os.O_RDWR)
        except FileNotFoundError:
            if not self.create_if():
                raise
        return _open(self.path, os.O_RDWR | os.O_CREAT)

    def __enter__(self) -> None:
        fd = self._fd if self._fd is not None else self._open()
        self._fd = None
        # flock needs only the descriptor; a file object (which portalocker wants) costs an fstat,
        # and a buffered one an ioctl and three lseeks more, on every transaction.
        fh: Any = _Descriptor(fd) if lock_nonblocking is _flock_nb else os.fdopen(fd, "r+b", buffering=0)
        try:
            deadline = time.monotonic() + self.timeout
            told = False
            while True:
                try:
                    lock_nonblocking(fh)
                    break
                except Exception as exc:  # portalocker raises its own exception types
                    if not _is_contention(exc):
                        raise
                if time.monotonic() >= deadline:
                    from agentmsg.errors import StoreFailed

                    raise StoreFailed(f"lock {os.fspath(self.path)} held for more than {self.timeout:g}s; "
                                      "nothing was written")
                if not told and wait_notice and time.monotonic() > deadline - self.timeout + 1:
                    wait_notice(f"waiting for lock {os.fspath(self.path)} ...")
                    told = True
                time.sleep(0.005)
        except BaseException:
            fh.close()
            raise
        self._fh = fh

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def unlock_keep(self) -> int | None:
        """Release the lock but keep its descriptor open, for the next `locked` of this file (None: closed).

        Only plain flock's descriptor is kept (portalocker's file objects are closed as by ``__exit__``).
        """
        fh, self._fh = self._fh, None
        if fh is None:
            return None
        if not isinstance(fh, _Descriptor):
            fh.close()
            return None
        import fcntl

        try:
            fcntl.flock(fh.fd, fcntl.LOCK_UN)
        except OSError:
            fh.close()
            return None
        return fh.fd


def held(lock_path: StrPath) -> bool:
    """Whether a process holds ``lock_path`` (a non-blocking ``flock`` probe: a free lock is taken and released
    at once): the one "is it running?" probe of agentmsg's processes (``runtime.spawn.running``).  A lock file
    that does not exist is held by nobody; a lock that cannot be probed counts as held, so nobody starts a second
    process on a guess."""
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        import fcntl

        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        return False
    finally:
        os.close(fd)  # closing releases a lock taken just now


def _is_contention(exc: BaseException) -> bool:
    if isinstance(exc, BlockingIOError):
        return True
    if isinstance(exc, OSError) and exc.errno in (errno.EAGAIN, errno.EACCES):
        return True
    # portalocker wraps contention in its own AlreadyLocked/LockException
    return type(exc).__name__ in ("AlreadyLocked", "LockException")


def warn(message: str) -> None:
    sys.stderr.write(message + "\n")


def append_raw(path: StrPath, data: bytes) -> None:
    """Append to a binary derived file (no record framing, not fsynced)."""
    fd = _open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


class LineReader:
    """One open file for the lines at several known offsets: one ``open`` instead of one per line."""

    __slots__ = ("fd",)

    def __init__(self, path: StrPath) -> None:
        try:
            self.fd: int | None = _open(path, os.O_RDONLY)
        except FileNotFoundError:
            self.fd = None

    def line_at(self, offset: int) -> tuple[bytes, bool] | None:
        """``(line, complete)`` starting exactly at ``offset``; None past the end or with no file."""
        if self.fd is None:
            return None
        buf, pos = b"", offset
        while True:
            chunk = os.pread(self.fd, 4096, pos)
            if not chunk:
                return (buf, False) if buf else None
            cut = chunk.find(b"\n")
            if cut >= 0:
                return buf + chunk[:cut], True
            buf += chunk
            pos += len(chunk)

    def read_at(self, offset: int, size: int) -> bytes | None:
        return os.pread(self.fd, size, offset) if self.fd is not None else None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> LineReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_bytes_at(path: StrPath, offset: int, size: int) -> bytes | None:
    """``size`` bytes at ``offset`` (fewer at the end); None when the file does not exist."""
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        return os.pread(fd, size, offset)
    finally:
        os.close(fd)


def overwrite(path: StrPath, data: bytes, *, fd: int | None = None) -> None:
    """Replace a small derived file's bytes in place (no rename, not fsynced).

    Cheaper than ``atomic_write`` on ext4, where renaming over an existing
    file forces a data flush.  For files that are checked when read (a torn
    write reads as damaged and is rebuilt) and written under a lock.
    ``fd``: the file, already open (`open_overwrite`): checked as the open
    would check it, and left open.
    """
    if fd is not None:
        _overwrite_fd(fd, _kept_stat(path, fd), data)
        return
    fd, st = _open_stat(path, os.O_WRONLY | os.O_CREAT, write=True)
    try:
        _overwrite_fd(fd, st, data)
    finally:
        os.close(fd)


def open_overwrite(path: StrPath) -> int:
    """A descriptor to `overwrite` through, for a caller that keeps it open (created if missing)."""
    return _open(path, os.O_WRONLY | os.O_CREAT, write=True)


def _overwrite_fd(fd: int, st: os.stat_result, data: bytes) -> None:
    view, at = memoryview(data), 0
    while at < len(data):
        at += os.pwrite(fd, view[at:], at)
    if st.st_size > len(data):
        os.ftruncate(fd, len(data))


def overwrite_or_replace(path: StrPath, data: bytes) -> None:
    """`overwrite` (cheap); something planted there (a link, a FIFO) is replaced, never followed."""
    try:
        overwrite(path, data)
    except Exception as exc:  # UnsafePath: replace it by a file of ours
        from agentmsg.errors import UnsafePath

        if not isinstance(exc, (OSError, UnsafePath)):
            raise
        atomic_write(path, data, durable=False)


def cut_partial_line(path: StrPath) -> int:
    """Cut a last line that has no newline back off the file; returns the bytes removed.

    Only for a replica's journal (``Journal.append_sealed``): a mirror killed mid-write leaves part of
    records the server still holds, and they are copied again whole.  Other writers keep a torn line
    as evidence (``append`` terminates it instead).
    """
    fd = _open(path, os.O_RDWR, write=True)
    try:
        size = end = os.fstat(fd).st_size
        if not size or os.pread(fd, 1, size - 1) == b"\n":
            return 0
        while end > 0:
            start = max(0, end - 65536)
            found = os.pread(fd, end - start, start).rfind(b"\n")
            if found >= 0:
                end = start + found + 1
                break
            end = start
        os.ftruncate(fd, end)
        os.fsync(fd)
        return size - end
    finally:
        os.close(fd)


# ---- files outside the state root ----------------------------------------------------------------------------
#
# A host's configuration and a project's files (``.cursor/*.json``, OpenCode's plugin, Codex's hooks.json and
# skill, ``log render --out``) are written only by `write_outside`: the state root's rules, applied to a path
# agentmsg does not own.  A project is often a clone of someone else's repository, and git stores symlinks.

_LINK_OUTSIDE = ("is a symlink; refusing to write through it "
                 "(remove it or put a regular file there, then run this again)")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # a FIFO never blocks


def _outside_dir(shown: str, name: str, parent: int, *, create: bool) -> int | None:
    """``name`` in the directory ``parent`` (a descriptor), opened without following a link; None when absent.

    Each component is opened relative to the one before it, so a link swapped in after a check is never
    walked through either.  ``create``: a missing directory is made (mode 0777 less the umask, as ``mkdir -p``).
    """
    for _ in range(2):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                return None
            try:
                os.mkdir(name, 0o777, dir_fd=parent)
            except FileExistsError:
                pass
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            raise _unsafe(shown, _LINK_OUTSIDE if stat.S_ISLNK(st.st_mode) else "is not a directory") from None
    raise FileNotFoundError(errno.ENOENT, "vanished after mkdir", shown)


def _outside_target(shown: str, name: str, folder: int) -> os.stat_result | None:
    """The ``lstat`` of the file to be replaced, refused as the state root refuses it; None when absent."""
    try:
        st = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise _unsafe(shown, _LINK_OUTSIDE)
    _check_regular(shown, st, write=True)
    return st


def _outside_walk(base: StrPath, rel: str, *, create: bool,
                  create_base: bool = True) -> tuple[int | None, str, str]:
    """``(descriptor on rel's folder or None when a component is missing, file name, path as shown)``."""
    *folders, name = rel.split("/")
    if not name or name in (".", "..") or any(p in ("", ".", "..") for p in folders):
        raise ValueError(f"not a plain relative path: {rel!r}")
    shown = os.path.join(os.fspath(base), *folders, name)
    if create and create_base:
        os.makedirs(base, exist_ok=True)  # the base is named by the user or the host: trusted, links and all
    try:
        fd: int | None = os.open(base, _DIR_FLAGS & ~os.O_NOFOLLOW)
    except FileNotFoundError:
        return None, name, shown
    for i, part in enumerate(folders):
        assert fd is not None
        try:
            nxt = _outside_dir(os.path.join(os.fspath(base), *folders[: i + 1]), part, fd, create=create)
        finally:
            os.close(fd)
        if nxt is None:
            return None, name, shown
        fd = nxt
    return fd, name, shown


def check_outside(base: StrPath, rel: str) -> str:
    """Raise (UnsafePath) if `write_outside` would refuse ``base/rel``; the path.  Creates nothing.

    An installer writing several files checks them all first, so that a refusal leaves every one unwritten.
    """
    fd, name, shown = _outside_walk(base, rel, create=False)
    if fd is not None:
        try:
            _outside_target(shown, name, fd)
        finally:
            os.close(fd)
    return shown


def write_outside(base: StrPath, rel: str, data: bytes, *, create_base: bool = True, mode: int = 0o600) -> str:
    """Replace ``base/rel`` (a ``/``-separated relative path) with ``data``: the one way agentmsg writes a
    file outside the state root.  Returns the path written.

    ``base`` is the folder the user or the host names (a project, ``$CODEX_HOME``, OpenCode's configuration
    folder) and is taken as it is.  Below it nothing is followed: every folder of ``rel`` must be a real
    directory (missing ones are made), and the file must be absent or a regular file with one name: a
    symlink, a FIFO or a hard link there is refused (UnsafePath), and nothing is written.  The bytes go to a
    new temporary file with a random name (``O_CREAT|O_EXCL|O_NOFOLLOW``: never one planted there) in the
    same folder, are fsynced, and are renamed over the file, which keeps its permission bits (a new file
    gets ``mode``: private by default, as the state root's files are; an HTML log holds every message).
    ``create_base=False``: a missing ``base`` is an error (FileNotFoundError), not made.
    """
    fd, name, shown = _outside_walk(base, rel, create=True, create_base=create_base)
    if fd is None:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", os.fspath(base))
    try:
        st = _outside_target(shown, name, fd)
        tmp = f".{name}.{os.getpid()}.{os.urandom(8).hex()}.tmp"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
        try:
            try:
                if st is not None:
                    os.fchmod(out, stat.S_IMODE(st.st_mode))
                _write_all(out, data)
                os.fsync(out)
            finally:
                os.close(out)
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)  # a link swapped in meanwhile is replaced
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=fd)
            except OSError:
                pass
            raise
        os.fsync(fd)
    finally:
        os.close(fd)
    return shown
