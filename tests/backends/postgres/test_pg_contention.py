"""Many writers, one collaboration (issue 32 item 4, docs/POSTGRES.md "Many writers, one collaboration").

A send that finds the collaboration's lock held stages its request; whoever holds the lock next applies
every staged request of its role in one transaction.  These tests hold the lock on purpose (a
transaction of their own), let writers stage behind it, and check what the design promises: every
send lands once, in one commit, gap-free and chained; a request that fails fails alone, with its own
error; a request whose writer is gone is never applied; the staging queue is per role, for members
only; and killing writers or their connections at random points loses nothing acknowledged and
stores nothing twice.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentmsg.backends.postgres.store import PgStore, PgTxn
from agentmsg.domain.validate import pin
from agentmsg.domain.values import Draft, Sent
from agentmsg.errors import AgentmsgError, Conflict, IdentityError, NotFound, UnknownAgent, UsageError
from agentmsg.service import staging
from agentmsg.service.messaging import Mailbox
from tests.support.pg import Cluster
from tests.support.pg_writer import message_id

DRIVER, REVIEWER, CAROL = pin("codex:c-driver"), pin("claude-code:c-reviewer"), pin("codex:c-carol")
REPO = Path(__file__).resolve().parents[3]


def _collab(url: str) -> str:
    box = Mailbox(PgStore(url))
    cid = box.open(DRIVER, "driver", "contention", "t").collab
    box.join(cid, REVIEWER, "reviewer")
    box.join(cid, CAROL, "carol")
    return cid


def _staged(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM agentmsg_staged WHERE outcome IS NULL").fetchone()
        return int(row[0]) if row else 0


def _until(what: str, done: Callable[[], bool], timeout: float = 60.0) -> None:
    """Wait for a condition the test caused (not a deadline on the code under test: it fails loudly)."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


class Behind:
    """Writers started while the test holds the collaboration's lock: each stages its request behind it."""

    def __init__(self, url: str, cid: str, *, admin: str | None = None) -> None:
        """``url``: the role holding the lock; ``admin``: a superuser's, to count every role's staged requests."""
        self.url, self.cid, self.admin = url, cid, admin or url
        self.results: dict[int, Any] = {}
        self.threads: list[threading.Thread] = []
        self.holder = PgTxn(PgStore(url), cid)

    def __enter__(self) -> Behind:
        self.holder.__enter__()
        assert self.holder.locked
        return self

    def start(self, i: int, act: Callable[[PgStore], Any], url: str | None = None) -> None:
        def run() -> None:
            store = PgStore(url or self.url)
            try:
                self.results[i] = act(store)
            except AgentmsgError as exc:
                self.results[i] = exc
            finally:
                store.close()

        self.threads.append(threading.Thread(target=run))
        self.threads[-1].start()

    def release(self, staged: int) -> None:
        """Once ``staged`` requests wait, let the lock go; then every writer returns."""
        _until(f"{staged} requests staged", lambda: _staged(self.admin) >= staged)
        self.holder.__exit__(None, None, None)
        for t in self.threads:
            t.join(timeout=120)
            assert not t.is_alive()

    def __exit__(self, *exc: object) -> None:
        if self.holder.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            self.holder.__exit__(*exc)


def _inbox(url: str, cid: str, alias: str) -> list[tuple[int, str, str]]:
    """(seq, id, xmin) of every message of ``alias``'s inbox, in order: xmin names the transaction that stored it."""
    with psycopg.connect(url, autocommit=True) as conn:
        return [(int(s), str(m), str(x)) for s, m, x in conn.execute(
            "SELECT seq, mid, xmin::text FROM agentmsg_records WHERE collab = %s AND stream = %s ORDER BY seq",
            (cid, f"inbox/{alias}")).fetchall()]


#: The collaboration of the running test (a writer's action is built before its thread runs).
_CID: list[str] = [""]


def _order_gap_free(url: str, cid: str) -> None:
    """The collaboration's order (``cseq`` of its events, messages and notes) is 1..n, and its counter is n."""
    with psycopg.connect(url, autocommit=True) as conn:
        got = sorted(int(r[0]) for r in conn.execute(
            "SELECT (body::jsonb ->> 'cseq')::bigint FROM agentmsg_records WHERE collab = %s AND body::jsonb ? 'cseq'",
            (cid,)).fetchall())
        counter = conn.execute("SELECT cseq FROM agentmsg_collabs WHERE id = %s", (cid,)).fetchone()
    assert got == list(range(1, len(got) + 1)) and counter == (len(got),), (got, counter)


