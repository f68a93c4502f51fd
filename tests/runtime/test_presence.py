"""Presence: what the hooks leave on this machine says whether anyone is there (docs/LIFECYCLE.md).

The rules are checked in process (``domain.presence``); the rest through real processes: hooks run through the
launcher (``hooks/run``) with an interpreter shim that counts starts, and ``agentmsg roster`` / ``send`` run as
a subprocess, the way agents call them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentmsg.backends.file import layout
from agentmsg.domain import presence
from agentmsg.runtime import facts as sessionfacts
from tests.support.cli_helpers import run, run_json
from tests.support.helpers_hooks import REVIEWER_SESSION, python_shim, run_hook, starts

REVIEWER = f"claude-code:{REVIEWER_SESSION}"

# ---- the rules -------------------------------------------------------------------------------------------


def _decide(**kw: object) -> presence.Presence:
    args: dict[str, object] = dict(human=False, seen=True, remote=False, alive=True, turn_at=None, rest_at=None,
                                   listening=False, now=10_000.0)
    args.update(kw)
    return presence.decide(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(("kw", "state", "why"), [
    (dict(turn_at=9_990.0, rest_at=9_000.0), "working", ""),
    (dict(turn_at=9_000.0, rest_at=9_990.0), "idle", ""),
    (dict(turn_at=9_000.0, rest_at=9_990.0, listening=True), "listening", ""),
    (dict(turn_at=9_990.0, rest_at=9_000.0, listening=True), "working", ""),  # a running turn is work, wake or not
    (dict(turn_at=10_000.0 - presence.TURN_FOR - 1), "idle", ""),  # a turn with no Stop for 30 min: ended
    (dict(alive=False, turn_at=9_990.0), "gone", "its host process has ended"),
    (dict(human=True), "unknown", presence.HUMAN),
    (dict(seen=False), "unknown", presence.NEVER),
    (dict(seen=False, remote=True), "unknown", presence.REMOTE),
])
def test_the_states(kw: dict[str, object], state: str, why: str) -> None:
    found = _decide(**kw)
    assert (found.state, found.why) == (state, why)


def test_what_a_send_is_told() -> None:
    now = 10_000.0
    gone = presence.Presence("gone", "its host process has ended", now - 7200)
    assert presence.next_step(gone, "reviewer", rang=False, midturn=False, now=now).startswith(
        "reviewer's session ended 2 h ago: it sees this when the session is resumed")
    working = presence.Presence("working", "", now)
    assert presence.next_step(working, "reviewer", rang=False, midturn=True, now=now) == \
        "reviewer is working: it sees this after its next tool call"
    assert presence.next_step(working, "reviewer", rang=False, midturn=False, now=now) == \
        "reviewer is working: it sees this at its next prompt"
    listening = presence.Presence("listening", "", now)
    assert presence.next_step(listening, "reviewer", rang=True, midturn=False, now=now) == \
        "reviewer is listening: rang, so it sees this now"
    assert [presence.age(s) for s in (0, 59, 60, 3599, 3600, 86400 * 3)] == ["0 s", "59 s", "1 min", "59 min",
                                                                              "1 h", "3 d"]


# ---- through the launcher and the CLI ---------------------------------------------------------------------


def _roster(root: Path, cid: str) -> dict[str, dict]:
    code, doc, err = run_json("roster", "--collab", cid, root=root)
    assert code == 0, err
    return {r["alias"]: r for r in doc["result"]["participants"]}


def _send(root: Path, cid: str, to: str) -> dict:
    code, doc, err = run_json("send", "--collab", cid, "--self", "codex:0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
                              "--to", to, "--subject", "s", "--body", "b", root=root)
    assert code == 0, err
    return doc["result"]["results"][0]


def test_presence_follows_the_hooks_and_an_idle_prompt_starts_no_interpreter(tmp_path: Path, collab) -> None:
    root = Path(collab.root)
    before = _roster(root, collab.id)
    assert before["reviewer"]["presence"]["state"] == "unknown"
    assert before["reviewer"]["presence"]["why"] == presence.NEVER
    assert before["carol"]["presence"] == {"state": "unknown", "why": presence.HUMAN, "last_activity": None,
                                           "last_activity_age": None}
    shim = python_shim(tmp_path)
    env = {"AGENTMSG_PYTHON": str(shim)}
    assert run_hook("claude", "SessionStart", tmp_path, root, REVIEWER_SESSION, extra_env=env).returncode == 0
    assert run_hook("claude", "Stop", tmp_path, root, REVIEWER_SESSION, extra_env=env).returncode == 0
    assert _roster(root, collab.id)["reviewer"]["presence"]["state"] == "gone"  # its (test) host process ended
    host = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # a host that lives on
    try:
        _live_session(root, host, tmp_path, env, collab.id)
    finally:
        host.kill()
        host.wait()


def _live_session(root: Path, host: subprocess.Popen[bytes], tmp_path: Path, env: dict[str, str], cid: str) -> None:
    stat = sessionfacts.proc_stat(host.pid)
    assert stat is not None
    sessionfacts.record(str(root), REVIEWER, {"host": "claude", "session": REVIEWER_SESSION, "pid": host.pid,
                                              "pid_start": stat[2]})

    collab = SimpleNamespace(id=cid)  # the fixture's name, for the steps below

    assert _roster(root, collab.id)["reviewer"]["presence"]["state"] == "idle"
    assert run_hook("claude", "UserPromptSubmit", tmp_path, root, REVIEWER_SESSION, extra_env=env,
                    prompt="hi").returncode == 0  # the full run leaves the idle marker
    time.sleep(0.05)
    assert run_hook("claude", "Stop", tmp_path, root, REVIEWER_SESSION, extra_env=env).returncode == 0
    ran = starts(tmp_path)
    time.sleep(0.05)
    assert run_hook("claude", "UserPromptSubmit", tmp_path, root, REVIEWER_SESSION, extra_env=env,
                    prompt="again").returncode == 0
    assert starts(tmp_path) == ran, "an idle prompt started an interpreter"
    row = _roster(root, collab.id)["reviewer"]
    assert row["presence"]["state"] == "working" and row["presence"]["last_activity_age"] < 30
    assert row["host"] == "claude" and row["unread"] == 0 and row["wake"] == "off" and row["midturn"] is False
    result = _send(root, collab.id, "reviewer")
    assert result["presence"]["state"] == "working"
    assert result["next"] == "reviewer is working: it sees this at its next prompt"
    row = _roster(root, collab.id)["reviewer"]
    assert row["unread"] == 1 and row["behind"] is not None and row["behind"] >= 0


def test_a_send_to_a_session_that_ended_is_stored_and_says_so(tmp_path: Path, collab) -> None:
    root = Path(collab.root)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    sessionfacts.record(str(root), REVIEWER, {"host": "claude", "session": REVIEWER_SESSION, "pid": child.pid,
                                              "pid_start": "1"})
    result = _send(root, collab.id, "reviewer")  # exit 0: stored
    assert result["presence"]["state"] == "gone"
    assert result["next"].startswith("reviewer's session ended")
    code, out, _err = run("send", "--collab", collab.id, "--self", "codex:0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
                          "--to", "reviewer", "--subject", "s2", "--body", "b", root=root)
    assert code == 0 and "\n  reviewer's session ended" in out
    code, out, _err = run("roster", "--collab", collab.id, root=root)
    assert code == 0
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert any(line.startswith("reviewer") and " gone " in line and "2 unread" in line for line in lines), lines
    at = lines.index(f"  {REVIEWER} (claude)")
    assert lines[at + 1] == "    its host process has ended"


def test_the_launcher_never_marks_through_a_link(tmp_path: Path, collab) -> None:
    root = Path(collab.root)
    env = {"AGENTMSG_PYTHON": str(python_shim(tmp_path))}
    assert run_hook("claude", "SessionStart", tmp_path, root, REVIEWER_SESSION, extra_env=env).returncode == 0
    turn = layout.marker_file(str(root), REVIEWER, layout.TURN)
    assert turn is not None
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    if os.path.lexists(turn):
        os.unlink(turn)
    os.symlink(victim, turn)
    assert run_hook("claude", "UserPromptSubmit", tmp_path, root, REVIEWER_SESSION, extra_env=env,
                    prompt="x").returncode == 0
    assert victim.read_text() == "keep me" and os.path.islink(turn)
