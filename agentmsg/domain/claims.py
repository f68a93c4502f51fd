"""Claims: a participant reserves paths of a repository (issue 28, docs/CLAIMS.md).  Pure rules, stdlib only.

**The record.**  A ``claimed`` event names one pattern of one repository, exclusive or shared, with a
reason and an expiry (epoch seconds); the same holder claiming the same pattern again replaces its earlier
claim (that is how ``claim --renew`` extends one).  A ``released`` event drops the named patterns (or all of
the holder's claims in one repository, or everywhere); ``force`` marks a ``human:`` pin releasing another's.
A holder who leaves, or is killed, releases its claims; closing the collaboration releases every claim.
Nothing renews a claim on its own: past ``expires_at`` it is simply no longer live.

**The glob rule** is domain/globs.py's: gitignore-style, every pattern anchored at the repository's root.

Two patterns **overlap** when some path is covered by both (:func:`overlap`): that is the conflict test, so
``src/*.py`` overlaps ``src/retry.py``, ``src`` and ``**/retry.py``, but not ``docs/*``.  Where it cannot tell
(a negated class against another class), it says they overlap: a conflict is the safe answer.

**A repository** is its root commit (``root:<sha>``, the first commit, so clones and worktrees of one
repository agree) or, before any commit, its git common directory (``gitdir:<path>``).  Claims in different
repositories never collide.
"""

from __future__ import annotations

from agentmsg.domain.globs import covers, escape, overlap
from agentmsg.domain.values import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

CLAIMED, RELEASED = "claimed", "released"
#: A claim's lifetime when none is given, and the longest one may be (``claim --ttl``).
TTL_DEFAULT, TTL_MAX = 1800.0, 86400.0
#: The longest pattern, and the most patterns one command may name.
PATTERN_MAX, PATTERNS_MAX = 512, 64


def _errors() -> Any:
    from agentmsg import errors

    return errors


class Claim(Value):
    """One live or expired claim: who holds which pattern of which repository, how, why, until when."""

    __slots__ = ("alias", "at", "exclusive", "expires_at", "pattern", "pin", "reason", "repo")
    alias: str
    pin: str
    repo: str
    pattern: str
    exclusive: bool
    reason: str
    expires_at: float
    at: str

    def __init__(self, alias: str, pin: str, repo: str, pattern: str, exclusive: bool, reason: str,
                 expires_at: float, at: str = "") -> None:
        self.alias, self.pin, self.repo, self.pattern = alias, pin, repo, pattern
        self.exclusive, self.reason, self.expires_at, self.at = exclusive, reason, expires_at, at

    def live(self, now: float) -> bool:
        return now < self.expires_at

    @property
    def mode(self) -> str:
        return "exclusive" if self.exclusive else "shared"

    def document(self) -> dict[str, Any]:
        return {"alias": self.alias, "pin": self.pin, "repo": self.repo, "pattern": self.pattern,
                "mode": self.mode, "reason": self.reason, "expires_at": self.expires_at, "at": self.at}


# ---- patterns ------------------------------------------------------------------------------------------------


def normalize(pattern: str) -> str:
    """A pattern as recorded: relative to the repository's root, ``/``-separated, no ``.`` segment, no
    trailing ``/``.  Empty, absolute, or escaping the root (``..``) is bad input (exit 2, nothing written)."""
    usage = _errors().UsageError
    raw = pattern.strip()
    if not raw:
        raise usage("an empty pattern claims nothing: name a path or a glob relative to the repository's root")
    if len(raw) > PATTERN_MAX or any(c in raw for c in "\n\r\t\x00"):
        raise usage(f"pattern {raw[:40]!r}: at most {PATTERN_MAX} characters on one line")
    if raw.startswith("/"):
        raise usage(f"pattern {raw[:80]!r} is absolute: name it relative to the repository's root")
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise usage(f"pattern {raw[:80]!r} leaves the repository (..): name paths inside it")
    if not parts:
        raise usage(f"pattern {raw[:40]!r} names the repository's root itself: name what you mean to claim "
                    "(** claims everything)")
    return "/".join(parts)


if TYPE_CHECKING:
    Key = tuple[str, str, str]  # (alias, repo, pattern)


# ---- the fold --------------------------------------------------------------------------------------------------


def fold(events: Iterable[Mapping[str, Any]]) -> dict[Key, Claim]:
    """Every claim the events leave standing (live or expired), keyed by holder, repository and pattern."""
    held: dict[Key, Claim] = {}
    for ev in events:
        kind = ev.get("type")
        if kind == CLAIMED:
            key = (ev["alias"], ev["repo"], ev["pattern"])
            held[key] = Claim(ev["alias"], ev.get("pin", ""), ev["repo"], ev["pattern"], bool(ev.get("exclusive")),
                              ev.get("reason") or "", float(ev["expires_at"]), ev.get("ts", ""))
        elif kind == RELEASED:
            alias, repo, pats = ev.get("alias") or ev.get("target"), ev.get("repo"), ev.get("patterns")
            held = {k: c for k, c in held.items()
                    if not (k[0] == alias and (repo is None or k[1] == repo) and (pats is None or k[2] in pats))}
        elif kind in ("left", "killed"):
            gone = ev.get("target") if kind == "killed" else ev.get("alias")
            held = {k: c for k, c in held.items() if k[0] != gone}
        elif kind == "closed":
            held = {}
    return held


