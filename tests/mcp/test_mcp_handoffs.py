"""The MCP send tool's typed handoffs (issue 31): the same schema and rules as the CLI's send --type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client

from tests.mcp.test_mcp import BOB, call, cli, serve, team, text  # noqa: F401  (team: the fixture)
from tests.support.cli_helpers import run_json


def test_a_typed_send_over_mcp(team: tuple[Path, str], tmp_path: Path) -> None:  # noqa: F811
    root, cid = team
    got: dict[str, Any] = {}
    task = {"task_id": "T-1", "task_text": "review the lock", "acceptance_criteria": ["no deadlock"]}

    async def body(client: Client) -> None:
        got["bad"] = await call(client, "send", to="bob", subject="", type="task", payload={"task_text": "x"})
        got["enum"] = await call(client, "send", to="bob", subject="", type="status",
                                 payload={"state": "sleeping", "summary": "x"})
        got["task"] = await call(client, "send", to="bob", subject="", type="task", payload=task,
                                 workflow_run_id="run-2", phase="review")

    serve(root, body)
    assert got["bad"].is_error and text(got["bad"]).startswith("payload: task.task_id: required")
    assert got["bad"].structured_content["error"]["code"] == 2
    assert text(got["enum"]).startswith("payload: status.state: must be one of working")
    assert not got["task"].is_error, text(got["task"])
    task_id = got["task"].structured_content["results"][0]["id"]
    (msg,) = cli(root, BOB, "inbox", "--collab", cid)["messages"]
    assert msg["handoff"]["payload"] == task and msg["handoff"]["phase"] == "review"
    (tmp_path / "r.yaml").write_text("task_id: T-1\nstatus: NEEDS_CONTEXT\n")
    code, doc, err = run_json("send", "--collab", cid, "--self", BOB, "--type", "result", "--payload-file", "r.yaml",
                              "--reply-to", task_id, root=root, cwd=tmp_path)
    assert code == 0, err
    code, doc, err = run_json("task", "show", task_id, "--collab", cid, root=root)
    assert [r["payload"]["status"] for r in doc["result"]["task"]["results"]] == ["NEEDS_CONTEXT"]
