"""Naming a collaboration the way people do, and listing them in plain words (issue 30, finding 4).

Wherever a collaboration id is accepted (every ``--collab``, ``AGENTMSG_COLLAB``, the MCP tools' ``collab``),
:func:`resolve` also accepts a unique label or a unique id prefix of at least :data:`PREFIX_MIN` characters:

1. a canonical UUID is taken as it is (an unknown one is then not found, as before);
2. else a collaboration whose label is exactly the text;
3. else one whose id starts with the text (case ignored).

Several matches are narrowed, first to the collaborations the acting pin is a current member of, then to the
open ones; if more than one is left, the name is ambiguous (exit 2, the candidates listed).  Names are only ever
compared with stored labels and ids: no path is built from them.  This module is the one place that does it.
"""

from __future__ import annotations

import re
from typing import Any

from agentmsg.domain import validate
from agentmsg.domain.values import Pin, Registry
from agentmsg.errors import AgentmsgError, UsageError
from agentmsg.ports import Store

#: The shortest id prefix accepted (8 hex digits: the UUID's first group).
PREFIX_MIN = 8
_PREFIX_RE = re.compile(r"[0-9a-f-]+")


def resolve(store: Store, text: str, who: Pin | None = None) -> str:
    """The collaboration id ``text`` names: an id, else a unique label, else a unique id prefix."""
    try:
        return validate.collab_id(text)
    except UsageError:
        pass
    regs = registries(store)
    found = [r for r in regs if r.label == text]
    what = "label"
    if not found and len(text) >= PREFIX_MIN and _PREFIX_RE.fullmatch(text.lower()):
        found, what = [r for r in regs if r.collab.startswith(text.lower())], "id prefix"
    found = _narrow(found, who)
    if len(found) == 1:
        return found[0].collab
    if found:
        shown = "; ".join(_candidate(r) for r in found)
        raise UsageError(f"collaboration {text[:64]!r} is ambiguous: {len(found)} match that {what} ({shown}); "
                         "pass the id")
    raise _unnamed(text)


def _unnamed(text: str) -> UsageError:
    """Nothing matches: the line starts as a malformed id's always did (it may be one), then says what else works."""
    try:
        validate.as_uuid(text, "collaboration id")
    except UsageError as exc:
        if "canonical" in str(exc):
            return exc
    short = " (an id prefix needs at least 8 characters)" if len(text) < PREFIX_MIN and _PREFIX_RE.fullmatch(
        text.lower()) else ""
    return UsageError(f"invalid collaboration id {str(text)[:40]!r}: expected a UUID, a label or an id prefix, and "
                     f"no collaboration has that label or id prefix{short}; agentmsg collabs lists them")


def _narrow(found: list[Registry], who: Pin | None) -> list[Registry]:
    if len(found) > 1 and who is not None:
        found = [r for r in found if r.alias_of(str(who))] or found
    if len(found) > 1:
        found = [r for r in found if not r.closed] or found
    return found


def _candidate(r: Registry) -> str:
    return f"{r.collab} {r.label!r}" + (" closed" if r.closed else "")


def registries(store: Store) -> list[Registry]:
    """Every collaboration's registry the store lets this machine read; a damaged one is left out
    (``agentmsg verify`` reports it) so that it cannot stop every other name from resolving."""
    out = []
    for cid in store.collabs():
        try:
            out.append(store.registry(cid))
        except AgentmsgError:
            continue
    return out


def row(store: Store, cid: str, who: Pin | None) -> dict[str, Any]:
    """One collaboration as ``agentmsg collabs`` lists it: id, label, participants, unread.

    ``unread`` is the acting pin's own unacknowledged mail there, or (the state root's owner, no pin) every
    participant's.
    """
    reg = store.registry(cid)
    mine = reg.alias_of(str(who)) if who is not None else None
    counted = [mine] if mine else ([] if who is not None else sorted(reg.participants))
    unread = sum(_unread(store, cid, a) for a in counted if validate.ALIAS_RE.fullmatch(a))
    return {"collab": cid, "label": reg.label, "task": reg.task, "alias": mine,
            "participants": sorted(reg.active()), "unread": unread, "closed": reg.closed,
            "opened_at": reg.opened_at}


def _unread(store: Store, cid: str, alias: str) -> int:
    try:
        return store.unacked(cid, alias, limit=1).total
    except AgentmsgError:
        return 0
