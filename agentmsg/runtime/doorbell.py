"""Ring the resident helper (``agentmsg/resident/helper.py``), starting it when none runs; and what it runs now.

Every writer that woke a pin (``backends/file/idle.wake``, the store's ``on_wake``) and every full hook run calls
:func:`nudge`.  Only pins whose session recorded facts (``idle/<runtime>/<session>.env``: a hook ran
for it with rendering ahead on) count; for them one line naming the pin goes to ``idle/helper.fifo``.
Opening a FIFO for writing without blocking fails (``ENXIO``) when no process holds it open for
reading, which is exactly "no helper runs": then one is started from the session's own facts (the
interpreter and the hook script its hook ran, so the helper renders with the hook's own code), detached,
with an empty environment, output discarded.  Two writers racing both start one; the second finds the
helper's lock taken, hands it the pins and exits.  On a replica root the helper is its mirror, which renders
too: it is rung, never started here (the full hooks start it, ``ensure_mirror``).

Lean: the writers and the hooks import it (``os``; nothing is spawned unless needed).
"""

from __future__ import annotations

import os

from agentmsg.backends.file import ahead, layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any


RENDER, RETRY, MIRROR, CLI = "render", "retry", "mirror", "cli"  # the helper's duties
RING_RETRY, LEAVE = "+", "-"  # doorbell lines besides pins: a deferred ring waits; leave (agentmsg sync takes over)
WHY = {RENDER: "renders each session's next prompt delivery ahead",
       RETRY: "rings deferred wake-ups again (each at most 5 min)",
       MIRROR: "keeps this replica root current and pushes the hooks' outbox",
       CLI: "runs agentmsg commands for the thin client"}


def nudge(root: str, pins: Iterable[str]) -> bool:
    """Tell the helper these pins may need a new delivery; start it if none runs.  True if started."""
    replica = os.path.isfile(os.path.join(root, layout.REPLICA))
    named = []
    for pin in pins:
        at = ahead.base(root, pin) if isinstance(pin, str) else None
        if at is not None and os.path.exists(at + ahead.FACTS):
            named.append(pin)
    if not named or ahead.ring(root, named) != "absent" or replica:
        return False  # rung; or a replica root, whose helper is its mirror (rung, never started here)
    for pin in named:
        found = ahead.facts(root, pin)
        if found is not None and spawn(root, pin, found):
            return True
    return False


def command(root: str, pin: str, facts: dict[str, Any]) -> list[str] | None:
    """The helper's command line from a session's facts, or None when they do not name a usable one."""
    python, hook, host = facts.get("python"), facts.get("hook"), facts.get("host")
    if not (isinstance(python, str) and python.startswith("/") and os.access(python, os.X_OK)):
        return None
    if not (isinstance(hook, str) and hook.startswith("/") and hook.endswith("/agentmsg_hook.py")
            and os.path.isfile(hook)):
        return None
    if not isinstance(host, str) or not host.isalpha():
        return None
    return [python, "-I", "-S", hook, host, "helper", root, pin]


def spawn(root: str, pin: str, facts: dict[str, Any]) -> bool:
    """Start the helper detached (:func:`agentmsg.runtime.spawn.spawn_detached`), no environment but ``PATH``."""
    argv = command(root, pin, facts)
    from agentmsg.runtime.spawn import spawn_detached  # only when one is started: not on every hook run

    return argv is not None and spawn_detached(argv, env={"PATH": os.defpath}) is not None


def state(root: str) -> dict[str, object] | None:
    """For ``status``: whether this root's helper renders, and how many sessions have a delivery rendered ahead
    or a claim not yet folded; None when no session here ever recorded facts for it."""
    idle = os.path.join(root, layout.IDLE)
    if not os.path.isdir(idle) or os.path.islink(idle):
        return None
    pins = list(ahead.sessions(root))
    running = RENDER in (duties(root) or ())
    if not running and not pins and next(ahead.sessions(root, (ahead.FACTS,)), None) is None:
        return None
    return {"running": running, "ready": sum(1 for p in pins if ahead.current(root, p)),
            "claims": sum(1 for p in pins if ahead.claim(root, p) is not None)}


# ---- what runs, and starting it for a ring or a mirror ------------------------------------------------


def is_replica(root: str) -> bool:
    return os.path.isfile(os.path.join(root, layout.REPLICA))


def running(root: str) -> bool:
    from agentmsg.runtime import spawn as process

    return process.running(ahead.root_file(root, ahead.LOCK))


def duties(root: str) -> set[str] | None:
    """The running helper's duties (its pid file's second line), or None when none runs."""
    found = helper_info(root)
    return found[0] if found is not None else None


