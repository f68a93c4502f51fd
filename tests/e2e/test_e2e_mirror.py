"""Two machines, simulated: real Claude Code on "machine A", real Codex on "machine B", one PostgreSQL server.

Each machine has its own state root, its own PostgreSQL role (row-level
security: B opens the collaboration and lets A's role in with ``agentmsg db
grant``) and its own mirror (``agentmsg sync`` as that role, running for the
whole test); the hosts run with ``AGENTMSG_STORE`` set, so
every command their agents run writes to the server, and their hooks read
only their own root.  A request goes from Claude's agent to Codex's model and
the reply comes back, each reaching the other model's request body through
the hooks, inside the boundary (as tests/e2e/test_e2e_hosts.py checks on one
machine).  The hooks' presented receipts reach the server through each
root's outbox, once.  Hosts run offline against stub model servers
(tests/support/hosts/).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from agentmsg.backends.file.store import FileStore
from tests.support.cli_helpers import clean_env
from tests.support.hosts import product, stubs

pytestmark = pytest.mark.hosts


def _mirror(root: Path, url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "agentmsg", "sync", "--idle-exit", "10m"],
                            env=clean_env(root, {"AGENTMSG_STORE": url}), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def _arrives(root: Path, collab: str, alias: str, mid: str, timeout: float = 30) -> None:
    """Until the machine's mirror has copied message ``mid`` into its root."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        store = FileStore(root)
        if collab in store.collabs() and any(m.id == mid for m in store.history(collab, alias)):
            return
        time.sleep(0.05)
    raise AssertionError(f"message {mid} did not reach {root} within {timeout}s")


def _presence(root: Path, url: str, collab: str, alias: str, home: Path) -> dict:
    """``alias``'s presence as ``agentmsg roster`` shows it on the machine whose root is ``root``."""
    doc = product.cli("roster", "--store", url, "--collab", collab, root=root, home=home)
    (row,) = [r for r in doc["result"]["participants"] if r["alias"] == alias]
    return row["presence"]


