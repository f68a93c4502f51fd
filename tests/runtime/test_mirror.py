"""The per-machine mirror (``agentmsg sync``) against a real remote: a file store at another state root.

Every write goes to the remote through the CLI with ``AGENTMSG_STORE``; the
local root is only ever written by the mirror (verbatim records, then the
derived files) and by the hooks' outbox.  The checks are byte-for-byte: the
local journals must equal the remote's, so a lost or duplicated record, or a
reordered one, fails.
"""

from __future__ import annotations

import json
import os
import random
import signal
import stat
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
from tests.support.cli_helpers import clean_env, run, run_json
from tests.support.helpers_hooks import REVIEWER_SESSION, run_hook

LEAD = "codex:0199-mirror-lead"
REVIEWER = f"claude-code:{REVIEWER_SESSION}"


class Pair:
    """A remote root (the "server") and a local replica root, with CLI helpers for each."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.remote, self.local = tmp, tmp / "remote", tmp / "local"
        self.url = f"file://{self.remote}"
        self.collab = ""

    def env(self, **extra: str | None) -> dict[str, str | None]:
        return {"AGENTMSG_STORE": self.url, "AGENTMSG_NO_MIRROR": "1", "HOME": str(self.tmp), **extra}

    def cli(self, *args: str, **extra: str | None) -> dict:
        code, doc, err = run_json(*args, root=self.local, env=self.env(**extra))
        assert code == 0, err
        return doc["result"]

    def send(self, to: str, subject: str, who: str = LEAD, kind: str = "request") -> str:
        doc = self.cli("send", "--collab", self.collab, "--self", who, "--to", to, "--subject", subject,
                       "--body", f"body of {subject}", "--kind", kind)
        return str(doc["results"][0]["id"])

    def sync_once(self) -> dict:
        code, doc, err = run_json("sync", "--once", root=self.local, env=self.env())
        assert code == 0, err
        return doc["result"]

    def journals(self, root: Path) -> dict[str, bytes]:
        base = root / "collabs"
        return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*.jsonl"))}

    def views(self, root: Path) -> tuple[dict[str, bytes], str]:
        md = root / "collabs" / self.collab / "collaboration.md"
        return self.journals(root), md.read_text() if md.exists() else ""

    def wait_same(self, timeout: float = 30) -> None:
        """Until a running mirror has caught up (journals, then the transcript it appends after them)."""
        deadline = time.monotonic() + timeout
        while self.views(self.local) != self.views(self.remote) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assert_same()

    def assert_same(self) -> None:
        remote, local = self.journals(self.remote), self.journals(self.local)
        assert remote == local
        for name in ("collaboration.md", "registry.yaml"):
            assert (self.remote / "collabs" / self.collab / name).read_text() == \
                   (self.local / "collabs" / self.collab / name).read_text(), name
        code, doc, err = run_json("verify", root=self.local, env={"HOME": str(self.tmp)})
        assert code == 0 and doc["result"]["findings"] == [], (err, doc)


def _progress(root: Path) -> int:
    """Bytes under collabs/ while a mirror writes there: a temporary file may vanish between listing and stat."""
    total = 0
    for p in (root / "collabs").rglob("*"):
        try:
            st = p.lstat()
        except FileNotFoundError:
            continue
        total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    return total


def kill_mid_stream(env: dict[str, str], root: Path, *, rounds: int = 6, seed: int = 8) -> int:
    """Run ``sync --once`` and SIGKILL it as soon as it has written something new, until one finishes;
    returns how many were killed.  Each kill lands mid-import: records or their views half done."""
    rng = random.Random(seed)
    kills, seen = 0, _progress(root)
    for _ in range(rounds):
        proc = subprocess.Popen([sys.executable, "-m", "agentmsg", "sync", "--once"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while proc.poll() is None and _progress(root) <= seen:
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 0.05))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        seen = _progress(root)
        if proc.returncode == 0:
            break
    return kills


@pytest.fixture
def pair(tmp_path: Path) -> Pair:
    p = Pair(tmp_path)
    p.collab = p.cli("open", "--self", LEAD, "--alias", "lead", "--label", "mirror", "--task", "t")["collab"]
    p.cli("join", "--collab", p.collab, "--self", REVIEWER, "--alias", "reviewer")
    return p


def test_catch_up_copies_records_verbatim_and_is_idempotent(pair: Pair) -> None:
    first = pair.send("reviewer", "first")
    pair.cli("log", "append", "--collab", pair.collab, "--self", LEAD, "--text", "a note")
    pair.send("all", "to everyone", who=REVIEWER, kind="update")
    assert not pair.local.joinpath("collabs").exists()  # nothing was written locally: the CLI wrote the remote

    assert pair.sync_once()["copied"] > 0
    pair.assert_same()
    assert pair.sync_once()["copied"] == 0  # again: nothing new, nothing twice
    pair.assert_same()
    code, doc, err = run_json("status", root=pair.local, env={"HOME": str(pair.tmp)})
    assert code == 0, err
    assert doc["result"]["mirror"] == {"replica_of": pair.url, "running": False, "outbox": 0}
    code, out, err = run("status", root=pair.local, env={"HOME": str(pair.tmp)})
    assert f"replica of: {pair.url}  (mirror not running; outbox: 0)" in out

    # reads on the replica root need no server; the ack goes to the server, then comes down
    code, doc, err = run_json("inbox", "--collab", pair.collab, "--self", REVIEWER, root=pair.local,
                              env={"HOME": str(pair.tmp)})
    assert code == 0, err
    assert [m["id"] for m in doc["result"]["messages"]] == [first]
    pair.cli("ack", "--collab", pair.collab, "--self", REVIEWER, "--message", first)
    pair.send("reviewer", "second")
    pair.sync_once()
    pair.assert_same()
    code, doc, err = run_json("inbox", "--collab", pair.collab, "--self", REVIEWER, root=pair.local,
                              env={"HOME": str(pair.tmp)})
    assert [m["subject"] for m in doc["result"]["messages"]] == ["second"]


def test_replica_refuses_local_message_writes(pair: Pair) -> None:
    pair.sync_once()
    before = pair.journals(pair.local)
    code, _out, err = run("send", "--collab", pair.collab, "--self", LEAD, "--to", "reviewer", "--subject", "s",
                         "--body", "b", root=pair.local, env={"HOME": str(pair.tmp)})
    assert code == 2
    assert "is a replica of" in err and "AGENTMSG_STORE" in err
    code, _out, err = run("log", "append", "--collab", pair.collab, "--self", LEAD, "--text", "n",
                          root=pair.local, env={"HOME": str(pair.tmp)})
    assert code == 2 and "is a replica of" in err
    assert pair.journals(pair.local) == before


def test_a_second_mirror_on_the_same_root_exits_at_once(pair: Pair) -> None:
    first = subprocess.Popen([sys.executable, "-m", "agentmsg", "sync", "--idle-exit", "60s"],
                             env=clean_env(pair.local, pair.env()), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not (pair.local / "replica.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        code, doc, err = run_json("sync", "--once", root=pair.local, env=pair.env())
        assert code == 0, err
        assert doc["result"]["running"] == "already"
        # the running one follows the remote by itself
        pair.send("reviewer", "live")
        pair.wait_same()
        assert (pair.local / ".mirror-running").exists()
        first.terminate()  # SIGTERM: a clean exit, so the next mirror need not rebuild anything
        assert first.wait(timeout=30) == 0
        assert not (pair.local / ".mirror-running").exists()
    finally:
        first.kill()
        first.wait()


def test_sigkill_mid_stream_then_restart_loses_nothing_and_duplicates_nothing(pair: Pair) -> None:
    remote = Mailbox(FileStore(pair.remote))
    lead, rev = Pin(*LEAD.split(":", 1)), Pin(*REVIEWER.split(":", 1))
    for i in range(600):
        remote.send(pair.collab, lead if i % 2 else rev,
                    Draft(to="reviewer" if i % 2 else "lead", subject=f"m{i}", body=f"body {i}", kind="update"))
    assert kill_mid_stream(clean_env(pair.local, pair.env()), pair.local) >= 1
    pair.sync_once()
    pair.assert_same()


def test_hooks_deliver_from_the_mirror_and_their_receipts_reach_the_server_once(pair: Pair) -> None:
    mid = pair.send("reviewer", "please review")
    pair.sync_once()
    receipts = pair.local / "collabs" / pair.collab / "receipts" / "reviewer.jsonl"
    before = receipts.read_bytes() if receipts.exists() else b""

    out = run_hook("claude", "UserPromptSubmit", pair.tmp, pair.local, REVIEWER_SESSION,
                   extra_env={"AGENTMSG_NO_MIRROR": "1"})
    assert out.returncode == 0 and "please review" in out.text and mid in out.text
    assert (receipts.read_bytes() if receipts.exists() else b"") == before  # the journal is the server's copy
    waiting = outbox.pending(str(pair.local))
    assert [e["stream"] for e in waiting] == ["receipts/reviewer", "receipts/reviewer"]  # presented, complete

    # a mirror that pushes and dies before it sees its records come back: the next one must not push again
    Mirror(FileStore(pair.local), FileStore(pair.remote), pair.url).push()
    done = pair.sync_once()
    assert done["pushed"] == 0 and done["outbox"] == 0
    stored = [json.loads(line) for line in
              (pair.remote / "collabs" / pair.collab / "receipts" / "reviewer.jsonl").read_text().splitlines()]
    for entry in waiting:
        assert sum(r.get("outbox") == entry["id"] for r in stored) == len(entry["items"])
    presented = [r for r in stored if r["type"] == "presented"]
    assert [r["message"] for r in presented] == [mid]
    pair.assert_same()
    assert outbox.pending(str(pair.local)) == []

    # the next prompt does not show it again (the hook's own state), and nothing new is queued
    again = run_hook("claude", "UserPromptSubmit", pair.tmp, pair.local, REVIEWER_SESSION,
                     extra_env={"AGENTMSG_NO_MIRROR": "1"})
    assert again.stdout == ""


def test_the_cli_starts_the_mirror_and_it_exits_when_idle(pair: Pair) -> None:
    env = {"AGENTMSG_STORE": pair.url, "HOME": str(pair.tmp), "AGENTMSG_SYNC_IDLE_EXIT": "2s",
           "AGENTMSG_NO_MIRROR": None}
    code, _doc, err = run_json("send", "--collab", pair.collab, "--self", LEAD, "--to", "reviewer",
                                "--subject", "auto", "--body", "b", "--kind", "request", root=pair.local, env=env)
    assert code == 0, err
    from agentmsg.runtime import doorbell

    # the send started it: seen running (it stays at least its 2 s idle time), then caught up; not asked after
    # catching up, when a loaded machine may have let those 2 s pass already
    deadline = time.monotonic() + 30
    while not doorbell.mirroring(str(pair.local)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert doorbell.mirroring(str(pair.local)), "the send started no mirror"
    pair.wait_same()
    deadline = time.monotonic() + 30
    while doorbell.mirroring(str(pair.local)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not doorbell.mirroring(str(pair.local)), "the mirror did not exit when idle"


@pytest.mark.parametrize("how", ["launcher", "AGENTMSG_CLI"])
def test_session_start_hook_starts_the_mirror(pair: Pair, tmp_path: Path, how: str) -> None:
    """The hook (stdlib only) spawns ``agentmsg sync`` through the plugin's launcher, or AGENTMSG_CLI;
    on a root marked a replica it needs no AGENTMSG_STORE (the mark names the store)."""
    pair.sync_once()  # marks the root a replica
    pair.send("reviewer", "while no mirror ran")
    extra = {"AGENTMSG_SYNC_IDLE_EXIT": "2s"}
    if how == "AGENTMSG_CLI":
        cli = tmp_path / "agentmsg-cli"
        cli.write_text(f"#!/bin/sh\nPYTHONPATH={Path(__file__).resolve().parents[2]} exec {sys.executable} "
                       f"-m agentmsg \"$@\"\n")
        cli.chmod(0o755)
        extra.update(AGENTMSG_STORE=pair.url, AGENTMSG_CLI=str(cli))
    out = run_hook("claude", "SessionStart", pair.tmp, pair.local, REVIEWER_SESSION, extra_env=extra)
    assert out.returncode == 0
    pair.wait_same()
    from agentmsg.runtime import doorbell

    deadline = time.monotonic() + 30
    while doorbell.mirroring(str(pair.local)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not doorbell.mirroring(str(pair.local)), "the hook-started mirror did not exit when idle"


def test_watch_with_a_remote_store_wakes_on_the_remote(pair: Pair) -> None:
    env = clean_env(pair.local, pair.env())
    watch = subprocess.Popen([sys.executable, "-m", "agentmsg", "watch", "--collab", pair.collab, "--self",
                              REVIEWER, "--timeout", "30s", "--json"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    time.sleep(1.0)
    mid = pair.send("reviewer", "wake up")
    out, err = watch.communicate(timeout=40)
    assert watch.returncode == 0, err
    assert [e["id"] for e in json.loads(out)["result"]["events"]] == [mid]
    assert not (pair.local / "collabs").exists()  # it waited on the remote, not on this root


def test_a_forked_history_stops_the_mirror(pair: Pair) -> None:
    pair.sync_once()
    events = pair.local / "collabs" / pair.collab / "collab.jsonl"
    lines = events.read_bytes().splitlines(keepends=True)
    rec = json.loads(lines[-1])
    rec["ts"] = "2000-01-01T00:00:00.000Z"
    from agentmsg import records

    rec["sum"] = records.checksum(rec)
    events.write_bytes(b"".join(lines[:-1]) + records.encode(rec))
    pair.cli("log", "append", "--collab", pair.collab, "--self", LEAD, "--text", "after the fork")
    pair.send("reviewer", "x")
    pair.cli("join", "--collab", pair.collab, "--self", "human:carol", "--alias", "carol")
    code, _out, err = run("sync", "--once", root=pair.local, env=pair.env())
    assert code == 13 and "diverged" in err
    assert os.path.getsize(events) == sum(len(line) for line in lines)


def test_the_mirror_works_over_the_port_from_a_memory_store(tmp_path: Path) -> None:
    """Nothing in the mirror is file-specific on the remote side: the in-memory store is a Replica too."""
    from agentmsg.backends.memory import MemoryStore

    remote = MemoryStore()
    box = Mailbox(remote)
    lead, rev = Pin(*LEAD.split(":", 1)), Pin(*REVIEWER.split(":", 1))
    collab = box.open(lead, "lead", "mem", "t", None).collab
    box.join(collab, rev, "reviewer")
    sent = [box.send(collab, lead, Draft(to="reviewer", subject=f"s{i}", body="b", kind="request"))[0].message
            for i in range(5)]
    box.ack(collab, rev, [sent[0].id])
    box.log_append(collab, lead, "a note", None)
    local = FileStore(tmp_path / "local")
    mirror = Mirror(local, remote, "memory:", page=2)  # small pages: the cseq merge runs across pages
    assert mirror.round()[0] == sum(remote.streams(collab).values())
    for stream, last in remote.streams(collab).items():
        assert local.records_since(collab, stream, 0) == remote.records_since(collab, stream, 0)
        assert local.streams(collab)[stream] == last
    assert local.verify(collab)[1] == []
    assert [m.id for m in local.unacked(collab, "reviewer", limit=10).messages] == [m.id for m in sent[1:]]
    assert mirror.round()[0] == 0


def test_stop_slots_spent_on_a_replica_are_never_reused_and_reach_the_server_once(pair: Pair) -> None:
    pair.cli("delivery", "enable", "--collab", pair.collab, "--self", REVIEWER, "--expires-in", "30m",
             "--max-continuations", "3")
    pair.send("reviewer", "first request")
    pair.sync_once()
    stop = run_hook("claude", "Stop", pair.tmp, pair.local, REVIEWER_SESSION, extra_env={"AGENTMSG_NO_MIRROR": "1"})
    assert "slot 1 of 3" in stop.text and "first request" in stop.text
    pair.send("reviewer", "second request")
    pair.sync_once()  # pushes slot 1 and brings it back; the second Stop counts it from the journal
    stop = run_hook("claude", "Stop", pair.tmp, pair.local, REVIEWER_SESSION, extra_env={"AGENTMSG_NO_MIRROR": "1"})
    assert "slot 2 of 3" in stop.text
    pair.send("reviewer", "third request")
    pair.sync_once()
    # not yet pushed: the third Stop counts slot 3 from the outbox... and a fourth finds the envelope spent
    stop = run_hook("claude", "Stop", pair.tmp, pair.local, REVIEWER_SESSION, extra_env={"AGENTMSG_NO_MIRROR": "1"})
    assert "slot 3 of 3" in stop.text
    pair.send("reviewer", "fourth request")
    code, _doc, err = run_json("sync", "--once", root=pair.local, env=pair.env())
    assert code == 0, err
    stop = run_hook("claude", "Stop", pair.tmp, pair.local, REVIEWER_SESSION, extra_env={"AGENTMSG_NO_MIRROR": "1"})
    assert stop.stdout == ""
    delivery = [json.loads(line) for line in
                (pair.remote / "collabs" / pair.collab / "delivery.jsonl").read_text().splitlines()]
    assert [r["slot"] for r in delivery if r["type"] == "delivery-slot"] == [1, 2, 3]
    pair.assert_same()


def test_an_unpushed_slot_counts_before_it_comes_back(pair: Pair) -> None:
    pair.cli("delivery", "enable", "--collab", pair.collab, "--self", REVIEWER, "--expires-in", "30m",
             "--max-continuations", "2")
    pair.send("reviewer", "one")
    pair.sync_once()
    first = run_hook("claude", "Stop", pair.tmp, pair.local, REVIEWER_SESSION, extra_env={"AGENTMSG_NO_MIRROR": "1"})
    assert "slot 1 of 2" in first.text
    pair.send("reviewer", "two")
    # the mirror copies the new message down but has not pushed the slot yet (its records are not back)
    Mirror(FileStore(pair.local), FileStore(pair.remote), pair.url).pull()
    second = run_hook("claude", "Stop", pair.tmp, pair.local, REVIEWER_SESSION, extra_env={"AGENTMSG_NO_MIRROR": "1"})
    assert "slot 2 of 2" in second.text
    pair.sync_once()
    delivery = [json.loads(line) for line in
                (pair.remote / "collabs" / pair.collab / "delivery.jsonl").read_text().splitlines()]
    assert [r["slot"] for r in delivery if r["type"] == "delivery-slot"] == [1, 2]


def test_a_mirror_never_adopts_a_root_with_history_of_its_own_nor_switches_servers(pair: Pair) -> None:
    own = pair.tmp / "own"
    code, _doc, err = run_json("open", "--self", LEAD, "--alias", "lead", "--label", "l", "--task", "t", root=own,
                               env={"HOME": str(pair.tmp)})
    assert code == 0, err
    before = pair.journals(own)
    code, _out, err = run("sync", "--once", root=own, env=pair.env())
    assert code == 2 and "holds collaborations of its own" in err
    assert pair.journals(own) == before and not (own / "replica.json").exists()

    pair.sync_once()
    other = f"file://{pair.tmp / 'other-server'}"
    code, _out, err = run("sync", "--once", root=pair.local, env=pair.env(AGENTMSG_STORE=other))
    assert code == 2 and f"mirrors {pair.url}, not {other}" in err


def test_a_torn_import_is_cut_back_and_copied_again_whole(pair: Pair) -> None:
    """A mirror killed inside one write leaves part of a record (the kernel stops a write between pages
    when a fatal signal is pending); the next import cuts it off and copies the records again."""
    pair.send("reviewer", "one")
    pair.sync_once()
    pair.send("reviewer", "two")
    inbox = pair.local / "collabs" / pair.collab / "inbox" / "reviewer.jsonl"
    remote_inbox = pair.remote / "collabs" / pair.collab / "inbox" / "reviewer.jsonl"
    whole = remote_inbox.read_bytes()
    assert whole.startswith(inbox.read_bytes())
    with inbox.open("ab") as f:
        f.write(whole[len(inbox.read_bytes()):][:40])  # the start of record two, no newline
    pair.sync_once()
    pair.assert_same()


def test_an_outbox_entry_the_store_refuses_is_set_aside_and_never_blocks_the_rest(pair: Pair) -> None:
    mid = pair.send("reviewer", "shown")
    pair.sync_once()
    gone = "0c0ffee0-0000-4000-8000-000000000000"  # a collaboration the store does not have
    outbox.put(str(pair.local), gone, "receipts/reviewer", [{"type": "presented", "message": mid}], entry_id="x1")
    run_hook("claude", "UserPromptSubmit", pair.tmp, pair.local, REVIEWER_SESSION,
             extra_env={"AGENTMSG_NO_MIRROR": "1"})
    done = pair.sync_once()
    assert done["outbox"] == 0 and done["pushed"] == 2  # presented and attempt-complete went through
    rejected = [json.loads(line) for line in (pair.local / "outbox.rejected.jsonl").read_text().splitlines()]
    assert [e["id"] for e in rejected] == ["x1"]
    pair.assert_same()


def test_the_launchers_fast_path_wakes_when_the_mirror_brings_mail(pair: Pair) -> None:
    """An idle Claude session skips Python at the launcher (docs/DELIVERY.md, "Fast path"); a message the
    mirror copies down must invalidate that marker, as a local send does."""
    pair.sync_once()
    quiet = run_hook("claude", "UserPromptSubmit", pair.tmp, pair.local, REVIEWER_SESSION,
                     extra_env={"AGENTMSG_NO_MIRROR": "1"})
    assert quiet.stdout == ""
    marker = pair.local / "idle" / "claude-code" / f"{REVIEWER_SESSION}.idle"
    assert marker.is_file()
    mid = pair.send("reviewer", "arrives through the mirror")
    pair.sync_once()
    out = run_hook("claude", "UserPromptSubmit", pair.tmp, pair.local, REVIEWER_SESSION,
                   extra_env={"AGENTMSG_NO_MIRROR": "1"})
    assert mid in out.text and "arrives through the mirror" in out.text


def test_a_claim_made_on_another_machine_reaches_this_machines_index_and_refuses_the_edit(pair: Pair) -> None:
    """Claims across mirrored machines (issue 28): the pre-tool hook reads only this machine's claims index, so
    the mirror rewrites it when the records it copies claim or release, and the edit is refused here."""
    from tests.hooks.test_pretool import edit, hook
    from tests.support import gitrepos

    repo = gitrepos.repo(pair.tmp / "repo")
    other = pair.tmp / "machine-c"  # another machine's root, writing to the same store
    sid = REVIEWER.split(":", 1)[1]
    claim_env = {"AGENTMSG_STORE": pair.url, "AGENTMSG_NO_MIRROR": "1", "HOME": str(pair.tmp)}
    code, _doc, err = run_json("claim", "src/retry.py", "--reason", "mine for now", "--collab", pair.collab,
                               "--self", LEAD, root=other, env=claim_env, cwd=repo)
    assert code == 0, err
    assert not (pair.local / "claims.json").exists()
    pair.sync_once()
    index = json.loads((pair.local / "claims.json").read_text())
    assert [(c["alias"], c["pattern"]) for c in index["claims"]] == [("lead", "src/retry.py")]
    assert "claimed exclusively by lead" in hook(pair.local, "claude", edit(repo, sid))
    code, _doc, err = run_json("release", "src/retry.py", "--collab", pair.collab, "--self", LEAD, root=other,
                               env=claim_env, cwd=repo)
    assert code == 0, err
    pair.sync_once()
    assert not (pair.local / "claims.json").exists()  # no live claim left: the launcher's "nothing to check"
    assert hook(pair.local, "claude", edit(repo, sid)) == ""
