"""``ports.Replica``: one contract for every backend that can be mirrored (file, memory, PostgreSQL).

Each test runs once per backend (conftest's ``port``).  A mirror needs three
things from the remote: the last sequence of every stream, the sealed records
after a sequence in order (exactly as stored: they are copied verbatim and
their chains checked), and a wait that wakes when anything changes, including
a change made between two waits.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from agentmsg import records
from agentmsg.backends.file.store import FileStore
from agentmsg.domain.validate import pin
from agentmsg.domain.values import Draft
from agentmsg.resident.mirror import Mirror
from agentmsg.service.messaging import Mailbox

LEAD, REV = pin("codex:r-lead"), pin("claude-code:r-rev")


def _collab(box: Mailbox) -> str:
    cid = box.open(LEAD, "lead", "replica", "the replica contract").collab
    box.join(cid, REV, "rev")
    for i in range(3):
        box.send(cid, LEAD, Draft(to="rev", subject=f"s{i}", body="b", kind="request"))
    box.send(cid, REV, Draft(to="all", subject="to all", body="b"))
    box.log_append(cid, LEAD, "a note", None)
    return cid


def test_streams_and_records_since_give_sealed_chained_records_in_order(port, box: Mailbox) -> None:
    cid = _collab(box)
    streams = port.streams(cid)
    assert {"events", "notes", "inbox/rev", "inbox/lead"} <= set(streams)
    for stream, last in streams.items():
        recs = port.records_since(cid, stream, 0)
        assert [r["seq"] for r in recs] == list(range(1, last + 1)), stream
        prev = ""
        for r in recs:
            assert r["sum"] == records.checksum(r) and r["prev"] == prev, stream
            prev = r["sum"]
        assert port.records_since(cid, stream, 1, limit=1) == recs[1:2]
        assert port.records_since(cid, stream, last) == []


def test_wait_any_wakes_on_a_change_and_on_one_made_between_waits(port, box: Mailbox) -> None:
    cid = _collab(box)
    assert port.wait_any([cid], 0.2) in (True, False)  # the first wait may see the setup; it arms the next
    assert port.wait_any([cid], 0.3) is False
    timer = threading.Timer(0.3, lambda: box.log_append(cid, LEAD, "later", None))
    timer.start()
    t0 = time.monotonic()
    assert port.wait_any([cid], 10) is True
    assert time.monotonic() - t0 < 5
    timer.join()
    box.log_append(cid, LEAD, "between two waits", None)
    assert port.wait_any([cid], 0.5) is True


def test_a_mirror_copies_every_backend_verbatim(port, box: Mailbox, tmp_path: Path) -> None:
    cid = _collab(box)
    local = FileStore(tmp_path / "replica")
    mirror = Mirror(local, port, "contract:", page=2)
    mirror.round()
    assert local.streams(cid) == port.streams(cid)
    for stream in port.streams(cid):
        assert local.records_since(cid, stream, 0, 1 << 40) == port.records_since(cid, stream, 0, 1 << 40)
    assert local.verify(cid)[1] == []
