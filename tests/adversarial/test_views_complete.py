"""Trust, round three, class 3: an overseer's view never drops a message silently.

A participant must not hide a message from the person in charge by replying
deeply, by pointing ``reply_to`` in a circle, at itself, or at an id that is
not there.  Every view (the HTML page, the Markdown transcripts, ``top``,
``log show``, ``inbox --all``) shows every message, or says how many it left
out, why, and where they are.  Everything is read through the real CLI; the
long chains are stored through the service (a CLI process per message would
take minutes), the forged ones through the file store's own append, as a
same-user process or a member writing its database rows directly could.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from agentmsg import records
from agentmsg.backends.file.store import FileStore as FilePort
from agentmsg.domain import rules, validate
from agentmsg.domain.values import Message
from tests.support.cli_helpers import run, run_json
from tests.support.facade import Draft, FileStore, TestStore

ALICE, BOB = validate.pin("codex:a-1"), validate.pin("claude-code:b-2")
ARTICLE = re.compile(r'<article class="[^"]*" id="m-([0-9a-f-]{36})">')


def _collab(root: Path) -> tuple[TestStore, str]:
    store = FileStore(root)
    cid = store.open(ALICE, "alice", "deep", "a long thread").collab
    store.join(cid, BOB, "bob")
    return store, cid


def _chain(store: TestStore, cid: str, depth: int) -> list[str]:
    """A first message and ``depth`` replies, each answering the one before (alice and bob in turn)."""
    first = store.send(cid, ALICE, Draft(to="bob", subject="start", body="0"))[0].message
    ids = [first.id]
    for i in range(1, depth + 1):
        who = BOB if i % 2 else ALICE
        ids.append(store.send(cid, who, Draft(reply_to=ids[-1], subject=f"re {i}", body=str(i)))[0].message.id)
    return ids


def _forge(root: Path, cid: str, to: str, **fields: object) -> Message:
    """A message record stored as given: the backend decides nothing, so no rule checks its ``reply_to``."""
    rec: dict[str, object] = {
        "type": "message", "id": records.uuid4(), "collab": cid, "sender": "alice", "sender_pin": str(ALICE),
        "sender_runtime": "codex", "to": to, "kind": "update", "priority": "normal", "subject": "forged",
        "body": "forged body", "reply_to": None, "broadcast": None}
    rec.update(fields)
    rec["digest"] = rules.digest(rec)
    with FilePort(root).transaction(cid) as tx:
        return tx.append_message(rec)


def _html(root: Path, cid: str, tmp: Path) -> str:
    out = tmp / "page.html"
    code, doc, err = run_json("log", "render", "--html", "--collab", cid, "--out", str(out), root=root,
                              timeout=600)
    assert code == 0, (doc, err)
    return out.read_text(encoding="utf-8")


@pytest.mark.parametrize("depth", [60, 500])
def test_html_shows_every_reply_of_a_deep_chain(tmp_path: Path, depth: int) -> None:
    root = tmp_path / "state"
    store, cid = _collab(root)
    ids = _chain(store, cid, depth)
    page = _html(root, cid, tmp_path)
    assert ARTICLE.findall(page) == ids  # every message once, in thread order
    assert f"reply depth {depth}; drawn at nesting level 8, below the message it answers" in page
    assert page.count('<div class="replies">') == 8  # the drawing stops nesting; the page does not stop
    assert page.count("<article") == page.count("</article>") == depth + 1


def test_html_of_a_5000_deep_chain_has_no_recursion_limit(tmp_path: Path) -> None:
    root = tmp_path / "state"
    store, cid = _collab(root)
    ids = _chain(store, cid, 5000)
    assert sys.getrecursionlimit() < 5000  # a renderer that recursed per reply would crash here
    page = _html(root, cid, tmp_path)
    assert ARTICLE.findall(page) == ids
    assert "reply depth 5000;" in page
    code, out, _err = run("inbox", "--all", "--collab", cid, "--self", str(BOB), root=root, timeout=600)
    assert code == 0 and out.count("\n## [alice→bob]") == 2501


def test_html_shows_replies_in_a_cycle_to_themselves_and_to_missing_ids(tmp_path: Path) -> None:
    root = tmp_path / "state"
    store, cid = _collab(root)
    plain = store.send(cid, ALICE, Draft(to="bob", subject="plain", body="p"))[0].message
    a_id, b_id = records.uuid4(), records.uuid4()
    a = _forge(root, cid, "bob", id=a_id, reply_to=f"alice/{b_id}", subject="cycle a")  # b comes later
    b = _forge(root, cid, "alice", id=b_id, reply_to=f"bob/{a_id}", subject="cycle b")
    self_id = records.uuid4()
    itself = _forge(root, cid, "bob", id=self_id, reply_to=f"bob/{self_id}", subject="itself")
    missing = _forge(root, cid, "bob", reply_to=f"bob/{records.uuid4()}", subject="orphan")
    under_orphan = _forge(root, cid, "alice", reply_to=f"bob/{missing.id}", subject="under orphan")
    page = _html(root, cid, tmp_path)
    assert sorted(ARTICLE.findall(page)) == sorted(m.id for m in (plain, a, b, itself, missing, under_orphan))
    assert "the message it answers comes later" in page
    assert "it answers itself" in page
    assert "the message it answers is not in this collaboration" in page
    assert "<dt>messages</dt><dd>6</dd>" in page


def test_html_shows_a_forged_duplicate_id_once_each(tmp_path: Path) -> None:
    root = tmp_path / "state"
    store, cid = _collab(root)
    first = store.send(cid, ALICE, Draft(to="bob", subject="one", body="1"))[0].message
    twin = _forge(root, cid, "alice", id=first.id, subject="twin")
    reply = _forge(root, cid, "bob", reply_to=f"bob/{first.id}", subject="answers the first of the twins")
    page = _html(root, cid, tmp_path)
    assert ARTICLE.findall(page).count(first.id) == 2 and twin.id == first.id
    assert ARTICLE.findall(page).count(reply.id) == 1


def test_markdown_transcripts_hold_every_message_of_a_deep_chain(tmp_path: Path) -> None:
    root = tmp_path / "state"
    store, cid = _collab(root)
    ids = _chain(store, cid, 300)
    code, _doc, _err = run_json("log", "render", "--collab", cid, root=root, timeout=600)
    assert code == 0
    md = (root / "collabs" / cid / "collaboration.md").read_text(encoding="utf-8")
    assert [m for m in re.findall(r"^- id: `([0-9a-f-]{36})`", md, re.M) if m != cid] == ids


def test_top_says_how_many_messages_it_left_out(tmp_path: Path) -> None:
    root = tmp_path / "state"
    store, cid = _collab(root)
    _chain(store, cid, 249)  # 250 messages: more than top keeps in memory
    code, out, _err = run("top", "--once", "--collab", cid, root=root, env={"COLUMNS": "240"})
    assert code == 0
    assert "Latest messages (200 newest of 250; the 50 older: agentmsg log render --html)" in out
    assert len(re.findall(r"^[ >] \d\d:\d\d:\d\d ", out, re.M)) == 200


def test_top_counts_requests_and_stuck_messages_it_has_no_room_for(tmp_path: Path) -> None:
    root = tmp_path / "state"
    store, cid = _collab(root)
    for i in range(45):
        store.send(cid, ALICE, Draft(to="bob", kind="request", subject=f"req {i}", body="b"))
    code, out, _err = run("top", "--once", "--collab", cid, root=root, env={"COLUMNS": "240"})
    assert code == 0
    assert "Unacknowledged requests (45)" in out
    shown = len(re.findall(r"^ +\S+ old  ", out, re.M))
    assert f"… {45 - shown} more not shown here" in out and shown < 45


def test_top_shows_every_message_when_it_has_them_all(tmp_path: Path) -> None:
    root = tmp_path / "state"
    store, cid = _collab(root)
    _chain(store, cid, 3)
    code, out, _err = run("top", "--once", "--collab", cid, root=root, env={"COLUMNS": "240"})
    assert code == 0 and "Latest messages (all 4)" in out


def test_log_show_says_the_messages_are_elsewhere(tmp_path: Path) -> None:
    root = tmp_path / "state"
    store, cid = _collab(root)
    _chain(store, cid, 4)
    store.log_append(cid, ALICE, "a note")
    code, out, _err = run("log", "show", "--collab", cid, root=root)
    assert code == 0 and "a note" in out
    assert (f"not listed here: 5 message(s) (the log holds notes and membership events; messages are in the "
            f"inboxes); every one: agentmsg log render --html --collab {cid}") in out
    doc = run_json("log", "show", "--collab", cid, root=root).doc
    assert doc["result"]["left_out"]["messages"] == 5
