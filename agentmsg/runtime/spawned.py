"""The tmux window of a session agentmsg spawned: where it runs, whether it still runs, what it last showed,
typing a line into it, and stopping it.  Starting one is :func:`agentmsg.runtime.spawn.start_session`.

A spawned session is named by what the ``spawned`` event recorded: the tmux socket, window and pane, and the
pane's first process (pid and start time: a pid the kernel reused is never signalled).  tmux runs with a
scrubbed environment (``hosts.base.scrubbed``) and ``-S SOCKET`` always, never the caller's ``$TMUX``.
"""

from __future__ import annotations

import os
import time

from agentmsg.errors import SpawnFailed
from agentmsg.hosts.base import scrubbed
from agentmsg.runtime.procs import proc_stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

TIMEOUT = 10.0
#: After tmux closed the window, how long the pane's processes get to end before SIGTERM, then SIGKILL.
GRACE = 5.0


def tmux(socket: str, *args: str) -> str:
    """``tmux -S SOCKET ARGS``: its stdout, or SpawnFailed with tmux's last line."""
    import shutil
    import subprocess

    program = shutil.which("tmux")
    if program is None:
        raise SpawnFailed("tmux is not installed (agentmsg spawn runs sessions in tmux)")
    try:
        done = subprocess.run([program, "-S", socket, *args], capture_output=True, timeout=TIMEOUT, check=False,
                              stdin=subprocess.DEVNULL, env=scrubbed(program))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpawnFailed(f"tmux: {exc}") from None
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SpawnFailed(f"tmux {args[0]} exited {done.returncode}" + (f": {err[-1][:200]}" if err else ""))
    return done.stdout.decode("utf-8", "replace")


def pane_state(socket: str, pane: str) -> tuple[bool, int | None]:
    """``(running, pid)`` of a pane: not running when the pane is gone or its program ended (a dead pane)."""
    try:
        out = tmux(socket, "display-message", "-p", "-t", pane, "#{pane_id} #{pane_dead} #{pane_pid}").split()
    except SpawnFailed:
        return False, None
    if len(out) != 3 or out[0] != pane:
        return False, None
    return out[1] != "1", int(out[2]) if out[2].isdigit() else None


def last_line(socket: str, pane: str) -> str:
    """The last non-empty line a pane shows (why a host exited), or ``""``."""
    try:
        screen = tmux(socket, "capture-pane", "-p", "-S", "-100", "-t", pane)
    except SpawnFailed:
        return ""
    lines = [ln.strip() for ln in screen.splitlines() if ln.strip() and not ln.startswith("Pane is dead")]
    return lines[-1][:200] if lines else ""


def keep_dead(socket: str, window: str, keep: bool) -> None:
    """While spawn waits, a host that exits leaves its pane (to read why); once ready, it closes as usual."""
    tmux(socket, "set-option", "-w", "-t", window, "remain-on-exit", "on" if keep else "off")


def type_line(socket: str, pane: str, line: str) -> None:
    """Type one line into the spawned session's own pane, then Enter (apart: a TUI may swallow it otherwise)."""
    tmux(socket, "send-keys", "-t", pane, "-l", line)
    time.sleep(0.3)
    tmux(socket, "send-keys", "-t", pane, "Enter")


def same_process(pid: object, started: object) -> bool:
    """Whether ``pid`` still runs with the start time recorded for it."""
    if type(pid) is not int or pid <= 1 or not isinstance(started, str):
        return False
    stat = proc_stat(pid)
    return stat is not None and stat[2] == started and not _zombie(pid)


def _zombie(pid: int) -> bool:
    from agentmsg import fsio

    raw = fsio.read_bytes(f"/proc/{pid}/stat") or b""
    return raw.rpartition(b")")[2][:3].strip() == b"Z"


def stop(where: Mapping[str, Any], *, grace: float = GRACE) -> str:
    """Stop a spawned session: close its tmux window (tmux hangs up its processes), then, while the recorded
    first process (pid and start time) still runs, ``SIGTERM`` and ``SIGKILL`` its process group.  What ended it;
    LookupError when nothing recorded runs any more."""
    import signal

    pid, started = where.get("pid"), where.get("pid_start")
    socket, window, pane = where.get("socket"), where.get("window"), where.get("pane")
    if not same_process(pid, started):
        raise LookupError(f"the spawned session's process (pid {pid}) is not running")
    assert isinstance(pid, int)
    how = "window closed"
    if isinstance(socket, str) and isinstance(pane, str) and isinstance(window, str):
        _running, pane_pid = pane_state(socket, pane)
        if pane_pid == pid:  # the window is still the one spawn opened: close it
            try:
                tmux(socket, "kill-window", "-t", window)
            except SpawnFailed:
                pass
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            if not same_process(pid, started):
                break
            try:
                os.killpg(pid, sig)  # tmux makes a pane's first process lead its own session and group
            except (ProcessLookupError, PermissionError):
                os.kill(pid, sig)
            how = sig.name
        deadline = time.monotonic() + (grace if sig is None else 2.0)
        while time.monotonic() < deadline and same_process(pid, started):
            time.sleep(0.05)
        if not same_process(pid, started):
            return how
    return how
