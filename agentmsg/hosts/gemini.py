"""Gemini CLI: a linked extension whose Claude-format hooks run ``hooks/run claude``.

Facts checked on 0.61.0 (docs/HOSTS-NOTES.md): hooks get ``GEMINI_SESSION_ID`` and never
``CLAUDE_CODE_SESSION_ID``; the agent's shell gets no session variable unless Gemini was started by
``agentmsg run gemini`` (``hosts.launch``), which exports it; context goes in ``hookSpecificOutput`` without an
event name; the extension's ``bin/`` is not on the shell's PATH.
"""

from __future__ import annotations

from agentmsg.hosts.base import Host

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

SESSION_VAR = "GEMINI_SESSION_ID"


class Gemini(Host):
    name = runtime = "gemini"
    title = "Gemini CLI"
    shell_var = hook_var = SESSION_VAR
    runs_hooks = True
    bin_on_path = False
    program = "gemini"
    session_vars = (SESSION_VAR, "GEMINI_CLI", "GEMINI_PROJECT_DIR", "GEMINI_CWD")
    # 0.61.0's isHeadlessMode (and Ink, its UI, reads CI too): a spawned session must not be a CI job.
    headless_vars = ("CI", "GITHUB_ACTIONS")
    resumes = True

    def spawn_argv(self, program: str, args: Sequence[str], prompt: str) -> list[str]:
        """``gemini ARGS -i PROMPT``: ``--prompt-interactive``, not a positional prompt, which Gemini runs
        headless (answers once and exits) wherever ``CI=true`` is set, a terminal or not (0.61.0's
        ``isHeadlessMode``; docs/LIFECYCLE.md)."""
        return [program, *args, "-i", prompt]

    def resume_argv(self, program: str, session: str, args: Sequence[str], prompt: str) -> list[str]:
        """``gemini --resume ID ARGS -i PROMPT``: the same session id, interactive (as :meth:`spawn_argv`)."""
        return [program, "--resume", session, *args, "-i", prompt]

    def runs_claude_format(self, env: Mapping[str, str]) -> bool:
        # Claude Code sets its own variable in every hook; Gemini never does.
        from agentmsg.hosts.claude import HOST as claude

        return bool(env.get(SESSION_VAR)) and not env.get(claude.hook_var or "")

    def context(self, event: str, text: str) -> dict[str, Any]:
        return {"hookSpecificOutput": {"additionalContext": text}}

    def refusal(self, reason: str) -> dict[str, Any]:
        # BeforeTool ignores Claude's permissionDecision; its own shape blocks the tool (docs/CLAIMS.md).
        return {"decision": "deny", "reason": reason}


    def install(self, env: Mapping[str, str], **options: str | None) -> dict[str, Any]:
        """Link this copy as an extension, through the host's own CLI, run in place."""
        from agentmsg.hosts import cliinstall, install

        return cliinstall.install_gemini(install.plugin_files(), env)


HOST = Gemini()
