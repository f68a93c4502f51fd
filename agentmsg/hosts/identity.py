"""Who is acting: an exact native pin, never a guess.

One rule, in this module only (docs/SECURITY.md, "Identity: the recorded host session decides"):

1. **A recorded host session among the caller's ancestors decides.**  Each host's SessionStart hook
   records its host process (pid and start time) in ``ROOT/wake/<pin key>.json``.  When the nearest
   such process above this one is found, the caller belongs to that session: ``--self`` may name only
   a pin recorded for that process, never another session's pin, nor a ``human:`` pin.  This holds
   however many host variables the environment carries (a Claude Code session launched by Codex
   inherits ``CODEX_THREAD_ID``) and whether or not the agent unset its own (``env -u ...``).
2. **Otherwise the host variables decide.**  A host sets its session variable in every command its
   agent runs; a ``--self`` that disagrees with it is refused, and two variables with no ``--self``
   are refused as ambiguous.  With none, ``--self`` is required.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from agentmsg.domain import validate as model
from agentmsg.domain.values import Pin
from agentmsg.errors import IdentityError
from agentmsg.hosts import registry

#: (variable, runtime) of every host whose agent's shell names its session (``Host.shell_var``; each host's
#: module says who sets it: the host itself, ``agentmsg run gemini``, or agentmsg's OpenCode plugin).
HOST_VARS = registry.shell_vars()


def host_pins(env: Mapping[str, str]) -> list[Pin]:
    return [model.pin(f"{runtime}:{env[var]}") for var, runtime in HOST_VARS if env.get(var)]


def resolve(self_flag: str | None, env: Mapping[str, str] | None = None,
            inside: tuple[int, Sequence[str]] | None = None) -> Pin:
    """The acting pin: rule 1 when ``inside`` names the nearest recorded host process above this one and its
    pins (``service/context`` looks it up: ``runtime/facts.nearest_recorded``), else rule 2."""
    env = os.environ if env is None else env
    hosts = host_pins(env)
    chosen = model.pin(self_flag) if self_flag else None
    if inside is not None:
        return _inside(chosen, hosts, *inside)
    if chosen is not None:
        if hosts and str(chosen) not in {str(h) for h in hosts}:
            names = ", ".join(f"{v}={env[v]}" for v, _ in HOST_VARS if env.get(v))
            raise IdentityError(f"--self {chosen} disagrees with this host session ({names}); refusing to act as it")
        return chosen
    if len(hosts) == 1:
        return hosts[0]
    if len(hosts) > 1:
        both = " and ".join(v for v, _ in HOST_VARS if env.get(v))
        raise IdentityError(f"both {both} are set; pass --self to choose")
    raise IdentityError(
        "no identity: pass --self RUNTIME:SESSION_ID (or run inside Claude Code / Codex / Copilot CLI, "
        "which set CLAUDE_CODE_SESSION_ID / CODEX_THREAD_ID / COPILOT_AGENT_SESSION_ID, or a Gemini CLI started "
        "with `agentmsg run gemini`, or OpenCode with agentmsg's plugin, which sets OPENCODE_SESSION_ID)"
    )


def _inside(chosen: Pin | None, hosts: Sequence[Pin], pid: int, recorded: Sequence[str]) -> Pin:
    """Rule 1: the caller runs below host process ``pid``, recorded for the pins ``recorded``."""
    owners = [model.pin(p) for p in recorded]
    names = ", ".join(str(p) for p in owners)
    if chosen is not None:
        if str(chosen) in set(recorded):
            return chosen
        raise IdentityError(f"this process runs inside session {names} (host process {pid}, recorded by its "
                            f"SessionStart hook); refusing to act as {chosen}")
    named = [p for p in owners if str(p) in {str(h) for h in hosts}]
    if len(named) == 1 or len(owners) == 1:
        return (named or owners)[0]
    raise IdentityError(f"this process runs inside host process {pid}, which runs sessions {names}; "
                        "pass --self to choose one of them")
