"""The detached retrier of a deferred ring (``python -m agentmsg.runtime.retrier ROOT COLLAB ALIAS``).

Started by :func:`agentmsg.runtime.wakeup.retry_later`; it asks the service to ring again (its consent and
bounds decide), so it sits above the service layer while the ring mechanisms it uses sit below it.
"""

from __future__ import annotations

import time

from agentmsg import fsio
from agentmsg.backends.file import layout
from agentmsg.runtime import doorbell, spawn
from agentmsg.runtime.wakeup import RETRY_EVERY, RETRY_FOR


def retry(root: str, collab: str, alias: str) -> int:
    """Ring again every second until it rings, or it may no longer (consent, cap, acks), or RETRY_FOR."""
    from agentmsg.backends.file.store import FileStore
    from agentmsg.service import wake

    fsio.ensure_dir(root, layout.WAKE)
    held = spawn.lock(layout.retry_lock(root, collab, alias))
    if held is None:
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

    raise SystemExit(retry(*sys.argv[1:4]))
