"""Faults lose nothing: the server stops in the middle of sends (``pg_ctl stop -m fast`` and ``-m immediate``).

A send that did not get its answer fails loudly (exit 20, one line) and
leaves nothing half-stored (a broadcast is every copy or none); a retry with
the same id after the restart stores it once; ``verify`` is clean.  This
module runs its own server (with fsync on), since it stops it.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest

from agentmsg.backends.postgres.store import PgStore
from agentmsg.domain.validate import pin
from agentmsg.domain.values import Draft
from agentmsg.errors import StoreUnreachable
from agentmsg.service.messaging import Mailbox
from tests.support.cli_helpers import run, run_json
from tests.support.pg import Cluster

DRIVER, REVIEWER, CAROL = pin("codex:f-driver"), pin("claude-code:f-reviewer"), pin("human:f-carol")


@pytest.fixture(scope="module")
def own_cluster():
    cluster = Cluster(fsync=True).init().start()
    try:
        cluster.make_template()
        yield cluster
    finally:
        cluster.destroy()


def _sender(url: str, cid: str, ids: list[str], outcome: dict[str, str], stop: threading.Event) -> None:
    """Send each id (every third to all) until told to stop; note what each send was told."""
    box = Mailbox(PgStore(url))
    for i, mid in enumerate(ids):
        if stop.is_set():
            break
        try:
            box.send(cid, DRIVER, Draft(to="all" if i % 3 == 0 else "reviewer", subject="s", body=f"m{i}", id=mid))
            outcome[mid] = "stored"
        except StoreUnreachable:
            outcome[mid] = "failed"
            time.sleep(0.05)


def _check(store: PgStore, cid: str, ids: list[str]) -> None:
    """Every id once (a broadcast's copies all there), sequences gap-free, chains intact."""
    reviewer = [m for m in store.history(cid, "reviewer")]
    carol = [m for m in store.history(cid, "carol")]
    assert [m.seq for m in reviewer] == list(range(1, len(reviewer) + 1))
    assert [m.seq for m in carol] == list(range(1, len(carol) + 1))
    to_reviewer = [m.broadcast or m.id for m in reviewer]
    assert sorted(to_reviewer) == sorted(ids) and len(set(to_reviewer)) == len(ids)
    assert sorted(m.broadcast for m in carol) == sorted(ids[i] for i in range(0, len(ids), 3))
    assert store.verify(cid)[1] == []


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_server_stopped_mid_send_loses_nothing_and_a_retry_stores_once(own_cluster: Cluster, mode: str) -> None:
    url = own_cluster.url(own_cluster.new_db())
    store = PgStore(url)
    box = Mailbox(store)
    cid = box.open(DRIVER, "driver", "faults", "t").collab
    box.join(cid, REVIEWER, "reviewer")
    box.join(cid, CAROL, "carol")
    store.close()
    ids = [str(uuid.uuid4()) for _ in range(4000)]
    outcome: dict[str, str] = {}
    stop = threading.Event()
    worker = threading.Thread(target=_sender, args=(url, cid, ids, outcome, stop))
    worker.start()
    try:
        while len(outcome) < 20:
            time.sleep(0.01)
        own_cluster.stop(mode)  # in the middle of the sends
        time.sleep(0.5)
        failed_while_down = [mid for mid, how in outcome.items() if how == "failed"]
        own_cluster.start()
        time.sleep(0.3)
    finally:
        stop.set()
        worker.join()
    assert failed_while_down, "no send saw the server go away"
    sent = list(outcome)
    store = PgStore(url)
    # before any retry: each failed send is all there (its answer was lost) or not there at all
    for mid in sent:
        copies = [m for a in ("reviewer", "carol") for m in store.history(cid, a) if (m.broadcast or m.id) == mid]
        assert len(copies) in ((0, 2) if sent.index(mid) % 3 == 0 else (0, 1)), mid
    box = Mailbox(store)
    for i, mid in enumerate(sent):  # retry everything with the same ids: each lands once
        if outcome[mid] == "failed":
            box.send(cid, DRIVER, Draft(to="all" if i % 3 == 0 else "reviewer", subject="s", body=f"m{i}", id=mid))
    for i, mid in enumerate(sent[:5]):  # and a retry of what was stored is only a replay
        again = box.send(cid, DRIVER, Draft(to="all" if i % 3 == 0 else "reviewer", subject="s", body=f"m{i}",
                                            id=mid))
        assert all(s.already for s in again)
    _check(store, cid, sent)
    store.close()


def test_a_cli_send_to_a_stopped_server_fails_loudly_then_the_retry_stores_once(own_cluster: Cluster,
                                                                                 tmp_path: Path) -> None:
    url = own_cluster.url(own_cluster.new_db())
    env = {"AGENTMSG_STORE": url}
    code, doc, _ = run_json("open", "--alias", "driver", "--label", "l", "--task", "t", "--self", str(DRIVER),
                            root=tmp_path, env=env)
    cid = doc["result"]["collab"]
    assert run("join", "--collab", cid, "--alias", "reviewer", "--self", str(REVIEWER), root=tmp_path,
               env=env).code == 0
    mid = str(uuid.uuid4())
    send = ("send", "--collab", cid, "--to", "reviewer", "--subject", "s", "--body", "b", "--id", mid,
            "--self", str(DRIVER))
    own_cluster.stop("immediate")
    try:
        code, _out, err = run(*send, root=tmp_path, env=env)
        assert code == StoreUnreachable.code and err.startswith("store unreachable:") and "nothing was stored" in err
    finally:
        own_cluster.start()
    assert run(*send, root=tmp_path, env=env).code == 0
    code, doc, _ = run_json(*send, root=tmp_path, env=env)
    assert code == 0 and "already" in str(doc["result"]).lower()
    store = PgStore(url)
    assert [m.id for m in store.history(cid, "reviewer")] == [mid] and store.verify(cid)[1] == []
    store.close()


def test_a_store_that_outlives_a_server_restart_carries_on(own_cluster: Cluster) -> None:
    """A long-lived process (the MCP server, the mirror) keeps its store: the first command after a restart works."""
    url = own_cluster.url(own_cluster.new_db())
    store = PgStore(url)
    box = Mailbox(store)
    cid = box.open(DRIVER, "driver", "restart", "t").collab
    box.join(cid, REVIEWER, "reviewer")
    own_cluster.stop("fast")
    with pytest.raises(StoreUnreachable):  # down is down: loud
        box.send(cid, DRIVER, Draft(to="reviewer", body="while down"))
    own_cluster.start()
    box.send(cid, DRIVER, Draft(to="reviewer", body="after"))  # not a failure: the dropped connection is replaced
    own_cluster.stop("immediate")
    own_cluster.start()
    box.send(cid, DRIVER, Draft(to="reviewer", body="again"))  # a transaction's first step is retried once
    own_cluster.stop("fast")
    own_cluster.start()
    assert store.collabs() == [cid]  # and so is a plain read
    assert [m.body for m in store.history(cid, "reviewer")] == ["after", "again"] and store.verify(cid)[1] == []
    store.close()
