"""Trust, round three, class 1: on PostgreSQL the server checks the record, not only its row's columns.

alice (alias ``driver``), bob (``reviewer``) and carol (``tester``) are three
login roles of one server, each a member of the collaboration.  bob writes
with raw SQL, as any member can with ``psql``: a sealed record (``seal_next``,
a valid chain) whose content disagrees with its row, or names an alias,
stream, pin or collaboration that is not his, for every record type the
store writes.  Each insert is refused by the server; the CLI, as the others,
shows nothing forged.  A row that got in before the check (schema 2) is
caught by the readers: exit 13, never shown.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentmsg import records
from agentmsg.backends.postgres import schema
from agentmsg.backends.postgres.store import _columns
from agentmsg.domain import kinds
from agentmsg.errors import TamperDetected
from tests.support.cli_helpers import run, run_json

A_PIN, B_PIN, C_PIN = "codex:forge-a", "claude-code:forge-b", "codex:forge-c"
OTHER_COLLAB = "bbbbbbbb-2222-4222-8222-222222222222"


class World:
    """The three roles' URLs and roots, the collaboration, and the messages already in it."""

    def __init__(self, urls: dict[str, str], roots: dict[str, Path], db: str) -> None:
        self.urls, self.roots, self.db = urls, roots, db
        self.cid = ""
        self.ids: dict[str, str] = {}

    def cli(self, who: str, *args: str) -> Any:
        return run(*args, root=self.roots[who], env={"AGENTMSG_STORE": self.urls[who]})

    def cli_json(self, who: str, *args: str) -> Any:
        return run_json(*args, root=self.roots[who], env={"AGENTMSG_STORE": self.urls[who]})


