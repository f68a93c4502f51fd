"""The messaging rules, in one place, for every backend and front end.

Who may send, reply, acknowledge, close, hand over and write the log; which
aliases a recipient name means (``all`` included); broadcast copy ids; the
idempotency digest; how membership events fold into the registry; when a
hook shows a message again.  Pure functions over values: backends store and
load, they decide nothing.  Lean (the hooks import it): ``uuid`` only when
a broadcast id is derived.
"""

from __future__ import annotations

from agentmsg import records
from agentmsg.domain import kinds
from agentmsg.domain.values import Message, Participant, Pin, Registry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

def _errors() -> Any:
    """``agentmsg.errors``, imported only when a rule refuses (the hooks never pay for it)."""
    from agentmsg import errors

    return errors


#: Prompts after which a still-unacknowledged message is shown again.
REPRESENT_AFTER = 5
#: Messages an ``inbox`` (and a hook) reads at most when nobody asks for more.
PAGE_DEFAULT = 20
_ALIAS_REST = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


def is_alias(value: object) -> bool:
    """``^[a-z][a-z0-9_-]{0,31}$`` and not ``all``, without ``re``."""
    return (isinstance(value, str) and 0 < len(value) <= 32 and "a" <= value[0] <= "z"
            and set(value) <= _ALIAS_REST and value != "all")


# ---- the registry: a fold over membership events ------------------------------------


def apply_event(reg: Registry | None, ev: Mapping[str, Any]) -> Registry | None:
    """Fold one membership or lifecycle event into the registry."""
    kind = ev.get("type")
    if kind == kinds.OPENED:
        first = Participant(ev["alias"], ev["pin"], ev["runtime"], ev.get("notify") or {"adapter": "hook"}, ev["ts"])
        return Registry(ev["collab"], ev["label"], ev["task"], ev["pin"], ev["ts"], None, {ev["alias"]: first},
                        opener_alias=ev["alias"], policy=ev.get("policy") or kinds.OPEN_POLICY)
    if reg is None:
        return None
    people = dict(reg.participants)
    handovers = dict(reg.handovers)
    if kind == kinds.JOINED:
        people[ev["alias"]] = Participant(ev["alias"], ev["pin"], ev["runtime"],
                                          ev.get("notify") or {"adapter": "hook"}, ev["ts"])
        if ev.get("ticket") in reg.tickets:  # a ticket admits once
            return reg.replace(participants=people, handovers=handovers,
                               tickets={h: t for h, t in reg.tickets.items() if h != ev["ticket"]})
    elif kind == kinds.POLICY_SET:
        return reg.replace(policy=ev["policy"])
    elif kind == kinds.INVITED:
        entry = {"for": ev.get("for"), "expires_at": ev["expires_at"], "by": ev.get("by")}
        if ev.get("succeeds"):  # a resume's ticket: it moves the alias from that pin (docs/LIFECYCLE.md)
            entry["succeeds"] = ev["succeeds"]
        return reg.replace(tickets={**reg.tickets, ev["ticket"]: entry})
    elif kind == kinds.SPAWNED:  # a resume's ticket its session did not need (same id) is spent here
        if ev.get("ticket") in reg.tickets:
            return reg.replace(tickets={h: t for h, t in reg.tickets.items() if h != ev["ticket"]})
        return reg
    elif kind == kinds.SUCCEEDED:
        # The old session's wake-up adapter named its pane or thread, not the new one's.
        people[ev["alias"]] = Participant(ev["alias"], ev["pin"], ev["runtime"], {"adapter": "hook"}, ev["ts"])
        handovers.pop(ev["alias"], None)
        if ev.get("ticket") in reg.tickets:  # a resume's ticket admits once
            return reg.replace(participants=people, handovers=handovers,
                               tickets={h: t for h, t in reg.tickets.items() if h != ev["ticket"]})
    elif kind == kinds.HANDOVER:
        handovers[ev["alias"]] = ev["to"]
    elif kind == kinds.LEFT:
        people[ev["alias"]] = people[ev["alias"]].replace(active=False)
        handovers.pop(ev["alias"], None)
    elif kind == kinds.NOTIFY_SET:
        people[ev["alias"]] = people[ev["alias"]].replace(notify=ev["notify"])
    elif kind == kinds.CLOSED:
        return reg.replace(closed_at=ev["ts"], participants=people, handovers={})
    elif kind == kinds.SPAWN_FAILED:  # the ticket admits nobody now; a binding its session made is undone
        held = people.get(ev["target"])
        if ev.get("pin") and held is not None and held.pin == ev["pin"]:
            del people[ev["target"]]
            handovers.pop(ev["target"], None)
        return reg.replace(participants=people, handovers=handovers,
                           tickets={h: t for h, t in reg.tickets.items() if h != ev.get("ticket")})
    else:
        return reg
    return reg.replace(participants=people, handovers=handovers)


