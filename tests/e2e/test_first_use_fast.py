"""First use is fast and safe under concurrency (issue 30, finding 6), through the real launcher and the real
Claude Code.

1. ``test_concurrent_first_uses_install_once``: on a machine whose ``python3`` lacks the CLI's dependencies,
   three ``agentmsg version`` calls, two SessionStart preparations (``bin/agentmsg --prepare-env``) and two
   MCP clients (``bin/agentmsg mcp``) start together.  One installer at a time, under the lock: pip's own log
   shows the dependencies installed once and the MCP SDK installed once; every call succeeds, both MCP
   servers answer ``initialize`` and list the real tools, and nothing half-built is left.
2. ``test_claude_connects_to_the_plugin_mcp_server_on_first_use``: the plugin installed per README into a
   fresh HOME; the very first ``claude -p`` turn connects to the plugin's MCP server while the launcher is
   still building (Claude Code's MCP log: connected, tools listed, no timeout), and the tools reach the model
   once the build is done (``notifications/tools/list_changed``); a second turn connects at once and lists
   them in its first request.

PyPI is simulated by a wheelhouse packed from the test venv (tests/support/wheels.py).  Each test has its
own HOME and state root.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support import wheels
from tests.support.hosts import harness, product, stubs

pytestmark = pytest.mark.hosts

DEPS = ("typer", "rich", "portalocker", "PyYAML")  # bin/agentmsg's DEPS, by distribution name
MCP = ("mcp",)
PLUGIN = "plugin_agentmsg_agentmsg"  # Claude Code's name for the plugin's MCP server, in tool names


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return wheels.wheelhouse(tmp_path_factory.mktemp("first-use") / "wheelhouse", DEPS + MCP)


def fresh_env(home: Path, wheelhouse: Path, **extra: str) -> dict[str, str]:
    """A newcomer's machine: system python3 (without typer & co.), pip pointed at the wheelhouse."""
    env = harness.scrubbed_env(home, env_extra={"PATH": product.host_path(), **wheels.pip_env(wheelhouse),
                                                "PIP_LOG": str(home / "pip.log"), **extra})
    probe = subprocess.run(["python3", "-c", "import typer"], env=env, capture_output=True, timeout=30)
    assert probe.returncode != 0, "the newcomer's python3 must lack the CLI's dependencies"
    return env


def installs(pip_log: Path) -> list[str]:
    """Each ``Successfully installed ...`` line pip logged: one per pip run that installed something."""
    return re.findall(r"Successfully installed (.*)", pip_log.read_text())


class McpClient:
    """A stdio MCP client of ``bin/agentmsg mcp``: newline-delimited JSON-RPC."""

    def __init__(self, launcher: Path, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(["/bin/sh", str(launcher), "mcp", *args], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.seen: list[dict[str, Any]] = []

    def send(self, doc: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(doc).encode() + b"\n")
        self.proc.stdin.flush()

    def answer(self, mid: Any) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            doc = json.loads(raw)
            self.seen.append(doc)
            if doc.get("id") == mid:
                return doc
        raise AssertionError(f"the server ended before answering {mid}: {self.close()}")

    def initialize(self) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})
        result: dict[str, Any] = self.answer(0)["result"]
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def tools(self, mid: int) -> list[str]:
        self.send({"jsonrpc": "2.0", "id": mid, "method": "tools/list"})
        return sorted(t["name"] for t in self.answer(mid)["result"]["tools"])

    def close(self) -> str:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        return self.proc.stderr.read().decode()


