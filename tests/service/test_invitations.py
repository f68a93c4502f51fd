"""Invite-only collaborations and one-time tickets (docs/LIFECYCLE.md, "Invitations").

The rules on every backend (the ``box`` fixture: file, memory and PostgreSQL), then the commands through the real
CLI as a subprocess: a refused join exits 9 and writes nothing, a ticket admits once, an expired one never.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from agentmsg.domain import kinds
from agentmsg.domain.values import Pin
from agentmsg.errors import Conflict, IdentityError
from tests.support.cli_helpers import run, run_json

DRIVER, REVIEWER, OTHER = Pin("codex", "drv-1"), Pin("claude-code", "rev-1"), Pin("claude-code", "oth-1")


def _hash(ticket: str) -> str:
    return hashlib.sha256(ticket.encode()).hexdigest()


def test_a_ticket_admits_once_on_every_backend(box) -> None:
    reg = box.open(DRIVER, "driver", "review", "t", policy=kinds.INVITE_ONLY)
    assert reg.policy == kinds.INVITE_ONLY
    with pytest.raises(IdentityError, match="admits only the holder of a ticket"):
        box.join(reg.collab, REVIEWER, "reviewer")
    box.invite(reg.collab, DRIVER, _hash("t1"), for_alias=None, expires_at=time.time() + 60)
    assert box.join(reg.collab, REVIEWER, "reviewer", ticket=_hash("t1")).alias_of(str(REVIEWER)) == "reviewer"
    with pytest.raises(IdentityError, match="used already"):
        box.join(reg.collab, OTHER, "other", ticket=_hash("t1"))
    assert box.registry(reg.collab).tickets == {}


def test_expired_foreign_and_misnamed_tickets_are_refused(box) -> None:
    reg = box.open(DRIVER, "driver", "review", "t", policy=kinds.INVITE_ONLY)
    box.invite(reg.collab, DRIVER, _hash("old"), for_alias=None, expires_at=time.time() - 1)
    box.invite(reg.collab, DRIVER, _hash("named"), for_alias="reviewer", expires_at=time.time() + 60)
    with pytest.raises(IdentityError, match="expired"):
        box.join(reg.collab, REVIEWER, "reviewer", ticket=_hash("old"))
    with pytest.raises(IdentityError, match="admits alias reviewer, not other"):
        box.join(reg.collab, OTHER, "other", ticket=_hash("named"))
    with pytest.raises(IdentityError, match="never issued"):
        box.join(reg.collab, OTHER, "other", ticket=_hash("never"))
    assert sorted(box.registry(reg.collab).participants) == ["driver"]  # nothing was written
    with pytest.raises(IdentityError):  # only members issue tickets
        box.invite(reg.collab, OTHER, _hash("x"), for_alias=None, expires_at=time.time() + 60)
    with pytest.raises(Conflict):  # a ticket for an alias someone holds would admit nobody
        box.invite(reg.collab, DRIVER, _hash("y"), for_alias="driver", expires_at=time.time() + 60)


def test_the_policy_is_the_openers_and_a_member_comes_back_without_a_ticket(box) -> None:
    reg = box.open(DRIVER, "driver", "review", "t")
    assert reg.policy == kinds.OPEN_POLICY
    box.join(reg.collab, REVIEWER, "reviewer")
    with pytest.raises(IdentityError, match="opener"):
        box.set_policy(reg.collab, REVIEWER, kinds.INVITE_ONLY)
    assert box.set_policy(reg.collab, DRIVER, kinds.INVITE_ONLY).policy == kinds.INVITE_ONLY
    box.leave(reg.collab, REVIEWER)
    box.join(reg.collab, REVIEWER, "reviewer")  # admitted before: its own alias again
    with pytest.raises(IdentityError):
        box.join(reg.collab, OTHER, "other")
    human = Pin("human", "alice")
    box.invite(reg.collab, REVIEWER, _hash("h"), for_alias="alice", expires_at=time.time() + 60)
    box.join(reg.collab, human, "alice", ticket=_hash("h"))  # any member may admit a person
    box.set_policy(reg.collab, human, kinds.OPEN_POLICY)  # a human: member may change the policy
    box.join(reg.collab, OTHER, "other")


# ---- through the CLI ---------------------------------------------------------------------------------------


def _events(root: Path, cid: str) -> int:
    return len((root / "collabs" / cid / "collab.jsonl").read_text().splitlines())


def test_the_cli_refuses_writes_nothing_and_admits_once(tmp_path: Path) -> None:
    root = tmp_path / "state"
    code, doc, err = run_json("open", "--self", str(DRIVER), "--alias", "driver", "--label", "l", "--task", "t",
                              "--invite-only", root=root)
    assert code == 0, err
    cid = doc["result"]["collab"]
    assert doc["result"]["policy"] == "invite-only"
    before = _events(root, cid)
    code, out, err = run("join", "--collab", cid, "--self", str(REVIEWER), "--alias", "reviewer", root=root)
    assert code == 9 and out == "" and err.count("\n") == 1 and "invite-only" in err
    assert _events(root, cid) == before
    code, doc, err = run_json("invite", "--collab", cid, "--self", str(DRIVER), "--expires-in", "10m", root=root)
    assert code == 0, err
    ticket = doc["result"]["ticket"]
    assert ticket.startswith("amt-") and ticket not in (root / "collabs" / cid / "collab.jsonl").read_text()
    code, out, err = run("join", "--collab", cid, "--self", str(REVIEWER), "--alias", "reviewer", "--ticket", ticket,
                         root=root)
    assert code == 0, err
    code, out, err = run("join", "--collab", cid, "--self", str(OTHER), "--alias", "other", "--ticket", ticket,
                         root=root)
    assert code == 9 and "used already" in err
    code, out, err = run("join", "--collab", cid, "--self", str(OTHER), "--alias", "other", "--ticket", "amt-bad",
                         root=root)
    assert code == 2 and "not a ticket" in err
    code, doc, err = run_json("invite", "--collab", cid, "--self", str(DRIVER), "--expires-in", "1s", root=root)
    time.sleep(1.2)
    code, out, err = run("join", "--collab", cid, "--self", str(OTHER), "--alias", "other", root=root,
                         env={"AGENTMSG_TICKET": doc["result"]["ticket"]})  # a spawned session's, from its env
    assert code == 9 and "expired" in err
    code, doc, err = run_json("status", "--collab", cid, "--self", str(DRIVER), root=root)
    assert doc["result"]["policy"] == "invite-only"
    code, out, err = run("log", "show", "--collab", cid, root=root)
    assert code == 0 and "issued a one-time ticket" in out
    code, doc, err = run_json("policy", "open", "--collab", cid, "--self", str(DRIVER), root=root)
    assert code == 0 and doc["result"]["policy"] == "open"
    code, out, err = run("join", "--collab", cid, "--self", str(OTHER), "--alias", "other", root=root)
    assert code == 0, err
    assert json.loads((root / "collabs" / cid / "collab.jsonl").read_text().splitlines()[-1])["type"] == "joined"
