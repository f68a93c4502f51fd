"""Deliveries rendered ahead: the launcher prints a prompt's delivery without Python (docs/DELIVERY.md).

Every hook here runs through ``hooks/run`` as the host starts it, with rendering ahead on
(``AGENTMSG_NO_AHEAD=""``; the other hook tests keep it off) and ``AGENTMSG_PYTHON`` pointing at a
shim that counts interpreter starts, so "served" means "no Python process started for that prompt".
The renderer is the real one (the resident helper, ``agentmsg/resident/helper.py``), started the way users
get it: by a hook run or by a writer's doorbell.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from agentmsg.backends.file import ahead, layout
from agentmsg.domain import validate as model
from agentmsg.service import delivery
from tests.support.cli_helpers import run_json
from tests.support.facade import Draft
from tests.support.helpers_hooks import REVIEWER_SESSION, python_shim, receipts, run_hook, starts

PIN = f"claude-code:{REVIEWER_SESSION}"
ON = {"AGENTMSG_NO_AHEAD": ""}
NONCE = re.compile(r"[0-9a-f]{32}")


class Session:
    """The reviewer's Claude Code session, driven through the launcher, with rendering ahead on."""

    def __init__(self, tmp: Path, store, collab) -> None:
        self.tmp, self.store, self.collab = tmp, store, collab
        self.root = str(os.path.realpath(collab.root))
        self.shim = python_shim(tmp)
        self.base = ahead.base(self.root, PIN) or ""
        self.env = dict(ON, AGENTMSG_PYTHON=str(self.shim))

    def hook(self, event: str = "UserPromptSubmit", *, env: dict[str, str] | None = None,
             session: str = REVIEWER_SESSION, **fields) -> tuple[str, bool]:
        """(the text the model would see, whether an interpreter started)."""
        before = starts(self.tmp)
        res = run_hook("claude", event, self.tmp, self.collab.root, session, extra_env=dict(self.env, **(env or {})),
                       **fields)
        assert res.returncode == 0 and res.stderr == ""
        text = res.text if res.stdout else ""
        return text, starts(self.tmp) > before

    def start(self) -> None:
        """SessionStart: the full run records the facts the renderer needs and starts it."""
        text, ran = self.hook("SessionStart")
        assert ran and "participant reviewer" in text
        assert (ahead.facts(self.root, PIN) is not None) == (self.env["AGENTMSG_NO_AHEAD"] != "1")

    def send(self, subject: str, *, to: str = "reviewer", priority: str = "normal") -> str:
        (sent, *_rest) = self.store.send(self.collab.id, self.collab.driver, Draft(
            to=to, kind="request", priority=priority, subject=subject, body=f"body of {subject}"))
        return sent.message.id

    def ready(self, timeout: float = 15.0) -> None:
        """Until the renderer has an answer for the current generation (and no claim is in flight)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not os.path.exists(self.base + ahead.TOOK) and ahead.current(self.root, PIN):
                return
            time.sleep(0.01)
        raise AssertionError(f"no delivery rendered ahead: {sorted(os.listdir(os.path.dirname(self.base)))}"
                             f" log: {self.log()}")

    def settled(self, timeout: float = 15.0) -> None:
        """Until the last claim is folded into receipts and hook state."""
        deadline = time.monotonic() + timeout
        while os.path.exists(self.base + ahead.TOOK):
            assert time.monotonic() < deadline, f"claim never folded; log: {self.log()}"
            time.sleep(0.01)

    def served(self, **kw) -> str:
        """A prompt that must be printed from .ready, with no interpreter started."""
        self.ready()
        assert self.renderer_pid() is not None
        text, ran = self.hook(**kw)
        assert not ran, "the prompt started an interpreter"
        return text

    def receipts(self) -> list[dict]:
        return receipts(self.collab.root, self.collab.id, "reviewer")

    def state(self) -> dict:
        return json.loads((self.collab.dir / "state" / "reviewer.hook.json").read_text())

    def renderer_pid(self) -> int | None:
        path = Path(self.root) / layout.IDLE / ahead.PID
        if not path.is_file():  # a FIFO a test planted there would block the read
            return None
        try:
            pid = int(path.read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid

    def log(self) -> list[str]:
        path = Path(self.root) / "hooks.log"
        return path.read_text().splitlines() if path.exists() else []

    def renderers(self) -> list[int]:
        """Every renderer process of this root, whether or not it has written its pid file yet."""
        return renderers(self.root, self.collab.root)

    def strays(self) -> list[str]:
        """What a finished hook run left behind: every process of this root's but the renderers."""
        keep = set(self.renderers())
        return [f"{pid}: {b' '.join(argv).decode(errors='replace')}"
                for pid, argv in processes(self.root, self.collab.root).items() if pid not in keep]

    def stop_renderer(self) -> None:
        """Kill every renderer of this root (one a hook just started may not have written its pid yet)."""
        stop_renderers(self.root, self.collab.root)


