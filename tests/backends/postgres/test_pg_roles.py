"""Identity on a shared server: each refusal, through the real CLI, as a second (or third) PostgreSQL role.

alice (machine A) opens a collaboration and lets bob (machine B) in; mallory
is a client of the same server but in nothing.  The server, not the
client, refuses: a role cannot read a collaboration it is not in, send as an
alias bound to another role, ack another role's messages, or change history.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest

from agentmsg.errors import IdentityError, NotFound
from tests.support.cli_helpers import run, run_json

A_PIN, B_PIN = "codex:roles-a", "claude-code:roles-b"


@pytest.fixture
def server(pg_cluster):
    db = pg_cluster.new_db()
    tag = uuid.uuid4().hex[:8]
    roles = {name: pg_cluster.add_role(f"{name}_{tag}") for name in ("alice", "bob", "mallory")}
    return {name: pg_cluster.url(db, role) for name, role in roles.items()} | {"roles": roles}


def cli(url: str, root: Path, *args: str):
    return run(*args, root=root, env={"AGENTMSG_STORE": url})


def test_each_role_is_refused_what_is_not_its_own(server: dict, tmp_path: Path) -> None:
    a, b, m = server["alice"], server["bob"], server["mallory"]
    ra, rb, rm = tmp_path / "a", tmp_path / "b", tmp_path / "m"
    code, doc, _ = run_json("open", "--alias", "driver", "--label", "l", "--task", "t", "--self", A_PIN, root=ra,
                            env={"AGENTMSG_STORE": a})
    assert code == 0
    cid = doc["result"]["collab"]

    # not in it yet: bob can neither read nor join, and cannot let himself in
    # (a pin's read of a collaboration it is not in is refused whether or not it exists: the read rule's 9)
    assert cli(b, rb, "status", "--collab", cid, "--self", B_PIN).code == IdentityError.code
    assert cli(b, rb, "join", "--collab", cid, "--alias", "reviewer", "--self", B_PIN).code == NotFound.code
    assert cli(b, rb, "db", "grant", "--collab", cid, "--role", server["roles"]["bob"]).code == NotFound.code
    assert cli(a, ra, "db", "grant", "--collab", cid, "--role", server["roles"]["bob"]).code == 0
    assert cli(b, rb, "join", "--collab", cid, "--alias", "reviewer", "--self", B_PIN).code == 0

    mid = str(uuid.uuid4())
    assert cli(a, ra, "send", "--collab", cid, "--to", "reviewer", "--subject", "s", "--body", "secret plan",
               "--id", mid, "--self", A_PIN).code == 0

    # mallory reads nothing: not the collaboration, not the message, not by search
    code, _out, err = cli(m, rm, "inbox", "--collab", cid, "--self", B_PIN)
    assert code == IdentityError.code and cid in err  # the read rule: refused, nothing said of what exists
    code, doc, _ = run_json("search", "secret", root=rm, env={"AGENTMSG_STORE": m})
    assert code == 0 and doc["result"]["hits"] == []
    code, doc, _ = run_json("status", root=rm, env={"AGENTMSG_STORE": m})
    assert code == 0 and doc["result"]["collabs"] == []

    # bob may not send as driver (bound to alice), even with alice's pin in hand
    code, _out, err = cli(b, rb, "send", "--collab", cid, "--to", "reviewer", "--subject", "s", "--body", "forged",
                          "--self", A_PIN)
    assert code == IdentityError.code and "sender driver is not bound to this role" in err
    # alice may not ack bob's message, even with bob's pin in hand
    code, _out, err = cli(a, ra, "ack", "--message", mid, "--collab", cid, "--self", B_PIN)
    assert code == IdentityError.code
    # nor may bob rebind alice's alias by leaving as her
    assert cli(b, rb, "leave", "--collab", cid, "--self", A_PIN).code == IdentityError.code

    # what is theirs goes through
    assert cli(b, rb, "ack", "--message", mid, "--collab", cid, "--self", B_PIN).code == 0
    code, doc, _ = run_json("inbox", "--collab", cid, "--self", B_PIN, root=rb, env={"AGENTMSG_STORE": b})
    assert code == 0 and doc["result"]["messages"] == []
    code, doc, _ = run_json("show", mid, "--collab", cid, root=ra, env={"AGENTMSG_STORE": a})
    assert code == 0 and "acknowledged" in str(doc["result"])
    code, doc, _ = run_json("verify", "--collab", cid, root=rb, env={"AGENTMSG_STORE": b})
    assert code == 0

    # nobody rewrites history: no grant, and the trigger behind it
    for url in (a, b, m):
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in ("UPDATE agentmsg_records SET body = body", "DELETE FROM agentmsg_records",
                              "DELETE FROM agentmsg_members", "UPDATE agentmsg_aliases SET role = session_user"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement)
    with psycopg.connect(b, autocommit=True) as conn:  # opened, joined, the message, its ack: no refused write
        assert conn.execute("SELECT count(*) FROM agentmsg_records WHERE collab = %s", (cid,)).fetchone() == (4,)
    with psycopg.connect(m, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM agentmsg_records").fetchone() == (0,)


def test_only_the_role_holding_an_alias_reports_its_presence_and_the_server_stamps_it(server: dict,
                                                                                        tmp_path: Path) -> None:
    from agentmsg.backends.postgres.store import PgStore

    a, b, m = server["alice"], server["bob"], server["mallory"]
    code, doc, _ = run_json("open", "--alias", "driver", "--label", "l", "--task", "t", "--self", A_PIN,
                            root=tmp_path / "a", env={"AGENTMSG_STORE": a})
    assert code == 0
    cid = doc["result"]["collab"]
    assert cli(a, tmp_path / "a", "db", "grant", "--collab", cid, "--role", server["roles"]["bob"]).code == 0
    assert cli(b, tmp_path / "b", "join", "--collab", cid, "--alias", "reviewer", "--self", B_PIN).code == 0
    alice, bob, mallory = PgStore(a), PgStore(b), PgStore(m)
    alice.report_presence(cid, "driver", {"pin": A_PIN, "state": "idle", "quiet": 2.0})
    bob.report_presence(cid, "reviewer", {"pin": B_PIN, "state": "working", "quiet": 0.0})
    with pytest.raises(IdentityError):  # bob's machine may not say how alice's session is
        bob.report_presence(cid, "driver", {"pin": A_PIN, "state": "gone", "quiet": None})
    with pytest.raises(IdentityError):
        mallory.report_presence(cid, "driver", {"pin": A_PIN, "state": "gone", "quiet": None})
    assert mallory.presence(cid) == {}  # not in it: reads nothing
    seen = bob.presence(cid)
    assert {k: (v["state"], v["pin"]) for k, v in seen.items()} == {"driver": ("idle", A_PIN),
                                                                    "reviewer": ("working", B_PIN)}
    # a report cannot be made to look fresher (or another role's) than it is: the server stamps both
    with psycopg.connect(b, autocommit=True) as conn:
        assert conn.execute("UPDATE agentmsg_presence SET state = 'gone' WHERE alias = 'driver'").rowcount == 0
        conn.execute("UPDATE agentmsg_presence SET reported_at = now() + interval '1 day', role = 'x' "
                     "WHERE alias = 'reviewer'")
        row = conn.execute("SELECT reported_at <= now(), role = session_user FROM agentmsg_presence "
                           "WHERE alias = 'reviewer'").fetchone()
    assert row == (True, True)
    assert bob.presence(cid)["driver"]["state"] == "idle"
    for store in (alice, bob, mallory):
        store.close()
