"""``agentmsg install codex`` / ``uninstall codex`` (agentmsg/hosts/install.py) and adapter detection."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agentmsg.errors import Conflict, UsageError
from agentmsg.hosts import install as installer
from tests.support.helpers_hooks import DRIVER_SESSION, REPO, payload, python_dir

USER_HOOKS = {
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}],
    },
    "custom_top_level": {"kept": True},
}


def test_install_is_idempotent_and_uninstall_removes_exactly_it(tmp_path):
    codex_home, home = tmp_path / "codex", tmp_path / "home"
    codex_home.mkdir()
    hooks_file = codex_home / "hooks.json"
    hooks_file.write_text(json.dumps(USER_HOOKS))
    out = installer.install_codex(codex_home, REPO, home=home)
    assert out["skill"] == "written" and out["hooks"] == ["SessionStart", "UserPromptSubmit", "Stop", "PreToolUse",
                                                          "PostToolUse"]
    doc = json.loads(hooks_file.read_text())
    assert doc["custom_top_level"] == {"kept": True}
    assert doc["hooks"]["Stop"][0] == USER_HOOKS["hooks"]["Stop"][0]
    assert doc["hooks"]["PreToolUse"][:-1] == USER_HOOKS["hooks"]["PreToolUse"]
    # claims (docs/CLAIMS.md): refused before a tool runs; collision notices after an apply_patch
    run = f"/bin/sh '{REPO}/hooks/run' codex"
    assert doc["hooks"]["PreToolUse"][-1] == {"hooks": [{
        "type": "command", "command": f"{run} pretool {installer.HOOK_MARK}", "timeout": 15}]}
    assert doc["hooks"]["PostToolUse"] == [{"matcher": "apply_patch", "hooks": [{
        "type": "command", "command": f"{run} edited {installer.HOOK_MARK}", "timeout": 15}]}]
    for event in ("SessionStart", "UserPromptSubmit", "Stop"):
        ours = doc["hooks"][event][-1]["hooks"][0]
        assert ours["command"] == f"/bin/sh '{REPO}/hooks/run' codex {installer.HOOK_MARK}"
        assert set(ours) == {"type", "command", "timeout"}
    first = hooks_file.read_bytes()
    skill = home / ".agents" / "skills" / "agentmsg" / "SKILL.md"
    assert installer.SKILL_MARK in skill.read_text() and skill.read_text().startswith("---\nname: agentmsg\n")
    again = installer.install_codex(codex_home, REPO, home=home)
    assert hooks_file.read_bytes() == first and again["skill"] == "unchanged"
    out = installer.uninstall_codex(codex_home, home=home)
    assert out == {"hooks_file": str(hooks_file), "removed_hooks": 5, "skill_file": str(skill), "skill": "removed"}
    assert json.loads(hooks_file.read_text()) == USER_HOOKS
    assert not skill.parent.exists()


def test_uninstall_deletes_a_hooks_file_that_only_held_ours(tmp_path):
    installer.install_codex(tmp_path / "codex", REPO, home=tmp_path)
    installer.uninstall_codex(tmp_path / "codex", home=tmp_path)
    assert not (tmp_path / "codex" / "hooks.json").exists()
    again = installer.uninstall_codex(tmp_path / "codex", home=tmp_path)
    assert again["removed_hooks"] == 0 and again["skill"] == "absent"


def test_a_users_own_skill_is_left_alone(tmp_path):
    skill = tmp_path / ".agents" / "skills" / "agentmsg" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: agentmsg\ndescription: mine\n---\n")
    assert installer.install_codex(tmp_path / "codex", REPO, home=tmp_path)["skill"] == "left alone (not ours)"
    assert installer.uninstall_codex(tmp_path / "codex", home=tmp_path)["skill"] == "left alone (not ours)"
    assert skill.read_text().endswith("description: mine\n---\n")


@pytest.mark.parametrize("content", ["{not json", "[]", '{"hooks": []}'])
def test_an_unreadable_hooks_file_is_not_touched(tmp_path, content):
    (tmp_path / "hooks.json").write_text(content)
    with pytest.raises(UsageError):
        installer.install_codex(tmp_path, REPO, home=tmp_path)
    assert (tmp_path / "hooks.json").read_text() == content


def test_install_needs_a_plugin_checkout(tmp_path):
    with pytest.raises(UsageError):
        installer.install_codex(tmp_path / "codex", tmp_path, home=tmp_path)
    assert installer.plugin_root() == REPO


def test_the_installed_command_runs_the_hook(tmp_path, store, collab):
    installer.install_codex(tmp_path / "codex", REPO, home=tmp_path)
    doc = json.loads((tmp_path / "codex" / "hooks.json").read_text())
    command = doc["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    env = {"HOME": str(tmp_path), "PATH": f"{python_dir()}:/usr/bin:/bin", "AGENTMSG_HOME": str(collab.root),
           "CODEX_HOME": str(tmp_path / "codex"), "SHELL": "/bin/sh"}
    proc = subprocess.run(["/bin/sh", "-lc", command], input=json.dumps(payload("SessionStart", DRIVER_SESSION,
                          "codex")).encode(), capture_output=True, env=env)
    assert proc.returncode == 0 and proc.stderr == b""
    out = json.loads(proc.stdout)
    assert "participant driver" in out["hookSpecificOutput"]["additionalContext"]


def test_detect(tmp_path):
    home, codex_home = tmp_path / "home", tmp_path / "codex"
    assert installer.detect(home=home, codex_home=codex_home)["claude"]["installed"] is False
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(json.dumps({"enabledPlugins": {"agentmsg@agentmsg": True,
                                                                                   "other@x": True}}))
    codex_home.mkdir()
    (codex_home / "config.toml").write_text('[marketplaces.agentmsg]\nsource = "/x"\n\n'
                                            '[plugins."agentmsg@agentmsg"]\nenabled = true\n')
    found = installer.detect(home=home, codex_home=codex_home)
    assert found["claude"]["plugin"] == [{"id": "agentmsg@agentmsg", "enabled": True}]
    assert found["claude"]["installed"] is True
    assert found["codex"]["plugin"] == [{"id": "agentmsg@agentmsg", "enabled": True}]
    assert found["codex"]["user_hooks"] == [] and found["codex"]["skill"] is None
    with pytest.raises(Conflict, match="already installed as the Codex plugin agentmsg@agentmsg"):
        installer.install_codex(codex_home, REPO, home=home)  # a second copy: every hook would run twice
    (codex_home / "config.toml").write_text('[plugins."agentmsg@agentmsg"]\nenabled = false\n')
    installer.install_codex(codex_home, REPO, home=home)
    found = installer.detect(home=home, codex_home=codex_home)
    assert found["codex"]["user_hooks"] == ["PostToolUse", "PreToolUse", "SessionStart", "Stop", "UserPromptSubmit"]
    assert found["codex"]["skill"] == "ours"


def test_detect_survives_garbage(tmp_path):
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text("{{{")
    (tmp_path / "codex").mkdir()
    (tmp_path / "codex" / "hooks.json").write_text('{"hooks": {"Stop": "nope"}}')
    found = installer.detect(home=tmp_path, codex_home=tmp_path / "codex")
    assert found["claude"]["installed"] is False and found["codex"]["installed"] is False


def test_plugin_root_is_this_checkout():
    assert installer.plugin_root() == Path(REPO)