def replay(events: Iterable[Mapping[str, Any]]) -> Registry | None:
    reg: Registry | None = None
    for ev in events:
        reg = apply_event(reg, ev)
    return reg


def registry_document(reg: Registry) -> dict[str, Any]:
    """The registry as plain data: ``registry.yaml`` and ``agentmsg registry``."""
    return {
        "collab": reg.collab, "label": reg.label, "task": reg.task, "opener": reg.opener,
        "opener_alias": reg.opener_alias, "opened_at": reg.opened_at, "closed_at": reg.closed_at,
        "participants": {
            a: {"pin": p.pin, "runtime": p.runtime, "inbox": f"inbox/{a}.jsonl", "notify": p.notify,
                "joined_at": p.joined_at, "active": p.active}
            for a, p in sorted(reg.participants.items())
        },
        "handovers": dict(sorted(reg.handovers.items())),
        "policy": reg.policy,
        "tickets": {h: dict(t) for h, t in sorted(reg.tickets.items())},
    }


def registry_from_document(doc: Mapping[str, Any]) -> Registry:
    people = {a: Participant(a, p["pin"], p["runtime"], p["notify"], p["joined_at"], p["active"])
              for a, p in doc["participants"].items()}
    return Registry(doc["collab"], doc["label"], doc["task"], doc["opener"], doc["opened_at"], doc["closed_at"],
                    people, opener_alias=doc.get("opener_alias", ""), handovers=dict(doc.get("handovers") or {}),
                    policy=doc.get("policy") or kinds.OPEN_POLICY,
                    tickets={h: dict(t) for h, t in (doc.get("tickets") or {}).items()})


# ---- who may do what ---------------------------------------------------------------


def require_open(reg: Registry) -> Registry:
    if reg.closed:
        raise _errors().Closed(f"collaboration {reg.collab} was closed at {reg.closed_at}; it accepts no changes")
    return reg


def require_alias(reg: Registry, who: Pin) -> str:
    alias = reg.alias_of(str(who))
    if alias is None:
        raise _errors().IdentityError(f"{who} is not bound to any alias in collaboration {reg.collab}")
    return alias


def opened_event(collab: str, opener: Pin, alias: str, label: str, task: str,
                 notify: dict[str, Any], *, policy: str = kinds.OPEN_POLICY) -> dict[str, Any]:
    ev = {"type": kinds.OPENED, "collab": collab, "alias": alias, "pin": str(opener), "runtime": opener.runtime,
          "label": label, "task": task, "notify": notify}
    return ev if policy == kinds.OPEN_POLICY else {**ev, "policy": policy}


