"""Claims news (agentmsg/hooks/claimnews.py, docs/CLAIMS.md "Told before it edits"): each live exclusive claim
another participant holds is told once, at the session's next prompt (or start, or tool call), through the
launcher as Claude Code runs it; a renewal is news again; a release or a shared claim is not news."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support import gitrepos
from tests.support.cli_helpers import REPO_ROOT, clean_env, run

RUN = REPO_ROOT / "hooks" / "run"
ANN, BOB = "ann-session-1", "codex:bob-1"
TOLD = "exclusive claim held by other participants of this session's collaborations"


def prompt(root: Path, repo: Path) -> str:
    data = {"session_id": ANN, "cwd": str(repo), "hook_event_name": "UserPromptSubmit", "prompt": "go"}
    done = subprocess.run(["/bin/sh", str(RUN), "claude", "prompt"], input=json.dumps(data).encode(),
                          capture_output=True, check=True, timeout=60,
                          env=clean_env(root, {"CLAUDE_CODE_SESSION_ID": ANN}))
    assert done.stderr == b""
    return str(json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]) if done.stdout.strip() else ""


def test_each_claim_is_told_once_and_a_renewal_again(tmp_path: Path) -> None:
    root = tmp_path / "state"
    assert run("open", "--self", "human:carol", "--alias", "carol", "--label", "c", "--task", "t", root=root).code == 0
    cid = next((root / "collabs").iterdir()).name
    for pin, alias in ((f"claude-code:{ANN}", "ann"), (BOB, "bob")):
        assert run("join", "--collab", cid, "--self", pin, "--alias", alias, root=root).code == 0
    repo = gitrepos.repo(tmp_path / "repo")
    other = gitrepos.repo(tmp_path / "other", files={"a.txt": "another history\n"})
    assert prompt(root, repo) == "" and prompt(root, repo) == ""  # nothing claimed: idle, as before
    assert run("claim", "src/retry.py", "--reason", "fixing retries", "--collab", cid, "--self", BOB, root=root,
               cwd=repo).code == 0
    text = prompt(root, repo)
    lead, rest = text.split("\n", 1)
    assert lead == f"agentmsg: 1 {TOLD}; the pre-tool hook refuses this session's edits of a claimed path until it " \
                   "is released or expires."
    assert rest.startswith("- held by bob (codex:bob-1) in this session's repository until 20")
    assert f"--collab {cid} --to bob" in rest
    pattern, reason = rest.split("nonce", 1)[1], rest.split("\n", 1)[0]
    assert "src/retry.py" in pattern and "fixing retries" in pattern and "src/retry.py" not in reason
    assert prompt(root, repo) == ""  # told once
    assert run("claim", "docs", "--shared", "--collab", cid, "--self", BOB, root=root, cwd=repo).code == 0
    assert prompt(root, repo) == ""  # a shared claim refuses nothing: not news
    assert run("claim", "a.txt", "--collab", cid, "--self", BOB, root=root, cwd=other).code == 0
    elsewhere = prompt(root, repo)  # in another repository: named by where it is
    assert f"1 {TOLD}" in elsewhere and f"held by bob (codex:bob-1) in the repository at {other}" in elsewhere
    assert run("claim", "--renew", "--ttl", "2h", "--collab", cid, "--self", BOB, root=root, cwd=repo).code == 0
    assert f"1 {TOLD}" in prompt(root, repo)  # renewed: news again (until a new time)
    assert run("release", "--all", "--collab", cid, "--self", BOB, root=root, cwd=repo).code == 0
    assert prompt(root, repo) == ""
    assert not (root / "claims.json").exists()
