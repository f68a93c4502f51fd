"""Identity and lifecycle rules (trust round two, class 3), on both backends.

Takeovers across runtimes, and of a human's alias, need the displaced
pin's consent (``handover``) or a human; a displaced opener cannot close;
leaving and rejoining, or succeeding yourself, keeps the binding; a stale
``AGENTMSG_COLLAB`` never routes a send.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmsg.domain.validate import pin
from agentmsg.domain.values import Draft
from agentmsg.errors import Conflict, IdentityError, UsageError
from agentmsg.ports import Store
from agentmsg.service.messaging import Mailbox
from tests.support.cli_helpers import run_json

OPENER = pin("codex:i-opener")
HUMAN = pin("human:alice")
CLAUDE = pin("claude-code:i-claude")
CODEX2 = pin("codex:i-codex-two")
STRANGER = pin("claude-code:i-stranger")


@pytest.fixture
def cid(box: Mailbox) -> str:
    reg = box.open(OPENER, "driver", "rules", "identity rules")
    box.join(reg.collab, HUMAN, "alice")
    box.join(reg.collab, CLAUDE, "reviewer")
    return reg.collab


def test_an_agent_cannot_take_over_a_humans_alias(box: Mailbox, port: Store, cid: str) -> None:
    mail = box.send(cid, OPENER, Draft(to="alice", subject="private", body="for alice"))[0].message
    with pytest.raises(IdentityError, match="a human's alias needs its holder's consent"):
        box.join(cid, STRANGER, "alice", succeeds=HUMAN, reason="let me read her mail")
    assert port.registry(cid).holder("alice") == str(HUMAN)
    with pytest.raises(IdentityError):
        box.ack(cid, STRANGER, [mail.id])


def test_a_takeover_across_runtimes_needs_a_handover(box: Mailbox, port: Store, cid: str) -> None:
    with pytest.raises(IdentityError, match="held by a claude-code session"):
        box.join(cid, CODEX2, "reviewer", succeeds=CLAUDE, reason="switching hosts")
    with pytest.raises(IdentityError):  # only the holder (or a human) may hand an alias over
        box.handover(cid, OPENER, CODEX2, alias="reviewer")
    box.handover(cid, CLAUDE, CODEX2)
    box.join(cid, CODEX2, "reviewer", succeeds=CLAUDE, reason="switching hosts")
    assert port.registry(cid).holder("reviewer") == str(CODEX2)
    assert port.bindings(str(CODEX2)) == [(cid, "reviewer")] and port.bindings(str(CLAUDE)) == []
    assert port.registry(cid).handovers == {}  # consumed


def test_a_human_may_take_over_and_same_runtime_succession_still_works(box: Mailbox, port: Store, cid: str) -> None:
    box.join(cid, pin("human:bob"), "reviewer", succeeds=CLAUDE, reason="the session died; I take over")
    assert port.registry(cid).holder("reviewer") == "human:bob"
    restarted = pin("codex:i-opener-restarted")
    box.join(cid, restarted, "driver", succeeds=OPENER, reason="codex restarted")
    assert port.registry(cid).holder("driver") == str(restarted)


def test_a_displaced_opener_cannot_close(box: Mailbox, port: Store, cid: str) -> None:
    restarted = pin("codex:i-opener-restarted")
    box.join(cid, restarted, "driver", succeeds=OPENER, reason="codex restarted")
    with pytest.raises(IdentityError):
        box.close(cid, OPENER)
    with pytest.raises(IdentityError):
        box.close(cid, CLAUDE)
    box.close(cid, restarted)
    assert port.registry(cid).closed


def test_leave_then_rejoin_and_self_succession_keep_the_binding(box: Mailbox, port: Store, cid: str) -> None:
    box.leave(cid, CLAUDE)
    assert port.bindings(str(CLAUDE)) == []
    box.join(cid, CLAUDE, "reviewer")
    assert port.bindings(str(CLAUDE)) == [(cid, "reviewer")]
    box.join(cid, CLAUDE, "reviewer", succeeds=CLAUDE, reason="same session")
    assert port.bindings(str(CLAUDE)) == [(cid, "reviewer")]
    box.leave(cid, CLAUDE)
    box.join(cid, CLAUDE, "reviewer", succeeds=CLAUDE, reason="back again")
    assert port.bindings(str(CLAUDE)) == [(cid, "reviewer")] and port.registry(cid).holder("reviewer") == str(CLAUDE)
    with pytest.raises(Conflict):  # someone else's former alias is a takeover, not a join
        box.join(cid, STRANGER, "alice")


def test_a_takeover_needs_a_reason(box: Mailbox, cid: str) -> None:
    with pytest.raises(UsageError):
        box.join(cid, pin("codex:i-x"), "driver", succeeds=OPENER, reason=None)


def test_a_stale_agentmsg_collab_never_routes_a_send(tmp_path: Path) -> None:
    root = tmp_path / "state"
    first = run_json("open", "--self", "human:h", "--alias", "h", "--label", "a", "--task", "t", root=root)[1]
    second = run_json("open", "--self", "human:h2", "--alias", "h2", "--label", "b", "--task", "t", root=root)[1]
    c1, c2 = first["result"]["collab"], second["result"]["collab"]
    me = "claude-code:i-session"
    env = {"CLAUDE_CODE_SESSION_ID": "i-session", "AGENTMSG_COLLAB": c1}
    assert run_json("join", "--alias", "me", root=root, env=env)[0] == 0  # joins c1, the exported one
    assert run_json("join", "--collab", c2, "--alias", "me", root=root, env=env)[0] == 0
    # bound in both now: the exported variable does not choose for a send, as the CLI alone would not
    code, doc, _err = run_json("send", "--to", "h", "--body", "x", root=root, env=env)
    assert code == 2 and "AGENTMSG_COLLAB may be stale" in doc["error"]["message"], doc
    del env["AGENTMSG_COLLAB"]
    code, doc, _err = run_json("send", "--to", "h", "--body", "x", root=root, env=env)
    assert code == 2 and "bound in 2 collaborations" in doc["error"]["message"]
    code, doc, _err = run_json("send", "--collab", c2, "--to", "h2", "--body", "x", root=root, env=env)
    assert code == 0 and doc["result"]["collab"] == c2
    assert run_json("leave", "--collab", c2, root=root, env=env)[0] == 0
    env["AGENTMSG_COLLAB"] = c2  # bound only in c1 now: a variable naming another one is refused
    code, doc, _err = run_json("send", "--to", "h", "--body", "x", root=root, env=env)
    assert code == 2 and "is not one of" in doc["error"]["message"] and me in doc["error"]["message"]
