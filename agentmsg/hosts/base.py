"""The ``Host`` interface: everything agentmsg knows about one host, in one object.

Each host module (``claude``, ``codex``, ``gemini``, ``copilot``, ``opencode``, ``cursor``, ``human``)
defines one subclass and one instance, ``HOST``; ``hosts.registry`` maps names and pin runtimes to them,
as pre-commit maps names to languages.  Code outside ``hosts/`` asks the registry and never names a host.

Lean: the hooks import the host they serve (the pre-tool hook to refuse a tool call, which imports no ``os``:
agentmsg/pathops.py), so these modules import nothing at run time and keep ``os`` and anything heavier
(``json``, ``subprocess``, the installers) inside the functions that need them.
"""

from __future__ import annotations

from agentmsg import PACKAGE_DIR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    #: A ring's result: ``(outcome, mechanism)``, as ``runtime.wakeup.Mechanism.ring`` reports it.
    Rung = tuple[str, str | None]


class Host:
    """One host's specifics.  The defaults describe a host with no hooks and no native wake-up."""

    #: The host's name: ``hooks/run NAME``, ``agentmsg install NAME``, the ``host`` of session facts.
    name = ""
    #: The pin runtime: sessions of this host are ``RUNTIME:SESSION_ID``.
    runtime = ""
    #: How people call it.
    title = ""
    #: The variable equal to the session id in the commands its agent runs (``--self`` defaults to it).
    shell_var: str | None = None
    #: The variable equal to the session id in every hook it runs (the launcher's fast-path key).
    hook_var: str | None = None
    #: Whether ``hooks/run`` reads the session id from the hook's stdin instead (no ``hook_var``).
    session_on_stdin = False
    #: Whether ``hooks/run NAME`` serves it (Cursor has its own entry; a human has no hooks).
    runs_hooks = False
    #: Whether its hooks file runs ``hooks/run NAME midturn`` after every tool call.
    midturn = False
    #: How it counts its context cap: ``utf16`` code units (the JS hosts) or UTF-8 ``bytes``.
    units = "utf16"
    #: Whether the agent's shell finds ``agentmsg`` on PATH (the plugin's ``bin/``); otherwise text names the
    #: launcher by its absolute path.
    bin_on_path = True
    #: Whether a ring can wait natively behind a running turn (a waiter, a queue).
    queues = False
    #: Whether it has a wake-up of its own beside a tmux pane (Claude's waiter, ``codex queue``): without one,
    #: ``wake on`` needs the session's own tmux pane.
    native_wake = False
    #: Whether guarded tmux rings an idle session before the host's own wake-up, because that one is slow (Codex
    #: reads its ``codex queue`` every 10 s; a pasted doorbell starts a turn in about 0.3 s; docs/BENCHMARKS.md).
    #: A busy session, a pane not verified or a guard that refuses (a draft, a dialog) fall back to the host's own.
    tmux_first = False
    #: Wake mechanisms that retry on their own: a deferred ring through them needs no retrier.
    self_retrying: tuple[str, ...] = ()
    #: The session facts ``facts`` adds (the recorded file keeps only known fields).
    fact_fields: tuple[str, ...] = ()
    #: A typed ``--notify`` adapter of this host's own (``codex-queue``), or None.
    notify_adapter: str | None = None
    #: The program ``agentmsg spawn NAME`` starts (found on PATH), or None for a host agentmsg cannot start.
    program: str | None = None
    #: Every variable the host sets in its sessions (hooks, shell tool): a session agentmsg spawns never inherits
    #: the spawner's (a Claude Code spawned from Codex must not carry ``CODEX_THREAD_ID``).
    session_vars: tuple[str, ...] = ()
    #: Variables that turn the host non-interactive: a session agentmsg spawns is an interactive one, so it never
    #: inherits them (Gemini CLI answers once and exits wherever ``CI=true``).
    headless_vars: tuple[str, ...] = ()
    #: Whether the host can resume a session by its id in a new process (``agentmsg resume``).
    resumes = False
    #: Whether the host can start a new session from a session's conversation, under a new id (``agentmsg fork``).
    forks = False

    def spawn_argv(self, program: str, args: Sequence[str], prompt: str) -> list[str]:
        """The interactive, long-lived session ``agentmsg spawn`` starts: ``program``, the user's arguments (after
        ``--``, as given) and its first prompt (its SessionStart hook binds it; its first turn proves it answers)."""
        return [program, *args, prompt]

    def resume_argv(self, program: str, session: str, args: Sequence[str], prompt: str) -> list[str]:
        """The same session again (``agentmsg resume``), interactive, with a first prompt."""
        from agentmsg.errors import HostCannot

        raise HostCannot(f"{self.title} cannot resume a session from agentmsg (docs/LIFECYCLE.md)")

    def fork_argv(self, program: str, session: str, args: Sequence[str], prompt: str) -> list[str]:
        """A new session from this one's conversation, with its own new session id (``agentmsg fork``)."""
        from agentmsg.errors import HostCannot

        raise HostCannot(f"{self.title} cannot fork a session from agentmsg (docs/LIFECYCLE.md)")

    def spawn_hint(self, args: Sequence[str]) -> str:
        """Why a spawned session may never have run agentmsg's hooks, and what to do (one clause)."""
        return f"are agentmsg's hooks installed for {self.title} (agentmsg install {self.name}, or its plugin)?"

    def runs_claude_format(self, env: Mapping[str, str]) -> bool:
        """Whether this host, not Claude Code, is running a Claude-format hooks file (``hooks/run claude``)."""
        return False

    def context(self, event: str, text: str) -> dict[str, Any]:
        """The hook output that adds ``text`` to the model's context at ``event``."""
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}

    def refusal(self, reason: str) -> dict[str, Any]:
        """The pre-tool hook's output that keeps a tool call from running; the model reads ``reason``
        (docs/CLAIMS.md).  Claude Code's ``PreToolUse`` shape, which Codex honours too."""
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                       "permissionDecisionReason": reason}}

    def session_started(self, env: Mapping[str, str], root: str) -> None:
        """Anything the host needs at SessionStart beyond the context (Claude: the env file)."""

    def facts(self, env: Mapping[str, str], pid: int | None, session: str) -> dict[str, Any]:
        """Session facts only this host has, for wake-ups (``runtime.facts.gather`` adds the common ones)."""
        return {}

    def defers_to_plugin(self, env: Mapping[str, str]) -> bool:
        """Whether this hook copy stays silent because another copy of agentmsg runs the same hooks."""
        return False

    def doctor_note(self, enabled: list[dict[str, Any]]) -> str | None:
        """What ``doctor`` cannot see but should say, given this host's enabled copies."""
        return None

    def ring(self, root: str, pin: str, facts: Mapping[str, Any], line: str, ring: dict[str, Any], *,
             busy: bool) -> tuple[Rung | None, str]:
        """The host's native wake-up: ``(result, why not)``; a None result falls back to guarded tmux."""
        return None, "no native path"

    def notify_params(self, env: Mapping[str, str]) -> dict[str, Any] | None:
        """``--notify`` with this host's adapter: its parameters from the caller's own session, or None."""
        return None

    def valid_notify(self, config: Mapping[str, Any]) -> dict[str, Any] | None:
        """A registry entry of this host's adapter, typed and validated, or None."""
        return None

    def notify(self, adapter: Mapping[str, Any], line: str) -> str:
        """Run this host's adapter with the doorbell ``line``; what happened."""
        raise NotImplementedError(self.name)

    def install(self, env: Mapping[str, str], **options: str | None) -> dict[str, Any]:
        """``agentmsg install NAME``: write this copy into the host; idempotent."""
        from agentmsg.errors import UsageError

        raise UsageError(f"{self.title} installs agentmsg itself (its plugin marketplace); see README.md")


