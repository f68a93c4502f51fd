"""Ring the resident renderer of deliveries ahead (``agentmsg/runtime/renderer.py``), starting it when none runs.

Every writer that woke a pin (``backends/file/idle.wake``, the store's ``on_wake``) and every full hook run calls
:func:`nudge`.  Only pins whose session recorded facts (``idle/<runtime>/<session>.env``: a hook ran
for it with rendering ahead on) count; for them one line naming the pin goes to ``idle/ahead.fifo``.
Opening a FIFO for writing without blocking fails (``ENXIO``) when no process holds it open for
reading, which is exactly "no renderer runs": then one is started from the session's own facts (the
interpreter and the hook script its hook ran, so the renderer is the hook's own code), detached, with
an empty environment, output discarded.  Two writers racing both start one; the second finds the
renderer's lock taken, settles what it can and exits.

Lean: the writers and the hooks import it (``os``; nothing is spawned unless needed).
"""

from __future__ import annotations

import os

from agentmsg.backends.file import ahead, layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


def nudge(root: str, pins: Iterable[str]) -> bool:
    """Tell the renderer these pins may need a new delivery; start it if none runs.  True if started."""
    named = []
    for pin in pins:
        at = ahead.base(root, pin) if isinstance(pin, str) else None
        if at is not None and os.path.exists(at + ahead.FACTS):
            named.append(pin)
    if not named or ahead.ring(root, named) != "absent":
        return False
    for pin in named:
        found = ahead.facts(root, pin)
        if found is not None and spawn(root, pin, found):
            return True
    return False


def command(root: str, pin: str, facts: dict[str, Any]) -> list[str] | None:
    """The renderer's command line from a session's facts, or None when they do not name a usable one."""
    python, hook, host = facts.get("python"), facts.get("hook"), facts.get("host")
    if not (isinstance(python, str) and python.startswith("/") and os.access(python, os.X_OK)):
        return None
    if not (isinstance(hook, str) and hook.startswith("/") and hook.endswith("/agentmsg_hook.py")
            and os.path.isfile(hook)):
        return None
    if not isinstance(host, str) or not host.isalpha():
        return None
    return [python, "-I", "-S", hook, host, "ahead", root, pin]


def spawn(root: str, pin: str, facts: dict[str, Any]) -> bool:
    """Start the renderer detached (:func:`agentmsg.runtime.spawn.spawn_detached`), no environment but ``PATH``."""
    argv = command(root, pin, facts)
    from agentmsg.runtime.spawn import spawn_detached  # only when one is started: not on every hook run

    return argv is not None and spawn_detached(argv, env={"PATH": os.defpath}) is not None


def state(root: str) -> dict[str, object] | None:
    """For ``status``: whether this root's renderer runs, and how many sessions have a delivery rendered ahead
    or a claim not yet folded; None when no session here ever recorded facts for it."""
    idle = os.path.join(root, layout.IDLE)
    if not os.path.isdir(idle) or os.path.islink(idle):
        return None
    pins = list(ahead.sessions(root))
    from agentmsg.runtime.spawn import running as spawn_running

    running = spawn_running(ahead.root_file(root, ahead.LOCK))
    if not running and not pins and next(ahead.sessions(root, (ahead.FACTS,)), None) is None:
        return None
    return {"running": running, "ready": sum(1 for p in pins if ahead.current(root, p)),
            "claims": sum(1 for p in pins if ahead.claim(root, p) is not None)}
