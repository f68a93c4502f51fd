"""Copilot CLI: a plugin whose Claude-format hooks run ``hooks/run claude`` (and its own camelCase events).

Facts checked on 1.0.102 (docs/HOSTS-NOTES.md): hooks get the session id on stdin only, and ``COPILOT_CLI``
(and ``CLAUDE_PLUGIN_ROOT`` too); the shell tool and MCP servers get ``COPILOT_AGENT_SESSION_ID``; context is
read only from a top-level ``additionalContext``; the plugin's ``bin/`` is not on the shell's PATH.
"""

from __future__ import annotations

from agentmsg.hosts.base import Host

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any


class Copilot(Host):
    name = runtime = "copilot"
    title = "Copilot CLI"
    shell_var = "COPILOT_AGENT_SESSION_ID"
    session_on_stdin = True
    runs_hooks = True
    bin_on_path = False
    program = "copilot"
    session_vars = ("COPILOT_AGENT_SESSION_ID", "COPILOT_CLI", "COPILOT_PROJECT_DIR", "COPILOT_PLUGIN_ROOT",
                    "COPILOT_PLUGIN_DATA")

    resumes = True

    def spawn_argv(self, program: str, args: Sequence[str], prompt: str) -> list[str]:
        """``copilot -i PROMPT``: interactive, with a first prompt (a bare argument is not a prompt to it)."""
        return [program, *args, "-i", prompt]

    def resume_argv(self, program: str, session: str, args: Sequence[str], prompt: str) -> list[str]:
        """``copilot --resume ID -i PROMPT``: the same session id, interactive."""
        return [program, "--resume", session, *args, "-i", prompt]

    def spawn_hint(self, args: Sequence[str]) -> str:
        """Copilot asks whether to trust a new folder before its first prompt, and its session starts only then."""
        return ("are agentmsg's hooks installed for Copilot CLI (agentmsg install copilot, or --plugin-dir after --), "
                "is the folder trusted (its trust screen, or trusted_folders in $COPILOT_HOME/config.json), and is "
                "its model reachable?")

    def runs_claude_format(self, env: Mapping[str, str]) -> bool:
        return bool(env.get("COPILOT_CLI"))

    def context(self, event: str, text: str) -> dict[str, Any]:
        return {"additionalContext": text}  # hookSpecificOutput is ignored


    def install(self, env: Mapping[str, str], **options: str | None) -> dict[str, Any]:
        """This copy as a plugin, through the host's own CLI, run in place."""
        from agentmsg.hosts import cliinstall, install

        return cliinstall.install_copilot(install.plugin_files(), env)


HOST = Copilot()