def helper_info(root: str) -> tuple[set[str], str] | None:
    """The running helper's duties and tag (its pid file's second and third lines), or None when none runs."""
    if not running(root):
        return None
    from agentmsg import fsio

    path = ahead.root_file(root, ahead.PID)
    raw = fsio.read_bytes(path) if os.path.isfile(path) else None
    lines = (raw or b"").decode("utf-8", "replace").splitlines()
    return (set(lines[1].split()) if len(lines) > 1 else set()), (lines[2] if len(lines) > 2 else "")


def mirror_wanted(root: str, env: Mapping[str, str]) -> bool:
    """Whether this root should be mirrored: a store URL is configured, or the root is marked a replica.
    ``AGENTMSG_NO_MIRROR=1`` says no (tests that drive ``agentmsg sync`` themselves)."""
    if env.get("AGENTMSG_NO_MIRROR"):
        return False
    return bool(env.get("AGENTMSG_STORE")) or is_replica(root)


def mirroring(root: str) -> bool:
    """Whether a helper that mirrors runs for ``root``."""
    return MIRROR in (duties(root) or ())


def ensure_mirror(root: str, env: Mapping[str, str], command: Sequence[str]) -> bool:
    """Start ``command sync --root ROOT`` (with ``env``: the store's URL) unless a helper that mirrors runs; a
    helper without that duty leaves when it starts.  True if one was started."""
    if not mirror_wanted(root, env) or mirroring(root):
        return False
    from agentmsg.runtime import spawn as process

    return process.spawn_detached([*command, "sync", "--root", root], env=env) is not None


def ensure_for_retries(root: str, env: Mapping[str, str], command: Sequence[str]) -> bool:
    """Wake the helper for a waiting ring, or start one: the mirror on a mirrored root, else from a session's
    facts (the hooks' own code), else ``PYTHON -m agentmsg.resident.helper ROOT``.  True if one was started."""
    if ahead.ring(root, [RING_RETRY]) != "absent":
        return False
    if mirror_wanted(root, env):
        return ensure_mirror(root, env, command)
    from agentmsg.runtime import spawn as process

    for pin in ahead.sessions(root, (ahead.FACTS,)):
        found = ahead.facts(root, pin)
        if found is not None and spawn(root, pin, found):
            return True
    import sys

    return process.spawn_detached([sys.executable, "-m", "agentmsg.resident.helper", root], env=env) is not None


def mirror_state(root: str) -> dict[str, object] | None:
    """For ``status``: whether this root mirrors a store, whether its helper mirrors it, the outbox's length."""
    from agentmsg.backends.file import outbox, replica

    marked = replica.replica_of(root) if os.path.isdir(root) else None
    if marked is None:
        return None
    return {"replica_of": marked, "running": mirroring(root), "outbox": len(outbox.pending(root))}


def status(root: str) -> dict[str, object]:
    """The helper's status line: what runs, since when, and why; and how many deferred rings wait for it."""
    from agentmsg.runtime import retries
    from agentmsg.runtime import spawn as process

    now = duties(root)
    waiting = retries.count(root)
    rings = f" ({waiting} deferred ring(s) waiting)" if waiting else ""
    if now is None:
        return {"process": "helper", "running": False, "duties": [], "waiting": waiting,
                "line": f"helper: not running{rings}"}
    why = "; ".join(WHY[d] for d in (RENDER, MIRROR, RETRY, CLI) if d in now) + "; exits when idle"
    lock, pid = ahead.root_file(root, ahead.LOCK), ahead.root_file(root, ahead.PID)
    return {"process": "helper", "running": True, "duties": sorted(now), "waiting": waiting,
            "line": process.describe("helper", lock, pid, why) + rings}


def processes(root: str) -> list[dict[str, object]]:
    """What agentmsg runs in the background for ``root`` now, for ``status``: the resident helper where this root
    has used one (it runs; a session recorded facts for it; a ring waits for it; a replica), and Claude Code's
    wake-up waiters where it has any, each with its status line."""
    from agentmsg.runtime.spawn import running as held

    helper = status(root)
    used = (helper["running"] or helper["waiting"] or is_replica(root)
            or next(ahead.sessions(root, (ahead.FACTS,)), None) is not None)
    out: list[dict[str, object]] = [helper] if used else []
    wake = os.path.join(root, layout.WAKE)
    try:
        names = sorted(os.listdir(wake)) if not os.path.islink(wake) else []
    except OSError:
        names = []
    waiters = [os.path.join(wake, n) for n in names if n.endswith("." + layout.WAITER_LOCK)]
    if waiters:
        count = sum(1 for p in waiters if held(p))
        why = "Claude Code's asyncRewake hook, waiting for a ring (started by Claude Code)"
        out.append({"process": "wake-up waiter", "running": count > 0, "count": count,
                    "line": f"wake-up waiter: {count} running: {why}" if count else "wake-up waiter: not running"})
    return out
