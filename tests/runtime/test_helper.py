"""The resident helper: one process per state root that renders ahead, rings deferred wake-ups again and mirrors.

Correctness never depends on it: these tests kill it at random moments, or never start it, and compare what the
model sees with a root that never had one.  Processes are real (``hooks/run``, ``python -m agentmsg.resident.helper``,
``agentmsg sync``); the deferred-ring bookkeeping is checked in process against a ring that only records.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentmsg.backends.file import ahead, layout
from agentmsg.runtime import doorbell, retries
from tests.runtime.test_ahead import processes, renderers, stop_renderers, subjects, twin
from tests.support.cli_helpers import run_json

# ---- deferred rings: the requests the helper rings again ------------------------------------------------


class Rings:
    """A ring that records what it was asked and answers from a script."""

    def __init__(self, *answers: str) -> None:
        self.answers, self.asked = list(answers), []  # type: list[str], list[tuple[str, str]]

    def __call__(self, collab: str, alias: str) -> str:
        self.asked.append((collab, alias))
        return self.answers.pop(0) if self.answers else "rang"


def _root(tmp_path: Path) -> str:
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    return str(root)


def test_a_deferred_ring_is_rung_again_until_it_rings(tmp_path: Path) -> None:
    root = _root(tmp_path)
    retries.request(root, "c1", "bob", "/usr/bin:/bin")
    ring = Rings("deferred (tmux guard: the prompt line holds a draft)", "recipient busy", "rang")
    assert retries.tick(root, ring) and retries.tick(root, ring)
    assert retries.count(root) == 1
    assert not retries.tick(root, ring)  # it rang: the request is done
    assert ring.asked == [("c1", "bob")] * 3 and retries.count(root) == 0


@pytest.mark.parametrize("outcome", ["nothing unacknowledged", "wake off", "not rung (no tmux pane recorded)"])
def test_a_ring_that_may_no_longer_ring_is_dropped(tmp_path: Path, outcome: str) -> None:
    root = _root(tmp_path)
    retries.request(root, "c1", "bob", "")
    assert not retries.tick(root, Rings(outcome)) and retries.count(root) == 0


def test_a_request_expires_and_one_per_binding_merges(tmp_path: Path) -> None:
    root = _root(tmp_path)
    retries.request(root, "c1", "bob", "", now=1000.0)
    retries.request(root, "c1", "bob", "", now=1001.0)  # the second send's ring replaces the first
    retries.request(root, "c1", "carol", "", now=1000.0)
    assert retries.count(root) == 2
    ring = Rings()
    assert not retries.tick(root, ring, now=1000.0 + retries.RETRY_FOR + 0.5)  # carol's expired, bob's rang
    assert ring.asked == [("c1", "bob")]


def test_a_ring_that_raises_ends_its_request_and_the_path_is_the_senders(tmp_path: Path) -> None:
    root = _root(tmp_path)
    retries.request(root, "gone", "bob", "/opt/sender/bin")
    seen: list[str | None] = []

    def ring(collab: str, alias: str) -> str:
        seen.append(os.environ.get("PATH"))
        raise LookupError("no such collaboration")

    before = os.environ.get("PATH")
    assert not retries.tick(root, ring) and retries.count(root) == 0
    assert seen == ["/opt/sender/bin"] and os.environ.get("PATH") == before


def test_damaged_or_misfiled_requests_are_never_rung(tmp_path: Path) -> None:
    root = _root(tmp_path)
    retries.request(root, "c1", "bob", "")
    good = layout.retry_file(root, "c1", "bob")
    misfiled = layout.retry_file(root, "c1", "mallory")
    Path(misfiled).write_text(Path(good).read_text())  # bob's request under another binding's name
    damaged = layout.retry_file(root, "c1", "eve")
    Path(damaged).write_text("{not json")
    os.symlink(good, layout.retry_file(root, "c1", "trent"))
    ring = Rings()
    retries.tick(root, ring)
    assert ring.asked == [("c1", "bob")]  # the link, the damaged and the misfiled file: removed, never rung
    assert os.listdir(os.path.join(root, layout.WAKE)) == []


# ---- one process per root --------------------------------------------------------------------------------


def _helper(root: str, idle: str = "30") -> subprocess.Popen[bytes]:
    env = {"PATH": os.defpath, "AGENTMSG_AHEAD_IDLE": idle}
    return subprocess.Popen([sys.executable, "-m", "agentmsg.resident.helper", root], env=env,
                            cwd=str(Path(__file__).resolve().parents[2]))


def _until(check, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_waiting_ring_goes_to_the_running_helper_not_a_second_process(tmp_path: Path) -> None:
    root = _root(tmp_path)
    proc = _helper(root)
    try:
        _until(lambda: doorbell.duties(root) == {"render", "retry"})
        status = doorbell.status(root)
        assert status["running"] and f"(pid {proc.pid})" in str(status["line"]) and "rings deferred" in str(
            status["line"])
        retries.request(root, "no-such-collab", "bob", "")
        assert not doorbell.ensure_for_retries(root, {"PATH": os.defpath}, [sys.executable, "-m", "agentmsg"])
        _until(lambda: retries.count(root) == 0)  # rung once (it fails: no such collaboration) and dropped
        assert renderers(root, root) == [proc.pid]
    finally:
        proc.kill()
        proc.wait(timeout=20)


def test_a_waiting_ring_starts_a_helper_when_none_runs_and_it_exits_when_done(tmp_path: Path) -> None:
    root = _root(tmp_path)
    retries.request(root, "no-such-collab", "bob", "")
    env = {"PATH": os.defpath, "AGENTMSG_AHEAD_IDLE": "0.5", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    assert doorbell.ensure_for_retries(root, env, [sys.executable, "-m", "agentmsg"])
    _until(lambda: retries.count(root) == 0)
    _until(lambda: not doorbell.running(root) and not renderers(root, root))
    assert not os.path.exists(ahead.root_file(root, ahead.PID))


def test_sync_takes_the_root_over_from_a_helper_that_does_not_mirror(tmp_path: Path) -> None:
    remote, local = tmp_path / "remote", _root(tmp_path)
    proc = _helper(local)
    try:
        _until(lambda: doorbell.duties(local) == {"render", "retry"})
        env = {"AGENTMSG_STORE": f"file://{remote}", "AGENTMSG_NO_MIRROR": "1", "HOME": str(tmp_path)}
        code, doc, err = run_json("sync", "--once", root=local, env=env)
        assert code == 0, err
        assert doc["result"]["running"] == "done"
        assert proc.wait(timeout=20) == 0  # it left when asked
        code, doc, err = run_json("status", root=local, env=env)
        assert doc["result"]["mirror"]["replica_of"].startswith("file://")
    finally:
        proc.kill()
        proc.wait(timeout=20)


def test_the_launcher_started_helper_never_runs_on_a_replica_root(tmp_path: Path) -> None:
    root = _root(tmp_path)
    Path(root, layout.REPLICA).write_text(json.dumps({"store": "file:///elsewhere"}))
    proc = _helper(root)
    assert proc.wait(timeout=20) == 0 and not doorbell.running(root)  # the mirror is a replica's helper
    assert not doorbell.nudge(root, ["claude-code:s1"])


# ---- correctness never depends on it -----------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2])
def test_killed_at_any_moment_every_prompt_shows_what_a_root_without_one_shows(tmp_path, store, collab,
                                                                                seed: int) -> None:
    """Eight prompts, messages arriving between them; in one root the helper is SIGKILLed at random moments
    (rendering, folding a printed claim, idle), the other never renders ahead.  The model sees the same."""
    rnd = random.Random(seed)
    outputs = {}
    for mode in ("killed", "never"):
        s = twin(tmp_path, mode, collab, ahead=mode == "killed")
        try:
            s.start()
            seen = []
            for n in range(8):
                if n in (0, 2, 3, 6):
                    s.send(f"m{n}")
                if mode == "killed":
                    time.sleep(rnd.choice([0.0, 0.005, 0.02, 0.1]))
                    if rnd.random() < 0.6:
                        stop_renderers(s.root, s.collab.root)
                text, _ran = s.hook()
                seen.append(subjects(text))
                if mode == "killed" and rnd.random() < 0.5:
                    time.sleep(rnd.choice([0.0, 0.01, 0.05]))
                    stop_renderers(s.root, s.collab.root)  # perhaps while it folds the claim just printed
            outputs[mode] = seen
        finally:
            s.stop_renderer()
    assert outputs["killed"] == outputs["never"]
    assert not processes(str(tmp_path / "killed" / "state"), tmp_path / "killed" / "state")
