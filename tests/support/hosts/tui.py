"""Interactive host TUIs (``claude``, ``codex``) inside a private tmux server, against a stub model.

The harness (``harness.py``) runs one non-interactive turn; a wake-up needs
a session that sits idle at its prompt.  ``Tui`` starts the real host in a
detached pane of its own tmux server (socket under the test's tmp dir), with
the harness's scrubbed environment plus ``AGENTMSG_HOME``, and offers what a
test needs: type, wait for text on screen, wait for the Nth model request.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .harness import CODEX_KEY_ENV, REPO_ROOT, claude_bin, claude_env, codex_bin, codex_config_args, codex_env
from .stubs import AnthropicStub, OpenAIResponsesStub

CLAUDE_KEY = "sk-ant-stub-not-a-key"  # harness.claude_env's key: interactive Claude asks once unless approved


class Tui:
    def __init__(self, sock: Path, pane: str, env: Mapping[str, str]) -> None:
        self.sock, self.pane, self.env = sock, pane, dict(env)

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-S", str(self.sock), *args], capture_output=True, text=True, timeout=10,
                              check=True)
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.pane)

    def type(self, text: str, enter: bool = True) -> None:
        self.tmux("send-keys", "-t", self.pane, "-l", text)
        if enter:
            time.sleep(0.3)
            self.tmux("send-keys", "-t", self.pane, "Enter")

    def pid(self) -> int:
        return int(self.tmux("display-message", "-p", "-t", self.pane, "#{pane_pid}").strip())

    def close(self) -> None:
        subprocess.run(["tmux", "-S", str(self.sock), "kill-server"], capture_output=True, check=False)


def wait_for(check: Callable[[], Any], timeout: float, what: str, tui: Tui | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    screen = tui.screen() if tui is not None else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n--- screen ---\n{screen}")


def _start(tmp: Path, argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> Tui:
    if shutil.which("tmux") is None:
        raise RuntimeError("tmux is not installed")
    sock = tmp / "tmux.sock"
    env = {**env, "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    cwd.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tmux", "-S", str(sock), "-f", "/dev/null", "new-session", "-d", "-x", "160", "-y", "45",
                    "-c", str(cwd), *argv], env=env, check=True, timeout=10)
    return Tui(sock, "%0", env)


def plugin_without_waiter(tmp: Path) -> Path:
    """A plugin folder like this checkout whose hooks.json has no asyncRewake waiter (links to the rest)."""
    out = tmp / "plugin"
    (out / "hooks").mkdir(parents=True)
    for name in (".claude-plugin", "agentmsg", "bin", "skills"):
        (out / name).symlink_to(REPO_ROOT / name)
    for name in ("run", "agentmsg_hook.py"):
        (out / "hooks" / name).symlink_to(REPO_ROOT / "hooks" / name)
    doc = json.loads((REPO_ROOT / "hooks" / "hooks.json").read_text())
    for event, groups in doc["hooks"].items():
        doc["hooks"][event] = [g for g in groups if not any(h.get("asyncRewake") for h in g["hooks"])]
    (out / "hooks" / "hooks.json").write_text(json.dumps(doc))
    return out


def forget_facts(root: Path, pin: str, *keys: str) -> None:
    """Drop these fields from a session's recorded facts (a later ``wake on`` copies what is left)."""
    from agentmsg.backends.file import layout

    path = Path(layout.session_file(str(root), pin, "json"))
    doc = json.loads(path.read_text())
    for key in keys:
        doc["facts"].pop(key, None)
    path.write_text(json.dumps(doc))


def forget_socket(root: Path, pin: str) -> None:
    """Drop Claude's peer socket from a session's recorded facts (as for a Claude Code without one)."""
    forget_facts(root, pin, "claude_socket", "peer_protocol")


def forget_pane(root: Path, pin: str) -> None:
    """Drop the tmux pane from a session's recorded facts (as for a session outside tmux)."""
    forget_facts(root, pin, "pane", "tmux_socket")


def claude_tui(tmp: Path, stub: AnthropicStub, *, root: Path, session: str,
               plugin_dir: Path = REPO_ROOT, extra: Mapping[str, str] | None = None, allow_bash: bool = True) -> Tui:
    """Interactive ``claude`` at its prompt (onboarding, key and folder trust pre-accepted)."""
    home, cwd = tmp / "home", tmp / "proj"
    home.mkdir(parents=True, exist_ok=True)
    (home / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True, "theme": "dark", "numStartups": 5,
        "customApiKeyResponses": {"approved": [CLAUDE_KEY[-20:]], "rejected": []},
        "projects": {str(cwd): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}},
    }))
    env = claude_env(home, stub, {"AGENTMSG_HOME": str(root), **(extra or {})})
    argv = [str(claude_bin()), "--plugin-dir", str(plugin_dir), "--session-id", session,
            "--permission-mode", "default", *(["--allowedTools", "Bash"] if allow_bash else [])]
    tui = _start(tmp, argv, env, cwd)
    wait_for(lambda: "❯" in tui.screen(), 30, "claude's prompt", tui)
    if root.is_dir():  # the SessionStart hook records the session facts; it may finish after the prompt shows
        from agentmsg.backends.file import layout

        facts = Path(layout.session_file(str(root), f"claude-code:{session}", "json"))
        wait_for(facts.exists, 20, "the session facts", tui)
    return tui


def codex_tui(tmp: Path, stub: OpenAIResponsesStub, *, root: Path, extra: Mapping[str, str] | None = None) -> Tui:
    """Interactive ``codex`` with this checkout's hooks as user hooks (trust bypassed), at its prompt."""
    home, codex_home, cwd = tmp / "home", tmp / "codex-home", tmp / "proj"
    for d in (home, codex_home):
        d.mkdir(parents=True, exist_ok=True)
    hooks = json.loads((REPO_ROOT / "hooks" / "codex-hooks.json").read_text())
    text = json.dumps(hooks).replace("${PLUGIN_ROOT}", str(REPO_ROOT))
    (codex_home / "hooks.json").write_text(text)
    env = codex_env(home, codex_home, stub, {"AGENTMSG_HOME": str(root), CODEX_KEY_ENV: "stub-not-a-key",
                                             **(extra or {})})
    argv = [str(codex_bin()), *codex_config_args(stub), "--dangerously-bypass-hook-trust",
            "--dangerously-bypass-approvals-and-sandbox", "-C", str(cwd)]
    tui = _start(tmp, argv, env, cwd)
    wait_for(lambda: "›" in tui.screen(), 30, "codex's prompt", tui)
    return tui


def agentmsg(root: Path, *args: str) -> dict[str, Any]:
    """The CLI as a subprocess (``tests/support/cli_helpers.run_json``); its result, which must be ok."""
    from tests.support.cli_helpers import run_json

    _code, doc, _err = run_json(*args, root=root)
    assert doc["ok"], doc
    return dict(doc["result"])
