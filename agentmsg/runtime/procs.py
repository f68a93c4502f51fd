"""What ``/proc`` says about a process: its name, parent and start time, and its ancestry (stdlib, cheap).

A pid alone is not an identity (the kernel reuses them), so callers compare
a pid together with its start time.  Lean: the hooks import it.
"""

from __future__ import annotations

import os

from agentmsg import fsio

#: The process a command runs for, when that is not this one: the thin client's pid, set by the resident
#: helper's child that runs a command for it (``cli/serve.py``, from the socket's peer credentials).  The checks
#: that walk a command's ancestry (identity, the tmux pane, the host process) start from it.
caller: int | None = None


def self_pid() -> int:
    """The pid whose ancestry decides: the command's own process, or the thin client it runs for."""
    return os.getpid() if caller is None else caller


def parent_pid() -> int:
    """The parent of :func:`self_pid` (0 when it has gone)."""
    if caller is None:
        return os.getppid()
    stat = proc_stat(caller)
    return stat[1] if stat is not None else 0


def proc_stat(pid: int) -> tuple[str, int, str] | None:
    """``(comm, ppid, start time in clock ticks)`` of a live process, or None."""
    raw = fsio.read_bytes(f"/proc/{pid}/stat")
    if not raw:
        return None
    text = raw.decode("utf-8", "replace")
    left, right = text.find("("), text.rfind(")")
    rest = text[right + 2:].split()
    if left < 0 or right < 0 or len(rest) < 20:
        return None
    return text[left + 1:right], int(rest[1]), rest[19]


def descends_from(pid: int, ancestor: int) -> bool:
    """Whether ``pid`` is ``ancestor`` or runs below it (the tmux guard: the pane holds the host)."""
    for _ in range(32):
        if pid == ancestor:
            return True
        stat = proc_stat(pid)
        if stat is None or pid <= 1:
            return False
        pid = stat[1]
    return False
