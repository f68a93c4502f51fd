"""16 OS processes each send 200 messages to one inbox while another reads it.

The senders are separate Python processes running ``tests/support/store_worker.py``,
which calls ``FileStore.send`` (the code path behind ``agentmsg send``; a
CLI process costs ~0.3 s of start-up, so 3,200 of them would take minutes on
a small machine).  They share nothing but the state root and its lock.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from agentmsg import records
from agentmsg.domain import validate as model

SENDERS = 16
EACH = 200
WORKER = Path(__file__).resolve().parents[2] / "support" / "store_worker.py"


def test_sixteen_senders_one_inbox_one_reader(store, collab, root, tmp_path, child_env):
    pins = [f"cursor:w{i:02d}" for i in range(SENDERS)]
    for i, pin in enumerate(pins):
        store.join(collab.id, model.pin(pin), f"w{i:02d}")
    go, stop = tmp_path / "go", tmp_path / "stop"

    def spawn(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, str(WORKER), *args], env=child_env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    reader = spawn("read", str(root), collab.id, "reviewer", str(stop))
    senders = [spawn("send", str(root), collab.id, pin, "reviewer", str(EACH), str(go)) for pin in pins]
    time.sleep(0.3)  # let them all start and wait at the barrier
    started = time.monotonic()
    go.touch()
    results = []
    try:
        for p in senders:
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, err
            results.append(json.loads(out))
        elapsed = time.monotonic() - started
        stop.touch()
        out, err = reader.communicate(timeout=60)
        assert reader.returncode == 0, err
        summary = json.loads(out)
    finally:
        for p in [*senders, reader]:
            if p.poll() is None:
                p.kill()
                p.wait()

    total = SENDERS * EACH
    reported = [mid for r in results for mid in r["ids"]]
    assert len(reported) == total and len(set(reported)) == total
    # every sender got back strictly increasing sequence numbers
    for r in results:
        assert r["seqs"] == sorted(r["seqs"]) and len(set(r["seqs"])) == EACH

    box = store.inbox(collab.id, "reviewer")
    assert box.problems == []
    assert len(box.messages) == total, "lost or duplicated messages"
    assert [m.seq for m in box.messages] == list(range(1, total + 1))
    assert {m.id for m in box.messages} == set(reported)
    # what each sender was told matches what is on disk
    by_id = {m.id: m for m in box.messages}
    for pin, r in zip(pins, results, strict=True):
        assert [by_id[mid].seq for mid in r["ids"]] == r["seqs"]
        assert [by_id[mid].body for mid in r["ids"]] == [f"{pin}#{i}" for i in range(EACH)]
        assert {by_id[mid].sender for mid in r["ids"]} == {f"w{pins.index(pin):02d}"}

    # every line parses and verifies, and the hash chain is intact
    raw = (collab.dir / "inbox" / "reviewer.jsonl").read_bytes()
    assert raw.endswith(b"\n")
    prev = ""
    for n, line in enumerate(raw[:-1].split(b"\n"), start=1):
        rec = records.decode(line)
        assert rec["seq"] == n and rec["prev"] == prev
        prev = rec["sum"]
    assert n == total

    # the id index and the transcript agree
    assert all(store.message(collab.id, mid).id == mid for mid in reported)
    transcript = (collab.dir / "transcripts" / "reviewer.md").read_text()
    assert sum(1 for line in transcript.split("\n") if line.startswith("## [")) == total

    # the reader never saw a gap, a shrink, a duplicate or a damaged record
    assert summary["errors"] == []
    assert summary["seen"] == total and summary["reads"] >= 2
    print(f"\n{total} sends from {SENDERS} processes in {elapsed:.1f}s ({total / elapsed:.0f}/s); "
          f"reader: {summary['reads']} reads, {summary['torn_seen']} in-progress tails seen")
