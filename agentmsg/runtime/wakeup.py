"""Wake mechanisms: how a sender's process rings an idle session, in order of preference.

Every mechanism carries only the fixed doorbell line (``domain.wake.doorbell``)
and acts only on facts the recipient's own hooks recorded and validated here
(a tmux pane, a host's thread id, a path in our own state root); programs are
fixed by agentmsg (``tmux``, the host's own CLI), run with a scrubbed environment
(``hosts.base.run_fixed``).

* **The host's own** (``Host.ring`` in ``agentmsg/hosts/``): a waiter, a
  peer socket, a queue command.
* **Then, or for any other host:** guarded tmux.
* **Except** for a host whose own is slow (``Host.tmux_first``: Codex reads its
  ``codex queue`` every 10 s): while it is idle, guarded tmux first when the
  guard passes (about 0.3 s), else its own (which keeps a draft).

Before tmux types, the pane must still be the session's own (``runtime/panes.py``:
a socket of this user's, a pane that holds the recorded host process); otherwise
the ring is not rung and never retried.  Then the **tmux guard** (:func:`guard`):
the pane is not in copy mode, no client typed there in the last ``QUIET``
seconds, its prompt line is empty and no permission dialog shows.  Otherwise the
ring is deferred and rung again by the resident helper (:func:`retry_later`); a
draft is never touched.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from agentmsg.hosts import registry
from agentmsg.hosts.base import scrubbed
from agentmsg.runtime import facts as sessionfacts
from agentmsg.runtime import notify, panes

QUIET = 5.0  # seconds without client input before tmux may type
ENTER_AFTER = 0.2  # a TUI may swallow an Enter sent in the same burst (>= 150 ms; docs/HOSTS-NOTES.md)
#: Text that shows a host is asking the user something: an Enter would answer it.
DIALOG = ("Do you want to", "Would you like to", "Enter to confirm", "Esc to cancel", "Allow command",
          "Approve", "Press enter to", "(y/n)", "[y/N]", "Yes, and don't ask again")
#: Text that shows a turn is running: a typed line would be queued or steer it.
RUNNING = ("esc to interrupt",)
PROMPT_GLYPHS = ("❯", "›", ">")


class Mechanism:
    """The ways to ring one session, chosen by its recorded facts: the host's own, then guarded tmux."""

    def __init__(self, root: str, pin: str, facts: Mapping[str, Any]) -> None:
        self.root, self.pin, self.facts = root, pin, facts
        self.host = registry.get_or_nothing(str(facts.get("host", "")))
        self.pane = facts.get("pane") if notify._is_pane(facts.get("pane")) else None
        sock = facts.get("tmux_socket")
        self.socket = sock if notify._is_socket(sock) else None

    @property
    def reachable(self) -> bool:
        """Whether anything could ever ring this session: the host's own wake-up, or its own tmux pane."""
        return self.host.native_wake or (self.pane is not None and self.socket is not None)

    @property
    def queues(self) -> bool:
        """Whether a ring can wait natively behind a running turn (a waiter, a queue)."""
        return self.host.queues

    def retries_itself(self, mechanism: str | None) -> bool:
        """Whether a deferred ring through ``mechanism`` is delivered later without the helper ringing again."""
        return mechanism in self.host.self_retrying

    def ring(self, line: str, ring: dict[str, Any], *, busy: bool) -> tuple[str, str | None]:
        """``(outcome, mechanism)``: ``rang``, ``deferred (...)`` or ``not rung (...)``.

        A host whose own wake-up is slow (``Host.tmux_first``: Codex) is rung by guarded tmux first when it is
        idle and its pane is safe; otherwise by its own, which keeps a draft and waits behind a dialog.
        """
        stop: tuple[str, str] | None = None
        if self.host.tmux_first and not busy:
            stop = self.tmux_stop()
            if stop is None:
                try:
                    tmux_ring(self.socket or "", self.pane or "", line)
                    return "rang", "tmux"
                except (notify.NotifyError, OSError) as exc:
                    stop = ("failed", str(exc))
        native, failed = self.host.ring(self.root, self.pin, self.facts, line, ring, busy=busy)
        if native is not None:
            return native
        kind, why = stop or self.tmux_stop() or ("", "")
        if kind == "no pane":
            return f"not rung ({failed}; {why})", None
        if kind == "not verified":  # not the session's own pane (any more): never typed into, never retried
            return f"not rung (tmux pane {self.pane} not verified: {why})", None
        if kind == "failed":  # tmux itself failed (not its guard), and the host's own ring too
            return f"deferred (tmux failed: {why})", "tmux"
        if kind:
            return f"deferred (tmux guard: {why})", "tmux"
        tmux_ring(self.socket or "", self.pane or "", line)
        return "rang", "tmux"

    def tmux_stop(self) -> tuple[str, str] | None:
        """Why guarded tmux may not type now, as ``(kind, why)``: ``no pane``, ``not verified`` (the pane is not
        the session's own) or ``deferred`` (the guard: a draft, a dialog, recent typing); None when it may."""
        if self.pane is None or self.socket is None:
            return "no pane", "no tmux pane recorded"
        refused = panes.ring_refusal(self.socket, self.pane, self.facts, exact=False)
        if refused:
            return "not verified", refused
        why = guard(self.socket, self.pane, self.facts)
        return ("deferred", why) if why else None


def _tmux(socket: str, *args: str) -> str:
    import shutil
    import subprocess

    program = shutil.which("tmux")
    if program is None:
        raise notify.NotifyError("tmux: not found on PATH")
    done = subprocess.run([program, "-S", socket, *args], capture_output=True, timeout=notify.COMMAND_TIMEOUT,
                          check=False, stdin=subprocess.DEVNULL, env=scrubbed(program))
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
    if any(mark in line for line in plain for mark in RUNNING):
        return "a turn is running"
    prompts = [line.strip() for line in plain if line.strip()[:1] in PROMPT_GLYPHS]
    if not prompts:
        return "no prompt line found"
    if prompts[-1][1:].strip():
        return "the prompt line holds a draft"
    return None


def tmux_ring(socket: str, pane: str, line: str) -> None:
    """The doorbell as one bracketed paste, then ``Enter``.  Typed with ``send-keys -l``, a long line reaches Codex
    as a burst of keys and the ``Enter`` after it became a newline in 5 of 12 tries; pasted, in none of 12.  The
    paste goes through a buffer of its own, deleted after it (the user's paste buffers stay as they were)."""
    import os

    buffer = f"agentmsg-ring-{os.getpid()}"
    _tmux(socket, "set-buffer", "-b", buffer, "--", line)
    _tmux(socket, "paste-buffer", "-p", "-d", "-b", buffer, "-t", pane)
    time.sleep(ENTER_AFTER)
    _tmux(socket, "send-keys", "-t", pane, "Enter")


def retry_later(root: str, collab: str, alias: str, env: Mapping[str, str]) -> None:
    """Leave the deferred ring for the resident helper, which rings it again (one per binding), and make sure
    a helper runs; never fails the send."""
    import sys

    from agentmsg.runtime import doorbell, retries

    try:
        retries.request(root, collab, alias, env.get("PATH", ""))
        doorbell.ensure_for_retries(root, env, [sys.executable, "-m", "agentmsg"])
    except OSError:
        pass  # a later send asks again
