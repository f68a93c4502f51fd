"""Who is acting: an exact native pin, never a guess.

A host sets its own session variable in every command its agent runs.  When
that variable disagrees with ``--self``, the agent is trying to act as some
other session, so the command is refused rather than trusted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from agentmsg.domain import validate as model
from agentmsg.domain.values import Pin
from agentmsg.errors import IdentityError
from agentmsg.hosts import registry

#: (variable, runtime) of every host whose agent's shell names its session (``Host.shell_var``; each host's
#: module says who sets it: the host itself, ``agentmsg run gemini``, or agentmsg's OpenCode plugin).
HOST_VARS = registry.shell_vars()


def host_pins(env: Mapping[str, str]) -> list[Pin]:
    return [model.pin(f"{runtime}:{env[var]}") for var, runtime in HOST_VARS if env.get(var)]


def resolve(self_flag: str | None, env: Mapping[str, str] | None = None) -> Pin:
    env = os.environ if env is None else env
    hosts = host_pins(env)
    if self_flag:
        chosen = model.pin(self_flag)
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
