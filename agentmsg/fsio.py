"""Safe file I/O under the state root.

Rules that hold for every path built here: components are created 0700
(files 0600), no component may be a symlink (``O_NOFOLLOW`` plus ``lstat``),
appends are fsynced before returning, small state files are replaced
atomically, and a new file's directory is fsynced so the name is durable.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from .errors import StoreFailed, UnsafePath

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
CHUNK = 1 << 16

# The CLI swaps in portalocker (see cli/__init__); the hook path keeps plain
# flock, which is what portalocker uses on POSIX, so the two exclude each other.
LockFn = Callable[[IO[Any]], None]


def _flock_nb(fh: IO[Any]) -> None:
    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


lock_nonblocking: LockFn = _flock_nb
wait_notice: Callable[[str], None] | None = None


def ensure_dir(root: Path, *parts: str) -> Path:
    """Create ``root/parts...`` as 0700 dirs, refusing any symlinked component."""
    path = root
    for part in ("", *parts):
        path = path / part if part else path
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if not part:  # the root itself: its parents may be missing too (fresh ~/.local/state)
                os.makedirs(path.parent, 0o700, exist_ok=True)
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                pass
            st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePath(f"{path} is a symlink; refusing to follow it inside the state root")
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafePath(f"{path} is not a directory")
    return path


def existing_dir(root: Path, *parts: str) -> Path | None:
    """Like ensure_dir but never creates: None when absent."""
    path = root
    for part in parts:
        path = path / part
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePath(f"{path} is a symlink; refusing to follow it inside the state root")
    return path


def refuse_link(path: Path) -> None:
    """Raise if ``path`` is a symlink; checked before a write that must not fail later."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePath(f"{path} is a symlink; refusing to follow it inside the state root")


def _open(path: Path, flags: int, mode: int = 0o600) -> int:
    try:
        return os.open(path, flags | _NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(f"{path} is a symlink; refusing to follow it") from None
        raise


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append(path: Path, data: bytes) -> int:
    """Append ``data`` durably; returns the offset it was written at.

    A torn last line (no trailing newline) is terminated first, so it stays
    on disk as evidence and cannot merge with the new record.
    """
    fd = _open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        size = os.fstat(fd).st_size
        created = size == 0
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
            size += 1
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)
    return size


def next_offset(path: Path) -> int:
    """Where ``append`` will put its data (a torn tail gets a newline first)."""
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        size = os.fstat(fd).st_size
        return size + 1 if size and os.pread(fd, 1, size - 1) != b"\n" else size
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = _open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def read_bytes(path: Path) -> bytes | None:
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def file_size(path: Path) -> int:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePath(f"{path} is a symlink; refusing to follow it")
    return st.st_size


def lines(path: Path, offset: int = 0) -> Iterator[tuple[int, bytes, bool]]:
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


def last_lines(path: Path) -> Iterator[bytes]:
    """Complete lines from the end backwards, reading only what is needed."""
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    with os.fdopen(fd, "rb") as fh:
        end = fh.seek(0, os.SEEK_END)
        buf = b""
        pos = end
        step = 4096
        while pos > 0:
            step = min(step * 2, CHUNK, pos)
            pos -= step
            fh.seek(pos)
            buf = fh.read(step) + buf
            parts = buf.split(b"\n")
            buf = parts[0]
            for part in reversed(parts[1:]):
                if part:
                    yield part
        if buf:
            yield buf


@contextmanager
def locked(path: Path, timeout: float) -> Iterator[None]:
    """Exclusive lock on a lock file that is never deleted."""
    fd = _open(path, os.O_RDWR | os.O_CREAT)
    fh = os.fdopen(fd, "r+b")
    try:
        deadline = time.monotonic() + timeout
        told = False
        while True:
            try:
                lock_nonblocking(fh)
                break
            except Exception as exc:  # portalocker raises its own exception types
                if not _is_contention(exc):
                    raise
            if time.monotonic() >= deadline:
                raise StoreFailed(f"lock {path} held for more than {timeout:g}s; nothing was written")
            if not told and wait_notice and time.monotonic() > deadline - timeout + 1:
                wait_notice(f"waiting for lock {path} ...")
                told = True
            time.sleep(0.005)
        yield
    finally:
        fh.close()


def _is_contention(exc: BaseException) -> bool:
    if isinstance(exc, BlockingIOError):
        return True
    if isinstance(exc, OSError) and exc.errno in (errno.EAGAIN, errno.EACCES):
        return True
    # portalocker wraps contention in its own AlreadyLocked/LockException
    return type(exc).__name__ in ("AlreadyLocked", "LockException")


def warn(message: str) -> None:
    sys.stderr.write(message + "\n")