def join_event(reg: Registry, who: Pin, alias: str, *, succeeds: Pin | None = None, reason: str | None = None,
               notify: dict[str, Any] | None = None, ticket: str | None = None,
               now: float | None = None) -> dict[str, Any] | None:
    """The event a join (or takeover) records, or None when it is already in place.

    A takeover (``succeeds``) needs a reason.  Within one runtime an agent
    session may succeed another (a restarted session takes its alias back);
    across runtimes, and for a human's alias, the displaced pin must have
    agreed (``handover``) or the new holder must be a human.
    """
    require_open(reg)
    current = reg.alias_of(str(who))
    held = reg.participants.get(alias)
    if succeeds is None:
        if current == alias:
            return None
        if current is not None:
            raise _errors().Conflict(f"{who} is already bound to alias {current} in this collaboration")
        if held is not None and not (held.pin == str(who) and not held.active):
            raise _errors().Conflict(f"alias {alias} is taken by {held.pin}; "
                           "use join --succeeds OLD_PIN --reason TEXT for a deliberate replacement")
        ev = {"type": kinds.JOINED, "alias": alias, "pin": str(who), "runtime": who.runtime,
              "notify": notify or {"adapter": "hook"}}
        if held is not None or (reg.policy != kinds.INVITE_ONLY and ticket is None):
            return ev  # a member coming back to its own alias was admitted before
        return {**ev, "ticket": admitted(reg, alias, ticket, now)}
    if held is None or held.pin != str(succeeds):
        raise _errors().Conflict(f"alias {alias} is not held by {succeeds}; nothing to succeed")
    if str(succeeds) == str(who):
        if held.active:
            return None  # succeeding yourself changes nothing
        return {"type": kinds.JOINED, "alias": alias, "pin": str(who), "runtime": who.runtime,
                "notify": notify or {"adapter": "hook"}}
    if current is not None and current != alias:
        raise _errors().Conflict(f"{who} is already bound to alias {current} in this collaboration")
    if not reason:
        raise _errors().UsageError("--succeeds needs --reason TEXT: a takeover is recorded in the log")
    old_runtime = held.runtime
    agreed = reg.handovers.get(alias) == str(who)
    if not (agreed or who.human) and (old_runtime != who.runtime or old_runtime == "human"):
        whose = "a human's alias" if old_runtime == "human" else f"an alias held by a {old_runtime} session"
        raise _errors().IdentityError(f"taking over {whose} needs its holder's consent (agentmsg handover --to {who}) "
                            "or a human: pin; nothing was changed")
    return {"type": kinds.SUCCEEDED, "alias": alias, "pin": str(who), "old_pin": str(succeeds),
            "runtime": who.runtime, "reason": reason}


# ---- the contact policy: one-time tickets -------------------------------------------------------------


#: The longest a ticket may stay valid (``invite --expires-in``), and its default.
TICKET_MAX, TICKET_DEFAULT = 7 * 86400.0, 3600.0


def admitted(reg: Registry, alias: str, ticket: str | None, now: float | None) -> str:
    """The ticket (its sha256) that admits this join, or a refusal (exit 9) that writes nothing."""
    import time

    if ticket is None:
        raise _errors().IdentityError(f"collaboration {reg.collab} admits only the holder of a ticket (invite-only): "
                                      "ask a member for one (agentmsg invite), then join --ticket TICKET")
    found = reg.tickets.get(ticket)
    if found is None:
        raise _errors().IdentityError("this ticket does not admit anyone here: it was never issued for this "
                                      "collaboration, or it was used already")
    t = time.time() if now is None else now
    if t >= float(found["expires_at"]):
        raise _errors().IdentityError("this ticket has expired: ask a member for a new one (agentmsg invite)")
    if found.get("for") not in (None, alias):
        raise _errors().IdentityError(f"this ticket admits alias {found['for']}, not {alias}")
    return ticket


def invite_event(reg: Registry, who: Pin, ticket: str, *, for_alias: str | None, expires_at: float) -> dict[str, Any]:
    """A member issues a one-time ticket (only its hash is recorded); any member may admit anyone, a person too."""
    require_open(reg)
    alias = require_alias(reg, who)
    if for_alias is not None and reg.holder(for_alias) is not None:
        raise _errors().Conflict(f"alias {for_alias} is taken by {reg.holder(for_alias)}; a ticket for it would "
                                 "admit nobody")
    return {"type": kinds.INVITED, "alias": alias, "by": str(who), "ticket": ticket, "for": for_alias,
            "expires_at": expires_at}


def policy_event(reg: Registry, who: Pin, policy: str) -> dict[str, Any] | None:
    """The opener's alias, or a person who is a member, sets who may join; None when it is already so."""
    require_open(reg)
    alias = require_alias(reg, who)
    if alias != reg.opener_alias and not who.human:
        raise _errors().IdentityError(f"only the opener's alias ({reg.opener_alias}) or a human: member may change "
                                      "who may join")
    if reg.policy == policy:
        return None
    return {"type": kinds.POLICY_SET, "alias": alias, "by": str(who), "policy": policy}


