"""The PostgreSQL store through the real CLI (a subprocess): choosing it, migrating, refusing, messaging.

Every test runs against the session's throwaway server (``pg_cluster`` in
conftest, tests/support/pg.py), each in a database of its own.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from agentmsg.errors import SchemaMismatch, StoreUnreachable
from tests.support.cli_helpers import run, run_json

A, B = "codex:pg-a", "claude-code:pg-b"


def test_migrate_records_the_version_and_a_second_run_applies_nothing(pg_cluster, tmp_path: Path) -> None:
    url = pg_cluster.url(pg_cluster.new_db(migrated=False))
    code, doc, _ = run_json("status", "--store", url, root=tmp_path)
    assert code == SchemaMismatch.code and "agentmsg db migrate" in doc["error"]["message"]
    code, doc, _ = run_json("doctor", "--store", url, root=tmp_path)
    assert doc["result"]["store"]["reachable"] is True and doc["result"]["store"]["schema"] is None
    assert any("agentmsg db migrate" in w for w in doc["result"]["warnings"])
    code, doc, _ = run_json("db", "migrate", "--store", url, root=tmp_path)
    assert code == 0 and doc["result"]["from"] == 0 and doc["result"]["applied"][0] == "001_records.sql"
    to = doc["result"]["to"]
    assert pg_cluster.sql("SELECT max(version) FROM agentmsg_migrations", db=url.split("/")[3].split("?")[0]) == [(to,)]
    code, doc, _ = run_json("db", "migrate", "--store", url, root=tmp_path)
    assert code == 0 and doc["result"] == {"from": to, "to": to, "applied": [], "store": doc["result"]["store"]}


def test_db_migrate_without_a_database_is_bad_input(tmp_path: Path) -> None:
    code, _out, err = run("db", "migrate", root=tmp_path)
    assert code == 2 and "--store" in err


def test_a_schema_newer_than_the_client_is_refused_with_its_own_code(pg_cluster, tmp_path: Path) -> None:
    db = pg_cluster.new_db()
    url = pg_cluster.url(db)
    assert run("open", "--alias", "a", "--label", "l", "--task", "t", "--self", A, "--store", url,
               root=tmp_path).code == 0
    pg_cluster.sql("INSERT INTO agentmsg_migrations (version, name) VALUES (999, '999_future.sql')", db=db)
    code, _out, err = run("open", "--alias", "a", "--label", "l", "--task", "t", "--self", A, "--store", url,
                          root=tmp_path)
    assert code == SchemaMismatch.code and "newer than this client" in err
    assert pg_cluster.sql("SELECT count(*) FROM agentmsg_collabs", db=db) == [(1,)]  # nothing written
    code, _out, err = run("db", "migrate", "--store", url, root=tmp_path)
    assert code == SchemaMismatch.code and "newer" in err


def test_store_selection_status_and_doctor_say_which_and_whether_reachable(pg_url: str, tmp_path: Path) -> None:
    code, doc, _ = run_json("status", root=tmp_path)
    assert code == 0 and doc["result"]["store"]["store"] == "file"
    code, doc, _ = run_json("status", root=tmp_path, env={"AGENTMSG_STORE": pg_url})
    assert code == 0 and doc["result"]["store"]["store"] == "postgresql"
    assert doc["result"]["store"]["reachable"] is True and doc["result"]["store"]["schema"] >= 1
    code, out, _ = run("status", "--store", pg_url, root=tmp_path)
    assert code == 0 and "store: postgresql" in out and "(reachable)" in out
    gone = pg_url.replace("host=", "host=/nonexistent")
    code, doc, _ = run_json("doctor", "--store", gone, root=tmp_path)
    assert doc["result"]["store"]["reachable"] is False and doc["result"]["verdict"] == "error"
    assert any("cannot be reached" in w for w in doc["result"]["warnings"])
    code, _out, err = run("status", "--store", gone, root=tmp_path)
    assert code == StoreUnreachable.code and err.startswith("store unreachable:")
    code, _out, err = run("status", "--store", "mysql://x/y", root=tmp_path)
    assert code == 2 and "postgresql://" in err


def test_messaging_through_the_cli_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    env = {"AGENTMSG_STORE": pg_url}
    code, doc, _ = run_json("open", "--alias", "driver", "--label", "l", "--task", "t", "--self", A, root=tmp_path,
                            env=env)
    assert code == 0
    cid = doc["result"]["collab"]
    assert run("join", "--collab", cid, "--alias", "reviewer", "--self", B, root=tmp_path, env=env).code == 0
    mid = str(uuid.uuid4())
    send = ("send", "--collab", cid, "--to", "reviewer", "--subject", "s", "--body", "hello", "--id", mid,
            "--self", A)
    code, doc, _ = run_json(*send, root=tmp_path, env=env)
    assert code == 0
    code, doc, _ = run_json(*send, root=tmp_path, env=env)  # the same id again: stored once
    assert code == 0
    code, _out, err = run("send", "--collab", cid, "--to", "bob", "--subject", "s", "--body", "x", "--self", A,
                          root=tmp_path, env=env)
    assert code == 4 and err.startswith("FAILED(unknown agent)")
    code, doc, _ = run_json("inbox", "--collab", cid, "--self", B, root=tmp_path, env=env)
    assert code == 0 and [m["id"] for m in doc["result"]["messages"]] == [mid]
    assert run("ack", "--message", mid, "--collab", cid, "--self", B, root=tmp_path, env=env).code == 0
    code, doc, _ = run_json("verify", "--collab", cid, root=tmp_path, env=env)
    assert code == 0, doc
    assert not (tmp_path / "collabs").exists()  # nothing went to the file store


def test_the_file_store_never_imports_the_driver(tmp_path: Path, child_env: dict[str, str]) -> None:
    """Without a store URL, a command runs without psycopg (it costs ~200 ms to import)."""
    import subprocess
    import sys

    code = ("import sys; from agentmsg.cli.main import main; rc = main(['status', '--json']); "
            "sys.exit(3 if 'psycopg' in sys.modules else rc)")
    env = {k: v for k, v in child_env.items() if not k.startswith("AGENTMSG_")} | {"AGENTMSG_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
