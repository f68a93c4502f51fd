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
    (copilot / "settings.json").write_text(json.dumps({"enabledPlugins": {"agentmsg@agentmsg": False}}))
    (home / ".gemini").mkdir()
    (home / ".gemini" / "extension_integrity.json").write_text(json.dumps({"agentmsg": {"hash": "abc"}}))
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
    kept = [
        f"{home / '.copilot' / 'settings.json'}: enabledPlugins still names agentmsg@agentmsg (false): Copilot's "
        "own record of an uninstalled plugin, kept by `copilot plugin uninstall`; it runs nothing",
        f"{home / '.gemini' / 'extension_integrity.json'}: an entry for the agentmsg extension, Gemini's own "
        "integrity record, kept by `gemini extensions uninstall`; it runs nothing",
    ]
    assert sorted(first["left"]) == sorted(kept)
    assert first["ran"] == []  # nothing was installed, so no host was asked to remove anything
    second = _uninstall(tmp_path, home)
    assert (second["removed"], second["ran"], sorted(second["left"])) == ([], [], sorted(kept))


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
