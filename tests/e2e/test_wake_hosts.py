"""Wake-ups of idle interactive sessions (issue 11), with the REAL ``claude`` and ``codex`` TUIs in tmux.

Each test starts one host at its prompt in a private tmux server against a
stub model (``tests/support/hosts/tui.py``), plays the peer with the CLI, and proves
a wake by the stub's recorded requests: a new model request whose body holds
the peer's message inside the boundary.  Refusals are proved by the absence
of a request and by the screen.  Each test owns its tmux server, stub, state
root and homes, so they can run in parallel with anything (marker ``tui``).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from tests.support.hosts.harness import REPO_ROOT
from tests.support.hosts.stubs import AnthropicStub, OpenAIResponsesStub, shell
from tests.support.hosts.tui import (
    Tui,
    agentmsg,
    claude_tui,
    codex_tui,
    forget_pane,
    forget_socket,
    plugin_without_waiter,
    wait_for,
)

pytestmark = [pytest.mark.hosts, pytest.mark.tui]

BOUNDARY = "agentmsg peer data · begin"


def _bound(root: Path, pin: str, alias: str = "reviewer") -> str:
    """A collaboration opened by the peer ``driver`` (codex:peer) that ``pin`` joined as ``alias``."""
    cid = agentmsg(root, "open", "--self", "codex:peer", "--alias", "driver", "--label", "l", "--task", "t")["collab"]
    agentmsg(root, "join", "--collab", cid, "--self", pin, "--alias", alias)
    return cid


def _send(root: Path, cid: str, body: str, to: str = "reviewer") -> dict:
    out = agentmsg(root, "send", "--collab", cid, "--self", "codex:peer", "--to", to, "--subject", "verdict",
                   "--body", body)
    return out["results"][0]["wake"]


def _turn(tui: Tui, stub: AnthropicStub, text: str) -> None:
    """A human prompt, answered: the turn ends, the Stop hook re-arms the waiter."""
    n = len(stub.agent_requests())
    tui.type(text)
    wait_for(lambda: len(stub.agent_requests()) > n, 30, "the human turn", tui)
    time.sleep(1.5)  # the Stop hooks run and the waiter takes its lock


@pytest.fixture
def claude(tmp_path: Path, request: pytest.FixtureRequest):
    root = tmp_path / "root"
    sid = str(uuid.uuid4())
    pin = f"claude-code:{sid}"
    cid = _bound(root, pin)  # the state root exists before the session starts: SessionStart records its facts
    with AnthropicStub() as stub:
        tui = claude_tui(tmp_path, stub, root=root, session=sid, allow_bash=getattr(request, "param", True))
        try:
            yield tui, stub, root, cid, pin
        finally:
            tui.close()


def test_claude_wake_on_starts_a_turn_with_the_message_inside_the_boundary(claude) -> None:
    tui, stub, root, cid, pin = claude
    on = agentmsg(root, "wake", "on", "--collab", cid, "--self", pin)
    assert on["status"] == "active" and on["facts"]["host"] == "claude"
    assert on["facts"]["pane"] == "%0" and on["facts"]["pid"] == tui.pid()  # recorded at SessionStart
    _turn(tui, stub, "hello")
    n = len(stub.agent_requests())
    assert _send(root, cid, "PEER-BODY-1") == {"outcome": "rang", "mechanism": "claude-waiter"}
    wait_for(lambda: len(stub.agent_requests()) > n, 20, "the woken turn", tui)
    body = stub.agent_requests()[-1].text_blob()
    assert BOUNDARY in body and "PEER-BODY-1" in body
    assert body.index(BOUNDARY) < body.index("PEER-BODY-1")
    status = agentmsg(root, "wake", "status", "--collab", cid, "--self", pin)["wake"]
    assert status["consecutive"] == 1 and status["last_ring"]["outcome"] == "rang"
    inspect = agentmsg(root, "delivery", "inspect", "--collab", cid, "--self", pin)
    assert inspect["wake"]["status"] == "active"


def test_claude_wake_off_nothing_happens(claude) -> None:
    tui, stub, root, cid, pin = claude
    _turn(tui, stub, "hello")
    n = len(stub.agent_requests())
    assert _send(root, cid, "PEER-BODY-2") == {"outcome": "wake off", "mechanism": None}
    agentmsg(root, "wake", "on", "--collab", cid, "--self", pin)
    agentmsg(root, "wake", "off", "--collab", cid, "--self", pin)
    assert _send(root, cid, "PEER-BODY-3")["outcome"] == "wake off (off)"
    time.sleep(4)
    assert len(stub.agent_requests()) == n


def test_claude_draft_survives_the_native_wake(claude) -> None:
    tui, stub, root, cid, pin = claude
    agentmsg(root, "wake", "on", "--collab", cid, "--self", pin)
    _turn(tui, stub, "hello")
    tui.type("half-typed draft", enter=False)
    wait_for(lambda: "half-typed draft" in tui.screen(), 10, "the draft on screen", tui)
    n = len(stub.agent_requests())
    assert _send(root, cid, "PEER-BODY-4")["outcome"] == "rang"
    wait_for(lambda: len(stub.agent_requests()) > n, 20, "the woken turn", tui)
    assert "PEER-BODY-4" in stub.agent_requests()[-1].text_blob()
    assert "half-typed draft" not in stub.agent_requests()[-1].text_blob()
    time.sleep(1.5)
    prompt_line = [ln for ln in tui.screen().splitlines() if ln.startswith("❯")][-1]
    assert "half-typed draft" in prompt_line


@pytest.mark.parametrize("claude", [False], indirect=True)  # Bash not pre-allowed: it asks
def test_claude_permission_dialog_is_never_answered(claude) -> None:
    tui, stub, root, cid, pin = claude
    agentmsg(root, "wake", "on", "--collab", cid, "--self", pin)
    stub.push(shell("rm -rf ./scratch-dir-for-the-dialog"))  # not allowed without asking: a dialog opens
    tui.type("clean up")
    wait_for(lambda: "Do you want to" in tui.screen(), 30, "the permission dialog", tui)
    n = len(stub.agent_requests())
    assert _send(root, cid, "PEER-BODY-5")["outcome"].startswith("recipient busy")
    time.sleep(4)
    assert "Do you want to" in tui.screen()  # still asking: no Enter, no answer
    assert len(stub.agent_requests()) == n


def test_two_agents_waking_each_other_stop_at_the_cap(claude) -> None:
    tui, stub, root, cid, pin = claude
    agentmsg(root, "wake", "on", "--collab", cid, "--self", pin)
    _turn(tui, stub, "hello")
    outcomes = []
    for i in range(10):  # the peer answers every woken turn at once: only the cap ends it
        n = len(stub.agent_requests())
        time.sleep(2.1)  # the minimum gap between rings
        wake = _send(root, cid, f"PEER-BODY-LOOP-{i}")
        outcomes.append(wake["outcome"])
        if wake["outcome"] != "rang":
            break
        wait_for(lambda n=n: len(stub.agent_requests()) > n, 20, f"woken turn {i + 1}", tui)
        time.sleep(1.5)  # its Stop re-arms the waiter
    assert outcomes[:8] == ["rang"] * 8
    assert outcomes[8].startswith("capped (8 consecutive wakes")
    n = len(stub.agent_requests())
    time.sleep(3)
    assert len(stub.agent_requests()) == n
    _turn(tui, stub, "a human speaks")  # a human prompt resets the count
    assert _send(root, cid, "PEER-BODY-AFTER")["outcome"] == "rang"


# ---- Codex -------------------------------------------------------------------------------------------


def _codex_pin(root: Path) -> str:
    """The interactive Codex session's pin, from the facts its SessionStart hook recorded (first prompt)."""
    import json

    (facts,) = [json.loads(p.read_text()) for p in (root / "wake").glob("*.json")]
    return str(facts["pin"])


