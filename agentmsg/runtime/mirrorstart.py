"""Start ``agentmsg sync`` when a root that mirrors a remote store has no mirror running.

Nobody starts the mirror by hand: the CLI (when ``AGENTMSG_STORE`` names a
remote store) and the hooks (on a replica root, or with ``AGENTMSG_STORE``
set) call :func:`ensure`.  It probes ``ROOT/mirror.lock`` with a
non-blocking ``flock`` (microseconds) and, only when nobody holds it,
spawns the mirror detached, output discarded (both: :mod:`agentmsg.runtime.spawn`).  Two callers racing both
spawn; the second mirror finds the lock taken and exits at once.

Lean: the hooks import it (``os``; ``fcntl`` only to probe).
``AGENTMSG_NO_MIRROR=1`` turns it off (tests that drive ``agentmsg sync`` themselves).
"""

from __future__ import annotations

import os

from agentmsg.backends.file import layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


def wanted(root: str, env: Mapping[str, str]) -> bool:
    """Whether this root should have a mirror: a store URL is configured, or the root is marked a replica."""
    if env.get("AGENTMSG_NO_MIRROR"):
        return False
    return bool(env.get("AGENTMSG_STORE")) or os.path.isfile(os.path.join(root, layout.REPLICA))


def running(root: str) -> bool:
    """True while a mirror holds the root's lock (a lock file that does not exist is held by nobody)."""
    from agentmsg.runtime import spawn  # only where a mirror is wanted: not on every hook run

    return spawn.running(os.path.join(root, layout.MIRROR_LOCK))


def ensure(root: str, env: Mapping[str, str], command: Sequence[str]) -> bool:
    """Spawn ``command sync --root ROOT`` detached unless a mirror runs; True if one was started."""
    if not wanted(root, env) or running(root):
        return False
    from agentmsg.runtime import spawn

    return spawn.spawn_detached([*command, "sync", "--root", root], env=env) is not None


def state(root: str) -> dict[str, object] | None:
    """For ``status``: whether this root mirrors a store, whether its mirror runs, and the outbox's length."""
    from agentmsg.backends.file import outbox, replica

    marked = replica.replica_of(root) if os.path.isdir(root) else None
    if marked is None:
        return None
    return {"replica_of": marked, "running": running(root), "outbox": len(outbox.pending(root))}
