"""Wake mechanisms: how a sender's process rings an idle session, in order of preference.

Every mechanism carries only the fixed doorbell line (``domain.wake.doorbell``)
and acts only on facts the recipient's own hooks recorded and validated here
(a tmux pane, a Codex thread id, a path in our own state root); programs are
fixed by agentmsg (``tmux``, ``codex``), run with a scrubbed environment
(``notify._run``).

* **Claude Code:** the ``asyncRewake`` waiter (``agentmsg/runtime/waiter.py``) when
  one holds the session's lock: the ring is a file it reads; while the turn
  runs the ring waits for the next waiter (re-armed at Stop).  Then the peer
  socket, only for the peer protocol checked here.  Then guarded tmux.
* **Codex:** ``codex queue --thread <id> --message <doorbell>`` (it keeps a
  draft and queues behind a running turn).  Then guarded tmux.
* **Anything else:** guarded tmux.

The **tmux guard** (:func:`guard`): the pane runs the recorded host process,
is not in copy mode, no client typed there in the last ``QUIET`` seconds, its
prompt line is empty and no permission dialog shows.  Otherwise the ring is
deferred and retried (:func:`retry_later`); a draft is never touched.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from agentmsg import fsio, records
from agentmsg.backends.file import layout
from agentmsg.runtime import doorbell, notify
from agentmsg.runtime import facts as sessionfacts

QUIET = 5.0  # seconds without client input before tmux may type
ENTER_AFTER = 0.2  # Codex swallows an Enter sent in the same burst (>= 150 ms)
RETRY_FOR = 300.0
RETRY_EVERY = 1.0
#: Text that shows a host is asking the user something: an Enter would answer it.
DIALOG = ("Do you want to", "Would you like to", "Enter to confirm", "Esc to cancel", "Allow command",
          "Approve", "Press enter to", "(y/n)", "[y/N]", "Yes, and don't ask again")
PROMPT_GLYPHS = ("❯", "›", ">")
PEER_PROTOCOL = 1  # Claude Code's peer socket protocol as checked on 2.1.328 (~/.claude/sessions/<pid>.json)


class Mechanism:
    """The ways to ring one session, chosen by its recorded facts."""

    def __init__(self, root: str, pin: str, facts: Mapping[str, Any]) -> None:
        self.root, self.pin, self.facts = root, pin, facts
        self.host = str(facts.get("host", ""))
        self.pane = facts.get("pane") if notify._is_pane(facts.get("pane")) else None
        sock = facts.get("tmux_socket")
        self.socket = sock if notify._is_socket(sock) else None
        thread = facts.get("thread")
        self.thread = thread if self.host == "codex" and notify._is_thread(thread) else None

    @property
    def queues(self) -> bool:
        """Whether a ring can wait natively behind a running turn (the waiter, Codex's queue)."""
        return self.host in ("claude", "codex")

    def ring(self, line: str, ring: dict[str, Any], *, busy: bool) -> tuple[str, str | None]:
        """``(outcome, mechanism)``: ``rang``, ``deferred (...)`` or ``not rung (...)``."""
        if self.host == "claude":
            if busy:
                self._leave_ring(ring, queued=True)
                return "recipient busy (rung when its turn ends)", "claude-waiter"
            if waiter_armed(self.root, self.pin):
                self._leave_ring(ring, queued=False)
                return "rang", "claude-waiter"
            if self.facts.get("peer_protocol") == PEER_PROTOCOL and isinstance(self.facts.get("claude_socket"), str):
                try:
                    claude_socket(str(self.facts["claude_socket"]), line)
                    return "rang", "claude-socket"
                except (OSError, notify.NotifyError):
                    pass  # best effort: guarded tmux next
        if self.thread is not None:
            try:
                codex_queue(self.thread, line, self.facts.get("codex_home"), self.facts.get("exe"))
                return "rang", "codex-queue"
            except notify.NotifyError as exc:
                failed = f"codex-queue failed: {exc}"
        else:
            failed = "no native path"
        if self.pane is None or self.socket is None:
            return f"not rung ({failed}; no tmux pane recorded)", None
        why = guard(self.socket, self.pane, self.facts)
        if why:
            return f"deferred (tmux guard: {why})", "tmux"
        tmux_ring(self.socket, self.pane, line)
        return "rang", "tmux"

    def _leave_ring(self, ring: dict[str, Any], *, queued: bool) -> None:
        fsio.ensure_dir(self.root, layout.WAKE)
        doc = {**ring, "pin": self.pin, "queued": queued}  # the waiter rebuilds the line from the store
        fsio.atomic_write(layout.session_file(self.root, self.pin, "ring"), records.dumps(doc).encode(),
                          durable=False)


def waiter_armed(root: str, pin: str) -> bool:
    """Whether a waiter holds the session's lock (a free lock is taken and released at once)."""
    import fcntl

    try:
        fd = os.open(layout.session_file(root, pin, "lock"), os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def claude_socket(path: str, line: str) -> None:
    """One user line on Claude Code's peer socket (undocumented; it keeps a draft and queues behind a dialog).

    Only a socket of this user: a path a peer planted elsewhere is never connected to.
    """
    import json
    import socket
    import stat

    st = os.lstat(path)
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
        raise notify.NotifyError("not this user's socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2.0)
        sock.connect(path)
        sock.sendall(json.dumps({"type": "user", "message": {"role": "user", "content": line}}).encode() + b"\n")


def codex_queue(thread: str, line: str, codex_home: object, exe: object = None) -> None:
    """``codex queue``: ``codex`` on PATH, else the binary the recipient's own session runs."""
    import shutil

    program = shutil.which("codex")
    if program is None and isinstance(exe, str) and os.path.basename(exe) == "codex" and os.access(exe, os.X_OK):
        program = exe
    if program is None:
        raise notify.NotifyError("codex: not found on PATH")
    home = codex_home if isinstance(codex_home, str) and notify._is_socket(codex_home) else None
    argv = [program, "queue", "--thread", thread, "--message", line]
    notify._run(argv, extra_env={"CODEX_HOME": home} if home else None)


def _tmux(socket: str, *args: str) -> str:
    import shutil
    import subprocess

    program = shutil.which("tmux")
    if program is None:
        raise notify.NotifyError("tmux: not found on PATH")
    done = subprocess.run([program, "-S", socket, *args], capture_output=True, timeout=notify.COMMAND_TIMEOUT,
                          check=False, stdin=subprocess.DEVNULL, env=notify._scrubbed(program))
    if done.returncode != 0:
        raise notify.NotifyError(f"tmux exited {done.returncode}")
    return done.stdout.decode("utf-8", "replace")


def guard(socket: str, pane: str, facts: Mapping[str, Any]) -> str | None:
    """Why tmux must not type into ``pane`` now, or None when every check passes."""
    try:
        info = _tmux(socket, "display-message", "-p", "-t", pane, "#{pane_pid} #{pane_in_mode}").split()
        clients = _tmux(socket, "list-clients", "-F", "#{client_activity}").split()
        screen = _tmux(socket, "capture-pane", "-p", "-e", "-t", pane)
    except (notify.NotifyError, OSError) as exc:
        return f"pane unreachable ({exc})"
    if len(info) != 2 or not info[0].isdigit():
        return "pane unreadable"
    host_pid = facts.get("pid")
    if type(host_pid) is not int or not sessionfacts.alive(facts) \
            or not sessionfacts.descends_from(host_pid, int(info[0])):
        return "the pane does not run the recorded host process"
    if info[1] != "0":
        return "copy mode"
    last = max((int(c) for c in clients if c.isdigit()), default=0)
    if time.time() - last < QUIET:
        return "recent client activity"
    return screen_refusal(screen)


def _plain(line: str) -> str:
    """A captured line without its SGR sequences, dim text (a placeholder) dropped."""
    out, i, dim = [], 0, False
    while i < len(line):
        if line.startswith("\x1b[", i):
            end = i + 2
            while end < len(line) and not line[end].isalpha():
                end += 1
            params = line[i + 2:end].split(";")
            if "2" in params:
                dim = True
            elif params in ([""], ["0"]) or "22" in params:
                dim = False
            i = end + 1
            continue
        if not dim:
            out.append(line[i])
        i += 1
    return "".join(out)


def screen_refusal(screen: str) -> str | None:
    """A permission dialog, or a prompt line holding a draft (dim placeholder text does not count)."""
    lines = screen.splitlines()[-40:]
    plain = [_plain(line) for line in lines]
    if any(mark in line for line in plain for mark in DIALOG):
        return "a permission dialog is showing"
    prompts = [line.strip() for line in plain if line.strip()[:1] in PROMPT_GLYPHS]
    if not prompts:
        return "no prompt line found"
    if prompts[-1][1:].strip():
        return "the prompt line holds a draft"
    return None


def tmux_ring(socket: str, pane: str, line: str) -> None:
    _tmux(socket, "send-keys", "-t", pane, "-l", line)
    time.sleep(ENTER_AFTER)
    _tmux(socket, "send-keys", "-t", pane, "Enter")


def retry_later(root: str, collab: str, alias: str) -> None:
    """A detached retrier for a deferred ring (one per binding, under a lock); never fails the send."""
    import subprocess
    import sys

    try:
        subprocess.Popen([sys.executable, "-m", "agentmsg.runtime.wakeup", root, collab, alias],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, close_fds=True)
    except OSError:
        pass


def _retry(root: str, collab: str, alias: str) -> int:
    """Ring again every second until it rings, or it may no longer (consent, cap, acks), or RETRY_FOR."""
    import fcntl

    from agentmsg.backends.file.store import FileStore
    from agentmsg.service import wake

    fsio.ensure_dir(root, layout.WAKE)
    fd = os.open(os.path.join(root, layout.WAKE, f"retry-{layout.pin_key(collab + '/' + alias)}.lock"),
                 os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # one retrier per binding: it merges this ring
    store = FileStore(root, on_wake=doorbell.nudge)
    deadline = time.time() + RETRY_FOR
    while time.time() < deadline:
        time.sleep(RETRY_EVERY)
        got = wake.ring(store, root, collab, alias, retry=True)
        if not (got["outcome"].startswith(("deferred", "recipient busy"))):
            return 0
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(_retry(*sys.argv[1:4]))