def test_concurrent_first_uses_install_once(tmp_path: Path, wheelhouse: Path) -> None:
    clone = product.export_plugin(tmp_path / "clone")
    home = tmp_path / "home"
    env = fresh_env(home, wheelhouse, AGENTMSG_HOME=str(tmp_path / "state"), AGENTMSG_BUILD_WAIT="600",
                    AGENTMSG_MCP_LIST_WAIT="600")
    launcher = clone / "bin" / "agentmsg"
    data = home / ".local" / "share" / "agentmsg"
    results: dict[str, Any] = {}

    def cli(name: str, *args: str) -> None:
        results[name] = subprocess.run(["/bin/sh", str(launcher), *args], env=env, capture_output=True, text=True,
                                       timeout=600)

    def mcp(name: str) -> None:
        client = McpClient(launcher, env, "--self", "human:carol")
        init = client.initialize()
        results[name] = (init, client.tools(1), client.close())

    runs = [threading.Thread(target=cli, args=(f"version{i}", "version")) for i in range(3)]
    runs += [threading.Thread(target=cli, args=(f"prepare{i}", "--prepare-env")) for i in range(2)]
    runs += [threading.Thread(target=mcp, args=(f"mcp{i}",)) for i in range(2)]
    for t in runs:
        t.start()
    for t in runs:
        t.join()

    for i in range(3):
        run = results[f"version{i}"]
        assert run.returncode == 0 and run.stdout.startswith("version: 0."), (run.stdout, run.stderr)
    for i in range(2):
        assert results[f"prepare{i}"].returncode == 0, results[f"prepare{i}"].stderr
        init, tools, _err = results[f"mcp{i}"]
        assert init["serverInfo"]["name"] == "agentmsg" and init["capabilities"]["tools"]["listChanged"] is True
        assert init["instructions"].endswith("This server's pin: human:carol.")
        assert {"inbox", "send", "status", "ack"} <= set(tools), _err
    # one installer at a time: the CLI's dependencies once, the SDK once, into one environment
    done = installs(home / "pip.log")
    assert len(done) == 2, done
    assert sum("typer-" in line for line in done) == 1 and sum("mcp-" in line for line in done) == 1, done
    check = subprocess.run([str(data / "venv" / "bin" / "python"), "-m", "pip", "check"], env=env,
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout
    assert sorted(p.name for p in data.iterdir()) == ["venv", "venv-install.log"]  # no lock, no half-built venv
    assert (data / "venv" / ".agentmsg-ready").is_file() and (data / "venv" / ".agentmsg-mcp").is_file()


def _mcp_log(home: Path) -> list[str]:
    """Claude Code's log lines for the plugin's MCP server, oldest first."""
    lines = []
    for f in sorted(home.glob(".cache/claude-cli-nodejs/*/mcp-logs-plugin-agentmsg-agentmsg/*.jsonl")):
        docs = [json.loads(line) for line in f.read_text().splitlines()]
        lines += [doc.get("debug") or doc.get("error", "") for doc in docs]
    return lines


def _tool_names(req: stubs.Recorded) -> set[str]:
    """The plugin's MCP tools a request offers the model (declared in full, or named as deferred tools)."""
    return set(re.findall(rf"mcp__{PLUGIN}__([a-z_]+)", req.text_blob()))


def test_claude_connects_to_the_plugin_mcp_server_on_first_use(tmp_path: Path, wheelhouse: Path) -> None:
    export = product.export_plugin(tmp_path / "agentmsg-checkout")
    home = tmp_path / "home"
    home.mkdir()
    assert harness.install_claude_plugin(export, "agentmsg", home=home) == "agentmsg@agentmsg"
    env = {k: v for k, v in fresh_env(home, wheelhouse).items() if k in ("PATH", "PIP_LOG") or k.startswith("PIP_")}
    # The first tools/list is answered (empty) at once, so the tools always come by tools/list_changed: an event
    # the model can wait for.  (Held lists, AGENTMSG_MCP_LIST_WAIT's default, are the concurrency test's case.)
    env.update(AGENTMSG_HOME=str(tmp_path / "state"), AGENTMSG_MCP_LIST_WAIT="0")
    cwd = tmp_path / "work"
    cwd.mkdir()
    mcp_logs = home / ".cache" / "claude-cli-nodejs" / "*" / "mcp-logs-plugin-agentmsg-agentmsg" / "*.jsonl"
    with stubs.AnthropicStub() as stub:
        # The machine's first turn: the model waits (through its shell) until Claude Code has heard from the
        # real server that its tools changed (the build done, the SDK installed and imported).
        stub.push(stubs.shell(f"until grep -qs tools/list_changed {mcp_logs}; do sleep 1; done; echo ready"),
                  stubs.text("done"))
        run = harness.run_claude("hello", cwd=cwd, home=home, stub=stub, env_extra=env, session_id=str(uuid.uuid4()),
                                 timeout=300).check()
        first, second = [r for r in stub.snapshot() if r.agent]
        log = _mcp_log(home)
        assert any(line.startswith("Successfully connected") for line in log), log
        assert not [line for line in log if "timed out" in line.lower() or "abandoned" in line.lower()], log
        assert {"inbox", "send", "status"} <= _tool_names(second), second.text_blob()[-3000:]
        assert run.result == "done"
        # The second turn, the environment ready: the model searches the tools (ToolSearch waits for a server
        # still connecting, as Claude Code's own text tells the model); the next request offers them.
        n0 = len(stub.snapshot())
        env["AGENTMSG_MCP_LIST_WAIT"] = "15"
        stub.push(stubs.tool("ToolSearch", {"query": f"select:mcp__{PLUGIN}__inbox", "max_results": 5}),
                  stubs.text("again"))
        sid = str(uuid.uuid4())
        harness.run_claude("hello again", cwd=cwd, home=home, stub=stub, env_extra=env, session_id=sid,
                           timeout=300).check()
        _search, found = [r for r in stub.snapshot()[n0:] if r.agent]
        assert "inbox" in _tool_names(found), found.text_blob()[-3000:]
        assert f"This server's pin: {product.RUNTIME['claude']}:{sid}." in found.text_blob()  # the front's text
        assert "still connecting" not in found.text_blob().split("mcp__", 1)[-1]
    log = _mcp_log(home)
    assert len([line for line in log if line.startswith("Successfully connected")]) == 2, log
    assert not [line for line in log if "timed out" in line.lower() or "abandoned" in line.lower()], log
    assert first is not None
