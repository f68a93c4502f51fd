"""Claims news (docs/CLAIMS.md, "Told before it edits"): the live exclusive claims other participants of this
session's collaborations hold, each told once, at the session's start, its next prompt or its next tool call.

A claim or a release is an event of the collaboration, and every event voids the fast-path markers of every
participant (backends/file/placed.py), so the next hook runs in full and asks here.  What was told is kept in
``edits/<pin key>.told`` (local: the claims' keys; a claim renewed, or made again, is news again).  Read only
when the claims index exists (one ``stat`` otherwise).  Lean.
"""

from __future__ import annotations

import os
import time

from agentmsg import fsio, records
from agentmsg.backends.file import layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: Claims named in one hook's text, at most.
SHOWN_MAX = 5


def told_path(root: str, pin: str) -> str:
    return os.path.join(root, layout.EDITS, layout.pin_key(pin) + layout.TOLD)


def _key(c: Mapping[str, Any]) -> str:
    return "|".join(str(c.get(k)) for k in ("collab", "alias", "repo", "pattern", "expires_at"))


def held_by_others(root: str, pin: str, mine: Mapping[str, str], now: float | None = None) -> tuple[
        list[dict[str, Any]], dict[str, str]]:
    """``(claims, repos)``: live exclusive claims others of ``mine``'s collaborations hold, and the index's map
    of git directories to repository keys; nothing without an index (or a damaged one: the refusal still
    works, or fails open, on its own)."""
    path = os.path.join(root, layout.CLAIMS)
    if not os.path.isfile(path):
        return [], {}
    try:
        doc = records.loads(fsio.read_bytes(path) or b"null")
    except (OSError, ValueError):
        return [], {}
    if not isinstance(doc, dict) or not isinstance(doc.get("claims"), list) or not isinstance(doc.get("repos"), dict):
        return [], {}
    at = time.time() if now is None else now
    out = [c for c in doc["claims"] if isinstance(c, dict) and c.get("collab") in mine
           and c.get("mode") == "exclusive" and c.get("pin") != pin and c.get("alias") != mine[c["collab"]]
           and isinstance(c.get("expires_at"), (int, float)) and at < c["expires_at"]
           and isinstance(c.get("pattern"), str)]
    return sorted(out, key=lambda c: c["expires_at"]), doc["repos"]


def untold(root: str, pin: str, mine: Mapping[str, str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                                    dict[str, str]]:
    """``(news, live, repos)``: the claims not told to this session yet, and every live one."""
    live, repos = held_by_others(root, pin, mine)
    if not live:
        return [], [], repos
    raw = fsio.read_bytes(told_path(root, pin)) if os.path.lexists(told_path(root, pin)) else None
    try:
        told = set(records.loads(raw)) if raw else set()
    except (ValueError, TypeError):
        told = set()
    return [c for c in live if _key(c) not in told], live, repos


def mark_told(root: str, pin: str, live: list[dict[str, Any]]) -> None:
    """Remember what is live now as told (what ended drops out; no claim left: the file goes)."""
    path = told_path(root, pin)
    if not live:
        if os.path.lexists(path):
            os.unlink(path)
        return
    fsio.ensure_dir(root, layout.EDITS)
    fsio.atomic_write(path, records.dumps_plain(sorted({_key(c) for c in live})).encode(), durable=False)


def render(news: list[dict[str, Any]], repos: Mapping[str, str], cli: str, *, here: str | None = None) -> str:
    """agentmsg's line per claim (holder, repository, until when, the command to ask), then the holder's pattern
    and reason inside the untrusted boundary."""
    from agentmsg.domain import claims
    from agentmsg.text import boundary, injection

    where = {key: common for common, key in repos.items()}
    n = len(news)
    out = [f"agentmsg: {n} exclusive claim{'s' * (n != 1)} held by other participants of this session's "
           f"collaborations; the pre-tool hook refuses this session's edits of a claimed path until it is "
           f"released or expires.\n"]
    for c in news[:SHOWN_MAX]:
        alias, pin = boundary.one_line(str(c.get("alias")))[:32], boundary.one_line(str(c.get("pin")))[:140]
        repo = where.get(str(c.get("repo")))
        top = repo[:-len("/.git")] if repo and repo.endswith("/.git") else repo
        place = ("this session's repository" if here is not None and c.get("repo") == here
                 else f"the repository at {boundary.one_line(top)}" if top
                 else f"repository {boundary.one_line(str(c.get('repo')))[:60]}")
        fields = [("claim", str(c["pattern"]))] + ([("reason", str(c["reason"]))] if c.get("reason") else [])
        out.append(f"- held by {alias} ({pin}) in {place} until {claims.until(float(c['expires_at']))}, "
                   f"collaboration {c['collab']}; to ask: {cli} send --collab {c['collab']} --to {alias} "
                   f"--kind request --subject 'may I edit ...?' --body '...'\n"
                   + boundary.peer_fields(fields, injection.detect("\n".join(v for _, v in fields)),
                                          f"{alias} ({pin}), the claim's holder") + "\n")
    if n > SHOWN_MAX:
        out.append(f"{n - SHOWN_MAX} more: `{cli} claims` lists them.\n")
    return "".join(out)


def news(root: str, pin: str, mine: Mapping[str, str], cli: str, cwd: object = None) -> str:
    """The text for claims not told yet (then marked told), or ""; ``cwd`` (the session's, from the hook's
    input) names "this session's repository" (a ``git`` process only when there is news and the index does not
    know the repository)."""
    fresh, live, repos = untold(root, pin, mine)
    if not live and not os.path.lexists(told_path(root, pin)):
        return ""
    mark_told(root, pin, live)
    if not fresh:
        return ""
    here = None
    if isinstance(cwd, str) and os.path.isdir(cwd):
        from agentmsg.runtime import gitrepo

        found = gitrepo.identify(cwd, repos)
        here = found.key if found is not None else None
    return render(fresh, repos, cli, here=here)
