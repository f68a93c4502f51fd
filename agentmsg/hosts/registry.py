"""Every host by name and by pin runtime: the one list the rest of agentmsg asks (as pre-commit's
``all_languages`` does).  Adding a host means one module beside this one and a line here.

Lean: the hooks import it (each host module imports only ``os`` at run time).
"""

from __future__ import annotations

from agentmsg.hosts import claude, codex, copilot, cursor, gemini, human, opencode

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentmsg.hosts.base import Host

#: In the order ``host_of`` asks them whether they run a Claude-format hooks file: Copilot sets Claude's
#: plugin variable as well, so it is asked first.
ALL: tuple[Host, ...] = (claude.HOST, codex.HOST, copilot.HOST, gemini.HOST, opencode.HOST, cursor.HOST, human.HOST)
BY_NAME: dict[str, Host] = {h.name: h for h in ALL}
BY_RUNTIME: dict[str, Host] = {h.runtime: h for h in ALL}
#: The hosts ``hooks/run NAME`` serves, name -> pin runtime.
HOOK_RUNTIMES: dict[str, str] = {h.name: h.runtime for h in ALL if h.runs_hooks}
#: The hosts whose agent's shell names its session: (variable, runtime), in the order identity reports them.
SHELL_VARS: tuple[tuple[str, str], ...] = tuple((h.shell_var, h.runtime) for h in ALL if h.shell_var)
#: The typed ``--notify`` adapters hosts add: adapter name -> host.
NOTIFY_ADAPTERS: dict[str, Host] = {h.notify_adapter: h for h in ALL if h.notify_adapter}


def get(name: str) -> Host | None:
    return BY_NAME.get(name)


def of_runtime(runtime: str) -> Host | None:
    return BY_RUNTIME.get(runtime)


def of_pin(pin: str) -> Host | None:
    return BY_RUNTIME.get(pin.partition(":")[0])


def host_of(named: str, env: Mapping[str, str]) -> str:
    """The host really running ``hooks/run claude``: other hosts run Claude-format hook files too.
    ``hooks/run`` makes the same choice for its fast path."""
    if named != claude.HOST.name:
        return named
    for host in ALL:
        if host is not claude.HOST and host.runs_claude_format(env):
            return host.name
    return named


#: What a name no host answers to stands for: no hooks, no session variable, no wake-up.
NO_HOST: Host = human.HOST
