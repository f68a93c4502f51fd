"""A spawned session's SessionStart hook binds it with the one-time ticket in its environment (hooks/ticket.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli_helpers import run_json
from tests.support.helpers_hooks import REVIEWER_SESSION, log_lines, run_hook

LEAD = "human:lead"


def _cli(root: Path, *args: str) -> dict:
    _code, doc, _err = run_json(*args, root=root)
    assert doc["ok"], doc
    return dict(doc["result"])


def _start(tmp: Path, root: Path, env: dict[str, str], session: str = REVIEWER_SESSION, source: str = "startup"):
    return run_hook("claude", "SessionStart", tmp, root, session, extra_env=env, source=source)


def test_the_ticket_binds_the_session_once_and_the_identity_line_follows(tmp_path: Path) -> None:
    root = tmp_path / "root"
    cid = _cli(root, "open", "--self", LEAD, "--alias", "lead", "--label", "l", "--task", "t",
               "--invite-only")["collab"]
    ticket = _cli(root, "invite", "--collab", cid, "--self", LEAD, "--alias", "rev")["ticket"]
    env = {"AGENTMSG_TICKET": ticket, "AGENTMSG_TICKET_COLLAB": cid}
    out = _start(tmp_path, root, env)
    assert out.returncode == 0 and "participant rev" in out.text, (out.stdout, log_lines(root))
    reg = _cli(root, "registry", "--collab", cid)
    assert reg["participants"]["rev"]["pin"] == f"claude-code:{REVIEWER_SESSION}" and reg["tickets"] == {}
    again = _start(tmp_path, root, env, source="resume")  # the same session again: already bound, nothing new
    assert "participant rev" in again.text
    events = (root / "collabs" / cid / "collab.jsonl").read_text().splitlines()
    assert sum(json.loads(e)["type"] == "joined" for e in events) == 1
    other = _start(tmp_path / "o", root, env, session="7777c0de-1111-4222-8333-944455556666")  # used: admits nobody
    assert "participant" not in other.stdout
    assert "rev" in _cli(root, "registry", "--collab", cid)["participants"]
    assert len((root / "collabs" / cid / "collab.jsonl").read_text().splitlines()) == len(events)


def test_a_ticket_never_issued_here_binds_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    cid = _cli(root, "open", "--self", LEAD, "--alias", "lead", "--label", "l", "--task", "t")["collab"]
    out = _start(tmp_path, root, {"AGENTMSG_TICKET": "amt-" + "x" * 32, "AGENTMSG_TICKET_COLLAB": cid})
    assert out.returncode == 0 and "participant" not in out.stdout
    assert set(_cli(root, "registry", "--collab", cid)["participants"]) == {"lead"}


def test_a_resumed_session_with_a_new_id_takes_its_alias_over_with_reason_resume(tmp_path: Path) -> None:
    import time

    from agentmsg.backends.file.store import FileStore
    from agentmsg.domain import rules
    from agentmsg.domain.values import Pin
    from agentmsg.service.commands import ticket_hash

    root = tmp_path / "root"
    cid = _cli(root, "open", "--self", LEAD, "--alias", "lead", "--label", "l", "--task", "t")["collab"]
    _cli(root, "join", "--collab", cid, "--self", f"claude-code:{REVIEWER_SESSION}", "--alias", "rev")
    ticket = "amt-" + "r" * 32
    with FileStore(root).transaction(cid) as tx:
        tx.append_event(rules.resume_ticket_event(tx.registry(), Pin("human", "lead"), "rev", ticket_hash(ticket),
                                                  expires_at=time.time() + 60))
    env = {"AGENTMSG_TICKET": ticket, "AGENTMSG_TICKET_COLLAB": cid}
    same = _start(tmp_path, root, env, source="resume")  # the host kept the id: nothing moves
    assert "participant rev" in same.text
    new = "8888c0de-1111-4222-8333-944455556666"
    out = _start(tmp_path / "n", root, env, session=new, source="resume")
    assert "participant rev" in out.text, (out.stdout, log_lines(root))
    events = [json.loads(e) for e in (root / "collabs" / cid / "collab.jsonl").read_text().splitlines()]
    moved = [e for e in events if e["type"] == "succeeded"]
    assert [(e["pin"], e["old_pin"], e["reason"]) for e in moved] == [
        (f"claude-code:{new}", f"claude-code:{REVIEWER_SESSION}", "resume")]
    assert _cli(root, "registry", "--collab", cid)["tickets"] == {}
