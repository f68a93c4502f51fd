"""End-to-end: deliveries rendered ahead on the REAL Claude Code and Codex CLIs (issue 15).

Twenty messages arrive for a bound session between two turns.  The renderer (started by the first
turn's hooks, rung by the sends) renders the next prompt's delivery; at the second turn's
UserPromptSubmit the launcher prints it without starting Python.  The proof: every interpreter the
hooks start is logged by ``AGENTMSG_PYTHON`` (a shim), and no ``prompt`` hook run is among them,
while the recorded model request holds all twenty inside one boundary and the receipts journal one
presented attempt for them (never an ack).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from agentmsg.backends.file import ahead
from tests.support.cli_helpers import run_json
from tests.support.hosts import product, stubs

pytestmark = pytest.mark.hosts

CAROL = "human:carol"
PENDING = 20


def cli(root: Path, *args: str) -> dict:
    code, doc, err = run_json(*args, root=root)
    assert code == 0, (args, doc, err)
    return doc["result"]


def counting_python(tmp: Path) -> tuple[Path, Path]:
    """An interpreter that logs the arguments of every start, then runs the test venv's."""
    log = tmp / "python-starts.log"
    shim = tmp / "python3-counting"
    shim.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{product.VENV_PYTHON}" "$@"\n')
    shim.chmod(0o755)
    return shim, log


def hook_starts(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def wait_rendered(root: Path, pin: str) -> None:
    real = str(os.path.realpath(root))
    deadline = time.monotonic() + 20
    while not (ahead.current(real, pin) and not os.path.exists((ahead.base(real, pin) or "") + ahead.TOOK)):
        assert time.monotonic() < deadline, sorted(os.listdir(Path(real) / "idle"))
        time.sleep(0.02)


@pytest.mark.parametrize("name,mode", [("claude", "plugin-dir"), ("codex", "user-hooks")])
def test_twenty_pending_reach_the_model_with_no_interpreter_at_the_prompt(tmp_path, name, mode):
    host = product.Host(name, mode, tmp_path / name)
    root = tmp_path / "state"
    shim, log = counting_python(tmp_path)
    env = {"AGENTMSG_PYTHON": str(shim)}
    cid = cli(root, "open", "--self", CAROL, "--alias", "carol", "--label", "ahead",
              "--task", "deliveries rendered ahead on the real host")["collab"]
    with host.stub() as stub:
        s = host.begin(stub, root=root)
        cli(root, "join", "--collab", cid, "--self", s.pin, "--alias", "worker")
        t = s.turn(stub, "first turn", [stubs.text("one")], root=root, env=env)
        assert t.run.result == "one"
        sent = [cli(root, "send", "--collab", cid, "--self", CAROL, "--to", "worker", "--kind", "request",
                    "--subject", f"pending {i:02d}", "--body", f"pending message {i}")["results"][0]["id"]
                for i in range(PENDING)]
        wait_rendered(root, s.pin)
        before = len(hook_starts(log))
        t = s.turn(stub, "second turn", [stubs.text("two")], root=root, env=env)
        assert t.run.result == "two"
        started = hook_starts(log)[before:]
        assert not [a for a in started if a.endswith(" prompt")], started  # Claude's prompt hook never ran Python
        block = product.parse_block(t.contexts(0)["UserPromptSubmit"])
        assert [m.id for m in block.messages] == sent  # all twenty, in order, inside one boundary
        assert block.lead[0].startswith(f"agentmsg: {PENDING} new peer messages for worker")  # never shown before
        deadline = time.monotonic() + 20
        while True:
            recs = product.Collab(cid, root, root).journal("receipts/worker.jsonl")
            presented = [r for r in recs if r["type"] == "presented"]
            if len(presented) == PENDING or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert [r["message"] for r in presented] == sent and len({r["attempt"] for r in presented}) == 1
        assert not [r for r in recs if r["type"] == "ack"]
        assert any(r["type"] == "attempt-complete" for r in recs)
        # The attempt is the one rendered ahead (its fold recorded it), not one a full prompt hook made up:
        # Codex runs every hook as `hooks/run codex`, so this is the proof there.
        state = json.loads((root / "collabs" / cid / "state" / "worker.hook.json").read_text())
        assert state["ahead"] == presented[0]["attempt"] and state["seen"]["event"] == "UserPromptSubmit"
        # The third turn: nothing new is due (shown one prompt ago), and it is still no interpreter at the prompt.
        before = len(hook_starts(log))
        wait_rendered(root, s.pin)
        t = s.turn(stub, "third turn", [stubs.text("three")], root=root, env=env)
        assert "UserPromptSubmit" not in t.contexts(0)
        assert not [a for a in hook_starts(log)[before:] if a.endswith(" prompt")]


def test_several_bindings_reach_the_model_with_no_interpreter_at_the_prompt(tmp_path):
    """Issue 32: a session bound in two collaborations, ten messages pending in each, is served ahead too."""
    host = product.Host("claude", "plugin-dir", tmp_path / "claude")
    root = tmp_path / "state"
    shim, log = counting_python(tmp_path)
    env = {"AGENTMSG_PYTHON": str(shim)}
    cids = [cli(root, "open", "--self", CAROL, "--alias", "carol", "--label", f"ahead {n}",
                "--task", "two bindings rendered ahead")["collab"] for n in range(2)]
    with host.stub() as stub:
        s = host.begin(stub, root=root)
        for cid in cids:
            cli(root, "join", "--collab", cid, "--self", s.pin, "--alias", "worker")
        t = s.turn(stub, "first turn", [stubs.text("one")], root=root, env=env)
        assert t.run.result == "one"
        sent = {cid: [cli(root, "send", "--collab", cid, "--self", CAROL, "--to", "worker", "--kind", "request",
                          "--subject", f"pending {n}-{i:02d}", "--body", f"pending message {i}")["results"][0]["id"]
                      for i in range(PENDING // 2)] for n, cid in enumerate(cids)}
        wait_rendered(root, s.pin)
        before = len(hook_starts(log))
        t = s.turn(stub, "second turn", [stubs.text("two")], root=root, env=env)
        assert t.run.result == "two"
        assert not [a for a in hook_starts(log)[before:] if a.endswith(" prompt")]  # no Python at the prompt
        text = t.contexts(0)["UserPromptSubmit"]  # (product.parse_block reads one collaboration's lines)
        assert text.startswith(f"agentmsg: {PENDING} new peer messages for worker are unacknowledged; "
                               f"{PENDING} quoted below.")
        for cid in cids:
            assert all(text.count(f"id {mid} · collaboration {cid}") == 1 for mid in sent[cid])
        for cid in cids:  # each collaboration's receipts: its own ten, one attempt each, never an ack
            deadline = time.monotonic() + 20
            while True:
                recs = product.Collab(cid, root, root).journal("receipts/worker.jsonl")
                presented = [r for r in recs if r["type"] == "presented"]
                if len(presented) == PENDING // 2 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert [r["message"] for r in presented] == sent[cid] and len({r["attempt"] for r in presented}) == 1
            assert not [r for r in recs if r["type"] == "ack"]
