"""Issue 32: every prompt path with mail pending is served without Python (docs/DELIVERY.md, "Rendered ahead").

Several bindings and an active wake consent are rendered ahead like one binding; a prompt that comes while the
helper renders waits for it (bounded, fail-open).  Every hook runs through ``hooks/run`` as Claude Code starts it,
with ``AGENTMSG_PYTHON`` a shim that counts interpreter starts (``tests/runtime/test_ahead.py``'s ``Session``).
The waits are made deterministic with a ``sleep`` on the hook's PATH that logs each call and, when asked, holds
the launcher until the test lets it go; the helper is held with ``SIGSTOP``.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentmsg.backends.file import ahead
from agentmsg.domain import wake as wakerules
from agentmsg.runtime import facts as sessionfacts
from tests.runtime.test_ahead import PIN, Session, same_but_nonce, subjects
from tests.support.cli_helpers import run_json
from tests.support.facade import Draft
from tests.support.helpers_hooks import python_dir, receipts


@pytest.fixture
def session(tmp_path, store, collab):
    s = Session(tmp_path, store, collab)
    yield s
    pid = s.renderer_pid()
    if pid is not None:
        os.kill(pid, signal.SIGCONT)
    s.stop_renderer()
    assert not [line for line in s.log() if "Error" in line or "error" in line], s.log()


class Sleeps:
    """A ``sleep`` for the hooks' PATH: logs every call; while ``hold`` exists, the first call waits for it to go."""

    def __init__(self, tmp: Path) -> None:
        self.dir = tmp / "sleep-bin"
        self.dir.mkdir()
        self.log, self.hold = tmp / "sleeps.log", tmp / "sleep-hold"
        script = self.dir / "sleep"
        script.write_text(f'#!/bin/sh\necho "$1" >> "{self.log}"\n'
                          f'while [ -e "{self.hold}" ]; do /bin/sleep 0.01; done\nexec /bin/sleep "$@"\n')
        script.chmod(0o755)

    @property
    def env(self) -> dict[str, str]:
        return {"PATH": f"{self.dir}:{python_dir()}:/usr/bin:/bin"}

    def calls(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0


@contextmanager
def stopped(session: Session) -> Iterator[int]:
    """The helper held (``SIGSTOP``): it renders nothing until the block ends."""
    pid = helper(session)
    os.kill(pid, signal.SIGSTOP)
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGCONT)


def helper(session: Session) -> int:
    """The root's helper, once it has named itself (a SessionStart hook starts it)."""
    wait_for("the helper's pid file", lambda: session.renderer_pid() is not None)
    pid = session.renderer_pid()
    assert pid is not None
    return pid


