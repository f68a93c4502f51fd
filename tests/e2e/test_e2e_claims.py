"""End-to-end: claims refused before the tool runs, in the REAL Claude Code and Codex (issue 28, docs/CLAIMS.md).

Session B (a person's stand-in pin, through the CLI) holds ``src/retry.py`` exclusively; session A's model (the
loopback stub) calls its edit tool on it, then a shell write.  The file stays as it was, and A's next model
request carries the refusal naming B and the expiry.  After B releases, the same calls go through.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import gitrepos
from tests.support.cli_helpers import run, run_json
from tests.support.hosts import harness, product, stubs

pytestmark = pytest.mark.hosts

BOB = "codex:bob-1"
ORIGINAL = "def retry():\n    pass\n"
REFUSED = "src/retry.py is claimed exclusively by bob (codex:bob-1) until 20"
TOLD = "agentmsg: 1 exclusive claim held by other participants of this session's collaborations"


def cli(root: Path, *args: str, cwd: Path | None = None) -> dict[str, Any]:
    code, doc, err = run_json(*args, root=root, cwd=cwd)
    assert code == 0, (args, doc, err)
    return doc["result"]


def setup_world(host: product.Host, root: Path) -> tuple[str, Path]:
    cid = cli(root, "open", "--self", "human:carol", "--alias", "carol", "--label", "claims", "--task", "t")["collab"]
    cli(root, "join", "--collab", cid, "--self", BOB, "--alias", "bob")
    repo = gitrepos.repo(host.cwd)
    cli(root, "claim", "src/retry.py", "--reason", "fixing retries", "--collab", cid, "--self", BOB, cwd=repo)
    return cid, repo / "src" / "retry.py"


def release(root: Path, cid: str, repo: Path) -> None:
    assert run("release", "src/retry.py", "--collab", cid, "--self", BOB, root=root, cwd=repo).code == 0


def test_claude_code_edit_and_shell_write_are_refused_until_the_claim_is_released(tmp_path: Path) -> None:
    host = product.Host("claude", "plugin-dir", tmp_path / "claude")
    root = tmp_path / "state"
    cid, target = setup_world(host, root)
    tools = ("Bash", "Read", "Edit")
    read = stubs.tool("Read", {"file_path": str(target)})
    edit = stubs.tool("Edit", {"file_path": str(target), "old_string": "pass", "new_string": "return 1"})
    with host.stub() as stub:
        s = host.begin(stub, root=root)
        cli(root, "join", "--collab", cid, "--self", s.pin, "--alias", "ann")
        t = s.turn(stub, "fix retry", [read, edit, stubs.shell("echo x > src/retry.py"), stubs.text("done")],
                   root=root, tools=tools)
        assert target.read_text() == ORIGINAL
        first = t.requests[0].text_blob()  # told before it edits: SessionStart names the claims held by others
        assert first.count(TOLD) == 1 and "held by bob (codex:bob-1) in this session's repository until 20" in first
        assert "fixing retries" in first.split("held by bob", 1)[1]
        assert t.requests[-1].text_blob().count(TOLD) == 1  # once: not again at each tool call
        after_edit, after_shell = t.requests[2].text_blob(), t.requests[3].text_blob()
        assert REFUSED in after_edit and f"agentmsg send --collab {cid} --to bob" in after_edit
        assert "fixing retries" in after_edit  # the holder's reason, inside the boundary
        assert after_shell.count(REFUSED) > after_edit.count(REFUSED)  # the shell write was refused too
        release(root, cid, host.cwd)
        s.turn(stub, "again", [read, edit, stubs.text("edited")], root=root, tools=tools)
        assert target.read_text() == "def retry():\n    return 1\n"
        s.turn(stub, "and the shell", [stubs.shell("echo x > src/retry.py"), stubs.text("written")], root=root)
        assert target.read_text() == "x\n"


@pytest.fixture
def codex_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> product.Host:
    # A model whose metadata offers the freeform apply_patch tool (the stub's own name offers none).
    monkeypatch.setattr(harness, "CODEX_MODEL", "gpt-5.5")
    return product.Host("codex", "plugin", tmp_path / "codex", export=product.export_plugin(tmp_path / "checkout"))


def test_codex_apply_patch_and_shell_write_are_refused_until_the_claim_is_released(codex_host, tmp_path) -> None:
    host, root = codex_host, tmp_path / "state"
    cid, target = setup_world(host, root)
    patch = stubs.custom("apply_patch", "*** Begin Patch\n*** Update File: src/retry.py\n@@\n def retry():\n"
                                        "-    pass\n+    return 1\n*** End Patch\n")
    with host.stub() as stub:
        s = host.begin(stub, root=root)
        cli(root, "join", "--collab", cid, "--self", s.pin, "--alias", "ann")
        t = s.turn(stub, "fix retry", [patch, stubs.shell("echo x > src/retry.py"), stubs.text("done")], root=root)
        assert target.read_text() == ORIGINAL
        # told before it edits: Codex's SessionStart came before the join, so the prompt after it names the claim
        assert TOLD in t.requests[0].text_blob() and "held by bob (codex:bob-1) in this session's repository" in (
            t.requests[0].text_blob())
        after_patch, after_shell = t.requests[1].text_blob(), t.requests[2].text_blob()
        assert REFUSED in after_patch and f"agentmsg send --collab {cid} --to bob" in after_patch
        assert after_shell.count(REFUSED) > after_patch.count(REFUSED)
        release(root, cid, host.cwd)
        s.turn(stub, "again", [patch, stubs.text("patched")], root=root)
        assert target.read_text() == "def retry():\n    return 1\n"
        s.turn(stub, "and the shell", [stubs.shell("echo x > src/retry.py"), stubs.text("written")], root=root)
        assert target.read_text() == "x\n"


def test_gemini_cli_write_and_shell_write_are_refused_until_the_claim_is_released(tmp_path: Path) -> None:
    host = product.Host("gemini", "extension", tmp_path / "gemini", export=product.export_plugin(tmp_path / "checkout"))
    root = tmp_path / "state"
    cid, target = setup_world(host, root)
    write = stubs.tool("write_file", {"file_path": str(target), "content": "def retry():\n    return 1\n"})
    with host.stub() as stub:
        s = host.begin(stub, root=root)
        cli(root, "join", "--collab", cid, "--self", s.pin, "--alias", "ann")
        t = s.turn(stub, "fix retry", [write, stubs.shell("echo x > src/retry.py"), stubs.text("done")], root=root)
        assert target.read_text() == ORIGINAL
        after_write, after_shell = t.requests[1].text_blob(), t.requests[2].text_blob()
        assert REFUSED in after_write and f"agentmsg send --collab {cid} --to bob" in after_write
        assert after_shell.count(REFUSED) > after_write.count(REFUSED)
        release(root, cid, host.cwd)
        s.turn(stub, "again", [write, stubs.text("written")], root=root)
        assert target.read_text() == "def retry():\n    return 1\n"


def test_copilot_cli_edit_and_shell_write_are_refused_until_the_claim_is_released(tmp_path: Path) -> None:
    host = product.Host("copilot", "plugin-dir", tmp_path / "copilot")
    root = tmp_path / "state"
    cid, target = setup_world(host, root)
    edit = stubs.tool("edit", {"path": str(target), "old_str": "pass", "new_str": "return 1"})
    with host.stub() as stub:
        s = host.begin(stub, root=root)
        cli(root, "join", "--collab", cid, "--self", s.pin, "--alias", "ann")
        t = s.turn(stub, "fix retry", [edit, stubs.shell("echo x > src/retry.py"), stubs.text("done")], root=root)
        assert target.read_text() == ORIGINAL
        after_edit, after_shell = t.requests[1].text_blob(), t.requests[2].text_blob()
        assert REFUSED in after_edit and f"agentmsg send --collab {cid} --to bob" in after_edit
        assert after_shell.count(REFUSED) > after_edit.count(REFUSED)
        release(root, cid, host.cwd)
        s.turn(stub, "again", [edit, stubs.text("edited")], root=root)
        assert target.read_text() == "def retry():\n    return 1\n"


def test_codex_user_level_hooks_refuse_a_shell_write(tmp_path: Path) -> None:
    """``agentmsg install codex`` (user-level hooks, no plugin) registers PreToolUse too."""
    host = product.Host("codex", "user-hooks", tmp_path / "codex")
    root = tmp_path / "state"
    cid, target = setup_world(host, root)
    with host.stub() as stub:
        s = host.begin(stub, root=root)
        cli(root, "join", "--collab", cid, "--self", s.pin, "--alias", "ann")
        t = s.turn(stub, "fix retry", [stubs.shell("echo x > src/retry.py"), stubs.text("done")], root=root)
        assert target.read_text() == ORIGINAL
        assert REFUSED in t.requests[1].text_blob()
