"""One contract for every storage backend: the same behaviour through the service, file or memory.

Each test runs once per backend (the ``port`` fixture).  A new backend
(PostgreSQL) is done when this file passes against it.  The rules live in
``agentmsg.domain.rules``; these tests check that a backend stores and
loads faithfully enough for those rules to hold: gap-free sequences,
idempotent ids, acks only by the exact recipient, a page of the backlog
with the right counts, receipts, notes, delivery records, waiting.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from agentmsg.domain import kinds
from agentmsg.domain.validate import pin
from agentmsg.domain.values import Draft
from agentmsg.errors import Closed, Conflict, IdentityError, NotFound, UnknownAgent
from agentmsg.ports import Store
from agentmsg.service.messaging import Mailbox

DRIVER, REVIEWER, CAROL = pin("codex:c-driver"), pin("claude-code:c-reviewer"), pin("human:carol")


@pytest.fixture
def cid(box: Mailbox) -> str:
    reg = box.open(DRIVER, "driver", "contract", "the backend contract")
    box.join(reg.collab, REVIEWER, "reviewer")
    box.join(reg.collab, CAROL, "carol")
    return reg.collab


def send(box: Mailbox, cid: str, who: object = DRIVER, to: str = "reviewer", body: str = "b", **kw: str) -> str:
    (sent,) = box.send(cid, who, Draft(to=to, subject=kw.pop("subject", "s"), body=body, **kw))  # type: ignore[arg-type]
    return sent.message.id


def test_registry_and_bindings(box: Mailbox, port: Store, cid: str) -> None:
    reg = port.registry(cid)
    assert sorted(reg.active()) == ["carol", "driver", "reviewer"] and reg.opener_alias == "driver"
    assert port.bindings(str(REVIEWER)) == [(cid, "reviewer")]
    assert [e["type"] for e in port.events(cid)] == ["opened", "joined", "joined"]
    assert port.collabs() == [cid]
    box.leave(cid, CAROL)
    assert port.bindings(str(CAROL)) == [] and not port.registry(cid).participants["carol"].active
    box.join(cid, CAROL, "carol")  # the same pin takes its own alias back
    assert port.bindings(str(CAROL)) == [(cid, "carol")]


def test_sequences_are_gap_free_per_inbox(box: Mailbox, port: Store, cid: str) -> None:
    ids = [send(box, cid, body=f"m{i}") for i in range(5)]
    send(box, cid, to="carol")
    assert [m.seq for m in port.history(cid, "reviewer")] == [1, 2, 3, 4, 5]
    assert [m.id for m in port.history(cid, "reviewer")] == ids
    assert port.last_seq(cid, "reviewer") == 5 and port.last_seq(cid, "carol") == 1
    assert [m.seq for m in port.since(cid, "reviewer", 3)] == [4, 5]


def test_concurrent_senders_never_interleave(box: Mailbox, port: Store, cid: str) -> None:
    def worker(who: object, n: int) -> None:
        for i in range(n):
            send(Mailbox(port), cid, who=who, body=f"{who}#{i}")

    threads = [threading.Thread(target=worker, args=(w, 15)) for w in (DRIVER, CAROL)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    msgs = list(port.history(cid, "reviewer"))
    assert [m.seq for m in msgs] == list(range(1, 31))
    for who in (DRIVER, CAROL):
        assert [m.body for m in msgs if m.body.startswith(str(who))] == [f"{who}#{i}" for i in range(15)]


def test_idempotent_ids_and_conflicts(box: Mailbox, port: Store, cid: str) -> None:
    mid = str(uuid.uuid4())
    first = box.send(cid, DRIVER, Draft(to="reviewer", subject="s", body="b", id=mid))
    again = box.send(cid, DRIVER, Draft(to="reviewer", subject="s", body="b", id=mid))
    assert not first[0].already and again[0].already and again[0].message == first[0].message
    with pytest.raises(Conflict):
        box.send(cid, DRIVER, Draft(to="reviewer", subject="s", body="other", id=mid))
    assert port.last_seq(cid, "reviewer") == 1


def test_broadcast_copies_and_replay(box: Mailbox, port: Store, cid: str) -> None:
    base = str(uuid.uuid4())
    sent = box.send(cid, DRIVER, Draft(to="all", subject="s", body="to all", id=base))
    assert sorted(s.message.to for s in sent) == ["carol", "reviewer"]
    assert len({s.message.id for s in sent}) == 2 and all(s.message.broadcast == base for s in sent)
    box.leave(cid, CAROL)
    replay = box.send(cid, DRIVER, Draft(to="all", subject="s", body="to all", id=base))
    assert sorted(s.message.to for s in replay) == ["carol", "reviewer"] and all(s.already for s in replay)
    with pytest.raises(Conflict):
        box.send(cid, DRIVER, Draft(to="reviewer", subject="s", body="to all", id=base))


def test_unknown_recipient_stores_nothing(box: Mailbox, port: Store, cid: str) -> None:
    with pytest.raises(UnknownAgent):
        send(box, cid, to="bob")
    assert port.last_seq(cid, "reviewer") == 0


def test_acks_only_by_the_exact_recipient(box: Mailbox, port: Store, cid: str) -> None:
    mid = send(box, cid)
    with pytest.raises(IdentityError):
        box.ack(cid, CAROL, [mid])
    ((_, rec, already),) = box.ack(cid, REVIEWER, [mid])
    assert not already and rec["type"] == kinds.ACK
    ((_, rec2, already2),) = box.ack(cid, REVIEWER, [mid])
    assert already2 and rec2 == rec
    with pytest.raises(NotFound):
        box.ack(cid, REVIEWER, [str(uuid.uuid4())])
    assert box.state(box.message(cid, mid)).label == "acknowledged"


def test_a_page_of_the_backlog_and_its_counts(box: Mailbox, port: Store, cid: str) -> None:
    ids = [send(box, cid, body=f"m{i}", kind="request" if i % 3 == 0 else "update",
                priority="high" if i in (7, 9) else "normal") for i in range(12)]
    box.ack(cid, REVIEWER, [ids[0], ids[5]])
    page = port.unacked(cid, "reviewer", limit=4)
    assert page.total == 10 and page.high == 2 and page.requests == 3  # requests 3, 6, 9 (0 is acked)
    assert [m.id for m in page.messages] == [ids[7], ids[9], ids[1], ids[2]]  # high first, then oldest
    by_age = port.unacked(cid, "reviewer", limit=3, priority_first=False)
    assert [m.id for m in by_age.messages] == [ids[1], ids[2], ids[3]]
    skipped = port.unacked(cid, "reviewer", limit=2, skip={8, 10})
    assert [m.id for m in skipped.messages] == [ids[1], ids[2]] and skipped.skipped == 2
    reqs = port.unacked(cid, "reviewer", limit=10, requests_only=True)
    assert [m.id for m in reqs.messages] == [ids[9], ids[3], ids[6]] and reqs.total == 3


def test_receipts_and_states(box: Mailbox, port: Store, cid: str) -> None:
    mid = send(box, cid)
    msg = box.message(cid, mid)
    with port.transaction(cid) as tx:
        tx.append_receipts("reviewer", [{"type": kinds.PRESENTED, "message": mid, "attempt": "a1", "host": "x"}])
    state = box.state(msg)
    assert state.label == "presented" and [p["attempt"] for p in state.presented] == ["a1"]
    (reply,) = box.send(cid, REVIEWER, Draft(reply_to=f"reviewer/{mid}", subject="re", body="ok"))
    assert reply.message.to == "driver" and reply.message.reply_to == f"reviewer/{mid}"
    assert box.state(msg).replied == [reply.message.id]
    assert [r["type"] for r in port.receipts(cid, "reviewer")] == [kinds.PRESENTED, kinds.REPLIED]
    with port.transaction(cid) as tx:
        recs, pos = tx.receipts_since("reviewer", 0)
        assert len(recs) == 2 and tx.receipts_since("reviewer", pos) == ([], pos)


def test_log_notes_delivery_records_and_close(box: Mailbox, port: Store, cid: str) -> None:
    note = box.log_append(cid, CAROL, "a note")
    assert [n["text"] for n in port.notes(cid)] == ["a note"] and note["author"] == "carol"
    with port.transaction(cid) as tx:
        tx.append_delivery({"type": kinds.ENABLED, "envelope": "e1", "alias": "reviewer", "pin": str(REVIEWER),
                            "expires_at": 1, "slots": 1})
    assert [r["envelope"] for r in port.delivery_records(cid)] == ["e1"]
    pending = send(box, cid)
    with pytest.raises(IdentityError):
        box.close(cid, REVIEWER)
    assert box.close(cid, DRIVER) == {"reviewer": [pending]}
    assert port.registry(cid).closed and port.bindings(str(REVIEWER)) == []
    with pytest.raises(Closed):
        send(box, cid)


def test_wait_wakes_on_a_new_message(box: Mailbox, port: Store, cid: str) -> None:
    assert port.wait(cid, "reviewer", 0, 0.05, poll=0.01) is False
    timer = threading.Timer(0.2, lambda: send(Mailbox(port), cid))
    timer.start()
    t0 = time.monotonic()
    try:
        assert port.wait(cid, "reviewer", 0, 10.0, poll=0.02) is True
    finally:
        timer.join()
    assert time.monotonic() - t0 < 9.0


def test_verify_is_clean_and_find_message(box: Mailbox, port: Store, cid: str) -> None:
    mid = send(box, cid)
    assert port.find_message(mid) is not None and port.find_message(str(uuid.uuid4())) is None
    _files, findings = port.verify(None)
    assert [f for f in findings if f["tampering"]] == []
    assert isinstance(port.rebuild(cid), list)


# ---- the rest of the port: every read a front end or the hooks make, on every backend -----------------


def test_a_transactions_reads_of_one_inbox(box: Mailbox, port: Store, cid: str) -> None:
    ids = [send(box, cid, subject=f"s{i}") for i in range(3)]
    box.ack(cid, REVIEWER, [ids[1]])
    with port.transaction(cid) as tx:
        assert tx.total("reviewer") == 3 and tx.total("carol") == 0
        assert sorted(tx.unacked_ids("reviewer")) == sorted([ids[0], ids[2]])
        first, second = tx.message(ids[0]), tx.message(ids[1])
        assert first is not None and second is not None
        assert tx.acked("reviewer", first) is None
        ack = tx.acked("reviewer", second)
        assert ack is not None and ack["type"] == kinds.ACK and ack["message"] == ids[1]
        in_txn = [r["type"] for r in tx.message_receipts(second)]
        assert kinds.ACK in in_txn
        assert [m.id for m in tx.since("reviewer", 1)] == ids[1:]
    assert [r["type"] for r in port.message_receipts(cid, second)] == in_txn  # the same, from the store


def test_how_an_id_was_first_used(box: Mailbox, port: Store, cid: str) -> None:
    direct = send(box, cid)
    base = str(uuid.uuid4())
    box.send(cid, DRIVER, Draft(to="all", subject="to all", body="b", id=base))
    with port.transaction(cid) as tx:
        assert tx.broadcast(direct) == (False, [])
        assert tx.broadcast(str(uuid.uuid4())) == (None, [])
        used, recipients = tx.broadcast(base)
    assert used is True and sorted(recipients) == ["carol", "reviewer"]


def test_search_finds_what_was_stored_and_only_that(box: Mailbox, port: Store, cid: str) -> None:
    from agentmsg.domain.search import Query

    send(box, cid, subject="retry budget", body="the exponential backoff needs a cap")
    send(box, cid, subject="lunch", body="nothing to see")
    found = port.search(Query("backoff", collab=cid))
    assert [h.message.subject for h in found.hits if h.message is not None] == ["retry budget"]
    assert port.search(Query("zebra", collab=cid)).hits == []


def test_a_store_describes_itself_and_cleans_nothing_it_does_not_own(box: Mailbox, port: Store, cid: str) -> None:
    described = port.describe()
    assert described["store"] in ("file", "memory", "postgresql") and "location" in described
    assert port.clean_temp(0.0) >= 0
    assert cid in port.collabs()