@pytest.fixture
def codex(tmp_path: Path):
    root = tmp_path / "root"
    root.mkdir(mode=0o700)  # a state root exists: the session's hooks record its facts
    with OpenAIResponsesStub() as stub:
        tui = codex_tui(tmp_path, stub, root=root)
        try:
            n = len(stub.agent_requests())
            tui.type("hello")  # Codex fires SessionStart at the first prompt
            wait_for(lambda: len(stub.agent_requests()) > n, 30, "the first turn", tui)
            wait_for(lambda: list((root / "wake").glob("*.json")), 10, "the session facts", tui)
            pin = _codex_pin(root)
            cid = _bound(root, pin)
            yield tui, stub, root, cid, pin
        finally:
            tui.close()


def test_codex_idle_in_its_pane_is_rung_by_tmux_with_the_message_inside_the_boundary(codex) -> None:
    """An idle Codex with an empty prompt: guarded tmux pastes the doorbell (its own queue would take up to 10 s).
    Five unacknowledged messages make the longest doorbell (typed key by key, such a line lost its Enter to a
    newline in 5 of 12 tries; bench/wake_bench.py checks every ring)."""
    tui, stub, root, cid, pin = codex
    for i in range(4):
        assert _send(root, cid, f"EARLIER-{i}")["outcome"] == "wake off"
    on = agentmsg(root, "wake", "on", "--collab", cid, "--self", pin)
    assert on["facts"]["thread"] == pin.split(":", 1)[1] and on["facts"]["pane"] == "%0"
    wait_for(lambda: _turn_state(root, pin) == "idle", 10, "the first turn's Stop hook", tui)  # busy: its queue
    n = len(stub.agent_requests())
    assert _send(root, cid, "PEER-BODY-C1") == {"outcome": "rang", "mechanism": "tmux"}
    wait_for(lambda: len(stub.agent_requests()) > n, 30, "the woken turn", tui)
    body = stub.agent_requests()[-1].text_blob()
    assert BOUNDARY in body and "PEER-BODY-C1" in body and body.index(BOUNDARY) < body.index("PEER-BODY-C1")
    assert "5 new messages for reviewer" in body
    wait_for(lambda: "agentmsg:" not in _prompt_line(tui), 10, "the composer emptied", tui)
    status = agentmsg(root, "wake", "status", "--collab", cid, "--self", pin)["wake"]
    assert status["consecutive"] == 1 and not status["pending"]  # the typed line was seen as a doorbell


