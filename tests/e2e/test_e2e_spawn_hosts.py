"""``agentmsg spawn``, ``kill``, ``resume`` and ``fork`` with the REAL Gemini CLI, Copilot CLI, OpenCode and Codex
TUIs in tmux, against stub models (Claude Code, and headless Codex: tests/e2e/test_e2e_spawn.py).

One flow per host, in the order docs/LIFECYCLE.md gives: spawn returns after the session's own hooks bound the
pin with the ticket and its first turn ended; the roster shows it idle; a send reaches its model at its next
prompt, inside the boundary; kill closes the window and the roster shows it gone; a send to it says the session
ended; resume brings the same session (the same pin) back under the alias and what was sent meanwhile reaches
its model; fork starts a new pin from its conversation, or, where the host cannot fork, is refused with exit 19
and nothing written.  Each test has its own state root and its own tmux servers (sockets under its tmp folder),
so this file runs in parallel with the others.  Everything is waited on (journals, roster, the stub's recorded
requests, ``/proc``), never slept on.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.hosts.harness import NODE_BIN
from tests.support.hosts.spawned import (
    BOUNDARY,
    LEAD,
    World,
    alive,
    codex_world,
    copilot_world,
    events,
    gemini_world,
    opencode_world,
    type_into,
)
from tests.support.hosts.stubs import ChatCompletionsStub, GeminiStub, OpenAIResponsesStub
from tests.support.hosts.tui import wait_for

pytestmark = [pytest.mark.hosts, pytest.mark.tui]

WORLDS: dict[str, tuple[Callable[[Path, Any], tuple[World, list[str]]], Callable[[], Any]]] = {
    "gemini": (gemini_world, GeminiStub),
    "copilot": (copilot_world, ChatCompletionsStub),
    "opencode": (opencode_world, ChatCompletionsStub),
    "codex": (codex_world, OpenAIResponsesStub),
}


def _windows(world: World) -> list[str]:
    return subprocess.run(["tmux", "-S", str(world.socket), "list-windows", "-a", "-F", "#{window_id}"],
                          capture_output=True, text=True, check=True).stdout.split()


def _seen(stub: Any, text: str, since: int = 0) -> bool:
    return any(text in r.text_blob() for r in stub.agent_requests()[since:])


def _refused(world: World, command: list[str], args: list[str]) -> None:
    """A host that cannot do this: one line, exit 19, nothing started or written."""
    before = len(events(world, "invited")), len(events(world, "spawned"))
    code, doc = world.cli(*command, "--collab", world.cid, "--self", LEAD, *args)
    assert code == 19 and doc["error"]["message"].startswith("host cannot: "), doc
    assert (len(events(world, "invited")), len(events(world, "spawned"))) == before


def _live(world: World, pane: str, wait: Callable[[], object]) -> None:
    """A wait while the spawned session runs; its failure says why the session may have stopped (its pane's
    state and last lines, the hook log)."""
    try:
        wait()
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{world.post_mortem(pane)}") from None


def _lifecycle(world: World, stub: Any, host: str, args: list[str], *, forks: bool, resumes: bool = True) -> None:
    """spawn, idle, a send at the next prompt, kill, gone, a send to the gone session, resume, fork."""
    cid = world.cid
    world.user_tmux()
    socket = world.socket
    assert socket is not None
    world.ok("join", "--collab", cid, "--self", "codex:other", "--alias", "other")
    out = world.ok("spawn", host, "--alias", "w", "--collab", cid, "--self", LEAD, "--timeout", "90s", *args)
    pin, pane = out["pin"], out["tmux"]["pane"]
    assert pin.startswith(f"{host}:") and out["where"] == "tmux" and out["how"] == "spawn" and alive(out["pid"])
    assert out["tmux"]["socket"] == str(world.socket) and out["tmux"]["window"] in _windows(world)
    assert _hosts_in(world.tmp / "proj")  # what a failed spawn must not leave (below) is seen while one runs
    # bound by its own hooks with the ticket (only its hash recorded, and now used), and its first turn answered
    joined = [e for e in events(world, "joined") if e["alias"] == "w"]
    assert [(e["pin"], len(e["ticket"])) for e in joined] == [(pin, 64)]
    assert world.ok("registry", "--collab", cid)["tickets"] == {}
    _live(world, pane, lambda: wait_for(lambda: world.roster()["w"]["presence"]["state"] == "idle", 120, "w idle"))
    # a send reaches its model at its next prompt, inside the boundary, sender named
    world.ok("send", "--collab", cid, "--self", "codex:other", "--to", "w", "--subject", "s", "--body", "PEER-BODY-2")
    n = len(stub.agent_requests())
    _live(world, pane, lambda: type_into(world, socket, pane, "next prompt"))
    _live(world, pane, lambda: wait_for(lambda: _seen(stub, "PEER-BODY-2", n), 120, "the send at the next prompt"))
    body = next(r.text_blob() for r in stub.agent_requests()[n:] if "PEER-BODY-2" in r.text_blob())
    assert body.index(BOUNDARY) < body.index("PEER-BODY-2")
    # kill: the window closes, the process ends, the alias stays, gone
    killed = world.ok("kill", "w", "--collab", cid, "--self", LEAD)
    assert killed["spawned"] is True and killed["pid"] == out["pid"] and not alive(out["pid"])
    assert out["tmux"]["window"] not in _windows(world)
    wait_for(lambda: not _hosts_in(world.tmp / "proj"), 120, "no host process left")
    wait_for(lambda: world.roster()["w"]["presence"]["state"] == "gone", 120, "w gone")
    sent = world.ok("send", "--collab", cid, "--self", "codex:other", "--to", "w", "--subject", "s",
                    "--body", "PEER-BODY-3")
    assert sent["results"][0]["presence"]["state"] == "gone" and "session ended" in sent["results"][0]["next"]
    if not resumes:
        _refused(world, ["resume", "w"], args)
        _refused(world, ["fork", "w", "--alias", "w2"], args)
        assert "w2" not in world.roster() and world.roster()["w"]["presence"]["state"] == "gone"
        return
    # resume: the same session (the same pin) under the same alias; what was sent meanwhile reaches its model
    n = len(stub.agent_requests())
    back = world.ok("resume", "w", "--collab", cid, "--self", LEAD, "--timeout", "90s", *args)
    assert (back["pin"], back["how"], back["succeeded"]) == (pin, "resume", None) and alive(back["pid"])
    assert world.roster()["w"]["presence"]["state"] in ("idle", "working")
    wait_for(lambda: _seen(stub, "PEER-BODY-3", n), 120, "the send made while it was gone")
    started = [back]
    if forks:  # a new session from w's conversation: a new pin, bound to the new alias by its own ticket
        forked = world.ok("fork", "w", "--alias", "w2", "--collab", cid, "--self", LEAD, "--timeout", "90s", *args)
        assert forked["how"] == "fork" and forked["pin"].startswith(f"{host}:") and forked["pin"] != pin
        roster = world.roster()
        assert (roster["w2"]["pin"], roster["w"]["pin"]) == (forked["pin"], pin)
        started.append(forked)
    else:
        _refused(world, ["fork", "w", "--alias", "w2"], args)
        assert "w2" not in world.roster()
    for s in started:
        world.ok("kill", "w2" if s["how"] == "fork" else "w", "--collab", cid, "--self", LEAD)
        assert not alive(s["pid"])


def _html(world: World) -> str:
    page = world.tmp / "log.html"
    world.ok("log", "render", "--html", "--out", str(page), "--collab", world.cid)
    return page.read_text()


def test_gemini_spawned_in_tmux_is_seen_killed_and_resumed_and_cannot_fork(tmp_path: Path) -> None:
    with GeminiStub() as stub:
        world, args = gemini_world(tmp_path, stub)
        try:
            _lifecycle(world, stub, "gemini", args, forks=False)
            # the HTML log shows the spawn, the kill and the resume (escaped like all text there)
            page = _html(world)
            assert "lead started w (gemini, spawn; tmux user:" in page
            assert "w&#x27;s session was stopped by human:lead" in page
            assert "lead started w (gemini, resume; tmux user:" in page
        finally:
            world.close()


def test_copilot_spawned_in_tmux_is_seen_killed_and_resumed_and_cannot_fork(tmp_path: Path) -> None:
    with ChatCompletionsStub() as stub:
        world, args = copilot_world(tmp_path, stub)
        try:
            _lifecycle(world, stub, "copilot", args, forks=False)
            # the HTML log shows the spawn, the kill and the resume (escaped like all text there)
            page = _html(world)
            assert "lead started w (copilot, spawn; tmux user:" in page
            assert "w&#x27;s session was stopped by human:lead" in page
            assert "lead started w (copilot, resume; tmux user:" in page
        finally:
            world.close()


def test_opencode_spawned_in_tmux_is_seen_and_killed_and_cannot_resume_or_fork(tmp_path: Path) -> None:
    with ChatCompletionsStub() as stub:
        world, args = opencode_world(tmp_path, stub)
        try:
            _lifecycle(world, stub, "opencode", args, forks=False, resumes=False)
        finally:
            world.close()


def test_codex_spawned_in_tmux_is_seen_killed_resumed_and_forked(tmp_path: Path) -> None:
    with OpenAIResponsesStub() as stub:
        world, args = codex_world(tmp_path, stub)
        try:
            _lifecycle(world, stub, "codex", args, forks=True)
        finally:
            world.close()


def _hosts_in(folder: Path) -> list[str]:
    """The programs of live processes whose working directory is ``folder``: the spawned host and what it started,
    but not agentmsg's own detached per-root helpers (Python, a shell), which the session's hooks may have started
    and which end on their own once idle (agentmsg/resident/helper.py)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or Path(proc / "cwd").resolve() != folder.resolve():
                continue
            exe = Path(proc / "exe").resolve().name
            if alive(int(proc.name)) and not exe.startswith(("python", "sh", "dash", "bash")):
                found.append(exe)
        except OSError:
            continue
    return found


