"""``agentmsg claim``, ``release`` and ``claims`` (issue 28, docs/CLAIMS.md): reserve paths of a repository.

The rules are domain/claims.py's; this layer resolves the repository (runtime/gitrepo.py), turns pathspecs
given from the working directory into patterns relative to the repository's root, records the events in one
transaction, and rewrites the claims index the pre-tool hook reads (backends/file/claimsindex.py).
"""

from __future__ import annotations

import os
import time
from typing import Any

from agentmsg import records
from agentmsg.domain import claims, rules, validate
from agentmsg.errors import AgentmsgError, IdentityError, UsageError
from agentmsg.runtime import gitrepo
from agentmsg.service.context import Ctx

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentmsg.ports import Store

Payload = dict[str, Any]


def repository(cwd: str | None = None) -> gitrepo.Repo:
    found = gitrepo.identify(cwd or os.getcwd())
    if found is None:
        raise UsageError("not inside a git repository: claims name paths of a repository (run this inside one)")
    return found


def pattern_of(repo: gitrepo.Repo, raw: str, cwd: str) -> str:
    """A pathspec as typed (relative to ``cwd``, or absolute inside the repository) -> a pattern relative to the
    repository's root; one that leaves it is bad input."""
    text = raw.strip()
    if not text:
        return claims.normalize(text)  # the empty pattern's own line
    top = os.path.realpath(repo.top)
    if text.startswith("/"):
        absolute = os.path.normpath(text)
        real_parent = os.path.realpath(os.path.dirname(absolute)) if "*" not in absolute else absolute
        for base in (absolute, os.path.join(real_parent, os.path.basename(absolute))):
            if base == top or base.startswith(top + "/"):
                return claims.normalize(base[len(top):].lstrip("/") or ".")
        raise UsageError(f"pattern {raw[:80]!r} is outside the repository ({repo.top})")
    here = os.path.realpath(cwd)
    rel_cwd = os.path.relpath(here, top) if here == top or here.startswith(top + "/") else "."
    joined = os.path.normpath(os.path.join(rel_cwd, text))
    if joined == ".." or joined.startswith("../"):
        raise UsageError(f"pattern {raw[:80]!r} leaves the repository (..): name paths inside it")
    return claims.normalize(joined)


def _ttl(ttl: str | None) -> float:
    if ttl is None:
        return claims.TTL_DEFAULT
    return validate.duration(ttl, "--ttl", maximum=claims.TTL_MAX)


def claim(ctx: Ctx, *, collab: str | None, self_flag: str | None, patterns: list[str], shared: bool = False,
          ttl: str | None = None, reason: str | None = None, renew: bool = False, cwd: str | None = None) -> Payload:
    where = cwd or os.getcwd()
    seconds = _ttl(ttl)  # bad input first: nothing is written
    if reason is not None:
        validate.text(reason, "reason", validate.REASON_MAX_CHARS, single_line=True)
    if not patterns and not renew:
        raise UsageError("name at least one path or glob to claim (or --renew)")
    if len(patterns) > claims.PATTERNS_MAX:
        raise UsageError(f"at most {claims.PATTERNS_MAX} patterns in one claim")
    repo = repository(where)
    wanted = [pattern_of(repo, p, where) for p in patterns]
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    now = time.time()
    expires_at = round(now + seconds, 3)
    with ctx.store.transaction(cid) as tx:
        reg = rules.require_open(tx.registry())
        alias = rules.require_alias(reg, who)
        held = claims.fold(tx.events())
        if renew:
            evs = claims.renewed_events(held, alias, str(who), repo.key, wanted or None, expires_at=expires_at,
                                        now=now)
        else:
            evs = claims.claimed_events(held, alias, str(who), repo.key, dict.fromkeys(wanted), exclusive=not shared,
                                        reason=reason or "", expires_at=expires_at, now=now)
        for ev in evs:
            tx.append_event(ev)
    refresh_index(ctx, repo)
    _wake_members(ctx, cid)
    return {"collab": cid, "alias": alias, "pin": str(who), "repo": repo.key, "top": repo.top,
            "renewed": renew, "claims": [_shown(ev, cid) for ev in evs],
            "expires_at": records.iso_utc(expires_at)}


def _shown(ev: dict[str, Any], cid: str) -> Payload:
    return {"collab": cid, "alias": ev["alias"], "pattern": ev["pattern"], "repo": ev["repo"],
            "mode": "exclusive" if ev["exclusive"] else "shared", "reason": ev["reason"],
            "expires_at": records.iso_utc(ev["expires_at"])}


