"""Derived data is derived: deleting or tampering with it never loses or hides a message.

Through the real CLI, as agents call it.  Everything outside the journals
(``ids/``, ``state/``, transcripts, ``registry.yaml``, the pin index) can be
deleted and every command still works, by itself or after ``agentmsg
repair``; ``verify`` reports derived files that disagree with the journals
and records the derived files name but no journal holds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli_helpers import run_json
from tests.support.helpers_hooks import run_hook

DRIVER, REVIEWER = "codex:d-driver", "claude-code:d-reviewer"
REVIEWER_SESSION = "d-reviewer"


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        code, doc, err = run_json("open", "--self", DRIVER, "--alias", "driver", "--label", "l", "--task", "t",
                                  root=root)
        assert code == 0, err
        self.collab = doc["result"]["collab"]
        code, _doc, err = run_json("join", "--collab", self.collab, "--self", REVIEWER, "--alias", "reviewer",
                                   root=root)
        assert code == 0, err
        self.dir = root / "collabs" / self.collab

    def cli(self, *args: str) -> tuple[int, dict, str]:
        code, doc, err = run_json(*args, root=self.root)
        return code, doc, err

    def send(self, body: str, **kw: str) -> str:
        extra = [x for k, v in kw.items() for x in (f"--{k}", v)]
        code, doc, err = self.cli("send", "--collab", self.collab, "--self", DRIVER, "--to", "reviewer",
                                  "--subject", body[:20], "--body", body, *extra)
        assert code == 0, err
        return doc["result"]["results"][0]["id"]

    def inbox_ids(self) -> list[str]:
        code, doc, err = self.cli("inbox", "--collab", self.collab, "--self", REVIEWER, "--all")
        assert code == 0, err
        return [m["id"] for m in doc["result"]["messages"]]

    def verify(self) -> tuple[int, list[dict]]:
        code, doc, _err = self.cli("verify")
        return code, doc["result"]["findings"] if doc["result"] else doc["error"]


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path / "state")


def test_deleting_every_derived_file_loses_nothing(world: World, tmp_path: Path) -> None:
    ids = [world.send(f"message {i}") for i in range(4)]
    code, _doc, err = world.cli("ack", "--collab", world.collab, "--self", REVIEWER, "--message", ids[1])
    assert code == 0, err
    for name in ("ids", "state", "transcripts"):
        shutil.rmtree(world.dir / name)
    for name in ("registry.yaml", "collaboration.md"):
        (world.dir / name).unlink()
    shutil.rmtree(world.root / "pins")

    assert world.inbox_ids() == [ids[0], ids[2], ids[3]]
    code, doc, err = world.cli("show", ids[2], "--collab", world.collab)
    assert code == 0 and doc["result"]["message"]["body"] == "message 2", err
    code, doc, err = world.cli("ack", "--collab", world.collab, "--self", REVIEWER, "--message", ids[1],
                               "--message", ids[2])
    assert code == 0, err
    assert [r["already"] for r in doc["result"]["results"]] == [True, False]
    res = run_hook("claude", "UserPromptSubmit", tmp_path, world.root, REVIEWER_SESSION)
    assert "subject: message 0" in res.text and "subject: message 3" in res.text
    assert "subject: message 2" not in res.text
    new = world.send("after the deletion")
    assert world.inbox_ids() == [ids[0], ids[3], new]
    transcript = (world.dir / "collaboration.md").read_text()
    assert all(f"`{mid}`" in transcript for mid in [*ids, new]), "the transcript was re-rendered whole"
    assert world.verify() == (0, [])

    for name in ("ids", "state"):
        shutil.rmtree(world.dir / name)
    code, doc, err = world.cli("repair")
    assert code == 0, err
    assert world.verify() == (0, [])
    assert world.inbox_ids() == [ids[0], ids[3], new]


def test_stale_temp_files_are_cleaned_by_repair(world: World) -> None:
    """A killed writer's temp file goes; one a running writer may still rename into place stays."""
    import os
    import time

    world.send("x")
    world.inbox_ids()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(gone.stdout)  # reaped: no process has that pid now (reuse within the test is vanishingly rare)
    live = os.getpid()
    stale = world.dir / "state" / f".reviewer.map.{dead}.deadbeef.tmp"
    unnamed = world.dir / "state" / ".reviewer.map.tmp"
    old = world.dir / f".collaboration.md.{live}.0badcafe.tmp"
    in_flight = world.dir / "state" / f".reviewer.map.{live}.feedf00d.tmp"
    for path in (stale, unnamed, old, in_flight):
        path.write_bytes(b"half written")
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    code, doc, err = world.cli("repair")
    assert code == 0 and doc["result"]["temp_files_removed"] == 3, err
    assert [p.exists() for p in (stale, unnamed, old, in_flight)] == [False, False, False, True]


