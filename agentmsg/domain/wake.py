"""Wake consent: a finite, immutable permission to ring an idle session, folded from its records.

``agentmsg wake on`` writes one consent for one exact binding (collaboration
+ alias + pin), holding the session facts its hooks recorded (host, host pid
and start time, tmux pane, Claude socket, Codex thread).  Like a delivery
envelope it is never renewed or changed: expiry (default 8 h, at most 24 h),
``wake off``, ``close``, takeover (another pin holds the alias) and the
recorded host process being gone end it; a new ``wake on`` writes a new one.

A ring carries only :func:`doorbell`, a fixed line of counts, ids and an
alias, never sender text; the prompt hook then quotes the messages inside the
boundary.  Bounds (all decided here, by :func:`decide`):

* a ring is *pending* from when it rang until the recipient's next prompt
  (at most ``PENDING_FOR``); new mail meanwhile is merged into it;
* at least ``MIN_GAP`` seconds between rings, at most ``HOURLY_CAP`` an hour;
* at most ``CONSECUTIVE_CAP`` rings without a human prompt (a
  UserPromptSubmit whose prompt is not a doorbell), which ends two agents
  waking each other forever.

Records (``delivery.jsonl``, written by ``service/wake.py`` and the hooks):

* ``wake-on``: consent, alias, pin, expires_at, facts, by
* ``wake-off``: consent, alias, pin, by
* ``wake-ring``: consent, alias, pin, at, outcome (``rang``/``deferred``/...), mechanism, messages
* ``wake-prompt``: consent, alias, pin, at, human (bool)

Pure and lean (imports only ``time``): the hooks fold it on every prompt.
"""

from __future__ import annotations

import time

from agentmsg.domain.envelope import (
    latest as latest,  # the newest consent of this exact binding: one rule for both folds
)
from agentmsg.domain.envelope import why_ended
from agentmsg.domain.kinds import WAKE_OFF, WAKE_ON, WAKE_PROMPT, WAKE_RING

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any

DEFAULT_EXPIRES_IN = 8 * 3600.0
MAX_DURATION = 24 * 3600.0
MIN_GAP = 2.0  # seconds between two rings of one binding
HOURLY_CAP = 30
CONSECUTIVE_CAP = 8
PENDING_FOR = 120.0  # a ring nobody answered within this is treated as lost: the next send may ring again
RANG = "rang"
DOORBELL_PREFIX = "agentmsg: "
DOORBELL_MARK = " quoted below."
IDS_SHOWN = 5


def iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def doorbell(count: int, alias: str, ids: Sequence[str]) -> str:
    """The only text a ring carries: a count, validated ids and the recipient's alias."""
    shown = ", ".join(ids[:IDS_SHOWN]) + (", …" if len(ids) > IDS_SHOWN else "")
    return (f"{DOORBELL_PREFIX}{count} new message{'s' * (count != 1)} for {alias} (ids {shown}); "
            f"they are quoted below.")


def is_doorbell(prompt: object) -> bool:
    """Whether a prompt was started by a ring (its text holds a doorbell line), not typed by a person."""
    if not isinstance(prompt, str):
        return False
    at = prompt.find(DOORBELL_PREFIX)
    return at >= 0 and " new message" in prompt[at:at + 80] and DOORBELL_MARK in prompt[at:]


