"""``agentmsg spawn``, ``kill`` and ``resume`` with the REAL ``claude`` and ``codex`` TUIs, against stub models.

Each session is started by the CLI itself (as a subprocess): in a window of a tmux server the test owns and
runs "the user's" shell in (``--where tmux``, ``$TMUX`` pointing at it), or in agentmsg's own headless server
under the state root.  Readiness, delivery and kills are proved by the journals, the roster, the stub's
recorded requests and ``/proc``, never by sleeping.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.hosts.spawned import BOUNDARY, LEAD, World, alive, claude_world, codex_world, events, type_into
from tests.support.hosts.stubs import AnthropicStub, OpenAIResponsesStub
from tests.support.hosts.tui import wait_for

pytestmark = [pytest.mark.hosts, pytest.mark.tui]


def test_claude_spawned_in_tmux_gets_its_task_is_seen_killed_resumed_and_forked(tmp_path: Path) -> None:
    with AnthropicStub() as stub:
        world, args = claude_world(tmp_path, stub)
        world.user_tmux()
        world.ok("join", "--collab", world.cid, "--self", "codex:other", "--alias", "other")
        world.ok("join", "--collab", world.cid, "--self", "codex:spawner-thread", "--alias", "drv")
        try:  # a Codex session spawns Claude Code: its own host variable never reaches the child
            code, doc = world.cli("spawn", "claude", "--alias", "rev", "--collab", world.cid, "--task",
                                  "Review retry.py, TASK-BODY-1", "--timeout", "90s", *args,
                                  env={"CODEX_THREAD_ID": "spawner-thread"})
            assert code == 0, doc["error"]
            out = doc["result"]
            pin, pane = out["pin"], out["tmux"]["pane"]
            assert pin.startswith("claude-code:") and out["where"] == "tmux" and out["by"] == "codex:spawner-thread"
            assert out["tmux"]["socket"] == str(world.socket) and out["tmux"]["target"].startswith("user:")
            assert alive(out["pid"]) and out["task"]["ring"] == "rang"
            # bound by its own SessionStart hook, through the ticket: only its hash was recorded, and it is used
            joined = [e for e in events(world, "joined") if e["alias"] == "rev"]
            assert len(joined) == 1 and joined[0]["pin"] == pin and len(joined[0]["ticket"]) == 64
            assert world.ok("registry", "--collab", world.cid)["tickets"] == {}
            spawned = events(world, "spawned")
            assert [(e["target"], e["pin"], e["alias"], e["where"]) for e in spawned] == [("rev", pin, "drv", "tmux")]
            environ = Path(f"/proc/{out['pid']}/environ").read_bytes().split(b"\0")
            assert b"CODEX_THREAD_ID=spawner-thread" not in environ
            assert f"AGENTMSG_HOME={world.root}".encode() in environ
            # the task reached its model inside the boundary, at the prompt the doorbell line started
            wait_for(lambda: any("TASK-BODY-1" in r.text_blob() for r in stub.agent_requests()), 120, "the task")
            body = next(r.text_blob() for r in stub.agent_requests() if "TASK-BODY-1" in r.text_blob())
            assert body.index(BOUNDARY) < body.index("TASK-BODY-1")
            wait_for(lambda: world.roster()["rev"]["presence"]["state"] == "idle", 120, "rev idle")
            # a send reaches it at its next prompt
            world.ok("send", "--collab", world.cid, "--self", "codex:other", "--to", "rev", "--subject", "s",
                     "--body", "PEER-BODY-2")
            n = len(stub.agent_requests())
            type_into(world, world.socket, pane, "next prompt")
            wait_for(lambda: len(stub.agent_requests()) > n, 120, "the next prompt's request")
            wait_for(lambda: any("PEER-BODY-2" in r.text_blob() for r in stub.agent_requests()[n:]), 120, "mail")
            # kill: not for any member; for the spawner, verified, recorded; the alias stays, gone
            code, doc = world.cli("kill", "rev", "--collab", world.cid, "--self", "codex:other")
            assert code == 9 and alive(out["pid"]), doc
            killed = world.ok("kill", "rev", "--collab", world.cid, "--self", LEAD)
            assert killed["spawned"] is True and killed["pid"] == out["pid"] and not alive(out["pid"])
            windows = subprocess.run(["tmux", "-S", str(world.socket), "list-windows", "-F", "#{window_id}"],
                                     capture_output=True, text=True, check=True).stdout.split()
            assert out["tmux"]["window"] not in windows
            wait_for(lambda: world.roster()["rev"]["presence"]["state"] == "gone", 120, "rev gone")
            sent = world.ok("send", "--collab", world.cid, "--self", "codex:other", "--to", "rev", "--subject", "s",
                            "--body", "PEER-BODY-3")
            assert "ended" in sent["results"][0]["next"]
            # resume: the same session again, under the same alias; what was sent meanwhile reaches it
            back = world.ok("resume", "rev", "--collab", world.cid, "--self", LEAD, "--timeout", "90s", *args)
            assert back["pin"] == pin and back["how"] == "resume" and alive(back["pid"])
            assert world.roster()["rev"]["presence"]["state"] in ("idle", "working")
            wait_for(lambda: any("PEER-BODY-3" in r.text_blob() for r in stub.agent_requests()), 120, "PEER-BODY-3")
            # fork: a new session from rev's conversation, under a new alias and a new pin, bound by its ticket
            forked = world.ok("fork", "rev", "--alias", "rev2", "--collab", world.cid, "--self", LEAD,
                              "--timeout", "90s", *args)
            assert forked["how"] == "fork" and forked["pin"].startswith("claude-code:") and forked["pin"] != pin
            roster = world.roster()
            assert roster["rev2"]["pin"] == forked["pin"] and roster["rev"]["pin"] == pin
            for alias, started in (("rev", back), ("rev2", forked)):
                world.ok("kill", alias, "--collab", world.cid, "--self", LEAD)
                assert not alive(started["pid"])
            code, doc = world.cli("kill", "rev", "--collab", world.cid, "--self", LEAD)  # nothing runs now
            assert code == 3 and "nothing was signalled" in doc["error"]["message"]
        finally:
            world.close()


def test_codex_spawned_headless_into_an_invite_only_collaboration_is_ready_killed_and_resumed(tmp_path: Path) -> None:
    with OpenAIResponsesStub() as stub:
        world, args = codex_world(tmp_path, stub)
        world.ok("policy", "invite-only", "--collab", world.cid, "--self", LEAD)
        try:
            out = world.ok("spawn", "codex", "--alias", "impl", "--collab", world.cid, "--self", LEAD,
                           "--where", "headless", "--timeout", "90s", *args)
            assert out["pin"].startswith("codex:") and out["where"] == "headless"
            assert out["tmux"]["socket"] == str(world.root / "spawn" / "tmux.sock") and alive(out["pid"])
            wait_for(lambda: world.roster()["impl"]["presence"]["state"] == "idle", 120, "impl idle")
            world.ok("kill", "impl", "--collab", world.cid, "--self", LEAD)
            assert not alive(out["pid"])
            wait_for(lambda: world.roster()["impl"]["presence"]["state"] == "gone", 120, "impl gone")
            back = world.ok("resume", "impl", "--collab", world.cid, "--self", LEAD, "--where", "headless",
                            "--timeout", "90s", *args)  # codex resume THREAD: the same thread, the same pin
            assert back["pin"] == out["pin"] and alive(back["pid"])
            world.ok("kill", "impl", "--collab", world.cid, "--self", LEAD)
            assert not alive(back["pid"])
        finally:
            world.close()


def test_claude_spawned_headless_is_ready_and_killed(tmp_path: Path) -> None:
    with AnthropicStub() as stub:
        world, args = claude_world(tmp_path, stub)
        try:
            out = world.ok("spawn", "claude", "--alias", "rev", "--collab", world.cid, "--self", LEAD,
                           "--where", "headless", "--timeout", "90s", *args)
            assert out["where"] == "headless" and out["tmux"]["target"].startswith("rev:") and alive(out["pid"])
            assert world.roster()["rev"]["presence"]["state"] in ("idle", "working")
            world.ok("kill", "rev", "--collab", world.cid, "--self", LEAD)
            assert not alive(out["pid"])
            wait_for(lambda: world.roster()["rev"]["presence"]["state"] == "gone", 120, "rev gone")
        finally:
            world.close()


def _nothing_left(world: World, alias: str) -> None:
    """A failed spawn: no binding, no unused ticket, a spawn-failed event, no window left."""
    reg = world.ok("registry", "--collab", world.cid)
    assert alias not in reg["participants"] and reg["tickets"] == {}
    assert [e["target"] for e in events(world, "spawn-failed")] == [alias]
    assert not events(world, "spawned")


def test_a_spawn_that_cannot_start_fails_at_once_and_leaves_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    world = World(tmp_path, {"PATH": "/usr/bin:/bin"}, root)
    code, doc = world.cli("spawn", "claude", "--alias", "rev", "--collab", world.cid, "--self", LEAD,
                          "--where", "headless")
    assert code == 17 and "claude: not found on PATH" in doc["error"]["message"]
    reg = world.ok("registry", "--collab", world.cid)
    assert "rev" not in reg["participants"] and reg["tickets"] == {}
    code, doc = world.cli("spawn", "claude", "--alias", "rev", "--collab", world.cid, "--self", LEAD)
    assert code == 2 and "$TMUX is not set" in doc["error"]["message"]  # --where tmux outside tmux
    assert not events(world, "invited") and not events(world, "spawn-failed")


def test_a_codex_spawn_with_a_dead_model_server_fails_within_its_timeout(tmp_path: Path) -> None:
    with OpenAIResponsesStub() as stub:
        world, args = codex_world(tmp_path, stub)
    try:  # the stub is closed: nothing answers at its address
        code, doc = world.cli("spawn", "codex", "--alias", "impl", "--collab", world.cid, "--self", LEAD,
                              "--where", "headless", "--timeout", "10s", *args)
        assert code == 17, doc
        message = doc["error"]["message"]
        assert "within 10s" in message or "exited" in message, message
        _nothing_left(world, "impl")
        listed = subprocess.run(["tmux", "-S", str(world.root / "spawn" / "tmux.sock"), "list-sessions"],
                                capture_output=True, text=True, check=False)
        assert listed.returncode != 0 or "impl" not in listed.stdout
    finally:
        world.close()


def test_codex_without_trusted_hooks_never_binds_and_says_how(tmp_path: Path) -> None:
    with OpenAIResponsesStub() as stub:
        world, args = codex_world(tmp_path, stub)
        args = [a for a in args if a != "--dangerously-bypass-hook-trust"]
        try:
            code, doc = world.cli("spawn", "codex", "--alias", "impl", "--collab", world.cid, "--self", LEAD,
                                  "--where", "headless", "--timeout", "10s", *args)
            assert code == 17, doc
            assert "/hooks" in doc["error"]["message"] and "--dangerously-bypass-hook-trust" in doc["error"]["message"]
            _nothing_left(world, "impl")
        finally:
            world.close()
