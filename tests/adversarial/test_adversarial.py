"""Run the adversarial corpus (tests/adversarial/cases.py), one test id per case.

Every case runs through a real process: the CLI as ``python -m
agentmsg.cli``, the hooks as the host runs them (the command from the
plugin's hooks file through ``/bin/sh -c``, tests/support/helpers_hooks.py), and the
record reader as ``agentmsg inbox/show/verify``.  Each case gets a private
copy of its template root; templates are built once per module, the base one
through the CLI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentmsg import records
from agentmsg.domain import validate as model
from agentmsg.service import delivery
from agentmsg.text import boundary
from tests.adversarial import cases as K
from tests.support.cli_helpers import run, run_json, snapshot
from tests.support.facade import Draft, FileStore
from tests.support.helpers_hooks import run_hook
from tests.support.transcript_checks import assert_one_header_per_message

HOOK_KEYS = {"SessionStart": "context", "UserPromptSubmit": "context", "Stop": "block"}


# ---- templates ----------------------------------------------------------------------------------


def _build_base(root: Path, home: Path) -> str:
    env = {"HOME": str(home)}

    def ok(*args: str) -> dict[str, Any]:
        code, doc, err = run_json(*args, root=root, env=env)
        assert code == 0, (args, err)
        return doc["result"]

    collab = ok("open", "--self", K.DRIVER, "--alias", "driver", "--label", "adversarial",
                "--task", "hold the line")["collab"]
    ok("join", "--collab", collab, "--self", K.REVIEWER, "--alias", "reviewer")
    ok("join", "--collab", collab, "--self", K.CAROL, "--alias", "carol")
    for who, to, kind, subject, body, mid in [
        (K.DRIVER, "reviewer", "request", K.M1_SUBJECT, K.M1_BODY, K.M1),
        (K.REVIEWER, "driver", "request", K.M2_SUBJECT, K.M2_BODY, K.M2),
        (K.DRIVER, "reviewer", "update", K.M3_SUBJECT, K.M3_BODY, K.M3),
    ]:
        ok("send", "--collab", collab, "--self", who, "--to", to, "--kind", kind, "--subject", subject,
           "--body", body, "--id", mid)
    return collab


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    base = tmp_path_factory.mktemp("adversarial-templates")
    home = base / "home"
    home.mkdir()
    root = base / "base" / "state"
    collab = _build_base(root, home)
    out = {"base": (root, collab)}

    def derive(name: str) -> FileStore:
        dst = base / name / "state"
        shutil.copytree(root, dst, symlinks=True)
        out[name] = (dst, collab)
        return FileStore(dst)

    derive("closed").close(collab, model.pin(K.DRIVER))
    store = derive("delivery")
    for pin in (K.REVIEWER, K.DRIVER):
        delivery.enable(store, collab, model.pin(pin))
    store = derive("expired")
    for pin in (K.REVIEWER, K.DRIVER):
        delivery.enable(store, collab, model.pin(pin), expires_in=60, now=time.time() - 3600)
    hostile = base / "hostile-task" / "state"
    store = FileStore(hostile)
    reg = store.open(model.pin(K.DRIVER), "driver", K.HOSTILE_LABEL, K.HOSTILE_TASK, {"adapter": "hook"})
    store.join(reg.collab, model.pin(K.REVIEWER), "reviewer")
    out["hostile-task"] = (hostile, reg.collab)
    assert set(out) == set(K.TEMPLATES)
    return out


# ---- one case's world ---------------------------------------------------------------------------------


@dataclass
class World:
    root: Path  # resolved, as the store reports it
    collab: str
    outside: Path
    home: Path
    tmp: Path

    def python_only(self) -> Path:
        bindir = self.tmp / "python-only"
        if not bindir.is_dir():
            bindir.mkdir()
            (bindir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
            (bindir / "python3").chmod(0o755)
        return bindir

    def fill(self, value: Any) -> Any:
        """Put the run-time values into a case's strings, recursively."""
        if isinstance(value, str):
            if "{nocli_path}" in value:  # a PATH whose only program is python3: no agentmsg on it
                value = value.replace("{nocli_path}", f"{self.python_only()}:/usr/bin:/bin")
            return (value.replace("{root}", str(self.root)).replace("{collab}", self.collab)
                    .replace("{outside}", str(self.outside)))
        if isinstance(value, tuple | list):
            return type(value)(self.fill(v) for v in value)
        if isinstance(value, dict):
            return {k: self.fill(v) for k, v in value.items()}
        return value

    def path(self, rel: str) -> Path:
        filled = self.fill(rel)
        return Path(filled) if filled.startswith("/") else self.root / filled


