"""Each host behind the one ``Host`` interface (agentmsg/hosts/): what it declares, and what it does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentmsg.domain import validate
from agentmsg.errors import UsageError
from agentmsg.hosts import base, claude, codex, registry
from agentmsg.runtime import facts, notify

REPO = Path(__file__).resolve().parents[2]


def test_every_host_is_listed_once_by_name_and_by_runtime_and_names_a_valid_runtime() -> None:
    names = [h.name for h in registry.all_hosts()]
    assert names == ["claude", "codex", "copilot", "gemini", "opencode", "cursor", "human"]
    assert len(set(names)) == len(names) and len({h.runtime for h in registry.all_hosts()}) == len(names)
    assert tuple(names) == registry.NAMES
    for host in registry.all_hosts():
        assert isinstance(host, base.Host) and host.runtime in validate.RUNTIMES and host.title
        assert registry.of_runtime(host.runtime) is host and registry.get(host.name) is host
    assert registry.get("aider") is None and registry.of_runtime("nope") is None
    assert registry.get_or_nothing("aider") is registry.get("human")


def test_the_hooks_serve_exactly_the_hosts_hooks_run_names() -> None:
    assert registry.hook_runtimes() == {"claude": "claude-code", "codex": "codex", "copilot": "copilot",
                                      "gemini": "gemini", "opencode": "opencode"}


def test_shell_variables_are_each_hosts_own_in_identitys_order() -> None:
    assert registry.shell_vars() == (("CLAUDE_CODE_SESSION_ID", "claude-code"), ("CODEX_THREAD_ID", "codex"),
                                   ("COPILOT_AGENT_SESSION_ID", "copilot"), ("GEMINI_SESSION_ID", "gemini"),
                                   ("OPENCODE_SESSION_ID", "opencode"))
    from agentmsg.hosts import identity

    assert str(identity.resolve(None, {"CLAUDE_CODE_SESSION_ID": "abc"})) == "claude-code:abc"


@pytest.mark.parametrize(("name", "expected"), [
    ("claude", {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "hi"}}),
    ("codex", {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "hi"}}),
    ("gemini", {"hookSpecificOutput": {"additionalContext": "hi"}}),
    ("copilot", {"additionalContext": "hi"}),
    ("opencode", {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "hi"}}),
])
def test_each_host_gets_context_in_its_own_shape(name: str, expected: dict[str, object]) -> None:
    assert registry.by_name()[name].context("UserPromptSubmit", "hi") == expected


def test_units_midturn_and_where_the_session_id_comes_from() -> None:
    by = registry.by_name()
    assert {n for n, h in by.items() if h.units == "bytes"} == {"codex"}
    assert {n for n, h in by.items() if h.midturn} == {"claude", "codex"}
    assert {n for n, h in by.items() if h.session_on_stdin} == {"codex", "copilot"}
    assert {n: h.hook_var for n, h in by.items() if h.hook_var} == {"claude": "CLAUDE_CODE_SESSION_ID",
                                                                     "gemini": "GEMINI_SESSION_ID"}
    assert {n for n, h in by.items() if not h.bin_on_path} == {"codex", "copilot", "gemini"}


def test_host_of_asks_copilot_before_gemini_and_only_for_the_claude_format_file() -> None:
    assert registry.host_of("claude", {"COPILOT_CLI": "1", "GEMINI_SESSION_ID": "g"}) == "copilot"
    assert registry.host_of("claude", {"GEMINI_SESSION_ID": "g"}) == "gemini"
    assert registry.host_of("claude", {"GEMINI_SESSION_ID": "g", "CLAUDE_CODE_SESSION_ID": "c"}) == "claude"
    assert registry.host_of("codex", {"COPILOT_CLI": "1"}) == "codex"


def test_facts_a_host_adds_are_kept_and_no_other_hosts_are(tmp_path: Path) -> None:
    env = {"CODEX_HOME": "/h/.codex", "CLAUDE_CODE_MESSAGING_SOCKET": "/tmp/s.sock", "HOME": str(tmp_path)}
    got = facts.gather("codex", "t-1", env)
    assert got["thread"] == "t-1" and got["codex_home"] == "/h/.codex" and "claude_socket" not in got
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    facts.record(str(root), "codex:t-1", {**got, "claude_socket": "/planted", "other": 1})
    kept = facts.load(str(root), "codex:t-1")["facts"]
    assert kept["thread"] == "t-1" and "claude_socket" not in kept and "other" not in kept
    claude_facts = facts.gather("claude", "s-1", env)
    assert claude_facts["claude_socket"] == "/tmp/s.sock" and "thread" not in claude_facts


def test_a_hosts_notify_adapter_is_typed_validated_and_refused_otherwise() -> None:
    assert notify.KINDS == ("hook", "tmux", "codex-queue")
    assert notify.from_option("codex-queue", {"CODEX_THREAD_ID": "019a-b_c"}) == {"adapter": "codex-queue",
                                                                                   "thread": "019a-b_c"}
    with pytest.raises(UsageError, match="needs this session's CODEX_THREAD_ID"):
        notify.from_option("codex-queue", {"CODEX_THREAD_ID": "a;rm -rf /"})
    assert notify.validate({"adapter": "codex-queue", "thread": "t1"}) == {"adapter": "codex-queue", "thread": "t1"}
    with pytest.raises(notify.NotifyError):
        notify.validate({"adapter": "codex-queue", "thread": "$(x)"})
    with pytest.raises(UsageError, match="expected one of hook, tmux, codex-queue"):
        notify.from_option("slack", {})


def test_a_host_with_no_native_ring_falls_back_and_codex_reports_why(tmp_path: Path) -> None:
    none, why = registry.by_name()["gemini"].ring(str(tmp_path), "gemini:s", {}, "line", {}, busy=False)
    assert none is None and why == "no native path"
    none, why = codex.HOST.ring(str(tmp_path), "codex:t", {"thread": "t1"}, "line", {}, busy=False)
    assert none is None and why.startswith("codex-queue failed: ")  # no codex on this PATH... or a failing one


def test_a_host_that_installs_itself_says_so(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="installs agentmsg itself"):
        claude.HOST.install({"HOME": str(tmp_path)})


def test_the_codex_user_hook_defers_only_while_the_codex_plugin_is_enabled(tmp_path: Path) -> None:
    home = tmp_path / ".codex"
    home.mkdir()
    env = {"CODEX_HOME": str(home)}
    assert codex.HOST.defers_to_plugin(env) is False
    (home / "config.toml").write_text('[plugins."agentmsg@local"]\nenabled = true\n')
    assert codex.HOST.defers_to_plugin(env) is True
    assert codex.HOST.defers_to_plugin({**env, "PLUGIN_ROOT": "/p"}) is False  # the plugin's own copy runs
    os.mkfifo(home / "f.toml")
    assert codex.HOST.defers_to_plugin({"CODEX_HOME": str(home / "none")}) is False


def test_claudes_env_file_gets_the_root_once_and_quoted(tmp_path: Path) -> None:
    env_file = tmp_path / "env"
    root = str(tmp_path / "it's root")
    for _ in range(2):
        claude.HOST.session_started({"CLAUDE_ENV_FILE": str(env_file)}, root)
    lines = [line for line in env_file.read_text().splitlines() if line]
    assert lines == ["export AGENTMSG_HOME='" + root.replace("'", "'\"'\"'") + "'"]
    done = subprocess.run(["/bin/sh", "-c", f". {env_file} && printf %s \"$AGENTMSG_HOME\""], capture_output=True,
                          text=True, check=True)
    assert done.stdout == root


def test_every_host_module_is_lean_and_a_hook_loads_only_its_own() -> None:
    """The hooks ask the registry on every run: it loads a host's module when asked for that host, and no host
    module imports json, re, typing, subprocess, shlex or pathlib."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from agentmsg.hosts import registry; "
            "before = {m for m in sys.modules if m.startswith('agentmsg.hosts.')}; registry.get('codex'); "
            "one = {m for m in sys.modules if m.startswith('agentmsg.hosts.')} - before; registry.all_hosts(); "
            "print(' '.join(sorted(before)), '|', ' '.join(sorted(one)), '|', ' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(REPO)], capture_output=True, text=True,
                         check=True).stdout
    before, one, everything = (part.split() for part in out.split("|"))
    assert before == ["agentmsg.hosts.registry"]
    assert one == ["agentmsg.hosts.base", "agentmsg.hosts.codex"]
    assert not {"json", "re", "typing", "subprocess", "shlex", "pathlib"} & set(everything)
    assert json.dumps(sorted(m for m in everything if m.startswith("agentmsg.hosts."))) == json.dumps(
        [f"agentmsg.hosts.{n}" for n in ("base", "claude", "codex", "copilot", "cursor", "gemini", "human",
                                         "opencode", "registry")])
