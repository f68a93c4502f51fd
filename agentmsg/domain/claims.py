"""Claims: a participant reserves paths of a repository (issue 28, docs/CLAIMS.md).  Pure rules, stdlib only.

**The record.**  A ``claimed`` event names one pattern of one repository, exclusive or shared, with a
reason and an expiry (epoch seconds); the same holder claiming the same pattern again replaces its earlier
claim (that is how ``claim --renew`` extends one).  A ``released`` event drops the named patterns (or all of
the holder's claims in one repository, or everywhere); ``force`` marks a ``human:`` pin releasing another's.
A holder who leaves, or is killed, releases its claims; closing the collaboration releases every claim.
Nothing renews a claim on its own: past ``expires_at`` it is simply no longer live.

**The glob rule** (gitignore-style, every pattern anchored at the repository's root):

* a pattern is ``/``-separated and relative to the root; ``./`` and a trailing ``/`` are dropped;
* ``*`` matches any run of characters within one path segment, ``?`` one character, ``[abc]``/``[a-z]``/
  ``[!a]`` one character of a class, ``\\x`` the character ``x`` itself;
* a segment that is exactly ``**`` matches zero or more whole segments;
* a pattern that matches a directory covers everything beneath it (``src`` covers ``src/retry.py``).

Two patterns **overlap** when some path is covered by both (:func:`overlap`): that is the conflict test, so
``src/*.py`` overlaps ``src/retry.py``, ``src`` and ``**/retry.py``, but not ``docs/*``.  Where it cannot tell
(a negated class against another class), it says they overlap: a conflict is the safe answer.

**A repository** is its root commit (``root:<sha>``, the first commit, so clones and worktrees of one
repository agree) or, before any commit, its git common directory (``gitdir:<path>``).  Claims in different
repositories never collide.
"""

from __future__ import annotations

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


def escape(path: str) -> str:
    """A literal path as a pattern that matches only it."""
    return "".join("\\" + c if c in "*?[\\" else c for c in path)


if TYPE_CHECKING:
    Token = tuple[str, Any]  # ("c", char) | ("?", None) | ("*", None) | ("[", (negated, chars, ranges))
    Key = tuple[str, str, str]  # (alias, repo, pattern)


def _tokens(segment: str) -> list[Token]:
    out: list[Token] = []
    i, n = 0, len(segment)
    while i < n:
        c = segment[i]
        if c == "\\" and i + 1 < n:
            out.append(("c", segment[i + 1]))
            i += 2
            continue
        if c == "*":
            if not (out and out[-1][0] == "*"):
                out.append(("*", None))
        elif c == "?":
            out.append(("?", None))
        elif c == "[":
            end = segment.find("]", i + 2)
            if end < 0:
                out.append(("c", c))
            else:
                body = segment[i + 1:end]
                neg = body[:1] in ("!", "^")
                body = body[1:] if neg else body
                chars, ranges, j = set(), [], 0
                while j < len(body):
                    if j + 2 < len(body) and body[j + 1] == "-":
                        ranges.append((body[j], body[j + 2]))
                        j += 3
                    else:
                        chars.add(body[j])
                        j += 1
                out.append(("[", (neg, frozenset(chars), tuple(ranges))))
                i = end + 1
                continue
        else:
            out.append(("c", c))
        i += 1
    return out


def _in_class(cls: tuple[bool, frozenset[str], tuple[tuple[str, str], ...]], ch: str) -> bool:
    neg, chars, ranges = cls
    hit = ch in chars or any(a <= ch <= b for a, b in ranges)
    return hit != neg


def _one_char(a: Token, b: Token) -> bool:
    """Could one character match both single-character tokens?  Unsure (two classes): yes."""
    if a[0] == "?" or b[0] == "?":
        return True
    if a[0] == "c" and b[0] == "c":
        return bool(a[1] == b[1])
    if a[0] == "c":
        return _in_class(b[1], a[1])
    if b[0] == "c":
        return _in_class(a[1], b[1])
    na, ca, ra = a[1]
    nb, cb, rb = b[1]
    if na or nb:
        return True
    if ca & cb or any(_in_class(b[1], c) for c in ca) or any(_in_class(a[1], c) for c in cb):
        return True
    return any(x1 <= y2 and y1 <= x2 for x1, x2 in ra for y1, y2 in rb)


def _segments_meet(p: list[Token], q: list[Token]) -> bool:
    """Does some string (one segment) match both token lists?"""
    memo: dict[tuple[int, int], bool] = {}

    def go(i: int, j: int) -> bool:
        key = (i, j)
        if key in memo:
            return memo[key]
        memo[key] = False
        if i == len(p) and j == len(q):
            res = True
        elif i < len(p) and p[i][0] == "*":
            res = go(i + 1, j) or (j < len(q) and go(i, j + 1))
        elif j < len(q) and q[j][0] == "*":
            res = go(i, j + 1) or (i < len(p) and go(i + 1, j))
        elif i < len(p) and j < len(q):
            res = _one_char(p[i], q[j]) and go(i + 1, j + 1)
        else:
            res = False
        memo[key] = res
        return res

    return go(0, 0)


def _split(pattern: str) -> list[str]:
    out: list[str] = []
    for seg in pattern.split("/"):
        if seg == "**" and out and out[-1] == "**":
            continue
        out.append(seg)
    return out


def overlap(a: str, b: str) -> bool:
    """Is some path covered by both patterns (each covers what it matches and everything beneath)?"""
    p = [(s, _tokens(s)) for s in _split(a)]
    q = [(s, _tokens(s)) for s in _split(b)]
    memo: dict[tuple[int, int], bool] = {}

    def go(i: int, j: int) -> bool:
        key = (i, j)
        if key in memo:
            return memo[key]
        memo[key] = False
        if i == len(p) or j == len(q):
            res = True  # one matched a directory the other's remainder lies beneath (or both ended)
        elif p[i][0] == "**":
            res = go(i + 1, j) or go(i, j + 1)
        elif q[j][0] == "**":
            res = go(i, j + 1) or go(i + 1, j)
        else:
            res = _segments_meet(p[i][1], q[j][1]) and go(i + 1, j + 1)
        memo[key] = res
        return res

    return go(0, 0)


def covers(pattern: str, path: str) -> bool:
    """Does ``pattern`` cover the literal ``path`` (or a path beneath it, or a directory it names)?"""
    return overlap(pattern, escape(path))


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
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


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
