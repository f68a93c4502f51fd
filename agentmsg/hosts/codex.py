"""Codex: the plugin's or the user's hooks, ``codex queue`` wake-ups, and its thread id.

Facts checked on codex-cli 0.169.0 (docs/HOSTS-NOTES.md): hooks get the session id on stdin only; the
agent's shell has ``CODEX_THREAD_ID``; the plugin's ``bin/`` is not on the shell's PATH (commands run through
``bash -lc``); plugin hooks get ``PLUGIN_ROOT``, user hooks do not; the context cap counts UTF-8 bytes;
``codex queue --thread ID --message TEXT`` keeps the user's draft and queues behind a running turn.
"""

from __future__ import annotations

from agentmsg.hosts.base import (
    Host,
    NotifyError,
    config_dir,
    is_abs_path,
    is_thread,
    run_fixed,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from agentmsg.hosts.base import Rung

QUEUE = "codex-queue"
#: Codex's own switch for untrusted hooks; agentmsg never adds it (``agentmsg spawn codex ... -- FLAG``).
TRUST_FLAG = "--dangerously-bypass-hook-trust"


class Codex(Host):
    name = runtime = "codex"
    title = "Codex"
    shell_var = "CODEX_THREAD_ID"
    session_on_stdin = True
    runs_hooks = True
    midturn = True
    units = "bytes"
    bin_on_path = False
    queues = True
    native_wake = True
    tmux_first = True  # its queue starts a turn seconds later; tmux when the pane is safe (runtime/wakeup.py)
    notify_adapter = QUEUE
    fact_fields = ("thread", "codex_home")
    program = "codex"
    session_vars = ("CODEX_THREAD_ID", "CODEX_SESSION_ID", "CODEX_SANDBOX", "CODEX_SANDBOX_NETWORK_DISABLED",
                    "PLUGIN_ROOT", "PLUGIN_DATA")
    resumes = forks = True

    def resume_argv(self, program: str, session: str, args: Sequence[str], prompt: str) -> list[str]:
        """``codex resume ID``: the same thread id, so the alias stays with its pin."""
        return [program, "resume", *args, session, prompt]

    def fork_argv(self, program: str, session: str, args: Sequence[str], prompt: str) -> list[str]:
        """``codex fork ID``: the thread so far, as a new thread."""
        return [program, "fork", *args, session, prompt]

    def spawn_hint(self, args: Sequence[str]) -> str:
        if TRUST_FLAG in args:
            return super().spawn_hint(args)
        return (f"Codex runs agentmsg's hooks only once they are trusted: trust them in codex's /hooks screen, or "
                f"pass {TRUST_FLAG} after --")

    def facts(self, env: Mapping[str, str], pid: int | None, session: str) -> dict[str, Any]:
        facts: dict[str, Any] = {"thread": session}
        if env.get("CODEX_HOME"):
            facts["codex_home"] = env["CODEX_HOME"]
        return facts

    def defers_to_plugin(self, env: Mapping[str, str]) -> bool:
        """True for a user-level hook copy (``agentmsg install codex``; Codex gives plugin hooks
        ``PLUGIN_ROOT``, user hooks not) while agentmsg is also enabled as a Codex plugin in
        ``$CODEX_HOME/config.toml``: both copies would run every hook, so the user copy stays silent and the
        plugin's runs (each hook once).  ``agentmsg doctor`` still reports the duplicate install."""
        import os

        if env.get("PLUGIN_ROOT"):
            return False
        path = os.path.join(home(env), "config.toml")
        try:
            import stat

            if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block the read
                return False
            with open(path, "rb") as f:
                lines = f.read(1 << 20).decode("utf-8", "replace").splitlines()
        except OSError:
            return False
        return plugin_enabled(lines)

    def install(self, env: Mapping[str, str], **options: str | None) -> dict[str, Any]:
        """agentmsg's hooks in Codex's user ``hooks.json``, and its skill (``options["home"]``: the Codex home)."""
        from agentmsg.hosts import install as installer

        root = installer.plugin_files(hint=", or install the plugin instead")
        chome = options.get("home") or installer.default_codex_home(env.get("HOME"))
        return installer.install_codex(chome, root, home=env.get("HOME"), cli=installer.wheel_cli(root))

    def doctor_note(self, enabled: list[dict[str, Any]]) -> str | None:
        if not enabled:
            return None
        return ("codex runs plugin and user hooks only once trusted (/hooks screen, or "
                "--dangerously-bypass-hook-trust for `codex exec`); trust is not visible from here")

    def ring(self, root: str, pin: str, facts: Mapping[str, Any], line: str, ring: dict[str, Any], *,
             busy: bool) -> tuple[Rung | None, str]:
        thread = facts.get("thread")
        if not is_thread(thread):
            return None, "no native path"
        try:
            queue(str(thread), line, facts.get("codex_home"), facts.get("exe"))
            return ("rang", QUEUE), ""
        except NotifyError as exc:
            return None, f"{QUEUE} failed: {exc}"

    def notify_params(self, env: Mapping[str, str]) -> dict[str, Any] | None:
        thread = env.get(self.shell_var or "", "")
        if not is_thread(thread):
            from agentmsg.errors import UsageError

            raise UsageError(f"--notify {QUEUE} needs this session's {self.shell_var}")
        return {"adapter": QUEUE, "thread": thread}

    def valid_notify(self, config: Mapping[str, Any]) -> dict[str, Any] | None:
        return {"adapter": QUEUE, "thread": config["thread"]} if is_thread(config.get("thread")) else None

    def notify(self, adapter: Mapping[str, Any], line: str) -> str:
        run_fixed(["codex", "queue", "--thread", adapter["thread"], "--message", line])
        return f"{QUEUE}: queued for thread {adapter['thread']}"


def home(env: Mapping[str, str]) -> str:
    """``$CODEX_HOME``, else ``~/.codex``."""
    return config_dir(env, "CODEX_HOME", ".codex")


def plugin_enabled(lines: list[str]) -> bool:
    """Whether ``config.toml``'s lines enable an ``agentmsg@...`` plugin."""
    ours = False
    for raw in lines:
        line = raw.strip()
        if line.startswith("["):
            name = line.strip("[]").strip()
            ours = name.startswith('plugins."agentmsg@') and name.endswith('"')
        elif ours and line.replace(" ", "").lower() == "enabled=true":
            return True
    return False


def queue(thread: str, line: str, codex_home: object, exe: object = None) -> None:
    """``codex queue``: ``codex`` on PATH, else the binary the recipient's own session runs."""
    import os
    import shutil

    program = shutil.which("codex")
    if program is None and isinstance(exe, str) and os.path.basename(exe) == "codex" and os.access(exe, os.X_OK):
        program = exe
    if program is None:
        raise NotifyError("codex: not found on PATH")
    chome = codex_home if is_abs_path(codex_home) else None
    run_fixed([program, "queue", "--thread", thread, "--message", line],
              extra_env={"CODEX_HOME": str(chome)} if chome else None)


HOST = Codex()
