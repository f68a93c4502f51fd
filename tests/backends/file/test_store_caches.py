"""What the file store remembers between and within transactions stays true.

A long-lived process (the MCP server, a benchmark) keeps one ``FileStore``:
it remembers each registry and each journal's last record, keyed by the
file's identity, size and mtime, and a transaction checks each directory
once and keeps the ``cseq`` high-water. Each test has a second store on
the same root play another process, or plants something between two
transactions of the same store, and checks the first store notices.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agentmsg import fsio, records
from agentmsg.backends.file.journal import Journal
from agentmsg.domain import validate as model
from agentmsg.errors import UnsafePath
from tests.support.facade import Draft, FileStore

NEWCOMER = "cursor:newcomer-0001"


def draft(to: str, body: str = "body") -> Draft:
    return Draft(to=to, kind="update", priority="normal", subject="subject", body=body)


def clean(store: FileStore) -> list[dict]:
    _files, findings = store.verify(None)
    return findings


def cseqs(cdir: Path) -> list[int]:
    out = []
    for path in [cdir / "collab.jsonl", cdir / "log.jsonl", *sorted((cdir / "inbox").glob("*.jsonl"))]:
        if path.exists():
            out += [rec["cseq"] for _pos, rec in Journal(str(path)).scan()]
    return sorted(out)


def test_a_join_by_another_process_reaches_a_store_that_remembers_the_registry(store, collab, root) -> None:
    store.send(collab.id, collab.driver, draft("reviewer"))  # the registry is remembered now
    other = FileStore(root)
    other.join(collab.id, model.pin(NEWCOMER), "newcomer")
    (sent,) = store.send(collab.id, collab.driver, draft("newcomer"))
    assert sent.message.to == "newcomer"
    assert "newcomer" in store.registry(collab.id).participants


def test_appends_by_two_stores_keep_one_chain_and_a_gap_free_cseq(store, collab, root) -> None:
    other = FileStore(root)
    for i in range(6):
        (store if i % 2 else other).send(collab.id, collab.driver, draft("reviewer", f"m{i}"))
        store.send(collab.id, collab.driver, draft("reviewer", f"n{i}"))
    inbox = collab.dir / "inbox" / "reviewer.jsonl"
    recs = [rec for _pos, rec in Journal(str(inbox)).scan()]
    assert [r["seq"] for r in recs] == list(range(1, len(recs) + 1))
    assert cseqs(collab.dir) == list(range(1, len(cseqs(collab.dir)) + 1))
    assert [f for f in clean(store) if f["tampering"]] == []


def test_the_tail_an_append_remembers_is_the_record_on_disk(store, collab) -> None:
    store.send(collab.id, collab.driver, draft("reviewer", "first"))
    store.send(collab.id, collab.driver, draft("reviewer", "second"))
    path = str(collab.dir / "inbox" / "reviewer.jsonl")
    remembered = Journal(path).last()
    on_disk = records.decode(Path(path).read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1])
    assert remembered is not None and remembered["sum"] == on_disk["sum"] and remembered["seq"] == on_disk["seq"]


def test_a_broadcast_takes_consecutive_cseqs_read_once(store, collab) -> None:
    store.send(collab.id, collab.driver, draft("reviewer"))
    before = cseqs(collab.dir)
    sent = store.send(collab.id, collab.driver, draft("all", "to everyone"))
    assert sorted(s.message.to for s in sent) == ["carol", "reviewer"]
    after = cseqs(collab.dir)
    assert after == [*before, before[-1] + 1, before[-1] + 2]
    assert [f for f in clean(store) if f["tampering"]] == []


@pytest.mark.parametrize("sub", ["inbox", "transcripts", "ids"])
def test_a_link_planted_between_two_transactions_of_one_store_is_refused(store, collab, tmp_path, sub) -> None:
    store.send(collab.id, collab.driver, draft("reviewer"))
    size = (collab.dir / "inbox" / "reviewer.jsonl").stat().st_size
    elsewhere = tmp_path / "elsewhere"
    os.rename(collab.dir / sub, elsewhere)
    os.symlink(elsewhere, collab.dir / sub)
    with pytest.raises(UnsafePath):
        store.send(collab.id, collab.driver, draft("reviewer"))
    inbox = (elsewhere if sub == "inbox" else collab.dir / "inbox") / "reviewer.jsonl"
    assert inbox.stat().st_size == size  # nothing stored, through the link or beside it


@pytest.mark.parametrize("sub", ["inbox", "transcripts", "ids", "receipts"])
def test_a_link_planted_after_the_store_remembered_the_checked_subdirectories_is_refused(
        store, collab, tmp_path, sub, monkeypatch) -> None:
    # Settled after 0.1 s here (a clock tick is at most 10 ms): the next transaction remembers its checks.
    monkeypatch.setattr(fsio, "SETTLED_NS", 100_000_000)
    store.send(collab.id, collab.driver, draft("reviewer"))  # creates inbox/, ids/, transcripts/
    time.sleep(0.15)
    store.send(collab.id, collab.driver, draft("reviewer"))
    remembered = dict(store.port.subdirs[collab.id][1])
    assert set(remembered) == {"inbox", "ids", "transcripts"}  # receipts/ was absent: not remembered
    size = (collab.dir / "inbox" / "reviewer.jsonl").stat().st_size
    elsewhere = tmp_path / "elsewhere"
    if sub in remembered:
        os.rename(collab.dir / sub, elsewhere)
    else:
        elsewhere.mkdir()
    os.symlink(elsewhere, collab.dir / sub)
    time.sleep(0.15)  # settled again: only the changed key tells the store to check again
    with pytest.raises(UnsafePath):
        store.send(collab.id, collab.driver, draft("reviewer"))
    inbox = (elsewhere if sub == "inbox" else collab.dir / "inbox") / "reviewer.jsonl"
    assert inbox.stat().st_size == size  # nothing stored, through the link or beside it


@pytest.mark.parametrize("what", ["inbox", "log"])
def test_a_journal_another_process_creates_after_the_listing_was_remembered_counts_for_cseq(
        store, collab, root, monkeypatch, what) -> None:
    """A new inbox, or the first log note: each lands in a directory whose listing a send remembers."""
    monkeypatch.setattr(fsio, "SETTLED_NS", 100_000_000)  # as above: remembered after 0.1 s
    store.send(collab.id, collab.driver, draft("reviewer"))
    time.sleep(0.15)
    store.send(collab.id, collab.driver, draft("reviewer"))
    inboxes = store.port.listings[str(collab.dir / "inbox")][1]
    assert [n for n in inboxes if n.endswith(".jsonl")] == ["reviewer.jsonl"]
    assert str(collab.dir / "log.jsonl") in store.port.absent  # so no send looks for it
    other = FileStore(root)
    if what == "inbox":
        other.send(collab.id, collab.driver, draft("carol"))
    else:
        other.log_append(collab.id, collab.driver, "a note, by another process")
    time.sleep(0.15)  # settled again: only the changed key tells the store to list again
    store.send(collab.id, collab.driver, draft("reviewer"))
    assert cseqs(collab.dir) == list(range(1, len(cseqs(collab.dir)) + 1))


def test_append_without_create_leaves_a_missing_or_empty_file_alone(tmp_path: Path) -> None:
    missing, empty, full = tmp_path / "missing.md", tmp_path / "empty.md", tmp_path / "full.md"
    empty.write_bytes(b"")
    full.write_bytes(b"# head\n")
    assert fsio.append(str(missing), b"x\n", durable=False, create=False) is None
    assert not missing.exists()
    assert fsio.append(str(empty), b"x\n", durable=False, create=False) is None
    assert empty.read_bytes() == b""
    assert fsio.append(str(full), b"x\n", durable=False, create=False) == 7
    assert full.read_bytes() == b"# head\nx\n"


def test_append_reserves_before_it_writes_and_reports_the_new_size(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(b"torn")  # no newline: the append terminates it first
    seen: list[object] = []

    def first(at: int) -> None:
        seen.append(("first", at, path.read_bytes()))

    at = fsio.append(str(path), b"rec\n", first=first, written=lambda st: seen.append(("written", st.st_size)))
    assert at == 5 and path.read_bytes() == b"torn\nrec\n"
    assert seen == [("first", 5, b"torn"), ("written", 9)]


def test_a_failed_reservation_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(b"a\n")

    def refuse(at: int) -> None:
        raise OSError("index full")

    with pytest.raises(OSError):
        fsio.append(str(path), b"b\n", first=refuse)
    assert path.read_bytes() == b"a\n"


def test_delivery_records_read_once_per_transaction_stay_current(store, collab) -> None:
    # A Stop hook asks for the envelope and for the wake consent in one transaction: one read of
    # delivery.jsonl, and what the transaction appends (or a caller does to its copy) shows correctly.
    enabled = {"type": "delivery-enabled", "envelope": "e1", "alias": "reviewer", "pin": str(collab.reviewer)}
    with store.port.transaction(collab.id) as tx:
        before = tx.delivery_records()
        before.append({"type": "not stored"})  # the caller's copy, not the transaction's
        rec = tx.append_delivery(enabled)
        assert tx.delivery_records() == [r for r in before if r["type"] != "not stored"] + [rec]
    with store.port.transaction(collab.id) as tx:
        assert tx.delivery_records()[-1] == rec



# ---- inbox maps kept between transactions ------------------------------------------------------------


def unread(store: FileStore, collab) -> list[str]:
    """reviewer's unread ids, oldest first, through the port (one transaction, the inbox map)."""
    return [m.id for m in store.port.unacked(collab.id, "reviewer", limit=50, priority_first=False).messages]


