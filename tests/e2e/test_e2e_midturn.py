"""End-to-end: mid-turn (PostToolUse) delivery on the REAL Claude Code CLI (issue 15).

A long scripted turn of many Bash tool calls (``sleep 1`` each) runs against
the Anthropic stub; a peer sends while the turn is under way (the stub's
script sends, then asks for the next tool call).  The proof is the recorded
model requests: Claude Code puts PostToolUse context in a system message
``PostToolUse:<tool> hook additional context: <text>`` (docs/HOSTS-NOTES.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_helpers import run_json
from tests.support.hosts import product, stubs

pytestmark = pytest.mark.hosts

CAROL = "human:carol"
PREFIX = "PostToolUse:Bash hook additional context: "
STEPS = 6


def cli(root: Path, *args: str) -> dict[str, Any]:
    """This checkout's CLI (cli_helpers puts it first on PYTHONPATH), as carol or a session via --self."""
    code, doc, err = run_json(*args, root=root)
    assert code == 0, (args, doc, err)
    return doc["result"]


def mid_turn_contexts(body: Mapping[str, Any]) -> list[str]:
    """Every PostToolUse additionalContext in one request body, in order."""
    out = []
    for m in body["messages"]:
        if m["role"] != "system":
            continue
        content = m["content"]
        texts = [content] if isinstance(content, str) else [b.get("text", "") for b in content]
        out += [t[len(PREFIX):] for t in texts if t.startswith(PREFIX)]
    return out


def long_turn(send_halfway: Callable[[], None]) -> list[stubs.Reply | Callable[[Any], stubs.Reply]]:
    """STEPS tool calls of ``sleep 1``; the peer sends while the third request is answered; then done."""
    def third(_rec: Any) -> stubs.Reply:
        send_halfway()
        return stubs.shell("sleep 1")

    steps: list[stubs.Reply | Callable[[Any], stubs.Reply]] = [stubs.shell("sleep 1") for _ in range(STEPS)]
    steps[1] = stubs.shell("head -c 300000 /dev/zero | tr '\\0' x")  # big output, stdin the fast path never reads
    steps[2] = third
    return [*steps, stubs.text("turn done")]


@pytest.fixture
def setup(tmp_path: Path):
    host = product.Host("claude", "plugin-dir", tmp_path / "claude")
    root = tmp_path / "state"
    cid = cli(root, "open", "--self", CAROL, "--alias", "carol", "--label", "midturn",
              "--task", "mid-turn delivery on the real host")["collab"]
    return host, root, cid


def send(root: Path, cid: str, subject: str, priority: str) -> str:
    doc = cli(root, "send", "--collab", cid, "--self", CAROL, "--to", "worker", "--kind", "request",
              "--priority", priority, "--subject", subject, "--body", f"{subject}: details")
    (res,) = doc["results"]
    return str(res["id"])


def test_a_high_priority_message_reaches_a_long_turn_before_it_ends(setup):
    host, root, cid = setup
    sent: dict[str, str] = {}

    def halfway() -> None:
        sent["high"] = send(root, cid, "URGENT: stop the deploy", "high")
        sent["normal"] = send(root, cid, "when you can: update the changelog", "normal")

    with host.stub() as stub:
        s = host.begin(stub, root=root)
        cli(root, "join", "--collab", cid, "--self", s.pin, "--alias", "worker")
        cli(root, "delivery", "midturn", "on", "--min-gap", "0", "--collab", cid, "--self", s.pin)
        t = s.turn(stub, "a long job", long_turn(halfway), root=root)
        assert t.run.result == "turn done"
        per_request = [mid_turn_contexts(r.body) for r in t.requests]
        # Nothing before the send; from the tool call after it on, exactly one injection, kept in the history.
        assert per_request[:3] == [[], [], []]
        assert "x" * 1000 in t.requests[2].text_blob()  # the big output went through (the fast path left stdin unread)
        first = per_request[3]
        assert len(first) == 1 and all(p == first for p in per_request[3:])
        assert len(t.requests) == STEPS + 1  # ... and the turn went on: it arrived before the turn ended
        block = product.parse_block(first[0])
        assert block.lead[0].startswith("agentmsg (mid-turn delivery, between tool calls): 1 peer message")
        assert [(m.id, m.subject, m.priority) for m in block.messages] == [
            (sent["high"], "URGENT: stop the deploy", "high")]
        assert "update the changelog" not in t.requests[-1].text_blob()  # normal priority waits
        assert [sent["high"]] in host_presented(root, cid)  # presented, by PostToolUse ...
        acked = [r for r in product.Collab(cid, root, root).journal("receipts/worker.jsonl") if r["type"] == "ack"]
        assert acked == []  # ... never acknowledged

        t2 = s.turn(stub, "next prompt", [stubs.text("ok")], root=root)
        prompt_ctx = t2.contexts(0)["UserPromptSubmit"]
        assert "when you can: update the changelog" in prompt_ctx and "URGENT" not in prompt_ctx


