"""An ``OSError`` the operating system raised, as the documented error of its class.

One mapping for every front end (the CLI's error handler, the MCP server's tool results): a full disk, a
read-only file system, a file where a directory should be, a name too long, ... each becomes its exit code.
"""

from __future__ import annotations

import errno
import os
import stat

from agentmsg.errors import AgentmsgError, StoreFailed, UnsafePath, UsageError
from agentmsg.text import escape as visible

#: errno -> (error class, what it means); anything not here is an internal error.
OS_ERRORS: dict[int, tuple[type[AgentmsgError], str]] = {
    errno.ENOSPC: (StoreFailed, "no space left on the device"),
    errno.EDQUOT: (StoreFailed, "disk quota exceeded"),
    errno.EIO: (StoreFailed, "input/output error"),
    errno.EROFS: (StoreFailed, "read-only file system"),
    errno.EFBIG: (StoreFailed, "file too large"),
    errno.EACCES: (UnsafePath, "permission denied"),
    errno.EPERM: (UnsafePath, "operation not permitted"),
    errno.ENOTDIR: (UnsafePath, "a component of the path is not a directory"),
    errno.EISDIR: (UnsafePath, "is a directory where a file belongs"),
    errno.ELOOP: (UnsafePath, "too many levels of symbolic links"),
    errno.ENXIO: (UnsafePath, "is not a regular file"),
    errno.ENAMETOOLONG: (UsageError, "file name too long"),
}


def os_error(exc: OSError) -> AgentmsgError | None:
    """The documented error for an operating-system failure, or None (an internal error)."""
    found = OS_ERRORS.get(exc.errno or 0)
    if found is None:
        return None
    cls, what = found
    name = exc.filename if exc.filename is not None else ""
    if exc.errno == errno.ENOTDIR and isinstance(name, str) and name:
        name, what = _not_a_dir(name), "is not a directory"
    where = visible.escape(one_line(os.fsdecode(name) if isinstance(name, (str, bytes)) else str(name)))
    where = (where[:400] + "...") if len(where) > 400 else where
    tail = "; nothing was stored" if cls is StoreFailed else ""
    sep = " " if what.startswith("is ") else ": "  # "PATH is not a directory", "PATH: read-only file system"
    return cls(f"{where + sep if where else ''}{what}{tail}")


def _not_a_dir(path: str) -> str:
    """The first component of ``path`` that exists and is not a directory (``path`` if none is found)."""
    parts = os.path.normpath(path).split(os.sep)
    for i in range(2, len(parts) + 1):
        head = os.sep.join(parts[:i]) or os.sep
        try:
            if not stat.S_ISDIR(os.lstat(head).st_mode):
                return head
        except OSError:
            break
    return path


def one_line(text: str) -> str:
    return " ".join(text.split())