def test_codex_outside_tmux_is_rung_by_its_queue(codex) -> None:
    tui, stub, root, cid, pin = codex
    forget_pane(root, pin)  # the consent is given as by a session outside tmux
    on = agentmsg(root, "wake", "on", "--collab", cid, "--self", pin)
    assert "pane" not in on["facts"]
    n = len(stub.agent_requests())
    assert _send(root, cid, "PEER-BODY-C4") == {"outcome": "rang", "mechanism": "codex-queue"}
    wait_for(lambda: len(stub.agent_requests()) > n, 30, "the queued turn", tui)  # Codex checks every 10 s
    body = stub.agent_requests()[-1].text_blob()
    assert BOUNDARY in body and "PEER-BODY-C4" in body


def _turn_state(root: Path, pin: str) -> object:
    """``busy`` or ``idle``, as the session's prompt and Stop hooks recorded it."""
    from agentmsg.runtime import facts

    return facts.load(str(root), pin).get("turn")


def _prompt_line(tui: Tui) -> str:
    return [ln for ln in tui.screen().splitlines() if ln.startswith("›")][-1]


def test_codex_wake_off_nothing_happens_and_the_draft_survives(codex) -> None:
    tui, stub, root, cid, pin = codex
    n = len(stub.agent_requests())
    assert _send(root, cid, "PEER-BODY-C2")["outcome"] == "wake off"
    agentmsg(root, "wake", "on", "--collab", cid, "--self", pin)
    tui.type("half-typed draft", enter=False)
    time.sleep(5)
    assert len(stub.agent_requests()) == n
    assert _send(root, cid, "PEER-BODY-C3") == {"outcome": "rang", "mechanism": "codex-queue"}  # not typed into
    wait_for(lambda: len(stub.agent_requests()) > n, 30, "the woken turn", tui)
    assert "PEER-BODY-C3" in stub.agent_requests()[-1].text_blob()
    assert "half-typed draft" not in stub.agent_requests()[-1].text_blob()
    time.sleep(1.5)
    assert "half-typed draft" in _prompt_line(tui)


