"""What a spawned session inherits, and the command line each host gets (no process is started here)."""

from __future__ import annotations

from agentmsg.hosts import registry
from agentmsg.service import lifecycle


def test_the_child_inherits_the_spawners_environment_minus_agentmsg_and_every_hosts_session_variables() -> None:
    spawner = {"PATH": "/usr/bin", "HOME": "/h", "ANTHROPIC_API_KEY": "k", "CODEX_THREAD_ID": "t-1",
               "CODEX_SESSION_ID": "t-1", "CLAUDE_CODE_SESSION_ID": "c-1", "CLAUDECODE": "1",
               "GEMINI_SESSION_ID": "g", "COPILOT_AGENT_SESSION_ID": "p", "OPENCODE_SESSION_ID": "o",
               "PLUGIN_ROOT": "/p", "AGENTMSG_COLLAB": "x", "AGENTMSG_CLI": "/bin/agentmsg", "TMUX": "/s,1,0",
               "TMUX_PANE": "%3"}
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
