"""agentmsg guard: real git commits and pushes through the installed hooks (docs/CLAIMS.md, "The git guard")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import gitrepos
from tests.support.cli_helpers import clean_env, run

ANN, BOB = "ann-1", "bob-1"


@pytest.fixture
def world(tmp_path: Path):
    root = tmp_path / "state"
    out = run("open", "--self", "human:carol", "--alias", "carol", "--label", "g", "--task", "t", "--json",
              root=root).stdout
    cid = json.loads(out)["result"]["collab"]
    for sid, alias in ((ANN, "ann"), (BOB, "bob")):
        assert run("join", "--collab", cid, "--self", f"codex:{sid}", "--alias", alias, root=root).code == 0
    repo = gitrepos.repo(tmp_path / "repo")
    marker = tmp_path / "old-hook-ran"
    old = repo / ".git" / "hooks" / "pre-commit"
    old.write_text(f"#!/bin/sh\necho ran >> {marker}\n")
    old.chmod(0o755)
    return root, cid, repo, marker


def git(repo: Path, root: Path, *args: str, session: str | None = None,
        extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = clean_env(root, {**gitrepos.ENV, "CODEX_THREAD_ID": session, **(extra or {})})
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_the_guard_refuses_a_commit_of_a_claimed_file_keeps_the_old_hook_and_lets_the_holder_commit(world) -> None:
    root, cid, repo, marker = world
    code, out, _ = run("guard", "install", "--json", root=root, cwd=repo)
    assert code == 0 and json.loads(out)["result"]["hooks"]["pre-commit"] == "chained the existing hook"
    assert run("claim", "src/retry.py", "--reason", "retries", "--collab", cid, "--self", f"codex:{BOB}",
               root=root, cwd=repo).code == 0
    (repo / "src" / "retry.py").write_text("changed\n")
    git(repo, root, "add", "-A")
    for session in (ANN, None):  # an agent's shell, and a person's terminal (no identity): both refused
        done = git(repo, root, "commit", "-qm", "edit", session=session)
        assert done.returncode != 0
        assert "src/retry.py is claimed exclusively by bob (codex:bob-1) as src/retry.py (retries)" in done.stderr
    assert marker.read_text() == "ran\nran\n"  # the existing hook still runs, first
    bypass = git(repo, root, "commit", "-qm", "bypass", session=ANN, extra={"AGENTMSG_GUARD": "off"})
    assert bypass.returncode == 0 and "AGENTMSG_GUARD=off" in bypass.stderr
    assert "AGENTMSG_GUARD=off, claims not checked" in (root / "hooks.log").read_text()
    (repo / "src" / "retry.py").write_text("bob's change\n")
    git(repo, root, "add", "-A")
    assert git(repo, root, "commit", "-qm", "holder", session=BOB).returncode == 0  # the holder commits
    (repo / "other.txt").write_text("x\n")
    git(repo, root, "add", "-A")
    assert git(repo, root, "commit", "-qm", "unclaimed", session=ANN).returncode == 0


def test_the_guard_refuses_a_push_and_uninstall_restores_the_old_hook(world, tmp_path: Path) -> None:
    root, cid, repo, _marker = world
    remote = tmp_path / "remote.git"
    gitrepos.git(tmp_path, "init", "-q", "--bare", str(remote))
    gitrepos.git(repo, "remote", "add", "origin", str(remote))
    gitrepos.git(repo, "push", "-q", "origin", "main")
    (repo / "src" / "retry.py").write_text("changed\n")
    gitrepos.git(repo, "commit", "-qam", "change")  # committed before any claim or guard
    assert run("guard", "install", root=root, cwd=repo).code == 0
    assert run("claim", "src", "--collab", cid, "--self", f"codex:{BOB}", root=root, cwd=repo).code == 0
    done = git(repo, root, "push", "-q", "origin", "main", session=ANN)
    assert done.returncode != 0 and "src/retry.py is claimed exclusively by bob" in done.stderr
    assert git(repo, root, "push", "-q", "origin", "main", session=BOB).returncode == 0
    assert run("guard", "uninstall", root=root, cwd=repo).code == 0
    hook = (repo / ".git" / "hooks" / "pre-commit").read_text()
    assert "agentmsg-guard" not in hook and "old-hook-ran" in hook
    assert not (repo / ".git" / "hooks" / "pre-push").exists()


def test_a_symlinked_hook_is_refused_and_nothing_is_written_through_it(world, tmp_path: Path) -> None:
    root, _cid, repo, _marker = world
    hooks = repo / ".git" / "hooks"
    elsewhere = tmp_path / "shared-hook"
    elsewhere.write_text("#!/bin/sh\nexit 0\n")
    (hooks / "pre-commit").unlink()
    (hooks / "pre-commit").symlink_to(elsewhere)
    code, _out, err = run("guard", "install", root=root, cwd=repo)
    assert code == 12 and "is a symlink" in err and err.count("\n") == 1
    assert elsewhere.read_text() == "#!/bin/sh\nexit 0\n"
    assert (hooks / "pre-commit").is_symlink()
    assert not (hooks / "pre-commit.agentmsg-chained").exists() and not (hooks / "pre-push").exists()
