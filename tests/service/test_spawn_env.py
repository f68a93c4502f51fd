"""What a spawned session inherits, and the command line each host gets (no process is started here)."""

from __future__ import annotations

import pytest

from agentmsg.errors import HostCannot
from agentmsg.hosts import registry
from agentmsg.service import lifecycle


def test_the_child_inherits_the_spawners_environment_minus_agentmsg_and_every_hosts_session_variables() -> None:
    spawner = {"PATH": "/usr/bin", "HOME": "/h", "ANTHROPIC_API_KEY": "k", "CODEX_THREAD_ID": "t-1",
               "CODEX_SESSION_ID": "t-1", "CLAUDE_CODE_SESSION_ID": "c-1", "CLAUDECODE": "1",
               "GEMINI_SESSION_ID": "g", "COPILOT_AGENT_SESSION_ID": "p", "OPENCODE_SESSION_ID": "o",
               "PLUGIN_ROOT": "/p", "AGENTMSG_COLLAB": "x", "AGENTMSG_CLI": "/bin/agentmsg", "TMUX": "/s,1,0",
               "TMUX_PANE": "%3", "CI": "true", "GITHUB_ACTIONS": "true"}  # a CI job's: Gemini would run one-shot
    env = lifecycle.child_env(spawner, "/root", "amt-t", "c-id")
    assert env == {"PATH": "/usr/bin", "HOME": "/h", "ANTHROPIC_API_KEY": "k", "AGENTMSG_HOME": "/root",
                   "AGENTMSG_TICKET": "amt-t", "AGENTMSG_TICKET_COLLAB": "c-id"}
    for host in registry.all_hosts():  # every host's own session variable is listed
        if host.shell_var:
            assert host.shell_var in host.session_vars or host.shell_var not in env


def test_each_host_starts_interactive_with_the_users_arguments_and_no_dangerous_flag_of_agentmsgs() -> None:
    claude, codex = registry.get("claude"), registry.get("codex")
    assert claude is not None and codex is not None
    assert claude.spawn_argv("/b/claude", ["--allowedTools", "Bash"], "hi") == [
        "/b/claude", "--allowedTools", "Bash", "--", "hi"]
    assert codex.spawn_argv("/b/codex", ["-c", "x=1"], "hi") == ["/b/codex", "-c", "x=1", "hi"]
    assert claude.resume_argv("/b/claude", "s-1", [], "hi") == ["/b/claude", "--resume", "s-1", "--", "hi"]
    assert codex.resume_argv("/b/codex", "t-1", ["-c", "x=1"], "hi") == ["/b/codex", "resume", "-c", "x=1", "t-1",
                                                                         "hi"]
    for host in registry.all_hosts():
        if host.program:
            assert not any(a.startswith("--dangerously") for a in host.spawn_argv(host.program, [], "hi"))
    assert "/hooks" in codex.spawn_hint([]) and "--dangerously-bypass-hook-trust" in codex.spawn_hint([])
    assert "/hooks" not in codex.spawn_hint(["--dangerously-bypass-hook-trust"])
    hello = lifecycle.hello("lead", "rev", "c-id", task=True)
    assert hello.startswith("agentmsg: lead started this session as participant rev")


def test_gemini_copilot_and_opencode_start_interactive_with_a_first_prompt_and_resume_where_they_can() -> None:
    gemini, copilot, opencode = registry.get("gemini"), registry.get("copilot"), registry.get("opencode")
    assert gemini is not None and copilot is not None and opencode is not None
    # Gemini and Copilot: -i (Gemini runs a positional prompt headless where CI=true); OpenCode: --prompt (a bare
    # argument is a folder)
    assert gemini.spawn_argv("/b/gemini", ["-m", "m"], "hi") == ["/b/gemini", "-m", "m", "-i", "hi"]
    assert copilot.spawn_argv("/b/copilot", ["--plugin-dir", "/p"], "hi") == [
        "/b/copilot", "--plugin-dir", "/p", "-i", "hi"]
    assert opencode.spawn_argv("/b/opencode", [], "hi") == ["/b/opencode", "--prompt", "hi"]
    assert gemini.resume_argv("/b/gemini", "s-1", ["-m", "m"], "hi") == ["/b/gemini", "--resume", "s-1", "-m", "m",
                                                                         "-i", "hi"]
    assert copilot.resume_argv("/b/copilot", "s-1", [], "hi") == ["/b/copilot", "--resume", "s-1", "-i", "hi"]
    assert [(h.name, h.resumes, h.forks) for h in (gemini, copilot, opencode)] == [
        ("gemini", True, False), ("copilot", True, False), ("opencode", False, False)]


def test_a_host_that_cannot_resume_or_fork_says_so_with_its_own_exit_code() -> None:
    for name in ("gemini", "copilot", "opencode"):
        host = registry.get(name)
        assert host is not None
        with pytest.raises(HostCannot, match="cannot fork a session from agentmsg") as caught:
            host.fork_argv("/b/x", "s-1", [], "hi")
        assert caught.value.code == 19 and caught.value.line().startswith("host cannot: ")
    opencode = registry.get("opencode")
    assert opencode is not None
    with pytest.raises(HostCannot, match="OpenCode cannot resume"):
        opencode.resume_argv("/b/opencode", "s-1", [], "hi")


def test_a_spawn_that_never_bound_names_what_to_check_on_each_host() -> None:
    copilot, opencode = registry.get("copilot"), registry.get("opencode")
    assert copilot is not None and opencode is not None
    assert "trusted_folders" in copilot.spawn_hint([]) and "agentmsg install copilot" in copilot.spawn_hint([])
    assert "agentmsg install opencode" in opencode.spawn_hint([])
