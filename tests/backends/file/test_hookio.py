"""The lean core the hooks and the store share: records, fsio, journal, paths and the file backend.

There is one implementation of each piece; these tests pin it to what it
replaced (``json``, ``hashlib``, ``model``'s regular expressions, the
store's own algorithms) and check that the hook path stays lean.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmsg import fsio, paths, records
from agentmsg.backends.file import layout, registryview
from agentmsg.backends.file.integrity import verify_file
from agentmsg.backends.file.journal import Journal, Problem
from agentmsg.backends.file.store import FileStore as FilePort
from agentmsg.domain import rules
from agentmsg.domain import validate as model
from agentmsg.errors import StoreFailed, UnsafePath, UsageError
from agentmsg.hooks import base as hookrun
from agentmsg.hooks import base as stdin
from tests.support.facade import Draft

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20,
)


# ---- records: the JSON and sha256 without json/hashlib ------------------------------------


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=10), JSONISH, max_size=6))
def test_canonical_json_and_checksum_are_byte_identical_to_json(obj):
    try:
        expected = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:  # lone surrogates: both refuse
        with pytest.raises(UnicodeEncodeError):
            records.canonical(obj)
        return
    assert records.canonical(obj) == expected
    assert records.dumps_plain(obj) == json.dumps(obj)
    assert records.loads(expected) == records.loads(expected.decode()) == json.loads(expected)
    body = {k: v for k, v in obj.items() if k != "sum"}
    assert records.checksum(obj) == hashlib.sha256(json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()


@pytest.mark.parametrize("text", ["", "  ", "{", "[1,]", "nul", '{"a":1} x', "1 2", '"\\ud800"', "NaN", "[Infinity]",
                                  '{"a": {"b": [1, 2.5e3, null, true, false, "é"]}}', " \t\n[]\r\n", "\ufeff{}"])
def test_loads_agrees_with_json(text):
    for data in (text, text.encode("utf-8", "surrogatepass")):
        try:
            expected = json.loads(data)
        except ValueError:
            with pytest.raises(ValueError):
                records.loads(data)
            continue
        assert json.dumps(records.loads(data)) == json.dumps(expected)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32",
                                      "utf-32-le", "utf-32-be"])
def test_loads_detects_encodings_like_json(encoding):
    for text in ('{"seq": 1, "é": "ü"}', "[1]", "1", '"a"'):
        data = text.encode(encoding)
        assert records.loads(data) == json.loads(data)


def json_decode(line: bytes) -> dict | None:
    """records.decode before it went lean, on ``json``/``hashlib``; None for a bad line."""
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("seq"), int):
        return None
    body = {k: v for k, v in rec.items() if k != "sum"}
    try:
        digest = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                           ensure_ascii=False).encode()).hexdigest()
    except UnicodeEncodeError:
        return None
    return rec if rec.get("sum") == digest else None


def sealed_line(fields: dict, seq: int = 1, prev: str = "") -> bytes:
    return records.encode(records.seal(fields, seq=seq, prev=prev, prev_ts=None))[:-1]


@pytest.mark.parametrize(("line", "reason"), [
    (sealed_line({"type": "x", "body": "é\n"}), None),
    (b"\xef\xbb\xbf" + sealed_line({"type": "bom"}), None),
    (sealed_line({"type": "x"}).replace(b'"x"', b'"y"'), "checksum mismatch"),
    (b'{"seq": 1, "sum": "x", "s": "\\ud800"}', "checksum mismatch"),  # no writer could have summed it
    (b'{"seq": 1}', "checksum mismatch"),
    (b'{"seq": "1", "sum": "x"}', "not a record"),
    (b"[1]", "not a record"),
    (b"garbage", "line does not parse"),
    (b"\xff\xfe", "line does not parse"),
    (b"", "line does not parse"),
])
def test_decode_and_peek(line, reason):
    if reason is None:
        assert records.decode(line) == json_decode(line) == json.loads(line)
    else:
        with pytest.raises(records.BadRecord, match=reason) as bad:
            records.decode(line)
        assert bad.value.torn == (reason == "line does not parse")
        assert json_decode(line) is None
    try:
        rec = json.loads(line)
    except ValueError:
        rec = None
    ok = isinstance(rec, dict) and isinstance(rec.get("seq"), int) and isinstance(rec.get("sum"), str)
    assert records.peek(line) == (rec if ok else None)


# ---- fsio: str or Path in, the same kind out ---------------------------------------------


@pytest.mark.parametrize("kind", [str, Path])
def test_fsio_takes_str_or_path_and_returns_the_same_kind(tmp_path, kind):
    root = kind(tmp_path / "fresh" / "root")
    made = fsio.ensure_dir(root, "a", "b")
    assert isinstance(made, kind) and os.fspath(made) == str(tmp_path / "fresh" / "root" / "a" / "b")
    assert oct(os.stat(made).st_mode & 0o777) == "0o700"
    assert fsio.existing_dir(root, "a", "b") == made and fsio.existing_dir(root, "nope") is None
    path = fsio.join(made, "f.jsonl")
    assert isinstance(path, kind) and isinstance(fsio.sibling(path, "g"), kind)
    assert fsio.append(path, b"one\n") == 0 and fsio.append(path, b"torn") == 4
    assert fsio.append(path, b"two\n") == 9  # the torn line got its newline first
    assert fsio.read_bytes(path) == b"one\ntorn\ntwo\n" and fsio.read_bytes(path, 4) == b"torn\ntwo\n"
    assert fsio.next_offset(path) == fsio.file_size(path) == 13
    assert list(fsio.lines(path, 4)) == [(4, b"torn", True), (9, b"two", True)]
    assert list(fsio.last_lines(path)) == [b"two", b"torn", b"one"]
    fsio.atomic_write(path, b"new")
    assert fsio.read_bytes(path) == b"new" and sorted(os.listdir(made)) == ["f.jsonl"]
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    link = fsio.join(made, "link")
    os.symlink(os.fspath(path), link)
    for call in (lambda: fsio.read_bytes(link), lambda: fsio.file_size(link), lambda: fsio.refuse_link(link),
                 lambda: fsio.existing_dir(made, "link"), lambda: fsio.ensure_dir(made, "link")):
        with pytest.raises(UnsafePath):
            call()


def test_read_bytes_of_a_big_file(tmp_path):
    path = tmp_path / "big"
    data = os.urandom(3 * fsio.CHUNK + 17)
    path.write_bytes(data)
    assert fsio.read_bytes(str(path)) == data and fsio.read_bytes(path, 5) == data[5:]
    assert fsio.read_bytes(tmp_path / "missing") is None


def test_locked_excludes_and_times_out(tmp_path, store, collab):
    lock = str(tmp_path / "write.lock")
    with fsio.locked(lock, 1.0):
        with pytest.raises(StoreFailed, match=r"held for more than 0\.05s"):
            with fsio.locked(lock, 0.05):
                pass
    with fsio.locked(lock, 0.05):  # released
        pass
    port = FilePort(collab.root, lock_timeout=0.05)
    with fsio.locked(str(collab.dir / "write.lock"), 1.0):
        with pytest.raises(hookrun.LockTimeout):  # the hooks' name for it, in hooks.log
            with hookrun._LockedTxn(port, collab.id, str(collab.dir)):
                pass


# ---- journal -----------------------------------------------------------------------------


def test_append_many_extends_a_journal_like_append(tmp_path):
    path = tmp_path / "r.jsonl"
    journal = Journal(path)
    journal.append({"type": "a"})
    reserved = []
    placed = Journal(str(path)).append_many([{"type": "b", "n": 1}, {"type": "b", "n": 2}],
                                            before=lambda at, rec: reserved.append((at, rec)))
    assert reserved == placed
    journal.append({"type": "c"})
    placed += Journal(str(path)).append_many([{"type": "d"}])
    recs = [r for _, r in journal.scan()]
    assert placed == [(pos, rec) for pos, rec in journal.scan() if rec["type"] in "bd"]
    assert [r["type"] for r in recs] == ["a", "b", "b", "c", "d"] and [r["seq"] for r in recs] == [1, 2, 3, 4, 5]
    assert b"".join(records.encode(r) for r in recs) == path.read_bytes()
    assert verify_file(path) == []
    assert journal.head() == {"seq": 5, "sum": recs[-1]["sum"]}
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert Journal(str(path)).head_path == str(journal.head_path) and journal.head_path.name == ".r.jsonl.head"
    assert journal.append_many([]) == []


def test_a_lagging_head_is_accepted_until_the_next_append(tmp_path):
    path = tmp_path / "r.jsonl"
    journal = Journal(path)
    journal.append({"type": "a"})
    journal.append_many([{"type": "b"}, {"type": "b"}], head=False, durable=False)
    assert journal.head()["seq"] == 1 and verify_file(path) == []
    journal.append({"type": "c"})
    assert journal.head()["seq"] == 4 and verify_file(path) == []


def test_append_after_a_torn_tail_keeps_it_as_evidence(tmp_path):
    path = tmp_path / "r.jsonl"
    Journal(path).append({"type": "a"})
    with open(path, "ab") as fh:
        fh.write(b'{"type": "torn", "se')
    ((offset, rec),) = Journal(str(path)).append_many([{"type": "b"}])
    assert rec["seq"] == 2 and Journal(path).read_at(offset) == rec
    assert [f.kind for f in verify_file(path)] == ["torn"]
    problems: list[Problem] = []
    assert [r["type"] for _, r in Journal(path).scan(0, problems)] == ["a", "b"]
    assert problems == [Problem(str(path), len(records.encode(Journal(path).read_at(0))), "line does not parse",
                                True)]
    assert problems[0].as_dict() == {"path": str(path), "offset": problems[0].offset,
                                     "reason": "line does not parse", "torn": True}


def test_last_reads_big_records_from_the_end(tmp_path):
    path = tmp_path / "r.jsonl"
    for i in range(5):
        Journal(path).append({"type": "big", "body": "\x01" * (30_000 * i)})
    assert Journal(path).last() == [r for _, r in Journal(path).scan()][-1]


def test_entries_give_the_end_of_each_record_and_skip_bad_lines(tmp_path):
    path = tmp_path / "r.jsonl"
    for i in range(4):
        Journal(path).append({"type": "m", "i": i})
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"i":1', b'"i":7')  # edited
    path.write_bytes(b"\n".join(lines) + sealed_line({"type": "unterminated"}, seq=9))
    problems: list[Problem] = []
    entries = list(Journal(path).entries(0, problems))
    assert [r["i"] for _, r, _ in entries] == [0, 2, 3]
    assert all(end == pos + len(records.encode(rec)) for pos, rec, end in entries)
    assert [(p.reason, p.torn) for p in problems] == [("checksum mismatch", False), ("unterminated last line", True)]
    offset = entries[1][0]
    assert list(Journal(path).scan(offset)) == [(p, r) for p, r, _ in entries[1:]]


# ---- paths and names ----------------------------------------------------------------------------


@pytest.mark.parametrize(("env", "expected"), [
    ({"AGENTMSG_HOME": "/srv/am/../am2/"}, ("/srv/am2", "AGENTMSG_HOME")),
    ({"XDG_STATE_HOME": "/xdg"}, ("/xdg/agentmsg", "XDG_STATE_HOME")),
    ({"HOME": "/home/u"}, ("/home/u/.local/state/agentmsg", "HOME")),
    ({"AGENTMSG_HOME": "", "XDG_STATE_HOME": "", "HOME": "/h"}, ("/h/.local/state/agentmsg", "HOME")),
    ({"AGENTMSG_HOME": "~/x"}, ("~/x", "AGENTMSG_HOME")),  # ~ is the process's home, as in a shell
    ({"AGENTMSG_HOME": "relative"}, None), ({"XDG_STATE_HOME": "rel"}, None), ({}, None),
])
def test_resolve_root(env, expected):
    if expected is None:
        with pytest.raises(UsageError):
            paths.resolve_root_str(None, env)
        with pytest.raises(UsageError):
            paths.resolve_root(None, env)
        return
    expected = (os.path.expanduser(expected[0]), expected[1])
    assert paths.resolve_root_str(None, env) == expected
    assert paths.resolve_root(None, env) == (Path(expected[0]), expected[1])
    assert paths.resolve_root_str("/flag/", env) == ("/flag", "--root")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_names_match_the_model(value):
    try:
        key = hashlib.sha256(value.encode()).hexdigest()[:32]
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            layout.pin_key(value)
    else:
        assert layout.pin_key(value) == key
    assert rules.is_alias(value) == (bool(model.ALIAS_RE.fullmatch(value)) and value != "all")
    assert stdin.is_session(value) == bool(model.SESSION_RE.fullmatch(value))
    try:
        canonical = model.as_uuid(value, "id") == value
    except Exception:
        canonical = False
    assert layout.is_uuid(value) == canonical


def test_uuid4_and_canonical_uuid_checks():
    for _ in range(200):
        u = records.uuid4()
        assert uuid.UUID(u).version == 4 and layout.is_uuid(u)
    for good in (str(uuid.uuid4()), str(uuid.uuid1())):
        assert layout.is_uuid(good)
    for bad in (str(uuid.uuid4()).upper(), "{" + str(uuid.uuid4()) + "}", str(uuid.uuid4()).replace("-", "")):
        assert not layout.is_uuid(bad)


# ---- the file backend's derived files, as the hooks and the CLI both read them ------------------------


def send(store, collab, i: int, kind: str = "update") -> str:
    return store.send(collab.id, collab.driver, Draft(to="reviewer", kind=kind, priority="normal",
                                                      subject=f"s{i}", body=f"b{i}"))[0].message.id


def test_bindings_are_confirmed_against_each_registry(store, collab):
    send(store, collab, 0)
    port = FilePort(collab.root)
    for pin, alias in ((collab.reviewer, "reviewer"), (collab.driver, "driver")):
        assert port.bindings(str(pin)) == [(collab.id, alias)]
    assert port.bindings("claude-code:someone-else") == []
    # a tampered pin index entry names nothing
    key = layout.pin_key(str(collab.reviewer))
    pins = collab.root / "pins" / f"{key}.json"
    doc = json.loads(pins.read_bytes())
    doc["bindings"] += [{"collab": "../../etc", "alias": "reviewer"}, {"collab": collab.id, "alias": "Bad/"},
                        {"collab": str(uuid.uuid4()), "alias": "reviewer"}]
    pins.write_text(json.dumps(doc))
    assert port.bindings(str(collab.reviewer)) == [(collab.id, "reviewer")]


def test_the_inbox_map_follows_acks_and_is_rebuilt_when_edited(store, collab):
    ids = [send(store, collab, i) for i in range(5)]
    port = FilePort(collab.root)
    for mid in (ids[1], ids[3]):
        store.ack(collab.id, collab.reviewer, mid)
    want = [ids[0], ids[2], ids[4]]
    assert [m.id for m in port.unacked(collab.id, "reviewer", limit=10, priority_first=False).messages] == want
    path = collab.dir / "state" / "reviewer.map"
    head, body = path.read_bytes().split(b"\n", 1)
    path.write_bytes(head + b"\n" + bytes(b | 1 for b in body))  # mark everything acknowledged, by hand
    page = port.unacked(collab.id, "reviewer", limit=10, priority_first=False)
    assert [m.id for m in page.messages] == want and page.total == 3, "an edited map never hides mail"
    (collab.dir / "state" / "reviewer.offsets").write_bytes(b"\xff" * 40)  # wrong offsets: found the slow way
    assert [m.id for m in port.unacked(collab.id, "reviewer", limit=10, priority_first=False).messages] == want


def test_a_receipt_pointer_is_appended_not_rewritten(store, collab):
    (sent,) = store.send(collab.id, collab.driver, Draft(to="reviewer", kind="update", priority="normal",
                                                         subject="s", body="b"))
    mid = sent.message.id
    index = collab.dir / "ids" / f"{mid[:2]}.log"
    store.receipt(collab.id, "reviewer", {"type": "presented", "message": mid, "attempt": "a1", "host": "x"})
    by_store = index.read_bytes()
    store.receipt(collab.id, "reviewer", {"type": "presented", "message": mid, "attempt": "a2", "host": "y"})
    assert index.read_bytes().startswith(by_store)  # appended, not rewritten
    assert by_store.split(b"\n")[1].split(b" ")[:3] == [b"m", mid.encode(), b"reviewer"]
    assert [p["attempt"] for p in store.state(collab.id, sent.message).presented] == ["a1", "a2"]
    index.write_bytes(b"{damaged")  # derived: unreadable now, rebuilt from the journals
    rec = store.receipt(collab.id, "reviewer", {"type": "presented", "message": mid, "attempt": "a3", "host": "x"})
    assert rec["attempt"] == "a3"
    assert store.message(collab.id, mid).id == mid
    assert [p["attempt"] for p in store.state(collab.id, sent.message).presented] == ["a1", "a2", "a3"]


@pytest.mark.parametrize("sub", layout.COLLAB_SUBDIRS)
def test_a_symlinked_collab_subdirectory_is_refused(store, collab, tmp_path, sub):
    target = tmp_path / "elsewhere"
    target.mkdir()
    if (collab.dir / sub).exists():
        (collab.dir / sub).rename(target / sub)
    (collab.dir / sub).symlink_to(target)
    with pytest.raises(UnsafePath):
        store.registry(collab.id)
    with pytest.raises(UnsafePath):
        layout.collab_dir(str(collab.root), collab.id)


def test_a_symlinked_collab_dir_is_refused(store, collab, tmp_path):
    target = tmp_path / "elsewhere"
    collab.dir.rename(target)
    Path(collab.dir).symlink_to(target)
    with pytest.raises(UnsafePath):
        layout.collab_dir(str(collab.root), collab.id)
    with pytest.raises(UnsafePath):
        store.bindings(str(collab.reviewer))


def test_the_registry_document_and_its_fallback(store, collab):
    def plain(doc):
        return {k: v for k, v in doc.items() if k != "built_from"}

    expected = rules.registry_document(store.registry(collab.id))
    assert plain(registryview.registry_document(str(collab.dir))) == expected
    (collab.dir / "registry.yaml").write_text("# damaged\n[")
    assert registryview.registry_document(str(collab.dir)) is None
    assert rules.registry_document(FilePort(collab.root).registry(collab.id)) == expected
    assert plain(registryview.registry_document(str(collab.dir))) == expected, "a read rewrites the damaged view"
    assert layout.collab_dir(str(collab.root), str(uuid.uuid4())) is None
    assert layout.collab_dir(str(collab.root), "../../etc") is None


# ---- the hook path stays lean -----------------------------------------------------------------------

HEAVY = {"json", "re", "pathlib", "dataclasses", "typing", "hashlib", "uuid", "secrets", "inspect", "enum",
         "contextlib", "collections", "agentmsg.domain.validate", "agentmsg.ports",
         "agentmsg.errors", "fcntl"}  # imported only when raising / locking
#: The service modules the hooks write through (the rest of the service is the CLI's and the MCP server's).
LEAN_SERVICE = {"agentmsg.service", "agentmsg.service.attempts"}


def test_hook_path_imports_stay_lean():
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import agentmsg.hooks.entry, agentmsg.text.boundary; "
            "agentmsg.text.boundary.escape('x'); print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(Path(__file__).resolve().parents[3])],
                         capture_output=True, text=True, check=True).stdout.split()
    assert not HEAVY & set(out), HEAVY & set(out)
    assert {m for m in out if m.startswith("agentmsg.service")} == LEAN_SERVICE
    assert not [m for m in out if re.match(r"(typer|rich|yaml|portalocker)\b", m)]
    assert {"agentmsg.records", "agentmsg.fsio", "agentmsg.backends.file.journal", "agentmsg.paths",
            "agentmsg.backends.file.store", "agentmsg.domain.rules"} <= set(out)


def test_the_sealed_line_is_the_canonical_encoding_of_the_sealed_record() -> None:
    import random

    rnd = random.Random(7)
    keys = ["a", "sum", "to", "s", "sul", "sun", "summary", "type", "ts", "zz", "body", "", "Sum", "ü", "sum2"]
    values = [1, 'x"y\\', None, ["a"], {"to": 1, "sum": 2}, "é\u2028", True, ',"to":']
    for _ in range(3000):
        fields = {k: rnd.choice(values) for k in rnd.sample(keys, rnd.randint(0, 10))}
        tail = rnd.choice([None, {"seq": 3, "sum": "ab", "ts": "2099"}, {"seq": 3, "sum": "ab", "ts": "2000"}])
        rec, line = records.seal_next_line(fields, tail)
        assert line == records.encode(rec)
        assert rec["sum"] == records.checksum(rec) and records.decode(line[:-1]) == rec
        assert rec == records.seal_next(fields, tail) | {"ts": rec["ts"], "sum": rec["sum"]}

