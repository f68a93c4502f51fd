"""Which host runs a hook: Copilot CLI and Gemini CLI can run the Claude-format hooks file, and Copilot sets
Claude's plugin variables too, so ``hooks/run claude`` checks ``COPILOT_CLI`` first, then ``GEMINI_SESSION_ID``
without ``CLAUDE_CODE_SESSION_ID`` (hooks/run and agentmsg.hosts.registry.host_of).  Each answer has its host's shape,
and Gemini's prompt hook has the launcher's fast path."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

from agentmsg.hosts.registry import host_of
from tests.support.cli_helpers import run_json
from tests.support.helpers_hooks import REPO, python_dir

SHARED_SESSION_START = '/bin/sh "${CLAUDE_PLUGIN_ROOT}${extensionPath}/hooks/run" claude'


def bound(tmp_path: Path, pin: str) -> tuple[Path, str]:
    root = tmp_path / "state"
    res = run_json("open", "--self", "human:carol", "--alias", "carol", "--label", "l", "--task", "t", root=root)
    collab = res.doc["result"]["collab"]
    assert run_json("join", "--collab", collab, "--self", pin, "--alias", "w", root=root).code == 0
    assert run_json("send", "--collab", collab, "--self", "human:carol", "--to", "w", "--subject", "s", "--body",
                    "MARKER body", root=root).code == 0
    return root, collab


def hook(command: str, env: dict[str, str], stdin: dict) -> subprocess.CompletedProcess[bytes]:
    base = {"HOME": env.pop("HOME"), "PATH": f"{python_dir()}:/usr/bin:/bin", "LANG": "C.UTF-8"}
    return subprocess.run(["/bin/sh", "-c", command], input=json.dumps(stdin).encode(), env={**base, **env},
                          capture_output=True, timeout=60)


def test_host_of_checks_copilot_before_claude_variables():
    copilot = {"COPILOT_CLI": "1", "CLAUDE_PLUGIN_ROOT": "/x", "CLAUDE_CODE_SESSION_ID": "s"}
    assert host_of("claude", copilot) == "copilot"
    assert host_of("claude", {"GEMINI_SESSION_ID": "s", "CLAUDE_PROJECT_DIR": "/p"}) == "gemini"
    assert host_of("claude", {"GEMINI_SESSION_ID": "s", "CLAUDE_CODE_SESSION_ID": "t"}) == "claude"
    assert host_of("codex", {"COPILOT_CLI": "1"}) == "codex"  # only the Claude-format file is shared


def test_copilot_running_the_claude_hooks_file_gets_copilot_output(tmp_path):
    sid = str(uuid.uuid4())
    root, collab = bound(tmp_path, f"copilot:{sid}")
    (group,) = json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"]["UserPromptSubmit"]
    env = {"HOME": str(tmp_path), "AGENTMSG_HOME": str(root), "COPILOT_CLI": "1", "CLAUDE_PLUGIN_ROOT": str(REPO),
           "CLAUDE_PLUGIN_DATA": str(tmp_path / "data"), "CLAUDE_PROJECT_DIR": str(tmp_path)}
    done = hook(group["hooks"][0]["command"], env, {"hook_event_name": "UserPromptSubmit", "sessionId": sid,
                                                      "prompt": "go"})
    assert done.returncode == 0 and done.stderr == b""
    doc = json.loads(done.stdout)
    assert list(doc) == ["additionalContext"] and "MARKER body" in doc["additionalContext"]
    assert f"for w in collaboration {collab}" in doc["additionalContext"]


def test_gemini_shared_session_start_and_fast_prompt(tmp_path):
    sid = str(uuid.uuid4())
    root, collab = bound(tmp_path, f"gemini:{sid}")
    env = {"HOME": str(tmp_path), "AGENTMSG_HOME": str(root), "GEMINI_SESSION_ID": sid,
           "GEMINI_PROJECT_DIR": str(tmp_path), "CLAUDE_PROJECT_DIR": str(tmp_path)}
    start = SHARED_SESSION_START.replace("${extensionPath}", str(REPO))  # as Gemini substitutes it
    assert json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"]["SessionStart"][0]["hooks"][0][
        "command"] == SHARED_SESSION_START
    done = hook(start, dict(env), {"hook_event_name": "SessionStart", "session_id": sid, "source": "startup"})
    doc = json.loads(done.stdout)
    assert list(doc) == ["hookSpecificOutput"] and list(doc["hookSpecificOutput"]) == ["additionalContext"]
    assert doc["hookSpecificOutput"]["additionalContext"].startswith(f"agentmsg: this session (gemini:{sid}) ")
    (group,) = json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"]["BeforeAgent"]
    prompt = group["hooks"][0]["command"].replace("${extensionPath}", str(REPO))
    stdin = {"hook_event_name": "BeforeAgent", "session_id": sid, "prompt": "go"}
    first = json.loads(hook(prompt, dict(env), stdin).stdout)["hookSpecificOutput"]["additionalContext"]
    assert "MARKER body" in first
    mid = first.split("message 1 · id ", 1)[1].split("\n", 1)[0]
    assert run_json("ack", "--collab", collab, "--self", f"gemini:{sid}", "--message", mid, root=root).code == 0
    assert hook(prompt, dict(env), stdin).stdout == b""  # nothing pending: nothing shown, and the marker is set
    marker = root / "idle" / "gemini" / f"{sid}.idle"
    assert marker.is_file()
    # The fast path answers without an interpreter: with no python3 on PATH at all, still silent and exit 0.
    done = subprocess.run(["/bin/sh", "-c", prompt], input=json.dumps(stdin).encode(), capture_output=True,
                          env={"HOME": str(tmp_path), "AGENTMSG_HOME": str(root), "GEMINI_SESSION_ID": sid,
                               "PATH": "/nonexistent", "AGENTMSG_PYTHON": "/nonexistent/python3"}, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert not (root / "hooks.log").exists()
