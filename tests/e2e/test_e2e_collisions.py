"""End-to-end: collision notices reach the REAL Claude Code's model (issue 28, docs/CLAIMS.md).

Session ann is Claude Code against the loopback stub; bob is a Codex session whose hooks are run as Codex runs
them (``hooks/run codex edited`` after its ``apply_patch``, ``hooks/run codex`` at its prompt).  Neither holds a
claim.  bob edits ``src/retry.py``; ann's model then edits it: ann's next model request (mid-turn, after the Edit)
holds a notice naming bob and the file, once.  ann edits ``src/other.py``, then bob does: bob's hook names ann at
once, and ann's next turn's first request holds ann's notice.  The window is widened so that no host's speed can
decide the outcome (``AGENTMSG_COLLISION_WINDOW``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import gitrepos
from tests.support.cli_helpers import REPO_ROOT, clean_env, run_json
from tests.support.hosts import product, stubs

pytestmark = pytest.mark.hosts

BOB_SID = "bob-1"
WINDOW = {"AGENTMSG_COLLISION_WINDOW": "3600"}
NOTICE = "agentmsg (collision notice)"


def cli(root: Path, *args: str) -> dict[str, Any]:
    code, doc, err = run_json(*args, root=root)
    assert code == 0, (args, doc, err)
    return doc["result"]


def bob(root: Path, repo: Path, event: str, name: str = "retry.py") -> str:
    """bob's Codex hook for ``event``, run as Codex runs it; its additionalContext ("" when silent)."""
    data: dict[str, Any] = {"session_id": BOB_SID, "cwd": str(repo), "hook_event_name": event}
    if event == "PostToolUse":
        patch = f"*** Begin Patch\n*** Update File: src/{name}\n@@\n-x\n+z\n*** End Patch\n"
        data.update(tool_name="apply_patch", tool_input={"command": patch})
    else:
        data["prompt"] = "next"
    mode = ["edited"] if event == "PostToolUse" else []
    done = subprocess.run(["/bin/sh", str(REPO_ROOT / "hooks" / "run"), "codex", *mode],
                          input=json.dumps(data).encode(), capture_output=True, env=clean_env(root, WINDOW),
                          check=True, timeout=60)
    return str(json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]) if done.stdout.strip() else ""


def test_claude_code_and_a_peer_are_told_when_both_edit_one_unclaimed_file(tmp_path: Path) -> None:
    host = product.Host("claude", "plugin-dir", tmp_path / "claude")
    root = tmp_path / "state"
    cid = cli(root, "open", "--self", "human:carol", "--alias", "carol", "--label", "c", "--task", "t")["collab"]
    cli(root, "join", "--collab", cid, "--self", f"codex:{BOB_SID}", "--alias", "bob")
    repo = gitrepos.repo(host.cwd, files={"src/retry.py": "def retry():\n    pass\n", "src/other.py": "x = 1\n"})
    retry, other = repo / "src" / "retry.py", repo / "src" / "other.py"
    tools = ("Bash", "Read", "Edit")

    def edit(path: Path, old: str, new: str) -> stubs.Reply:
        return stubs.tool("Edit", {"file_path": str(path), "old_string": old, "new_string": new})

    with host.stub() as stub:
        s = host.begin(stub, root=root)
        cli(root, "join", "--collab", cid, "--self", s.pin, "--alias", "ann")
        assert bob(root, repo, "PostToolUse") == ""  # bob edits first: nobody to collide with yet
        replies = [stubs.tool("Read", {"file_path": str(retry)}), edit(retry, "pass", "return 1"),
                   edit(retry, "return 1", "return 2"), stubs.tool("Read", {"file_path": str(other)}),
                   edit(other, "1", "2"), stubs.text("done")]
        t = s.turn(stub, "fix retry", replies, root=root, tools=tools, env=WINDOW)
        assert retry.read_text() == "def retry():\n    return 2\n" and other.read_text() == "x = 2\n"
        after_edit, after_second = t.requests[2].text_blob(), t.requests[3].text_blob()
        assert NOTICE in after_edit and f"bob (codex:{BOB_SID}), in collaboration {cid}" in after_edit
        assert "src/retry.py" in after_edit.split(NOTICE, 1)[1]
        assert after_second.count(NOTICE) == after_edit.count(NOTICE)  # the same pair and file: not again
        assert t.requests[-1].text_blob().count(NOTICE) == after_edit.count(NOTICE)  # other.py: bob never touched it
        # bob's notice about retry.py waited for bob's next prompt
        waiting = bob(root, repo, "UserPromptSubmit")
        assert NOTICE in waiting and f"ann ({s.pin})" in waiting and "src/retry.py" in waiting
        # now bob edits other.py after ann: bob is told at once, ann at its next prompt
        told = bob(root, repo, "PostToolUse", "other.py")
        assert f"ann ({s.pin})" in told and "src/other.py" in told
        t2 = s.turn(stub, "anything new?", [stubs.text("noted")], root=root, tools=tools, env=WINDOW)
        first = t2.requests[0].text_blob()
        notice = first.rsplit(NOTICE, 1)[1]
        assert f"bob (codex:{BOB_SID})" in notice and "src/other.py" in notice
        assert "peer data · begin" in notice  # the path is quoted inside the untrusted boundary


def test_codex_apply_patch_after_a_peers_edit_brings_a_notice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Codex's PostToolUse group matched to ``apply_patch`` runs the edit hook; the notice is in the next request.
    The peer here is a Claude Code session whose hook is run as Claude Code runs it."""
    from tests.support.hosts import harness

    monkeypatch.setattr(harness, "CODEX_MODEL", "gpt-5.5")  # a model whose metadata offers apply_patch
    host = product.Host("codex", "plugin", tmp_path / "codex", export=product.export_plugin(tmp_path / "checkout"))
    root = tmp_path / "state"
    cid = cli(root, "open", "--self", "human:carol", "--alias", "carol", "--label", "c", "--task", "t")["collab"]
    peer = "claude-code:bob-2"
    cli(root, "join", "--collab", cid, "--self", peer, "--alias", "bob")
    repo = gitrepos.repo(host.cwd)
    edit = {"session_id": "bob-2", "cwd": str(repo), "hook_event_name": "PostToolUse", "tool_name": "Edit",
            "tool_input": {"file_path": str(repo / "src" / "retry.py"), "old_string": "a", "new_string": "b"}}
    done = subprocess.run(["/bin/sh", str(REPO_ROOT / "hooks" / "run"), "claude", "edited"],
                          input=json.dumps(edit).encode(), capture_output=True, check=True, timeout=60,
                          env=clean_env(root, {**WINDOW, "CLAUDE_CODE_SESSION_ID": "bob-2"}))
    assert done.stdout == b""
    patch = stubs.custom("apply_patch", "*** Begin Patch\n*** Update File: src/retry.py\n@@\n def retry():\n"
                                        "-    pass\n+    return 1\n*** End Patch\n")
    with host.stub() as stub:
        s = host.begin(stub, root=root)
        cli(root, "join", "--collab", cid, "--self", s.pin, "--alias", "ann")
        t = s.turn(stub, "fix retry", [stubs.shell("ls"), patch, stubs.text("done")], root=root, env=WINDOW)
        assert (repo / "src" / "retry.py").read_text() == "def retry():\n    return 1\n"
        after_shell, after_patch = t.requests[1].text_blob(), t.requests[2].text_blob()
        assert NOTICE not in after_shell  # a shell command is not an edit
        assert NOTICE in after_patch and f"bob ({peer}), in collaboration {cid}" in after_patch
        assert "src/retry.py" in after_patch.split(NOTICE, 1)[1]