def _nothing_left(world: World, alias: str, *, tried: bool) -> None:
    """A failed spawn: no binding, no unused ticket, no process, and (once a session was started) one spawn-failed
    event."""
    wait_for(lambda: not _hosts_in(world.tmp / "proj"), 120, "no host process left in the session's folder")
    reg = world.ok("registry", "--collab", world.cid)
    assert alias not in reg["participants"] and reg["tickets"] == {}
    assert [e["target"] for e in events(world, "spawn-failed")] == ([alias] if tried else [])
    assert not events(world, "spawned")
    listed = subprocess.run(["tmux", "-S", str(world.root / "spawn" / "tmux.sock"), "list-sessions"],
                            capture_output=True, text=True, check=False)
    assert listed.returncode != 0 or f"{alias}:" not in listed.stdout


@pytest.mark.parametrize("host", ["gemini", "copilot", "opencode"])
def test_a_spawn_whose_program_is_missing_fails_at_once_and_leaves_nothing(tmp_path: Path, host: str) -> None:
    make, stub_class = WORLDS[host]
    with stub_class() as stub:
        world, args = make(tmp_path, stub)
    world.env["PATH"] = world.env["PATH"].replace(str(NODE_BIN), str(tmp_path / "no-such-dir"))
    code, doc = world.cli("spawn", host, "--alias", "w", "--collab", world.cid, "--self", LEAD, "--where",
                          "headless", *args)
    assert code == 17 and f"{host}: not found on PATH" in doc["error"]["message"], doc
    _nothing_left(world, "w", tried=False)
    assert not events(world, "invited")


@pytest.mark.parametrize("host", ["gemini", "copilot", "opencode"])
def test_a_spawn_with_a_dead_model_server_fails_within_its_timeout_and_leaves_nothing(tmp_path: Path,
                                                                                      host: str) -> None:
    make, stub_class = WORLDS[host]
    with stub_class() as stub:
        world, args = make(tmp_path, stub)
    try:  # the stub is closed: nothing answers at its address
        code, doc = world.cli("spawn", host, "--alias", "w", "--collab", world.cid, "--self", LEAD, "--where",
                              "headless", "--timeout", "10s", *args)
        assert code == 17, doc
        message = doc["error"]["message"]
        assert "within 10s" in message or "exited" in message, message
        _nothing_left(world, "w", tried=True)
        assert "spawn of w failed" in _html(world)
    finally:
        world.close()
