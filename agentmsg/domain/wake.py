"""Wake consent: a finite, immutable permission (``domain.consent``) to ring an idle session, folded from its
records.

``agentmsg wake on`` writes one consent for one exact binding (collaboration
+ alias + pin), holding the session facts its hooks recorded (host, host pid
and start time, tmux pane, a host's peer socket or thread).  Like a delivery
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

from agentmsg.domain import consent as base
from agentmsg.domain.consent import iso as iso
from agentmsg.domain.consent import latest as latest  # the newest consent of this exact binding
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


class Consent(base.Consent):
    """One ``wake-on`` record folded with its rings, the prompts that answered them, and its ``wake-off``:
    a consent whose uses are rings."""

    __slots__ = ("consecutive", "facts", "last_ring", "pending_since", "rings")

    def __init__(self, rec: Mapping[str, Any]) -> None:
        super().__init__(rec)
        facts = rec.get("facts")
        self.facts: dict[str, Any] = dict(facts) if isinstance(facts, dict) else {}
        self.rings: list[float] = []  # when each ring rang
        self.last_ring: Mapping[str, Any] | None = None
        self.consecutive = 0  # rings since the last human prompt
        self.pending_since: float | None = None

    @property
    def off(self) -> str | None:
        return self.withdrawn

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
        ended = self.ended(now, holder=holder, closed=closed)
        if ended:
            return ended
        return "active" if alive else "host-gone"

    def pending(self, now: float) -> bool:
        return self.pending_since is not None and now - self.pending_since < PENDING_FOR

    def hourly(self, now: float) -> int:
        return sum(1 for at in self.rings if now - at < 3600.0)

    def describe(self, now: float, *, holder: str | None, closed: bool, alive: bool = True) -> dict[str, Any]:
        bounds = self.bounds(now)
        return {
            "consent": self.id, "owner": bounds["owner"],
            "status": self.status(now, holder=holder, closed=closed, alive=alive), "created": self.created,
            "expires": bounds["expires"], "expires_in_seconds": bounds["expires_in_seconds"],
            "off": self.off, "facts": self.facts, "consecutive": self.consecutive,
            "consecutive_cap": CONSECUTIVE_CAP, "rings_last_hour": self.hourly(now), "hourly_cap": HOURLY_CAP,
            "pending": self.pending(now),
            "last_ring": ({k: self.last_ring.get(k) for k in ("ts", "outcome", "mechanism", "messages")}
                          if self.last_ring else None),
        }


def fold(records: Iterable[Mapping[str, Any]]) -> dict[str, Consent]:
    """Consents by id, oldest first.  Records of unknown consents are ignored."""
    return base.fold(records, Consent, given=WAKE_ON, withdrawn=WAKE_OFF,
                     used={WAKE_RING: "add_ring", WAKE_PROMPT: "add_prompt"})


#: Why a consent no longer rings, in words (a ``wake off (STATUS)`` outcome).
WHY_OFF = {"off": "the recipient turned wake-ups off", "expired": "the recipient's wake consent expired",
           "closed": "the collaboration is closed", "taken-over": "another session took the recipient's alias over",
           "left": "the recipient left", "host-gone": "the recipient's host process has ended"}


def said(outcome: str) -> str | None:
    """A ring's outcome as ``send`` words it for people (issue 30), or None when there is nothing to say: wake was
    never turned on for the recipient.  The outcome itself (``--json``) is unchanged."""
    if outcome == "wake off":
        return None
    if outcome.startswith("wake off (") and outcome.endswith(")"):
        status = outcome[len("wake off ("):-1]
        return f"not rung: {WHY_OFF.get(status, status)}"
    return outcome


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
