"""The Stop-delivery envelope: a finite, immutable consent (``domain.consent``), folded from its records.

``enable`` writes one envelope for one exact binding (collaboration + alias
+ pin): an expiry (default 2 h), a hard cap it can never pass (24 h), a
number of continuation slots (default 20) and a reply wait (default none).
Nothing renews or changes it: not peer messages, notifications, replays or
continuations.  Expiry, ``disable``, ``close`` and takeover (another pin now
holds the alias) make it inert; a new ``enable`` writes a new envelope.

Each Stop continuation spends one slot with a durable record before the
hook prints anything; slots are numbered and never reused.

Records live in ``collabs/<uuid>/delivery.jsonl`` (the usual hash-chained
record format, written under the collaboration's write lock):

* ``delivery-enabled``: envelope, alias, pin, expires_at, hard_cap_at
  (Unix seconds, plus ISO text), slots, wait, by
* ``delivery-disabled``: envelope, alias, pin, by
* ``delivery-slot``: envelope, slot (1, 2, ...), alias, pin, host, attempt,
  messages

Presented attempts live in the recipient's receipts (``presented`` per
message, then one ``attempt-complete`` after the hook printed); a claim with
no completion is an interrupted attempt, and ``retry`` records a ``retry``
receipt so the next prompt shows that message again.

Pure, and lean (imports only ``time``): the Stop hook folds the records
with it on every stop.  The service (``service/delivery.py``) writes them.
"""

from __future__ import annotations

import time

from agentmsg.domain import consent
from agentmsg.domain.consent import iso as iso
from agentmsg.domain.consent import latest as latest
from agentmsg.domain.consent import why_ended as why_ended
from agentmsg.domain.kinds import COMPLETE, DISABLED, ENABLED, PRESENTED, RETRY, SLOT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

DEFAULT_EXPIRES_IN = 2 * 3600.0
MAX_DURATION = 24 * 3600.0
DEFAULT_SLOTS = 20
MAX_SLOTS = 100
MAX_WAIT = 30.0  # seconds a Stop hook may hold for a request; the hooks' Stop timeout is 60 s
INTERRUPTED_AFTER = 60.0  # a claim this old with no completion is an interrupted attempt


class Envelope(consent.Consent):
    """One ``delivery-enabled`` record folded with its slots and disable: a consent whose uses are slots."""

    __slots__ = ("by", "slots", "spent", "wait")
    ID_FIELD = "envelope"
    WITHDRAWN = "disabled"

    def __init__(self, rec: Mapping[str, Any]) -> None:
        super().__init__(rec)
        self.by: str = rec.get("by", rec["pin"])
        self.slots: int = int(rec["slots"])
        self.wait: float = float(rec.get("wait", 0))
        self.spent: list[Mapping[str, Any]] = []

    @property
    def disabled(self) -> str | None:
        return self.withdrawn

    def use(self, rec: Mapping[str, Any]) -> None:
        self.spent.append(rec)

    @property
    def remaining(self) -> int:
        return max(0, self.slots - len({s["slot"] for s in self.spent}))

    def status(self, now: float, *, holder: str | None, closed: bool) -> str:
        """active | disabled | closed | taken-over | left | expired | spent."""
        ended = self.ended(now, holder=holder, closed=closed)
        if ended:
            return ended
        return "spent" if self.remaining <= 0 else "active"

    def describe(self, now: float, *, holder: str | None, closed: bool) -> dict[str, Any]:
        bounds = self.bounds(now)
        return {
            "envelope": self.id, "owner": bounds["owner"], "enabled_by": self.by,
            "status": self.status(now, holder=holder, closed=closed), "created": self.created,
            "expires": bounds["expires"], "expires_in_seconds": bounds["expires_in_seconds"],
            "hard_cap": iso(self.hard_cap_at), "slots": self.slots, "spent": len({s["slot"] for s in self.spent}),
            "remaining": self.remaining, "wait_seconds": self.wait, "disabled": self.disabled,
        }


def fold(records: Iterable[Mapping[str, Any]]) -> dict[str, Envelope]:
    """Envelopes by id, oldest first.  Records for unknown envelopes are ignored."""
    return consent.fold(records, Envelope, given=ENABLED, withdrawn=DISABLED, used={SLOT: "use"})


def attempts(receipts: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Presented attempts, oldest first, each with completion, retries and acks folded in."""
    by_id: dict[str, dict[str, Any]] = {}
    done: set[str] = set()
    retried: set[tuple[str, str]] = set()
    acked: set[str] = set()
    for rec in receipts:
        kind = rec.get("type")
        if kind == PRESENTED and rec.get("attempt"):
            att = by_id.setdefault(rec["attempt"], {"attempt": rec["attempt"], "ts": rec["ts"],
                                                    "host": rec.get("host"), "hook": rec.get("hook"),
                                                    "messages": []})
            att["messages"].append(rec["message"])
        elif kind == COMPLETE:
            done.add(rec.get("attempt", ""))
        elif kind == RETRY:
            retried.add((rec.get("attempt", ""), rec.get("message", "")))
        elif kind == "ack":
            acked.add(rec.get("message", ""))
    out = []
    for att in by_id.values():
        att["complete"] = att["attempt"] in done
        att["retried"] = [m for m in att["messages"] if (att["attempt"], m) in retried]
        att["unacked"] = [m for m in att["messages"] if m not in acked]
        out.append(att)
    return out


def interrupted(receipts: Iterable[Mapping[str, Any]], now: float,
                grace: float = INTERRUPTED_AFTER) -> list[dict[str, Any]]:
    """Attempts claimed but never completed (older than ``grace``), with messages still to retry."""
    out = []
    for att in attempts(receipts):
        if att["complete"] or now - _epoch(att["ts"]) < grace:
            continue
        retry = [m for m in att["unacked"] if m not in att["retried"]]
        if retry:
            out.append({"attempt": att["attempt"], "ts": att["ts"], "host": att["host"], "hook": att["hook"],
                        "messages": retry})
    return out


def _epoch(ts: str) -> float:
    import calendar

    whole = calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S"))
    frac = ts[19:].rstrip("Z")
    return whole + (float(frac) if frac.startswith(".") and frac[1:].isdigit() else 0.0)


