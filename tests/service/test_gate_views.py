"""A gate's state where it is shown (issue 31), over every backend: ``status``, ``roster``, ``top``'s overview
and the HTML log list a waiting gate as open, then as timed out once its time has passed (the clock moved, not
waited for), and no longer once it is answered; ``top`` folds each message once, as it reads on."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from agentmsg.domain import validate
from agentmsg.domain.envelope import _epoch
from agentmsg.service import commands, handoffs, roster
from agentmsg.service.context import Ctx
from agentmsg.service.messaging import Mailbox
from agentmsg.service.overview import Overview
from agentmsg.text.html import collaboration_html
from tests.service.test_handoffs import typed
from tests.support.pins import CAROL_PIN, DRIVER_PIN


def test_a_waiting_gate_is_open_then_timed_out_then_gone_everywhere(port: Any, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    box = Mailbox(port)
    driver, carol = validate.pin(DRIVER_PIN), validate.pin(CAROL_PIN)
    cid = box.open(driver, "driver", "l", "t").collab
    box.join(cid, carol, "carol")
    ctx = Ctx(tmp_path / "state", "flag", {}, port)
    gate = {"gate_id": "G-2", "required_action": "APPROVE", "question": "ship?", "timeout_minutes": 10}
    (sent,) = box.send(cid, driver, typed("gate_request", gate, "carol"))
    start = _epoch(sent.message.ts)
    view = Overview(port, only=cid)

    def shown(at: float) -> dict[str, list[str]]:
        monkeypatch.setattr(time, "time", lambda: at)
        view.refresh(now=at)
        msgs = [m for a in ("driver", "carol") for m in port.history(cid, a)]
        page = collaboration_html(port.registry(cid), [], msgs, [], {}, now=at)
        head = page.split("<dt>open gates</dt><dd>", 1)[1].split("</dd>", 1)[0]
        return {"status": [g["state"] for g in commands.status(ctx, collab=cid, self_flag=DRIVER_PIN)["open_gates"]],
                "roster": [g["state"] for g in roster.roster(ctx, collab=cid, self_flag=DRIVER_PIN)["open_gates"]],
                "top": [g["state"] for _cid, g in view.gates],
                "html": ["timed out" if "timed out" in head else "open" if "open" in head else head]}

    every = ("status", "roster", "top", "html")
    assert shown(start + 599) == {k: ["open"] for k in every}
    assert shown(start + 600) == {k: ["timed out"] for k in every}
    assert handoffs.open_gates(ctx, cid, start + 600)[0]["expires"] == time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(start + 600))
    # its addressee may still answer a timed-out gate (the seed: wait for the owner); then it is gone
    box.send(cid, carol, typed("gate_response", {"gate_id": "G-2", "decision": "APPROVE"}, reply_to=sent.message.id))
    assert shown(start + 601) == {"status": [], "roster": [], "top": [], "html": ["none"]}
    # top read each inbox once: a second refresh with nothing new folds nothing again
    upto = dict(view._gate_upto)
    view.refresh(now=start + 602)
    assert view._gate_upto == upto and view.gates == []