def live(held: Mapping[Key, Claim], now: float) -> list[Claim]:
    return sorted((c for c in held.values() if c.live(now)), key=lambda c: (c.repo, c.pattern, c.alias))


# ---- who may claim and release ------------------------------------------------------------------------------------


def conflicts(held: Iterable[Claim], alias: str, repo: str, pattern: str, exclusive: bool, now: float) -> list[Claim]:
    """Another participant's live claims that this one would conflict with: an exclusive claim conflicts with any
    overlapping claim, a shared one only with an exclusive one."""
    return [c for c in held if c.alias != alias and c.repo == repo and c.live(now)
            and (exclusive or c.exclusive) and overlap(c.pattern, pattern)]


def until(t: float) -> str:
    from agentmsg.records import utc_words

    return utc_words(t)


def conflict_line(c: Claim, pattern: str) -> str:
    why = f" ({c.reason})" if c.reason else ""
    return (f"{pattern} is held by {c.alias} ({c.pin}): {c.mode} claim on {c.pattern}{why} until "
            f"{until(c.expires_at)}")


def claimed_events(held: Mapping[Key, Claim], alias: str, pin: str, repo: str, patterns: Iterable[str], *,
                   exclusive: bool, reason: str, expires_at: float, now: float) -> list[dict[str, Any]]:
    """The events one ``claim`` records, or Conflict (exit 5) naming the first holder in the way."""
    live_claims = [c for c in held.values() if c.live(now)]
    out = []
    for pattern in patterns:
        found = conflicts(live_claims, alias, repo, pattern, exclusive, now)
        if found:
            raise _errors().Conflict(conflict_line(found[0], pattern))
        out.append({"type": CLAIMED, "alias": alias, "pin": pin, "repo": repo, "pattern": pattern,
                    "exclusive": exclusive, "reason": reason, "expires_at": expires_at})
    return out


def renewed_events(held: Mapping[Key, Claim], alias: str, pin: str, repo: str | None, patterns: Iterable[str] | None,
                   *, expires_at: float, now: float) -> list[dict[str, Any]]:
    """``claim --renew``: the holder's live claims (in ``repo``, of ``patterns`` when given) again, to a new expiry."""
    wanted = set(patterns) if patterns is not None else None
    mine = [c for k, c in sorted(held.items()) if k[0] == alias and c.live(now)
            and (repo is None or c.repo == repo) and (wanted is None or c.pattern in wanted)]
    if not mine:
        raise _errors().NotFound(f"{alias} holds no live claim to renew" + (" here" if repo else ""))
    return [{"type": CLAIMED, "alias": alias, "pin": pin, "repo": c.repo, "pattern": c.pattern,
             "exclusive": c.exclusive, "reason": c.reason, "expires_at": expires_at} for c in mine]


def released_event(held: Mapping[Key, Claim], who_alias: str | None, who_pin: str, repo: str | None,
                   patterns: list[str] | None, *, holder: str | None = None, force: bool = False,
                   human: bool = False) -> dict[str, Any]:
    """What one ``release`` records.  Releasing another participant's claim is refused (exit 9) unless a
    ``human:`` pin forces it; a release that matches nothing is NotFound (exit 3)."""
    errors = _errors()
    target = holder or who_alias
    if target is None:
        raise errors.IdentityError(f"{who_pin} holds no alias here, so no claim to release")
    if target != who_alias and not (force and human):
        raise errors.IdentityError(f"the claim is {target}'s, not yours: ask {target} to release it "
                                   "(a human: pin may release --force)")
    if force and not human:
        raise errors.IdentityError("only a human: pin may release --force")
    mine = [k for k in held if k[0] == target and (repo is None or k[1] == repo)]
    if patterns is not None:
        missing = [p for p in patterns if not any(k[2] == p for k in mine)]
        if missing and target == who_alias and holder is None:
            others = [c for c in held.values() if c.alias != target and c.pattern == missing[0]
                      and (repo is None or c.repo == repo)]
            if others:
                raise errors.IdentityError(f"{missing[0]} is claimed by {others[0].alias}, not you: ask them to "
                                           "release it (a human: pin may release --force --holder ALIAS)")
        if missing:
            raise errors.NotFound(f"{target} holds no claim on {missing[0]}")
    elif not mine:
        raise errors.NotFound(f"{target} holds no claim" + (" in this repository" if repo else ""))
    if force:  # a person's, bound to no role: the holder is the event's target, as a kill's is
        return {"type": RELEASED, "target": target, "by": who_pin, "repo": repo, "patterns": patterns, "force": True}
    return {"type": RELEASED, "alias": target, "by": who_pin, "repo": repo, "patterns": patterns}


__all__ = ["covers", "escape", "overlap"]  # the glob rule, domain/globs.py's: re-exported for callers of claims