COMMAND_TIMEOUT = 10.0


class NotifyError(Exception):
    """A ring or an adapter could not surface the message; it stays stored."""


def scrubbed(program: str) -> dict[str, str]:
    """The whole environment a doorbell program gets: none of the sender's tokens or keys."""
    import os

    return {"PATH": os.path.dirname(program) or os.defpath, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


def run_fixed(argv: list[str], extra_env: Mapping[str, str] | None = None) -> None:
    """Run a program agentmsg fixed (``tmux``, ``codex``) with a scrubbed environment; NotifyError if it fails."""
    import shutil  # only a ring that runs a program pays for these
    import subprocess

    program = shutil.which(argv[0])
    if program is None:
        raise NotifyError(f"{argv[0]}: not found on PATH")
    try:
        done = subprocess.run([program, *argv[1:]], capture_output=True, timeout=COMMAND_TIMEOUT, check=False,
                              stdin=subprocess.DEVNULL, env={**scrubbed(program), **(extra_env or {})},
                              close_fds=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NotifyError(f"{argv[0]}: {exc}") from None
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip().splitlines()
        raise NotifyError(f"{argv[0]} exited {done.returncode}" + (f": {err[-1][:200]}" if err else ""))


def is_thread(value: object) -> bool:
    """A host's thread or session id as a program argument: short, and letters, digits, ``-`` and ``_`` only."""
    return (isinstance(value, str) and 0 < len(value) <= 64
            and all(c.isalnum() or c in "-_" for c in value))


def is_abs_path(value: object) -> bool:
    """An absolute path recorded by a session's own hooks, safe to hand to a program."""
    return (isinstance(value, str) and value.startswith("/") and len(value) <= 256 and "\x00" not in value
            and all(c.isprintable() and c not in "\n\r" for c in value))


def home_of(env: Mapping[str, str]) -> str:
    return env.get("HOME") or "/nonexistent"


def config_dir(env: Mapping[str, str], var: str, *default: str) -> str:
    """A host's folder: its variable when set, else ``~/<default...>``."""
    import os

    return env.get(var) or os.path.join(home_of(env), *default)


def run_host_cli(host: str, args: list[str], env: Mapping[str, str]) -> tuple[bool, str]:
    """Run a host's own CLI for an install step; ``(ok, its last line)``."""
    import shutil
    import subprocess

    exe = shutil.which(host, path=env.get("PATH"))
    if exe is None:
        return False, f"`{host}` is not on PATH"
    try:
        done = subprocess.run([exe, *args], env=dict(env), capture_output=True, timeout=120, check=False,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    text = (done.stdout + done.stderr).decode(errors="replace").strip().splitlines()
    return done.returncode == 0, (text[-1] if text else f"exit {done.returncode}")[:300]


# ---- how text shown to a model names the agentmsg CLI (``Host.bin_on_path``) ----------------------------------
# Claude Code puts an enabled plugin's ``bin/`` on the Bash tool's PATH: ``agentmsg``.  The other hook hosts do
# not (and Codex's shell tool runs a login shell whose ``/etc/profile`` resets PATH), so the command is the
# absolute, shell-quoted path of the launcher next to the code the hook runs (``<plugin root>/bin/agentmsg``):
# the same copy as the hooks, found by any shell.  ``AGENTMSG_CLI`` in the hook's environment overrides it
# (``agentmsg install codex`` from a pip/pipx/uv install sets it to that install's console script).

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_")


def sh_quote(value: str) -> str:
    """``shlex.quote`` without importing shlex."""
    if value and set(value) <= _SAFE:
        return value
    return "'" + value.replace("'", "'\"'\"'") + "'"


def _beside(package_dir: str, *parts: str) -> str | None:
    """A plugin file for the package in ``package_dir``: in its checkout, or in a wheel's ``_plugin``."""
    import os

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
    import os

    explicit = env.get("AGENTMSG_CLI")
    if explicit:
        return sh_quote(explicit)
    if host.bin_on_path:  # the others do not put a plugin's bin/ on the shell's PATH
        return "agentmsg"
    found = launcher(package_dir or os.path.abspath(PACKAGE_DIR))
    return sh_quote(found) if found else "agentmsg"
