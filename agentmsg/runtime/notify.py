"""Notification adapters: typed, validated, and never peer-controlled code.

A send stores first and notifies second, in the *sender's* process.  So
nothing a peer wrote into the shared registry may choose what runs there:
an adapter is one of a few typed kinds whose program is fixed by agentmsg
and whose only parameters are validated identifiers the recipient's own
session recorded (a tmux pane, a host's thread id).  Each runs with a
scrubbed environment (no tokens or keys of the sender's), gets a fixed
doorbell line and never the message text; the hooks quote the message
itself, attributed and bounded, at the recipient's next prompt.

Free-form commands are not adapters: a ``command`` entry found in a
registry (written by an older version, or planted) is never run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from agentmsg.domain.values import Message
from agentmsg.errors import IdentityError, UsageError
from agentmsg.hosts import registry
from agentmsg.hosts.base import COMMAND_TIMEOUT as COMMAND_TIMEOUT
from agentmsg.hosts.base import NotifyError as NotifyError
from agentmsg.hosts.base import is_abs_path, run_fixed
from agentmsg.runtime import facts as sessionfacts
from agentmsg.runtime import panes

#: The typed adapters: a doorbell at the next prompt, tmux, and each host's own (``Host.notify_adapter``).
KINDS = ("hook", "tmux", *registry.notify_adapters())


def doorbell(msg: Message) -> str:
    """The fixed line a wake-up carries: ids and aliases (validated), never sender text."""
    return (f"agentmsg: new {msg.kind} {msg.id} for {msg.to} from {msg.sender}; "
            "it is quoted at your next prompt.")


_is_pane = panes.is_pane
_is_socket = is_abs_path


def validate(config: Mapping[str, Any]) -> dict[str, Any]:
    """A registry entry as a typed adapter; anything else is refused (and never run)."""
    kind = config.get("adapter", "hook")
    if kind == "hook":
        return {"adapter": "hook"}
    if kind == "tmux" and _is_pane(config.get("pane")) and _is_socket(config.get("socket")):
        tmux = {"adapter": "tmux", "pane": config["pane"], "socket": config["socket"]}
        if type(config.get("pid")) is int and isinstance(config.get("pid_start"), str):
            tmux.update(pid=config["pid"], pid_start=config["pid_start"])  # the pane's process when recorded
        return tmux
    host = registry.notify_adapters().get(str(kind))
    typed = host.valid_notify(config) if host is not None else None
    if typed is not None:
        return typed
    raise NotifyError(f"adapter {str(kind)[:20]!r} is not a valid typed adapter; it was not run")


def from_option(spec: str | None, env: Mapping[str, str], root: str | None = None,
                pin: str | None = None) -> dict[str, Any]:
    """``--notify KIND`` (``KINDS``): the parameters come from the caller's own session.

    A tmux pane is taken only when this process, or the host process ``pin``'s hooks recorded under
    ``root``, runs in it on a server of this user's (``runtime/panes.py``); anything else is refused.
    """
    if not spec or spec == "hook":
        return {"adapter": "hook"}
    if spec == "tmux":
        claim = panes.claimed(env)
        if claim is None:
            raise UsageError("--notify tmux needs this session to run inside tmux (TMUX and TMUX_PANE)")
        recorded = sessionfacts.load(root, pin).get("facts") if root and pin else None
        try:
            pid, started = panes.verify(*claim, panes.holders(recorded if isinstance(recorded, dict) else {}))
        except panes.Refused as exc:
            raise IdentityError(f"--notify tmux: pane {claim[1]} is not this session's own ({exc}); "
                                "run it from inside the session's own tmux pane") from None
        return {"adapter": "tmux", "pane": claim[1], "socket": claim[0], "pid": pid, "pid_start": started}
    host = registry.notify_adapters().get(spec)
    params = host.notify_params(env) if host is not None else None
    if params is not None:
        return params
    raise UsageError(f"invalid --notify {spec[:20]!r}: expected one of {', '.join(KINDS)}")


def refuse_command(command: str | None) -> None:
    if command is not None:
        raise UsageError("--notify-command is no longer accepted: a command in the shared registry would run "
                         f"in every sender's process; use --notify {' or --notify '.join(KINDS[1:])}")


def notify(config: Mapping[str, Any], msg: Message) -> str:
    """Ring the recipient's doorbell; returns what happened (NotifyError when it could not)."""
    if config.get("adapter", "hook") == "command":
        return "command adapter ignored: registry commands never run; surfaces at the recipient's next prompt"
    adapter = validate(config)
    if adapter["adapter"] == "hook":
        return f"hook: surfaces at {msg.to}'s next prompt"
    if adapter["adapter"] == "tmux":
        why = panes.ring_refusal(adapter["socket"], adapter["pane"], adapter, exact=True)
        if why:
            raise NotifyError(f"not rung (tmux pane {adapter['pane']} not verified: {why}); nothing was typed")
        base = ["tmux", "-S", adapter["socket"], "send-keys", "-t", adapter["pane"]]
        run_fixed([*base, "-l", doorbell(msg)])
        time.sleep(0.2)  # an Enter in the same burst is swallowed by some TUIs
        run_fixed([*base, "Enter"])
        return f"tmux: rang pane {adapter['pane']}"
    return registry.notify_adapters()[adapter["adapter"]].notify(adapter, doorbell(msg))
