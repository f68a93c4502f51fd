"""ids/, one append-only log per shard: what a crash, a failed write, a planted link, a deleted log or a root in
the first layout (a file per message) can leave there never hides a message, misdirects one, or fakes tampering.

Each case was found by reading the layout adversarially; each runs through the store as a send or an ack
would, and ends with ``verify`` (the journals and every derived file against them).
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from agentmsg import fsio
from agentmsg.errors import StoreFailed, UnsafePath
from tests.support.facade import Draft

BID = "11111111-2222-4333-8444-555555555555"  # shard 11
OTHER = "11aaaaaa-2222-4333-8444-555555555555"  # shard 11 too


def draft(**kw: str) -> Draft:
    fields = {"to": "reviewer", "kind": "update", "priority": "normal", "subject": "s", "body": "b", **kw}
    return Draft(**fields)  # type: ignore[arg-type]


def clean(store, collab) -> None:
    _checked, findings = store.verify(None)
    assert findings == [], findings


def log(collab, shard: str) -> Path:
    return Path(collab.root) / "collabs" / collab.id / "ids" / f"{shard}.log"


def test_every_shard_log_exists_from_the_first_entry(store, collab) -> None:
    """So a missing log always means a removed one: rebuilt before a lookup misses its ids."""
    store.send(collab.id, collab.driver, draft())
    names = sorted(p.name for p in log(collab, "00").parent.iterdir())
    assert names == [f"{i:02x}.log" for i in range(256)]


@pytest.mark.parametrize("torn", [b"", b" carol revi", b" carol reviewer"])
def test_a_torn_broadcast_line_never_reads_as_a_shorter_list(store, collab, torn) -> None:
    store.send(collab.id, collab.driver, draft(body="warm"))
    with open(log(collab, "11"), "ab") as fh:  # a crash tore "\nb <id> carol reviewer .\n"
        fh.write(b"\nb " + BID.encode() + torn)
    store.send(collab.id, collab.driver, draft(id=OTHER, body="later, same shard"))  # ends the torn line
    sent = store.send(collab.id, collab.driver, draft(to="all", id=BID))  # the sender retries its broadcast
    assert sorted((s.message.to, s.already) for s in sent) == [("carol", False), ("reviewer", False)]
    inboxes = sorted(p.name for p in (Path(collab.root) / "collabs" / collab.id / "inbox").glob("*.jsonl"))
    assert inboxes == ["carol.jsonl", "reviewer.jsonl"]
    clean(store, collab)


def test_a_torn_receipt_pointer_never_points_elsewhere(store, collab) -> None:
    (sent,) = store.send(collab.id, collab.driver, draft(id=BID))
    store.ack(collab.id, collab.reviewer, BID)
    path = log(collab, "11")
    raw = path.read_bytes()
    at = raw.rindex(b"\nr " + BID.encode())
    path.write_bytes(raw[: at + len(b"\nr ") + len(BID) + 2])  # "r <id> 1": the pointer's first digit only
    store.send(collab.id, collab.driver, draft(id=OTHER))  # completes the torn line
    assert store.state(collab.id, sent.message).acknowledged is not None
    clean(store, collab)


def test_a_failed_write_mid_broadcast_keeps_every_recipient_for_the_retry(store, collab, monkeypatch) -> None:
    real_append, real_fsync, calls = fsio.append, os.fsync, {"inbox": 0}

    def append(path, data, **kw):
        if "/inbox/" in os.fspath(path):
            calls["inbox"] += 1
            if calls["inbox"] == 2:  # the second copy's fsync fails: it is cut back
                monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error")))
                try:
                    return real_append(path, data, **kw)
                finally:
                    monkeypatch.setattr(os, "fsync", real_fsync)
        return real_append(path, data, **kw)

    monkeypatch.setattr(fsio, "append", append)
    with pytest.raises(StoreFailed):
        store.send(collab.id, collab.driver, draft(to="all", id=BID))
    monkeypatch.setattr(fsio, "append", real_append)
    clean(store, collab)  # the cut-back copy's reservation is not a removed record
    sent = store.send(collab.id, collab.driver, draft(to="all", id=BID))
    assert sorted((s.message.to, s.already) for s in sent) == [("carol", True), ("reviewer", False)]
    assert {a: len(store.messages(collab.id, a)) for a in ("carol", "reviewer")} == {"carol": 1, "reviewer": 1}
    clean(store, collab)


def test_a_reservation_a_crash_left_is_overtaken_not_reported(store, collab) -> None:
    """A process killed between its id entry and its record: the next record takes that offset."""
    store.send(collab.id, collab.driver, draft(body="first"))
    inbox = Path(collab.root) / "collabs" / collab.id / "inbox" / "reviewer.jsonl"
    size = inbox.stat().st_size
    with open(log(collab, "11"), "ab") as fh:
        fh.write(f"\nm {BID} reviewer {size} 2 {'ab' * 32} .\n".encode())
    assert store.port.message(collab.id, BID) is None  # a reservation: absent
    store.send(collab.id, collab.driver, draft(body="takes its place"))
    assert store.port.message(collab.id, BID) is None
    clean(store, collab)
    (sent,) = store.send(collab.id, collab.driver, draft(id=BID, body="now it is sent"))
    assert store.message(collab.id, BID).body == "now it is sent" and not sent.already
    clean(store, collab)


def test_a_link_planted_at_a_later_copys_log_stores_no_copy(store, collab, tmp_path) -> None:
    from agentmsg.domain import rules

    store.send(collab.id, collab.driver, draft(body="warm"))
    target = log(collab, rules.copy_id(BID, "reviewer")[:2])
    target.unlink()
    target.symlink_to(tmp_path / "elsewhere.log")
    before = {a: len(store.messages(collab.id, a)) for a in ("carol", "reviewer")}
    with pytest.raises(UnsafePath):
        store.send(collab.id, collab.driver, draft(to="all", id=BID))
    assert {a: len(store.messages(collab.id, a)) for a in ("carol", "reviewer")} == before
    assert not (tmp_path / "elsewhere.log").exists()


@pytest.mark.parametrize("removed", ["ids", "one log"])
def test_a_removed_index_is_rebuilt_before_a_new_entry_hides_the_old_ones(store, collab, removed) -> None:
    (old,) = store.send(collab.id, collab.driver, draft(body="before"))
    ids = log(collab, "00").parent
    if removed == "ids":
        shutil.rmtree(ids)
    else:
        log(collab, old.message.id[:2]).unlink()
    store.send(collab.id, collab.driver, draft(body="after"))  # a plain send: no lookup of its own
    assert store.message(collab.id, old.message.id).body == "before"
    store.ack(collab.id, collab.reviewer, old.message.id)
    clean(store, collab)


def _first_layout(collab) -> list[str]:
    """Turn the collaboration's ids/ into the first layout: a directory per shard, a JSON file per message."""
    ids = log(collab, "00").parent
    mids = []
    for path in ids.glob("*.log"):
        for line in path.read_text().splitlines():
            if line.startswith("m "):
                _m, mid, inbox, offset, seq, digest, _end = line.split(" ")
                (ids / mid[:2]).mkdir(exist_ok=True)
                (ids / mid[:2] / f"{mid}.json").write_text(
                    f'{{"inbox": "{inbox}", "offset": {offset}, "seq": {seq}, "digest": "{digest}"}}\n')
                mids.append(mid)
        path.unlink()
    return mids


@pytest.mark.parametrize("first", ["send", "verify", "show"])
def test_a_root_in_the_first_layout_is_rebuilt_whatever_comes_first(store, collab, first) -> None:
    sent = [store.send(collab.id, collab.driver, draft(body=f"old {i}"))[0].message.id for i in range(3)]
    assert sorted(_first_layout(collab)) == sorted(sent)
    if first == "send":
        store.send(collab.id, collab.driver, draft(body="new"))
    elif first == "verify":
        clean(store, collab)
    for mid in sent:
        assert store.message(collab.id, mid) is not None
    store.ack(collab.id, collab.reviewer, sent[0])
    clean(store, collab)
    ids = log(collab, "00").parent
    assert sorted(p.name for p in ids.iterdir()) == [f"{i:02x}.log" for i in range(256)]