def processes(root: str, home: str | Path) -> dict[int, list[bytes]]:
    """Every other process whose command line names this state root, or whose environment sets
    AGENTMSG_HOME to it (a hook run's, like a launcher's background child before it runs the renderer):
    pid -> command line."""
    names = {root.encode(), str(home).encode()}
    env = f"AGENTMSG_HOME={home}".encode()
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            argv = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
            environ = Path(f"/proc/{p}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if names & set(argv) or env in environ:
            out[int(p)] = argv
    return out


def renderers(root: str, home: str | Path) -> list[int]:
    """The helpers of this root: "helper" and the root on their command line."""
    names = {root.encode(), str(home).encode()}
    entries = {b"helper", b"agentmsg.resident.helper"}  # the hooks' entry, or the one a deferred ring starts
    return [pid for pid, argv in processes(root, home).items() if entries & set(argv) and names & set(argv)]


def stop_renderers(root: str, home: str | Path) -> None:
    """Kill every process of this root: its renderers, and any a launcher started that has not yet become one."""
    deadline = time.monotonic() + 5
    while True:
        pids = list(processes(root, home))
        if not pids or time.monotonic() > deadline:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


def run_state(pid: int) -> str:
    """The process's state letter from /proc (``T`` stopped, ``Z`` a zombie), or "" when there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rpartition(")")[2].split()[0]


def gone(pid: int) -> bool:
    """The process has exited: no such process, or a zombie not yet reaped (kill -0 still finds it)."""
    return run_state(pid) in ("", "Z")


def wait_for(what: str, cond, timeout: float = 15.0) -> None:
    """Until ``cond()`` holds: the event a test waits for, never a fixed delay (the deadline only fails it)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


@pytest.fixture
def session(tmp_path, store, collab):
    s = Session(tmp_path, store, collab)
    yield s
    s.stop_renderer()
    assert not [line for line in s.log() if "Error" in line or "error" in line], s.log()


def subjects(text: str) -> list[str]:
    return re.findall(r"subject: (\S+)", text)


def same_but_nonce(a: str, b: str) -> bool:
    return NONCE.sub("N", a) == NONCE.sub("N", b)


# ---- the path itself ------------------------------------------------------------------------------


def test_a_pending_delivery_is_printed_without_an_interpreter_and_recorded(session):
    session.start()
    ids = [session.send(f"m{i}") for i in range(3)]
    text = session.served()
    assert subjects(text) == ["m0", "m1", "m2"]
    assert "3 new peer messages for reviewer" in text and "boundary" in text
    session.settled()
    recs = session.receipts()
    presented = [r for r in recs if r["type"] == "presented"]
    assert [r["message"] for r in presented] == ids  # one attempt, before its completion, never an ack
    (done,) = [r for r in recs if r["type"] == "attempt-complete"]
    assert {r["attempt"] for r in presented} == {done["attempt"]} and done["messages"] == 3
    assert not [r for r in recs if r["type"] == "ack"]
    assert all(r["hook"] == "UserPromptSubmit" and r["pin"] == PIN for r in presented)
    st = session.state()
    assert st["prompt"] == 1 and set(st["shown"].values()) == {1} and len(st["shown"]) == 3


def test_the_cli_reports_a_served_message_as_presented_not_acknowledged(session):
    session.start()
    mid = session.send("watched")
    session.served()
    session.settled()
    res = run_json("show", mid, root=session.collab.root)
    assert res.code == 0, res.stderr
    states = res.doc["result"]["states"]
    assert states["presented"] and not states["acknowledged"]


def test_what_is_printed_is_what_the_full_hook_prints(tmp_path, store, collab):
    """Rendered ahead or run in full, the model sees the same text for the same state (the hook's own code)."""
    s = Session(tmp_path, store, collab)
    try:
        s.start()
        for i in range(4):
            s.send(f"m{i}", priority="high" if i == 2 else "normal")
        served = s.served()
        s.settled()
        # The same state again, with the fast paths off: the full hook, in this process's sight.
        st = s.state()
        st.update(prompt=0, shown={}, high=0)  # as before the first prompt: nothing shown yet
        (collab.dir / "state" / "reviewer.hook.json").write_text(json.dumps(st))
        full, ran = s.hook(env={"AGENTMSG_NO_FASTPATH": "1"})
        assert ran and same_but_nonce(served, full)
        assert subjects(served) == ["m2", "m0", "m1", "m3"]  # high priority first, then oldest
    finally:
        s.stop_renderer()


def test_prompts_after_it_are_counted_without_python_and_the_message_comes_due_again(session):
    """Shown but not acknowledged: the next prompts print nothing and still count (REPRESENT_AFTER)."""
    session.start()
    session.send("pending")
    assert subjects(session.served()) == ["pending"]
    for n in range(2, 6):
        assert session.served() == ""
        session.settled()
        assert session.state()["prompt"] == n
    assert subjects(session.served()) == ["pending"]  # the fifth prompt after: due again
    session.settled()
    assert len([r for r in session.receipts() if r["type"] == "presented"]) == 2


def twin(tmp_path: Path, name: str, collab, *, ahead: bool) -> Session:
    """The reviewer's session in a root of its own (``tmp_path/name``), the same collaboration's members;
    rendering ahead on or off: two such roots, driven alike, must show the model the same."""
    from tests.support.facade import FileStore

    sub = tmp_path / name
    sub.mkdir()
    st = FileStore(sub / "state")
    reg = st.open(collab.driver, "driver", "review", "review the store", {"adapter": "hook"})
    st.join(reg.collab, collab.reviewer, "reviewer")
    s = Session(sub, st, type(collab)(reg.collab, st.root, collab.driver, collab.reviewer, collab.carol))
    if not ahead:
        s.env = dict(s.env, AGENTMSG_NO_AHEAD="1")
    return s


def test_the_counting_matches_the_full_hook_prompt_by_prompt(tmp_path, store, collab):
    """Eight prompts with a message arriving in between: the same outputs with and without rendering ahead."""
    outputs = {}
    for mode in ("ahead", "full"):
        s = twin(tmp_path, mode, collab, ahead=mode == "ahead")
        try:
            s.start()
            seen = []
            for n in range(8):
                if n in (0, 3):
                    s.send(f"m{n}")
                if mode == "ahead":
                    s.ready()
                text, _ran = s.hook()
                seen.append(subjects(text))
                if mode == "ahead":
                    s.settled()
            outputs[mode] = seen
        finally:
            s.stop_renderer()
    assert outputs["ahead"] == outputs["full"]
    assert outputs["full"][0] == ["m0"] and outputs["full"][3] == ["m3"] and outputs["full"][5] == ["m0"]


# ---- every change to what a session would see voids what was rendered -------------------------------


def test_an_ack_after_rendering_takes_the_message_out(session):
    session.start()
    first = session.send("first")
    session.send("second")
    session.ready()
    session.store.ack(session.collab.id, session.collab.reviewer, first)
    assert subjects(session.served()) == ["second"]


def test_a_message_sent_after_rendering_is_not_missed(session):
    session.start()
    session.send("early")
    session.ready()
    session.send("late")  # voids the generation; the next prompt has both, served or in full
    text, _ran = session.hook()
    assert subjects(text) == ["early", "late"]


def test_acknowledging_everything_leaves_the_idle_fast_path(session):
    session.start()
    mid = session.send("only")
    session.served()
    session.settled()
    session.store.ack(session.collab.id, session.collab.reviewer, mid)
    session.ready()
    gen = Path(session.base + ".gen").read_text()
    assert Path(session.base + ".idle").read_text() == gen  # the renderer marked it idle
    assert not os.path.exists(session.base + ahead.READY)
    assert session.hook() == ("", False)


def test_a_retry_shows_the_message_again_at_the_next_prompt(session):
    session.start()
    mid = session.send("again")
    session.served()
    session.settled()
    assert session.served() == ""
    session.settled()
    attempt = "3f0c5f8e-0c1a-4d55-9c6b-6c1d2a3b4c5d"  # an attempt whose output never reached the host
    session.store.receipt(session.collab.id, "reviewer", {"type": "presented", "message": mid, "attempt": attempt,
                                                           "host": "claude", "hook": "UserPromptSubmit"})
    delivery.retry(session.store, session.collab.id, session.collab.reviewer, attempt, mid)
    assert subjects(session.served()) == ["again"]


def test_a_takeover_ends_it(session, store, collab):
    session.start()
    session.send("before")
    session.ready()
    store.join(collab.id, model.pin("human:dana"), "reviewer", succeeds=collab.reviewer, reason="reassigned")
    text, _ran = session.hook()
    assert text == ""  # the session no longer holds reviewer: nothing, served or not


def test_a_different_cap_at_the_prompt_runs_in_full_with_that_cap(session):
    session.start()
    for i in range(30):
        session.send(f"long{i:02d}")
    session.ready()
    text, ran = session.hook(env={"AGENTMSG_HOOK_CAP": "3000"})
    assert ran and len(text.encode("utf-16-le")) // 2 <= 3000


def test_turning_it_off_removes_what_it_rendered(session):
    session.start()
    session.send("x")
    session.ready()
    text, ran = session.hook(env={"AGENTMSG_NO_AHEAD": "1"})
    assert ran and subjects(text) == ["x"]
    assert not os.path.exists(session.base + ahead.FACTS) and not os.path.exists(session.base + ahead.READY)


# ---- damage: one slow run, never a lost, repeated or forged delivery ----------------------------------


def _deleted_ready(base: str) -> None:
    os.unlink(base + ahead.READY)


def _deleted_fold(base: str) -> None:
    os.unlink(base + ahead.FOLD)


def _corrupt_ready(base: str) -> None:
    Path(base + ahead.READY).write_bytes(b"\xff\x00garbage\n{not json")


def _ready_of_another_generation(base: str) -> None:
    raw = Path(base + ahead.READY).read_bytes()
    Path(base + ahead.READY).write_bytes(b"0" * 32 + raw[32:])


def _backdated(base: str) -> None:
    for suffix in (ahead.READY, ahead.FOLD, ".gen"):
        os.utime(base + suffix, (1, 1))


def _ready_is_a_link(base: str) -> None:
    Path(base + ".other").write_bytes(Path(base + ahead.READY).read_bytes())
    os.unlink(base + ahead.READY)
    os.symlink(base + ".other", base + ahead.READY)


def _stale_claim(base: str) -> None:
    Path(base + ahead.TOOK).write_text("deadbeef" * 4 + "\n")  # a launcher that died after claiming


def _claim_is_a_link(base: str) -> None:
    os.symlink(base + ".gen", base + ahead.TOOK)


def _deleted_facts(base: str) -> None:
    os.unlink(base + ahead.FACTS)


@pytest.mark.parametrize("damage", [_deleted_ready, _deleted_fold, _corrupt_ready, _ready_of_another_generation,
                                    _backdated, _ready_is_a_link, _stale_claim, _claim_is_a_link, _deleted_facts])
def test_damage_never_hides_repeats_or_forges_a_delivery(session, damage):
    session.start()
    session.send("before")
    session.ready()
    session.stop_renderer()  # nobody repairs it behind the test's back
    damage(session.base)
    text, _ran = session.hook()
    assert subjects(text) == ["before"] and "\ufffd" not in text and "garbage" not in text
    session.settled()  # the run settled whatever claim it found
    assert len([r for r in session.receipts() if r["type"] == "presented"]) == 1
    # and the message is not shown twice (it is shown, not acknowledged: due again only prompts later)
    again, _ran = session.hook()
    assert again == ""


def test_a_claim_whose_launcher_died_while_printing_is_folded_as_interrupted(session):
    """A .took with no end line: the messages were presented (receipts) but not marked shown: due again."""
    session.start()
    session.send("cut")
    session.ready()
    session.stop_renderer()
    gen = Path(session.base + ".gen").read_text().strip()
    Path(session.base + ahead.TOOK).write_text(gen + "\n")
    text, ran = session.hook()  # the next prompt: full, folds the claim first, and shows it (never marked shown)
    assert ran and subjects(text) == ["cut"]
    presented = [r for r in session.receipts() if r["type"] == "presented"]
    assert len(presented) == 2 and presented[0]["attempt"] != presented[1]["attempt"]


# ---- the renderer's life --------------------------------------------------------------------------------


def test_a_writer_starts_the_renderer_when_none_runs(session):
    session.start()
    session.send("first")
    session.ready()
    session.stop_renderer()
    session.send("second")  # the doorbell finds nobody: this send starts one
    assert subjects(session.served()) == ["first", "second"]


def test_the_launcher_starts_a_renderer_to_fold_what_it_printed(session):
    session.start()
    session.send("first")
    pid = _stopped_renderer(session)  # alive for kill -0, deaf to the ring: the claim waits...
    try:
        text, ran = session.hook()
        assert not ran and subjects(text) == ["first"]
    finally:
        os.kill(pid, signal.SIGKILL)
    wait_for("the renderer is dead", lambda: gone(pid))
    # ... and whoever comes first folds it: the next hook run, in full, or a renderer that started since
    # (one a writer started while the killed one was on its way up takes the lock now).  Both are correct:
    # the message was shown one prompt ago, so it is not shown again, and it was presented once.
    text, ran = session.hook()
    assert text == ""
    session.settled()
    assert len([r for r in session.receipts() if r["type"] == "presented"]) == 1
    assert ran or session.state()["ahead"]  # not run in full: a renderer folded the claim


def test_one_renderer_per_root(session):
    session.start()
    session.send("x")
    session.ready()
    pid = session.renderer_pid()
    # A renderer a writer started while this one was on its way up finds the lock taken, hands over its pins
    # and exits: wait for that, then no full run may start another.
    wait_for("one renderer", lambda: session.renderers() == [pid])
    for _ in range(3):
        session.hook("Stop", stop_hook_active=False)  # full runs ring the running one, start no other
        assert session.renderers() == [pid]  # one started by the run would be there already (spawned before it ended)
    time.sleep(0.3)
    assert session.renderer_pid() == pid
    assert session.renderers() == [pid]


def test_concurrent_sends_and_acks_never_lose_or_resurrect_a_message(session):
    """Sends land while prompts are served: every message is shown before it is acknowledged, and none
    acknowledged before a prompt starts is shown at that prompt."""
    import threading

    session.start()
    sent: list[str] = []
    stop = threading.Event()

    def sender() -> None:
        i = 0
        while not stop.is_set() and i < 40:
            sent.append(session.send(f"c{i:02d}"))
            i += 1
            time.sleep(0.02)

    t = threading.Thread(target=sender)
    t.start()
    shown: set[str] = set()
    try:
        for _ in range(60):
            acked_before = {m for m in list(sent) if m in shown}
            for m in acked_before:
                session.store.ack(session.collab.id, session.collab.reviewer, m)
            text, _ran = session.hook()
            now = set(re.findall(r"· id ([0-9a-f-]{36})", text))
            assert not now & acked_before
            shown |= now
            time.sleep(0.01)
    finally:
        stop.set()
        t.join()
    for _ in range(8):
        text, _ran = session.hook()
        shown |= set(re.findall(r"· id ([0-9a-f-]{36})", text))
    assert set(sent) <= shown


# ---- every host with a launcher path: Codex and Copilot (session id from stdin), Gemini ----------------


def _host_run(host: str, event: str, tmp: Path, root: Path, session: str, stdin: bytes,
              extra: dict[str, str]) -> tuple[bytes, bool]:
    """One hook run of ``host`` through ``hooks/run`` with that host's variables (helpers_hooks' for Codex)."""
    from tests.support.helpers_hooks import REPO, host_env

    env = host_env("codex", tmp, root, session, event, dict(ON, **extra))
    mode = {"UserPromptSubmit": " prompt", "Stop": " stop"}.get(event, "") if host == "gemini" else ""
    if host == "copilot":
        env.update(COPILOT_CLI="1", COPILOT_PLUGIN_ROOT=str(REPO))
    if host == "gemini":
        for var in ("PLUGIN_ROOT", "PLUGIN_DATA", "CODEX_HOME"):
            env.pop(var)
        env["GEMINI_SESSION_ID"] = session
    before = starts(tmp)
    proc = __import__("subprocess").run(["/bin/sh", "-c", f'/bin/sh "{REPO}/hooks/run" {host}{mode}'], input=stdin,
                                        capture_output=True, env=env, cwd=tmp, timeout=30)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    return proc.stdout, starts(tmp) > before


@pytest.mark.parametrize("host", ["codex", "copilot", "gemini"])
@pytest.mark.parametrize("big", [False, True])
def test_every_launcher_host_prints_its_delivery_in_its_own_format(tmp_path, store, collab, host, big):
    runtime = {"codex": "codex", "copilot": "copilot", "gemini": "gemini"}[host]
    sid = "4242c0de-1111-4222-8333-944455556666"
    pin = f"{runtime}:{sid}"
    store.join(collab.id, model.pin(pin), "worker")
    shim = python_shim(tmp_path)
    extra = {"AGENTMSG_PYTHON": str(shim)}

    def stdin(event: str) -> bytes:
        doc = {"session_id": sid, "hook_event_name": event, "cwd": str(tmp_path), "transcript_path": None}
        if event == "SessionStart":
            doc["source"] = "startup"
        else:  # a prompt over the 2 KB the launcher reads at once: the rest is drained before it prints
            doc["prompt"] = "p" * (50_000 if big else 10)
        return json.dumps(doc, separators=(",", ":")).encode()

    out, ran = _host_run(host, "SessionStart", tmp_path, collab.root, sid, stdin("SessionStart"), extra)
    assert ran and b"participant worker" in out
    root = str(os.path.realpath(collab.root))
    try:
        for i in range(2):
            store.send(collab.id, collab.driver if host != "codex" else collab.carol,
                       Draft(to="worker", kind="request", priority="normal", subject=f"w{i}", body="b"))
        deadline = time.monotonic() + 15
        while not ahead.current(root, pin) or os.path.exists((ahead.base(root, pin) or "") + ahead.TOOK):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        out, ran = _host_run(host, "UserPromptSubmit", tmp_path, collab.root, sid, stdin("UserPromptSubmit"), extra)
        assert not ran
        doc = json.loads(out)
        if host == "copilot":
            assert set(doc) == {"additionalContext"}
            text = doc["additionalContext"]
        elif host == "gemini":
            assert set(doc) == {"hookSpecificOutput"} and set(doc["hookSpecificOutput"]) == {"additionalContext"}
            text = doc["hookSpecificOutput"]["additionalContext"]
        else:
            assert doc["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
            text = doc["hookSpecificOutput"]["additionalContext"]
        assert subjects(text) == ["w0", "w1"]
        if host == "codex":  # Codex counts its cap in bytes, the others in UTF-16 units: rendered for the host
            assert ahead.facts(root, pin)["host"] == "codex"
        deadline = time.monotonic() + 15
        while os.path.exists((ahead.base(root, pin) or "") + ahead.TOOK):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        presented = [r for r in receipts(collab.root, collab.id, "worker") if r["type"] == "presented"]
        assert len(presented) == 2 and {r["host"] for r in presented} == {host}
    finally:
        stop_renderers(root, collab.root)


def test_an_idle_renderer_exits_and_the_next_writer_starts_another(session):
    import subprocess

    from tests.support.helpers_hooks import REPO

    session.start()
    session.stop_renderer()
    session.send("first")  # starts one; stop it and start one that idles out quickly
    session.ready()
    session.stop_renderer()
    env = {"PATH": os.defpath, "AGENTMSG_AHEAD_IDLE": "0.5"}
    proc = subprocess.Popen([str(session.shim), "-I", "-S",
                             str(REPO / "hooks" / "agentmsg_hook.py"), "claude", "helper", session.root], env=env)
    assert proc.wait(timeout=20) == 0  # nothing to do: gone after the idle time, its pid file with it
    assert session.renderer_pid() is None
    assert not (Path(session.root) / layout.IDLE / ahead.PID).exists()
    session.send("second")  # the doorbell finds nobody listening: this send starts a renderer
    assert subjects(session.served()) == ["first", "second"]


def test_status_says_whether_the_renderer_runs(session):
    assert run_json("status", root=session.collab.root).doc["result"]["renderer"] is None  # never used here
    session.start()
    session.send("x")
    session.ready()
    doc = run_json("status", root=session.collab.root).doc["result"]["renderer"]
    assert doc == {"running": True, "ready": 1, "claims": 0}
    session.stop_renderer()
    assert run_json("status", root=session.collab.root).doc["result"]["renderer"]["running"] is False


# ---- found in review: each a scenario that once went wrong ---------------------------------------------


def _stopped_renderer(session) -> int:
    """The renderer stopped between two pieces of work: alive for the launcher, deaf to its ring."""
    for _ in range(20):
        session.ready()
        pid = session.renderer_pid()
        if pid is None:  # a full run rendered it, and the renderer it started has not written its pid yet
            time.sleep(0.05)
            continue
        os.kill(pid, signal.SIGSTOP)
        wait_for("the renderer stopped", lambda p=pid: run_state(p) in ("T", "t", "", "Z"))  # kill only queues it
        if not os.path.exists(session.base + ahead.TOOK) and ahead.current(session.root, PIN):
            return pid
        os.kill(pid, signal.SIGCONT)
    raise AssertionError("the renderer never stood still")


def test_a_hook_that_folds_a_claim_first_still_answers_as_itself(session):
    from tests.support.helpers_hooks import run_hook as run

    session.start()
    delivery.enable(session.store, session.collab.id, session.collab.reviewer)
    session.send("r1")
    pid = _stopped_renderer(session)
    try:
        text, ran = session.hook()
        assert not ran and subjects(text) == ["r1"] and os.path.exists(session.base + ahead.TOOK)
        session.send("r2")  # a new request during the turn
        res = run("claude", "Stop", session.tmp, session.collab.root, REVIEWER_SESSION, extra_env=session.env,
                  stop_hook_active=False)
        assert json.loads(res.stdout)["decision"] == "block"  # the Stop's own format, after folding the claim
        res = run("claude", "SessionStart", session.tmp, session.collab.root, REVIEWER_SESSION,
                  extra_env=session.env, source="clear")
        assert json.loads(res.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    finally:
        os.kill(pid, signal.SIGKILL)


def test_a_takeover_while_the_renderer_reads_is_not_lost(session, store, collab):
    """The generation is read before the bindings: a join landing in between voids what is rendered."""
    from agentmsg.backends.file.store import FileStore
    from agentmsg.hooks.core import Hook

    session.start()
    reg = store.open(collab.driver, "driver", "second", "another", {"adapter": "hook"})
    eve = model.pin("codex:eeee0000-1111-4222-8333-944455556666")
    store.join(reg.collab, eve, "rev2")
    store.send(reg.collab, collab.driver, Draft(to="rev2", kind="request", priority="normal", subject="backlog",
                                                body="b"))
    store.mailbox.handover(reg.collab, eve, collab.reviewer)
    session.stop_renderer()
    Path(session.base + ahead.TOOK).unlink(missing_ok=True)
    hook = Hook.for_session(session.root, PIN, ahead.facts(session.root, PIN), FileStore(session.root))
    real = hook.store.bound

    def bound(pin: str):
        out = real(pin)  # the renderer has read the bindings: only the first collaboration
        store.join(reg.collab, collab.reviewer, "rev2", succeeds=eve, reason="handover")  # lands now
        return out

    hook.store.bound = bound  # type: ignore[method-assign]
    hook.render_ahead()
    text, _ran = session.hook()
    assert subjects(text) == ["backlog"]


def test_a_retry_after_the_delivery_was_printed_still_shows_it_again(session):
    session.start()
    mid = session.send("again")
    pid = _stopped_renderer(session)
    text, ran = session.hook()
    assert not ran and subjects(text) == ["again"]
    attempt = "3f0c5f8e-0c1a-4d55-9c6b-6c1d2a3b4c5d"  # an attempt interrupted elsewhere, retried now
    session.store.receipt(session.collab.id, "reviewer", {"type": "presented", "message": mid, "attempt": attempt,
                                                           "host": "claude", "hook": "UserPromptSubmit"})
    delivery.retry(session.store, session.collab.id, session.collab.reviewer, attempt, mid)
    os.kill(pid, signal.SIGCONT)
    session.settled()
    again, _ran = session.hook()
    assert subjects(again) == ["again"]


def test_a_full_doorbell_never_holds_the_launcher(session):
    """A renderer stopped (or wedged) with its doorbell full: the prompt is served at once, its ring leaves
    no process behind, and the renderer still folds the claim once it runs again."""
    session.start()
    session.send("first")
    pid = _stopped_renderer(session)
    fd = os.open(os.path.join(session.root, layout.IDLE, ahead.FIFO), os.O_WRONLY | os.O_NONBLOCK)
    try:
        try:
            while True:
                os.write(fd, b"x")
        except BlockingIOError:
            pass
        t0 = time.monotonic()
        text, ran = session.hook()
        assert not ran and subjects(text) == ["first"] and time.monotonic() - t0 < 5
        time.sleep(0.5)  # grace for anything the launcher left in the background
        assert session.strays() == []
    finally:
        os.close(fd)
        os.kill(pid, signal.SIGCONT)
    session.settled()  # the renderer drains its doorbell and folds the claim
    assert len([r for r in session.receipts() if r["type"] == "presented"]) == 1
    assert session.strays() == []


def test_a_mirrored_root_is_left_to_the_full_hook(session, tmp_path):
    from agentmsg.resident import mirror

    cli = tmp_path / "fake-cli"
    cli.write_text("#!/bin/sh\nexit 0\n")
    cli.chmod(0o755)
    session.env.update(AGENTMSG_CLI=str(cli), AGENTMSG_STORE="postgresql://example/agentmsg",
                       AGENTMSG_NO_MIRROR="")
    session.start()
    session.send("m0")
    time.sleep(0.5)
    assert not os.path.exists(session.base + ahead.READY)  # each prompt runs the hook, which keeps a mirror
    text, ran = session.hook()
    assert ran and subjects(text) == ["m0"]
    Path(session.base + ".stop").write_text(Path(session.base + ".gen").read_text())
    mirror._wake_all(session.root)  # the mirror's idle exit: every marker goes
    assert not os.path.exists(session.base + ".stop")
