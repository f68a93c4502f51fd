"""End-to-end (issue 31, "Done when"): typed handoffs between a real Codex session (the orchestrator) and a
real Claude Code session (the specialist), both against the stub models, through the plugin's own
``agentmsg`` in each agent's shell (identity from the hosts' variables, no --self).

Codex's agent sends a ``task`` with two artifacts; Claude's next prompt shows it typed inside the boundary;
Claude's agent answers with a correlated ``result`` (DONE_WITH_CONCERNS, with evidence); Codex's next prompt
shows the result; the orchestrator's ``task show`` ties the result to its task and tells each artifact's
state after one is changed and one deleted.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.e2e.test_e2e_hosts import (  # noqa: F401  (base, export, claude_installed, codex_plugin: the fixtures)
    assert_untrusted,
    base,
    claude_installed,
    codex_plugin,
    export,
)
from tests.support.cli_helpers import run_json
from tests.support.hosts import product, stubs

pytestmark = pytest.mark.hosts

TASK = """task_id: T-1
task_text: |
  Make the parser accept tabs.
  Keep its public API.
acceptance_criteria: [tabs parse]
timeout_minutes: 30
"""
RESULT = """task_id: T-1
status: DONE_WITH_CONCERNS
evidence:
  gate_1_functional: 14 passed
  gate_4_regressions: 14
concerns: [tabs inside strings are untested]
"""


def _sent_id(host: product.Host, turn: product.Turn) -> str:
    (out,) = host.shell_outputs(turn.requests[1])
    doc = json.loads(out.strip().split("\n")[0])  # Claude adds a line after a `cd`: "Shell cwd was reset ..."
    assert doc["ok"], doc
    return str(doc["result"]["results"][0]["id"])


def test_a_task_and_its_result_between_codex_and_claude(tmp_path: Path, claude_installed: product.Host,  # noqa: F811
                                                        codex_plugin: product.Host) -> None:  # noqa: F811
    claude, codex = claude_installed, codex_plugin
    root = tmp_path / "state"
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    (repo / "src" / "parser.py").write_text("def parse(): ...\n")
    (repo / "SPEC.md").write_text("# spec\n")
    with claude.stub() as cstub, codex.stub() as ostub:
        cs = claude.begin(cstub, root=root)
        xs = codex.begin(ostub, root=root)
        collab = product.open_collab(root, tmp_path / "cli-home", opener=xs.pin, alias="orch")
        c = collab.id
        collab.join(cs.pin, "spec")

        # -- Codex's agent hands out the task, with two artifacts --------------------------------
        send_task = (f"cd {shlex.quote(str(repo))} && printf %s {shlex.quote(TASK)} | agentmsg send --collab {c} "
                     "--to spec --type task --payload-file - --attach src/parser.py --attach SPEC.md "
                     "--workflow-run-id run-1 --phase build --json")
        t1 = xs.turn(ostub, "turn one: hand out the task", [stubs.shell(send_task), stubs.text("task sent")],
                     root=root)
        assert t1.run.result == "task sent"
        task_id = _sent_id(codex, t1)

        # -- Claude's next prompt shows it typed; its agent answers with a correlated result -------
        send_result = (f"cd {shlex.quote(str(repo / 'src'))} && printf %s {shlex.quote(RESULT)} | agentmsg send "
                       f"--collab {c} --type result --payload-file - --correlation-id {task_id} --json")
        t2 = cs.turn(cstub, "turn two: do the task", [stubs.shell(send_result), stubs.text("result sent")],
                     root=root)
        assert t2.run.result == "result sent"
        block = product.parse_block(t2.contexts(0)["UserPromptSubmit"])
        assert_untrusted(block)
        (m,) = block.messages
        assert (m.id, m.sender, m.runtime, m.kind, m.subject) == (task_id, "orch", "codex", "request", "task T-1")
        assert m.handoff == (f"type task · task_id T-1 · timeout_minutes 30 · thread {task_id} · workflow run id "
                             "run-1 · phase build")
        assert "  task_text: |" in m.body and "    Keep its public API." in m.body
        assert "    - location: src/parser.py" in m.body and "      size: 17" in m.body
        # each artifact as the reader's checkout has it, in agentmsg's own line (Claude's session runs outside
        # the repository: it cannot tell, and says so)
        assert m.artifacts == "src/parser.py unverified · SPEC.md unverified"
        result_id = _sent_id(claude, t2)

        # -- Codex's next prompt shows the result, tied to its task --------------------------------
        t3 = xs.turn(ostub, "turn three: anything new?", [stubs.text("read it")], root=root)
        block = product.parse_block(t3.contexts(0)["UserPromptSubmit"])
        (m,) = block.messages
        assert (m.id, m.sender, m.runtime, m.kind) == (result_id, "spec", "claude-code", "update")
        assert m.handoff == (f"type result · task_id T-1 · status DONE_WITH_CONCERNS · correlation id {task_id} · "
                             f"thread {task_id}")
        assert m.reply_to == f"spec/{task_id}"  # the task as RECIPIENT/MESSAGE_ID
        assert "    gate_1_functional: 14 passed" in m.body

    # The orchestrator sees the result tied to its task, and each artifact's state in its checkout.
    (repo / "src" / "parser.py").write_text("def parse(tabs=True): ...\n")
    (repo / "SPEC.md").unlink()
    code, doc, err = run_json("task", "show", task_id, "--collab", c, "--self", xs.pin, root=root, cwd=repo,
                              env={"HOME": str(tmp_path / "cli-home")})
    assert code == 0, err
    task = doc["result"]["task"]
    assert [(a["location"], a["state"]) for a in task["artifacts"]] == [("src/parser.py", "changed"),
                                                                         ("SPEC.md", "missing")]
    (res,) = task["results"]
    assert (res["id"], res["from"], res["payload"]["status"]) == (result_id, "spec", "DONE_WITH_CONCERNS")
    assert res["payload"]["concerns"] == ["tabs inside strings are untested"]
    (rec,) = collab.journal("inbox/orch.jsonl")
    assert (rec["sender_pin"], rec["handoff"]["correlation_id"]) == (cs.pin, task_id)
