"""Descriptors a long-lived ``FileStore`` keeps open between its transactions.

A process that sends many messages (the MCP server, the renderer, a
benchmark) would otherwise open and close the same three files in every
send: the collaboration's lock, the recipient's inbox and
``collaboration.md``, about a tenth of a send's own work.  A command that
sends once opens them as before and keeps nothing.

A descriptor stands for the file at its path only while the directory
holding that path keeps the key (`fsio.dir_key`, from an ``lstat`` taken
before the file is used) it had when the descriptor was kept: unlinking,
renaming or replacing the file changes the directory's mtime and ctime, so
a changed key closes it and the file is opened afresh.  Each use still
checks the file as an open would (a regular file with one name: a hard link
made since is refused).  A descriptor is lent to one transaction at a time,
taken out while in use, so two threads never lock through one (flock would
let both in), and a forked child keeps none of its parent's.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    Key = tuple[int, int, int, int]

#: At most this many kept per store (a collaboration's lock and ``collaboration.md``, and an inbox per recipient).
LIMIT = 32


#: Forks so far in this process's line: a child counts one more than its parent had (``os.getpid`` would be a
#: system call at every use).
_FORKS = [0]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _FORKS.__setitem__(0, _FORKS[0] + 1))


class Handles:
    __slots__ = ("_forks", "_kept")

    def __init__(self) -> None:
        self._forks = _FORKS[0]
        self._kept: dict[str, tuple[Key, int]] = {}

    def take(self, path: str, key: Key | None) -> int | None:
        """The kept descriptor of ``path`` if its directory's key is still ``key``; it is the caller's now."""
        if key is None or not self._mine():
            return None
        found = self._kept.pop(path, None)
        if found is None:
            return None
        if found[0] != key:
            _close(found[1])
            return None
        return found[1]

    def give(self, path: str, key: Key | None, fd: int | None) -> None:
        """Keep ``fd`` (open on ``path``, whose directory had ``key`` before it was used) for a later `take`."""
        if fd is None:
            return
        if key is None or not self._mine() or path in self._kept:
            _close(fd)
            return
        if len(self._kept) >= LIMIT:
            _close(self._kept.pop(next(iter(self._kept)))[1])
        self._kept[path] = (key, fd)

    def close(self) -> None:
        kept, self._kept = self._kept, {}
        if self._mine():
            for _key, fd in kept.values():
                _close(fd)

    def _mine(self) -> bool:
        """False in a forked child (once it forgot its parent's descriptors, which stay the parent's)."""
        if self._forks == _FORKS[0]:
            return True
        self._kept, self._forks = {}, _FORKS[0]
        return False


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
