"""Typed handoffs over every backend (file, memory, PostgreSQL): a gate opens, times out when its time has
passed, and is closed by its human; a result ties to its task; nothing is stored for a refused answer."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from agentmsg.domain import validate
from agentmsg.domain.values import Draft
from agentmsg.errors import Conflict, IdentityError
from agentmsg.service import handoffs
from agentmsg.service.context import Ctx
from agentmsg.service.messaging import Mailbox
from tests.support.pins import CAROL_PIN, DRIVER_PIN, REVIEWER_PIN


def typed(type_: str, payload: dict[str, Any], to: str = "", reply_to: str | None = None) -> Draft:
    handoff, _n = handoffs.prepare({"type": type_, "payload": payload}, attach=(), cwd="/", redact=False)
    return Draft(to=to, handoff=handoff, reply_to=reply_to)


@pytest.fixture
def world(port: Any, tmp_path: Path) -> tuple[Ctx, Mailbox, str]:
    box = Mailbox(port)
    driver, reviewer, carol = (validate.pin(p) for p in (DRIVER_PIN, REVIEWER_PIN, CAROL_PIN))
    reg = box.open(driver, "driver", "l", "t")
    box.join(reg.collab, reviewer, "reviewer")
    box.join(reg.collab, carol, "carol")
    return Ctx(tmp_path / "state", "flag", {}, port), box, reg.collab


def test_a_gate_times_out_and_its_human_closes_it(world: tuple[Ctx, Mailbox, str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, box, cid = world
    driver, reviewer, carol = (validate.pin(p) for p in (DRIVER_PIN, REVIEWER_PIN, CAROL_PIN))
    gate = {"gate_id": "G-1", "required_action": "APPROVE", "question": "ship?", "timeout_minutes": 10,
            "approver": "human"}
    (sent,) = box.send(cid, driver, typed("gate_request", gate, "carol"))
    gid = sent.message.id
    assert sent.message.kind == "request" and sent.message.handoff["thread"] == gid  # type: ignore[index]

    def states(at: float, open_only: bool = False) -> list[str]:
        monkeypatch.setattr(handoffs.time, "time", lambda: at)
        return [g["state"] for g in handoffs.gates(ctx, collab=cid, self_flag=None, open_only=open_only)["gates"]]

    start = handoffs._epoch(sent.message.ts)
    assert states(start + 599) == ["open"]
    assert states(start + 600) == ["timed out"]
    assert states(start + 600, open_only=True) == ["timed out"]
    response = {"gate_id": "G-1", "decision": "ABORT", "evidence": "not today"}
    with pytest.raises(IdentityError):  # not its addressee
        box.send(cid, reviewer, typed("gate_response", response, reply_to=gid))
    (closed,) = box.send(cid, carol, typed("gate_response", response, reply_to=gid))
    assert closed.message.to == "driver" and closed.message.handoff["correlation_id"] == gid  # type: ignore[index]
    with pytest.raises(Conflict, match="is closed"):
        box.send(cid, carol, typed("gate_response", response, reply_to=gid))
    assert states(time.time()) == ["aborted"] and states(time.time(), open_only=True) == []
    assert len([m for m in ctx.store.history(cid, "driver") if m.handoff]) == 1  # nothing more was stored


def test_a_result_ties_to_its_task_on_every_backend(world: tuple[Ctx, Mailbox, str]) -> None:
    ctx, box, cid = world
    driver, reviewer = validate.pin(DRIVER_PIN), validate.pin(REVIEWER_PIN)
    (task,) = box.send(cid, driver, typed("task", {"task_id": "T-1", "task_text": "go"}, "reviewer"))
    with pytest.raises(Conflict, match="nothing open to answer"):
        box.send(cid, reviewer, typed("result", {"task_id": "T-1", "status": "DONE"},
                                      reply_to="00000000-0000-4000-8000-000000000000"))
    (res,) = box.send(cid, reviewer, typed("result", {"task_id": "T-1", "status": "BLOCKED", "blockers": ["x"]},
                                           reply_to=task.message.id))
    (again,) = box.send(cid, reviewer, typed("result", {"task_id": "T-1", "status": "DONE"},
                                             reply_to=task.message.id))
    got = handoffs.listing(ctx, collab=cid, self_flag=None, cwd="/")["tasks"]
    assert [(t["id"], [r["payload"]["status"] for r in t["results"]]) for t in got] == [
        (task.message.id, ["BLOCKED", "DONE"])]
    assert {res.message.handoff["thread"], again.message.handoff["thread"]} == {task.message.id}  # type: ignore[index]