class Consent:
    """One ``wake-on`` record folded with its rings, the prompts that answered them, and its ``wake-off``."""

    __slots__ = ("alias", "consecutive", "created", "expires_at", "facts", "hard_cap_at", "id", "last_ring",
                 "off", "pending_since", "pin", "rings")

    def __init__(self, rec: Mapping[str, Any]) -> None:
        self.id: str = rec["consent"]
        self.alias: str = rec["alias"]
        self.pin: str = rec["pin"]
        self.created: str = rec["ts"]
        self.expires_at: float = float(rec["expires_at"])
        self.hard_cap_at: float = float(rec.get("hard_cap_at", rec["expires_at"]))
        facts = rec.get("facts")
        self.facts: dict[str, Any] = dict(facts) if isinstance(facts, dict) else {}
        self.off: str | None = None
        self.rings: list[float] = []  # when each ring rang
        self.last_ring: Mapping[str, Any] | None = None
        self.consecutive = 0  # rings since the last human prompt
        self.pending_since: float | None = None

    def add_ring(self, rec: Mapping[str, Any]) -> None:
        self.last_ring = rec
        if rec.get("outcome") == RANG:
            at = float(rec.get("at", 0))
            self.rings.append(at)
            self.consecutive += 1
            self.pending_since = at

    def add_prompt(self, rec: Mapping[str, Any]) -> None:
        self.pending_since = None
        if rec.get("human") is True:
            self.consecutive = 0

    def status(self, now: float, *, holder: str | None, closed: bool, alive: bool = True) -> str:
        """active | off | closed | taken-over | left | expired | host-gone."""
        ended = why_ended("off" if self.off else None, self.pin, holder=holder, closed=closed,
                          expired=now >= min(self.expires_at, self.hard_cap_at))
        if ended:
            return ended
        return "active" if alive else "host-gone"

    def pending(self, now: float) -> bool:
        return self.pending_since is not None and now - self.pending_since < PENDING_FOR

    def hourly(self, now: float) -> int:
        return sum(1 for at in self.rings if now - at < 3600.0)

    def describe(self, now: float, *, holder: str | None, closed: bool, alive: bool = True) -> dict[str, Any]:
        return {
            "consent": self.id, "owner": {"alias": self.alias, "pin": self.pin},
            "status": self.status(now, holder=holder, closed=closed, alive=alive), "created": self.created,
            "expires": iso(self.expires_at), "expires_in_seconds": max(0, int(self.expires_at - now)),
            "off": self.off, "facts": self.facts, "consecutive": self.consecutive,
            "consecutive_cap": CONSECUTIVE_CAP, "rings_last_hour": self.hourly(now), "hourly_cap": HOURLY_CAP,
            "pending": self.pending(now),
            "last_ring": ({k: self.last_ring.get(k) for k in ("ts", "outcome", "mechanism", "messages")}
                          if self.last_ring else None),
        }


def fold(records: Iterable[Mapping[str, Any]]) -> dict[str, Consent]:
    """Consents by id, oldest first.  Records of unknown consents are ignored."""
    found: dict[str, Consent] = {}
    for rec in records:
        kind = rec.get("type")
        if kind == WAKE_ON:
            found[rec["consent"]] = Consent(rec)
            continue
        consent = found.get(str(rec.get("consent", "")))
        if consent is None:
            continue
        if kind == WAKE_RING:
            consent.add_ring(rec)
        elif kind == WAKE_PROMPT:
            consent.add_prompt(rec)
        elif kind == WAKE_OFF:
            consent.off = consent.off or rec["ts"]
    return found




def decide(consent: Consent | None, now: float, *, holder: str | None, closed: bool, alive: bool,
           busy: bool) -> str | None:
    """None when a ring may go out now; otherwise why not, in the words ``send`` reports."""
    if consent is None:
        return "wake off"
    status = consent.status(now, holder=holder, closed=closed, alive=alive)
    if status != "active":
        return f"wake off ({status})"
    if consent.consecutive >= CONSECUTIVE_CAP:
        return f"capped ({consent.consecutive} consecutive wakes without a human prompt)"
    if consent.hourly(now) >= HOURLY_CAP:
        return f"capped ({HOURLY_CAP} wakes in the last hour)"
    if consent.pending(now):
        return "merged (a ring is pending)"
    if busy:
        return "recipient busy (its turn is running; the hooks show the message)"
    if consent.rings and now - consent.rings[-1] < MIN_GAP:
        return f"deferred (at most one ring per {MIN_GAP:g} s)"
    return None
