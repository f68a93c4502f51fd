"""SIGKILL senders at random moments; nothing reported stored is ever lost.

``test_sigkill_store_sender``: 200 trials.  Each trial starts a sender
process (``tests/support/store_worker.py loop``, which calls ``FileStore.send`` in a
loop and prints ``STORED <id> <seq>`` after each send returns), kills it with
SIGKILL after a random (seeded) delay, then checks that every id it printed
is stored, that the inbox reads cleanly (at most a torn tail, reported as
torn), and that the next send continues the sequence without a gap.

``test_sigkill_cli_send``: the same against the real ``agentmsg send``
process, fewer trials (a CLI process costs ~0.3 s), plus the retry an agent
would do: re-sending the same ``--id`` after the kill stores it exactly once.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from agentmsg import records
from agentmsg.backends.file.journal import Journal
from tests.support.facade import Draft

WORKER = Path(__file__).resolve().parents[2] / "support" / "store_worker.py"
TRIALS = 200
CLI_TRIALS = 16
SEED = 20261130


class InboxChecker:
    """Verifies an inbox incrementally: seq gap-free, chain intact, torn lines only at the tail."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.seq = 0
        self.sum = ""
        self.ids: dict[str, int] = {}
        self.torn = 0
        self.seen_torn: set[int] = set()

    def advance(self) -> None:
        problems: list = []
        for pos, rec in Journal(self.path).scan(self.offset, problems):
            assert rec["seq"] == self.seq + 1, f"sequence gap at offset {pos}: {self.seq} -> {rec['seq']}"
            assert rec["prev"] == self.sum, f"hash chain broken at seq {rec['seq']}"
            assert rec["id"] not in self.ids, f"duplicate id {rec['id']}"
            self.seq, self.sum = rec["seq"], rec["sum"]
            self.ids[rec["id"]] = rec["seq"]
            self.offset = pos + len(records.encode(rec))
        for p in problems:
            assert p.torn, f"damaged record (not a torn tail) at {p.offset}: {p.reason}"
        # A new torn line can only be the last thing in the file (a kill mid-write: a write(2) of a record
        # that crosses a page can stop short on SIGKILL).  One seen at the tail before stays where it was, as
        # evidence: the next writer terminates it and appends after it (fsio.append).
        fresh = [p for p in problems if p.offset not in self.seen_torn]
        assert all(p.offset >= self.offset for p in fresh), "a torn line with valid records after it"
        self.seen_torn.update(p.offset for p in fresh)
        self.torn = len(fresh)