@pytest.fixture(scope="module")
def world(pg_cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    yield build_world(pg_cluster, tmp_path_factory.mktemp("forge"))


def build_world(pg_cluster: Any, base: Path) -> World:
    """A fresh database: alice opened, bob and carol joined, three real messages and a note."""
    db = pg_cluster.new_db()
    tag = uuid.uuid4().hex[:8]
    roles = {n: pg_cluster.add_role(f"{n}_{tag}") for n in ("alice", "bob", "carol")}
    w = World({n: pg_cluster.url(db, r) for n, r in roles.items()}, {n: base / n for n in roles}, db)
    code, doc, _ = w.cli_json("alice", "open", "--alias", "driver", "--label", "l", "--task", "t", "--self", A_PIN)
    assert code == 0
    w.cid = doc["result"]["collab"]
    for who, alias, pin in (("bob", "reviewer", B_PIN), ("carol", "tester", C_PIN)):
        assert w.cli("alice", "db", "grant", "--collab", w.cid, "--role", roles[who]).code == 0
        assert w.cli(who, "join", "--collab", w.cid, "--alias", alias, "--self", pin).code == 0
    for name, who, pin, to in (("a2r", "alice", A_PIN, "reviewer"), ("r2d", "bob", B_PIN, "driver"),
                               ("d2t", "alice", A_PIN, "tester")):
        w.ids[name] = str(uuid.uuid4())
        assert w.cli(who, "send", "--collab", w.cid, "--to", to, "--subject", f"real {name}", "--body", "b",
                     "--id", w.ids[name], "--self", pin).code == 0
    assert w.cli("alice", "log", "append", "--collab", w.cid, "--self", A_PIN, "--text", "a real note").code == 0
    return w


def _tail(conn: psycopg.Connection[Any], cid: str, stream: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT body FROM agentmsg_records WHERE collab = %s AND stream = %s ORDER BY seq DESC "
                       "LIMIT 1", (cid, stream)).fetchone()
    return records.loads(row[0]) if row else None


def insert(url: str, cid: str, stream: str, fields: dict[str, Any], *, cols: dict[str, Any] | None = None,
           seq_offset: int = 0, body: str | None = None, prev: str | None = None) -> None:
    """As ``url``'s role, with raw SQL: ``fields`` sealed after the stream's tail, its columns derived as the
    store derives them unless ``cols`` says otherwise."""
    with psycopg.connect(url, autocommit=True) as conn:
        if "cseq" not in fields and (stream in ("events", "notes") or stream.startswith("inbox/")):
            row = conn.execute("UPDATE agentmsg_collabs SET cseq = cseq + 1 WHERE id = %s RETURNING cseq",
                               (cid,)).fetchone()
            fields = dict(fields, cseq=row[0] if row else 0)
        tail = _tail(conn, cid, stream)
        rec = records.seal_next(fields, tail)
        if prev is not None:
            rec = records.seal(fields, seq=rec["seq"], prev=prev, prev_ts=None)
        seq = rec["seq"] + seq_offset
        if seq_offset:
            rec = records.seal(fields, seq=seq, prev=rec["prev"], prev_ts=None)
        names = ("rtype", "mid", "ref", "kind", "priority", "bcast", "sender")
        row = dict(zip(names, _columns(stream, rec), strict=True)) | (cols or {})
        conn.execute("INSERT INTO agentmsg_records (collab, stream, seq, body, rtype, mid, ref, kind, priority, "
                     "bcast, sender) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                     (cid, stream, seq, records.dumps(rec) if body is None else body, *(row[n] for n in names)))


def message(w: World, *, to: str, sender: str = "reviewer", pin: str = B_PIN, **over: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "type": kinds.MESSAGE, "id": str(uuid.uuid4()), "collab": w.cid, "sender": sender, "sender_pin": pin,
        "sender_runtime": "claude-code", "to": to, "kind": "request", "priority": "high",
        "subject": "FORGED", "body": "FORGED", "reply_to": None, "broadcast": None, "digest": "0" * 64,
    }
    return fields | over


def forged_cases(w: World) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(name, stream, record fields, column overrides): each one bob must not be able to store."""
    a2r, r2d, d2t = w.ids["a2r"], w.ids["r2d"], w.ids["d2t"]
    cases: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
        # messages
        ("message: sender field names another alias", "inbox/tester", message(w, to="tester", sender="driver",
                                                                              pin=A_PIN), {"sender": "reviewer"}),
        ("message: sender field and column name another alias", "inbox/tester",
         message(w, to="tester", sender="driver", pin=A_PIN), {}),
        ("message: own alias, another alias's pin", "inbox/tester", message(w, to="tester", pin=A_PIN), {}),
        ("message: addressed to another inbox than its stream", "inbox/tester", message(w, to="driver"),
         {}),
        ("message: names another collaboration", "inbox/tester", message(w, to="tester", collab=OTHER_COLLAB),
         {}),
        ("message: rtype column says note", "inbox/tester", message(w, to="tester"), {"rtype": kinds.NOTE}),
        ("message: record says ack", "inbox/tester", message(w, to="tester", type=kinds.ACK), {}),
        ("message: id column is another id", "inbox/tester", message(w, to="tester"), {"mid": str(uuid.uuid4())}),
        ("message: kind and priority columns disagree", "inbox/tester", message(w, to="tester"),
         {"kind": "update", "priority": "normal"}),
        ("message: no sender_runtime (a reader would crash)", "inbox/tester",
         {k: v for k, v in message(w, to="tester").items() if k != "sender_runtime"}, {}),
        # receipts
        ("ack: another alias's receipts, rtype column presented", "receipts/driver",
         {"type": kinds.ACK, "message": r2d, "mseq": 1, "by": A_PIN}, {"rtype": kinds.PRESENTED}),
        ("ack: another alias's receipts", "receipts/driver",
         {"type": kinds.ACK, "message": r2d, "mseq": 1, "by": B_PIN}, {}),
        ("ack: own receipts, a message of another inbox", "receipts/reviewer",
         {"type": kinds.ACK, "message": d2t, "by": B_PIN}, {}),
        ("ack: own receipts, ref column another message", "receipts/reviewer",
         {"type": kinds.ACK, "message": a2r, "by": B_PIN}, {"ref": r2d}),
        ("ack: own receipts, another alias's pin", "receipts/reviewer",
         {"type": kinds.ACK, "message": a2r, "by": A_PIN}, {}),
        ("presented: another alias's receipts", "receipts/driver",
         {"type": kinds.PRESENTED, "message": r2d, "attempt": str(uuid.uuid4()), "host": "h", "hook": "x",
          "pin": B_PIN}, {}),
        ("attempt-complete: another alias's receipts", "receipts/driver",
         {"type": kinds.COMPLETE, "attempt": str(uuid.uuid4()), "host": "h", "hook": "x", "messages": 1}, {}),
        ("retry: another alias's receipts", "receipts/driver",
         {"type": kinds.RETRY, "attempt": str(uuid.uuid4()), "message": r2d, "by": B_PIN}, {}),
        ("replied: a conversation bob is not in", "receipts/tester",
         {"type": kinds.REPLIED, "message": d2t, "by": r2d}, {}),
        ("notify: a conversation bob is not in", "receipts/tester",
         {"type": kinds.NOTIFY, "message": d2t, "ok": True, "detail": "x"}, {}),
        ("receipt: unknown type", "receipts/reviewer", {"type": "approved", "message": a2r}, {}),
        # membership events
        ("joined: an alias bound to another role", "events",
         {"type": kinds.JOINED, "alias": "driver", "pin": B_PIN, "runtime": "claude-code"}, {}),
        ("left: another alias, sender column own", "events",
         {"type": kinds.LEFT, "alias": "driver", "pin": A_PIN}, {"sender": "reviewer"}),
        ("notify-set: another alias, sender column own", "events",
         {"type": kinds.NOTIFY_SET, "alias": "driver", "notify": {"adapter": "hook"}}, {"sender": "reviewer"}),
        ("handover: another alias", "events",
         {"type": kinds.HANDOVER, "alias": "driver", "to": B_PIN, "by": A_PIN}, {"sender": "reviewer"}),
        ("succeeded: another alias (a takeover)", "events",
         {"type": kinds.SUCCEEDED, "alias": "driver", "pin": B_PIN, "old_pin": A_PIN, "runtime": "claude-code"},
         {"sender": "reviewer"}),
        ("joined: a fresh alias with another role's pin", "events",
         {"type": kinds.JOINED, "alias": "evil", "pin": A_PIN, "runtime": "codex"}, {}),
        ("opened: a second opening", "events",
         {"type": kinds.OPENED, "collab": w.cid, "alias": "evil", "pin": "codex:evil", "runtime": "codex",
          "label": "l", "task": "t", "notify": {"adapter": "hook"}}, {}),
        ("closed: as the opener's pin", "events", {"type": kinds.CLOSED, "by": A_PIN, "unresolved": {}}, {}),
        ("closed: as own pin, not the opener's alias", "events",
         {"type": kinds.CLOSED, "by": B_PIN, "unresolved": {}}, {}),
        ("left: rtype column says notify-set", "events", {"type": kinds.LEFT, "alias": "reviewer", "pin": B_PIN},
         {"rtype": kinds.NOTIFY_SET}),
        ("event: unknown type", "events", {"type": "promoted", "alias": "reviewer"}, {}),
        # the log
        ("note: another alias as author", "notes",
         {"type": kinds.NOTE, "id": str(uuid.uuid4()), "author": "driver", "text": "FORGED", "corrects": None}, {}),
        ("note: rtype column disagrees", "notes",
         {"type": kinds.NOTE, "id": str(uuid.uuid4()), "author": "reviewer", "text": "x", "corrects": None},
         {"rtype": kinds.MESSAGE}),
        ("note: a message in the notes stream", "notes", message(w, to="tester"), {}),
        # delivery
        ("delivery-enabled: another alias", "delivery",
         {"type": kinds.ENABLED, "envelope": str(uuid.uuid4()), "collab": w.cid, "alias": "driver", "pin": A_PIN,
          "by": A_PIN, "expires_at": 1, "expires": "x", "hard_cap_at": 1, "hard_cap": "x", "slots": 1, "wait": 0},
         {}),
        ("delivery-enabled: own alias, another alias's pin", "delivery",
         {"type": kinds.ENABLED, "envelope": str(uuid.uuid4()), "collab": w.cid, "alias": "reviewer",
          "pin": A_PIN, "by": A_PIN}, {}),
        ("delivery-midturn: another collaboration", "delivery",
         {"type": kinds.MIDTURN, "collab": OTHER_COLLAB, "alias": "reviewer", "pin": B_PIN, "on": True}, {}),
        ("delivery-slot: another alias", "delivery",
         {"type": kinds.SLOT, "envelope": str(uuid.uuid4()), "slot": 1, "alias": "driver", "pin": A_PIN}, {}),
        ("wake-on: another alias", "delivery",
         {"type": kinds.WAKE_ON, "consent": str(uuid.uuid4()), "collab": w.cid, "alias": "driver",
          "pin": A_PIN, "by": A_PIN}, {}),
        ("wake-off: another alias", "delivery",
         {"type": kinds.WAKE_OFF, "consent": str(uuid.uuid4()), "alias": "driver", "pin": A_PIN}, {}),
        ("wake-prompt: another alias", "delivery",
         {"type": kinds.WAKE_PROMPT, "consent": str(uuid.uuid4()), "alias": "driver", "pin": A_PIN,
          "human": True}, {}),
        ("delivery: unknown type", "delivery", {"type": "delivery-grant", "alias": "reviewer"}, {}),
        # streams
        ("a stream agentmsg never writes", "secrets", {"type": kinds.NOTE, "author": "reviewer"}, {}),
        ("an inbox stream with no alias", "inbox/", message(w, to=""), {}),
    ]
    return cases


def test_every_forged_record_is_refused_by_the_server(world: World) -> None:
    w = world
    refused: list[str] = []
    stored: list[str] = []
    for name, stream, fields, cols in forged_cases(w):
        try:
            insert(w.urls["bob"], w.cid, stream, fields, cols=cols)
        except psycopg.errors.InsufficientPrivilege:
            refused.append(name)
        else:
            stored.append(name)
    assert stored == [], f"stored: {stored}"
    assert len(refused) == len(forged_cases(w))


@pytest.mark.parametrize("how", ["gap", "fork", "seq column", "not JSON", "a JSON array"])
def test_a_record_that_breaks_its_stream_is_refused(world: World, how: str) -> None:
    w = world
    fields = {"type": kinds.NOTE, "id": str(uuid.uuid4()), "author": "reviewer", "text": "x", "corrects": None}
    kw: dict[str, Any] = {"gap": {"seq_offset": 1}, "fork": {"prev": "0" * 64}, "seq column": {"seq_offset": 0},
                          "not JSON": {"body": "{not json"}, "a JSON array": {"body": "[1]"}}[how]
    if how == "seq column":
        with psycopg.connect(w.urls["bob"], autocommit=True) as conn, \
                pytest.raises(psycopg.errors.InsufficientPrivilege):
            tail = _tail(conn, w.cid, "notes")
            rec = records.seal_next(fields, tail)
            conn.execute("INSERT INTO agentmsg_records (collab, stream, seq, body, rtype) VALUES "
                         "(%s, 'notes', %s, %s, 'note')", (w.cid, rec["seq"] + 5, records.dumps(rec)))
        return
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        insert(w.urls["bob"], w.cid, "notes", fields, **kw)


def test_what_is_the_roles_own_still_goes_through_raw_sql(world: World) -> None:
    """The control: the same harness stores bob's honest records, so each refusal above is the check's."""
    w = world
    insert(w.urls["bob"], w.cid, "notes",
           {"type": kinds.NOTE, "id": str(uuid.uuid4()), "author": "reviewer", "text": "honest", "corrects": None})
    honest = message(w, to="tester", subject="honest raw", priority="normal")
    insert(w.urls["bob"], w.cid, "inbox/tester", honest)
    insert(w.urls["bob"], w.cid, "receipts/tester", {"type": kinds.NOTIFY, "message": honest["id"], "ok": True,
                                                      "detail": "rang"})
    insert(w.urls["bob"], w.cid, "delivery",
           {"type": kinds.WAKE_RING, "consent": str(uuid.uuid4()), "alias": "tester", "pin": C_PIN, "at": 1.0,
            "outcome": "wake off", "mechanism": None, "messages": [honest["id"]]})
    assert w.cli("bob", "verify", "--collab", w.cid).code == 0


def test_history_and_the_order_cannot_be_rewritten(world: World) -> None:
    w = world
    with psycopg.connect(w.urls["bob"], autocommit=True) as conn:
        for statement in ("UPDATE agentmsg_records SET body = body", "DELETE FROM agentmsg_records",
                          "UPDATE agentmsg_collabs SET cseq = 0",
                          "INSERT INTO agentmsg_members (collab, role, by) VALUES "
                          f"('{w.cid}', 'nobody', 'postgres')"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


def test_the_cli_shows_nothing_forged(world: World) -> None:
    """After every attempt above, what each role sees is what was really sent."""
    w = world
    for name, stream, fields, cols in forged_cases(w):  # idempotent: run here too if this test runs alone
        try:
            insert(w.urls["bob"], w.cid, stream, fields, cols=cols)
        except psycopg.errors.InsufficientPrivilege:
            pass
        else:
            pytest.fail(f"stored: {name}")
    code, doc, _ = w.cli_json("carol", "inbox", "--collab", w.cid, "--self", C_PIN)
    assert code == 0
    assert all(m["subject"] != "FORGED" for m in doc["result"]["messages"])
    assert {m["from"] for m in doc["result"]["messages"] if m["subject"].startswith("real")} == {"driver"}
    code, doc, _ = w.cli_json("alice", "show", w.ids["r2d"], "--collab", w.cid)
    assert code == 0 and doc["result"]["states"]["acknowledged"] is None and doc["result"]["state"] != "acknowledged"
    code, out, err = w.cli("alice", "log", "show", "--collab", w.cid)
    assert code == 0 and "FORGED" not in out, err
    code, doc, _ = w.cli_json("alice", "registry", "--collab", w.cid)
    assert code == 0 and doc["result"]["participants"]["driver"]["active"] is True
    assert doc["result"]["closed_at"] is None
    for who in ("alice", "bob", "carol"):
        assert w.cli(who, "verify", "--collab", w.cid).code == 0


def test_a_row_stored_before_the_check_is_caught_by_the_readers(pg_cluster, tmp_path: Path) -> None:
    """Forged rows from before schema 3 (simulated: the owner turns the check off for their inserts) are
    never shown: the readers compare each record with its row and stop with exit 13; ``verify`` names them."""
    w = build_world(pg_cluster, tmp_path)
    r2d = w.ids["r2d"]
    pg_cluster.sql("ALTER TABLE agentmsg_records DISABLE TRIGGER agentmsg_records_check", db=w.db)
    try:  # schema 2's policy let these through: its columns were all it checked
        insert(w.urls["bob"], w.cid, "receipts/driver", {"type": kinds.ACK, "message": r2d, "by": B_PIN},
               cols={"rtype": kinds.PRESENTED})
        insert(w.urls["bob"], w.cid, "inbox/tester", message(w, to="tester", sender="driver", pin=A_PIN),
               cols={"sender": "reviewer"})
    finally:
        pg_cluster.sql("ALTER TABLE agentmsg_records ENABLE TRIGGER agentmsg_records_check", db=w.db)
    code, out, err = w.cli("alice", "show", r2d, "--collab", w.cid)
    assert code == TamperDetected.code and out == "" and "disagrees with its row" in err
    code, out, err = w.cli("carol", "inbox", "--collab", w.cid, "--self", C_PIN)
    assert code == TamperDetected.code and "FORGED" not in out and "inbox/tester" in err
    code, doc, _ = w.cli_json("alice", "verify", "--collab", w.cid)
    assert code == TamperDetected.code
    assert doc["result"]["tampering"] == 2 and "row-disagrees" in str(doc["result"])


def test_migrating_a_schema_2_database_puts_the_check_in_place(pg_cluster, tmp_path: Path) -> None:
    db = pg_cluster.new_db(migrated=False)
    with psycopg.connect(pg_cluster.url(db), autocommit=True) as conn:
        conn.execute("CREATE TABLE agentmsg_migrations (version integer PRIMARY KEY, name text NOT NULL, "
                     "applied timestamptz NOT NULL DEFAULT now())")
        for version, name, sql in schema.migrations()[:2]:
            conn.execute(sql)  # type: ignore[arg-type]
            conn.execute("INSERT INTO agentmsg_migrations (version, name) VALUES (%s, %s)", (version, name))
    code, doc, _ = run_json("db", "migrate", "--store", pg_cluster.url(db), root=tmp_path)
    assert code == 0 and doc["result"]["from"] == 2 and "003_record_checks.sql" in doc["result"]["applied"]
    assert pg_cluster.sql("SELECT count(*) FROM pg_trigger WHERE tgname = 'agentmsg_records_check'", db=db) == [(1,)]


def test_the_server_knows_every_record_type_the_store_writes() -> None:
    # 003 defines the check function; later migrations edit it in place (004: spawned, spawn-failed)
    sql = "\n".join(text for _v, _name, text in schema.migrations())
    every = [*kinds.EVENTS, kinds.MESSAGE, kinds.NOTE, *kinds.RECEIPTS, kinds.ENABLED, kinds.DISABLED, kinds.SLOT,
             kinds.MIDTURN, kinds.WAKE_ON, kinds.WAKE_OFF, kinds.WAKE_RING, kinds.WAKE_PROMPT]
    assert [t for t in every if f"'{t}'" not in sql] == []
