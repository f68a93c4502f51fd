"""``agentmsg uninstall`` says exactly what remains, and a second ``--purge`` has nothing to complain about
(issue 30, finding 7).  Through the real CLI, on a HOME holding what Copilot CLI 1.0.102 and Gemini CLI 0.61.0
leave after their own uninstall (docs/HOSTS-NOTES.md); no host binary is on PATH, so any step that asked a host
to remove something already gone would be reported as not done."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.support.cli_helpers import run_json


def _home(tmp: Path) -> Path:
    home = tmp / "home"
    copilot = home / ".copilot"
    (copilot / "plugin-data" / "agentmsg" / "agentmsg").mkdir(parents=True)
    (copilot / "plugin-data" / "agentmsg" / "agentmsg" / "venv.log").write_text("x")
    (home / ".gemini").mkdir()
    (home / ".copilot" / "settings.json").write_text(json.dumps({"enabledPlugins": {"agentmsg@agentmsg": False,
                                                                                  "other@market": True}}))
    store = {"agentmsg": {"hash": "abc", "signature": "def"}, "other": {"hash": "1", "signature": "2"}}
    (home / ".gemini" / "extension_integrity.json").write_text(json.dumps({"store": store, "signature": "0"}))
    venv = home / ".local" / "share" / "agentmsg" / "venv"
    venv.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return home


def _uninstall(tmp: Path, home: Path) -> dict[str, Any]:
    pybin = tmp / "pybin"
    pybin.mkdir(exist_ok=True)
    (pybin / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (pybin / "python3").chmod(0o755)
    env = {"HOME": str(home), "PATH": f"{pybin}:/usr/bin:/bin", "XDG_DATA_HOME": None, "XDG_CACHE_HOME": None,
           "COPILOT_HOME": None, "CODEX_HOME": str(home / ".codex")}
    code, doc, err = run_json("uninstall", "all", "--purge", root=tmp / "state", env=env)
    assert code == 0, err
    result: dict[str, Any] = doc["result"]
    return result


def test_uninstall_names_what_the_hosts_keep_and_a_second_purge_is_quiet(tmp_path: Path) -> None:
    home = _home(tmp_path)
    first = _uninstall(tmp_path, home)
    assert str(home / ".copilot" / "plugin-data" / "agentmsg") in first["removed"]
    assert str(home / ".local" / "share" / "agentmsg") in first["removed"]  # no copy is left: the venv goes
    assert not (home / ".copilot" / "plugin-data").exists()
    assert not (home / ".local" / "share" / "agentmsg").exists()
    settings = home / ".copilot" / "settings.json"
    assert f"{settings}: enabledPlugins agentmsg@agentmsg (false)" in first["removed"]
    assert json.loads(settings.read_text()) == {"enabledPlugins": {"other@market": True}}  # the rest is kept
    kept = [  # Gemini signs the file as a whole: with another extension's entry in it, it stays, and says why
        f"{home / '.gemini' / 'extension_integrity.json'}: Gemini's integrity record of the agentmsg extension, "
        "kept: Gemini signs the file as a whole with its own key, so one entry cannot be removed without "
        "invalidating the others; it runs nothing",
    ]
    assert first["left"] == kept
    assert first["ran"] == []  # nothing was installed, so no host was asked to remove anything
    second = _uninstall(tmp_path, home)
    assert (second["removed"], second["ran"], second["left"]) == ([], [], kept)


def test_a_gemini_integrity_file_of_agentmsg_alone_is_removed(tmp_path: Path) -> None:
    home = _home(tmp_path)
    integrity = home / ".gemini" / "extension_integrity.json"
    integrity.write_text(json.dumps({"store": {"agentmsg": {"hash": "abc", "signature": "def"}}, "signature": "0"}))
    first = _uninstall(tmp_path, home)
    assert str(integrity) in first["removed"] and not integrity.exists() and first["left"] == []


def test_installing_from_a_clone_leaves_no_build_debris_in_it(tmp_path: Path) -> None:
    """Issue 30, finding 1: `pip install /path/to/clone` (here: its wheel, and an install from it) writes no
    build/ or agentmsg.egg-info/ into the clone, which Codex and `gemini extensions install` would copy."""
    import os
    import subprocess
    import zipfile

    from tests.support.hosts import product

    clone = product.export_plugin(tmp_path / "clone")
    before = {p.name for p in clone.iterdir()}
    offline = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for args in (["wheel", "-w", str(tmp_path / "dist")], ["install", "--target", str(tmp_path / "target")]):
        subprocess.run([sys.executable, "-m", "pip", *args, "--no-deps", "--no-build-isolation", "-q", str(clone)],
                       check=True, capture_output=True, timeout=300, env=offline)
    assert {p.name for p in clone.iterdir()} == before
    (whl,) = (tmp_path / "dist").glob("agentmsg-*.whl")
    assert "agentmsg/_plugin/bin/agentmsg" in zipfile.ZipFile(whl).namelist()
    assert (tmp_path / "target" / "agentmsg" / "_plugin" / "hooks" / "run").is_file()