# ---- tampering verify used to miss ----------------------------------------------------------------------


def _kinds(findings: list[dict]) -> list[str]:
    return [f"{f['kind']}: {f['detail']}" for f in findings]


def test_a_deleted_inbox_file_is_reported(world: World) -> None:
    world.send("one")
    (world.dir / "inbox" / "reviewer.jsonl").unlink()
    (world.dir / "inbox" / ".reviewer.jsonl.head").unlink()
    code, findings = world.verify()
    assert code == 13, findings
    assert any("no journal holds" in f["detail"] or "missing from the collaboration order" in f["detail"]
               for f in findings), _kinds(findings)


def test_a_dropped_last_record_with_its_sidecar_is_reported(world: World) -> None:
    world.send("one")
    world.send("two")
    inbox = world.dir / "inbox" / "reviewer.jsonl"
    lines = inbox.read_bytes().split(b"\n")
    inbox.write_bytes(b"\n".join(lines[:-2]) + b"\n")  # the last record gone, as cleanly as possible
    (world.dir / "inbox" / ".reviewer.jsonl.head").unlink()
    code, findings = world.verify()
    assert code == 13, findings
    assert any(f["tampering"] for f in findings), _kinds(findings)


def test_an_edited_inbox_map_never_hides_mail_and_verify_says_so(world: World, tmp_path: Path) -> None:
    ids = [world.send(f"m{i}") for i in range(3)]
    world.inbox_ids()  # the map is folded and saved
    path = world.dir / "state" / "reviewer.map"
    head, body = path.read_bytes().split(b"\n", 1)
    path.write_bytes(head + b"\n" + bytes(b | 1 for b in body))  # "all acknowledged", with no ack receipt
    code, findings = world.verify()
    assert code == 13 and any("checksum" in f["detail"] for f in findings), _kinds(findings)
    assert world.inbox_ids() == ids  # the read detects the edit and rebuilds from the journals
    res = run_hook("claude", "UserPromptSubmit", tmp_path, world.root, REVIEWER_SESSION)
    assert all(f"m{i}" in res.text for i in range(3))
    # an edit that also fixes the map's own checksum is still caught: it disagrees with the receipts
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from agentmsg import records

    head, body = path.read_bytes().split(b"\n", 1)
    doc = json.loads(head)
    forged = bytes([body[0] | 1]) + body[1:]
    doc["h"] = records.sha256_hex(forged)
    path.write_bytes(json.dumps(doc).encode() + b"\n" + forged)
    code, findings = world.verify()
    assert code == 13 and any("hides an unacknowledged message" in f["detail"] for f in findings), _kinds(findings)
    code, _doc, err = world.cli("repair")
    assert code == 0, err
    assert world.verify() == (0, [])


def test_a_damaged_index_entry_is_reported_and_the_message_still_shown_and_acked(world: World) -> None:
    mid = world.send("indexed")
    log = world.dir / "ids" / f"{mid[:2]}.log"  # an entry appended after the true one wins: the last one counts
    log.write_bytes(log.read_bytes() + f"m {mid} reviewer 99999 7 abcd .\n".encode())
    code, findings = world.verify()
    assert code == 13 and any(mid in f["detail"] for f in findings), _kinds(findings)
    code, doc, err = world.cli("show", mid, "--collab", world.collab)
    assert code == 0 and doc["result"]["message"]["body"] == "indexed", err
    code, doc, err = world.cli("ack", "--collab", world.collab, "--self", REVIEWER, "--message", mid)
    assert code == 0 and doc["result"]["already"] is False, err
    assert world.verify() == (0, [])  # the lookup rewrote the entry from the journal