def _send(to: str, body: str, mid: str | None = None, who: Any = DRIVER) -> Callable[[PgStore], list[Sent]]:
    return lambda store: Mailbox(store).send(_CID[0], who, Draft(to=to, subject="s", body=body, id=mid))


@pytest.fixture
def cid(pg_url: str) -> str:
    _CID[0] = _collab(pg_url)
    return _CID[0]


def test_writers_behind_the_lock_are_stored_together_in_one_commit_gap_free(pg_url: str, cid: str) -> None:
    ids = [str(uuid.uuid4()) for _ in range(6)]
    with Behind(pg_url, cid) as behind:
        for i, mid in enumerate(ids):
            behind.start(i, _send("reviewer", f"m{i}", mid if i % 2 else None))
        behind.release(6)
    sent = [behind.results[i] for i in range(6)]
    assert all(isinstance(s, list) and len(s) == 1 and not s[0].already for s in sent), sent
    inbox = _inbox(pg_url, cid, "reviewer")
    assert [seq for seq, _m, _x in inbox] == list(range(1, 7))
    assert sorted(s[0].message.seq for s in sent) == list(range(1, 7))  # each writer told its own seq
    assert {m for _s, m, _x in inbox} == {s[0].message.id for s in sent}
    assert len({x for _s, _m, x in inbox}) == 1, "one transaction stored the whole batch"
    store = PgStore(pg_url)
    assert store.verify(cid)[1] == []
    assert [m.body for m in store.history(cid, "reviewer")] == [s[0].message.body
                                                               for s in sorted(sent, key=lambda s: s[0].message.seq)]
    assert _staged(pg_url) == 0
    _order_gap_free(pg_url, cid)


def test_a_request_that_fails_in_a_batch_fails_alone_with_its_own_error(pg_url: str, cid: str) -> None:
    twin = str(uuid.uuid4())
    with Behind(pg_url, cid) as behind:
        behind.start(0, _send("reviewer", "good 0"))
        behind.start(1, _send("nobody", "to no one"))
        behind.start(2, _send("reviewer", "same", twin))
        behind.start(3, _send("reviewer", "same", twin))
        behind.start(4, _send("reviewer", "not the same", twin))
        behind.start(5, _send("carol", "good 5"))
        behind.release(6)
    r = behind.results
    assert isinstance(r[1], UnknownAgent) and r[1].code == 4 and r[1].name == "nobody", r[1]
    assert r[1].line() == "FAILED(unknown agent): nobody (aliases here: carol, driver, reviewer)"
    # three sends of one id, in whichever order they were staged: the first is stored; a later one with the
    # same content finds it (already), one that differs is a conflict (exit 5)
    bodies = {2: "same", 3: "same", 4: "not the same"}
    stored = [i for i in bodies if isinstance(r[i], list) and not r[i][0].already]
    assert len(stored) == 1, r
    for i in set(bodies) - set(stored):
        if bodies[i] == bodies[stored[0]]:
            assert isinstance(r[i], list) and r[i][0].already and r[i][0].message == r[stored[0]][0].message
        else:
            assert isinstance(r[i], Conflict) and r[i].code == 5, r[i]
    assert isinstance(r[0], list) and isinstance(r[5], list)
    assert [seq for seq, _m, _x in _inbox(pg_url, cid, "reviewer")] == [1, 2]
    assert [seq for seq, _m, _x in _inbox(pg_url, cid, "carol")] == [1]
    assert PgStore(pg_url).verify(cid)[1] == []
    _order_gap_free(pg_url, cid)
    # the same error, line and code as a writer that applied its request itself
    with pytest.raises(UnknownAgent) as alone:
        Mailbox(PgStore(pg_url)).send(cid, DRIVER, Draft(to="nobody", subject="s", body="b"))
    assert alone.value.line() == r[1].line()


def _note(text: str, *, fail: bool = False) -> Callable[[PgStore], str]:
    """A request applied through ``combine`` directly: a note, and with ``fail`` an error after writing it."""

    def apply(tx: Any, request: str) -> str:
        tx.append_note({"type": "note", "id": str(uuid.uuid4()), "author": "driver", "text": request})
        if request.startswith("fail"):
            raise UsageError(f"refused after writing: {request}")
        return f"ok {request}"

    def refused(exc: Exception) -> str:
        return f"refused {exc}"

    return lambda store: store.combine(_CID[0], ("fail " if fail else "") + text, apply, refused)


