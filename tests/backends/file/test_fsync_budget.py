"""A steady-state send costs at most two fsyncs (docs/BENCHMARKS.md, "fsyncs per send"); a prompt hook
that presents messages costs none, while an ack and a Stop block that spends a slot stay durable
(docs/DELIVERY.md, "Presented receipts are not fsynced").

Counted, not timed: every ``os.fsync``/``os.fdatasync`` during one send to one
recipient whose inbox, receipts, index and transcript files already exist, or
during one hook run in-process.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmsg.backends.file.store import FileStore
from agentmsg.domain.values import Draft, Pin
from agentmsg.hooks import core as hooks
from agentmsg.service.messaging import Mailbox

DRIVER = Pin("codex", "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")
REVIEWER = Pin("claude-code", "5418c0de-1111-4222-8333-944455556666")
BUDGET = 2


def _draft(i: int, **kw: str) -> Draft:
    return Draft(to="reviewer", kind="update", priority="normal", subject=f"s{i}", body=f"body {i}", **kw)


@pytest.fixture
def mailbox(tmp_path: Path) -> tuple[Mailbox, str]:
    box = Mailbox(FileStore(tmp_path / "state"))
    collab = box.open(DRIVER, "driver", "bench", "fsync budget").collab
    box.join(collab, REVIEWER, "reviewer")
    for i in range(3):  # create every file and folder a send touches
        box.send(collab, DRIVER, _draft(-i))
    box.inbox(collab, REVIEWER)
    return box, collab


def _count_syncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name, None)
        if real is None:
            continue

        def counted(fd: int, _real=real, _name=name) -> None:  # type: ignore[no-untyped-def]
            calls.append(_name)
            _real(fd)

        monkeypatch.setattr(os, name, counted)
    return calls


def test_a_steady_state_send_costs_at_most_two_fsyncs(mailbox: tuple[Mailbox, str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    box, collab = mailbox
    calls = _count_syncs(monkeypatch)
    (sent,) = box.send(collab, DRIVER, _draft(1))
    assert not sent.already
    assert 1 <= len(calls) <= BUDGET, calls  # at least the record itself is made durable


def test_a_repeated_send_of_the_same_id_writes_nothing_durable(mailbox: tuple[Mailbox, str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    box, collab = mailbox
    mid = "7d0c9c1e-2b4f-4c55-9d2a-0a1b2c3d4e5f"
    box.send(collab, DRIVER, _draft(2, id=mid))
    calls = _count_syncs(monkeypatch)
    (again,) = box.send(collab, DRIVER, _draft(2, id=mid))
    assert again.already
    assert calls == []


def _prompt(root: Path, event: str = "UserPromptSubmit", **fields: object) -> bytes:
    """One Claude hook run in-process, its completion included; returns what it printed."""
    import json

    env = {"AGENTMSG_HOME": str(root), "CLAUDE_CODE_SESSION_ID": REVIEWER.session, "HOME": str(root)}
    raw = json.dumps({"session_id": REVIEWER.session, "hook_event_name": event, "prompt": "go", **fields}).encode()
    out, after = hooks.Hook("claude", env).run(raw)
    after()
    return out


def test_a_prompt_presenting_messages_fsyncs_nothing_but_an_ack_does(mailbox: tuple[Mailbox, str], tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    box, collab = mailbox
    root = tmp_path / "state"
    assert b"quoted below" in _prompt(root)  # the receipts file and the hook state exist from here on
    (sent,) = box.send(collab, DRIVER, _draft(9))
    calls = _count_syncs(monkeypatch)
    out = _prompt(root)
    assert b"s9" in out and calls == []  # presented and completed: derived, a lost one is shown again
    box.ack(collab, REVIEWER, [sent.message.id])
    assert calls  # an ack is never lost


def test_a_stop_block_that_spends_a_slot_stays_durable(mailbox: tuple[Mailbox, str], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from agentmsg.service import delivery

    box, collab = mailbox
    root = tmp_path / "state"
    delivery.enable(box.store, collab, REVIEWER, slots=2)
    box.send(collab, DRIVER, Draft(to="reviewer", kind="request", priority="normal", subject="req", body="b"))
    calls = _count_syncs(monkeypatch)
    out = _prompt(root, "Stop", stop_hook_active=False)
    assert b'"decision"' in out and len(calls) >= 2  # the slot record and the presented receipts
