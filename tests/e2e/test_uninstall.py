"""A full uninstall, per host, leaves no agentmsg file outside the state root (issue "First use", item 6).

Installs with the real host CLIs exactly as README says (local-directory marketplace + plugin install;
claude 2.1.328, codex 0.169.0 from node_modules, offline), runs a SessionStart hook and the plugin's
launcher once (so the interpreter cache, the plugin data folder and the launcher's folder exist), then
runs `agentmsg uninstall <host>` and lists HOME before and after.  Host bookkeeping that is not
agentmsg's (``~/.claude.json``, ``~/.claude/backups``, Codex's own tmp folders) is the host's; anything
named agentmsg, and any folder agentmsg created, must be gone.  The messages stay unless --purge.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.hosts import harness, product, stubs

pytestmark = pytest.mark.hosts


def _listing(home: Path) -> set[str]:
    return {str(p.relative_to(home)) + ("/" if p.is_dir() else "") for p in home.rglob("*")}


def _env(tmp: Path) -> dict[str, str]:
    home = tmp / "home"
    pybin = product.python_shim(tmp / "pybin")
    env = harness.scrubbed_env(home, stub=harness._ClosedProxy(), env_extra={
        **harness.CLAUDE_QUIET_ENV, "CODEX_HOME": str(home / ".codex"),
        "PATH": product.host_path(pybin, harness.NODE_BIN), "XDG_DATA_HOME": None, "XDG_CACHE_HOME": None,
        "XDG_STATE_HOME": None, "XDG_CONFIG_HOME": None})
    return env


def _agentmsg(clone: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/sh", str(clone / "bin" / "agentmsg"), *args], env=env, capture_output=True,
                          text=True, timeout=300, cwd=env["HOME"])


def _hook(root: Path, host: str, env: dict[str, str], extra: dict[str, str]) -> None:
    event = {"hook_event_name": "SessionStart", "session_id": "s-1", "source": "startup"}
    subprocess.run(["/bin/sh", str(root / "hooks" / "run"), host], input=json.dumps(event), text=True,
                   env={**env, **extra}, capture_output=True, timeout=60, check=True)


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_full_uninstall_leaves_nothing_but_the_messages(tmp_path: Path, host: str) -> None:
    clone = product.export_plugin(tmp_path / "clone")
    env = _env(tmp_path)
    home = Path(env["HOME"])
    before = _listing(home)
    if host == "claude":
        harness.claude_plugin_cli(["marketplace", "add", str(clone)], home=home)
        harness.claude_plugin_cli(["install", "agentmsg@agentmsg"], home=home)
        _hook(clone, "claude", env, {"CLAUDE_PLUGIN_ROOT": str(clone),
                                     "CLAUDE_PLUGIN_DATA": str(home / ".claude/plugins/data/agentmsg-agentmsg")})
    else:
        installed = harness.install_codex_plugin(clone, "agentmsg", codex_home=home / ".codex", home=home)
        data = str(home / ".codex/plugins/data/agentmsg-agentmsg")
        _hook(installed, "codex", env, {"PLUGIN_ROOT": str(installed), "PLUGIN_DATA": data,
                                        "CLAUDE_PLUGIN_ROOT": str(installed), "CLAUDE_PLUGIN_DATA": data})
    opened = _agentmsg(clone, env, "open", "--self", "human:carol", "--alias", "carol", "--label", "l",
                       "--task", "t", "--json")
    assert opened.returncode == 0, opened.stderr
    venv = home / ".local" / "share" / "agentmsg" / "venv"  # as the launcher's first-run build leaves it
    venv.mkdir(parents=True)
    (venv / ".agentmsg-ready").touch()
    installed_listing = _listing(home)
    assert any("agentmsg" in p for p in installed_listing - before)

    done = _agentmsg(clone, env, "uninstall", host, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["result"]
    assert result["left"] == [], result
    state = ".local/state/agentmsg"
    assert result["messages"] == f"kept in {home / state} (remove them with --purge)"
    after = _listing(home)
    new = sorted(p for p in after - before if not p.startswith(state) and p != ".local/state/")
    host_own = (".claude.json", ".claude/", ".claude/backups/", ".claude/plugins/", ".codex/", ".codex/.tmp/",
                ".codex/tmp/", ".codex/config.toml", ".codex/plugins/", ".local/")
    leftovers = [p for p in new if "agentmsg" in p.lower() or not p.startswith(host_own)
                 or p in (".agents/", ".cache/", ".local/share/")]
    assert leftovers == [], leftovers
    assert (home / state).is_dir()  # the messages stay

    purge = _agentmsg(clone, env, "uninstall", "all", "--purge", "--json")
    assert purge.returncode == 0, purge.stderr
    assert not (home / state).exists()
    assert sys.executable  # the test venv itself was never touched


def test_uninstall_all_after_every_host_ran_leaves_nothing(tmp_path: Path) -> None:
    """Issue 30, finding 7, through the real hosts: Claude Code (plugin, one turn, so its MCP log folder for the
    plugin exists), Copilot CLI and Gemini CLI (``agentmsg install``, one turn each, so Copilot's plugin-data
    folder, its settings entry and Gemini's integrity record exist).  ``uninstall all`` removes all of it and
    says so (``left`` is empty); a second ``uninstall all --purge`` asks no host for anything and has nothing
    to complain about."""
    clone = product.export_plugin(tmp_path / "clone")
    env = {**_env(tmp_path), "COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false",
           "GEMINI_API_KEY": "stub-not-a-key", "PIP_NO_INDEX": "1"}
    home = Path(env["HOME"])
    harness._gemini_settings(home)  # offline Gemini (no auth dialog, no update check)
    before = _listing(home)
    root = home / ".local" / "state" / "agentmsg"
    run_env = {"PATH": env["PATH"]}
    harness.install_claude_plugin(clone, "agentmsg", home=home)
    for host in ("gemini", "copilot"):
        done = _agentmsg(clone, env, "install", host, "--json")
        assert done.returncode == 0, done.stderr
    (tmp_path / "work").mkdir()
    with stubs.AnthropicStub() as astub, stubs.GeminiStub() as gstub, stubs.ChatCompletionsStub() as cstub:
        astub.push(stubs.text("claude ok"))
        harness.run_claude("hello", cwd=tmp_path / "work", home=home, stub=astub, env_extra=run_env).check()
        gstub.push(stubs.text("gemini ok"))
        harness.run_gemini("hello", cwd=tmp_path / "work", home=home, stub=gstub, env_extra=run_env,
                           launcher=["/bin/sh", str(clone / "bin" / "agentmsg"), "run", "gemini", "--"]).check()
        cstub.push(stubs.text("copilot ok"))
        harness.run_copilot("hello", cwd=tmp_path / "work", home=home, copilot_home=home / ".copilot", stub=cstub,
                            env_extra=run_env).check()
    opened = _agentmsg(clone, env, "open", "--self", "human:carol", "--alias", "carol", "--label", "l", "--task", "t")
    assert opened.returncode == 0, opened.stderr
    installed = _listing(home)
    for path in (".copilot/plugin-data/", ".gemini/extension_integrity.json"):
        assert any(p.startswith(path) for p in installed), sorted(installed)
    assert any("mcp-logs-plugin-agentmsg-agentmsg" in p for p in installed), sorted(installed)
    assert "agentmsg@agentmsg" in (home / ".copilot" / "settings.json").read_text()

    done = _agentmsg(clone, env, "uninstall", "all", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["result"]
    assert result["left"] == [], result
    after = _listing(home)
    named = sorted(p for p in after if "agentmsg" in p.lower() and not p.startswith(".local/state/agentmsg"))
    assert named == [], named
    assert "agentmsg" not in (home / ".copilot" / "settings.json").read_text()
    integrity = home / ".gemini" / "extension_integrity.json"
    assert not integrity.exists() or "agentmsg" not in integrity.read_text()
    assert root.is_dir() and before  # the messages stay, and only they

    again = _agentmsg(clone, env, "uninstall", "all", "--purge", "--json")
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)["result"]
    assert (second["ran"], second["left"]) == ([], []), second
    assert not root.exists()