def test_a_request_that_fails_after_writing_undoes_its_writes_only(pg_url: str, cid: str) -> None:
    with Behind(pg_url, cid) as behind:
        for i in range(5):
            behind.start(i, _note(f"n{i}", fail=i == 2))
        behind.release(5)
    assert behind.results[2] == "refused refused after writing: fail n2"
    assert sorted(behind.results[i] for i in (0, 1, 3, 4)) == ["ok n0", "ok n1", "ok n3", "ok n4"]
    store = PgStore(pg_url)
    assert sorted(n["text"] for n in store.notes(cid)) == ["n0", "n1", "n3", "n4"]
    assert [n["seq"] for n in store.notes(cid)] == [1, 2, 3, 4]
    assert store.verify(cid)[1] == []
    _order_gap_free(pg_url, cid)


def test_a_staged_request_whose_writer_is_gone_is_never_applied(pg_url: str, cid: str) -> None:
    with Behind(pg_url, cid) as behind:
        gone = psycopg.connect(pg_url)
        request = staging.send_request(DRIVER, Draft(to="reviewer", subject="s", body="from a writer that died"), ())
        row = gone.execute("SELECT * FROM agentmsg_lock_or_stage(%s, %s)", (cid, request)).fetchone()
        assert row is not None and row[3] is not None  # staged behind the held lock
        gone.commit()
        gone.close()  # the writer is gone before anyone applied its request
        behind.start(0, _send("reviewer", "alive"))
        behind.release(2)
    assert [m.body for m in PgStore(pg_url).history(cid, "reviewer")] == ["alive"]
    assert _staged(pg_url) == 0


def test_the_staging_queue_is_each_roles_own_and_for_members_only(pg_cluster: Cluster) -> None:
    db = pg_cluster.new_db()
    tag = uuid.uuid4().hex[:8]
    alice, bob, eve = (pg_cluster.add_role(f"{n}_{tag}") for n in ("alice", "bob", "eve"))
    url_a, url_b, url_e = (pg_cluster.url(db, r) for r in (alice, bob, eve))
    cid = _collab(url_a)  # alice holds driver, reviewer and carol
    PgStore(url_a).grant(cid, bob)
    with psycopg.connect(url_b) as conn:  # bob cannot stage in alice's name
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO agentmsg_staged (collab, role, request) VALUES (%s, %s, '{}')", (cid, alice))
    with psycopg.connect(url_a) as conn:
        conn.execute("INSERT INTO agentmsg_staged (collab, request) VALUES (%s, 'alice''s')", (cid,))
    with psycopg.connect(url_b, autocommit=True) as conn:  # nor read, answer or remove alice's requests
        assert conn.execute("SELECT count(*) FROM agentmsg_staged").fetchone() == (0,)
        assert conn.execute("UPDATE agentmsg_staged SET outcome = 'forged'").rowcount == 0
        assert conn.execute("DELETE FROM agentmsg_staged").rowcount == 0
    with psycopg.connect(url_e, autocommit=True) as conn:  # eve, not a member, stages nothing there
        assert conn.execute("SELECT * FROM agentmsg_lock_or_stage(%s, 'x')", (cid,)).fetchone() is None
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO agentmsg_staged (collab, request) VALUES (%s, 'x')", (cid,))
    with pytest.raises(NotFound):
        Mailbox(PgStore(url_e)).send(cid, DRIVER, Draft(to="reviewer", subject="s", body="b"))


def test_behind_the_lock_a_role_sends_only_as_its_own_aliases(pg_cluster: Cluster) -> None:
    """bob joined as tester: his writers, staged behind alice's lock and applied by one of them, send as
    tester; those that name alice's driver are refused by the server (exit 9), alone."""
    db = pg_cluster.new_db()
    tag = uuid.uuid4().hex[:8]
    alice, bob = (pg_cluster.add_role(f"{n}_{tag}") for n in ("alice", "bob"))
    url_a, url_b = pg_cluster.url(db, alice), pg_cluster.url(db, bob)
    cid = _collab(url_a)
    PgStore(url_a).grant(cid, bob)
    tester = pin("codex:c-tester")
    Mailbox(PgStore(url_b)).join(cid, tester, "tester")
    _CID[0] = cid
    with Behind(url_a, cid, admin=pg_cluster.url(db)) as behind:
        for i, who in enumerate((DRIVER, tester, DRIVER)):
            behind.start(i, _send("reviewer", f"b{i}", who=who), url=url_b)
        behind.release(3)
    r = behind.results
    assert isinstance(r[0], IdentityError) and isinstance(r[2], IdentityError), r
    assert isinstance(r[1], list) and r[1][0].message.sender == "tester"
    assert [m.body for m in PgStore(url_a).history(cid, "reviewer")] == ["b1"]
    assert PgStore(url_a).verify(cid)[1] == []


