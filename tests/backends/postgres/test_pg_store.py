"""PostgreSQL-only behaviour the contract suite does not cover: replication reads, NOTIFY, append-only history.

Records must come back exactly as sealed (a mirror copies them verbatim and
``verify`` rechecks the same chains), ``wait_any`` must wake on NOTIFY
rather than by polling, and no role, not even the owner, may rewrite history.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from agentmsg import records
from agentmsg.backends.chains import chain_findings
from agentmsg.backends.postgres.store import PgStore
from agentmsg.domain import kinds
from agentmsg.domain.validate import pin
from agentmsg.domain.values import Draft
from agentmsg.service.messaging import Mailbox

DRIVER, REVIEWER = pin("codex:r-driver"), pin("claude-code:r-reviewer")


@pytest.fixture
def pg(pg_url: str):
    store = PgStore(pg_url)
    yield store
    store.close()


def _collab(box: Mailbox) -> str:
    cid = box.open(DRIVER, "driver", "replica", "t").collab
    box.join(cid, REVIEWER, "reviewer")
    return cid


def test_streams_and_records_since_hand_back_sealed_records(pg: PgStore, pg_url: str) -> None:
    box = Mailbox(pg)
    cid = _collab(box)
    ids = [box.send(cid, DRIVER, Draft(to="reviewer", subject="s", body=f"m{i}"))[0].message.id for i in range(5)]
    box.ack(cid, REVIEWER, ids[:2])
    box.log_append(cid, DRIVER, "a note")
    assert pg.streams(cid) == {"events": 2, "inbox/reviewer": 5, "notes": 1, "receipts/reviewer": 2}
    page = pg.records_since(cid, "inbox/reviewer", 1, limit=3)
    assert [r["seq"] for r in page] == [2, 3, 4] and [r["id"] for r in page] == ids[1:4]
    every = pg.records_since(cid, "inbox/reviewer", 0)
    assert chain_findings("x", every) == []
    acks = pg.records_since(cid, "receipts/reviewer", 0)
    assert [r["ackn"] for r in acks] == [1, 2] and all(r["type"] == kinds.ACK for r in acks)
    # cseq is one order across events, messages and notes
    order = sorted(r["cseq"] for s in ("events", "inbox/reviewer", "notes") for r in pg.records_since(cid, s, 0))
    assert order == list(range(1, 9))
    # what the server holds is byte for byte what the file store would write on a line
    with psycopg.connect(pg_url) as conn:
        body = conn.execute("SELECT body FROM agentmsg_records WHERE collab = %s AND stream = 'inbox/reviewer' "
                            "AND seq = 1", (cid,)).fetchone()
    assert body is not None and records.encode(every[0]) == body[0].encode() + b"\n"


def test_wait_any_wakes_on_notify(pg: PgStore) -> None:
    box = Mailbox(pg)
    cid = _collab(box)
    assert pg.wait_any([cid], 0.05) is False
    timer = threading.Timer(0.3, lambda: Mailbox(PgStore(pg.url)).send(cid, DRIVER, Draft(to="reviewer", body="x")))
    timer.start()
    t0 = time.monotonic()
    try:
        assert pg.wait_any([cid], 20.0) is True
    finally:
        timer.join()
    assert time.monotonic() - t0 < 15.0


@pytest.mark.parametrize("statement", [
    "UPDATE agentmsg_records SET body = body || ' '",
    "DELETE FROM agentmsg_records",
    "TRUNCATE agentmsg_records CASCADE",
])
def test_history_is_append_only_even_for_the_owner(pg: PgStore, pg_url: str, statement: str) -> None:
    cid = _collab(Mailbox(pg))
    with psycopg.connect(pg_url, autocommit=True) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(statement)
    assert pg.verify(cid)[1] == [] and pg.streams(cid)["events"] == 2


def test_only_a_transaction_of_harmless_receipts_skips_the_flush(pg: PgStore) -> None:
    """``durable=False`` receipts commit without waiting for the WAL flush, unless a durable write shares it."""
    box = Mailbox(pg)
    cid = _collab(box)
    mid = box.send(cid, DRIVER, Draft(to="reviewer", body="x"))[0].message.id

    def setting(tx: object) -> str:
        return str(tx.conn.execute("SHOW synchronous_commit").fetchone()[0])  # type: ignore[attr-defined]

    pg.conn().execute("SET synchronous_commit = on")  # this session's default (the test server's is off)
    with pg.transaction(cid) as tx:
        tx.append_receipts("reviewer", [{"type": kinds.COMPLETE, "attempt": "a"}], durable=False)
        assert setting(tx) == "off"
        tx.append_receipts("reviewer", [{"type": kinds.PRESENTED, "message": mid, "attempt": "a"}])
        assert setting(tx) == "on"
    with pg.transaction(cid) as tx:
        tx.append_receipts("reviewer", [{"type": kinds.PRESENTED, "message": mid, "attempt": "b"}])
        tx.append_receipts("reviewer", [{"type": kinds.COMPLETE, "attempt": "b"}], durable=False)
        assert setting(tx) == "on"
    with pg.transaction(cid) as tx:
        assert setting(tx) == "on"  # SET LOCAL ends with its transaction
    assert [r["seq"] for r in pg.receipts(cid, "reviewer")] == [1, 2, 3, 4]


def test_bindings_follow_a_takeover_as_the_memory_store_does(pg: PgStore) -> None:
    from agentmsg.backends.memory import MemoryStore

    successor = pin("claude-code:r-successor")
    found = []
    for store in (pg, MemoryStore()):
        box = Mailbox(store)
        cid = _collab(box)
        box.join(cid, successor, "reviewer", succeeds=REVIEWER, reason="the old session crashed")
        found.append([store.bindings(str(p)) == [(cid, a)] if a else store.bindings(str(p)) == []
                      for p, a in ((successor, "reviewer"), (REVIEWER, None), (DRIVER, "driver"))])
    assert found == [[True, True, True], [True, True, True]]
