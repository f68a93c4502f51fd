"""A consent: a finite, immutable permission one binding gives, folded from its records.

Two kinds share it: the Stop-delivery envelope (``domain.envelope``: continuation slots) and the wake
consent (``domain.wake``: rings, bounded per hour and per run of rings).  Each is given to one exact
binding (collaboration + alias + pin), with an expiry and a hard cap it can never pass.  Nothing renews or
changes it; withdrawing it, closing the collaboration, a takeover (another pin holds the alias) or its
expiry end it, and giving it again writes a new one.  What it permits is used up in numbered, durable uses
(a slot, a ring), never given back.

Pure and lean (imports only ``time``): the hooks fold consents on every prompt and stop.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any, TypeVar

    C = TypeVar("C", bound="Consent")


def iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


class Consent:
    """The part every consent has: its owner, its bounds in time, and whether it was withdrawn."""

    __slots__ = ("alias", "created", "expires_at", "hard_cap_at", "id", "pin", "withdrawn")
    #: The record field that holds a consent's id, and the word its ``status`` uses once withdrawn.
    ID_FIELD = "consent"
    WITHDRAWN = "off"

    def __init__(self, rec: Mapping[str, Any]) -> None:
        self.id: str = rec[self.ID_FIELD]
        self.alias: str = rec["alias"]
        self.pin: str = rec["pin"]
        self.created: str = rec["ts"]
        self.expires_at: float = float(rec["expires_at"])
        self.hard_cap_at: float = float(rec.get("hard_cap_at", rec["expires_at"]))
        self.withdrawn: str | None = None  # when it was withdrawn (the first withdrawal counts)

    def withdraw(self, ts: str) -> None:
        self.withdrawn = self.withdrawn or ts

    def ended(self, now: float, *, holder: str | None, closed: bool) -> str | None:
        """Why it no longer holds (withdrawn, closed, taken-over, left, expired), or None."""
        return why_ended(self.WITHDRAWN if self.withdrawn else None, self.pin, holder=holder, closed=closed,
                         expired=now >= min(self.expires_at, self.hard_cap_at))

    def bounds(self, now: float) -> dict[str, Any]:
        """The fields every consent describes alike."""
        return {"owner": {"alias": self.alias, "pin": self.pin}, "created": self.created,
                "expires": iso(self.expires_at), "expires_in_seconds": max(0, int(self.expires_at - now))}


def why_ended(withdrawn: str | None, pin: str, *, holder: str | None, closed: bool, expired: bool) -> str | None:
    """Why a consent no longer holds, in the order each is checked."""
    if withdrawn:
        return withdrawn
    if closed:
        return "closed"
    if holder != pin:
        return "taken-over" if holder else "left"
    return "expired" if expired else None


def fold(records: Iterable[Mapping[str, Any]], kind: type[C], *, given: str, withdrawn: str,
         used: Mapping[str, str] = {}) -> dict[str, C]:
    """Consents of ``kind`` by id, oldest first: ``given`` starts one, ``withdrawn`` ends it, and each record
    type in ``used`` is handed to the method it names.  Records of unknown consents are ignored."""
    found: dict[str, C] = {}
    for rec in records:
        rtype = rec.get("type")
        if rtype == given:
            found[rec[kind.ID_FIELD]] = kind(rec)
            continue
        consent = found.get(str(rec.get(kind.ID_FIELD, "")))
        if consent is None:
            continue
        if rtype == withdrawn:
            consent.withdraw(rec["ts"])
        elif rtype in used:
            getattr(consent, used[str(rtype)])(rec)
    return found


def latest(folded: Mapping[str, C], alias: str, pin: str) -> C | None:
    """The newest consent of a fold given to this exact binding."""
    found = None
    for item in folded.values():
        if item.alias == alias and item.pin == pin:
            found = item
    return found