def test_claude_peer_socket_wakes_when_no_waiter_is_armed_and_keeps_the_draft(tmp_path: Path) -> None:
    root = tmp_path / "root"
    sid = str(uuid.uuid4())
    pin = f"claude-code:{sid}"
    cid = _bound(root, pin)
    with AnthropicStub() as stub:
        tui = claude_tui(tmp_path, stub, root=root, session=sid, plugin_dir=plugin_without_waiter(tmp_path))
        try:
            on = agentmsg(root, "wake", "on", "--collab", cid, "--self", pin)
            assert on["facts"]["peer_protocol"] == 1 and on["facts"]["claude_version"] == "2.1.328"
            _turn(tui, stub, "hello")
            tui.type("half-typed draft", enter=False)
            n = len(stub.agent_requests())
            assert _send(root, cid, "PEER-BODY-S1") == {"outcome": "rang", "mechanism": "claude-socket"}
            wait_for(lambda: len(stub.agent_requests()) > n, 20, "the woken turn", tui)
            body = stub.agent_requests()[-1].text_blob()
            assert BOUNDARY in body and "PEER-BODY-S1" in body and body.index(BOUNDARY) < body.index("PEER-BODY-S1")
            time.sleep(1.5)
            assert "half-typed draft" in [ln for ln in tui.screen().splitlines() if ln.startswith("❯")][-1]
            status = agentmsg(root, "wake", "status", "--collab", cid, "--self", pin)["wake"]
            assert status["consecutive"] == 1 and not status["pending"]  # its prompt was seen as a doorbell
        finally:
            tui.close()


def test_claude_over_tmux_defers_while_a_draft_is_there_and_rings_once_it_is_gone(tmp_path: Path) -> None:
    """No waiter, no socket: guarded tmux.  A draft defers the ring (never typed into, never cleared)."""
    root = tmp_path / "root"
    sid = str(uuid.uuid4())
    pin = f"claude-code:{sid}"
    cid = _bound(root, pin)
    with AnthropicStub() as stub:
        tui = claude_tui(tmp_path, stub, root=root, session=sid, plugin_dir=plugin_without_waiter(tmp_path))
        try:
            forget_socket(root, pin)
            agentmsg(root, "wake", "on", "--collab", cid, "--self", pin)
            _turn(tui, stub, "hello")
            tui.type("half-typed draft", enter=False)
            time.sleep(0.5)
            n = len(stub.agent_requests())
            wake = _send(root, cid, "PEER-BODY-T1")
            assert wake == {"outcome": "deferred (tmux guard: the prompt line holds a draft)", "mechanism": "tmux"}
            time.sleep(3)  # the retrier keeps deferring
            assert len(stub.agent_requests()) == n
            prompt_line = [ln for ln in tui.screen().splitlines() if ln.startswith("❯")][-1]
            assert prompt_line.split() == ["❯", "half-typed", "draft"]
            tui.tmux("send-keys", "-t", tui.pane, "C-u")  # the person clears the draft
            wait_for(lambda: len(stub.agent_requests()) > n, 20, "the woken turn", tui)
            body = stub.agent_requests()[-1].text_blob()
            assert BOUNDARY in body and "PEER-BODY-T1" in body and body.index(BOUNDARY) < body.index("PEER-BODY-T1")
        finally:
            tui.close()


def test_claude_print_mode_with_wake_on_still_exits(tmp_path: Path) -> None:
    """`claude -p` waits for its async hooks: the waiter must not hold one open there."""
    from tests.support.hosts.harness import run_claude

    root = tmp_path / "root"
    sid = str(uuid.uuid4())
    pin = f"claude-code:{sid}"
    cid = _bound(root, pin)
    agentmsg(root, "wake", "on", "--collab", cid, "--self", pin)
    with AnthropicStub() as stub:
        for _ in range(2):  # the second run resumes: SessionStart and Stop both start a waiter under the consent
            run = run_claude("hi", cwd=tmp_path / "proj", home=tmp_path / "home", stub=stub, plugin_dir=REPO_ROOT,
                             env_extra={"AGENTMSG_HOME": str(root)}, timeout=45,
                             **({"session_id": sid} if _ == 0 else {"resume": sid}))
            assert run.returncode == 0 and run.result == "ok"
