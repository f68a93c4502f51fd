"""agentmsg claim / release / claims as a subprocess, inside real git repositories (docs/CLAIMS.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import gitrepos
from tests.support.cli_helpers import run, run_json

ANN, BOB, CAROL = "codex:ann-1", "claude-code:bob-1", "human:carol"


@pytest.fixture
def world(tmp_path: Path):
    root = tmp_path / "state"
    _code, doc, _ = run_json("open", "--self", CAROL, "--alias", "carol", "--label", "claims", "--task", "t", root=root)
    cid = doc["result"]["collab"]
    for pin, alias in ((ANN, "ann"), (BOB, "bob")):
        assert run("join", "--collab", cid, "--self", pin, "--alias", alias, root=root).code == 0
    repo = gitrepos.repo(tmp_path / "repo")
    return root, cid, repo


def am(world, pin: str, *args: str, cwd: Path | None = None):
    root, cid, repo = world
    return run(*args, "--collab", cid, "--self", pin, root=root, cwd=cwd or repo)


def events(world) -> bytes:
    root, cid, _ = world
    return (root / "collabs" / cid / "collab.jsonl").read_bytes()


def test_a_conflicting_claim_exits_5_with_one_line_naming_the_holder(world) -> None:
    assert am(world, BOB, "claim", "src/retry.py", "--reason", "fixing retries", "--ttl", "10m").code == 0
    before = events(world)
    code, out, err = am(world, ANN, "claim", "src/*.py")
    assert code == 5 and out == ""
    assert err.startswith("conflict: src/*.py is held by bob (claude-code:bob-1): exclusive claim on src/retry.py "
                          "(fixing retries) until ")
    assert events(world) == before
    assert am(world, ANN, "claim", "docs/*", "--shared").code == 0  # no overlap: fine


@pytest.mark.parametrize("args", [["../x"], ["/etc/passwd"], [""], ["x", "--ttl", "25h"], ["x", "--ttl", "0"]])
def test_bad_input_exits_2_and_writes_nothing(world, args: list[str]) -> None:
    root, _cid, _repo = world
    before = events(world)
    code, out, err = am(world, ANN, "claim", *args)
    assert code == 2 and err.startswith("usage: ") and out == ""
    assert events(world) == before and not (root / "claims.json").exists()


def test_release_rules_and_a_persons_forced_release_is_logged(world) -> None:
    root, cid, _repo = world
    assert am(world, BOB, "claim", "src").code == 0
    code, _, err = am(world, ANN, "release", "src")
    assert code == 9 and "bob" in err
    assert am(world, ANN, "release", "src", "--force").code == 9  # --force is a person's
    assert am(world, CAROL, "release", "src", "--force").code == 0
    code, out, _ = run("log", "show", "--collab", cid, "--self", CAROL, root=root)
    assert "bob's claim on src released by human:carol (forced)" in out
    assert not (root / "claims.json").exists()  # no live claim: the launcher has nothing to check


def test_claims_are_shown_in_claims_status_roster_and_the_transcripts(world) -> None:
    root, cid, _repo = world
    assert am(world, BOB, "claim", "src/retry.py", "--reason", "retries").code == 0
    listed = json.loads(am(world, ANN, "claims", "--json").stdout)["result"]["claims"]
    assert [(c["alias"], c["pattern"], c["mode"], c["reason"]) for c in listed] == [
        ("bob", "src/retry.py", "exclusive", "retries")]
    assert json.loads(am(world, ANN, "claims", "--mine", "--json").stdout)["result"]["claims"] == []
    for cmd in ("status", "roster"):
        doc = json.loads(am(world, ANN, cmd, "--json").stdout)["result"]
        assert [c["pattern"] for c in doc["claims"]] == ["src/retry.py"]
        assert "claim: bob holds src/retry.py exclusive (retries) until" in am(world, ANN, cmd).stdout
    assert "bob claimed src/retry.py (exclusive) until" in am(world, ANN, "log", "show").stdout
    assert am(world, CAROL, "log", "render", "--html").code == 0
    html = (root / "collabs" / cid / "collaboration.html").read_text()
    assert "bob claimed src/retry.py (exclusive) until" in html


def test_worktrees_share_claims_and_unrelated_repositories_never_collide(world, tmp_path: Path) -> None:
    root, _cid, repo = world
    other = gitrepos.worktree(repo, tmp_path / "wt")
    unrelated = gitrepos.repo(tmp_path / "elsewhere", files={"src/retry.py": "different history\n"})
    assert am(world, BOB, "claim", "src/retry.py").code == 0
    assert am(world, ANN, "claim", "src/retry.py", cwd=other).code == 5
    assert am(world, ANN, "claim", "retry.py", cwd=other / "src").code == 5  # relative to where it is typed
    assert am(world, ANN, "claim", "src/retry.py", cwd=unrelated).code == 0
    index = json.loads((root / "claims.json").read_text())
    assert len({c["repo"] for c in index["claims"]}) == 2


def test_a_repository_without_a_commit_is_its_git_directory(world, tmp_path: Path) -> None:
    fresh = gitrepos.repo(tmp_path / "fresh", commit=False)
    code, out, _ = am(world, BOB, "claim", "src", "--json", cwd=fresh)
    assert code == 0 and json.loads(out)["result"]["repo"] == f"gitdir:{(fresh / '.git').resolve()}"
    assert am(world, BOB, "claim", "src", cwd=tmp_path).code == 2  # outside any repository


def test_top_shows_the_live_claims(world) -> None:
    root, _cid, _repo = world
    assert am(world, BOB, "claim", "src/retry.py", "--shared").code == 0
    code, out, _ = run("top", "--once", "--root", str(root))
    assert code == 0 and "Claims (1)" in out
    assert any("bob" in line and "shared" in line and "src/retry.py" in line for line in out.splitlines())
