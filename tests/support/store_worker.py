"""Child process for the concurrency and SIGKILL tests (not collected by pytest).

    store_worker.py send ROOT COLLAB PIN TO COUNT GO_FILE
        wait for GO_FILE, send COUNT messages (body "<pin>#<i>") through
        FileStore.send, print one JSON line: {"ids": [...], "seqs": [...]}
    store_worker.py read ROOT COLLAB ALIAS STOP_FILE
        read the inbox every 10 ms until STOP_FILE exists; every read must be a
        gap-free prefix 1..n that only grows; print a JSON summary
    store_worker.py loop ROOT COLLAB PIN TO
        print READY, then send forever, printing "STORED <id> <seq>" (flushed)
        right after each send returns

Only the standard library and the store: this is what a hook process runs.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from agentmsg.domain import validate as model
from tests.support.facade import Draft, FileStore


def _wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {path}")
        time.sleep(0.002)


def send(root: str, collab: str, pin: str, to: str, count: str, go: str) -> None:
    store = FileStore(Path(root), lock_timeout=120.0)
    who = model.pin(pin)
    _wait_for(Path(go))
    ids, seqs = [], []
    for i in range(int(count)):
        (sent,) = store.send(collab, who, Draft(to, "update", "normal", f"from {pin}", f"{pin}#{i}"))
        ids.append(sent.message.id)
        seqs.append(sent.message.seq)
    print(json.dumps({"ids": ids, "seqs": seqs}), flush=True)


def read(root: str, collab: str, alias: str, stop: str) -> None:
    store = FileStore(Path(root))
    stop_path = Path(stop)
    reads, seen, errors, torn = 0, 0, [], 0
    while True:
        done = stop_path.exists()  # decide before the read so the last read sees everything
        box = store.inbox(collab, alias)
        reads += 1
        seqs = [m.seq for m in box.messages]
        if seqs != list(range(1, len(seqs) + 1)):
            errors.append(f"read {reads}: sequence is not 1..{len(seqs)}")
        if len(seqs) < seen:
            errors.append(f"read {reads}: saw {len(seqs)} messages after having seen {seen}")
        if len({m.id for m in box.messages}) != len(seqs):
            errors.append(f"read {reads}: duplicate ids")
        for p in box.problems:
            if p.torn:
                torn += 1  # a write in progress, seen mid-append: fine
            else:
                errors.append(f"read {reads}: damaged record at {p.offset}: {p.reason}")
        seen = max(seen, len(seqs))
        if done:
            break
        time.sleep(0.01)  # a polling reader, not a busy loop: leave CPU for the senders
    print(json.dumps({"reads": reads, "seen": seen, "torn_seen": torn, "errors": errors[:20]}), flush=True)


def loop(root: str, collab: str, pin: str, to: str) -> None:
    store = FileStore(Path(root))
    who = model.pin(pin)
    from agentmsg.text.injection import detect

    detect("warm up")  # compile the patterns now: the kill window is sized for a warm send
    store.registry(collab)
    out = sys.stdout
    out.write("READY\n")
    out.flush()
    i = 0
    while True:
        (sent,) = store.send(collab, who, Draft(to, "request", "normal", "loop", f"loop body {i}"))
        out.write(f"STORED {sent.message.id} {sent.message.seq}\n")
        out.flush()
        i += 1


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    {"send": send, "read": read, "loop": loop}[mode](*args)
