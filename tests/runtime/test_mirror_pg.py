"""The mirror (``agentmsg sync``) against PostgreSQL: the session's throwaway server (tests/support/pg.py).

Writes go to the server through the CLI (``AGENTMSG_STORE``); the local
root is written only by the mirror and the hooks' outbox.  Every check
compares the local journals record for record with the server's streams,
then runs ``verify`` on the local root.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentmsg.backends.file import outbox
from agentmsg.backends.file.store import FileStore
from agentmsg.domain.values import Draft, Pin
from agentmsg.resident.mirror import Mirror
from agentmsg.service.messaging import Mailbox
from tests.runtime.test_mirror import kill_mid_stream
from tests.support.cli_helpers import clean_env, run_json
from tests.support.helpers_hooks import REVIEWER_SESSION, run_hook

LEAD = "codex:0199-mirror-pg-lead"
REVIEWER = f"claude-code:{REVIEWER_SESSION}"
ALL = 1 << 40


class Setup:
    def __init__(self, url: str, tmp: Path) -> None:
        from agentmsg.backends.postgres.store import PgStore

        self.url, self.tmp, self.local = url, tmp, tmp / "local"
        self.server = PgStore(url)
        self.collab = ""

    def env(self, **extra: str | None) -> dict[str, str | None]:
        return {"AGENTMSG_STORE": self.url, "HOME": str(self.tmp), **extra}

    def cli(self, *args: str) -> dict:
        code, doc, err = run_json(*args, root=self.local, env=self.env())
        assert code == 0, err
        return doc["result"]

    def send(self, subject: str) -> str:
        doc = self.cli("send", "--collab", self.collab, "--self", LEAD, "--to", "reviewer", "--subject", subject,
                       "--body", f"body of {subject}", "--kind", "request")
        return str(doc["results"][0]["id"])

    def sync_once(self) -> dict:
        code, doc, err = run_json("sync", "--once", root=self.local, env=self.env())
        assert code == 0, err
        return doc["result"]

    def same(self) -> bool:
        local = FileStore(self.local)
        if self.collab not in local.collabs():
            return False
        streams = self.server.streams(self.collab)
        return local.streams(self.collab) == streams and all(
            local.records_since(self.collab, s, 0, ALL) == self.server.records_since(self.collab, s, 0, ALL)
            for s in streams)

    def assert_same(self, timeout: float = 0) -> None:
        deadline = time.monotonic() + timeout
        while not self.same() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.same()
        code, doc, err = run_json("verify", root=self.local, env={"HOME": str(self.tmp)})
        assert code == 0 and doc["result"]["findings"] == [], (err, doc)


@pytest.fixture
def pg(pg_url: str, tmp_path: Path) -> Setup:
    s = Setup(pg_url, tmp_path)
    s.collab = s.cli("open", "--self", LEAD, "--alias", "lead", "--label", "pg", "--task", "t")["collab"]
    s.cli("join", "--collab", s.collab, "--self", REVIEWER, "--alias", "reviewer")
    return s


def test_catch_up_from_postgresql_and_hook_receipts_reach_it_once(pg: Setup) -> None:
    mid = pg.send("review this")
    pg.cli("log", "append", "--collab", pg.collab, "--self", LEAD, "--text", "a note")
    assert pg.sync_once()["copied"] > 0
    pg.assert_same()

    out = run_hook("claude", "UserPromptSubmit", pg.tmp, pg.local, REVIEWER_SESSION,
                   extra_env={"AGENTMSG_NO_MIRROR": "1"})
    assert "review this" in out.text and mid in out.text
    waiting = outbox.pending(str(pg.local))
    assert len(waiting) == 2
    from agentmsg.backends.postgres.store import PgStore

    Mirror(FileStore(pg.local), PgStore(pg.url), pg.url).push()  # pushed, then "died" before seeing them back
    done = pg.sync_once()
    assert done["pushed"] == 0 and done["outbox"] == 0
    stored = pg.server.records_since(pg.collab, "receipts/reviewer", 0, ALL)
    for entry in waiting:
        assert sum(r.get("outbox") == entry["id"] for r in stored) == len(entry["items"])
    assert [r["message"] for r in stored if r["type"] == "presented"] == [mid]
    pg.assert_same()


def test_sigkill_mid_stream_from_postgresql(pg: Setup) -> None:
    box = Mailbox(pg.server)
    lead = Pin(*LEAD.split(":", 1))
    for i in range(400):
        box.send(pg.collab, lead, Draft(to="reviewer", subject=f"m{i}", body=f"body {i}", kind="update"))
    assert kill_mid_stream(clean_env(pg.local, pg.env()), pg.local) >= 1
    pg.sync_once()
    pg.assert_same()


def test_server_restart_the_running_mirror_reconnects_by_itself(pg: Setup, pg_cluster) -> None:
    mirror = subprocess.Popen([sys.executable, "-m", "agentmsg", "sync", "--idle-exit", "2m"],
                              env=clean_env(pg.local, pg.env()), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        pg.send("before the restart")
        pg.assert_same(timeout=30)
        pg_cluster.stop()
        time.sleep(1.5)  # the mirror's calls fail meanwhile: it retries with backoff
        assert mirror.poll() is None
        pg_cluster.start()
        pg.server.close()
        after = pg.send("after the restart")
        pg.assert_same(timeout=30)
        assert mirror.poll() is None
        local = FileStore(pg.local)
        assert after in [m.id for m in local.history(pg.collab, "reviewer")]
    finally:
        mirror.terminate()
        _out, err = mirror.communicate(timeout=30)
    assert b"reconnected" in err, err.decode()[-2000:]


def test_watch_on_postgresql_wakes_on_notify(pg: Setup) -> None:
    watch = subprocess.Popen([sys.executable, "-m", "agentmsg", "watch", "--collab", pg.collab, "--self", REVIEWER,
                              "--timeout", "30s", "--json"], env=clean_env(pg.local, pg.env()),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(1.0)
    t0 = time.monotonic()
    mid = pg.send("wake")
    out, err = watch.communicate(timeout=40)
    assert watch.returncode == 0, err
    assert [e["id"] for e in json.loads(out)["result"]["events"]] == [mid]
    assert time.monotonic() - t0 < 10
