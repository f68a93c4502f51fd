"""Which tmux pane a session may name as its doorbell target: checked when recorded and again before typing.

``TMUX`` and ``TMUX_PANE`` are plain environment variables that any process
can set, so they are a claim, not a fact.  A pane is recorded (``--notify
tmux``, ``wake on``, the SessionStart facts) only when

* its server socket is this user's own (:func:`socket_refusal`): a socket,
  not a symlink, owned by this uid, in a directory owned by this uid or root
  that nobody else may write to (or that is sticky, like ``/tmp``); and
* the pane's process (``#{pane_pid}``) is the recording process or one of
  its ancestors, or an ancestor of the host process the session's hooks
  recorded (same pid, same start time).

Before anything is typed, the socket is checked again and the pane must
still hold the process it held when recorded (:func:`ring_refusal`), so a
target edited on disk afterwards types nothing.

Lean: the SessionStart hook imports it; ``subprocess`` is imported only when a pane is claimed.
"""

from __future__ import annotations

import os
import stat

from agentmsg.hosts.base import is_abs_path, scrubbed
from agentmsg.runtime.procs import descends_from, proc_stat, self_pid

#: Seconds a tmux server may take to answer: the SessionStart hook waits this long at most.
ASK_TIMEOUT = 3.0

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


class Refused(Exception):
    """A pane that is not this session's own; ``str()`` says why, in one line."""


def is_pane(value: object) -> bool:
    return isinstance(value, str) and len(value) <= 12 and value[:1] == "%" and value[1:].isdigit()


def claimed(env: Mapping[str, str]) -> tuple[str, str] | None:
    """``(socket, pane)`` as the environment claims them (well-formed, not yet verified), or None."""
    socket, pane = env.get("TMUX", "").split(",", 1)[0], env.get("TMUX_PANE", "")
    return (socket, pane) if is_pane(pane) and is_abs_path(socket) else None


def socket_refusal(path: str) -> str | None:
    """Why ``path`` is not a tmux server socket of this user's own, or None."""
    uid = os.getuid()
    try:
        st = os.lstat(path)
        parent = os.lstat(os.path.dirname(path) or "/")
    except OSError:
        return "no tmux server socket there"
    if stat.S_ISLNK(st.st_mode):
        return "the socket path is a symlink"
    if not stat.S_ISSOCK(st.st_mode):
        return "not a socket"
    if st.st_uid != uid:
        return f"the socket belongs to uid {st.st_uid}, not to this user (uid {uid})"
    if not stat.S_ISDIR(parent.st_mode):
        return "its directory is a symlink or not a directory"
    if parent.st_uid not in (uid, 0):
        return f"its directory belongs to uid {parent.st_uid}"
    if parent.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not parent.st_mode & stat.S_ISVTX:
        return "its directory is writable by others"
    return None


def pane_process(socket: str, pane: str) -> int:
    """The pid tmux started in ``pane`` on the server at ``socket``; Refused when either does not answer."""
    import shutil
    import subprocess

    program = shutil.which("tmux")
    if program is None:
        raise Refused("tmux is not on PATH")
    try:
        done = subprocess.run([program, "-S", socket, "display-message", "-p", "-t", pane,
                               "#{pane_id} #{pane_pid}"], capture_output=True, timeout=ASK_TIMEOUT,
                              check=False, stdin=subprocess.DEVNULL, env=scrubbed(program))
    except (OSError, subprocess.TimeoutExpired):
        raise Refused("the tmux server did not answer") from None
    parts = done.stdout.decode("utf-8", "replace").split()
    if done.returncode != 0 or len(parts) != 2 or parts[0] != pane or not parts[1].isdigit():
        raise Refused(f"the tmux server at that socket has no pane {pane}")
    return int(parts[1])


def _running(anchor: Mapping[str, Any]) -> bool:
    """Whether the recorded process still runs: same pid, same start time."""
    pid, started = anchor.get("pid"), anchor.get("pid_start")
    found = proc_stat(pid) if type(pid) is int else None
    return found is not None and isinstance(started, str) and found[2] == started


def holders(recorded: Mapping[str, Any]) -> list[int]:
    """The processes a recorded pane must hold: this one, and the hooks' host process while it still runs."""
    out = [self_pid()]
    pid = recorded.get("pid")
    if type(pid) is int and _running(recorded):
        out.append(pid)
    return out


def verify(socket: str, pane: str, held: list[int]) -> tuple[int, str]:
    """``(pid, start time)`` of the pane's process when the pane is this session's own; Refused otherwise."""
    why = socket_refusal(socket)
    if why:
        raise Refused(f"tmux socket {socket}: {why}")
    pid = pane_process(socket, pane)
    if not any(descends_from(h, pid) for h in held):
        raise Refused(f"pane {pane} does not run this session (its process {pid} is not an ancestor of it)")
    found = proc_stat(pid)
    if found is None:
        raise Refused(f"pane {pane}'s process {pid} is gone")
    return pid, found[2]


def ring_refusal(socket: str, pane: str, anchor: Mapping[str, Any], *, exact: bool) -> str | None:
    """Before typing: why ``pane`` is not the one recorded, or None.

    ``anchor`` holds a pid and its start time: with ``exact``, the pane's own
    process (``--notify tmux``); otherwise the host process the session's
    hooks recorded, which the pane must still hold (``wake on``).
    """
    pid, started = anchor.get("pid"), anchor.get("pid_start")
    if type(pid) is not int or not isinstance(started, str):
        return "recorded without its process (an older agentmsg, or edited): record it again from inside the pane"
    why = socket_refusal(socket)
    if why:
        return f"tmux socket: {why}"
    try:
        now = pane_process(socket, pane)
    except Refused as exc:
        return str(exc)
    if not _running(anchor):
        return f"the recorded process {pid} is gone"
    if (now != pid) if exact else not descends_from(pid, now):
        return f"pane {pane} does not run the recorded process {pid}"
    return None