def _world(case: K.Case, templates: dict[str, tuple[Path, str]], tmp_path: Path) -> World:
    src, collab = templates[case.setup]
    root = tmp_path / "state"
    shutil.copytree(src, root, symlinks=True)
    world = World(Path(os.path.realpath(root)), collab, tmp_path / "outside", tmp_path / "home", tmp_path / "host")
    for d in (world.outside, world.home, world.tmp):
        d.mkdir(mode=0o700)
    for step in case.prep:
        _prep(world, step)
    return world


def _prep(world: World, step: K.Prep) -> None:
    if isinstance(step, K.Link):
        path = world.path(step.path)
        target = world.outside / step.path.replace("{collab}", "C").replace("/", "__")
        if os.path.lexists(path):
            shutil.move(str(path), str(target))
        elif step.is_dir:
            target.mkdir(mode=0o700)
        else:
            target.write_bytes(b"")
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.symlink_to(target, target_is_directory=step.is_dir)
    elif isinstance(step, K.Plant):
        path = world.path(step.path)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if step.kind == "hardlink":
            target = world.outside / step.path.replace("{collab}", "C").replace("/", "__")
            if not path.exists():
                path.write_bytes(b"")
            shutil.move(str(path), str(target))
            os.link(target, path)
            return
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif os.path.lexists(path):
            path.unlink()
        if step.kind == "fifo":
            os.mkfifo(path, 0o600)
        else:
            assert step.kind == "file", step.kind
            path.write_bytes(b"not a directory\n")
    elif isinstance(step, K.Append):
        world.path(step.path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(world.path(step.path), "ab") as fh:
            fh.write(step.data)
    elif isinstance(step, K.WriteFile):
        path = world.path(step.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(step.data)
    elif isinstance(step, K.EditRecord | K.DropLine | K.SwapLines):
        path = world.path(step.path)
        lines = path.read_bytes().split(b"\n")
        if isinstance(step, K.EditRecord):
            rec = json.loads(lines[step.line - 1])
            assert step.name in rec and rec[step.name] != step.value
            rec[step.name] = step.value
            if step.reseal:
                rec["sum"] = records.checksum(rec)
            lines[step.line - 1] = records.canonical(rec)
        elif isinstance(step, K.DropLine):
            del lines[step.line - 1]
        else:
            lines[step.a - 1], lines[step.b - 1] = lines[step.b - 1], lines[step.a - 1]
        path.write_bytes(b"\n".join(lines))
    elif isinstance(step, K.Cut):
        path = world.path(step.path)
        os.truncate(path, path.stat().st_size - step.nbytes)
    elif isinstance(step, K.Send):
        draft = Draft(to=step.to, kind=step.kind, priority=step.priority, subject=step.subject, body=step.body,
                      id=step.id)
        FileStore(world.root).send(world.collab, model.pin(step.sender), draft)
    elif isinstance(step, K.Close):
        FileStore(world.root).close(world.collab, model.pin(step.who))
    elif isinstance(step, K.Join):
        FileStore(world.root).join(world.collab, model.pin(step.who), step.alias,
                                   succeeds=model.pin(step.succeeds) if step.succeeds else None, reason=step.reason,
                                   notify=world.fill(dict(step.notify)) if step.notify else None)
    elif isinstance(step, K.SetNotify):
        FileStore(world.root).set_notify(world.collab, model.pin(step.who), world.fill(dict(step.notify)))
    elif isinstance(step, K.Handover):
        FileStore(world.root).mailbox.handover(world.collab, model.pin(step.who), model.pin(step.to))
    elif isinstance(step, K.Leave):
        FileStore(world.root).leave(world.collab, model.pin(step.who))
    elif isinstance(step, K.Open):
        FileStore(world.root).open(model.pin(step.who), step.alias, "another", "another task")
    elif isinstance(step, K.Remove):
        world.path(step.path).unlink()
    elif isinstance(step, K.MapAck):
        FileStore(world.root).unacked(world.collab, step.alias, limit=1)  # a read folds and saves the map
        path = world.path(f"collabs/{world.collab}/state/{step.alias}.map")
        head, _, body = path.read_bytes().partition(b"\n")
        status = bytearray(body)
        status[step.seq - 1] |= 1  # inboxmap.ACKED
        if step.reseal:
            doc = json.loads(head)
            doc["h"] = records.sha256_hex(bytes(status))
            head = records.dumps(doc).encode()
        path.write_bytes(head + b"\n" + bytes(status))
    elif isinstance(step, K.Repair):
        FileStore(world.root).rebuild(world.collab)
    else:  # pragma: no cover
        raise AssertionError(f"unknown prep step {step!r}")


# ---- observing the root ---------------------------------------------------------------------------------


def _record_files(root: Path) -> dict[str, bytes]:
    """Every regular ``*.jsonl`` under the root (links are not followed)."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if name.endswith(".jsonl") and not path.is_symlink() and path.is_file():  # never open a FIFO
                out[str(path.relative_to(root))] = path.read_bytes()
    return out


def _without_log(snap: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in snap.items() if k not in ("hooks.log", "hooks.log.1")}


_DERIVED_DIRS = ("state", "ids", "transcripts")


def _is_derived(rel: str) -> bool:
    """A derived file (rebuilt from the journals; reads may write it), not a stored record."""
    parts = rel.split("/")
    if rel.endswith(".head") or parts[-1] in ("registry.yaml", "collaboration.md"):
        return True
    # The hooks' fast-path markers, the search index, and the session facts SessionStart records for
    # wake-ups (runtime observations of a host process, kept outside every collaboration).
    if parts[0] in ("idle", "search.sqlite", "wake"):
        return True
    return len(parts) >= 3 and parts[0] == "collabs" and parts[2] in _DERIVED_DIRS


def _stored(snap: dict[str, Any]) -> dict[str, Any]:
    """The stored records of a snapshot: journals, pins and the layout, ``hooks.log`` aside.

    Derived regular files and directories are left out; a planted link or FIFO is kept
    even where a derived file lives, so replacing or removing it still shows.
    """
    return {k: v for k, v in _without_log(snap).items() if not _is_derived(k) or v[0] in ("link", "special")}


def _log_lines(root: Path) -> list[str]:
    path = root / "hooks.log"
    if path.is_symlink() or not path.is_file():
        return []
    return path.read_text("utf-8", "replace").splitlines()


def _new_records(before: dict[str, bytes], after: dict[str, bytes]) -> dict[str, list[dict[str, Any]]]:
    """Records appended per file; the old bytes must be an untouched prefix (append-only)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for rel, data in after.items():
        old = before.get(rel, b"")
        assert data.startswith(old), f"{rel} was rewritten, not appended to"
        added = [line for line in data[len(old):].split(b"\n") if line.strip()]
        if not added:
            continue
        recs = [records.decode(line) for line in added]
        prev = _last_sum(old)
        for rec in recs:  # the new records chain onto the last valid record before them
            assert rec["prev"] == prev, (rel, rec["seq"])
            prev = rec["sum"]
        out[rel] = recs
    return out


def _last_sum(data: bytes) -> str:
    for line in reversed(data.split(b"\n")):
        try:
            return records.decode(line)["sum"]
        except records.BadRecord:
            continue
    return ""


def _matches(rec: dict[str, Any], fields: dict[str, Any]) -> bool:
    return all(k in rec and rec[k] == v for k, v in fields.items())


# ---- checks ----------------------------------------------------------------------------------------------


def _check_transcripts(world: World) -> None:
    base = world.root / "collabs" / world.collab
    counts = {}
    for inbox in sorted((base / "inbox").glob("*.jsonl")):
        counts[inbox.stem] = sum(1 for line in inbox.read_bytes().splitlines() if b'"type":"message"' in line)
    views = {base / "collaboration.md": sum(counts.values())}
    views.update({base / "transcripts" / f"{alias}.md": n for alias, n in counts.items()})
    for path, n in views.items():
        text = path.read_text("utf-8")
        assert_one_header_per_message(text, n, str(path))


def _check_boundary(text: str) -> None:
    nonce = re.search(r"carrying nonce ([0-9a-f]{32}) ", text)
    assert nonce, text[:300]
    begin, end = (m.rstrip("\n") for m in boundary.markers(nonce.group(1)))
    for bad in ("\r", "\u2028", "\u2029", "\x85", "\x0b", "\x0c"):
        assert bad not in text, f"raw {bad!r} in injected text"
    assert text.count(boundary.OPEN) == 2 and text.count(boundary.CLOSE) == 2, text
    lines = text.split("\n")
    assert [ln for ln in text.splitlines() if boundary.OPEN in ln or boundary.CLOSE in ln] == [begin, end]
    i, j = lines.index(begin), lines.index(end)
    assert i < j
    assert not [ln for ln in lines[:i] + lines[j + 1:] if ln.startswith(boundary.PREFIX.strip())]
    for line in lines[i + 1 : j]:
        assert line.startswith((boundary.PREFIX, "message ", "  ")), line


def _compare(got: str, want: str, how: str) -> None:
    if how == "exact":
        assert got == want
    elif how == "prefix":
        assert got.startswith(want), (got, want)
    else:
        assert want in got, (got, want)


def _check_bounded(text: str, needle: str) -> None:
    """Each occurrence of ``needle`` sits between a begin and an end marker carrying the injection's nonce."""
    nonce = re.search(r"carrying nonce ([0-9a-f]{32}) ", text)
    spans = []
    if nonce:
        begin, end = boundary.markers(nonce.group(1))
        start = text.find(begin)
        stop = text.find(end, start + 1)
        if start >= 0 and stop > start:
            spans.append((start, stop))
    at = text.find(needle)
    while at >= 0:
        assert any(lo < at < hi for lo, hi in spans), f"peer text {needle!r} outside any boundary: {text[:600]}"
        at = text.find(needle, at + 1)


def _dig(doc: Any, path: str) -> Any:
    for part in path.split("."):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


# ---- the runner ---------------------------------------------------------------------------------------------


def _param(case: K.Case) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=f"product bug: {case.bug}")] if case.bug else []
    return pytest.param(case, id=case.name, marks=marks)


