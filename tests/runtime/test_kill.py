"""``agentmsg kill``: a person stops a session through the host process its own hooks recorded.

Real processes: the "host" is a long-running child whose pid and start time are recorded as its session facts
(what SessionStart records), and ``agentmsg`` runs as a subprocess.  A reused pid (the recorded start time differs)
is never signalled.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from agentmsg.runtime import facts as sessionfacts
from tests.support.cli_helpers import run, run_json
from tests.support.helpers_hooks import REVIEWER_SESSION

REVIEWER = f"claude-code:{REVIEWER_SESSION}"
DRIVER = "codex:0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"


def _host(root: Path, *, start: str | None = None) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    stat = sessionfacts.proc_stat(proc.pid)
    assert stat is not None
    sessionfacts.record(str(root), REVIEWER, {"host": "claude", "session": REVIEWER_SESSION, "pid": proc.pid,
                                              "pid_start": start or stat[2]})
    return proc


def test_only_a_person_with_force_stops_a_session_and_it_is_recorded(collab) -> None:
    root = Path(collab.root)
    host = _host(root)
    try:
        code, _out, err = run("kill", "reviewer", "--force", "--collab", collab.id, "--self", DRIVER, root=root)
        assert code == 9 and err.count("\n") == 1 and "human:" in err
        code, _out, err = run("kill", "reviewer", "--collab", collab.id, "--self", "human:carol", root=root)
        assert code == 2 and "--force" in err
        assert host.poll() is None  # nothing was signalled
        code, doc, err = run_json("kill", "reviewer", "--force", "--collab", collab.id, "--self", "human:carol",
                                  root=root)
        assert code == 0, err
        assert doc["result"]["signal"] == "SIGTERM" and doc["result"]["pid"] == host.pid
        assert host.wait(timeout=10) is not None
    finally:
        host.kill()
        host.wait()
    last = json.loads((root / "collabs" / collab.id / "collab.jsonl").read_text().splitlines()[-1])
    assert (last["type"], last["target"], last["by"]) == ("killed", "reviewer", "human:carol")
    code, doc, err = run_json("roster", "--collab", collab.id, root=root)
    assert {p["alias"]: p["presence"]["state"] for p in doc["result"]["participants"]}["reviewer"] == "gone"
    code, doc, err = run_json("send", "--collab", collab.id, "--self", DRIVER, "--to", "reviewer", "--subject", "s",
                              "--body", "b", root=root)
    assert code == 0 and doc["result"]["results"][0]["next"].startswith("reviewer's session ended")
    code, out, err = run("log", "show", "--collab", collab.id, root=root)
    assert "reviewer's session was stopped by human:carol" in out
    page = root.parent / "log.html"  # and the HTML log (a spawn's and a resume's: tests/e2e/test_e2e_spawn_hosts.py)
    assert run("log", "render", "--html", "--out", str(page), "--collab", collab.id, root=root)[0] == 0
    assert "reviewer&#x27;s session was stopped by human:carol" in page.read_text()


def test_a_reused_pid_is_never_signalled(collab) -> None:
    root = Path(collab.root)
    host = _host(root, start="1")  # the recorded start time is not this process's: its pid was reused
    try:
        code, _out, err = run("kill", "reviewer", "--force", "--collab", collab.id, "--self", "human:carol",
                              root=root)
        assert code == 3 and "not running" in err and "nothing was signalled" in err
        time.sleep(0.2)
        assert host.poll() is None
    finally:
        host.kill()
        host.wait()
    events = (root / "collabs" / collab.id / "collab.jsonl").read_text()
    assert '"killed"' not in events


def test_a_host_that_cannot_resume_or_fork_is_refused_in_one_line_with_exit_19_and_nothing_written(collab) -> None:
    root = Path(collab.root)
    journal = root / "collabs" / collab.id / "collab.jsonl"
    for pin, alias in (("gemini:2b1f0c4e-5d6a-4b7c-8e9f-0a1b2c3d4e5f", "gem"),
                       ("opencode:ses_daef1b6f7ffeqzBNoX", "oc")):
        assert run_json("join", "--collab", collab.id, "--self", pin, "--alias", alias, root=root)[0] == 0
    before = journal.read_bytes()
    code, _out, err = run("fork", "gem", "--alias", "g2", "--collab", collab.id, "--self", DRIVER, root=root)
    assert (code, err) == (19, "host cannot: Gemini CLI cannot fork a session from agentmsg (docs/LIFECYCLE.md)\n")
    code, _out, err = run("resume", "oc", "--collab", collab.id, "--self", "human:carol", root=root)
    assert (code, err) == (19, "host cannot: OpenCode cannot resume a session from agentmsg (docs/LIFECYCLE.md)\n")
    assert journal.read_bytes() == before and not (root / "spawn").exists()