def release(ctx: Ctx, *, collab: str | None, self_flag: str | None, patterns: list[str], all_: bool = False,
            force: bool = False, holder: str | None = None, cwd: str | None = None) -> Payload:
    where = cwd or os.getcwd()
    if not patterns and not all_:
        raise UsageError("name the patterns to release, or --all")
    if patterns and all_:
        raise UsageError("--all releases every claim you hold: name no pattern with it")
    repo = repository(where) if patterns else None
    wanted = [pattern_of(repo, p, where) for p in patterns] if repo is not None else None
    who = ctx.who(self_flag)
    cid = ctx.collab(collab, who)
    target = validate.alias(holder) if holder else None
    if force and not who.human:
        raise IdentityError("only a human: pin may release --force")
    done: list[dict[str, Any]] = []
    with ctx.store.transaction(cid) as tx:
        reg = rules.require_open(tx.registry())
        mine = reg.alias_of(str(who))
        held = claims.fold(tx.events())
        targets = [target] if target else _holders(held, mine, repo, wanted, force)
        for t in targets:
            pats = wanted if not (force and wanted and repo) else [p for p in wanted if (t, repo.key, p) in held]
            ev = claims.released_event(held, mine, str(who), repo.key if repo else None, pats,
                                       holder=t if t != mine else None,
                                       force=force and t != mine, human=who.human)
            done.append(tx.append_event(ev))
    refresh_index(ctx, repo)
    return {"collab": cid, "by": str(who), "forced": any(ev.get("force") for ev in done),
            "released": [{"alias": ev.get("alias") or ev["target"], "repo": ev["repo"], "patterns": ev["patterns"]}
                         for ev in done]}


def _holders(held: dict[Any, claims.Claim], mine: str | None, repo: gitrepo.Repo | None, wanted: list[str] | None,
             force: bool) -> list[str | None]:
    """Whose claims a release names: one's own, or (``--force``) whoever holds the named patterns."""
    if not force or wanted is None:
        return [mine]
    found = sorted({c.alias for c in held.values() if repo is not None and c.repo == repo.key
                    and c.pattern in wanted})
    return list(found) or [mine]


def listing(ctx: Ctx, *, collab: str | None, self_flag: str | None, mine: bool = False) -> Payload:
    from agentmsg.service import readers

    who = readers.reader(ctx, self_flag)
    cid = readers.check(ctx, who, ctx.collab(collab, who))
    now = time.time()
    found = claims.live(claims.fold(ctx.store.events(cid)), now)
    reg = ctx.store.registry(cid)
    me = reg.alias_of(str(who)) if who else None
    if mine:
        if me is None:
            raise IdentityError("--mine: you hold no alias in this collaboration")
        found = [c for c in found if c.alias == me]
    here = gitrepo.find(os.getcwd())
    try:  # what the pre-tool hook reads, brought up to date (claims made on another machine too); best effort
        refresh_index(ctx)
    except (AgentmsgError, OSError):
        pass
    return {"collab": cid, "self": str(who) if who else None, "alias": me, "at": now,
            "claims": [dict(c.document(), collab=cid, until=records.iso_utc(c.expires_at)) for c in found],
            "repo_here": here[0] if here else None}


def live_claims(ctx: Ctx, cid: str, now: float | None = None) -> list[claims.Claim]:
    """The collaboration's live claims (status, roster, top)."""
    return claims.live(claims.fold(ctx.store.events(cid)), time.time() if now is None else now)


def shown(ctx: Ctx, cid: str) -> list[Payload]:
    """Status and roster: each live claim as data."""
    return [dict(c.document(), until=records.iso_utc(c.expires_at)) for c in live_claims(ctx, cid)]


def _wake_members(ctx: Ctx, cid: str) -> None:
    wake_members(ctx.store, str(ctx.root), cid)


def wake_members(store: Store, root: str, cid: str) -> None:
    """The claim is news for the other participants (hooks/claimnews.py): their next hook runs in full.  The
    events woke them already, but before the index above named the claim: a hook (or a delivery rendered
    ahead) in between read the old index and may have settled "nothing to show"."""
    from agentmsg.backends.file import idle

    try:
        pins = [p.pin for p in store.registry(cid).participants.values()]
        idle.wake(root, pins, getattr(store, "on_wake", None))
    except (AgentmsgError, OSError):  # best effort: the news waits for the next full run
        pass


def refresh_if_indexed(ctx: Ctx) -> None:
    """After a leave, kill or close: rewrite the index only when there is one (no claims: nothing to do)."""
    from agentmsg.backends.file import claimsindex

    if os.path.exists(claimsindex.path(str(ctx.root))):
        refresh_index(ctx)


def refresh_index(ctx: Ctx, repo: gitrepo.Repo | None = None) -> None:
    write_index(ctx.store, str(ctx.root), repo)


def write_index(store: Store, root: str, repo: gitrepo.Repo | None = None) -> None:
    """Rewrite ROOT/claims.json from every collaboration's records in ``store`` (removed when no claim is live):
    after a claim or release here, or when the mirror brings one made on another machine.  Each row carries the
    injection flags of the holder's words (pattern and reason), so that a refusal, which quotes them, need not
    load the scanners before a tool call."""
    from agentmsg.backends.file import claimsindex
    from agentmsg.text import injection

    now = time.time()
    rows = []
    for cid in store.collabs():
        try:
            found = claims.live(claims.fold(store.events(cid)), now)
        except (AgentmsgError, OSError, ValueError, KeyError, TypeError):  # one unreadable collaboration hides
            # no other's claims
            continue
        rows += [dict(c.document(), collab=cid, flags=list(injection.detect(f"{c.pattern}\n{c.reason}")))
                 for c in found]
    old = claimsindex.read(root) or {}
    repos = {k: v for k, v in (old.get("repos") or {}).items() if isinstance(k, str) and isinstance(v, str)}
    if repo is not None:
        repos[repo.common] = repo.key
    keys = {r["repo"] for r in rows}
    claimsindex.write(root, rows, {k: v for k, v in repos.items() if v in keys})

