"""The post-tool edit hook (agentmsg/hooks/edited.py, ``hooks/run HOST edited``): collision notices."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from agentmsg.domain import collisions
from tests.support import gitrepos
from tests.support.cli_helpers import REPO_ROOT, clean_env, run

RUN = REPO_ROOT / "hooks" / "run"
ANN, BOB, EVE = "ann-session-1", "bob-1", "eve-1"


@pytest.fixture
def world(tmp_path: Path):
    root = tmp_path / "state"
    _code, out, _err = run("open", "--self", "human:carol", "--alias", "carol", "--label", "c", "--task", "t",
                           "--json", root=root)
    cid = json.loads(out)["result"]["collab"]
    for pin, alias in ((f"claude-code:{ANN}", "ann"), (f"codex:{BOB}", "bob")):
        assert run("join", "--collab", cid, "--self", pin, "--alias", alias, root=root).code == 0
    _code, out, _err = run("open", "--self", f"codex:{EVE}", "--alias", "eve", "--label", "other", "--task", "t",
                           "--json", root=root)
    repo = gitrepos.repo(tmp_path / "repo", files={"src/retry.py": "x\n", "src/other.py": "y\n"})
    return root, cid, repo


def hook(root: Path, host: str, data: dict[str, object], mode: str = "edited",
         env: dict[str, str] | None = None) -> dict[str, object] | None:
    done = subprocess.run(["/bin/sh", str(RUN), host, mode], input=json.dumps(data).encode(),
                          capture_output=True, env=clean_env(root, env), check=True, timeout=60)
    assert done.stderr == b""
    return json.loads(done.stdout) if done.stdout.strip() else None


def edit(repo: Path, session: str, name: str = "retry.py") -> dict[str, object]:
    return {"session_id": session, "cwd": str(repo), "hook_event_name": "PostToolUse", "tool_name": "Edit",
            "tool_input": {"file_path": str(repo / "src" / name), "old_string": "x", "new_string": "z"}}


def patch(repo: Path, session: str, name: str = "retry.py") -> dict[str, object]:
    text = f"*** Begin Patch\n*** Update File: src/{name}\n@@\n-x\n+z\n*** End Patch\n"
    return {"session_id": session, "cwd": str(repo), "hook_event_name": "PostToolUse", "tool_name": "apply_patch",
            "tool_input": {"command": text}}


def context(out: dict[str, object] | None) -> str:
    assert out is not None
    spec = out["hookSpecificOutput"]
    assert isinstance(spec, dict) and spec["hookEventName"] == "PostToolUse"
    return str(spec["additionalContext"])


def test_two_participants_editing_one_file_are_both_told_once(world) -> None:
    root, cid, repo = world
    assert hook(root, "codex", patch(repo, BOB)) is None  # the first edit: nobody to collide with
    text = context(hook(root, "claude", edit(repo, ANN)))
    lead, rest = text.split("\n", 1)
    assert lead.startswith("agentmsg (collision notice): another participant edited the same file")
    assert f"bob (codex:{BOB}), in collaboration {cid}" in rest and f"--collab {cid} --to bob" in rest
    assert "src/retry.py" not in lead and "src/retry.py" in rest.split("nonce", 1)[1]  # the path: in the boundary
    assert hook(root, "claude", edit(repo, ANN)) is None  # never again for the same pair and file in the window
    # bob's notice waits for bob's next prompt (its fast-path markers were voided), through the prompt hook
    prompt = {"session_id": BOB, "cwd": str(repo), "hook_event_name": "UserPromptSubmit", "prompt": "go"}
    shown = context_of_prompt(hook(root, "codex", prompt, mode="prompt"))
    assert f"ann (claude-code:{ANN}), in collaboration {cid}" in shown and "src/retry.py" in shown
    assert hook(root, "codex", prompt, mode="prompt") is None  # shown once
    assert hook(root, "codex", patch(repo, BOB)) is None  # and bob's next edit: the same pair and file, no more
    # the other way round, mid-turn: ann edits first, bob second; ann's next edit shows ann's notice at once
    assert hook(root, "claude", edit(repo, ANN, "other.py")) is None
    assert "ann (claude-code:" in context(hook(root, "codex", patch(repo, BOB, "other.py")))
    later = context(hook(root, "claude", edit(repo, ANN, "retry.py")))
    assert f"bob (codex:{BOB})" in later and "src/other.py" in later
    third = {**edit(repo, ANN), "tool_input": {"file_path": str(repo / "README"), "content": "x"}, "tool_name": "Write"}
    assert hook(root, "claude", third) is None  # another file: nobody else edited it


def context_of_prompt(out: dict[str, object] | None) -> str:
    assert out is not None
    spec = out["hookSpecificOutput"]
    assert isinstance(spec, dict) and spec["hookEventName"] == "UserPromptSubmit"
    return str(spec["additionalContext"])


def test_no_notice_for_a_claimed_file_a_stranger_or_a_shell_command(world) -> None:
    root, cid, repo = world
    assert hook(root, "codex", patch(repo, EVE)) is None
    assert hook(root, "claude", edit(repo, ANN)) is None  # eve shares no collaboration with ann
    assert run("claim", "src/other.py", "--shared", "--collab", cid, "--self", f"codex:{BOB}", root=root,
               cwd=repo).code == 0
    assert hook(root, "codex", patch(repo, BOB, "other.py")) is None
    assert hook(root, "claude", edit(repo, ANN, "other.py")) is None  # a claim covers it: no notice
    shell = {**edit(repo, ANN), "tool_name": "Bash", "tool_input": {"command": "echo z > src/third.py"}}
    assert hook(root, "codex", patch(repo, BOB, "third.py")) is None
    assert hook(root, "claude", shell) is None  # a shell command is not an edit here


def test_an_old_edit_does_not_collide() -> None:
    now = 1000.0
    mine = {"c1": "ann"}
    old = {"t": now - collisions.WINDOW - 1, "pin": "codex:bob-1", "alias": "bob", "collab": "c1"}
    fresh = dict(old, t=now - 1)
    assert collisions.due([old], pin="claude-code:a", mine=mine, now=now) == []
    assert collisions.due([old, fresh], pin="claude-code:a", mine=mine, now=now) == [fresh]
    noticed = {"t": now - 2, "pair": collisions.pair("claude-code:a", "codex:bob-1")}
    assert collisions.due([fresh, noticed], pin="claude-code:a", mine=mine, now=now) == []
    assert collisions.due([dict(fresh, alias="ann")], pin="claude-code:a", mine=mine, now=now) == []


def test_a_session_bound_to_nothing_starts_no_interpreter_once_marked(world, tmp_path: Path) -> None:
    root, _cid, repo = world
    marker = tmp_path / "python-started"
    fake = tmp_path / "fakepython"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\ncat >/dev/null\n")
    fake.chmod(0o755)
    stranger = "stranger-1"
    env = {"CLAUDE_CODE_SESSION_ID": stranger}
    past = time.time() - 60
    os.utime(root / "pins", (past, past))  # the last join was a while ago
    assert hook(root, "claude", edit(repo, stranger), env=env) is None  # the real hook: bound to nothing
    solo = root / "idle" / "claude-code" / f"{stranger}.solo"
    assert solo.is_file()
    assert hook(root, "claude", edit(repo, stranger), env={**env, "AGENTMSG_PYTHON": str(fake)}) is None
    assert not marker.exists()
    assert hook(root, "codex", edit(repo, stranger), env={"AGENTMSG_PYTHON": str(fake)}) is None
    assert marker.exists()  # codex's stranger has no marker yet: the hook runs
    marker.unlink()
    os.utime(root / "pins", None)  # a join since: the marker no longer holds
    hook(root, "claude", edit(repo, stranger), env={**env, "AGENTMSG_PYTHON": str(fake)})
    assert marker.exists()
    marker.unlink()
    empty = tmp_path / "empty-root"
    empty.mkdir()
    assert hook(empty, "claude", edit(repo, stranger), env={**env, "AGENTMSG_PYTHON": str(fake)}) is None
    assert not marker.exists()  # no pins/: nobody ever joined here
