"""OpenCode: agentmsg's plugin (``opencode/agentmsg.js``) runs ``hooks/run opencode`` for each event.

OpenCode sets no session variable itself; the plugin sets ``OPENCODE_SESSION_ID`` for the shell tool
(``shell.env``).  Its install writes two marked files (``hosts.opencode_files``).
"""

from __future__ import annotations

from agentmsg.hosts.base import Host

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any


class OpenCode(Host):
    name = runtime = "opencode"
    title = "OpenCode"
    shell_var = "OPENCODE_SESSION_ID"
    runs_hooks = True
    program = "opencode"
    session_vars = ("OPENCODE_SESSION_ID", "OPENCODE", "OPENCODE_PID")

    def spawn_argv(self, program: str, args: Sequence[str], prompt: str) -> list[str]:
        """``opencode --prompt PROMPT``: its TUI with a first prompt (a bare argument is a project folder).

        No resume or fork: ``opencode --session ID --prompt PROMPT`` (1.18.33) opens the session in its TUI but
        neither shows it nor submits the prompt, so no first turn would ever prove it ready (docs/LIFECYCLE.md)."""
        return [program, *args, "--prompt", prompt]

    def spawn_hint(self, args: Sequence[str]) -> str:
        """Its plugin runs the SessionStart hook at the first message, once OpenCode has started."""
        return ("is agentmsg's plugin installed for OpenCode (agentmsg install opencode), and is its model reachable "
                "(its plugin binds the session at its first message)?")

    def install(self, env: Mapping[str, str], **options: str | None) -> dict[str, Any]:
        """The plugin and skill, naming this copy's hooks/run (a wheel: its console script for the CLI);
        ``options["project"]``: that project's folders instead of the user's."""
        from agentmsg.hosts import install, opencode_files

        root = install.plugin_files(need=opencode_files.TEMPLATE, what="OpenCode plugin file", where="/opencode")
        return opencode_files.install(env, root, cli=install.wheel_cli(root), project=options.get("project"))

    def uninstall_project(self, env: Mapping[str, str], project: str) -> dict[str, Any]:
        """The two files ``agentmsg install opencode --project`` wrote, and nothing else."""
        from agentmsg.hosts import opencode_files

        done = opencode_files.uninstall(env, project)
        return {"hosts": [self.name],
                "removed": [done[f"{k}_file"] for k in ("plugin", "skill") if done[k] == "removed"],
                "ran": [], "left": [f"{done[f'{k}_file']}: {done[k]}" for k in ("plugin", "skill")
                                    if done[k] not in ("removed", "absent")],
                "state_root": None, "messages": "kept"}


HOST = OpenCode()
