"""The descriptors a long-lived ``FileStore`` keeps open between sends (backends/file/handles.py).

A kept descriptor must always stand for the file at its path: each test
keeps one (two sends with a settled directory), changes the file behind
the store's back the way a person, ``repair`` or an attacker would, and
checks that the next send writes to the file now at the path, never to
the one the descriptor was opened on.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from pathlib import Path

import pytest

from agentmsg import fsio, records
from agentmsg.backends.file.handles import LIMIT, Handles
from agentmsg.backends.file.journal import Journal
from agentmsg.errors import UnsafePath
from tests.support.facade import Draft, FileStore


def draft(body: str = "body") -> Draft:
    return Draft(to="reviewer", kind="update", priority="normal", subject="subject", body=body)


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch):
    """Directories count as settled 0.1 s after a change (a clock tick is at most 10 ms)."""
    monkeypatch.setattr(fsio, "SETTLED_NS", 100_000_000)

    def wait() -> None:
        time.sleep(0.15)

    return wait


def kept(store) -> set[str]:
    return {os.path.basename(p) for p in store.port.handles._kept}


def send_and_keep(store, collab, settled) -> None:
    store.send(collab.id, collab.driver, draft("first"))
    settled()
    store.send(collab.id, collab.driver, draft("second"))
    assert kept(store) == {"write.lock", "reviewer.jsonl", ".reviewer.jsonl.head", "collaboration.md"}


def test_a_long_lived_store_keeps_its_lock_inbox_and_transcript_open(store, collab, settled) -> None:
    send_and_keep(store, collab, settled)
    fds = {fd for _key, fd in store.port.handles._kept.values()}
    store.send(collab.id, collab.driver, draft("third"))
    assert {fd for _key, fd in store.port.handles._kept.values()} == fds  # the same three, reused
    assert "third" in (collab.dir / "collaboration.md").read_text()
    store.port.close()
    assert not store.port.handles._kept
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)
    _files, findings = store.verify(None)
    assert findings == []


def test_an_unsettled_directory_keeps_nothing(store, collab) -> None:
    store.send(collab.id, collab.driver, draft())  # the collaboration was created just now
    store.send(collab.id, collab.driver, draft())
    assert kept(store) == set()


@pytest.mark.parametrize("how", ["replaced", "removed", "moved"])
def test_a_transcript_replaced_behind_the_store_gets_the_next_message(store, collab, settled, how) -> None:
    send_and_keep(store, collab, settled)
    path = collab.dir / "collaboration.md"
    if how == "replaced":  # as repair and render do: a new file renamed over it
        path.with_suffix(".tmp").write_text(path.read_text())
        os.rename(path.with_suffix(".tmp"), path)
    elif how == "removed":
        path.unlink()
    else:  # moved aside by hand: the old file lives on under another name
        os.rename(path, collab.dir / "old.md")
    settled()
    store.send(collab.id, collab.driver, draft("after"))
    assert "after" in path.read_text()  # a removed one is rendered whole again
    if how == "moved":
        assert "after" not in (collab.dir / "old.md").read_text()


def test_an_inbox_moved_aside_is_not_written_through_a_kept_descriptor(store, collab, settled) -> None:
    send_and_keep(store, collab, settled)
    inbox = collab.dir / "inbox" / "reviewer.jsonl"
    aside = collab.dir / "aside.jsonl"
    inbox.rename(aside)
    inbox.write_bytes(aside.read_bytes())  # a copy in its place
    settled()
    store.send(collab.id, collab.driver, draft("after"))
    assert b"after" in inbox.read_bytes() and b"after" not in aside.read_bytes()


def test_a_hard_link_made_to_a_kept_transcript_is_refused_before_anything_is_stored(
        store, collab, settled, tmp_path: Path) -> None:
    send_and_keep(store, collab, settled)
    inbox = collab.dir / "inbox" / "reviewer.jsonl"
    size = inbox.stat().st_size
    os.link(collab.dir / "collaboration.md", tmp_path / "stolen.md")  # the directory itself is unchanged
    with pytest.raises(UnsafePath):
        store.send(collab.id, collab.driver, draft("secret"))
    assert inbox.stat().st_size == size
    assert "secret" not in (tmp_path / "stolen.md").read_text()


def test_threads_sharing_one_store_still_exclude_each_other(store, collab, settled) -> None:
    send_and_keep(store, collab, settled)
    errors: list[BaseException] = []

    def sender(n: int) -> None:
        try:
            for i in range(25):
                store.send(collab.id, collab.driver, draft(f"t{n}-{i}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=sender, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    recs = [rec for _pos, rec in Journal(str(collab.dir / "inbox" / "reviewer.jsonl")).scan()]
    assert [r["seq"] for r in recs] == list(range(1, len(recs) + 1)) and len(recs) == 102
    assert all(r["prev"] == p["sum"] for p, r in itertools.pairwise(recs))
    _files, findings = store.verify(None)
    assert findings == []


def test_a_kept_lock_still_excludes_another_store_in_the_same_process(store, collab, root, settled) -> None:
    send_and_keep(store, collab, settled)
    other = FileStore(root, lock_timeout=0.3)
    with store.port.transaction(collab.id):
        from agentmsg.errors import StoreFailed

        with pytest.raises(StoreFailed):
            other.send(collab.id, collab.driver, draft("blocked"))
    other.send(collab.id, collab.driver, draft("now"))  # released: the kept descriptor holds no lock


def test_a_forked_child_opens_its_own(store, collab, settled) -> None:
    send_and_keep(store, collab, settled)
    parents = {fd for _key, fd in store.port.handles._kept.values()}
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            store.send(collab.id, collab.driver, draft("from the child"))
            mine = {fd for _key, fd in store.port.handles._kept.values()}
            os.write(write, b"ok" if mine and not mine & parents else b"shared")
        finally:
            os._exit(0)
    os.close(write)
    _pid, status = os.waitpid(pid, 0)
    assert os.read(read, 16) == b"ok" and status == 0
    store.send(collab.id, collab.driver, draft("from the parent"))
    assert {fd for _key, fd in store.port.handles._kept.values()} == parents
    _files, findings = store.verify(None)
    assert findings == []


def test_handles_lend_each_descriptor_once_and_only_under_its_key(tmp_path: Path) -> None:
    h = Handles()
    key = (1, 2, 3, 4)
    fd = os.open(tmp_path / "f", os.O_CREAT | os.O_RDWR, 0o600)
    h.give("f", key, fd)
    assert h.take("f", (1, 2, 3, 5)) is None  # another key: closed, not lent
    with pytest.raises(OSError):
        os.fstat(fd)
    fd = os.open(tmp_path / "f", os.O_RDWR)
    h.give("f", key, fd)
    assert h.take("f", key) == fd and h.take("f", key) is None  # lent once: taken out while in use
    h.give("f", None, fd)  # no key (an unsettled directory): closed
    with pytest.raises(OSError):
        os.fstat(fd)
    fds = [os.open(tmp_path / "f", os.O_RDWR) for _ in range(LIMIT + 1)]
    for i, f in enumerate(fds):
        h.give(str(i), key, f)
    with pytest.raises(OSError):
        os.fstat(fds[0])  # the oldest was closed to stay under the limit
    assert len(h._kept) == LIMIT
    h.close()
    assert not h._kept


def test_a_hard_link_made_to_a_kept_head_sidecar_gets_nothing_more(store, collab, settled, tmp_path: Path) -> None:
    send_and_keep(store, collab, settled)
    head = collab.dir / "inbox" / ".reviewer.jsonl.head"
    os.link(head, tmp_path / "stolen.head")
    before = (tmp_path / "stolen.head").read_bytes()
    store.send(collab.id, collab.driver, draft("third"))
    assert (tmp_path / "stolen.head").read_bytes() == before  # replaced at its path, never written through
    assert records.loads(head.read_bytes())["seq"] == 3 and head.stat().st_nlink == 1
    _files, findings = store.verify(None)
    assert findings == []
