"""The plugin bundle: manifests for both hosts, the skill, the launchers."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import agentmsg
from tests.support.helpers_hooks import REPO


def load(rel: str):
    return json.loads((REPO / rel).read_text())


def test_manifests_agree():
    claude, codex = load(".claude-plugin/plugin.json"), load(".codex-plugin/plugin.json")
    assert claude["name"] == codex["name"] == "agentmsg"
    assert claude["version"] == codex["version"] == agentmsg.__version__
    assert codex["skills"] == "./skills/" and codex["hooks"] == "./hooks/codex-hooks.json"
    for rel in (codex["skills"], codex["hooks"]):
        assert (REPO / rel).exists()
    for rel in (".claude-plugin/marketplace.json", ".agents/plugins/marketplace.json"):
        (entry,) = load(rel)["plugins"]
        assert entry["name"] == "agentmsg"
    assert sorted(p.name for p in (REPO / ".codex-plugin").iterdir()) == ["plugin.json"]


def test_skill_frontmatter_is_valid_for_both_hosts():
    text = (REPO / "skills" / "agentmsg" / "SKILL.md").read_text()
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match
    fields = dict(line.split(": ", 1) for line in match.group(1).splitlines())
    assert set(fields) == {"name", "description"}
    assert fields["name"] == "agentmsg" and re.fullmatch(r"[a-z0-9-]{1,64}", fields["name"])
    assert 0 < len(fields["description"]) <= 1024 and "Use when" in fields["description"]
    assert len(text.splitlines()) < 100  # short, as the issue asks
    for topic in ("agentmsg status", "--reply-to", "agentmsg ack", "agentmsg watch", "stored", "untrusted",
                  "flags:", "REFUSED(secret)"):
        assert topic in text, topic


def test_cli_launcher_installs_the_declared_dependencies():
    tomllib = pytest.importorskip("tomllib")
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    line = next(ln for ln in (REPO / "bin" / "agentmsg").read_text().splitlines() if ln.startswith("DEPS="))
    assert line == f'DEPS="{" ".join(deps)}"'


@pytest.mark.parametrize("script", ["bin/agentmsg", "hooks/run"])
def test_launchers_are_executable_posix_sh(script):
    path = REPO / script
    assert path.stat().st_mode & 0o111 and path.read_text().startswith("#!/bin/sh\n")
    for shell in ("sh", "dash", "bash"):
        if shutil.which(shell):
            subprocess.run([shell, "-n", str(path)], check=True)


def test_cli_launcher_runs_the_cli_with_this_checkout(tmp_path):
    env = {"HOME": str(tmp_path), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
           "CLAUDE_PLUGIN_DATA": str(tmp_path / "data")}
    proc = subprocess.run([str(REPO / "bin" / "agentmsg"), "version", "--json"], capture_output=True, env=env,
                          text=True, check=True)
    assert json.loads(proc.stdout)["result"]["version"] == agentmsg.__version__


def test_cli_launcher_offline_says_what_to_do(tmp_path):
    """python3 without the dependencies and no reachable index: one line, exit 2."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')  # no site-packages: no typer
    (fake / "python3").chmod(0o755)
    env = {"HOME": str(tmp_path), "PATH": f"{fake}:/usr/bin:/bin", "CLAUDE_PLUGIN_DATA": str(tmp_path / "data"),
           "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0", "PIP_TIMEOUT": "1",
           "PIP_NO_CACHE_DIR": "1"}
    proc = subprocess.run([str(REPO / "bin" / "agentmsg"), "status"], capture_output=True, env=env, text=True,
                          timeout=300)
    assert proc.returncode == 2 and proc.stdout == ""
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("agentmsg: could not install typer, rich, portalocker and pyyaml") and "PyPI" in last
    assert not (tmp_path / "data" / "venv").exists()


def test_claude_validates_the_plugin(tmp_path):
    claude = REPO / "node_modules" / ".bin" / "claude"
    if not claude.exists():
        pytest.fail("node_modules/.bin/claude is missing: run scripts/bootstrap --hosts (npm install)")
    env = {"HOME": str(tmp_path), "PATH": "/usr/local/bin:/usr/bin:/bin", "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    proc = subprocess.run([str(claude), "plugin", "validate", str(REPO)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Validation passed" in proc.stdout
    # Strict but for one thing: hooks/hooks.json also holds Gemini CLI's three events (Gemini reads no other
    # file; BeforeTool refuses claimed edits, docs/CLAIMS.md); Claude Code ignores them at run time, and nothing
    # else may warn.
    assert "❯ hooks: hooks.BeforeAgent: unknown hook event; entry ignored at runtime" in proc.stdout
    assert "❯ hooks: hooks.AfterAgent: unknown hook event; entry ignored at runtime" in proc.stdout
    assert "❯ hooks: hooks.BeforeTool: unknown hook event; entry ignored at runtime" in proc.stdout
    warned = re.search(r"Found (\d+) warnings?:", proc.stdout)
    assert warned and warned.group(1) == "3", proc.stdout
    for event in ("SessionStart", "UserPromptSubmit", "Stop"):
        assert f"hooks: {event} command" in proc.stdout


def test_launcher_adds_the_mcp_sdk_for_agentmsg_mcp_and_says_so_when_it_cannot(tmp_path: Path) -> None:
    """The plugin's .mcp.json runs ``bin/agentmsg mcp``: a ready private environment without the SDK
    gets it installed on first use; offline that fails with one line and exit 2, never a traceback."""
    data = tmp_path / "data"
    venv = data / "agentmsg" / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (venv / ".agentmsg-ready").touch()
    env = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(data), "PATH": os.environ["PATH"], "PIP_NO_INDEX": "1"}
    proc = subprocess.run(["sh", str(REPO / "bin" / "agentmsg"), "mcp"], env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("agentmsg: installing the MCP SDK (mcp>=2.3,<3)")
    assert lines[-1].startswith("agentmsg: could not install mcp>=2.3,<3 into ") and "Traceback" not in proc.stderr
