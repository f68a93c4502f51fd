"""Collision notices (docs/CLAIMS.md, "Collision notices"): two participants editing one file within a short
window, neither holding a claim on it.  Pure: the hook (hooks/edited.py) hands in the file's recent entries.

An entry is an edit ``{"t", "pin", "alias", "collab"}`` or a notice given ``{"t", "pair": [pin, pin]}`` (the pair
sorted).  A notice is due for each other participant (another pin, holding another alias in a collaboration this
session is in) whose latest edit is within :data:`WINDOW` seconds, unless a notice for the same pair was given
within the window: so notices are bounded (at most one per pair and file per window) and never repeat.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

#: Seconds within which two edits of one file by two participants collide (hcom's figure).
WINDOW = 30.0
#: At most this many other editors are named in one notice.
OTHERS_MAX = 5


def window(env: Mapping[str, str]) -> float:
    """The window: ``AGENTMSG_COLLISION_WINDOW`` seconds (1 to 3600), else :data:`WINDOW`."""
    try:
        return min(3600.0, max(1.0, float(env.get("AGENTMSG_COLLISION_WINDOW") or WINDOW)))
    except ValueError:
        return WINDOW


def pair(a: str, b: str) -> list[str]:
    return sorted((a, b))


def due(entries: Iterable[Mapping[str, Any]], *, pin: str, mine: Mapping[str, str], now: float,
        window: float = WINDOW) -> list[dict[str, Any]]:
    """The other editors this edit collides with (newest edit of each), oldest first, at most OTHERS_MAX."""
    latest: dict[str, dict[str, Any]] = {}
    noticed: set[tuple[str, ...]] = set()
    for e in entries:
        t = e.get("t")
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not now - window <= t <= now + 1:
            continue
        got = e.get("pair")
        if isinstance(got, list) and len(got) == 2 and all(isinstance(p, str) for p in got):
            noticed.add(tuple(got))
            continue
        who, alias, collab = e.get("pin"), e.get("alias"), e.get("collab")
        if not (isinstance(who, str) and isinstance(alias, str) and isinstance(collab, str)):
            continue
        if who == pin or collab not in mine or mine[collab] == alias:
            continue  # one's own edit, a stranger's (no shared collaboration), or one's own alias under a new pin
        if who not in latest or latest[who]["t"] <= t:
            latest[who] = dict(e)
    out = [e for who, e in latest.items() if tuple(pair(pin, who)) not in noticed]
    return sorted(out, key=lambda e: e["t"])[:OTHERS_MAX]
