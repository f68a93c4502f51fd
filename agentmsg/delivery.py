"""Delivery activation: the finite, immutable envelope behind Stop continuations.

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

The top of this module is pure and imports only ``time`` (the Stop hook
folds the records with it); the functions the CLI calls import the store.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path
    from typing import Any

    from .model import Pin
    from .store import FileStore

JOURNAL = "delivery.jsonl"
ENABLED, DISABLED, SLOT = "delivery-enabled", "delivery-disabled", "delivery-slot"
PRESENTED, COMPLETE, RETRY = "presented", "attempt-complete", "retry"

DEFAULT_EXPIRES_IN = 2 * 3600.0
MAX_DURATION = 24 * 3600.0
DEFAULT_SLOTS = 20
MAX_SLOTS = 100
MAX_WAIT = 30.0  # seconds a Stop hook may hold for a request; the hooks' Stop timeout is 60 s
INTERRUPTED_AFTER = 60.0  # a claim this old with no completion is an interrupted attempt


def hook_state_name(alias: str) -> str:
    """The hook's derived per-binding state file under ``state/`` (a name no alias can take)."""
    return f"{alias}.hook.json"


def iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


class Envelope:
    """One ``delivery-enabled`` record folded with its slots and disable."""

    __slots__ = ("alias", "by", "created", "disabled", "expires_at", "hard_cap_at", "id", "pin", "slots",
                 "spent", "wait")

    def __init__(self, rec: Mapping[str, Any]) -> None:
        self.id: str = rec["envelope"]
        self.alias: str = rec["alias"]
        self.pin: str = rec["pin"]
        self.by: str = rec.get("by", rec["pin"])
        self.created: str = rec["ts"]
        self.expires_at: float = float(rec["expires_at"])
        self.hard_cap_at: float = float(rec["hard_cap_at"])
        self.slots: int = int(rec["slots"])
        self.wait: float = float(rec.get("wait", 0))
        self.spent: list[Mapping[str, Any]] = []
        self.disabled: str | None = None

    @property
    def remaining(self) -> int:
        return max(0, self.slots - len({s["slot"] for s in self.spent}))

    def status(self, now: float, *, holder: str | None, closed: bool) -> str:
        """active | disabled | closed | taken-over | left | expired | spent."""
        if self.disabled:
            return "disabled"
        if closed:
            return "closed"
        if holder != self.pin:
            return "taken-over" if holder else "left"
        if now >= min(self.expires_at, self.hard_cap_at):
            return "expired"
        if self.remaining <= 0:
            return "spent"
        return "active"

    def describe(self, now: float, *, holder: str | None, closed: bool) -> dict[str, Any]:
        return {
            "envelope": self.id, "owner": {"alias": self.alias, "pin": self.pin}, "enabled_by": self.by,
            "status": self.status(now, holder=holder, closed=closed), "created": self.created,
            "expires": iso(self.expires_at), "expires_in_seconds": max(0, int(self.expires_at - now)),
            "hard_cap": iso(self.hard_cap_at), "slots": self.slots, "spent": len({s["slot"] for s in self.spent}),
            "remaining": self.remaining, "wait_seconds": self.wait, "disabled": self.disabled,
        }


def fold(records: Iterable[Mapping[str, Any]]) -> dict[str, Envelope]:
    """Envelopes by id, oldest first.  Records for unknown envelopes are ignored."""
    envs: dict[str, Envelope] = {}
    for rec in records:
        kind = rec.get("type")
        if kind == ENABLED:
            envs[rec["envelope"]] = Envelope(rec)
        elif kind == SLOT and rec.get("envelope") in envs:
            envs[rec["envelope"]].spent.append(rec)
        elif kind == DISABLED and rec.get("envelope") in envs:
            envs[rec["envelope"]].disabled = envs[rec["envelope"]].disabled or rec["ts"]
    return envs


def latest(envs: Mapping[str, Envelope], alias: str, pin: str) -> Envelope | None:
    """The newest envelope of this exact binding."""
    found = None
    for env in envs.values():
        if env.alias == alias and env.pin == pin:
            found = env
    return found


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


# ---- what the CLI calls ---------------------------------------------------------------


def _binding(store: FileStore, collab: str, pin: Pin | str) -> tuple[Any, str]:
    from .errors import Closed

    reg = store.registry(collab)
    if reg.closed:
        raise Closed(f"collaboration {collab} was closed at {reg.closed_at}; delivery stays inert")
    from . import model

    who = pin if not isinstance(pin, str) else model.pin(pin)
    return reg, store.require_alias(reg, who)


def _records(base: Path) -> list[dict[str, Any]]:
    from .journal import Journal

    return [rec for _, rec in Journal(base / JOURNAL).scan()]


