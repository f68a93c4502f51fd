"""agentmsg/hookio.py reproduces the core modules byte for byte; each test checks one piece."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmsg import hookio, model, paths, records
from agentmsg.journal import Journal
from agentmsg.store import Draft
from agentmsg.verify import verify_file

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=10), JSONISH, max_size=6))
def test_canonical_and_checksum_match_records(obj):
    try:
        expected = records.canonical(obj)
    except UnicodeEncodeError:  # lone surrogates: both refuse
        with pytest.raises(UnicodeEncodeError):
            hookio.canonical(obj)
        return
    assert hookio.canonical(obj) == expected
    assert hookio.loads(expected.decode()) == json.loads(expected)
    assert hookio.checksum(obj) == records.checksum(obj)


@pytest.mark.parametrize("text", ["", "  ", "{", "[1,]", "nul", '{"a":1} x', "1 2", '"\\ud800"', "NaN", "[Infinity]",
                                  '{"a": {"b": [1, 2.5e3, null, true, false, "é"]}}', " \t\n[]\r\n", "\ufeff{}"])
def test_loads_agrees_with_json(text):
    try:
        expected = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):
            hookio.loads(text)
        return
    got = hookio.loads(text)
    assert json.dumps(got) == json.dumps(expected)


def sealed_line(fields: dict, seq: int = 1, prev: str = "") -> bytes:
    return records.encode(records.seal(fields, seq=seq, prev=prev, prev_ts=None))[:-1]


@pytest.mark.parametrize("line", [
    sealed_line({"type": "x", "body": "é\n"}),
    sealed_line({"type": "x"}).replace(b'"x"', b'"y"'),
    b'{"seq": 1}', b"[1]", b"garbage", b'{"seq": "1", "sum": "x"}', b"\xff\xfe", b"",
    b"\xef\xbb\xbf" + sealed_line({"type": "bom"}),
])
def test_decode_and_peek_agree_with_records(line):
    try:
        expected = records.decode(line)
    except records.BadRecord as bad:
        with pytest.raises(hookio.BadLine) as got:
            hookio.decode(line)
        assert got.value.torn == bad.torn
    else:
        assert hookio.decode(line) == expected
    assert hookio.peek(line) == records.peek(line)


def test_append_records_extends_a_journal_like_journal_append(tmp_path):
    path = tmp_path / "r.jsonl"
    journal = Journal(path)
    journal.append({"type": "a"})
    placed = hookio.append_records(str(path), [{"type": "b", "n": 1}, {"type": "b", "n": 2}])
    journal.append({"type": "c"})
    placed += hookio.append_records(str(path), [{"type": "d"}])
    recs = [r for _, r in journal.scan()]
    assert placed == [(pos, rec) for pos, rec in journal.scan() if rec["type"] in "bd"]
    assert [r["type"] for r in recs] == ["a", "b", "b", "c", "d"] and [r["seq"] for r in recs] == [1, 2, 3, 4, 5]
    assert verify_file(path) == []
    assert journal.head() == {"seq": 5, "sum": recs[-1]["sum"]}
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_append_after_a_torn_tail_keeps_it_as_evidence(tmp_path):
    path = tmp_path / "r.jsonl"
    Journal(path).append({"type": "a"})
    with open(path, "ab") as fh:
        fh.write(b'{"type": "torn", "se')
    assert hookio.tail(str(path)) == Journal(path).last()
    ((offset, rec),) = hookio.append_records(str(path), [{"type": "b"}])
    assert rec["seq"] == 2 and Journal(path).read_at(offset) == rec
    assert [f.kind for f in verify_file(path)] == ["torn"]
    problems: list[str] = []
    assert [r["type"] for _, r, _ in hookio.scan(str(path), 0, problems)] == ["a", "b"]
    assert len(problems) == 1


def test_tail_matches_journal_last_on_big_records(tmp_path):
    path = tmp_path / "r.jsonl"
    for i in range(5):
        Journal(path).append({"type": "big", "body": "\x01" * (30_000 * i)})
    assert hookio.tail(str(path)) == Journal(path).last()


def test_scan_skips_what_journal_scan_skips(tmp_path):
    path = tmp_path / "r.jsonl"
    for i in range(4):
        Journal(path).append({"type": "m", "i": i})
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"i":1', b'"i":7')  # edited
    path.write_bytes(b"\n".join(lines) + b'{"unterminated": 1, "seq": 9, "sum": "x"}')
    ours = [(pos, rec) for pos, rec, _end in hookio.scan(str(path))]
    assert ours == list(Journal(path).scan())
    offset = ours[1][0]
    assert [(p, r) for p, r, _ in hookio.scan(str(path), offset)] == list(Journal(path).scan(offset))


@pytest.mark.parametrize("env", [
    {"AGENTMSG_HOME": "/srv/am/../am2/"}, {"AGENTMSG_HOME": "~/x"}, {"XDG_STATE_HOME": "/xdg"},
    {"HOME": "/home/u"}, {"AGENTMSG_HOME": "", "XDG_STATE_HOME": "", "HOME": "/h"},
    {"AGENTMSG_HOME": "relative"}, {"XDG_STATE_HOME": "rel"}, {},
])
def test_resolve_root_matches_paths(env):
    try:
        expected = str(paths.resolve_root(None, env)[0])
    except Exception:
        with pytest.raises(ValueError):
            hookio.resolve_root(env)
        return
    assert hookio.resolve_root(env) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_names_match_the_model(value):
    try:
        key = paths.pin_key(value)
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            hookio.pin_key(value)
    else:
        assert hookio.pin_key(value) == key
    assert hookio.is_alias(value) == bool(model.ALIAS_RE.fullmatch(value))
    assert hookio.is_session(value) == bool(model.SESSION_RE.fullmatch(value))
    try:
        canonical = model.as_uuid(value, "id") == value
    except Exception:
        canonical = False
    assert hookio.is_uuid(value) == canonical


def test_uuid4_and_canonical_uuid_checks():
    for _ in range(200):
        u = hookio.uuid4()
        assert uuid.UUID(u).version == 4 and hookio.is_uuid(u)
    for good in (str(uuid.uuid4()), str(uuid.uuid1())):
        assert hookio.is_uuid(good)
    for bad in (str(uuid.uuid4()).upper(), "{" + str(uuid.uuid4()) + "}", str(uuid.uuid4()).replace("-", "")):
        assert not hookio.is_uuid(bad)


def test_bindings_and_pending_match_the_store(store, collab):
    def send(i, kind="update"):
        return store.send(collab.id, collab.driver, Draft(to="reviewer", kind=kind, priority="normal",
                                                          subject=f"s{i}", body=f"b{i}"))[0].message.id

    ids = [send(i) for i in range(10)]
    for pin, alias in ((collab.reviewer, "reviewer"), (collab.driver, "driver")):
        got = [(c, a) for c, a, _doc in hookio.bindings(str(collab.root), str(pin))]
        assert got == store.bindings(str(pin)) == [(collab.id, alias)]
    base = str(collab.dir)
    view_doc = None
    for acked in (ids[0], ids[5], ids[1], ids[9]):
        store.ack(collab.id, collab.reviewer, acked)
        store.receipt(collab.id, "reviewer", {"type": "presented", "message": ids[2], "attempt": "a", "host": "x"})
        msgs, view, problems = hookio.pending(base, "reviewer", view_doc)
        view_doc = view.document({m["id"] for m in msgs})
        assert [m["id"] for m in msgs] == [m.id for m in store.inbox(collab.id, "reviewer").messages]
        assert problems == []
    (collab.dir / "state" / "reviewer.json").write_text("{broken")  # a lost cursor: rescan everything
    msgs, _view, _ = hookio.pending(base, "reviewer", view_doc)
    assert [m["id"] for m in msgs] == [m.id for m in store.inbox(collab.id, "reviewer").messages]
    assert hookio.bindings(str(collab.root), "claude-code:someone-else") == []


def test_receipt_index_matches_the_store(store, collab):
    """A presented receipt written by the hook is found by ``FileStore.state`` like one the store wrote."""
    (sent,) = store.send(collab.id, collab.driver, Draft(to="reviewer", kind="update", priority="normal",
                                                         subject="s", body="b"))
    mid = sent.message.id
    index = collab.dir / "ids" / mid[:2] / f"{mid}.json"
    store.receipt(collab.id, "reviewer", {"type": "presented", "message": mid, "attempt": "a1", "host": "x"})
    by_store = index.read_bytes()
    path = str(collab.dir / "receipts" / "reviewer.jsonl")
    placed = hookio.append_records(path, [{"type": "presented", "message": mid, "attempt": "a2", "host": "y"}])
    hookio.index_receipts(str(collab.dir), placed)
    doc = json.loads(by_store)
    doc["receipts"].append(placed[0][0])
    assert index.read_bytes() == json.dumps(doc).encode()
    state = store.state(collab.id, sent.message)
    assert [p["attempt"] for p in state.presented] == ["a1", "a2"]


@pytest.mark.parametrize("sub", ["inbox", "receipts", "state", "ids", "transcripts"])
def test_a_symlinked_collab_subdirectory_is_refused_like_the_store(store, collab, tmp_path, sub):
    from agentmsg.errors import UnsafePath

    target = tmp_path / "elsewhere"
    target.mkdir()
    if (collab.dir / sub).exists():
        (collab.dir / sub).rename(target / sub)
    (collab.dir / sub).symlink_to(target)
    with pytest.raises(UnsafePath):
        store.registry(collab.id)
    with pytest.raises(hookio.HookIOError):
        hookio.collab_dir(str(collab.root), collab.id)


def test_registry_reads_the_derived_file_and_falls_back(store, collab):
    doc = hookio.registry(str(collab.root), collab.id)
    assert doc == model.registry_document(store.registry(collab.id))
    (collab.dir / "registry.yaml").write_text("# damaged\n[")
    assert hookio.registry(str(collab.root), collab.id) == doc
    assert hookio.registry(str(collab.root), str(uuid.uuid4())) is None
    assert hookio.registry(str(collab.root), "../../etc") is None


def test_symlinked_collab_dir_is_refused(store, collab, tmp_path):
    target = tmp_path / "elsewhere"
    collab.dir.rename(target)
    Path(collab.dir).symlink_to(target)
    with pytest.raises(hookio.HookIOError):
        hookio.bindings(str(collab.root), str(collab.reviewer))


HEAVY = {"json", "re", "pathlib", "dataclasses", "typing", "hashlib", "uuid", "secrets", "inspect", "enum",
         "agentmsg.store", "agentmsg.model", "agentmsg.fsio", "agentmsg.records", "agentmsg.paths", "collections"}


def test_hook_path_imports_stay_lean():
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import agentmsg.hookrun, agentmsg.boundary; "
            "agentmsg.boundary.escape('x'); print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(Path(__file__).resolve().parents[1])],
                         capture_output=True, text=True, check=True).stdout.split()
    assert not HEAVY & set(out), HEAVY & set(out)
    assert not [m for m in out if re.match(r"(typer|rich|yaml|portalocker)\b", m)]
