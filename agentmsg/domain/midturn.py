"""Mid-turn delivery: which messages a PostToolUse hook may show between tool calls, and how often.

Opt-in per exact binding (collaboration + alias + pin): the newest
``delivery-midturn`` record in ``delivery.jsonl`` for that alias and pin is
the setting; a takeover (another pin) starts with none.  By default only
``--priority high`` messages qualify, and injections are at least
``min_gap`` seconds apart.  What is shown is presented, never acknowledged,
exactly as at a prompt (same cap, same boundary).

Pure and lean (no imports beyond ``kinds``): the PostToolUse hook folds the
records with it after every tool call that the launcher's fast path did not
answer.
"""

from __future__ import annotations

from agentmsg.domain.kinds import HIGH, MIDTURN

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from agentmsg.domain.values import Message

ALL = "all"
PRIORITIES = (HIGH, ALL)
DEFAULT_PRIORITY = HIGH
DEFAULT_GAP = 60.0
MAX_GAP = 3600.0


class Setting:
    """One binding's mid-turn setting, from its newest ``delivery-midturn`` record."""

    __slots__ = ("alias", "by", "min_gap", "on", "pin", "priority", "ts")

    def __init__(self, rec: Mapping[str, Any]) -> None:
        self.alias: str = rec["alias"]
        self.pin: str = rec["pin"]
        self.on: bool = rec.get("on") is True
        priority = rec.get("priority")
        self.priority: str = priority if isinstance(priority, str) and priority in PRIORITIES else DEFAULT_PRIORITY
        gap = rec.get("min_gap")
        self.min_gap: float = DEFAULT_GAP
        if isinstance(gap, (int, float)) and not isinstance(gap, bool) and 0 <= gap <= MAX_GAP:
            self.min_gap = float(gap)
        self.by: str = rec.get("by", self.pin)
        self.ts: str = rec.get("ts", "")

    def wants(self, msg: Message) -> bool:
        """Whether this message may interrupt a turn (``high``: only ``--priority high`` messages)."""
        return self.priority == ALL or msg.priority == HIGH

    def may_inject(self, last: float | None, now: float) -> bool:
        """At least ``min_gap`` seconds since this binding's last mid-turn injection."""
        return last is None or now - last >= self.min_gap

    def describe(self) -> dict[str, Any]:
        return {"on": self.on, "priority": self.priority, "min_gap_seconds": self.min_gap, "set": self.ts,
                "set_by": self.by}


def latest(records: Iterable[Mapping[str, Any]], alias: str, pin: str) -> Setting | None:
    """The newest setting of this exact binding, or None (never set: mid-turn delivery is off)."""
    found = None
    for rec in records:
        if rec.get("type") == MIDTURN and rec.get("alias") == alias and rec.get("pin") == pin:
            found = rec
    return Setting(found) if found is not None else None


def active(records: Iterable[Mapping[str, Any]], alias: str, pin: str, *, holder: str | None,
           closed: bool) -> Setting | None:
    """The setting if it is on and the binding still holds (not closed, not taken over, not left)."""
    setting = latest(records, alias, pin)
    if setting is None or not setting.on or closed or holder != pin:
        return None
    return setting