def test_with_mid_turn_delivery_off_nothing_arrives_mid_turn(setup):
    host, root, cid = setup
    sent: dict[str, str] = {}

    def halfway() -> None:
        sent["high"] = send(root, cid, "URGENT: but mid-turn is off", "high")

    with host.stub() as stub:
        s = host.begin(stub, root=root)
        cli(root, "join", "--collab", cid, "--self", s.pin, "--alias", "worker")
        t = s.turn(stub, "a long job", long_turn(halfway), root=root)
        assert all(mid_turn_contexts(r.body) == [] for r in t.requests)
        assert all("URGENT" not in r.text_blob() for r in t.requests)
        t2 = s.turn(stub, "next prompt", [stubs.text("ok")], root=root)
        assert "URGENT: but mid-turn is off" in t2.contexts(0)["UserPromptSubmit"]


def host_presented(root: Path, cid: str) -> list[list[str]]:
    """Message ids per presented attempt made by a PostToolUse hook."""
    out: dict[str, list[str]] = {}
    for r in product.Collab(cid, root, root).journal("receipts/worker.jsonl"):
        if r["type"] == "presented" and r.get("hook") == "PostToolUse":
            out.setdefault(r["attempt"], []).append(r["message"])
    return list(out.values())


# ---- Codex (0.169.0): PostToolUse from the plugin's hooks file, the session id read from stdin -------

MID_LEAD = "agentmsg (mid-turn delivery, between tool calls): "


def codex_mid_turn_contexts(body: Mapping[str, Any]) -> list[str]:
    """Every mid-turn block in one Responses request body, in order (Codex puts hook context in developer items)."""
    out = []
    for item in body["input"]:
        if isinstance(item, dict) and item.get("type") == "message" and item.get("role") == "developer":
            out += [c.get("text", "") for c in item["content"] if MID_LEAD in c.get("text", "")]
    return out


@pytest.fixture
def codex_setup(tmp_path: Path):
    host = product.Host("codex", "plugin", tmp_path / "codex", export=product.export_plugin(tmp_path / "checkout"))
    root = tmp_path / "state"
    cid = cli(root, "open", "--self", CAROL, "--alias", "carol", "--label", "midturn",
              "--task", "mid-turn delivery on the real host")["collab"]
    return host, root, cid


def test_codex_a_high_priority_message_reaches_a_long_turn_before_it_ends(codex_setup):
    host, root, cid = codex_setup
    sent: dict[str, str] = {}

    def halfway() -> None:
        marker = f"{root}/idle/codex/{s.id}"
        same = Path(f"{marker}.mid").exists() and Path(f"{marker}.mid").read_text() == Path(f"{marker}.gen").read_text()
        sent["marker_set_before_send"] = "yes" if same else "no"
        sent["high"] = send(root, cid, "URGENT: stop the deploy", "high")
        sent["normal"] = send(root, cid, "when you can: update the changelog", "normal")

    with host.stub() as stub:
        s = host.begin(stub, root=root)
        cli(root, "join", "--collab", cid, "--self", s.pin, "--alias", "worker")
        cli(root, "delivery", "midturn", "on", "--min-gap", "0", "--collab", cid, "--self", s.pin)
        t = s.turn(stub, "a long job", long_turn(halfway), root=root)
        assert t.run.result == "turn done", t.run.stderr[-2000:]
        per_request = [codex_mid_turn_contexts(r.body) for r in t.requests]
        assert per_request[:3] == [[], [], []]
        assert "x" * 1000 in t.requests[2].text_blob()  # the big output went through
        first = per_request[3]
        assert len(first) == 1 and all(p == first for p in per_request[3:])
        assert len(t.requests) == STEPS + 1  # it arrived before the turn ended
        block = product.parse_block(first[0])
        assert block.lead[0].startswith(MID_LEAD + "1 peer message")
        assert [(m.id, m.subject, m.priority) for m in block.messages] == [
            (sent["high"], "URGENT: stop the deploy", "high")]
        assert "update the changelog" not in t.requests[-1].text_blob()  # normal priority waits
        assert [sent["high"]] in host_presented(root, cid)
        acked = [r for r in product.Collab(cid, root, root).journal("receipts/worker.jsonl") if r["type"] == "ack"]
        assert acked == []
        # Before the send, the tool calls had nothing due: the launcher's .mid marker, keyed by stdin's id, was set.
        assert sent["marker_set_before_send"] == "yes"