def test_claude_on_a_and_codex_on_b_exchange_a_request_and_a_reply(tmp_path: Path, pg_cluster) -> None:
    from agentmsg.backends.postgres.store import PgStore

    db, tag = pg_cluster.new_db(), uuid.uuid4().hex[:8]
    role_a, role_b = pg_cluster.add_role(f"machine_a_{tag}"), pg_cluster.add_role(f"machine_b_{tag}")
    url_a, url_b = pg_cluster.url(db, role_a), pg_cluster.url(db, role_b)  # each machine logs in as its own role
    root_a, root_b = tmp_path / "machine-a" / "state", tmp_path / "machine-b" / "state"
    claude = product.Host("claude", "plugin-dir", tmp_path / "claude")
    codex = product.Host("codex", "user-hooks", tmp_path / "codex")
    env_a, env_b = {"AGENTMSG_STORE": url_a}, {"AGENTMSG_STORE": url_b}
    mirrors = [_mirror(root_a, url_a), _mirror(root_b, url_b)]
    try:
        from agentmsg.runtime import doorbell

        deadline = time.monotonic() + 30  # each machine's mirror holds its lock: nothing else starts one
        while not all(doorbell.mirroring(str(r)) for r in (root_a, root_b)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(doorbell.mirroring(str(r)) for r in (root_a, root_b))
        with claude.stub() as cstub, codex.stub() as ostub:
            cs = claude.begin(cstub, root=root_a)
            ostub.push(stubs.text("session started"))
            run = codex.run(ostub, "start a session", root=root_b, env=env_b).check()
            xs = product.Session(codex, run.session_id or "", started=True)
            home = tmp_path / "cli-home"
            collab = product.cli("open", "--store", url_b, "--self", xs.pin, "--alias", "driver", "--label", "two",
                                 "--task", "two machines, one server", root=root_b, home=home)["result"]["collab"]
            product.cli("db", "grant", "--store", url_b, "--collab", collab, "--role", role_a, root=root_b, home=home)
            product.cli("join", "--store", url_a, "--collab", collab, "--self", cs.pin, "--alias", "reviewer",
                        root=root_a, home=home)

            # -- machine A: Claude's agent sends a request (to the server) -------------
            subj_c, body_c = "Review retry.py", "Action: review agentmsg/retry.py.\nWhy: the backoff doubled."
            t1 = cs.turn(cstub, "turn one: ask the driver", [
                stubs.shell(f"agentmsg send --collab {collab} --to driver --kind request "
                            f"--subject {shlex.quote(subj_c)} --body {shlex.quote(body_c)} --json"),
                stubs.text("claude sent it"),
            ], root=root_a, env=env_a)
            assert t1.run.result == "claude sent it"
            (out,) = claude.shell_outputs(t1.requests[1])
            mid_c = json.loads(out)["result"]["results"][0]["id"]
            _arrives(root_b, collab, "driver", mid_c)

            # -- machine B: Codex's next prompt shows it (from B's root); its agent replies ---
            subj_x, body_x = "Verdict: cap it", "Action: cap the backoff at 30 s."
            t2 = xs.turn(ostub, "turn two: read and answer", [
                stubs.shell(f"agentmsg send --collab {collab} --reply-to driver/{mid_c} --kind request "
                            f"--subject {shlex.quote(subj_x)} --body {shlex.quote(body_x)} --json"),
                stubs.text("codex sent it"),
            ], root=root_b, env=env_b)
            block = product.parse_block(t2.contexts(0)["UserPromptSubmit"])
            (m,) = block.messages
            assert (m.id, m.sender, m.runtime, m.subject, m.body) == (mid_c, "reviewer", "claude-code", subj_c, body_c)
            (out,) = codex.shell_outputs(t2.requests[1])
            mid_x = json.loads(out.rstrip("\n").split("\n")[-1])["result"]["results"][0]["id"]
            _arrives(root_a, collab, "reviewer", mid_x)

            # -- machine A: Claude's next prompt shows the reply ----------------------------
            t3 = cs.turn(cstub, "turn three: anything new?", [stubs.text("claude read it")], root=root_a, env=env_a)
            block = product.parse_block(t3.contexts(0)["UserPromptSubmit"])
            (m,) = block.messages
            assert (m.id, m.sender, m.runtime, m.subject, m.body) == (mid_x, "driver", "codex", subj_x, body_x)
            assert m.reply_to == f"driver/{mid_c}"

            # -- each machine's roster sees the other machine's session, as that machine sees it ---------
            machines = ((root_a, url_a), (root_b, url_b))
            for (here, there), alias in ((machines[::-1], "reviewer"), (machines, "driver")):
                deadline = time.monotonic() + 60  # the mirrors share presence every few seconds
                while True:
                    own = _presence(*there, collab, alias, home)
                    seen = _presence(*here, collab, alias, home)
                    if (seen["why"] == "on another machine" and seen["state"] == own["state"]) or \
                            time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                assert own["state"] in ("working", "idle", "listening", "gone") and own["why"] != "on another machine"
                assert (seen["state"], seen["why"]) == (own["state"], "on another machine"), (alias, own, seen)

        # -- the hooks' receipts reached the server through each machine's outbox, once ----------
        server = PgStore(pg_cluster.url(db))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pres = {a: [r["message"] for r in server.receipts(collab, a) if r["type"] == "presented"]
                    for a in ("driver", "reviewer")}
            if pres == {"driver": [mid_c], "reviewer": [mid_x]}:
                break
            time.sleep(0.1)
        assert pres == {"driver": [mid_c], "reviewer": [mid_x]}
        for root in (root_a, root_b):
            deadline = time.monotonic() + 30
            while (root / "outbox.jsonl").exists() and (root / "outbox.jsonl").stat().st_size and \
                    time.monotonic() < deadline:
                time.sleep(0.1)
            assert FileStore(root).verify(collab)[1] == []
            local = FileStore(root)
            assert local.streams(collab) == server.streams(collab)
            for stream in server.streams(collab):
                assert local.records_since(collab, stream, 0, 1 << 40) == \
                    server.records_since(collab, stream, 0, 1 << 40), stream
    finally:
        for p in mirrors:
            p.terminate()
            p.wait(timeout=30)
