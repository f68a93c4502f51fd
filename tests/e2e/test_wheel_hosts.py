"""Installed from PyPI, it can install its hosts (issue 9): the hook files ship inside the wheel.

The wheel is built from a clone-like copy of the repository (``pip wheel --no-deps``, offline, with this
venv's setuptools), installed with its dependencies from a local wheelhouse into a fresh venv, and that
venv's ``agentmsg`` console script (what pip, pipx and ``uv tool`` install) sets up Codex, Gemini CLI
and Copilot CLI against a temporary HOME, with the real host CLIs.  Then real Gemini and Copilot turns
show a bound session its identity through the wheel's hooks, ``doctor`` finds every copy answering from
the wheel, and ``uninstall`` removes them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import agentmsg
from tests.e2e.test_e2e_newcomer import DEPS
from tests.support.hosts import harness, product, stubs
from tests.support.wheels import closure, repack

pytestmark = pytest.mark.hosts

OFFLINE = {"PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false", "GEMINI_API_KEY": "stub-not-a-key"}


def build_wheel(tmp: Path) -> Path:
    import setuptools

    major = int(setuptools.__version__.split(".")[0])
    assert major >= 77, f"setuptools {setuptools.__version__} < 77 (pyproject's build requirement): scripts/bootstrap"
    src = product.export_plugin(tmp / "clone")
    dist = tmp / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
                    str(src)], check=True, capture_output=True, timeout=300, env={**os.environ, **OFFLINE})
    (whl,) = dist.glob("agentmsg-*.whl")
    return whl


def fresh_venv(tmp: Path, whl: Path) -> Path:
    house = tmp / "wheelhouse"
    house.mkdir()
    for dist in closure(DEPS):
        repack(dist, house)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--find-links", str(house), str(whl)],
                   check=True, capture_output=True, timeout=300, env={**os.environ, **OFFLINE})
    return venv


def test_a_wheel_install_sets_up_codex_gemini_and_copilot(tmp_path):
    harness.gemini_bin()
    harness.copilot_bin()
    whl = build_wheel(tmp_path)
    venv = fresh_venv(tmp_path, whl)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import agentmsg, os; "
                                "print(os.path.dirname(agentmsg.__file__))"], capture_output=True, text=True,
                               check=True, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}).stdout.strip())
    assert site.is_relative_to(venv) and site.name == "agentmsg"
    plugin = site / "_plugin"
    for rel in ("hooks/run", "hooks/hooks.json", "hooks/copilot-hooks.json", ".plugin/plugin.json",
                ".claude-plugin/marketplace.json", "gemini-extension.json", "GEMINI.md", "skills/agentmsg/SKILL.md"):
        assert (plugin / rel).is_file(), rel
    assert json.loads((plugin / "gemini-extension.json").read_text())["version"] == agentmsg.__version__

    home = tmp_path / "home"
    harness._gemini_settings(home)  # offline Gemini (no auth dialog, no update check)
    root = tmp_path / "state"
    cli = venv / "bin" / "agentmsg"
    env = harness.scrubbed_env(home, env_extra={**OFFLINE, "AGENTMSG_HOME": str(root),
                                                "PATH": product.host_path(venv / "bin", harness.NODE_BIN)})

    def agentmsg_(*args: str) -> dict:
        done = subprocess.run([str(cli), *args, "--json"], env=env, capture_output=True, text=True, timeout=300,
                              cwd=tmp_path)
        doc = json.loads(done.stdout)
        assert doc["ok"], (args, doc, done.stderr)
        return doc["result"]

    codex = agentmsg_("install", "codex", "--codex-home", str(tmp_path / "codex"))
    assert codex["command"] == f"AGENTMSG_CLI='{cli}' /bin/sh '{plugin}/hooks/run' codex # agentmsg-managed-hook"
    gem = agentmsg_("install", "gemini")
    assert (gem["state"], gem["root"]) == ("linked", str(plugin))
    assert agentmsg_("install", "gemini")["state"] == "unchanged"
    cop = agentmsg_("install", "copilot")
    assert (cop["state"], cop["root"]) == ("installed", str(plugin))
    assert agentmsg_("install", "copilot")["state"] == "unchanged"

    # Every copy's hook answers doctor's probe from the wheel's package.
    done = subprocess.run([str(cli), "doctor", "--json"], env={**env, "CODEX_HOME": str(tmp_path / "codex")},
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    doc = json.loads(done.stdout)
    report = doc["result"] if doc["result"] is not None else {}
    copies = {c["host"]: c for c in report.get("copies", [])}
    assert set(copies) >= {"codex", "gemini", "copilot"}, (doc, done.stderr)
    for host in ("codex", "gemini", "copilot"):
        assert copies[host]["runs_hooks"] and copies[host]["hook"]["ok"], copies[host]
        assert copies[host]["hook"]["package"] == str(site), copies[host]
    assert (doc["ok"], report["verdict"], report["errors"]) == (True, "ok", []), (report, done.stderr)
    adapters = report["adapters"]
    assert adapters["gemini"]["installed"] and adapters["copilot"]["installed"]

    # Real turns: each host's hooks, from the wheel, tell a bound session who it is.
    sid_g, sid_c = str(uuid.uuid4()), str(uuid.uuid4())
    collab = product.open_collab(root, tmp_path / "cli-home")
    collab.join(f"gemini:{sid_g}", "gem")
    collab.join(f"copilot:{sid_c}", "cop")
    run_env = {"AGENTMSG_HOME": str(root), "PATH": product.host_path(venv / "bin")}
    with stubs.GeminiStub() as gstub, stubs.ChatCompletionsStub() as cstub:
        gstub.push(stubs.text("gemini ok"))
        g = harness.run_gemini("hello", cwd=tmp_path / "work", home=home, stub=gstub, session_id=sid_g,
                               env_extra=run_env, launcher=[str(cli), "run", "gemini", "--"]).check()
        assert g.session_id == sid_g
        ctx = product.gemini_contexts(gstub.agent_requests()[0].body, "hello")
        assert ctx["SessionStart"].startswith(f"agentmsg: this session (gemini:{sid_g}) is participant gem ")
        cstub.push(stubs.text("copilot ok"))
        harness.run_copilot("hello", cwd=tmp_path / "work", home=home, copilot_home=home / ".copilot", stub=cstub,
                            session_id=sid_c, env_extra=run_env).check()
        ctx = product.copilot_contexts(cstub.agent_requests()[0].body, "hello")
        assert ctx["SessionStart"].startswith(f"agentmsg: this session (copilot:{sid_c}) is participant cop ")
    assert not (root / "hooks.log").exists()

    for host in ("gemini", "copilot"):
        out = agentmsg_("uninstall", host)
        assert out["ran"] and not [x for x in out["left"] if x.startswith(host + " ")], out
    assert not (home / ".gemini" / "extensions" / "agentmsg").exists()
    settings = json.loads((home / ".copilot" / "settings.json").read_text())
    assert (settings.get("enabledPlugins") or {}).get("agentmsg@agentmsg") is not True  # Copilot keeps it, false
    assert "agentmsg" not in (settings.get("extraKnownMarketplaces") or {})


def test_readme_install_steps_for_gemini_and_copilot_run_as_written(tmp_path):
    """The host-CLI alternatives README's Install block gives for Gemini and Copilot (``# or: ...``), run as
    written with the real host CLIs against a fresh HOME and a clone-like copy: install, marketplace add."""
    text = (product.REPO / "README.md").read_text()
    section = text.split("## Install\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [part.strip() for ln in block.splitlines() if ln.startswith(("agentmsg install gemini",
                                                                         "agentmsg install copilot"))
             for part in ln.split("# or: ", 1)[1].split("&&")]
    assert [ln.split()[:3] for ln in lines] == [
        ["gemini", "extensions", "install"], ["copilot", "plugin", "marketplace"], ["copilot", "plugin", "install"]]
    clone = product.export_plugin(tmp_path / "clone")
    home = tmp_path / "home"
    harness._gemini_settings(home)
    env = harness.scrubbed_env(home, env_extra={**OFFLINE, "PATH": product.host_path(harness.NODE_BIN)})
    for line in lines:
        argv = [a.replace("/path/to/agentmsg", str(clone)) for a in line.split()]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
    assert (home / ".gemini" / "extensions" / "agentmsg" / "hooks" / "run").is_file()
    settings = json.loads((home / ".copilot" / "settings.json").read_text())
    assert settings["enabledPlugins"]["agentmsg@agentmsg"] is True
    assert settings["extraKnownMarketplaces"]["agentmsg"]["source"] == {"source": "directory", "path": str(clone)}
