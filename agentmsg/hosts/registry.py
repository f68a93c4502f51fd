"""Every host by name and by pin runtime: the one list the rest of agentmsg asks (as pre-commit's
``all_languages`` does).  Adding a host means one module beside this one and its name here.

Lean, and lazy: a hook imports only its own host's module (:func:`get`), not every host's (each module a
host adds would cost every prompt about 0.2 ms); the lists that need them all load them on first use.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentmsg.hosts.base import Host

#: Every host, by its module's name, in the order they are listed (and identity reports their variables).
NAMES = ("claude", "codex", "copilot", "gemini", "opencode", "cursor", "human")
#: The hosts that can run a Claude-format hooks file (``hooks/run claude``), in the order :func:`host_of` asks
#: them (``Host.runs_claude_format``; Copilot sets Claude's plugin variable as well, so it is asked first),
#: each with the variable it always sets there: without it, its module is not even loaded.
CLAUDE_FORMAT = (("copilot", "COPILOT_CLI"), ("gemini", "GEMINI_SESSION_ID"))
#: What a name no host answers to stands for: no hooks, no session variable, no wake-up.
NO_HOST = "human"

_loaded: dict[str, Host] = {}


def get(name: str) -> Host | None:
    """The host called ``name``, or None; imports that host's module only."""
    found = _loaded.get(name)
    if found is None and name in NAMES:
        module = __import__(f"agentmsg.hosts.{name}", fromlist=["HOST"])  # not importlib: one module fewer
        found = _loaded[name] = module.HOST
    return found


def get_or_nothing(name: str) -> Host:
    """The host called ``name``, else the host that has nothing (``NO_HOST``); loads no other host's module."""
    found = get(name)
    if found is None:
        from agentmsg.hosts import human  # NO_HOST's module

        found = human.HOST
    return found


def all_hosts() -> tuple[Host, ...]:
    return tuple(h for h in (get(n) for n in NAMES) if h is not None)


def by_name() -> dict[str, Host]:
    return {h.name: h for h in all_hosts()}


def of_runtime(runtime: str) -> Host | None:
    return next((h for h in all_hosts() if h.runtime == runtime), None)


def hook_runtimes() -> dict[str, str]:
    """The hosts ``hooks/run NAME`` serves, name -> pin runtime."""
    return {h.name: h.runtime for h in all_hosts() if h.runs_hooks}


def shell_vars() -> tuple[tuple[str, str], ...]:
    """(variable, runtime) of every host whose agent's shell names its session."""
    return tuple((h.shell_var, h.runtime) for h in all_hosts() if h.shell_var)


def notify_adapters() -> dict[str, Host]:
    """The typed ``--notify`` adapters hosts add: adapter name -> host."""
    return {h.notify_adapter: h for h in all_hosts() if h.notify_adapter}


def host_of(named: str, env: Mapping[str, str]) -> str:
    """The host really running ``hooks/run claude``: other hosts run Claude-format hook files too.
    ``hooks/run`` makes the same choice for its fast path."""
    if named != "claude":
        return named
    for name, var in CLAUDE_FORMAT:
        host = get(name) if env.get(var) else None
        if host is not None and host.runs_claude_format(env):
            return name
    return named
