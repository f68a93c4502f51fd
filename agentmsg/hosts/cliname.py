"""How text shown to a model names the agentmsg CLI, per host: one function, so every command it is
told to run works as shown.

* Claude Code puts an enabled plugin's ``bin/`` on the Bash tool's PATH: ``agentmsg``.
* Codex, Copilot CLI and Gemini CLI do not put a plugin's ``bin/`` on PATH (and Codex's shell tool runs a
  login shell whose ``/etc/profile`` resets PATH).  So the command is the absolute, shell-quoted path of the launcher
  next to the code the hook runs (``<plugin root>/bin/agentmsg``): the same copy as the hooks, found
  by any shell.  ``AGENTMSG_CLI`` in the hook's environment overrides it (``agentmsg install codex``
  from a pip/pipx/uv install sets it to that install's console script).

Lean: the hooks import it on every prompt (``os`` only).
"""

from __future__ import annotations

import os

from agentmsg import PACKAGE_DIR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentmsg.hosts.base import Host

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_")


def sh_quote(value: str) -> str:
    """``shlex.quote`` without importing shlex."""
    if value and set(value) <= _SAFE:
        return value
    return "'" + value.replace("'", "'\"'\"'") + "'"


def _beside(package_dir: str, *parts: str) -> str | None:
    """A plugin file for the package in ``package_dir``: in its checkout, or in a wheel's ``_plugin``."""
    for cand in (os.path.join(os.path.dirname(package_dir), *parts), os.path.join(package_dir, "_plugin", *parts)):
        if os.path.isfile(cand):
            return cand
    return None


def launcher(package_dir: str) -> str | None:
    """The ``bin/agentmsg`` launcher that runs the package in ``package_dir``, if there is one."""
    return _beside(package_dir, "bin", "agentmsg")


def hook_script(package_dir: str) -> str | None:
    """``hooks/agentmsg_hook.py`` beside the package in ``package_dir`` (the renderer runs the hook's own code)."""
    return _beside(package_dir, "hooks", "agentmsg_hook.py")


def cli_command(host: Host, env: Mapping[str, str], package_dir: str | None = None) -> str:
    """The agentmsg command, as the shell of ``host`` can run it."""
    explicit = env.get("AGENTMSG_CLI")
    if explicit:
        return sh_quote(explicit)
    if host.bin_on_path:  # the others do not put a plugin's bin/ on the shell's PATH
        return "agentmsg"
    found = launcher(package_dir or os.path.abspath(PACKAGE_DIR))
    return sh_quote(found) if found else "agentmsg"


def prepare_cli(env: Mapping[str, str], package_dir: str | None = None) -> bool:
    """At SessionStart: if this machine has no launcher folder yet (``${XDG_DATA_HOME:-~/.local/share}/agentmsg``),
    start ``bin/agentmsg --prepare-env`` detached, in the background, output discarded.  It builds the CLI's
    private environment when python3 lacks the CLI's dependencies (about 15 s of pip), so the model's first
    ``agentmsg`` command does not wait for it.  Never blocks and never fails the hook; True if started."""
    if env.get("AGENTMSG_NO_PREPARE"):
        return False
    base = env.get("XDG_DATA_HOME") or os.path.join(env.get("HOME") or "/nonexistent", ".local", "share")
    if os.path.exists(os.path.join(base, "agentmsg")):
        return False
    found = launcher(package_dir or os.path.abspath(PACKAGE_DIR))
    if found is None:
        return False
    from agentmsg.runtime.spawn import spawn_detached

    return spawn_detached(["/bin/sh", found, "--prepare-env"], env=env) is not None
