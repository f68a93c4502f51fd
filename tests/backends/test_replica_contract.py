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

import pytest

from agentmsg import records
from agentmsg.backends.file import idle, layout
from agentmsg.backends.file.store import FileStore
from agentmsg.domain import presence
from agentmsg.domain.validate import pin
from agentmsg.domain.values import Draft
from agentmsg.errors import AgentmsgError
from agentmsg.resident.mirror import Mirror
from agentmsg.runtime import presence as reading
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


# ---- presence across machines (docs/LIFECYCLE.md) --------------------------------------------------------


def test_a_presence_report_replaces_the_last_and_ages_by_the_stores_clock(port, box: Mailbox) -> None:
    cid = _collab(box)
    assert port.presence(cid) == {}
    port.report_presence(cid, "rev", {"pin": str(REV), "state": "idle", "quiet": 3.5})
    port.report_presence(cid, "rev", {"pin": str(REV), "state": "working", "quiet": 0.5})
    port.report_presence(cid, "lead", {"pin": str(LEAD), "state": "gone", "quiet": None})
    got = port.presence(cid)
    assert {a: (r["pin"], r["state"], r["quiet"]) for a, r in got.items()} == {
        "rev": (str(REV), "working", 0.5), "lead": (str(LEAD), "gone", None)}
    assert all(0 <= r["age"] < 60 for r in got.values())
    with pytest.raises(AgentmsgError):
        port.report_presence("00000000-0000-4000-8000-000000000000", "rev", {"pin": str(REV), "state": "idle"})
    assert port.events(cid) == box.store.events(cid)  # nothing of it is a record


def test_mirrors_share_presence_so_another_machine_sees_a_session(port, box: Mailbox, tmp_path: Path) -> None:
    _collab(box)
    here, there = FileStore(tmp_path / "machine-a"), FileStore(tmp_path / "machine-b")
    a, b = Mirror(here, port, "contract:"), Mirror(there, port, "contract:")
    a.round()
    idle.mark_presence(here.root, str(REV), layout.TURN)  # rev's hooks run on machine A: a turn under way
    assert reading.of(there.root, str(REV), listening=False).state == presence.UNKNOWN
    assert a.share_presence() == 1  # only rev: lead's hooks ran nowhere
    assert a.share_presence() == 0  # unchanged and recent: not sent again
    b.round()
    seen = reading.of(there.root, str(REV), listening=False)
    assert (seen.state, seen.why) == (presence.WORKING, presence.REMOTE)
    assert seen.last is not None and abs(time.time() - seen.last) < 60
    assert reading.of(there.root, str(LEAD), listening=False).state == presence.UNKNOWN
    assert reading.of(here.root, str(REV), listening=False).why == ""  # its own machine sees it directly
    idle.mark_presence(here.root, str(REV), layout.REST)  # the turn ended
    time.sleep(0.01)
    assert a.share_presence() == 1
    b.share_presence()
    assert reading.of(there.root, str(REV), listening=False).state == presence.IDLE


def test_a_report_for_an_alias_that_moved_on_or_gone_stale_says_nothing(port, box: Mailbox, tmp_path: Path) -> None:
    cid = _collab(box)
    there = FileStore(tmp_path / "machine-b")
    b = Mirror(there, port, "contract:")
    b.round()
    port.report_presence(cid, "rev", {"pin": "claude-code:someone-else", "state": "idle", "quiet": 1.0})
    b.share_presence()
    assert reading.of(there.root, str(REV), listening=False).state == presence.UNKNOWN
    port.report_presence(cid, "rev", {"pin": str(REV), "state": "idle", "quiet": 1.0})
    b.share_presence()
    assert reading.of(there.root, str(REV), listening=False).state == presence.IDLE
    later = time.time() + presence.REPORT_FOR + 1
    assert reading.of(there.root, str(REV), listening=False, now=later).state == presence.UNKNOWN
