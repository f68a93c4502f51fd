"""Who may read what: one rule, checked here for every front end (docs/SECURITY.md, "One rule for reads").

* A **pin** (``--self``, or the host's session variable) reads a collaboration
  only while it is a current member: it holds an active alias there.  A pin
  that left, or that a takeover (``join --succeeds``) displaced, reads nothing
  of it any more; neither does a pin that was never in it.
* **No session identity** (no ``--self`` and no host session variable) is the
  person at their own terminal who owns the state root: they read everything
  (``top``, ``search``, ``log render --html`` rely on that).

A refused read is one line and exit 9, and it is the same line whether the
collaboration or the message exists or not, so a refusal reveals nothing.
The CLI, the MCP server and ``top`` call :func:`reader`, :func:`check`,
:func:`collabs` and :func:`message`; none checks membership its own way.
"""

from __future__ import annotations

from agentmsg.domain import validate
from agentmsg.domain.values import Message, Pin
from agentmsg.errors import IdentityError, NotFound
from agentmsg.hosts import identity
from agentmsg.service.context import Ctx


class ReadRefused(IdentityError):
    """A pin asked to read a collaboration it is not a current member of (exit 9, like every identity refusal).

    Its line is the one a write by a non-member gets (``rules.require_alias``): one wording for one rule.
    """


def reader(ctx: Ctx, self_flag: str | None) -> Pin | None:
    """The pin a read acts as, or None for the state root's owner (no ``--self``, no host session variable).

    A host variable that is set always makes a pin (an ambiguous pair is an
    IdentityError, never the owner): an agent does not become the owner by
    inheriting two variables, nor by unsetting its own below a host process
    its session's hooks recorded (``hosts/identity``: that session decides).
    """
    if not self_flag and not identity.host_pins(ctx.env) and ctx.inside() is None:
        return None  # no session anywhere above this process: the person at their terminal
    return ctx.who(self_flag)


def member(ctx: Ctx, who: Pin, cid: str) -> bool:
    """Whether ``who`` holds an active alias in ``cid`` (an unknown collaboration: False)."""
    try:
        reg = ctx.store.registry(cid)
    except NotFound:
        return False
    return reg.alias_of(str(who)) is not None


def check(ctx: Ctx, who: Pin | None, cid: str) -> str:
    """``cid`` if ``who`` may read it, else ReadRefused (the same line for an unknown collaboration)."""
    cid = validate.collab_id(cid)
    if who is not None and not member(ctx, who, cid):
        raise ReadRefused(f"{who} is not bound to any alias in collaboration {cid}")
    return cid


def collabs(ctx: Ctx, who: Pin | None) -> list[str]:
    """Every collaboration ``who`` may read: all of them for the owner, the active bindings for a pin."""
    if who is None:
        return ctx.store.collabs()
    return [cid for cid, _alias in ctx.store.bindings(str(who))]


def message(ctx: Ctx, who: Pin | None, message_id: str, collab: str | None) -> Message:
    """One message ``who`` may read: in ``collab`` (checked), else searched only where ``who`` may read.

    For a pin, an id that is in none of its collaborations is refused with one
    line whether it exists elsewhere or nowhere.
    """
    mid = validate.message_id(message_id)
    if collab:
        cid = check(ctx, who, collab)
        msg = ctx.store.message(cid, mid)
        if msg is None:
            raise NotFound(f"no message {mid} in collaboration {cid}")
        return msg
    if who is None:
        return ctx.mailbox.find(mid)
    for cid in collabs(ctx, who):
        found = ctx.store.message(cid, mid)
        if found is not None:
            return found
    raise ReadRefused(f"{who} is not bound to any alias in a collaboration that holds message {mid}")
