"""Claude Code's wake-up waiter: an ``asyncRewake`` hook that exits 2 with the doorbell when rung.

``hooks/run claude wait`` is registered for Stop with ``"asyncRewake": true``
(not SessionStart: that entry is shared with another host, and a consent ends
with the process that gave it): Claude Code runs it in the background, and when it
exits 2 its stderr is shown to the model and a new turn starts (that turn's
UserPromptSubmit hook then quotes the messages inside the boundary).

* It runs only in the interactive TUI (``CLAUDE_CODE_ENTRYPOINT=cli``:
  ``claude -p`` waits for every async hook before it exits) and only while
  this session's binding has an active wake consent (``agentmsg wake on``);
  otherwise it exits 0 at once.
* One waiter per session: each new one writes its token to
  ``ROOT/wake/<pin key>.waiter`` and then takes ``<pin key>.lock``; an
  older waiter sees the token change and exits 0, so the newest (re-armed
  at every Stop) replaces it.
* A sender rings by writing ``<pin key>.ring`` (collaboration, alias and
  message ids); the waiter rebuilds the doorbell line from the store (the
  ring file's text is never printed) and exits 2 only if one of those
  messages is still unacknowledged, and never while
  a turn runs (the prompt hook noted it; the Stop hook notes its end).
* It gives up at the consent's expiry, when the consent ends, when the
  Claude Code process it runs under is gone, or after
  ``WAIT_MAX`` (below the hook timeout in hooks/hooks.json).

Lean and fail-open like the other hooks: any error exits 0 with no output.
"""

from __future__ import annotations

import os
import sys
import time

from agentmsg import fsio, records
from agentmsg.backends.file import layout
from agentmsg.backends.file.store import FileStore
from agentmsg.domain import kinds
from agentmsg.domain import wake as wake_rules
from agentmsg.hosts import claude
from agentmsg.paths import resolve_root_str
from agentmsg.runtime import doorbell, spawn
from agentmsg.runtime import facts as sessionfacts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

WAIT_MAX = 8 * 3600.0 - 60.0  # the hook's timeout is 8 h (hooks/hooks.json)
POLL = 0.1
RECHECK = 5.0  # seconds between re-reads of the consent


def _consents(store: FileStore, pin: str) -> list[tuple[str, str, wake_rules.Consent]]:
    """``(collab, alias, consent)`` for each binding of the pin whose wake consent is active now."""
    out = []
    now = time.time()
    for collab, alias, reg in store.bound(pin):
        consent = wake_rules.latest(wake_rules.fold(store.delivery_records(collab)), alias, pin)
        if consent is not None and consent.status(now, holder=reg.holder(alias), closed=reg.closed,
                                                  alive=True) == "active":
            out.append((collab, alias, consent))
    return out


def _doorbell(store: FileStore, pin: str, ring: Mapping[str, Any]) -> str | None:
    """The line to print, rebuilt from the store (never the ring file's text): None when nothing is due.

    The ring must name one of this pin's bindings and messages still
    unacknowledged there; the line counts and names those messages only.
    """
    ids, collab, alias = ring.get("messages"), ring.get("collab"), ring.get("alias")
    if not isinstance(ids, list) or (collab, alias) not in {(c, a) for c, a, _r in store.bound(pin)}:
        return None
    with store.transaction(str(collab)) as tx:
        unacked = tx.unacked_ids(str(alias))
    due = [m for m in unacked if m in set(ids)]
    return wake_rules.doorbell(len(due), str(alias), due[::-1]) if due else None


def _record(store: FileStore, ring: Mapping[str, Any], pin: str) -> None:
    """A ring that waited for the turn to end is recorded when it goes out (the sender recorded it deferred)."""
    if ring.get("queued") is not True:
        return
    with store.transaction(str(ring["collab"])) as tx:
        tx.append_delivery({"type": kinds.WAKE_RING, "consent": ring.get("consent"), "alias": ring["alias"],
                            "pin": pin, "at": time.time(), "outcome": wake_rules.RANG,
                            "mechanism": "claude-waiter (after the turn)", "messages": ring.get("messages")})


class Waiter:
    def __init__(self, root: str, pin: str) -> None:
        self.root, self.pin = root, pin
        self.token = os.urandom(16).hex()
        self.files = {s: layout.session_file(root, pin, s)
                      for s in (layout.WAITER_LOCK, layout.WAITER_TOKEN, layout.WAITER_RING)}

    def current(self) -> bool:
        raw = fsio.read_bytes(self.files[layout.WAITER_TOKEN])
        return raw is not None and raw.decode("ascii", "replace").strip() == self.token

    def run(self, store: FileStore, deadline: float) -> str | None:
        """The doorbell line once rung; None when replaced, ended or timed out."""
        fsio.ensure_dir(self.root, layout.WAKE)
        fsio.atomic_write(self.files[layout.WAITER_TOKEN], (self.token + "\n").encode(), durable=False)
        if not self.current() or time.time() >= deadline:
            return None
        # wait for an older waiter to notice it was replaced (the runtime's one lock: agentmsg.runtime.spawn)
        held = spawn.lock(self.files[layout.WAITER_LOCK], wait=deadline - time.time(), poll=POLL,
                          stop=lambda: not self.current())
        if held is None:
            return None
        checked = time.time()
        host = sessionfacts.host_process()  # the Claude Code process this hook runs under
        while time.time() < deadline and self.current():
            ring = None if sessionfacts.busy(sessionfacts.load(self.root, self.pin), time.time()) else self._take()
            line = _doorbell(store, self.pin, ring) if ring is not None else None
            if ring is not None and line:
                _record(store, ring, self.pin)
                return line
            if time.time() - checked > RECHECK:
                if not _consents(store, self.pin) or (host is not None and not sessionfacts.alive(
                        {"pid": host[0], "pid_start": host[1]})):
                    return None  # the consent ended, or the session is gone: never outlive it
                checked = time.time()
            time.sleep(POLL)
        return None

    def _take(self) -> dict[str, Any] | None:
        raw = fsio.read_bytes(self.files[layout.WAITER_RING])
        if raw is None:
            return None
        try:
            os.unlink(self.files[layout.WAITER_RING])
        except FileNotFoundError:
            return None  # another reader took it
        try:
            ring = records.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return None
        return ring if isinstance(ring, dict) and ring.get("pin") == self.pin else None


def wait(host: str, env: Mapping[str, str], raw: bytes) -> str | None:
    """Block until rung (the doorbell), or None (no consent, replaced, ended, timed out)."""
    from agentmsg.hooks.base import is_session, parse_stdin

    if not claude.interactive(env):
        return None  # `claude -p` waits for its async hooks before it exits: never hold one open
    data = parse_stdin(raw)
    session = data.get("session_id")
    if host != claude.HOST.name or not is_session(session):
        return None
    root = os.path.realpath(resolve_root_str(None, env)[0])
    if not os.path.isdir(root):
        return None
    pin = f"{claude.HOST.runtime}:{session}"
    store = FileStore(root, lock_timeout=2.0, on_wake=doorbell.nudge)
    active = _consents(store, pin)
    if not active:
        return None
    deadline = min(time.time() + WAIT_MAX, min(c.expires_at for _c, _a, c in active))
    return Waiter(root, pin).run(store, deadline)


def main(host: str) -> int:
    """0 with no output, or 2 with the doorbell on stderr (Claude Code then starts a turn)."""
    try:
        line = wait(host, os.environ, sys.stdin.buffer.read(1 << 20))
    except BaseException:  # fail open
        return 0
    if not line or "\n" in line:
        return 0
    os.write(2, (line + "\n").encode("utf-8"))
    return 2
