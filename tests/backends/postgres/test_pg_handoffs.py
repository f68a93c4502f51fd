"""Typed handoffs on PostgreSQL (issue 31, schema 6): the same CLI flow as the file store, and the server
refusing a handoff a member forges with raw SQL around the client's checks."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from agentmsg.domain import kinds
from tests.adversarial.test_pg_forged_records import insert
from tests.support.cli_helpers import run_json

ORCH, SPEC = "codex:pg-handoff-orch", "claude-code:pg-handoff-spec"


Cli = Callable[..., tuple[int, Any, str]]


def collab(pg_url: str, tmp_path: Path) -> tuple[Cli, str]:
    """The CLI on the PostgreSQL store, and a collaboration of orch and spec."""
    env = {"AGENTMSG_STORE": pg_url}
    root = tmp_path / "state"

    def cli(*args: str) -> tuple[int, Any, str]:
        code, doc, err = run_json(*args, root=root, env=env, cwd=tmp_path)
        return code, doc["result"], err

    code, res, err = cli("open", "--self", ORCH, "--alias", "orch", "--label", "l", "--task", "t")
    assert code == 0, err
    cid = res["collab"]
    assert cli("join", "--collab", cid, "--self", SPEC, "--alias", "spec")[0] == 0
    return cli, cid


def test_typed_handoffs_on_postgres(pg_url: str, tmp_path: Path) -> None:
    cli, cid = collab(pg_url, tmp_path)
    (tmp_path / ".git").mkdir()  # an artifact is a file of a repository (docs/HANDOFFS.md)
    (tmp_path / "art.txt").write_text("v1\n")
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"task_id": "T-1", "task_text": "do it"}))
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({"task_id": "T-1", "status": "DONE"}))
    code, res, err = cli("send", "--collab", cid, "--self", ORCH, "--to", "spec", "--type", "task",
                         "--payload-file", "t.yaml", "--attach", "art.txt")
    assert code == 0, err
    task = res["results"][0]["id"]
    code, res, err = cli("send", "--collab", cid, "--self", SPEC, "--type", "result", "--payload-file", "r.yaml",
                         "--correlation-id", task)
    assert code == 0, err
    code, res, err = cli("task", "show", task, "--collab", cid)
    assert code == 0, err
    assert [r["payload"]["status"] for r in res["task"]["results"]] == ["DONE"]
    assert res["task"]["artifacts"][0]["state"] == "unchanged"
    code, res, err = cli("send", "--collab", cid, "--self", SPEC, "--type", "result", "--payload-file", "r.yaml",
                         "--correlation-id", str(uuid.uuid4()))
    assert code == 5, err

    # Raw SQL as the same member: each forged handoff is refused by the server.
    def forged(**over: Any) -> dict[str, Any]:
        handoff = {"type": "result", "payload": {"task_id": "T-1", "status": "DONE"}, "thread": task,
                   "correlation_id": task, **(over.pop("handoff", None) or {})}
        return {"type": kinds.MESSAGE, "id": str(uuid.uuid4()), "collab": cid, "sender": "spec", "sender_pin": SPEC,
                "sender_runtime": "claude-code", "to": "orch", "kind": "update", "priority": "normal",
                "subject": "s", "body": "b", "reply_to": f"spec/{task}", "broadcast": None, "digest": "0" * 64,
                "handoff": handoff, **over}

    cases = {
        "not an object": forged(handoff=None) | {"handoff": "task"},
        "unknown type": forged(handoff={"type": "memo"}),
        "no payload": forged(handoff={"payload": None}),
        "a task that is an update": forged(handoff={"type": "task", "correlation_id": None}, reply_to=None),
        "a result answering nothing": forged(handoff={"correlation_id": None}, reply_to=None),
        "a result whose correlation is not its reply": forged(reply_to=f"spec/{uuid.uuid4()}"),
        "a result answering a result": forged(handoff={"correlation_id": res_id(pg_url, cid)},
                                              reply_to=f"orch/{res_id(pg_url, cid)}"),
    }
    for name, fields in cases.items():
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="record refused"):
            insert(pg_url, cid, "inbox/orch", fields)
            pytest.fail(name)
    insert(pg_url, cid, "inbox/orch", forged())  # the well-formed one is stored: the refusals were the rules


def res_id(url: str, cid: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT mid FROM agentmsg_records WHERE collab = %s AND stream = 'inbox/orch' "
                           "ORDER BY seq LIMIT 1", (cid,)).fetchone()
    assert row is not None
    return str(row[0])


def test_threads_on_postgres_and_the_server_refuses_a_forged_one(pg_url: str, tmp_path: Path) -> None:
    """Schema 9: a thread is one line, and a reply is in its parent's thread, whoever writes the row."""
    cli, cid = collab(pg_url, tmp_path)
    code, res, err = cli("send", "--collab", cid, "--self", ORCH, "--to", "spec", "--subject", "plan", "--body", "b",
                         "--thread", "retry")
    assert code == 0, err
    first = res["results"][0]["id"]
    code, res, err = cli("send", "--collab", cid, "--self", SPEC, "--reply-to", first, "--subject", "ok", "--body", "b")
    assert code == 0, err
    code, res, err = cli("inbox", "--collab", cid, "--self", ORCH, "--thread", "retry")
    assert [m["subject"] for m in res["messages"]] == ["ok"]

    def forged(**over: Any) -> dict[str, Any]:
        return {"type": kinds.MESSAGE, "id": str(uuid.uuid4()), "collab": cid, "sender": "spec", "sender_pin": SPEC,
                "sender_runtime": "claude-code", "to": "orch", "kind": "update", "priority": "normal",
                "subject": "s", "body": "b", "reply_to": f"orch/{first}", "broadcast": None, "digest": "0" * 64,
                "thread": "retry", **over}

    for name, fields in {"a control character": forged(thread="re\ntry", reply_to=None),
                         "a blank thread": forged(thread="  ", reply_to=None),
                         "a thread too long": forged(thread="x" * 129, reply_to=None),
                         "a reply that leaves its parent's thread": forged(thread="elsewhere"),
                         "a reply with no thread of its parent's": forged(thread=str(uuid.uuid4()))}.items():
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="record refused"):
            insert(pg_url, cid, "inbox/orch", fields)
            pytest.fail(name)
    insert(pg_url, cid, "inbox/orch", forged())  # the well-formed reply is stored: the refusals were the rules
    insert(pg_url, cid, "inbox/orch", forged(thread=None, reply_to=None))  # a record from before threads
