"""A session's presence, and what a send to it means (docs/LIFECYCLE.md).

Decided from what the session's own hooks left on this machine (its host process, checked by pid and start
time; the times of its last prompt or tool call and of its last Stop) and whether its wake-up consent is
active.  Pure: the reading is ``runtime/presence.py``'s.  Presence never decides whether a message is stored.
"""

from __future__ import annotations

from agentmsg.domain.values import Value

WORKING, IDLE, LISTENING, GONE, UNKNOWN = "working", "idle", "listening", "gone", "unknown"
STATES = (WORKING, IDLE, LISTENING, GONE, UNKNOWN)
#: A turn with no Stop after this long is taken as ended (a crashed turn, a host killed mid-turn).
TURN_FOR = 1800.0
HUMAN, NEVER, REMOTE = "a person, not a session", "its hooks never ran on this machine", "on another machine"
#: The states one machine reports of a session its hooks ran on, for the others (through the store).
REPORTED = (WORKING, IDLE, LISTENING, GONE)
#: A report older than this says nothing any more: the session is ``unknown`` (on another machine) again.
#: Mirrors report every few seconds while anything changes and at least every ``REPORT_EVERY``.
REPORT_FOR, REPORT_EVERY = 90.0, 30.0


class Presence(Value):
    """``state``; ``why`` it is ``unknown`` or ``gone``; ``last``: its last sign of activity (a time, or None)."""

    __slots__ = ("last", "state", "why")
    state: str
    why: str
    last: float | None

    def __init__(self, state: str, why: str = "", last: float | None = None) -> None:
        self.state, self.why, self.last = state, why, last


def decide(*, human: bool, seen: bool, remote: bool, alive: bool | None, turn_at: float | None,
           rest_at: float | None, listening: bool, now: float) -> Presence:
    """The state of one session.  ``alive``: its recorded host process still runs (None: none recorded)."""
    if human:
        return Presence(UNKNOWN, HUMAN)
    last = max((t for t in (turn_at, rest_at) if t is not None), default=None)
    if not seen:
        return Presence(UNKNOWN, REMOTE if remote else NEVER)
    if alive is False:
        return Presence(GONE, "its host process has ended", last)
    if turn_at is not None and (rest_at is None or turn_at > rest_at) and now - turn_at < TURN_FOR:
        return Presence(WORKING, "", last)
    return Presence(LISTENING if listening else IDLE, "", last)


def report(p: Presence, pin: str, now: float) -> dict[str, object] | None:
    """What this machine tells the store of ``pin``'s session (None: its hooks never ran here).  Times go as
    ages (``quiet``: seconds since its last activity), so no two machines' clocks are ever compared."""
    if p.state not in REPORTED or p.why == REMOTE:
        return None
    return {"pin": pin, "state": p.state, "quiet": None if p.last is None else round(max(0.0, now - p.last), 1)}


def from_report(rep: object, pin: str, now: float) -> Presence | None:
    """``pin``'s session on another machine, from the last report this root's mirror pulled (``age``: how old
    it was by the store's clock, ``pulled_at``: when, by this one's); None when there is none, it names
    another pin (the alias moved), or it is too old to say anything."""
    if not isinstance(rep, dict) or rep.get("pin") != pin or rep.get("state") not in REPORTED:
        return None
    old, pulled, quiet = (_seconds(rep.get(k)) for k in ("age", "pulled_at", "quiet"))
    if old is None or pulled is None:
        return None
    since = old + max(0.0, now - pulled)
    if since > REPORT_FOR:
        return None
    return Presence(str(rep["state"]), REMOTE, None if quiet is None else now - since - quiet)


def _seconds(x: object) -> float | None:
    """A finite, non-negative number from a report (never a bool), else None."""
    if type(x) is int or type(x) is float:
        return float(x) if 0 <= x < 1e10 else None  # NaN and infinity too
    return None


def age(seconds: float) -> str:
    """``12 s``, ``5 min``, ``2 h``, ``3 d``: how long ago, for a line a person reads."""
    s = max(0, int(seconds))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if s >= size:
            return f"{s // size} {unit}"
    return f"{s} s"


def next_step(p: Presence, alias: str, *, rang: bool, midturn: bool, now: float) -> str:
    """What happens to a message just stored for ``alias``, in one line: ``reviewer is idle: ...``."""
    if p.state == GONE:
        ago = f" {age(now - p.last)} ago" if p.last is not None else ""
        return (f"{alias}'s session ended{ago}: it sees this when the session is resumed, or when a new "
                f"session takes over {alias} (agentmsg join --succeeds)")
    if p.state == UNKNOWN:
        if p.why == HUMAN:
            return f"{alias} is a person: they see this with agentmsg inbox"
        if p.why == REMOTE:
            return f"{alias} is on another machine: it sees this at its next prompt there"
        return f"{alias}'s hooks never ran here: it sees this at its session's next prompt, or with agentmsg inbox"
    if p.why == REMOTE:
        return f"{alias} is {p.state} on another machine: it sees this at its next prompt there"
    if rang:
        return f"{alias} is {p.state}: rang, so it sees this now"
    if p.state == WORKING:
        return f"{alias} is working: it sees this {'after its next tool call' if midturn else 'at its next prompt'}"
    return f"{alias} is {p.state}: it sees this at its next prompt"