def enable(store: FileStore, collab: str, pin: Pin | str, expires_in: float = DEFAULT_EXPIRES_IN,
           max_duration: float = MAX_DURATION, slots: int = DEFAULT_SLOTS, wait: float = 0.0,
           *, now: float | None = None) -> dict[str, Any]:
    """Create the immutable envelope for this exact binding; returns ``inspect``'s ``envelope`` shape.

    Refused (Conflict) while an active envelope exists for the binding: an
    envelope is never changed, only disabled and replaced.
    """
    import uuid

    from .errors import Conflict, UsageError
    from .journal import Journal

    if not 0 < max_duration <= MAX_DURATION:
        raise UsageError(f"--max-duration must be more than 0 and at most {MAX_DURATION / 3600:g}h")
    if not 0 < expires_in <= max_duration:
        raise UsageError(f"--expires-in must be more than 0 and at most --max-duration ({max_duration:g}s)")
    if not 1 <= slots <= MAX_SLOTS:
        raise UsageError(f"--slots must be between 1 and {MAX_SLOTS}")
    if not 0 <= wait <= MAX_WAIT:
        raise UsageError(f"--wait must be between 0 and {MAX_WAIT:g}s")
    with store._locked(collab) as base:
        _reg, alias = _binding(store, collab, pin)
        who = str(pin)
        t = time.time() if now is None else now
        current = latest(fold(_records(base)), alias, who)
        if current is not None and current.status(t, holder=who, closed=False) == "active":
            raise Conflict(f"delivery is already enabled for {alias} (envelope {current.id}, expires "
                           f"{iso(current.expires_at)}); an envelope is never changed: disable it first")
        rec = Journal(base / JOURNAL).append({
            "type": ENABLED, "envelope": str(uuid.uuid4()), "collab": collab, "alias": alias, "pin": who, "by": who,
            "expires_at": int(t + expires_in), "expires": iso(t + expires_in),
            "hard_cap_at": int(t + max_duration), "hard_cap": iso(t + max_duration),
            "slots": slots, "wait": wait,
        })[1]
    return Envelope(rec).describe(t, holder=who, closed=False) | {"collab": collab}


def disable(store: FileStore, collab: str, pin: Pin | str, *, now: float | None = None) -> dict[str, Any]:
    """Disable this binding's active envelope (DeliveryInactive when there is none)."""
    from .errors import DeliveryInactive
    from .journal import Journal

    with store._locked(collab) as base:
        _reg, alias = _binding(store, collab, pin)
        who = str(pin)
        t = time.time() if now is None else now
        current = latest(fold(_records(base)), alias, who)
        status = current.status(t, holder=who, closed=False) if current else None
        if current is None or status != "active":
            raise DeliveryInactive(f"no active delivery envelope for {alias}"
                                   + (f" (the last one is {status})" if status else ""))
        rec = Journal(base / JOURNAL).append({"type": DISABLED, "envelope": current.id, "alias": alias,
                                              "pin": who, "by": who})[1]
        current.disabled = rec["ts"]
    return current.describe(t, holder=who, closed=False) | {"collab": collab}


def inspect(store: FileStore, collab: str, pin: Pin | str, *, home: str | None = None,
            codex_home: str | None = None, now: float | None = None) -> dict[str, Any]:
    """The envelope of this binding and the evidence around it.

    Returns ``{"collab", "alias", "pin", "envelope": <describe()> | None,
    "history": [<describe()>...], "interrupted": [{"attempt", "ts", "host",
    "hook", "messages"}], "last_hook_run": {"host", "event", "ts"} | None,
    "adapters": installer.detect(...)}``.  A pin that no longer holds its
    alias (takeover, leave) still sees its own envelopes, as inert.
    """
    from . import fsio, installer
    from .errors import IdentityError

    who = str(pin)
    t = time.time() if now is None else now
    reg = store.registry(collab)
    envs = fold(_records(store._cdir(collab)))
    alias = reg.alias_of(who) or next((e.alias for e in reversed(envs.values()) if e.pin == who), None)
    if alias is None:
        raise IdentityError(f"{who} is not bound in collaboration {collab} and never enabled delivery there")
    holder = reg.participants[alias].pin if alias in reg.participants and reg.participants[alias].active else None
    mine = [e for e in envs.values() if e.alias == alias and e.pin == who]
    described = [e.describe(t, holder=holder, closed=reg.closed) for e in mine]
    receipts = [rec for _, rec in store.receipts(collab, alias)]
    seen = None
    raw = fsio.read_bytes(store._cdir(collab) / "state" / hook_state_name(alias)) \
        if fsio.existing_dir(store._cdir(collab), "state") else None
    if raw:
        try:
            from .records import loads

            doc = loads(raw.decode())
            seen = doc.get("seen") if isinstance(doc, dict) and doc.get("pin") == who else None
        except (ValueError, UnicodeDecodeError):
            seen = None
    return {
        "collab": collab, "alias": alias, "pin": who,
        "envelope": described[-1] if described else None, "history": described[:-1],
        "interrupted": interrupted(receipts, t), "last_hook_run": seen,
        "adapters": installer.detect(home=home, codex_home=codex_home),
    }


def retry(store: FileStore, collab: str, pin: Pin | str, attempt: str, message: str) -> dict[str, Any]:
    """Ask the next prompt to present ``message`` again, because ``attempt`` was interrupted.

    Only the exact recipient may retry; the attempt must have claimed that
    message and never completed, and the message must still be unacknowledged.
    """
    from . import model
    from .errors import Conflict, NotFound

    attempt, message = model.as_uuid(attempt, "attempt id"), model.message_id(message)
    _reg, alias = _binding(store, collab, pin)
    found = next((a for a in attempts(rec for _, rec in store.receipts(collab, alias))
                  if a["attempt"] == attempt), None)
    if found is None or message not in found["messages"]:
        raise NotFound(f"no presented attempt {attempt} of message {message} for {alias}")
    if found["complete"]:
        raise Conflict(f"attempt {attempt} completed (its output reached the host); nothing to retry")
    if message not in found["unacked"]:
        raise Conflict(f"message {message} is already acknowledged; nothing to retry")
    rec = store.receipt(collab, alias, {"type": RETRY, "attempt": attempt, "message": message, "by": str(pin)})
    return {"collab": collab, "alias": alias, "attempt": attempt, "message": message, "recorded": rec["ts"],
            "effect": "presented again at the next prompt of this session"}
