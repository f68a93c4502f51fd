"""First use, as a newcomer meets it: the display items (issue item 9), how hook text names the CLI per
host (item 1), the background environment build (item 2) and the wheel's host files (item 5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from agentmsg import paths
from agentmsg.hosts import base as hostcmd
from agentmsg.hosts import install as installer
from agentmsg.hosts import registry
from agentmsg.runtime import spawn
from agentmsg.text import boundary
from agentmsg.text import transcript as render
from tests.support.cli_helpers import REPO_ROOT, run, run_json
from tests.support.helpers_hooks import run_hook

DRIVER = "codex:0199-newcomer-driver"
REVIEWER = "claude-code:5418-newcomer-reviewer"


def _open(root: Path) -> str:
    code, doc, err = run_json("open", "--self", DRIVER, "--alias", "driver", "--label", "l", "--task", "t",
                              root=root)
    assert code == 0, err
    return doc["result"]["collab"]


# ---- item 9 ---------------------------------------------------------------------------------


def test_open_share_line_names_the_root_and_not_self(tmp_path: Path) -> None:
    root = tmp_path / "state root"
    code, out, err = run("open", "--self", DRIVER, "--alias", "driver", "--label", "l", "--task", "t", root=root)
    assert code == 0, err
    share = [line for line in out.splitlines() if line.startswith("share with peers: ")]
    assert len(share) == 1 and "--self" not in share[0]
    assert share[0].endswith(f"--alias NAME --root '{root}'")


def test_reply_to_help_says_whose_alias(tmp_path: Path) -> None:
    code, out, _ = run("send", "--help")
    assert code == 0
    flat = " ".join(out.split())
    assert "ALIAS/MESSAGE_ID with ALIAS its sender or its recipient; recorded as RECIPIENT/MESSAGE_ID" in flat
    assert "PARTICIPANT/" not in flat


def test_the_same_root_reports_the_same_source() -> None:
    env = {"HOME": "/home/u"}
    default = paths.resolve_root_str(None, env)
    assert default == ("/home/u/.local/state/agentmsg", "HOME")
    # Claude's SessionStart exports AGENTMSG_HOME for later commands: same root, same source
    assert paths.resolve_root_str(None, {**env, "AGENTMSG_HOME": default[0]}) == default
    assert paths.resolve_root_str(None, {**env, "AGENTMSG_HOME": "/srv/x"}) == ("/srv/x", "AGENTMSG_HOME")
    xdg = {**env, "XDG_STATE_HOME": "/s"}
    assert paths.resolve_root_str(None, {**xdg, "AGENTMSG_HOME": "/s/agentmsg"}) == ("/s/agentmsg", "XDG_STATE_HOME")


def test_a_heredoc_body_has_no_empty_trailing_quoted_line(tmp_path: Path) -> None:
    assert boundary.quote("line one\nline two\n") == f"{boundary.PREFIX}line one\n{boundary.PREFIX}line two\n"
    assert boundary.quote("a\n\n") == f"{boundary.PREFIX}a\n{boundary.PREFIX}\n"  # a real blank line stays
    assert render.body_block("x\n") == "body:\n\n    x\n"
    root = tmp_path / "state"
    cid = _open(root)
    assert run_json("join", "--collab", cid, "--self", REVIEWER, "--alias", "reviewer", root=root).code == 0
    code, _, err = run("send", "--collab", cid, "--self", DRIVER, "--to", "reviewer", "--subject", "s",
                       "--body-stdin", input="first\nlast\n", root=root)
    assert code == 0, err
    code, out, _ = run("inbox", "--collab", cid, "--self", REVIEWER, root=root)
    assert "    last\n" in out and "    last\n    \n" not in out


def test_session_start_says_plainly_when_this_session_opened_it(tmp_path: Path) -> None:
    root = tmp_path / "state"
    cid = _open(root)
    assert run_json("join", "--collab", cid, "--self", REVIEWER, "--alias", "reviewer", root=root).code == 0
    own = json.loads(run_hook("codex", "SessionStart", tmp_path, root, DRIVER.split(":", 1)[1]).stdout)
    text = own["hookSpecificOutput"]["additionalContext"]
    assert f"collaboration {cid}, which this session opened." in text
    assert "written by this session (driver), when it opened the collaboration." in text
    assert "a peer" not in text.split("nonce")[0]
    peer = json.loads(run_hook("claude", "SessionStart", tmp_path, root, REVIEWER.split(":", 1)[1]).stdout)
    text = peer["hookSpecificOutput"]["additionalContext"]
    assert "opened by driver." in text and "written by driver, the collaboration's opener, a peer." in text


# ---- item 1: every command shown runs as shown ---------------------------------------------------


def test_hook_text_names_the_cli_as_each_host_can_run_it(tmp_path: Path) -> None:
    launcher = str(REPO_ROOT / "bin" / "agentmsg")
    assert hostcmd.cli_command(registry.by_name()["claude"], {}) == "agentmsg"  # bin/ is on its PATH
    assert hostcmd.cli_command(registry.by_name()["codex"], {}) == hostcmd.sh_quote(launcher)
    assert hostcmd.cli_command(registry.by_name()["codex"], {"AGENTMSG_CLI": "/o p/agentmsg"}) == "'/o p/agentmsg'"
    root = tmp_path / "state"
    cid = _open(root)
    res = run_hook("codex", "SessionStart", tmp_path, root, DRIVER.split(":", 1)[1])
    text = json.loads(res.stdout)["hookSpecificOutput"]["additionalContext"]
    assert f"`{hostcmd.sh_quote(launcher)} inbox --collab {cid}`" in text
    assert f"The agentmsg CLI here is {hostcmd.sh_quote(launcher)}." in text


def test_the_command_codex_is_told_to_run_works_from_a_login_shell(tmp_path: Path) -> None:
    """An unjoined Codex session is told the command; run verbatim by `bash -lc` (as Codex does), it answers."""
    pybin = tmp_path / "pybin"
    pybin.mkdir()
    (pybin / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (pybin / "python3").chmod(0o755)
    # the note comes only when the hook's PATH (Codex's login shell) has no agentmsg (issue 30)
    res = run_hook("codex", "SessionStart", tmp_path, tmp_path / "state", "never-joined",
                   extra_env={"PATH": f"{pybin}:/usr/bin:/bin"})
    text = json.loads(res.stdout)["hookSpecificOutput"]["additionalContext"]
    command = text.split("e.g. `", 1)[1].split("`", 1)[0]
    home = tmp_path / "home"
    (home / ".profile").write_text(f'export PATH="{pybin}:$PATH"\n')  # a user profile; no agentmsg on PATH
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "AGENTMSG_HOME": str(tmp_path / "state")}
    done = subprocess.run(["/bin/bash", "-lc", command], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "root: " in done.stdout


def test_install_codex_from_a_wheel_names_its_console_script(tmp_path: Path) -> None:
    out = installer.install_codex(tmp_path / "codex", REPO_ROOT, home=tmp_path, cli="/opt/pipx/bin/agentmsg")
    assert out["command"].startswith("AGENTMSG_CLI='/opt/pipx/bin/agentmsg' /bin/sh ")
    assert installer._hook_root(out["command"]) == REPO_ROOT


# ---- item 5: the wheel carries the host files --------------------------------------------------


def test_setup_ships_every_host_file_and_hooks_find_the_package_in_a_wheel_layout(tmp_path: Path) -> None:
    import ast

    tree = ast.parse((REPO_ROOT / "setup.py").read_text())
    shipped = next(ast.literal_eval(n.value) for n in ast.walk(tree)
                   if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "SHIPPED")
    assert all((REPO_ROOT / rel).is_file() for rel in shipped)
    assert {"hooks/run", "bin/agentmsg", "skills/agentmsg/SKILL.md"} <= set(shipped)
    # an installed wheel: site-packages/agentmsg/{...,_plugin/...}
    site = tmp_path / "site-packages"
    import shutil

    shutil.copytree(REPO_ROOT / "agentmsg", site / "agentmsg", ignore=shutil.ignore_patterns("__pycache__"))
    for rel in shipped:
        (site / "agentmsg" / "_plugin" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / rel, site / "agentmsg" / "_plugin" / rel)
    probe = subprocess.run(["/bin/sh", str(site / "agentmsg/_plugin/hooks/run"), "codex"],
                           input=b'{"hook_event_name": "AgentmsgProbe", "session_id": "x"}', capture_output=True,
                           env={"HOME": str(tmp_path), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"},
                           timeout=60)
    assert json.loads(probe.stdout)["package"] == str(site / "agentmsg")
    found = subprocess.run([sys.executable, "-c", "from agentmsg.hosts import install; print(install.plugin_root())"],
                           env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True, cwd=tmp_path)
    assert found.stdout.strip() == str(site / "agentmsg" / "_plugin")


# ---- item 2: the environment is built before the first call ----------------------------------------


def test_a_launcher_waits_for_a_build_in_progress_then_answers(tmp_path: Path) -> None:
    data = tmp_path / "share" / "agentmsg"
    (data / "venv.lock").mkdir(parents=True)
    builder = subprocess.Popen(["sleep", "30"])
    try:
        (data / "venv.lock" / "pid").write_text(str(builder.pid))
        env = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "share"), "PATH": "/usr/bin:/bin",
               "AGENTMSG_BUILD_WAIT": "3"}
        t0 = time.monotonic()
        done = subprocess.run(["/bin/sh", str(REPO_ROOT / "bin" / "agentmsg"), "version"], env=env,
                              capture_output=True, text=True, timeout=60)
        assert 2.5 < time.monotonic() - t0 < 15
        assert done.returncode == 2 and "still being installed in the background" in done.stderr
        # the build finishes: a ready venv (here: a stand-in for one) is used at once
        venv = data / "venv"
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        (venv / "bin" / "python").chmod(0o755)
        (venv / ".agentmsg-ready").touch()
        done = subprocess.run(["/bin/sh", str(REPO_ROOT / "bin" / "agentmsg"), "version"], env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    finally:
        builder.kill()
        builder.wait()


def test_session_start_starts_the_build_detached_once(tmp_path: Path) -> None:
    share = tmp_path / "share"
    started = spawn.prepare_cli({"HOME": str(tmp_path), "XDG_DATA_HOME": str(share),
                                   "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})
    assert started
    for _ in range(100):
        if (share / "agentmsg" / "python3-has-deps").exists():
            break
        time.sleep(0.1)
    assert (share / "agentmsg" / "python3-has-deps").exists()  # this python3 has the deps: nothing to build
    assert not spawn.prepare_cli({"HOME": str(tmp_path), "XDG_DATA_HOME": str(share)})  # once per machine
