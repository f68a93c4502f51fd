"""Open gates where the person in charge looks (issue 31): ``status``, ``roster``, ``top`` and the HTML log list a
gate while it waits, and no longer once its human answers; ``watch --for-reply GATE`` returns with the answer.
Through the real CLI, each command a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.cli_helpers import JsonResult, clean_env, run, run_json

ORCH = "codex:0199-gateview-orch"
ALICE = "human:alice"
GATE = {"gate_id": "G-4", "required_action": "APPROVE", "question": "Ship v1.2 to production?",
        "context": "all checks green", "timeout_minutes": 60, "approver": "human"}


def test_open_gates_in_status_roster_top_and_the_html_log_and_watch_on_a_gate(tmp_path: Path) -> None:
    root, home = tmp_path / "state", tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home)}

    def j(*args: str) -> JsonResult:
        return run_json(*args, root=root, env=env, cwd=tmp_path)

    def text(*args: str) -> str:
        code, out, err = run(*args, root=root, env=env, cwd=tmp_path)
        assert code == 0, err
        return out

    code, doc, err = j("open", "--self", ORCH, "--alias", "orch", "--label", "gates", "--task", "ship")
    assert code == 0, err
    cid = doc["result"]["collab"]
    code, _doc, err = j("join", "--collab", cid, "--self", ALICE, "--alias", "alice")
    assert code == 0, err
    (tmp_path / "gate.yaml").write_text(yaml.safe_dump(GATE))
    code, doc, err = j("send", "--collab", cid, "--self", ORCH, "--to", "alice", "--type", "gate_request",
                       "--payload-file", "gate.yaml")
    assert code == 0, err
    gate = doc["result"]["results"][0]["id"]
    line = "gate G-4 APPROVE orch->alice: open (times out at "

    # status and roster: JSON and text
    for command in ("status", "roster"):
        code, doc, err = j(command, "--collab", cid, "--self", ORCH)
        assert code == 0, err
        (g,) = doc["result"]["open_gates"]
        assert (g["id"], g["gate_id"], g["state"], g["from"], g["to"]) == (gate, "G-4", "open", "orch", "alice")
        assert line in text(command, "--collab", cid, "--self", ORCH)
    # top, one frame
    frame = text("top", "--once", "--collab", cid)
    assert "Open gates (1)" in frame and "G-4 APPROVE orch -> alice: open (until " in frame, frame
    # the HTML log's header
    page = tmp_path / "log.html"
    text("log", "render", "--collab", cid, "--html", "--out", str(page))
    html = page.read_text()
    assert "<dt>open gates</dt><dd>" in html and ">G-4</a> APPROVE orch → alice: open (times out 60 min" in html

    # watch --for-reply on the gate returns when the human's gate_response arrives
    watcher = subprocess.Popen([sys.executable, "-m", "agentmsg.cli", "watch", "--for-reply", gate, "--timeout", "5m",
                                "--collab", cid, "--self", ORCH, "--json"], cwd=tmp_path,
                               env=clean_env(root, env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        (tmp_path / "yes.yaml").write_text(yaml.safe_dump({"gate_id": "G-4", "decision": "APPROVE"}))
        code, doc, err = j("send", "--collab", cid, "--self", ALICE, "--type", "gate_response",
                           "--payload-file", "yes.yaml", "--correlation-id", gate)
        assert code == 0, err
        answer = doc["result"]["results"][0]["id"]
        out, err = watcher.communicate(timeout=120)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    assert watcher.returncode == 0, err
    (event,) = json.loads(out)["result"]["events"]
    assert (event["id"], event["from"], event["subject"]) == (answer, "alice", "gate_response G-4: APPROVE")

    # closed: listed nowhere as open any more
    for command in ("status", "roster"):
        code, doc, err = j(command, "--collab", cid, "--self", ORCH)
        assert code == 0 and doc["result"]["open_gates"] == [], err
        assert "gate G-4" not in text(command, "--collab", cid, "--self", ORCH)
    assert "Open gates" not in text("top", "--once", "--collab", cid)
    text("log", "render", "--collab", cid, "--html", "--out", str(page))
    html = page.read_text()
    assert "<dt>open gates</dt><dd>none</dd>" in html and ">G-4</a> APPROVE orch → alice: approved" in html