def test_a_fifo_in_place_of_a_derived_file_is_refused_not_waited_on(world: World) -> None:
    world.send("x")
    world.inbox_ids()
    (world.dir / "state" / "reviewer.map").unlink()
    import os

    os.mkfifo(world.dir / "state" / "reviewer.map")
    proc = subprocess.run([sys.executable, "-m", "agentmsg.cli", "inbox", "--collab", world.collab, "--self",
                           REVIEWER, "--json"], env={**os.environ, "AGENTMSG_HOME": str(world.root),
                                                     "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 12, proc.stderr


def test_ids_of_the_first_layout_are_read_as_missing_and_rebuilt_once(world: World) -> None:
    """A root written before ids/ became one log per shard: one file per message, in a directory per shard."""
    mids = [world.send(f"old layout {i}") for i in range(3)]
    ids = world.dir / "ids"
    for log in ids.glob("*.log"):
        log.unlink()
    for mid in mids:
        (ids / mid[:2]).mkdir(exist_ok=True)
        (ids / mid[:2] / f"{mid}.json").write_text('{"inbox": "reviewer", "offset": 0, "seq": 1, "digest": "x"}\n')
    code, doc, err = world.cli("show", mids[2], "--collab", world.collab)
    assert code == 0 and doc["result"]["message"]["body"] == "old layout 2", err
    assert sorted(p.name for p in ids.iterdir()) == [f"{i:02x}.log" for i in range(256)]  # no directory left
    code, doc, err = world.cli("ack", "--collab", world.collab, "--self", REVIEWER, "--message", mids[0])
    assert code == 0 and doc["result"]["already"] is False, err
    assert world.verify() == (0, [])


def test_a_torn_index_line_never_swallows_the_next_entry(world: World) -> None:
    """A crash mid-append leaves part of a line; the next entry starts on a line of its own."""
    first = world.send("before the tear")
    log = world.dir / "ids" / f"{first[:2]}.log"
    log.write_bytes(log.read_bytes() + f"\nm {first[:20]}".encode())  # torn: no end of line
    # The same shard for the next message (an id of our choosing), so its entry lands right after the tear.
    mid = first[:2] + "aaaaaa-1111-4222-8333-444455556666"
    code, doc, err = world.cli("send", "--collab", world.collab, "--self", DRIVER, "--to", "reviewer", "--subject",
                               "s", "--body", "after the tear", "--id", mid)
    assert code == 0, err
    assert f"\nm {first[:20]}\nm {mid} reviewer ".encode() in log.read_bytes()
    code, doc, err = world.cli("show", mid, "--collab", world.collab)
    assert code == 0 and doc["result"]["message"]["body"] == "after the tear", err
    assert world.verify() == (0, [])


def test_garbage_in_an_index_log_is_rebuilt_from_the_journals(world: World) -> None:
    mid = world.send("indexed")
    log = world.dir / "ids" / f"{mid[:2]}.log"
    log.write_bytes(b"not an index at all\n" + log.read_bytes())
    code, doc, err = world.cli("ack", "--collab", world.collab, "--self", REVIEWER, "--message", mid)
    assert code == 0 and doc["result"]["already"] is False, err
    assert log.read_bytes().startswith(f"m {mid} reviewer ".encode())  # written whole again
    assert world.verify() == (0, [])


# ---- a derived file never decides who gets mail, or hides it ------------------------------------------


def test_an_edited_registry_yaml_routes_nothing(world: World, tmp_path: Path) -> None:
    """``registry.yaml`` still names the newest event, but its aliases and pins were edited: collab.jsonl decides."""
    first = world.send("before the edit")
    registry = world.dir / "registry.yaml"
    pristine = registry.read_bytes()
    edited = pristine.replace(b'"reviewer"', b'"mallory"').replace(REVIEWER.encode(), b"human:mallory")
    assert edited != pristine and b"built_from" in edited
    registry.write_bytes(edited)

    code, doc, err = world.cli("send", "--collab", world.collab, "--self", DRIVER, "--to", "mallory", "--subject",
                               "s", "--body", "to a name only the edit knows")
    assert (code, doc["error"]["message"]) == (4, "FAILED(unknown agent): mallory (aliases here: driver, reviewer)"), \
        err
    assert not (world.dir / "inbox" / "mallory.jsonl").exists()
    second = world.send("after the edit")  # the real recipient is still one
    code, doc, err = world.cli("inbox", "--collab", world.collab, "--self", "human:mallory")
    assert code != 0 and doc["ok"] is False, "the edited pin took no binding"
    assert world.inbox_ids() == [first, second]
    res = run_hook("claude", "UserPromptSubmit", tmp_path, world.root, REVIEWER_SESSION)
    assert "subject: after the edit" in res.text

    code, findings = world.verify()
    assert code == 13 and [(f["path"], f["kind"], f["tampering"]) for f in findings] == [
        (str(registry), "edited", True)], _kinds(findings)
    assert registry.read_bytes() == edited, "left for verify to show; repair renders it again"
    code, _doc, err = world.cli("repair")
    assert code == 0, err
    assert registry.read_bytes() == pristine
    assert world.verify() == (0, [])


def _index_lines(world: World, mid: str) -> list[str]:
    return [line for line in (world.dir / "ids" / f"{mid[:2]}.log").read_text().splitlines() if f" {mid} " in line]


def test_a_broadcast_entry_written_over_a_message_never_hides_it(world: World) -> None:
    mid = world.send("a direct message")
    log = world.dir / "ids" / f"{mid[:2]}.log"
    log.write_bytes(log.read_bytes() + f"b {mid} reviewer .\n".encode())  # the last whole entry counts
    code, findings = world.verify()
    assert code == 13 and any(mid in f["detail"] and f["kind"] == "damaged" for f in findings), _kinds(findings)
    # the same send again, with its id: the stored message, not "already stored as a broadcast"
    code, doc, err = world.cli("send", "--collab", world.collab, "--self", DRIVER, "--to", "reviewer", "--subject",
                               "a direct message"[:20], "--body", "a direct message", "--id", mid)
    assert code == 0 and doc["result"]["results"][0]["state"] == "already stored", err
    code, doc, err = world.cli("show", mid, "--collab", world.collab)
    assert code == 0 and doc["result"]["message"]["body"] == "a direct message", err
    code, doc, err = world.cli("ack", "--collab", world.collab, "--self", REVIEWER, "--message", mid)
    assert code == 0 and doc["result"]["already"] is False, err
    assert world.verify() == (0, [])  # the lookup wrote the message's entry again, after the false one

    # with the message's own entry gone too, only the false one left: the journals still decide
    other = world.send("another direct message")
    log = world.dir / "ids" / f"{other[:2]}.log"
    kept = [line for line in log.read_text().splitlines() if f" {other} " not in line]
    log.write_text("\n".join([*kept, f"b {other} reviewer ."]) + "\n")
    code, findings = world.verify()
    assert code == 13 and any(other in f["detail"] for f in findings), _kinds(findings)
    code, doc, err = world.cli("show", other, "--collab", world.collab)
    assert code == 0 and doc["result"]["message"]["body"] == "another direct message", err
    code, _doc, err = world.cli("repair")
    assert code == 0, err
    assert world.verify() == (0, [])
    assert [line.split()[0] for line in _index_lines(world, other)] == ["m"]


def test_a_broadcast_entry_that_disagrees_with_its_copies_is_reported(world: World) -> None:
    code, doc, err = world.cli("send", "--collab", world.collab, "--self", DRIVER, "--to", "all", "--subject", "b",
                               "--body", "to everyone")
    assert code == 0, err
    copy = doc["result"]["results"][0]["id"]
    code, doc, err = world.cli("show", copy, "--collab", world.collab)
    assert code == 0, err
    base = doc["result"]["message"]["broadcast"]
    assert [line.split()[0] for line in _index_lines(world, base)] == ["b"]
    assert world.verify() == (0, [])
    log = world.dir / "ids" / f"{base[:2]}.log"
    # a broadcast a crash cut short names more recipients than it has copies: no finding (a re-send completes it)
    found = log.read_text()
    log.write_text(found.replace(f"b {base} reviewer .", f"b {base} carol reviewer ."))
    assert world.verify() == (0, [])
    log.write_text(found)
    log.write_text(log.read_text().replace(f"b {base} reviewer .", f"b {base} driver ."))
    code, findings = world.verify()
    assert code == 13 and any(base in f["detail"] and f["kind"] == "damaged" for f in findings), _kinds(findings)
    log.write_text("\n".join(line for line in log.read_text().splitlines() if f" {base} " not in line) + "\n")
    code, findings = world.verify()
    assert code == 13 and any(f"broadcast {base} has no index entry" in f["detail"] for f in findings), \
        _kinds(findings)
    code, _doc, err = world.cli("repair")
    assert code == 0, err
    assert world.verify() == (0, [])
    assert _index_lines(world, base) == [f"b {base} reviewer ."]


def _delete_every_derived_file(world: World) -> None:
    for name in ("ids", "state", "transcripts"):
        shutil.rmtree(world.dir / name)
    for name in ("registry.yaml", "collaboration.md"):
        (world.dir / name).unlink()
    shutil.rmtree(world.root / "pins")


@pytest.mark.parametrize("command", ["verify", "inbox", "status", "registry", "hook"])
def test_after_deleting_every_derived_file_any_command_leaves_verify_clean(world: World, tmp_path: Path,
                                                                          command: str) -> None:
    """Nothing but the journals left, one command, then ``verify``: clean, and the views are back as rendered."""
    ids = [world.send(f"message {i}") for i in range(3)]
    code, _doc, err = world.cli("ack", "--collab", world.collab, "--self", REVIEWER, "--message", ids[0])
    assert code == 0, err
    names = ["registry.yaml", "collaboration.md", "transcripts/reviewer.md", "transcripts/driver.md"]
    rendered = {n: (world.dir / n).read_bytes() for n in names if (world.dir / n).exists()}
    assert "transcripts/reviewer.md" in rendered
    _delete_every_derived_file(world)
    if command == "hook":
        res = run_hook("claude", "UserPromptSubmit", tmp_path, world.root, REVIEWER_SESSION)
        assert "subject: message 1" in res.text and "subject: message 0" not in res.text
    else:
        args = {"inbox": ["--collab", world.collab, "--self", REVIEWER], "registry": ["--collab", world.collab],
                "status": ["--self", REVIEWER]}.get(command, [])
        code, _doc, err = world.cli(command, *args)
        assert code == 0, err
    assert world.verify() == (0, [])
    assert {n: (world.dir / n).read_bytes() for n in rendered} == rendered
    code, doc, err = world.cli("show", ids[2], "--collab", world.collab)
    assert code == 0 and doc["result"]["message"]["body"] == "message 2", err


@pytest.mark.parametrize("name", ["collaboration.md", "transcripts/reviewer.md"])
def test_an_edited_transcript_is_reported_and_one_left_behind_is_brought_up_to_date(world: World,
                                                                                    name: str) -> None:
    world.send("what was said")
    world.send("what came next")
    path = world.dir / name
    pristine = path.read_bytes()
    assert b"what was said" in pristine
    path.write_bytes(pristine.replace(b"what was said", b"what was NOT said"))
    code, findings = world.verify()
    assert code == 13 and [(f["path"], f["kind"]) for f in findings] == [(str(path), "derived")], _kinds(findings)
    code, _doc, err = world.cli("repair")
    assert code == 0, err
    assert path.read_bytes() == pristine
    assert world.verify() == (0, [])
    # whole sections missing, none changed (a send cut short after its record was stored): written again
    first = pristine.index(b"what was said")
    start = pristine.rfind(b"\n## ", 0, first) + 1
    path.write_bytes(pristine[:start] + pristine[pristine.index(b"\n## ", first) + 1:])
    code, doc, err = world.cli("verify")
    assert code == 0, err
    assert [(f["path"], f["kind"], f["tampering"]) for f in doc["result"]["findings"]] == [(str(path), "healed", False)]
    assert doc["result"]["healed"] == 1 and doc["result"]["tampering"] == 0
    assert path.read_bytes() == pristine
    assert world.verify() == (0, [])


def test_a_send_whose_transcript_append_failed_leaves_verify_clean_after_healing(world: World) -> None:
    """The record is stored, the transcript append fails (a full disk: ``derived.quietly`` swallows it), later sends
    append after the gap: ``verify`` brings both views up to date instead of calling it tampering."""
    import errno

    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from agentmsg.backends.file import transcripts
    from agentmsg.backends.file.store import FileStore
    from agentmsg.domain.validate import pin
    from agentmsg.domain.values import Draft
    from agentmsg.service.messaging import Mailbox

    world.send("before")
    box = Mailbox(FileStore(world.root))
    real = transcripts._append_view

    def full_disk(view: object, section: bytes) -> int | None:
        raise OSError(errno.ENOSPC, "No space left on device")

    transcripts._append_view = full_disk  # type: ignore[assignment]
    try:
        (sent,) = box.send(world.collab, pin(DRIVER), Draft(to="reviewer", kind="update", priority="normal",
                                                                  subject="lost view", body="stored all the same"))
    finally:
        transcripts._append_view = real  # type: ignore[assignment]
    world.send("after")
    assert b"stored all the same" not in (world.dir / "collaboration.md").read_bytes()
    code, doc, err = world.cli("verify")
    assert code == 0, err
    assert sorted((Path(f["path"]).name, f["kind"]) for f in doc["result"]["findings"]) == [
        ("collaboration.md", "healed"), ("reviewer.md", "healed")]
    for name in ("collaboration.md", "transcripts/reviewer.md"):
        assert f"`{sent.message.id}`".encode() in (world.dir / name).read_bytes()
    assert world.verify() == (0, [])


def test_a_pin_index_entry_edited_away_is_reported_and_repaired(world: World, tmp_path: Path) -> None:
    """The pin index misroutes nothing (every entry is confirmed against the registry), but a binding edited
    out of it leaves the session unbound: ``verify`` says so, ``repair`` binds it again."""
    world.send("for the reviewer")
    (pin_file,) = [p for p in (world.root / "pins").glob("*.json") if REVIEWER in p.read_text()]
    pristine = pin_file.read_bytes()
    pin_file.write_bytes(pristine.replace(b'"reviewer"', b'"driver"'))
    unbound = run_hook("claude", "UserPromptSubmit", tmp_path, world.root, REVIEWER_SESSION)
    assert unbound.returncode == 0 and unbound.stdout == ""
    code, findings = world.verify()
    assert code == 13 and [(f["path"], f["kind"]) for f in findings] == [(str(pin_file), "derived")], \
        _kinds(findings)
    code, _doc, err = world.cli("repair")
    assert code == 0, err
    assert world.verify() == (0, [])
    assert "for the reviewer" in run_hook("claude", "UserPromptSubmit", tmp_path, world.root, REVIEWER_SESSION).text


@pytest.mark.parametrize("scope", ["root", "collab"])
def test_verify_reports_a_collaboration_whose_membership_journal_is_garbage(world: World, scope: str) -> None:
    """Nothing to replay or render from (no opening record left): the journal findings, not "not found"."""
    world.send("x")
    (world.dir / "collab.jsonl").write_bytes(b"\x00garbage\n{not json\n")
    code, doc, err = world.cli("verify", *(["--collab", world.collab] if scope == "collab" else []))
    assert code == 13, err
    assert all(f["path"].startswith(str(world.dir)) for f in doc["result"]["findings"])
    assert any(f["path"] == str(world.dir / "collab.jsonl") for f in doc["result"]["findings"])


def test_verify_goes_on_past_a_collaboration_an_open_left_empty(world: World) -> None:
    """An ``open`` killed before its first record leaves an empty ``collab.jsonl``: a finding, never a stop."""
    world.send("x")
    other = world.root / "collabs" / "0199a1b2-c3d4-7e5f-8a9b-00000000e0e0"
    other.mkdir()
    (other / "collab.jsonl").write_bytes(b"")
    code, doc, err = world.cli("verify")
    assert code in (0, 13) and doc["result"] is not None, err
    assert not any(f["path"].startswith(str(world.dir)) for f in doc["result"]["findings"])


def _entry_of(world: World, mid: str) -> list[str]:
    log = world.dir / "ids" / f"{mid[:2]}.log"
    return [line for line in log.read_text().splitlines() if line.startswith(f"m {mid} ")]


@pytest.mark.parametrize("offset", ["0", "7", "99999"])
def test_an_index_entry_pointing_at_another_offset_is_reported_and_repaired(world: World, offset: str) -> None:
    """Only its offset changed (inbox, seq and digest still right): a lookup checks the record and copes, but
    the entry disagrees with the journal and verify says so."""
    first, mid = world.send("first"), world.send("second")
    (line,) = _entry_of(world, mid)
    fields = line.split(" ")
    assert fields[3] != offset
    fields[3] = offset
    log = world.dir / "ids" / f"{mid[:2]}.log"
    log.write_text(log.read_text().replace(line, " ".join(fields)))
    code, findings = world.verify()
    assert code == 13 and _kinds(findings) == [f"damaged: index entry of {mid} disagrees with its record "
                                               "(run agentmsg repair)"], _kinds(findings)
    code, _doc, err = world.cli("repair")
    assert code == 0, err
    assert world.verify() == (0, [])
    assert world.inbox_ids() == [first, mid]


def test_an_offsets_entry_pointing_at_another_record_is_reported_and_repaired(world: World) -> None:
    ids = [world.send(f"message {i}") for i in range(3)]
    assert world.inbox_ids() == ids  # the map and its offsets file are written
    offsets = world.dir / "state" / "reviewer.offsets"
    raw = bytearray(offsets.read_bytes())
    assert len(raw) == 24
    raw[8:16] = raw[0:8]  # message 2's entry names message 1's record
    offsets.write_bytes(bytes(raw))
    code, findings = world.verify()
    assert code == 13 and _kinds(findings) == ["derived: offsets entry for seq 2 does not point at its record "
                                               "(run agentmsg repair)"], _kinds(findings)
    code, doc, err = world.cli("show", ids[1], "--collab", world.collab)
    assert code == 0 and doc["result"]["message"]["body"] == "message 1", err
    code, _doc, err = world.cli("repair")
    assert code == 0, err
    assert world.verify() == (0, [])
    assert world.inbox_ids() == ids


@pytest.mark.parametrize("damage", [b"garbage{", b"{}", b'{"v": 2}', b"\xff\xfe"])
def test_a_damaged_hook_state_is_reported_and_reset_by_repair(world: World, tmp_path: Path, damage: bytes) -> None:
    world.send("one")
    res = run_hook("claude", "UserPromptSubmit", tmp_path, world.root, REVIEWER_SESSION)
    assert "subject: one" in res.text
    state = world.dir / "state" / "reviewer.hook.json"
    assert json.loads(state.read_text())["prompt"] == 1
    assert world.verify() == (0, [])
    state.write_bytes(damage)
    code, findings = world.verify()
    assert code == 13 and _kinds(findings) == ["derived: hook state does not parse: the hooks reset it and skip a "
                                               "prompt (run agentmsg repair)"], _kinds(findings)
    code, doc, err = world.cli("repair")
    assert code == 0, err
    assert "state/reviewer.hook.json (damaged: reset)" in doc["result"]["rebuilt"][world.collab]
    assert not state.exists()
    assert world.verify() == (0, [])
    res = run_hook("claude", "UserPromptSubmit", tmp_path, world.root, REVIEWER_SESSION)
    assert "subject: one" in res.text  # shown again at once: a reset state has shown nothing
    assert json.loads(state.read_text())["prompt"] == 1