# ---- killing writers and their connections ---------------------------------------------------------


class Writer:
    """A ``tests/support/pg_writer.py`` process and what it printed."""

    def __init__(self, url: str, cid: str, prefix: str, count: int) -> None:
        self.prefix = prefix
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.support.pg_writer", url, cid, str(DRIVER), prefix,
                                      str(count)], cwd=REPO, stdout=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def said(self, word: str) -> list[str]:
        return [line.split()[1] for line in list(self.lines) if line.startswith(word + " ")]


def _terminate_one(admin: psycopg.Connection[Any], where: str) -> bool:
    """Terminate one writer's connection that is running a statement (``where`` narrows it); True if one was."""
    row = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity WHERE "
                        "datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
                        f"AND state = 'active' {where} ORDER BY random() LIMIT 1) t").fetchone()
    return bool(row and row[0])


def test_killing_writers_and_their_connections_at_random_points_loses_nothing_and_stores_nothing_twice(
        pg_cluster: Cluster) -> None:
    url = pg_cluster.url(pg_cluster.new_db())
    cid = _collab(url)
    rng = random.Random(32)
    count = 40
    writers = [Writer(url, cid, f"w{i}", count) for i in range(6)]
    killed: list[Writer] = []
    with psycopg.connect(url, autocommit=True) as admin:
        for round_ in range(12):
            target = rng.choice(writers)
            seen = len(target.said("STORED"))
            _until("the writer stores again", lambda w=target, n=seen: len(w.said("STORED")) > n
                   or w.proc.poll() is not None or "DONE" in w.lines)
            if round_ % 3 == 2 and target.proc.poll() is None and target not in killed:
                time.sleep(rng.random() * 0.01)
                target.proc.kill()  # SIGKILL: anywhere in a send, staged or sequencing
                killed.append(target)
            else:  # a connection terminated in the middle of a statement: a writer waiting for its turn (which
                # sees the failure and retries with the same id), or any writer at work (its request lost, or
                # sequencing others': they take the lock after it)
                waiting = "AND query LIKE '%agentmsg_await%'" if round_ % 3 == 0 else ""
                _until("a writer at work", lambda w=waiting: _terminate_one(admin, w))
    for w in writers:
        w.proc.wait(timeout=300)
        w.reader.join()
    assert killed, "no writer was killed"
    assert any(w.said("FAILED") for w in writers), "no connection was terminated under a writer"
    for w in writers:
        if w not in killed:
            assert "DONE" in w.lines, w.lines[-5:]
    store = PgStore(url)
    inbox = list(store.history(cid, "reviewer"))
    assert [m.seq for m in inbox] == list(range(1, len(inbox) + 1))
    stored_ids = [m.id for m in inbox]
    assert len(set(stored_ids)) == len(stored_ids), "a message stored twice"
    tried = {mid for w in writers for mid in w.said("TRY")}
    acknowledged = {mid for w in writers for mid in w.said("STORED")}
    assert acknowledged <= set(stored_ids), "an acknowledged send was lost"
    assert set(stored_ids) <= tried
    assert store.verify(cid)[1] == []
    # every send, retried with its id (a killed writer's user would): each lands exactly once
    box = Mailbox(store)
    for w in writers:
        for i in range(count):
            mid = message_id(w.prefix, i)
            if mid in tried:
                (sent,) = box.send(cid, DRIVER, Draft(to="reviewer", subject="k", body=f"{w.prefix} {i}", id=mid))
                assert sent.already == (mid in stored_ids)
    final = [m.id for m in store.history(cid, "reviewer")]
    assert len(final) == len(set(final)) == len(tried)
    assert _staged(url) == 0  # the killed writers' requests were removed, never applied
    assert store.verify(cid)[1] == []
    _order_gap_free(url, cid)
