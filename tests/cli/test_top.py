"""``agentmsg top``: the overseer's live view, run for real under tmux, and its paged reads.

The tmux tests start ``agentmsg top`` in a detached 120x40 pane, write to the
same store from other processes (the CLI), and read the screen with
``capture-pane -p``, polled until what is awaited shows (never slept on).  The
wait is generous (30 s): the view refreshes every few seconds, but a loaded
machine (the suite runs files in parallel) must not turn that into a failure;
how fast the view is belongs to a benchmark, not to an assertion.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_helpers import REPO_ROOT, clean_env, run, run_json

BOSS = "human:alice"
DRIVER = "codex:0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
REVIEWER = "claude-code:5418c0de-1111-4222-8333-944455556666"


def _setup(root: Path) -> str:
    cid = run_json("open", "--alias", "boss", "--label", "review", "--task", "t", "--self", BOSS,
                   root=root).doc["result"]["collab"]
    assert run_json("join", "--alias", "driver", "--collab", cid, "--self", DRIVER, root=root).code == 0
    assert run_json("join", "--alias", "reviewer", "--collab", cid, "--self", REVIEWER, root=root).code == 0
    return str(cid)


def _send(root: Path, cid: str, who: str, to: str, subject: str, body: str, *extra: str) -> str:
    done = run_json("send", "--to", to, "--subject", subject, "--body", body, "--collab", cid, "--self", who,
                    *extra, root=root)
    assert done.code == 0, done
    return str(done.doc["result"]["results"][0]["id"])


# ---- without a terminal ---------------------------------------------------------------------


def test_once_prints_one_frame(tmp_path: Path) -> None:
    root = tmp_path / "state"
    cid = _setup(root)
    _send(root, cid, DRIVER, "reviewer", "please review", "the body", "--kind", "request")
    code, out, _err = run("top", "--once", "--root", str(root))
    assert code == 0
    assert "Participants (3)" in out and "Unacknowledged requests (1)" in out
    assert "driver(codex) -> reviewer" in out and "please review" in out
    assert "human:alice" in out


def test_top_acts_only_as_a_human_pin(tmp_path: Path) -> None:
    root = tmp_path / "state"
    _setup(root)
    code, _out, err = run("top", "--once", "--self", DRIVER, "--root", str(root))
    assert code == 2 and "human:" in err


def test_overview_reads_pages_never_whole_histories() -> None:
    """Whole-history reads (history, receipts, events, notes) would make each refresh cost the backlog."""
    from agentmsg.backends.memory import MemoryStore
    from agentmsg.domain import validate
    from agentmsg.domain.values import Draft
    from agentmsg.service.messaging import Mailbox
    from agentmsg.service.overview import Overview

    class Paged(MemoryStore):
        def history(self, *a: Any, **k: Any) -> Any:
            raise AssertionError("history read")

        def receipts(self, *a: Any, **k: Any) -> Any:
            raise AssertionError("receipts read")

        def events(self, *a: Any, **k: Any) -> Any:
            raise AssertionError("events read")

        def notes(self, *a: Any, **k: Any) -> Any:
            raise AssertionError("notes read")

    store = Paged()
    box = Mailbox(store)
    boss, driver = validate.pin(BOSS), validate.pin(DRIVER)
    cid = box.open(boss, "boss", "l", "t").collab
    box.join(cid, driver, "driver")
    for i in range(300):
        box.send(cid, driver, Draft(to="boss", kind="request" if i % 2 else "update", subject=f"s{i}", body="b"))
    ov = Overview(store, cid, recent=50, sample=10)
    ov.refresh()
    assert len(ov.messages) == 50 and ov.messages[0].subject == "s299"
    assert [p.pending for p in ov.people if p.alias == "boss"] == [300]
    assert len(ov.requests) == 10
    box.send(cid, driver, Draft(to="boss", subject="new", body="b"))
    assert ov.poll() == 1 and ov.messages[0].subject == "new"
    assert ov.poll() == 0


def test_stuck_messages(tmp_path: Path) -> None:
    from agentmsg.backends.memory import MemoryStore
    from agentmsg.domain import validate
    from agentmsg.domain.values import Draft
    from agentmsg.service.messaging import Mailbox
    from agentmsg.service.overview import Overview

    store = MemoryStore()
    box = Mailbox(store)
    boss, driver = validate.pin(BOSS), validate.pin(DRIVER)
    cid = box.open(boss, "boss", "l", "t").collab
    box.join(cid, driver, "driver")
    shown = box.send(cid, boss, Draft(to="driver", subject="shown", body="b"))[0].message
    rung = box.send(cid, boss, Draft(to="driver", subject="rung", body="b"))[0].message
    for n in range(3):
        box.present(cid, driver, [shown.id], attempt=f"a{n}", host="codex", via="prompt")
    box.record_notify(cid, rung, False, "no such pane")
    ov = Overview(store, cid)
    ov.refresh()
    assert {s.message.subject: s.reason for s in ov.stuck} == {
        "shown": "presented 3 times, never acknowledged", "rung": "notify failed: no such pane"}
    box.ack(cid, driver, [shown.id])
    ov.refresh()
    assert [s.message.subject for s in ov.stuck] == ["rung"]


# ---- for real, under tmux ------------------------------------------------------------------------


class Pane:
    def __init__(self, sock: Path, env: dict[str, str]) -> None:
        self.sock, self.env = sock, env

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-S", str(self.sock), *args], env=self.env, capture_output=True, text=True,
                              timeout=10, check=False)
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "top")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "top", *keys)

    def wait_for(self, *texts: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if all(t in screen for t in texts):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{texts!r} not on screen within {timeout}s:\n{screen}")
            time.sleep(0.1)


@pytest.fixture
def top(tmp_path: Path) -> Iterator[tuple[Pane, Path, str]]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the live view is tested in a real tmux pane")
    root = tmp_path / "state"
    cid = _setup(root)
    _send(root, cid, DRIVER, "reviewer", "please review", "look at store.py", "--kind", "request")
    env = clean_env(root)
    env["TERM"] = "xterm-256color"
    # The pane's size, said outright: the view reads COLUMNS and LINES first (rich), so what it lays out does
    # not hang on how the terminal's size is detected while the machine is busy (a message of 16 lines must
    # fit whole on 40 rows).
    env["COLUMNS"], env["LINES"] = "120", "40"
    sock = Path(f"/tmp/am-top-{os.getpid()}-{tmp_path.name[-12:]}.sock")
    pane = Pane(sock, env)
    err = tmp_path / "top.err"
    cmd = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "agentmsg.cli", "top", "--collab", cid,
                                            "--self", BOSS, "--root", str(root)))
    pane.tmux("new-session", "-d", "-s", "top", "-x", "120", "-y", "40", "-c", str(REPO_ROOT),
              f"{cmd} 2>{shlex.quote(str(err))}; echo TOP-EXITED $?; sleep 60")
    try:
        pane.wait_for("Participants (3)", "please review")
        yield pane, root, cid
        assert "Traceback" not in (err.read_text() if err.exists() else "")
    finally:
        pane.tmux("kill-server")
        sock.unlink(missing_ok=True)


def test_a_new_message_appears_and_opens_whole(top: tuple[Pane, Path, str]) -> None:
    pane, root, cid = top
    body = "\n".join(f"line {i:02d} of the body" for i in range(1, 16)) + "\nhidden\u202eflip"
    _send(root, cid, DRIVER, "boss", "status report", body)
    pane.wait_for("driver(codex) -> boss", "status report")
    pane.keys("Enter")
    screen = pane.wait_for("line 01 of the body", "line 15 of the body")
    assert all(f"line {i:02d} of the body" in screen for i in range(1, 16))
    assert "hidden\\u202eflip" in screen  # peer text escaped, not interpreted
    assert "end of message" in screen
    pane.keys("Escape")
    pane.wait_for("Latest messages")


def test_overseer_replies_and_acks_as_its_own_pin(top: tuple[Pane, Path, str]) -> None:
    pane, root, cid = top
    asked = _send(root, cid, DRIVER, "boss", "may I merge", "ok to merge?", "--kind", "request")
    pane.wait_for("may I merge")
    pane.keys("r")
    pane.wait_for("reply as human:alice")
    pane.keys("-l", "yes, merge it")
    pane.keys("Enter")
    pane.wait_for("replied:")
    driver_mail = run_json("inbox", "--collab", cid, "--self", DRIVER, root=root).doc["result"]["messages"]
    reply = next(m for m in driver_mail if m["body"] == "yes, merge it")
    assert (reply["from"], reply["from_runtime"], reply["reply_to"]) == ("boss", "human", f"boss/{asked}")
    assert reply["subject"] == "Re: may I merge"
    shown = run_json("show", reply["id"], "--collab", cid, root=root).doc["result"]["message"]
    assert shown["from"] == "boss"
    from agentmsg.backends.file.store import FileStore

    stored = FileStore(root).message(cid, reply["id"])
    assert stored is not None and stored.sender_pin == BOSS
    registry = run_json("registry", "--collab", cid, root=root).doc["result"]
    assert json.dumps(registry).count(BOSS) >= 1

    # ack: the message addressed to boss, yes; the request to reviewer, refused (never acts as anyone else)
    pane.wait_for("boss(human) -> driver", "Re: may I merge")
    boss_before = run_json("inbox", "--collab", cid, "--self", BOSS, root=root).doc["result"]["count"]
    screen = pane.screen()
    rows = [ln for ln in screen.splitlines() if "-> " in ln and ":" in ln[:12]]
    target = next(i for i, ln in enumerate(rows) if "request may I merge" in ln)
    selected = next(i for i, ln in enumerate(rows) if ln.startswith(">"))
    pane.keys(*(["Down"] * (target - selected)))
    pane.wait_for(f"{asked[:8]}")
    pane.keys("a")
    pane.wait_for(f"acknowledged {asked}")
    assert run_json("inbox", "--collab", cid, "--self", BOSS, root=root).doc["result"]["count"] == boss_before - 1
    pane.keys("End")
    pane.keys("a")  # the oldest row: driver -> reviewer, not boss's to acknowledge
    pane.wait_for("not yours to acknowledge")
    assert run_json("inbox", "--collab", cid, "--self", REVIEWER, root=root).doc["result"]["count"] == 1


def test_overseer_closes_after_confirming(top: tuple[Pane, Path, str]) -> None:
    pane, root, cid = top
    pane.keys("c")
    pane.wait_for("close collaboration", "[y/N]")
    pane.keys("n")
    pane.wait_for("not closed")
    assert run_json("status", "--collab", cid, root=root).doc["result"]["closed"] is False
    pane.keys("c")
    pane.wait_for("[y/N]")
    pane.keys("y")
    pane.wait_for(f"closed {cid}")
    assert run_json("status", "--collab", cid, root=root).doc["result"]["closed"] is True


def test_top_shows_each_participants_presence(tmp_path: Path) -> None:
    """``top`` reads presence the way ``roster`` does: a person is unknown, an ended session gone."""
    import subprocess
    import sys

    from agentmsg.backends.file.store import FileStore
    from agentmsg.domain import validate
    from agentmsg.runtime import facts as sessionfacts
    from agentmsg.service.messaging import Mailbox
    from agentmsg.service.overview import Overview

    store = FileStore(tmp_path / "state")
    box = Mailbox(store)
    boss, driver = validate.pin("human:boss"), validate.pin(DRIVER)
    cid = box.open(boss, "boss", "l", "t").collab
    box.join(cid, driver, "driver")
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    sessionfacts.record(str(store.root), DRIVER, {"host": "codex", "session": "x", "pid": ended.pid,
                                                  "pid_start": "1"})
    ov = Overview(store, cid, root=str(store.root))
    ov.refresh()
    assert {p.alias: p.presence for p in ov.people} == {"boss": "unknown", "driver": "gone"}
    assert all(p.presence is None for p in (Overview(store, cid).people or []))


def test_read_only_at_80x24_shows_everyone_whole_and_only_the_keys_that_work(tmp_path: Path) -> None:
    """Issue 30: at 80x24, no column padded for other collaborations, every participant and pin shown, the subject
    whole, and no reply/ack/close keys offered when nothing can act."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the live view is tested in a real tmux pane")
    root = tmp_path / "state"
    cid = _setup(root)
    pins = {f"agent{i}": f"claude-code:5418c0de-1111-4222-8333-94445555666{i}" for i in range(1, 6)}
    for alias, pin in pins.items():
        assert run_json("join", "--alias", alias, "--collab", cid, "--self", pin, root=root).code == 0
    _send(root, cid, DRIVER, "reviewer", "Review the retry patch", "look at store.py", "--kind", "request")
    env = clean_env(root)
    env["TERM"] = "xterm-256color"
    env.pop("COLUMNS")  # the pane's own size, as in a user's terminal
    sock = Path(f"/tmp/am-top80-{os.getpid()}-{tmp_path.name[-12:]}.sock")
    pane = Pane(sock, env)
    cmd = shlex.join([sys.executable, "-m", "agentmsg.cli", "top", "--root", str(root)])
    pane.tmux("new-session", "-d", "-s", "top", "-x", "80", "-y", "24", "-c", str(REPO_ROOT), f"{cmd}; sleep 60")
    try:
        screen = pane.wait_for("Participants (8)", "Review the retry patch")
        for alias, pin in {**pins, "driver": DRIVER, "reviewer": REVIEWER, "boss": BOSS}.items():
            assert any(alias in ln and pin in ln for ln in screen.splitlines()), (alias, screen)
        assert "more: agentmsg roster" not in screen
        assert "driver(codex) -> reviewer request Review the retry patch" in screen
        keys = screen.rstrip().splitlines()[-1]
        assert "enter open" in keys and "r reply" not in keys and "a ack" not in keys and "c close" not in keys
        assert all("      " not in ln.strip() for ln in screen.splitlines() if " -> " in ln), screen
        pane.keys("r")
        pane.wait_for("read-only: pass --self human:NAME")
    finally:
        pane.tmux("kill-server")
        sock.unlink(missing_ok=True)
