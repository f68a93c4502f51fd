"""The hooks' per-binding state, ``state/<alias>.hook.json``: not derivable, only reset when damaged.

Lean: the hooks import it on every prompt.
"""

from __future__ import annotations

import os

from agentmsg import fsio, records
from agentmsg.backends.file import layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agentmsg.backends.file.protocols import Txn


def hook_state(raw: bytes) -> dict[str, Any] | None:
    """A binding's hook state (``state/<alias>.hook.json``, v2) as the hooks can use it; None when damaged."""
    try:
        doc = records.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    ok = (isinstance(doc, dict) and doc.get("v") == 2 and type(doc.get("prompt")) is int
          and isinstance(doc.get("shown"), dict) and isinstance(doc.get("blocked"), list)
          and type(doc.get("rpos")) is int and all(type(v) is int for v in doc["shown"].values()))
    return doc if ok else None


def damaged_hook_states(tx: Txn) -> list[str]:
    """The hook states of this collaboration that the hooks would reset (and fail a run over)."""
    state = tx.existing("state")
    if state is None:
        return []
    out = []
    for name in sorted(os.listdir(state)):
        if name.endswith(layout.HOOK_STATE) and not name.startswith("."):
            raw = fsio.read_bytes(os.path.join(state, name))
            if raw is not None and hook_state(raw) is None:
                out.append(os.path.join(state, name))
    return out