def wait_for(what: str, cond, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def second_binding(store, collab, alias: str = "reviewer") -> str:
    reg = store.open(collab.driver, "driver", "second", "another", {"adapter": "hook"})
    store.join(reg.collab, collab.reviewer, alias)
    return reg.collab


def send_to(store, cid: str, who, subject: str, to: str = "reviewer") -> str:
    (sent, *_rest) = store.send(cid, who, Draft(to=to, kind="request", priority="normal", subject=subject,
                                                body=f"body of {subject}"))
    return sent.message.id


def state_of(root: Path, cid: str, alias: str = "reviewer") -> dict:
    return json.loads((root / "collabs" / cid / "state" / f"{alias}.hook.json").read_text())


# ---- several bindings ------------------------------------------------------------------------------


def test_several_bindings_are_served_without_python_and_folded_into_each(session, store, collab):
    two = second_binding(store, collab)
    three = second_binding(store, collab)  # bound, nothing for it: its prompt still counts
    session.start()
    one_id = session.send("one")
    two_id = send_to(store, two, collab.driver, "two")
    text = session.served()
    assert sorted(subjects(text)) == ["one", "two"]
    assert "2 new peer messages for reviewer are unacknowledged" in text
    session.settled()
    root = Path(session.collab.root)
    for cid, mid in ((collab.id, one_id), (two, two_id)):
        recs = receipts(root, cid, "reviewer")
        presented = [r for r in recs if r["type"] == "presented"]
        assert [r["message"] for r in presented] == [mid] and presented[0]["pin"] == PIN
        (done,) = [r for r in recs if r["type"] == "attempt-complete"]
        assert done["attempt"] == presented[0]["attempt"]
        assert not [r for r in recs if r["type"] == "ack"]
    assert [state_of(root, c)["prompt"] for c in (collab.id, two, three)] == [1, 1, 1]
    # The next prompt shows nothing (both shown one prompt ago), counts in every binding, and starts no Python.
    assert session.served() == ""
    session.settled()
    assert [state_of(root, c)["prompt"] for c in (collab.id, two, three)] == [2, 2, 2]
    assert len([r for r in receipts(root, two, "reviewer") if r["type"] == "presented"]) == 1  # never twice


def test_several_bindings_show_what_the_full_hook_shows(session, store, collab):
    two = second_binding(store, collab)
    session.start()
    session.send("one")
    send_to(store, two, collab.driver, "two")
    served = session.served()
    session.settled()
    root = Path(session.collab.root)
    for cid in (collab.id, two):  # as before the first prompt: nothing shown yet
        st = state_of(root, cid)
        st.update(prompt=0, shown={}, high=0)
        (root / "collabs" / cid / "state" / "reviewer.hook.json").write_text(json.dumps(st))
    full, ran = session.hook(env={"AGENTMSG_NO_FASTPATH": "1"})
    assert ran and same_but_nonce(served, full)


# ---- wake consent ----------------------------------------------------------------------------------


def _wake_on(session: Session) -> str:
    code, _doc, err = run_json("wake", "on", "--collab", session.collab.id, "--self", PIN, root=session.collab.root)
    assert code == 0, err
    recs = [json.loads(line) for line in (session.collab.dir / "delivery.jsonl").read_text().splitlines()]
    return str(next(r["consent"] for r in recs if r["type"] == "wake-on"))


def test_an_active_wake_consent_is_served_ahead_and_the_fold_counts_the_turn(session, tmp_path):
    session.start()
    consent = _wake_on(session)
    session.send("m0")
    assert subjects(session.served()) == ["m0"]
    session.settled()
    assert sessionfacts.load(session.root, PIN).get("turn") == "busy"  # the prompt's turn, noted by the fold
    assert session.state()["prompt"] == 1
    sessionfacts.set_turn(session.root, PIN, "idle")
    # Nothing due: still served (an empty delivery, no idle marker: every prompt counts the turn).
    assert session.served() == ""
    session.settled()
    assert sessionfacts.load(session.root, PIN).get("turn") == "busy" and session.state()["prompt"] == 2
    assert not os.path.exists(session.base + ".idle") or Path(session.base + ".idle").read_text() != Path(
        session.base + ".gen").read_text()
    # A ring: the next prompt's text decides what it records, so the helper says "in full" (.full), and a
    # launcher finds that at once: no wait, and the full hook records the doorbell prompt.
    with session.store.transaction(session.collab.id) as tx:
        tx.append_delivery({"type": "wake-ring", "consent": consent, "alias": "reviewer", "pin": PIN,
                            "at": time.time(), "outcome": "rang", "mechanism": "test", "messages": []})
    wait_for("the helper's answer", lambda: _full_now(session))
    sleeps = Sleeps(tmp_path)
    bell = wakerules.doorbell(1, "reviewer", ["x"])
    _text, ran = session.hook(env=sleeps.env, prompt=bell)
    assert ran and sleeps.calls() == 0
    recs = [json.loads(line) for line in (session.collab.dir / "delivery.jsonl").read_text().splitlines()]
    assert [r["human"] for r in recs if r["type"] == "wake-prompt"] == [False]


def _full_now(session: Session) -> bool:
    try:
        return Path(session.base + ahead.FULL).read_text() == Path(session.base + ".gen").read_text()
    except FileNotFoundError:
        return False


# ---- a render in flight ----------------------------------------------------------------------------


def test_a_prompt_during_a_render_waits_for_it_and_is_served_once(session, tmp_path):
    session.start()
    session.send("first")
    assert subjects(session.served()) == ["first"]
    session.settled()
    session.ready()
    sleeps = Sleeps(tmp_path)
    sleeps.hold.touch()
    got: dict[str, tuple[str, bool]] = {}
    with stopped(session):
        mid = session.send("second")  # voids the generation; the helper, held, has not rendered it
        prompt = threading.Thread(target=lambda: got.update(out=session.hook(env=sleeps.env)))
        prompt.start()
        wait_for("the launcher waiting", lambda: sleeps.calls() >= 1)
    session.ready()  # the helper rendered it while the launcher waited
    sleeps.hold.unlink()
    prompt.join(30)
    text, ran = got["out"]
    assert not ran and subjects(text) == ["second"]
    session.settled()
    presented = [r["message"] for r in session.receipts() if r["type"] == "presented"]
    assert presented.count(mid) == 1
    assert session.served() == ""  # nothing again at the next prompt


def test_a_render_that_never_comes_costs_a_bounded_wait_then_the_full_hook(session, tmp_path):
    session.start()
    session.ready()
    sleeps = Sleeps(tmp_path)
    with stopped(session):
        mid = session.send("late")
        text, ran = session.hook(env=sleeps.env)
        assert ran and subjects(text) == ["late"]
        assert sleeps.calls() == 5  # the bound: five short sleeps, then the hook in full
    session.ready()
    assert session.served() == ""  # shown by the full hook: not again
    session.settled()
    assert [r["message"] for r in session.receipts() if r["type"] == "presented"] == [mid]


def test_no_helper_no_wait(session, tmp_path):
    session.start()
    session.ready()
    sleeps = Sleeps(tmp_path)
    pid = helper(session)
    os.kill(pid, signal.SIGSTOP)
    session.send("m")  # voids the generation; the helper, held, renders nothing
    os.kill(pid, signal.SIGKILL)  # and dies: its pid file names a process that is gone
    wait_for("the helper gone", lambda: not Path(f"/proc/{pid}/cmdline").exists()
             or not Path(f"/proc/{pid}/cmdline").read_bytes())
    text, ran = session.hook(env=sleeps.env)
    assert ran and subjects(text) == ["m"] and sleeps.calls() == 0


def test_a_fifo_at_the_helpers_pid_file_never_holds_the_launcher(session, tmp_path):
    """The launcher reads the helper's pid file on a prompt that finds no answer (is a helper rendering?): a FIFO
    planted there is never opened (it would block the prompt for good); no wait, the hook in full."""
    session.start()
    session.ready()
    sleeps = Sleeps(tmp_path)
    with stopped(session):
        session.send("m")  # voids the generation: no answer for this prompt
        pid_file = Path(session.root) / "idle" / "helper.pid"
        pid_file.unlink()
        os.mkfifo(pid_file)
        try:
            text, ran = session.hook(env=sleeps.env)  # run_hook's timeout fails a launcher that blocks
        finally:
            pid_file.unlink()  # nothing after this test opens it (the fixture reads the pid file)
        assert ran and subjects(text) == ["m"] and sleeps.calls() == 0


@pytest.mark.parametrize("damage", ["fifo", "link", "garbage"])
def test_damaged_files_never_hold_or_mislead_a_waiting_launcher(session, tmp_path, damage):
    """The helper has begun a render (a generation, no answer yet) and the answer files are damaged: a FIFO or a
    link is never read (the wait runs out, then the hook in full); a first line naming the generation with a
    key that is not this environment's is refused by the claim (the hook in full, which folds the refusal)."""
    session.start()
    session.ready()
    sleeps = Sleeps(tmp_path)
    token = "0123456789abcdef" * 2
    with stopped(session):
        mid = session.send("m")
        Path(session.base + ".gen").write_text(token + "\n")
        target = tmp_path / "elsewhere"
        target.write_text(token + "\n")
        for sfx in (ahead.FULL, ahead.READY, ".idle"):
            path = Path(session.base + sfx)
            path.unlink(missing_ok=True)
            if damage == "fifo":
                os.mkfifo(path)
            elif damage == "link":
                path.symlink_to(target)
            elif sfx == ahead.READY:
                path.write_text(f"{token} 9|other|\n{{}}\n")
        text, ran = session.hook(env=sleeps.env)
        assert ran and subjects(text) == ["m"]
        assert sleeps.calls() == (0 if damage == "garbage" else 5)
    session.settled()
    assert [r["message"] for r in session.receipts() if r["type"] == "presented"] == [mid]


# ---- a replica root: its mirror renders ---------------------------------------------------------------


def test_a_replica_root_is_rendered_ahead_by_its_mirror_and_the_receipts_reach_the_store_once(tmp_path):
    from agentmsg.runtime import doorbell
    from tests.runtime.test_mirror import LEAD, REVIEWER, Pair
    from tests.support.helpers_hooks import REVIEWER_SESSION, python_shim, run_hook, starts

    pair = Pair(tmp_path)
    pair.collab = pair.cli("open", "--self", LEAD, "--alias", "lead", "--label", "mirror", "--task", "t")["collab"]
    pair.cli("join", "--collab", pair.collab, "--self", REVIEWER, "--alias", "reviewer")
    pair.sync_once()  # marks the root a replica
    env = {"AGENTMSG_NO_AHEAD": "", "AGENTMSG_PYTHON": str(python_shim(tmp_path)), "AGENTMSG_SYNC_IDLE_EXIT": "120s"}
    root = str(os.path.realpath(pair.local))
    base = ahead.base(root, REVIEWER) or ""

    def hook(event: str = "UserPromptSubmit") -> tuple[str, bool]:
        before = starts(tmp_path)
        res = run_hook("claude", event, tmp_path, pair.local, REVIEWER_SESSION, extra_env=env)
        assert res.returncode == 0 and res.stderr == ""
        return (res.text if res.stdout else ""), starts(tmp_path) > before

    def settled() -> None:
        wait_for("the mirror rendered", lambda: not os.path.lexists(base + ahead.TOOK)
                 and ahead.current(root, REVIEWER), timeout=30)

    hook("SessionStart")  # records the session's facts and starts the mirror (the root is marked a replica)
    wait_for("the mirror", lambda: doorbell.mirroring(root), timeout=30)
    try:
        assert doorbell.RENDER in (doorbell.duties(root) or ())
        mid = pair.send("reviewer", "through the mirror")
        inbox = pair.local / "collabs" / pair.collab / "inbox" / "reviewer.jsonl"
        wait_for("the message copied down", lambda: inbox.exists() and mid in inbox.read_text(), timeout=30)
        settled()
        text, ran = hook()
        assert not ran and "through the mirror" in text and mid in text
        settled()  # folded into the outbox, pushed, and the next prompt rendered
        wait_for("the receipts on the store", lambda: any(
            r["type"] == "attempt-complete" for r in receipts(pair.remote, pair.collab, "reviewer")), timeout=30)
        presented = [r for r in receipts(pair.remote, pair.collab, "reviewer") if r["type"] == "presented"]
        assert [r["message"] for r in presented] == [mid]
        state = json.loads((pair.local / "collabs" / pair.collab / "state" / "reviewer.hook.json").read_text())
        assert state["ahead"] == presented[0]["attempt"]
        text, ran = hook()  # shown one prompt ago: nothing, and still no interpreter
        assert not ran and text == ""
        pair.wait_same()
    finally:
        pid = int((pair.local / "idle" / ahead.PID).read_text().split()[0])
        os.kill(pid, signal.SIGTERM)
        wait_for("the mirror gone", lambda: not doorbell.mirroring(root), timeout=30)
    assert not os.path.exists(base + ahead.READY)  # what it rendered left with it: the next hook runs in full
    log = pair.local / "hooks.log"
    assert not [line for line in (log.read_text().splitlines() if log.exists() else []) if "rror" in line]


@pytest.mark.parametrize("big", [False, True])
def test_codex_waits_for_a_render_in_flight_too(tmp_path, store, collab, big):
    """Codex's session id comes from stdin, which the launcher reads first (all of it before printing)."""
    from agentmsg.domain import validate as model
    from tests.runtime.test_ahead import _host_run, stop_renderers
    from tests.support.helpers_hooks import python_shim

    sid = "4242c0de-1111-4222-8333-944455556666"
    pin = f"codex:{sid}"
    store.join(collab.id, model.pin(pin), "worker")
    extra = {"AGENTMSG_PYTHON": str(python_shim(tmp_path))}
    root = str(os.path.realpath(collab.root))

    def stdin(event: str) -> bytes:
        doc = {"session_id": sid, "hook_event_name": event, "cwd": str(tmp_path), "transcript_path": None,
               "prompt": "p" * (50_000 if big else 10)}
        return json.dumps(doc, separators=(",", ":")).encode()

    _out, ran = _host_run("codex", "SessionStart", tmp_path, collab.root, sid, stdin("SessionStart"), extra)
    assert ran
    pidfile = Path(root) / "idle" / ahead.PID
    wait_for("the helper", lambda: pidfile.exists())
    pid = int(pidfile.read_text().split()[0])
    sleeps = Sleeps(tmp_path)
    sleeps.hold.touch()
    got: dict[str, tuple[bytes, bool]] = {}
    try:
        os.kill(pid, signal.SIGSTOP)
        try:
            store.send(collab.id, collab.carol, Draft(to="worker", kind="request", priority="normal", subject="w0",
                                                      body="b"))
            prompt = threading.Thread(target=lambda: got.update(out=_host_run(
                "codex", "UserPromptSubmit", tmp_path, collab.root, sid, stdin("UserPromptSubmit"),
                dict(extra, **sleeps.env))))
            prompt.start()
            wait_for("the launcher waiting", lambda: sleeps.calls() >= 1)
        finally:
            os.kill(pid, signal.SIGCONT)
        base = ahead.base(root, pin) or ""
        wait_for("rendered", lambda: ahead.current(root, pin) and not os.path.exists(base + ahead.TOOK))
        sleeps.hold.unlink()
        prompt.join(30)
        out, ran = got["out"]
        assert not ran and subjects(json.loads(out)["hookSpecificOutput"]["additionalContext"]) == ["w0"]
    finally:
        stop_renderers(root, collab.root)


def test_a_session_another_version_recorded_is_never_waited_for(session, tmp_path):
    """The helper renders only the sessions its own version's hooks recorded; for another's it says "in full"."""
    session.start()
    helper(session)
    facts = Path(session.base + ahead.FACTS)
    facts.write_text(json.dumps(dict(json.loads(facts.read_text()), version="0.0.0-older")))
    session.send("m")
    wait_for("the helper's answer", lambda: _full_now(session))
    sleeps = Sleeps(tmp_path)
    text, ran = session.hook(env=sleeps.env)
    assert ran and subjects(text) == ["m"] and sleeps.calls() == 0


def test_a_damaged_fold_of_several_bindings_shows_them_again_and_forges_nothing(tmp_path, store, collab):
    """A fold that does not parse is reported and given back: nothing is recorded for the claim, so the
    messages come due again at the next prompt (shown twice, never hidden, never recorded as shown)."""
    s = Session(tmp_path, store, collab)
    try:
        two = second_binding(store, collab)
        s.start()
        s.send("one")
        send_to(store, two, collab.driver, "two")
        s.ready()
        s.stop_renderer()  # nobody folds behind the test's back
        wait_for("no helper", lambda: s.renderer_pid() is None)
        fold = json.loads(Path(s.base + ahead.FOLD).read_text())
        Path(s.base + ahead.FOLD).write_text(json.dumps(dict(fold, parts=[{"collab": 5}])))
        text, _ran = s.hook()  # served (the launcher starts a helper to fold it: that interpreter counts)
        assert sorted(subjects(text)) == ["one", "two"]
        # The full hook (whether or not the helper the launcher started got to the claim first: it cannot fold
        # it either, and gives it back) shows both again.
        text, ran = s.hook(env={"AGENTMSG_NO_AHEAD": "1"})
        assert ran and sorted(subjects(text)) == ["one", "two"]
        root = Path(collab.root)
        for cid in (collab.id, two):
            assert len([r for r in receipts(root, cid, "reviewer") if r["type"] == "presented"]) == 1
        assert any("malformed delivery fold" in line for line in s.log())
    finally:
        s.stop_renderer()


def test_a_helper_that_does_not_render_is_never_waited_for(session, tmp_path):
    """A helper whose duties leave out rendering (a mirror of another version, say) is not waited for."""
    session.start()
    session.ready()
    sleeps = Sleeps(tmp_path)
    with stopped(session) as pid:
        (Path(session.root) / "idle" / ahead.PID).write_text(f"{pid}\nmirror retry\n")
        session.send("m")
        text, ran = session.hook(env=sleeps.env)
        assert ran and subjects(text) == ["m"] and sleeps.calls() == 0