def test_corpus_size_and_coverage() -> None:
    assert len(K.CASES) >= 60
    surfaces = {c.surface for c in K.CASES}
    assert surfaces == set(K.SURFACES)
    kinds = {c.name.removeprefix("cli-send-secret-") for c in K.CASES if c.name.startswith("cli-send-secret-")}
    from agentmsg.text.secrets import RULES

    assert {r.kind for r in RULES} <= kinds


@pytest.mark.parametrize("case", [_param(c) for c in K.CASES])
def test_case(case: K.Case, templates: dict[str, tuple[Path, str]], tmp_path: Path) -> None:
    world = _world(case, templates, tmp_path)
    before, outside_before = snapshot(world.root), snapshot(world.outside)
    records_before, log_before = _record_files(world.root), _log_lines(world.root)
    message = world.fill(case.message)

    if isinstance(case.action, K.Cli):
        act = case.action
        argv = world.fill(act.argv)
        env = {"HOME": str(world.home), **world.fill(dict(act.env))}
        doc = None
        if act.json:
            code, doc, err = run_json(*argv, env=env, root=world.root, input=act.stdin)
            out = json.dumps(doc)
        else:
            code, out, err = run(*argv, env=env, root=world.root, input=act.stdin)
        assert code == case.exit, (err, out[:2000])
        if not message:
            assert err == "", err
        else:
            assert err.endswith("\n") and err.count("\n") == 1, err
            _compare(err.rstrip("\n"), message, case.match)
        shown = out
        assert _log_lines(world.root) == log_before
    else:
        act = case.action
        host = case.surface.removeprefix("hook-")
        session = act.session or (K.REVIEWER_SESSION if host == "claude" else K.DRIVER_SESSION)
        res = run_hook(host, act.event, world.tmp, world.root, session, stdin=act.stdin,
                       extra_env=world.fill(dict(act.env)) or None, **act.fields)
        assert (res.returncode, res.stderr) == (0, ""), res.stderr
        new_log = _log_lines(world.root)[len(log_before):]
        doc, shown = None, ""
        if case.outcome == "fail-open":
            assert res.raw == b""
            assert len(new_log) == 1, new_log
            parts = new_log[0].split(" ", 5)
            assert parts[2] == host and "Traceback" not in new_log[0], new_log
            _compare(parts[5], message, case.match)
        else:
            assert new_log == [], new_log
            if case.outcome == "silent":
                assert res.raw == b""
            else:
                doc = json.loads(res.raw.decode("utf-8"))
                event = act.event
                if case.outcome == "context":
                    assert HOOK_KEYS[event] == "context"
                    assert set(doc) == {"hookSpecificOutput"}
                    assert set(doc["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
                    assert doc["hookSpecificOutput"]["hookEventName"] == event
                    shown = doc["hookSpecificOutput"]["additionalContext"]
                else:
                    assert HOOK_KEYS[event] == "block"
                    assert set(doc) == {"decision", "reason"} and doc["decision"] == "block"
                    shown = doc["reason"]
                assert isinstance(shown, str) and shown
                size = len(shown.encode("utf-8")) if host == "codex" else len(shown.encode("utf-16-le")) // 2
                assert size <= boundary.DEFAULT_CAP

    # storage effect
    if isinstance(case.effect, K.Nothing):
        assert _stored(snapshot(world.root)) == _stored(before)
    else:
        added = _new_records(records_before, _record_files(world.root))
        want: dict[str, list[dict[str, Any]]] = {}
        for rec in case.effect.records:
            want.setdefault(world.fill(rec.path), []).append(world.fill(dict(rec.fields)))
        assert set(added) == set(want), {k: [r.get("type") for r in v] for k, v in added.items()}
        for rel, fields in want.items():
            got = added[rel]
            assert len(got) == len(fields), (rel, got)
            for rec, expect in zip(got, fields, strict=True):
                assert _matches(rec, expect), (rel, {k: rec.get(k) for k in expect}, expect)
    assert snapshot(world.outside) == outside_before, "something was written through a planted link"

    for check in case.checks:
        if isinstance(check, K.JsonIs):
            assert doc is not None, "JsonIs needs --json"
            assert _dig(doc, check.path) == world.fill(check.value), check.path
        elif isinstance(check, K.Shows):
            assert world.fill(check.text) in shown, shown[:3000]
        elif isinstance(check, K.NotShown):
            assert world.fill(check.text) not in shown
        elif isinstance(check, K.OneHeaderPerMessage):
            _check_transcripts(world)
            if check.stdout is not None:
                assert_one_header_per_message(shown, check.stdout, "stdout")
        elif isinstance(check, K.BoundaryOnce):
            _check_boundary(shown)
        elif isinstance(check, K.Bounded):
            _check_bounded(shown, world.fill(check.text))
        elif isinstance(check, K.Absent):
            assert not os.path.lexists(world.fill(check.path)), f"{check.path} exists: a command ran"
        else:  # pragma: no cover
            raise AssertionError(f"unknown check {check!r}")