def sent_ids(store: FileStore, collab, n: int, prefix: str = "m") -> list[str]:
    return [store.send(collab.id, collab.driver, draft("reviewer", f"{prefix}{i}"))[0].message.id for i in range(n)]


def same_key_always(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every map file looks untouched, as a write in the same clock tick and of the same size would: a map
    kept after this is used however the file changed."""
    from agentmsg.backends.file import inboxmap

    monkeypatch.setattr(inboxmap, "_key", lambda st: (0, 0, 0, 0, 0))


def test_a_kept_inbox_map_is_not_read_again_while_its_file_is_unchanged(store, collab, monkeypatch) -> None:
    ids = sent_ids(store, collab, 4)
    assert unread(store, collab) == ids  # folded and saved: kept by the store
    reads: list[str] = []
    real = fsio.read_bytes
    monkeypatch.setattr(fsio, "read_bytes", lambda path, *a: (reads.append(os.fspath(path)), real(path, *a))[1])
    assert unread(store, collab) == ids
    assert not [p for p in reads if p.endswith("reviewer.map")]
    store.ack(collab.id, collab.reviewer, ids[1])  # this store's own ack: the kept map follows it, unread again
    assert unread(store, collab) == [ids[0], *ids[2:]]
    assert not [p for p in reads if p.endswith("reviewer.map")]


@pytest.mark.parametrize("tick", ["file changed", "same tick"])
def test_what_another_process_does_reaches_a_store_that_keeps_the_map(store, collab, root, monkeypatch,
                                                                       tick) -> None:
    if tick == "same tick":
        same_key_always(monkeypatch)  # the kept map is used even though the other store rewrote the file
    ids = sent_ids(store, collab, 4)
    assert unread(store, collab) == ids
    other = FileStore(root)
    other.ack(collab.id, collab.reviewer, ids[0])
    more = sent_ids(other, collab, 2, "x")
    assert unread(other, collab) == [*ids[1:], *more]  # the other store saves its map
    other.ack(collab.id, collab.reviewer, ids[2])
    assert unread(store, collab) == [ids[1], ids[3], *more]
    assert store.inbox(collab.id, "reviewer").total == 4


@pytest.mark.parametrize("tick", ["file changed", "same tick"])
def test_a_map_edited_on_disk_never_hides_mail_from_a_store_that_keeps_it(store, collab, monkeypatch, tick) -> None:
    if tick == "same tick":
        same_key_always(monkeypatch)
    ids = sent_ids(store, collab, 3)
    assert unread(store, collab) == ids
    path = collab.root / "collabs" / collab.id / "state" / "reviewer.map"
    head, body = path.read_bytes().split(b"\n", 1)
    forged = bytes(b | 1 for b in body)  # "all acknowledged", its own checksum fixed
    doc = records.loads(head)
    doc["h"] = records.sha256_hex(forged)
    path.write_bytes(records.dumps(doc).encode() + b"\n" + forged)
    assert unread(store, collab) == ids
    assert unread(FileStore(collab.root), collab) == ids  # and a new process: caught by the receipts' count


def test_a_journal_cut_back_under_a_kept_map_is_read_as_it_is_now(store, collab, monkeypatch) -> None:
    same_key_always(monkeypatch)  # so the kept map is used: only the journals can tell
    ids = sent_ids(store, collab, 3)
    assert unread(store, collab) == ids
    inbox = collab.root / "collabs" / collab.id / "inbox" / "reviewer.jsonl"
    lines = inbox.read_bytes().splitlines(keepends=True)
    inbox.write_bytes(b"".join(lines[:-1]))  # the last record gone, as a restored backup would leave it
    assert unread(store, collab) == ids[:2] == unread(FileStore(collab.root), collab)
    assert store.inbox(collab.id, "reviewer").total == 2


def test_a_transaction_that_fails_gives_back_no_map(store, collab) -> None:
    ids = sent_ids(store, collab, 2)
    assert unread(store, collab) == ids
    assert store.port.maps
    with pytest.raises(RuntimeError), store.port.transaction(collab.id) as tx:
        tx.map("reviewer")
        raise RuntimeError("after the map was taken")
    assert not store.port.maps
    assert unread(store, collab) == ids  # read from the file again


def test_state_removed_under_a_store_that_keeps_the_map_is_rebuilt(store, collab) -> None:
    import shutil

    ids = sent_ids(store, collab, 3)
    store.ack(collab.id, collab.reviewer, ids[0])
    assert unread(store, collab) == ids[1:]
    shutil.rmtree(collab.root / "collabs" / collab.id / "state")
    assert unread(store, collab) == ids[1:]
    assert (collab.root / "collabs" / collab.id / "state" / "reviewer.map").exists()
    assert clean(store) == []


def test_a_directory_with_no_opening_record_is_not_found_and_left_as_it_was(store, collab, root) -> None:
    import uuid

    from agentmsg.errors import NotFound
    from tests.support.cli_helpers import run

    stray = root / "collabs" / str(uuid.uuid4())
    stray.mkdir()
    (stray / "notes.txt").write_text("not a collaboration")
    for port in (store.port, FileStore(root).port):  # a long-lived store, and a first use
        with pytest.raises(NotFound):
            with port.transaction(stray.name):
                pass
        with pytest.raises(NotFound):
            store.inbox(stray.name, "reviewer")
    res = run("show", "--collab", stray.name, str(uuid.uuid4()), root=root)  # the owner: one line, not found
    assert res.code == 3 and res.stderr.startswith(f"not found: no collaboration {stray.name}"), res
    res = run("inbox", "--collab", stray.name, "--self", str(collab.reviewer), root=root)
    assert res.code == 9 and res.stderr.count("\n") == 1, res  # a pin: the one reading rule says no, nothing more
    assert sorted(p.name for p in stray.iterdir()) == ["notes.txt"]
    (collab.dir / "write.lock").unlink()  # a real collaboration's lock, removed: made again
    assert store.send(collab.id, collab.driver, draft("reviewer"))[0].message.to == "reviewer"
    assert (collab.dir / "write.lock").exists()