def handover_event(reg: Registry, who: Pin, alias: str | None, to: Pin) -> dict[str, Any]:
    """The holder of an alias (or a human participant) agrees that ``to`` may take it over."""
    require_open(reg)
    mine = reg.alias_of(str(who))
    target = alias or mine
    if target is None or target not in reg.participants or not reg.participants[target].active:
        raise _errors().IdentityError(f"{who} holds no alias here; pass --alias of an active participant")
    if target != mine and not who.human:
        raise _errors().IdentityError(f"only {target}'s holder or a human: pin may hand {target} over")
    if str(to) == reg.participants[target].pin:
        raise _errors().Conflict(f"{to} already holds {target}")
    return {"type": kinds.HANDOVER, "alias": target, "to": str(to), "by": str(who)}


def leave_event(reg: Registry, who: Pin) -> dict[str, Any]:
    alias = require_alias(reg, who)
    return {"type": kinds.LEFT, "alias": alias, "pin": str(who)}


def kill_event(reg: Registry, who: Pin, alias: str, *, force: bool, pid: int,
               spawned: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Who may stop a session (docs/LIFECYCLE.md, "Stopping a session").  One agentmsg spawned (``spawned``: the
    ``spawned`` event of the alias's current pin): its spawner (that pin, or the current holder of the spawner's
    alias), the opener's alias, or a ``human:`` pin.  Any other: only a ``human:`` pin, with ``--force``."""
    pin = reg.holder(alias)
    if pin is None:
        raise _errors().NotFound(f"no active participant {alias} in collaboration {reg.collab}")
    mine = reg.alias_of(str(who))
    if spawned is not None and spawned.get("pin") == pin:
        spawner = spawned.get("alias")
        if not (who.human or str(who) == spawned.get("by") or (mine is not None and mine in (spawner,
                                                                                             reg.opener_alias))):
            raise _errors().IdentityError(f"only {alias}'s spawner ({spawner}), the opener's alias "
                                          f"({reg.opener_alias}) or a human: pin may stop it; nothing was signalled")
        ev = {"type": kinds.KILLED, "target": alias, "pin": pin, "by": str(who), "pid": pid, "spawned": True}
        return {**ev, "alias": mine} if mine is not None and not who.human else ev
    if not who.human:
        raise _errors().IdentityError("only a human: pin may stop a session agentmsg did not spawn; "
                                      "nothing was signalled")
    if not force:
        raise _errors().UsageError(f"{alias}'s session was not spawned by agentmsg: stopping it needs --force "
                                   "(it signals the host process its own hooks recorded)")
    return {"type": kinds.KILLED, "target": alias, "pin": pin, "by": str(who), "pid": pid}


# ---- spawned sessions (docs/LIFECYCLE.md, "Spawning a session") ----------------------------------------------


def spawn_target(reg: Registry, who: Pin, alias: str) -> str:
    """A member (the spawner, whose alias it returns) may spawn a session into a free alias."""
    require_open(reg)
    mine = require_alias(reg, who)
    held = reg.participants.get(alias)
    if held is not None:
        raise _errors().Conflict(f"alias {alias} is taken by {held.pin}; spawn a session under a free alias, or "
                                 f"agentmsg resume {alias}")
    return mine


def may_restart(reg: Registry, who: Pin, alias: str, spawned: Mapping[str, Any] | None) -> str:
    """``agentmsg resume``: the alias's last spawner, the opener's alias or a ``human:`` pin; the alias's pin."""
    require_open(reg)
    pin = reg.holder(alias)
    if pin is None:
        raise _errors().NotFound(f"no active participant {alias} in collaboration {reg.collab}")
    mine = reg.alias_of(str(who))
    by_spawner = spawned is not None and (str(who) == spawned.get("by") or mine == spawned.get("alias"))
    if not (who.human or by_spawner or (mine is not None and mine == reg.opener_alias)):
        raise _errors().IdentityError(f"only {alias}'s spawner, the opener's alias ({reg.opener_alias}) or a human: "
                                      "pin may resume it")
    return pin


def resume_ticket_event(reg: Registry, who: Pin, alias: str, ticket: str, *, expires_at: float) -> dict[str, Any]:
    """A one-time ticket for the session that resumes ``alias``: should its host give it a new session id, its
    SessionStart hook moves the alias to it by the audited takeover (reason ``resume``)."""
    require_open(reg)
    holder = reg.holder(alias)
    if holder is None:
        raise _errors().NotFound(f"no active participant {alias} in collaboration {reg.collab}")
    return {"type": kinds.INVITED, "alias": require_alias(reg, who), "by": str(who), "ticket": ticket, "for": alias,
            "expires_at": expires_at, "succeeds": holder}


def resume_takeover(reg: Registry, who: Pin, ticket: str, now: float | None = None) -> dict[str, Any] | None:
    """The takeover a resumed session with a new id makes with its resume ticket; None when nothing moves (the
    host kept the id, or the alias moved on since)."""
    entry = reg.tickets.get(ticket)
    old = entry.get("succeeds") if entry is not None else None
    alias = entry.get("for") if entry is not None else None
    if not isinstance(old, str) or not isinstance(alias, str) or str(who) == old or reg.holder(alias) != old:
        return None
    admitted(reg, alias, ticket, now)
    runtime, _, session = old.partition(":")
    ev = join_event(reg, who, alias, succeeds=Pin(runtime, session), reason="resume", now=now)
    return {**ev, "ticket": ticket} if ev is not None else None


def spawned_event(reg: Registry, who: Pin, alias: str, pin: str, place: Mapping[str, Any], *, host: str,
                  how: str) -> dict[str, Any]:
    """The record a kill later verifies against: who spawned which pin, and where it runs."""
    return {"type": kinds.SPAWNED, "alias": require_alias(reg, who), "by": str(who), "target": alias, "pin": pin,
            "host": host, "how": how, **{k: place.get(k) for k in SPAWN_PLACE}}


#: Where a spawned session runs, as recorded: the tmux socket, window and pane, and its first process.
SPAWN_PLACE = ("where", "socket", "target_window", "window", "pane", "pid", "pid_start", "cwd")


def spawn_failed_event(reg: Registry, who: Pin, alias: str, ticket: str, why: str,
                       joined: str | None = None) -> dict[str, Any]:
    """A spawn that failed: its ticket revoked and, when ``joined`` (the pin that joined ``alias`` with this very
    ticket) still holds it, that binding undone."""
    held = reg.participants.get(alias)
    ev = {"type": kinds.SPAWN_FAILED, "alias": require_alias(reg, who), "by": str(who), "target": alias,
          "ticket": ticket, "why": why[:500]}
    bound = joined is not None and held is not None and held.active and held.pin == joined
    return {**ev, "pin": joined} if bound else ev


def latest_spawn(events: Iterable[Mapping[str, Any]], alias: str, pin: str | None) -> dict[str, Any] | None:
    """The newest ``spawned`` event of ``alias`` for ``pin`` (its current holder), or None."""
    found = None
    for ev in events:
        if ev.get("type") == kinds.SPAWNED and ev.get("target") == alias and ev.get("pin") == pin:
            found = dict(ev)
    return found


def may_close(reg: Registry, who: Pin) -> None:
    """The current holder of the opener's alias, or a human: pin (a displaced opener may not)."""
    require_open(reg)
    if who.human:
        return
    if reg.opener_alias and reg.holder(reg.opener_alias) == str(who):
        return
    if not reg.opener_alias and str(who) == reg.opener:
        return
    raise _errors().IdentityError("only the current holder of the opener's alias or a human: pin may close a "
                                  "collaboration")


def log_author(reg: Registry, who: Pin) -> str:
    alias = reg.alias_of(str(who))
    if alias is not None:
        return alias
    if who.human:
        return str(who)
    raise _errors().IdentityError(f"{who} is not bound in collaboration {reg.collab}")


def may_ack(msg: Message, alias: str) -> None:
    if msg.to != alias:
        raise _errors().IdentityError(f"only the recipient ({msg.to}) may acknowledge {msg.id}")


def may_notify(reg: Registry, who: Pin, msg: Message) -> str:
    """``notify --retry``: the sender or the recipient, while the collaboration is open."""
    require_open(reg)
    alias = require_alias(reg, who)
    if alias not in (msg.sender, msg.to):
        raise _errors().IdentityError(f"only {msg.sender} or {msg.to} may retry the notification of {msg.id}")
    return alias


# ---- sending -------------------------------------------------------------------------


def recipients(reg: Registry, sender: str, to: str) -> list[str]:
    """The aliases ``to`` names: one active participant, or every other one for ``all``."""
    if to == "all":
        others = sorted(a for a in reg.active() if a != sender)
        if not others:
            raise _errors().UnknownAgent("all (no other active participants)")
        return others
    if to not in reg.participants or not is_alias(to):
        raise _errors().UnknownAgent(printable(to), tuple(sorted(a for a in reg.active() if is_alias(a))))
    if not reg.participants[to].active:
        raise _errors().Conflict(f"{to} has left this collaboration; nothing was stored")
    return [to]


def reply_target(parent: Message, sender: str, named: str) -> str:
    """Check a reply and return the ``ALIAS/ID`` it records.

    ``named`` (the part before ``/`` in ``--reply-to``) may be either party
    of the conversation; the record names the original recipient, whose
    inbox holds the message.
    """
    if named and named not in (parent.to, parent.sender):
        raise _errors().NotFound(f"message {parent.id} is not in {named}'s conversation")
    if sender not in (parent.to, parent.sender):
        raise _errors().IdentityError(f"only {parent.sender} or {parent.to} may reply to {parent.id}")
    return f"{parent.to}/{parent.id}"


def other_party(parent: Message, sender: str) -> str:
    return parent.sender if parent.to == sender else parent.to


def copy_id(base_id: str, alias: str) -> str:
    """Each broadcast copy gets its own stable id, derived from the broadcast id."""
    import uuid

    return str(uuid.uuid5(uuid.UUID(base_id), alias))


DIGEST_FIELDS = ("sender", "to", "kind", "priority", "subject", "body", "reply_to")


def digest(fields: Mapping[str, Any]) -> str:
    """Same id and same digest: the same message (a re-send is a no-op)."""
    named = {k: fields[k] for k in DIGEST_FIELDS}
    if fields.get("handoff") is not None:  # a typed message (issue 31); untyped digests stay as they were
        named["handoff"] = fields["handoff"]
    if fields.get("thread") is not None:  # a thread other than its own id (issue 31)
        named["thread"] = fields["thread"]
    return records.sha256_hex(records.canonical(named))


def thread_of(msg: Message) -> str:
    """The thread a message belongs to (issue 31): the name ``send --thread`` gave it, or the root of its
    reply/correlation chain (a broadcast's copies: the broadcast's id); a message that starts one: its own id."""
    return str(msg.thread or (msg.handoff or {}).get("thread") or msg.broadcast or msg.id)


def thread_for(parent: Message | None, named: str | None, base_id: str) -> str:
    """A new message's thread: its parent's (a reply joins the thread of what it answers; another ``--thread``
    is refused), else the name given, else its own id."""
    if parent is not None:
        theirs = thread_of(parent)
        if named is not None and named != theirs:
            raise _errors().UsageError(f"a reply is in the thread of the message it answers ({theirs[:128]}), "
                                       f"not {named[:40]!r}; drop --thread; nothing was stored")
        return theirs
    return named or base_id


def same_message(existing: Message, digest_: str) -> bool:
    if existing.digest != digest_:
        raise _errors().Conflict(f"message id {existing.id} is already stored with different content")
    return True


def replayed_recipients(stored: list[str] | None, is_broadcast: bool | None, to: str, wanted: list[str],
                        base_id: str) -> list[str]:
    """A re-sent id keeps its first meaning: same kind (broadcast or not), same recipients."""
    if is_broadcast is None:
        return wanted
    if is_broadcast != (to == "all"):
        what = "a broadcast" if is_broadcast else "a direct message"
        raise _errors().Conflict(f"message id {base_id} is already stored as {what}; nothing was stored")
    return list(stored or []) if to == "all" else wanted


def printable(name: str) -> str:
    """A raw recipient name, made safe to print on one line."""
    shown = name.encode("unicode_escape", "backslashreplace").decode("ascii")
    return shown[:64] + ("..." if len(shown) > 64 else "")


# ---- presentation ----------------------------------------------------------------------


def unresolved(pages: Mapping[str, list[str]]) -> dict[str, list[str]]:
    return {a: ids for a, ids in pages.items() if ids}
