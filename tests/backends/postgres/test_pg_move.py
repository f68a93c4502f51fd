"""``agentmsg db move``: a collaboration from the file store to PostgreSQL, history and hash chains intact."""

from __future__ import annotations

import uuid
from pathlib import Path

from agentmsg.backends.file.store import FileStore
from agentmsg.backends.postgres.store import PgStore
from tests.support.cli_helpers import run, run_json

A, B, C = "codex:mv-a", "claude-code:mv-b", "human:mv-c"


def test_move_keeps_every_record_and_the_collaboration_goes_on(pg_url: str, tmp_path: Path) -> None:
    code, doc, _ = run_json("open", "--alias", "driver", "--label", "l", "--task", "t", "--self", A, root=tmp_path)
    cid = doc["result"]["collab"]
    for pin, alias in ((B, "reviewer"), (C, "carol")):
        assert run("join", "--collab", cid, "--alias", alias, "--self", pin, root=tmp_path).code == 0
    ids = []
    for i, to in enumerate(("reviewer", "reviewer", "all", "carol")):
        mid = str(uuid.uuid4())
        ids.append(mid)
        assert run("send", "--collab", cid, "--to", to, "--subject", f"s{i}", "--body", f"body {i}", "--id", mid,
                   "--self", A, root=tmp_path).code == 0
    assert run("ack", "--message", ids[0], "--collab", cid, "--self", B, root=tmp_path).code == 0
    assert run("log", "append", "--collab", cid, "--self", C, "--text", "a note", root=tmp_path).code == 0
    assert run("leave", "--collab", cid, "--self", C, root=tmp_path).code == 0

    code, doc, _ = run_json("db", "move", "--collab", cid, "--store", pg_url, root=tmp_path)
    assert code == 0, doc
    assert doc["result"]["streams"]["inbox/reviewer"] == 3 and doc["result"]["streams"]["events"] == 4

    files, pg = FileStore(tmp_path), PgStore(pg_url)
    assert pg.streams(cid) == files.streams(cid)
    for stream in files.streams(cid):  # the very records, seq, prev, sum, ts, cseq and ackn included
        assert pg.records_since(cid, stream, 0) == files.records_since(cid, stream, 0), stream
    assert files.verify(cid)[1] == [] and pg.verify(cid)[1] == []

    env = {"AGENTMSG_STORE": pg_url}
    code, doc, _ = run_json("inbox", "--collab", cid, "--self", B, root=tmp_path / "elsewhere", env=env)
    assert code == 0 and [m["subject"] for m in doc["result"]["messages"]] == ["s1", "s2"]  # s0 was acked
    # the collaboration goes on in the database: sequences and the collaboration order continue
    code, doc, _ = run_json("send", "--collab", cid, "--to", "reviewer", "--subject", "after", "--body", "moved",
                            "--self", A, root=tmp_path / "elsewhere", env=env)
    assert code == 0
    last = pg.records_since(cid, "inbox/reviewer", 3)
    assert [r["seq"] for r in last] == [4]
    assert last[0]["cseq"] == 1 + max(r["cseq"] for s in ("events", "notes", "inbox/reviewer", "inbox/carol")
                                      for r in files.records_since(cid, s, 0))
    assert run("verify", "--collab", cid, root=tmp_path / "elsewhere", env=env).code == 0
    # a second move finds it there and stores nothing
    code, _out, err = run("db", "move", "--collab", cid, "--store", pg_url, root=tmp_path)
    assert code == 2 and "already has records" in err
    pg.close()
