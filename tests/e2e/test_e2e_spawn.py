"""``agentmsg spawn``, ``kill`` and ``resume`` with the REAL ``claude`` and ``codex`` TUIs, against stub models.

Each session is started by the CLI itself (as a subprocess): in a window of a tmux server the test owns and
runs "the user's" shell in (``--where tmux``, ``$TMUX`` pointing at it), or in agentmsg's own headless server
under the state root.  Readiness, delivery and kills are proved by the journals, the roster, the stub's
recorded requests and ``/proc``, never by sleeping.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_helpers import run
from tests.support.hosts.harness import (
    CODEX_KEY_ENV,
    NODE_BIN,
    REPO_ROOT,
    claude_env,
    codex_config_args,
    codex_env,
)
from tests.support.hosts.stubs import AnthropicStub, OpenAIResponsesStub
from tests.support.hosts.tui import CLAUDE_KEY, wait_for

pytestmark = [pytest.mark.hosts, pytest.mark.tui]

BOUNDARY = "agentmsg peer data · begin"
LEAD = "human:lead"


class World:
    """A state root, a collaboration opened by ``human:lead``, a stub, and the environment spawn runs with."""

    def __init__(self, tmp: Path, env: dict[str, str], root: Path) -> None:
        self.tmp, self.env, self.root = tmp, env, root
        self.cid = self.ok("open", "--self", LEAD, "--alias", "lead", "--label", "l", "--task", "t")["collab"]
        self.socket: Path | None = None

    def cli(self, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        """The CLI with ``--json`` before a ``--`` (what follows it is the host's)."""
        cut = args.index("--") if "--" in args else len(args)
        done = run(*args[:cut], "--json", *args[cut:], root=self.root, env={**self.env, **(env or {})}, timeout=180)
        assert len(done.stderr.strip().splitlines()) <= 1, done.stderr
        return done.code, json.loads(done.stdout)

    def ok(self, *args: str) -> dict[str, Any]:
        code, doc = self.cli(*args)
        assert doc["ok"], doc["error"]
        return dict(doc["result"])

    def roster(self) -> dict[str, dict[str, Any]]:
        out = self.ok("roster", "--collab", self.cid)
        return {p["alias"]: p for p in out["participants"]}

    def user_tmux(self) -> None:
        """A tmux server of "the user's", one session with a shell; spawn's windows open beside it."""
        self.socket = self.tmp / "user.sock"
        subprocess.run(["tmux", "-S", str(self.socket), "-f", "/dev/null", "new-session", "-d", "-s", "user",
                        "-x", "160", "-y", "45", "sleep", "3600"], check=True, timeout=10)
        pid = subprocess.run(["tmux", "-S", str(self.socket), "display-message", "-p", "#{pid}"], check=True,
                             capture_output=True, text=True, timeout=10).stdout.strip()
        self.env.update(TMUX=f"{self.socket},{pid},0", TMUX_PANE="%0")

    def close(self) -> None:
        sockets = [self.socket, self.root / "spawn" / "tmux.sock"]
        for sock in sockets:
            if sock is not None and sock.exists():
                subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True, check=False)


def _path() -> str:
    return os.pathsep.join([str(NODE_BIN), os.environ.get("PATH", "")])


def claude_world(tmp: Path, stub: AnthropicStub) -> tuple[World, list[str]]:
    """Claude Code onboarded in a test HOME, the project folder trusted; host args that load this checkout."""
    home, cwd = tmp / "home", tmp / "proj"
    home.mkdir(parents=True, exist_ok=True)
    cwd.mkdir(parents=True, exist_ok=True)
    (home / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True, "theme": "dark", "numStartups": 5,
        "customApiKeyResponses": {"approved": [CLAUDE_KEY[-20:]], "rejected": []},
        "projects": {str(cwd): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}},
    }))
    root = tmp / "root"
    env = claude_env(home, stub, {"PATH": _path(), "TERM": "xterm-256color", "NO_COLOR": None})
    world = World(tmp, env, root)
    return world, ["--cwd", str(cwd), "--", "--plugin-dir", str(REPO_ROOT), "--permission-mode", "default",
                   "--allowedTools", "Bash"]


def codex_world(tmp: Path, stub: OpenAIResponsesStub) -> tuple[World, list[str]]:
    """Codex with this checkout's hooks as user hooks; the trust bypass passed by the user, after ``--``."""
    home, codex_home, cwd = tmp / "home", tmp / "codex-home", tmp / "proj"
    for d in (home, codex_home, cwd):
        d.mkdir(parents=True, exist_ok=True)
    hooks = json.loads((REPO_ROOT / "hooks" / "codex-hooks.json").read_text())
    (codex_home / "hooks.json").write_text(json.dumps(hooks).replace("${PLUGIN_ROOT}", str(REPO_ROOT)))
    root = tmp / "root"
    env = codex_env(home, codex_home, stub, {CODEX_KEY_ENV: "stub-not-a-key", "PATH": _path(),
                                              "TERM": "xterm-256color", "NO_COLOR": None})
    world = World(tmp, env, root)
    return world, ["--cwd", str(cwd), "--", *codex_config_args(stub), "--dangerously-bypass-hook-trust",
                   "--dangerously-bypass-approvals-and-sandbox"]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_claude_spawned_in_tmux_is_ready_bound_and_killed(tmp_path: Path) -> None:
    with AnthropicStub() as stub:
        world, args = claude_world(tmp_path, stub)
        world.user_tmux()
        try:
            out = world.ok("spawn", "claude", "--alias", "rev", "--collab", world.cid, "--self", LEAD,
                           "--timeout", "90s", *args)
            assert out["alias"] == "rev" and out["pin"].startswith("claude-code:") and out["where"] == "tmux"
            assert out["tmux"]["socket"] == str(world.socket) and out["tmux"]["target"].startswith("user:")
            assert _alive(out["pid"])
            wait_for(lambda: world.roster()["rev"]["presence"]["state"] == "idle", 30, "rev idle")
        finally:
            world.close()
