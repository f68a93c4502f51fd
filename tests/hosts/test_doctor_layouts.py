"""`agentmsg doctor` gives one consistent verdict for each install layout (issue "First use", item 4).

Layouts: the plugin only (Claude Code plugin from a local-directory marketplace + the Codex plugin's cache
copy), the fallback only (`agentmsg install codex`), pip only (an `agentmsg` on PATH, no hooks), and both
(the Codex plugin and the fallback hooks: every hook would run twice).  The host files are written the way
the real hosts write them (checked against claude 2.1.328 / codex 0.169.0, docs/HOSTS-NOTES.md).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from agentmsg.hosts import install as installer
from tests.support.cli_helpers import REPO_ROOT, run, run_json


def _python_only(tmp: Path) -> Path:
    """A PATH directory holding only python3 (the test venv's, which has the CLI's dependencies)."""
    bindir = tmp / "pybin"
    bindir.mkdir(exist_ok=True)
    (bindir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bindir / "python3").chmod(0o755)
    return bindir


def _env(tmp: Path, *path: Path) -> dict[str, str]:
    return {"HOME": str(tmp / "home"), "CODEX_HOME": str(tmp / "codex"), "XDG_DATA_HOME": None,
            "XDG_CACHE_HOME": None, "PATH": ":".join([*map(str, path), "/usr/bin", "/bin"])}


def _claude_plugin(tmp: Path) -> None:
    """What `claude plugin marketplace add <clone>` + `claude plugin install agentmsg@agentmsg` write."""
    plugins = tmp / "home" / ".claude" / "plugins"
    plugins.mkdir(parents=True)
    (tmp / "home" / ".claude" / "settings.json").write_text(json.dumps({
        "extraKnownMarketplaces": {"agentmsg": {"source": {"source": "directory", "path": str(REPO_ROOT)}}},
        "enabledPlugins": {"agentmsg@agentmsg": True}}))
    (plugins / "known_marketplaces.json").write_text(json.dumps({"agentmsg": {
        "source": {"source": "directory", "path": str(REPO_ROOT)}, "installLocation": str(REPO_ROOT)}}))
    cache = plugins / "cache" / "agentmsg" / "agentmsg" / "0.1.0"
    (plugins / "installed_plugins.json").write_text(json.dumps({"version": 2, "plugins": {
        "agentmsg@agentmsg": [{"scope": "user", "installPath": str(cache), "version": "0.1.0"}]}}))


def _codex_plugin(tmp: Path) -> Path:
    """What `codex plugin marketplace add <clone>` + `codex plugin add agentmsg@agentmsg` write."""
    codex = tmp / "codex"
    copy = codex / "plugins" / "cache" / "agentmsg" / "agentmsg" / "0.1.0"
    for part in ("agentmsg", "hooks", "bin", "skills", ".codex-plugin"):
        shutil.copytree(REPO_ROOT / part, copy / part, ignore=shutil.ignore_patterns("__pycache__", "_plugin"))
    (codex / "config.toml").write_text(f'[marketplaces.agentmsg]\nsource_type = "local"\nsource = "{REPO_ROOT}"\n\n'
                                       '[plugins."agentmsg@agentmsg"]\nenabled = true\n')
    return copy


def _doctor(tmp: Path, env: dict[str, str | None]) -> tuple[int, dict, str]:
    code, doc, _err = run_json("doctor", root=tmp / "state", env=env, timeout=300)
    human = run("doctor", root=tmp / "state", env=env, timeout=300).stdout
    return code, doc["result"], human


def test_plugin_only_is_ok_without_an_agentmsg_on_path(tmp_path: Path) -> None:
    _claude_plugin(tmp_path)
    copy = _codex_plugin(tmp_path)
    code, res, human = _doctor(tmp_path, _env(tmp_path, _python_only(tmp_path)))
    assert code == 0 and res["verdict"] == "ok", res["errors"]
    assert [(c["host"], c["kind"], c["root"], c["runs_hooks"]) for c in res["copies"]] == [
        ("claude", "plugin", str(REPO_ROOT), True), ("codex", "plugin", str(copy), True)]
    assert all(c["hook"]["ok"] for c in res["copies"])
    names = [p["name"] for p in res["probes"]]
    assert "PATH CLI" not in names and f"launcher {copy / 'bin' / 'agentmsg'}" in names
    assert any(n.startswith("no agentmsg on PATH: fine") for n in res["notes"])
    assert {p["root"] for p in res["probes"]} == {str(tmp_path / "state")}
    assert "verdict: ok" in human and "ERROR" not in human
    assert "claude plugin agentmsg@agentmsg: runs its hooks" in human
    # Claude Code runs a directory marketplace's plugin in place; Codex runs its own cache copy (issue 30)
    if (REPO_ROOT / ".git").exists():
        assert [c.split(" runs from ")[0] for c in res["cautions"]] == ["claude plugin agentmsg@agentmsg"]
        assert f"warning: claude plugin agentmsg@agentmsg runs from a git working tree ({REPO_ROOT})" in human


def test_fallback_only(tmp_path: Path) -> None:
    installer.install_codex(tmp_path / "codex", REPO_ROOT, home=tmp_path / "home")
    code, res, human = _doctor(tmp_path, _env(tmp_path, _python_only(tmp_path)))
    assert code == 0 and res["verdict"] == "ok", res["errors"]
    assert [(c["host"], c["kind"], c["root"]) for c in res["copies"]] == [("codex", "user hooks", str(REPO_ROOT))]
    assert res["copies"][0]["hook"]["ok"] and res["copies"][0]["hook"]["python"]
    assert "verdict: ok" in human


def test_pip_only(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "agentmsg").write_text(
        f'#!/bin/sh\nPYTHONPATH="{REPO_ROOT}" exec "{sys.executable}" -m agentmsg.cli "$@"\n')
    (bindir / "agentmsg").chmod(0o755)
    code, res, human = _doctor(tmp_path, _env(tmp_path, bindir, _python_only(tmp_path)))
    assert code == 0 and res["verdict"] == "ok", res["errors"]
    assert res["copies"] == []
    assert any(p["name"] == "PATH CLI" and p["ok"] for p in res["probes"])
    assert any(n.startswith("no host runs agentmsg's hooks") for n in res["notes"])
    assert human.count("no host runs agentmsg's hooks") == 1, human  # said once, as a note (issue 30)
    assert "no host runs agentmsg's hooks" in human and "verdict: ok" in human


def test_both_is_an_error_that_names_each_copy(tmp_path: Path) -> None:
    _codex_plugin(tmp_path)
    installer.install_codex(tmp_path / "other-codex", REPO_ROOT, home=tmp_path / "home")  # then moved in place:
    shutil.copy(tmp_path / "other-codex" / "hooks.json", tmp_path / "codex" / "hooks.json")  # install refuses now
    code, res, human = _doctor(tmp_path, _env(tmp_path, _python_only(tmp_path)))
    assert code == 16 and res["verdict"] == "error"
    assert res["errors"][0].startswith("codex: agentmsg is installed 2 times and every hook runs 2 times: ")
    assert "agentmsg uninstall codex --keep-plugin" in res["errors"][0]
    assert [c["kind"] for c in res["copies"]] == ["plugin", "user hooks"]
    assert "ERROR: codex: agentmsg is installed 2 times" in human and "verdict: error" in human


def test_install_codex_refuses_a_second_copy_and_writes_nothing(tmp_path: Path) -> None:
    _codex_plugin(tmp_path)
    env = _env(tmp_path, _python_only(tmp_path))
    code, _doc, err = run_json("install", "codex", env=env)
    assert code == 5 and "already installed as the Codex plugin agentmsg@agentmsg" in err
    assert not (tmp_path / "codex" / "hooks.json").exists()
    assert not (tmp_path / "home" / ".agents").exists()
