"""One exchange around all five hosts, live (issue 9, "Done when"): Codex -> Claude Code -> Gemini CLI ->
GitHub Copilot CLI -> OpenCode -> Codex.

Every host is the real CLI against its own stub, all five share one state
root, and every agent acts as its own session (no ``--self``: each host's
session variable).  At each hop the recorded request body of the receiving
host's first model call quotes exactly the message the previous host's agent
sent, inside the boundary and attributed to its alias and runtime; the
receiving agent then runs ``agentmsg ack`` for it and ``agentmsg send`` to the
next host.  Presented is never acknowledged: only the agents' acks are.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.e2e.test_e2e_hosts import _cli_json, assert_untrusted, log_lines
from tests.e2e.test_e2e_opencode import LAUNCHER, OpenCode, prompt_block
from tests.support.hosts import product, stubs

pytestmark = pytest.mark.hosts

RING = ("cdx", "cld", "gem", "cop", "opc")  # aliases, in the order the message travels
RUNTIMES = {"cdx": "codex", "cld": "claude-code", "gem": "gemini", "cop": "copilot", "opc": "opencode"}


def hop_commands(cli: str, c: str, ack: str | None, to: str, n: int) -> list[str]:
    """An agent's commands for one hop: ack what it got (if anything), then send hop ``n`` to ``to``."""
    send = (f"{cli} send --collab {c} --to {to} --kind request --subject {shlex.quote(f'Ring hop {n}')} "
            f"--body {shlex.quote(f'Hop {n} of the ring: acknowledge it, then pass it on to the next host.')} --json")
    return ([f"{cli} ack --collab {c} --message {ack} --json"] if ack else []) + ([send] if to else [])


def test_one_exchange_around_all_five_hosts(tmp_path: Path) -> None:
    root = tmp_path / "state"
    export = product.export_plugin(tmp_path / "agentmsg-checkout")
    codex = product.Host("codex", "user-hooks", tmp_path / "codex")
    claude = product.Host("claude", "plugin-dir", tmp_path / "claude")
    gemini = product.Host("gemini", "extension", tmp_path / "gemini", export=export)
    copilot = product.Host("copilot", "plugin-dir", tmp_path / "copilot")
    opencode = OpenCode(tmp_path / "opencode", root)
    with codex.stub() as xstub, claude.stub() as cstub, gemini.stub() as gstub, copilot.stub() as pstub, \
            stubs.ChatCompletionsStub() as ostub:
        sessions = {"cdx": codex.begin(xstub, root=root), "cld": claude.begin(cstub, root=root),
                    "gem": gemini.begin(gstub, root=root), "cop": copilot.begin(pstub, root=root)}
        run, _ = opencode.turn(ostub, "start", [stubs.text("started")])
        pins = {alias: s.pin for alias, s in sessions.items()} | {"opc": f"opencode:{run.session_id}"}
        collab = product.open_collab(root, tmp_path / "cli-home")
        c = collab.id
        for alias in RING:
            collab.join(pins[alias], alias)

        hosts = {"cdx": (codex, xstub), "cld": (claude, cstub), "gem": (gemini, gstub), "cop": (copilot, pstub)}
        sent: list[str] = []  # message id of hop n at index n - 1
        for n, alias in enumerate((*RING, "cdx"), start=1):
            to = RING[n % len(RING)] if n <= len(RING) else ""
            prev = RING[(n - 2) % len(RING)]
            ack = sent[-1] if sent else None
            if alias == "opc":
                cmds = hop_commands(str(LAUNCHER), c, ack, to, n)
                run, reqs = opencode.turn(ostub, "ring", [*(stubs.shell(x) for x in cmds), stubs.text("passed on")],
                                          session=run.session_id)
                assert run.result == "passed on"
                block = prompt_block(reqs[0])
                outs = [json.loads(m["content"]) for m in reqs[-1].body["messages"] if m.get("role") == "tool"]
                docs = outs[-len(cmds):]
            else:
                host, stub = hosts[alias]
                cmds = [f"command -v agentmsg && {x}" for x in hop_commands("agentmsg", c, ack, to, n)]
                t = sessions[alias].turn(stub, f"ring hop {n}", [*(stubs.shell(x) for x in cmds),
                                                                  stubs.text("passed on")], root=root)
                assert t.run.result == "passed on" and len(t.requests) == len(cmds) + 1
                block = product.parse_block(t.contexts(0)["UserPromptSubmit"]) if ack else None
                docs = [_cli_json(host, o) for o in host.shell_outputs(t.requests[-1])[-len(cmds):]]
            assert all(d["ok"] for d in docs), docs
            if ack:  # the previous hop, quoted inside the boundary, attributed to its sender
                assert block is not None
                assert_untrusted(block)
                (m,) = block.messages
                assert (m.id, m.sender, m.runtime, m.kind, m.subject) == (
                    ack, prev, RUNTIMES[prev], "request", f"Ring hop {n - 1}")
            if to:
                (res,) = docs[-1]["result"]["results"]
                assert (res["to"], res["state"]) == (to, "stored+notified")
                sent.append(res["id"])

    assert len(sent) == 5
    for n, mid in enumerate(sent, start=1):
        sender, receiver = RING[n - 1], RING[n % len(RING)]
        (rec,) = collab.journal(f"inbox/{receiver}.jsonl")
        assert (rec["id"], rec["sender_pin"]) == (mid, pins[sender])
        acks = [(r["message"], r["by"]) for r in collab.journal(f"receipts/{receiver}.jsonl") if r["type"] == "ack"]
        assert acks == [(mid, pins[receiver])], (receiver, acks)
        presented = [r for r in collab.journal(f"receipts/{receiver}.jsonl") if r["type"] == "presented"]
        assert [r["message"] for r in presented] == [mid]
    assert log_lines(root) == []
