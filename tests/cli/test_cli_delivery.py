"""`delivery`, `install`/`uninstall codex` and `doctor`, through the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from tests.support.cli_helpers import REPO_ROOT, run, run_json, snapshot

DRIVER = "codex:0199-delivery-driver"
REVIEWER = "claude-code:5418-delivery-reviewer"


@pytest.fixture
def collab(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "state"
    code, doc, err = run_json("open", "--self", DRIVER, "--alias", "driver", "--label", "d", "--task", "t", root=root)
    assert code == 0, err
    cid = doc["result"]["collab"]
    assert run_json("join", "--collab", cid, "--self", REVIEWER, "--alias", "reviewer", root=root).code == 0
    return root, cid


def test_enable_inspect_disable(collab: tuple[Path, str]) -> None:
    root, cid = collab
    code, doc, err = run_json("delivery", "enable", "--collab", cid, "--self", REVIEWER, "--expires-in", "30m",
                              "--max-continuations", "3", root=root)
    assert code == 0, err
    env = doc["result"]
    assert (env["owner"], env["status"], env["slots"], env["remaining"], env["wait_seconds"]) == (
        {"alias": "reviewer", "pin": REVIEWER}, "active", 3, 3, 0.0)
    assert 1790 <= env["expires_in_seconds"] <= 1800

    # immutable: a second enable is refused, nothing written
    before = snapshot(root)
    code, doc, err = run_json("delivery", "enable", "--collab", cid, "--self", REVIEWER, root=root)
    assert code == 5 and err.startswith("conflict: delivery is already enabled for reviewer (envelope ")
    assert snapshot(root) == before

    code, doc, err = run_json("delivery", "inspect", "--collab", cid, "--self", REVIEWER, root=root)
    assert code == 0, err
    assert doc["result"]["envelope"]["envelope"] == env["envelope"]
    assert set(doc["result"]["adapters"]) == {"claude", "codex", "gemini", "copilot", "opencode"}

    code, doc, err = run_json("delivery", "disable", "--collab", cid, "--self", REVIEWER, root=root)
    assert code == 0 and doc["result"]["status"] == "disabled"
    code, doc, err = run_json("delivery", "disable", "--collab", cid, "--self", REVIEWER, root=root)
    assert code == 15 and err == "delivery: no active delivery envelope for reviewer (the last one is disabled)\n"


@pytest.mark.parametrize(("args", "line"), [
    (["--expires-in", "25h"], "usage: --expires-in must be more than 0 and at most 24h"),
    (["--max-duration", "0"], "usage: --max-duration must be more than 0 and at most 24h"),
    (["--wait", "31s"], "usage: --wait must be at least 0 and at most 30s"),
    (["--max-continuations", "0"], "usage: --slots must be between 1 and "),
    (["--expires-in", "soon"], "usage: invalid --expires-in 'soon': expected e.g. 90s, 10m, 2h"),
])
def test_enable_bad_input(collab: tuple[Path, str], args: list[str], line: str) -> None:
    root, cid = collab
    before = snapshot(root)
    code, _, err = run("delivery", "enable", "--collab", cid, "--self", REVIEWER, *args, root=root)
    assert code == 2 and err.startswith(line), err
    assert snapshot(root) == before


def test_delivery_is_limited_to_the_exact_participant(collab: tuple[Path, str]) -> None:
    root, cid = collab
    code, _, err = run("delivery", "enable", "--collab", cid, "--self", "codex:someone-else", root=root)
    assert code == 9 and err == f"identity: codex:someone-else is not bound to any alias in collaboration {cid}\n"
    # the host's own session variable wins over a claimed --self
    code, _, err = run("delivery", "enable", "--collab", cid, "--self", REVIEWER, root=root,
                       env={"CLAUDE_CODE_SESSION_ID": "5418-some-other-session"})
    assert code == 9 and err.startswith(f"identity: --self {REVIEWER} disagrees with this host session")


def test_retry_needs_an_interrupted_attempt(collab: tuple[Path, str]) -> None:
    root, cid = collab
    nil = "00000000-0000-4000-8000-000000000000"
    code, _, err = run("delivery", "retry", "--collab", cid, "--self", REVIEWER, "--attempt", nil,
                       "--message", nil, root=root)
    assert code == 3 and err == f"not found: no presented attempt {nil} of message {nil} for reviewer\n"
    code, _, err = run("delivery", "retry", "--collab", cid, "--self", REVIEWER, "--attempt", "x",
                       "--message", nil, root=root)
    assert code == 2 and err == "usage: invalid attempt id 'x': expected a UUID\n"


def test_install_codex_is_idempotent_and_uninstall_removes_exactly_it(tmp_path: Path) -> None:
    home, codex_home = tmp_path / "home", tmp_path / "codex"
    codex_home.mkdir(parents=True)
    theirs = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo theirs"}]}]}}
    (codex_home / "hooks.json").write_text(json.dumps(theirs))
    env = {"HOME": str(home), "CODEX_HOME": str(codex_home)}

    code, doc, err = run_json("install", "codex", env=env)
    assert doc["result"]["hooks_file"] == str(codex_home / "hooks.json")
    assert code == 0, err
    first = snapshot(tmp_path)
    hooks = json.loads((codex_home / "hooks.json").read_text())
    ours = [h["command"] for groups in hooks["hooks"].values() for g in groups for h in g["hooks"]
            if "agentmsg" in h["command"]]
    # the delivery hooks, and the claims' tool hooks (docs/CLAIMS.md)
    assert sorted(hooks["hooks"]) == ["PostToolUse", "PreToolUse", "SessionStart", "Stop", "UserPromptSubmit"]
    assert len(ours) == 5 and all(str(REPO_ROOT / "hooks" / "run") in c for c in ours)
    assert (home / ".agents" / "skills" / "agentmsg" / "SKILL.md").is_file()

    assert run_json("install", "codex", env=env).code == 0
    assert snapshot(tmp_path) == first, "a second install changed something"

    code, _doc, err = run_json("uninstall", "codex", env=env)
    assert code == 0, err
    assert json.loads((codex_home / "hooks.json").read_text()) == theirs
    assert not (home / ".agents" / "skills" / "agentmsg" / "SKILL.md").exists()


def _stale_copy(tmp_path: Path, version: str) -> Path:
    """A real second copy of the package with another version, and a PATH shim that runs it."""
    copy = tmp_path / "stale"
    shutil.copytree(REPO_ROOT / "agentmsg", copy / "agentmsg",
                    ignore=shutil.ignore_patterns("__pycache__"))
    init = copy / "agentmsg" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', f'__version__ = "{version}+was-'))
    shim = tmp_path / "bin" / "agentmsg"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{copy}" exec "{os.sys.executable}" -m agentmsg.cli "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    return shim.parent


def test_doctor_warns_loudly_about_a_stale_copy_on_path(tmp_path: Path) -> None:
    bindir = _stale_copy(tmp_path, "0.0.1")
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path / "home")}
    # cwd matters: `python -m` puts it first on sys.path, ahead of the shim's PYTHONPATH
    code, doc, err = run_json("doctor", root=tmp_path / "state", env=env, cwd=tmp_path, timeout=300)
    assert code == 16
    probes = {p["name"]: p for p in doc["result"]["probes"]}
    assert probes["PATH CLI"]["version"].startswith("agentmsg/0.0.1+was-")
    assert probes["this process"]["version"] != probes["PATH CLI"]["version"]
    assert any(w.startswith("entry points disagree on versions: ") for w in doc["result"]["warnings"])
    assert err.startswith("doctor: ")


def test_doctor_sees_a_different_root(tmp_path: Path) -> None:
    """The PATH CLI resolves its own root from the environment; --root here differs."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "agentmsg"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO_ROOT}" exec "{os.sys.executable}" -m agentmsg.cli "$@"\n')
    shim.chmod(0o755)
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path / "home")}
    code, doc, _ = run_json("doctor", "--root", str(tmp_path / "elsewhere"), root=tmp_path / "state", env=env,
                            timeout=300)
    assert code == 16
    assert any(w.startswith("entry points disagree on state roots: ") for w in doc["result"]["warnings"])
