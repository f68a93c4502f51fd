"""A world for ``agentmsg spawn`` tests with the REAL host CLIs (tests/e2e/test_e2e_spawn*.py).

A state root with a collaboration opened by ``human:lead``, the environment spawn runs with, and (for
``--where tmux``) a tmux server of "the user's" whose socket is under the test's own folder: each test has its
own server and its own root, so test files run in parallel safely.  Per host, a ``*_world`` function sets up
the host offline against its stub and returns the arguments spawn passes on (after ``--``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from tests.support.cli_helpers import run
from tests.support.hosts import product
from tests.support.hosts.harness import (
    CODEX_KEY_ENV,
    GEMINI_MODEL,
    NODE_BIN,
    REPO_ROOT,
    claude_env,
    codex_config_args,
    codex_env,
    copilot_env,
    gemini_cli,
    gemini_env,
    opencode_env,
    scrubbed_env,
)
from tests.support.hosts.stubs import AnthropicStub, ChatCompletionsStub, GeminiStub, OpenAIResponsesStub
from tests.support.hosts.tui import CLAUDE_KEY, wait_for

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
        _code, doc = self.cli(*args)
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
        # every window opened here logs what its pane shows, so a host that exits leaves its last screen behind
        # (spawn closes a ready session's window as usual when its program ends: the pane itself is gone then)
        (self.tmp / "panes").mkdir(exist_ok=True)
        subprocess.run(["tmux", "-S", str(self.socket), "set-hook", "-g", "after-new-window",
                        f"pipe-pane -o 'cat >> {self.tmp}/panes/#{{pane_id}}.log'"], check=True, timeout=10)

    def post_mortem(self, pane: str) -> str:
        """Why a spawned session may have stopped: whether its pane still runs, the last lines it showed, and
        the state root's hook log."""
        state = subprocess.run(["tmux", "-S", str(self.socket), "display-message", "-p", "-t", pane,
                                "#{pane_dead} #{pane_dead_status} #{pane_pid}"],
                               capture_output=True, text=True, check=False).stdout.strip() or "gone"
        log = self.tmp / "panes" / f"{pane}.log"
        raw = log.read_text(errors="replace") if log.exists() else ""
        text = re.sub(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b.",
                      "", raw)
        shown = [ln.strip() for ln in re.split(r"[\r\n]+", text) if ln.strip()][-15:]
        hooks = self.root / "hooks.log"
        tail = hooks.read_text(errors="replace").splitlines()[-10:] if hooks.exists() else []
        return "\n".join([f"pane {pane}: {state}", "--- its last lines ---", *shown, "--- hooks.log ---", *tail])

    def close(self) -> None:
        sockets = [self.socket, self.root / "spawn" / "tmux.sock"]
        for sock in sockets:
            if sock is not None and sock.exists():
                subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True, check=False)


def node_path() -> str:
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
    env = claude_env(home, stub, {"PATH": node_path(), "TERM": "xterm-256color", "NO_COLOR": None})
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
    env = codex_env(home, codex_home, stub, {CODEX_KEY_ENV: "stub-not-a-key", "PATH": node_path(),
                                              "TERM": "xterm-256color", "NO_COLOR": None})
    world = World(tmp, env, root)
    return world, ["--cwd", str(cwd), "--", *codex_config_args(stub), "--dangerously-bypass-hook-trust",
                   "--dangerously-bypass-approvals-and-sandbox"]


def _folders(tmp: Path, *names: str) -> list[Path]:
    out = [tmp / name for name in names]
    for d in out:
        d.mkdir(parents=True, exist_ok=True)
    return out


def gemini_world(tmp: Path, stub: GeminiStub) -> tuple[World, list[str]]:
    """Gemini CLI with this checkout linked as its extension (``gemini extensions link``, what ``agentmsg install
    gemini`` runs); its hooks run this checkout's ``hooks/run``."""
    home, cwd = _folders(tmp, "home", "proj")
    gemini_cli(["extensions", "link", str(REPO_ROOT), "--consent"], home=home)
    env = gemini_env(home, stub, {"PATH": node_path(), "TERM": "xterm-256color", "NO_COLOR": None})
    return World(tmp, env, tmp / "root"), ["--cwd", str(cwd), "--", "-m", GEMINI_MODEL]


def copilot_world(tmp: Path, stub: ChatCompletionsStub) -> tuple[World, list[str]]:
    """Copilot CLI with this checkout as ``--plugin-dir`` (its hooks), the project folder trusted (its
    ``trusted_folders``, as answering its trust screen "remember" writes); the plugin's MCP server is off (this
    test drives no tool, and Copilot waits for MCP servers before the first prompt)."""
    home, chome, cwd = _folders(tmp, "home", "copilot-home", "proj")
    (chome / "config.json").write_text(json.dumps({"trusted_folders": [str(cwd)]}))
    env = copilot_env(home, chome, stub, {"PATH": node_path(), "TERM": "xterm-256color", "NO_COLOR": None})
    return World(tmp, env, tmp / "root"), ["--cwd", str(cwd), "--", "--plugin-dir", str(REPO_ROOT),
                                           "--disable-mcp-server", "agentmsg", "--disable-builtin-mcps"]


def opencode_world(tmp: Path, stub: ChatCompletionsStub) -> tuple[World, list[str]]:
    """OpenCode with agentmsg's plugin installed by ``agentmsg install opencode`` (its plugin runs this
    checkout's ``hooks/run`` at each message and idle)."""
    home, cwd = _folders(tmp, "home", "proj")
    done = subprocess.run([str(product.VENV_PYTHON), "-m", "agentmsg", "install", "opencode", "--json"],
                          env=scrubbed_env(home, env_extra={"PYTHONPATH": str(REPO_ROOT)}), capture_output=True,
                          text=True, timeout=60, check=True)
    assert json.loads(done.stdout)["result"]["plugin"] == "written", done.stdout
    path = product.host_path(product.python_shim(tmp / "pybin"), NODE_BIN)
    env = opencode_env(home, stub, {"PATH": path, "TERM": "xterm-256color", "NO_COLOR": None})
    return World(tmp, env, tmp / "root"), ["--cwd", str(cwd), "--"]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def events(world: World, kind: str) -> list[dict[str, Any]]:
    path = world.root / "collabs" / world.cid / "collab.jsonl"
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["type"] == kind]


def type_into(world: World, socket: Path, pane: str, text: str) -> None:
    """A person types a prompt into the spawned session's pane."""
    subprocess.run(["tmux", "-S", str(socket), "send-keys", "-t", pane, "-l", text], check=True, timeout=10)
    wait_for(lambda: text[:20] in subprocess.run(["tmux", "-S", str(socket), "capture-pane", "-p", "-t", pane],
                                                 capture_output=True, text=True).stdout, 60, "the typed prompt")
    subprocess.run(["tmux", "-S", str(socket), "send-keys", "-t", pane, "Enter"], check=True, timeout=10)