def test_sigkill_store_sender(store, collab, child_env):
    rng = random.Random(SEED)
    inbox = collab.dir / "inbox" / "reviewer.jsonl"
    check = InboxChecker(inbox)
    stored_total, torn_total, started = 0, 0, time.monotonic()
    trials_with_stores = 0
    latency = 0.003  # one durable send, measured below: the kill window follows the disk's speed
    for trial in range(TRIALS):
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), "loop", str(collab.root), collab.id, str(collab.driver), "reviewer"],
            env=child_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            ready = proc.stdout.readline()
            assert ready == b"READY\n", proc.stderr.read().decode()
            time.sleep(rng.uniform(0.0, max(0.02, 8 * latency)))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            out = proc.stdout.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL, f"trial {trial}: the sender exited on its own"
        reported = [line.split() for line in out.split(b"\n")[:-1]]  # complete lines only
        assert all(parts[0] == b"STORED" for parts in reported)
        stored_total += len(reported)
        trials_with_stores += bool(reported)

        check.advance()
        torn_total += check.torn
        for _, mid, seq in reported:
            assert check.ids.get(mid.decode()) == int(seq), f"trial {trial}: {mid.decode()} reported stored but missing"
            assert store.message(collab.id, mid.decode()).seq == int(seq)
        if trial % 25 == 0:  # the reader's view (a full scan while nothing is acked): same records
            box = store.inbox(collab.id, "reviewer")
            assert all(p["torn"] for p in box.problems)  # Page.problems are plain dicts (Problem.as_dict)
            assert len(box.messages) == check.seq

        # the next send (from another process: this one) succeeds and continues the sequence
        t0 = time.perf_counter()
        (nxt,) = store.send(collab.id, collab.driver, Draft("reviewer", "update", "normal", "after kill", f"#{trial}"))
        latency = 0.8 * latency + 0.2 * (time.perf_counter() - t0)
        assert nxt.message.seq == check.seq + 1
        check.advance()
        assert check.torn == 0 and check.seq == nxt.message.seq

    elapsed = time.monotonic() - started
    # the whole store still verifies, and every record is reachable through the id index
    box = store.inbox(collab.id, "reviewer")
    assert [m.seq for m in box.messages] == list(range(1, check.seq + 1))
    assert all(store.message(collab.id, m.id).seq == m.seq for m in box.messages)
    for path in [collab.dir / "collab.jsonl", inbox]:
        assert all(p.torn for p in _problems(path))
    # the derived transcript can lose a section to a kill; render rebuilds it from the records
    store.render(collab.id)
    transcript = (collab.dir / "transcripts" / "reviewer.md").read_text()
    assert sum(1 for line in transcript.split("\n") if line.startswith("## [")) == check.seq
    assert trials_with_stores >= TRIALS // 2, "most kills landed before any send: the test proved little"
    unreported = check.seq - stored_total - TRIALS  # stored, then killed before printing STORED
    print(f"\n{TRIALS} kills in {elapsed:.1f}s: {stored_total} sends reported stored "
          f"({trials_with_stores} trials had some), {unreported} stored but killed before reporting, "
          f"{check.seq} records, {torn_total} torn tails seen")


def _problems(path: Path) -> list:
    problems: list = []
    for _ in Journal(path).scan(0, problems):
        pass
    return problems


@pytest.mark.skipif(not (Path(__file__).parents[3] / "agentmsg" / "cli" / "__init__.py").exists(),
                    reason="agentmsg/cli not present")
def test_sigkill_cli_send(store, collab, child_env):
    rng = random.Random(SEED + 1)
    inbox = collab.dir / "inbox" / "reviewer.jsonl"
    check = InboxChecker(inbox)
    outcomes = {"finished": 0, "killed-before-store": 0, "killed-after-store": 0}

    def cli_send(mid: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "agentmsg.cli", "send", "--root", str(collab.root), "--collab", collab.id,
             "--self", str(collab.driver), "--to", "reviewer", "--kind", "request", "--subject", "kill test",
             "--body", f"body of {mid}", "--id", mid, "--json"],
            env=child_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)

    # aim the kills at the end of a CLI run, where the store happens (start-up is most of it)
    t0 = time.monotonic()
    warm = cli_send(str(uuid.uuid4()))
    out, err = warm.communicate(timeout=60)
    assert warm.returncode == 0, err.decode()
    full = time.monotonic() - t0
    check.advance()

    for trial in range(CLI_TRIALS):
        mid = str(uuid.uuid4())
        proc = cli_send(mid)
        time.sleep(rng.uniform(0.5, 1.05) * full)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate(timeout=30)
        check.advance()
        if proc.returncode == 0:
            outcomes["finished"] += 1
            assert json.loads(out)["ok"] is True
            assert mid in check.ids, f"trial {trial}: the CLI said stored but {mid} is missing"
        else:
            assert proc.returncode == -signal.SIGKILL, err.decode()
            outcomes["killed-after-store" if mid in check.ids else "killed-before-store"] += 1

        # what an agent does after a crash: retry with the same id; it is stored exactly once
        retry = cli_send(mid)
        out, err = retry.communicate(timeout=60)
        assert retry.returncode == 0, err.decode()
        env = json.loads(out)
        assert env["ok"] is True
        check.advance()
        assert check.torn == 0
        assert mid in check.ids
        assert sum(1 for m in store.inbox(collab.id, "reviewer").messages if m.id == mid) == 1
    assert len(check.ids) == CLI_TRIALS + 1
    print(f"\nCLI kills: {outcomes}")
