"""What a newcomer trips on first (issue 30, findings 9 and 10), through the real CLI as a subprocess."""

from __future__ import annotations

from pathlib import Path

from agentmsg.hosts import registry
from tests.support.cli_helpers import run, run_json, snapshot

ME = "claude-code:5418-first-use-me"
PEER = "codex:0199-first-use-peer"
NO_TMUX = {"TMUX": None, "TMUX_PANE": None}


def _team(root: Path, me: str = ME) -> str:
    code, doc, err = run_json("open", "--self", PEER, "--alias", "driver", "--label", "review", "--task", "t",
                              root=root)
    assert code == 0, err
    cid: str = doc["result"]["collab"]
    assert run_json("join", "--collab", cid, "--self", me, "--alias", "reviewer", root=root).code == 0
    return cid


def test_dash_dash_version_is_agentmsg_version() -> None:
    code, out, err = run("--version")
    assert (code, err) == (0, "")
    assert out == run("version").stdout
    assert out.startswith("version: ")


def test_self_help_names_every_hosts_session_variable() -> None:
    _code, out, _err = run("inbox", "--help", env={"COLUMNS": "400"})
    flat = " ".join(out.split())
    for var, _runtime in registry.shell_vars():
        assert var in flat, var


def test_wake_on_where_nothing_can_ring_is_refused_and_records_nothing(tmp_path: Path) -> None:
    root = tmp_path / "state"
    cid = _team(root, me="human:bob")
    before = snapshot(root)
    code, out, err = run("wake", "on", "--collab", cid, "--self", "human:bob", root=root, env=NO_TMUX)
    assert (code, out) == (18, "")
    assert err.startswith("wake: wake on: nothing could ring human:bob: its host has no wake-up of its own")
    assert snapshot(root) == before
    status = run_json("wake", "status", "--collab", cid, "--self", "human:bob", root=root).doc["result"]
    assert status["wake"] == {"status": "off"}


def test_wake_off_and_a_later_send_say_plainly_what_happens(tmp_path: Path) -> None:
    root = tmp_path / "state"
    cid = _team(root)
    code, out, err = run("wake", "on", "--collab", cid, "--self", ME, root=root, env=NO_TMUX)
    assert code == 0, err
    assert out.startswith("wake on for reviewer (claude-code:5418-first-use-me): a send may ring this idle session "
                          "until ")
    code, out, err = run("wake", "off", "--collab", cid, "--self", ME, root=root)
    assert code == 0, err
    assert out == ("wake off for reviewer (claude-code:5418-first-use-me): sends no longer ring this session; its "
                   "hooks show mail at the next prompt (agentmsg wake on allows wake-ups again)\n")
    assert "until" not in out
    code, out, err = run("send", "--collab", cid, "--self", PEER, "--to", "reviewer", "--body", "hi", root=root)
    assert code == 0, err
    assert "  wake: not rung: the recipient turned wake-ups off\n" in out
    assert "wake off (off)" not in out
    sent = run_json("send", "--collab", cid, "--self", PEER, "--to", "reviewer", "--body", "again", root=root)
    assert sent.doc["result"]["results"][0]["wake"]["outcome"] == "wake off (off)"  # --json keeps the outcome


def test_the_demo_needs_the_package_only_and_echoes_commands_as_typed(tmp_path: Path) -> None:
    """Issue 30, finding 8: scripts/demo runs from the package alone (no test bootstrap, no .venv, no apt, no
    build debris) and each echoed command keeps its quoting."""
    import shutil
    import subprocess
    import sys

    from tests.support.cli_helpers import REPO_ROOT, clean_env

    clone = tmp_path / "clone"
    for part in ("agentmsg", "bin", "scripts"):
        shutil.copytree(REPO_ROOT / part, clone / part, ignore=shutil.ignore_patterns("__pycache__"))
    pybin = tmp_path / "pybin"  # a python3 that has the CLI's dependencies, and no agentmsg beside it
    pybin.mkdir()
    (pybin / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (pybin / "python3").chmod(0o755)
    env = clean_env(None, {"HOME": str(tmp_path / "home"), "PATH": f"{pybin}:/usr/bin:/bin",
                           "TMPDIR": str(tmp_path), "PYTHONPATH": None})
    done = subprocess.run(["bash", str(clone / "scripts" / "demo")], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "$ agentmsg open --self codex:0199a1b2-demo-driver --alias driver --label review --task " \
           "'Review the retry patch' --json" in done.stderr
    assert "--body $'Approve.\\nNit: cap the jitter at 1s.'" in done.stderr
    assert "bootstrap" not in done.stderr and "chromium" not in done.stderr
    assert "## [reviewer→driver]" in done.stdout
    left = {p.name for p in clone.iterdir()}
    assert left == {"agentmsg", "bin", "scripts"}, left  # no .venv, build/ or *.egg-info
    assert not (tmp_path / "home" / ".local" / "share" / "agentmsg" / "venv").exists()  # python3 had what it needs
