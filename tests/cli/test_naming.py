"""Finding and naming a collaboration in plain words (issue 30, finding 4), through the real CLI.

``agentmsg collabs`` and ``agentmsg status`` list the collaborations (id, label, participants, unread) in
plain text; every ``--collab`` (and ``AGENTMSG_COLLAB``) takes an id, a unique label or a unique id prefix of
at least 8 characters: an exact id wins, then a label, then a prefix; an ambiguous one exits 2 and lists
the candidates, and writes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_helpers import run, run_json, snapshot

ALICE, BOB, CAROL = "human:alice", "codex:0199-naming-bob", "claude-code:5418-naming-carol"


def ok(root: Path, *args: str, env: dict[str, str | None] | None = None) -> dict[str, Any]:
    code, doc, err = run_json(*args, root=root, env=env)
    assert code == 0, (args, err)
    result: dict[str, Any] = doc["result"]
    return result


def opened(root: Path, label: str, who: str = ALICE, alias: str = "alice") -> str:
    cid: str = ok(root, "open", "--self", who, "--alias", alias, "--label", label, "--task", "t")["collab"]
    return cid


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, str, str]:
    """``review`` (alice, bob; one message to bob) and ``ops`` (alice only)."""
    root = tmp_path / "state"
    review, ops = opened(root, "review"), opened(root, "ops")
    ok(root, "join", "--collab", review, "--self", BOB, "--alias", "bob")
    ok(root, "send", "--collab", review, "--self", ALICE, "--to", "bob", "--body", "hello")
    return root, review, ops


def test_collabs_lists_id_label_participants_and_unread_in_plain_text(two: tuple[Path, str, str]) -> None:
    root, review, ops = two
    code, out, err = run("collabs", root=root)
    assert (code, err) == (0, "")
    rows = [line.split("\t") for line in out.splitlines() if "\t" in line]
    assert rows[0] == ["id", "label", "participants", "unread (all)", "state"]
    assert rows[1:] == [[review, "review", "alice, bob", "1", "open"], [ops, "ops", "alice", "0", "open"]]
    # a session sees its own collaborations, and its own unread mail
    code, out, _ = run("collabs", "--self", BOB, root=root)
    rows = [line.split("\t") for line in out.splitlines() if "\t" in line]
    assert rows == [["id", "label", "participants", "unread (yours)", "state"],
                    [review, "review", "alice, bob", "1", "open, you: bob"]]
    listed = ok(root, "collabs", "--self", ALICE)["collaborations"]
    assert [(r["collab"], r["label"], r["participants"], r["unread"]) for r in listed] == [
        (review, "review", ["alice", "bob"], 0), (ops, "ops", ["alice"], 0)]


def test_status_without_a_collaboration_lists_them_not_only_a_count(two: tuple[Path, str, str]) -> None:
    root, review, ops = two
    code, out, _ = run("status", root=root)
    assert code == 0
    assert "collaborations under root" not in out
    assert f"{review}\treview\talice, bob\t1\topen" in out.splitlines()
    assert f"{ops}\tops\talice\t0\topen" in out.splitlines()
    assert [r["label"] for r in ok(root, "status")["collaborations"]] == ["review", "ops"]


def test_a_label_and_an_id_prefix_name_a_collaboration_everywhere(two: tuple[Path, str, str]) -> None:
    root, review, ops = two
    sent = ok(root, "send", "--collab", "review", "--self", BOB, "--to", "alice", "--body", "by label")
    assert sent["collab"] == review
    assert ok(root, "inbox", "--collab", review[:8], "--self", ALICE)["collab"] == review
    assert ok(root, "inbox", "--collab", ops[:13].upper(), "--self", ALICE)["collab"] == ops
    assert ok(root, "inbox", "--self", BOB, env={"AGENTMSG_COLLAB": "review"})["collab"] == review
    assert ok(root, "roster", "--collab", "review")["collab"] == review
    assert ok(root, "verify", "--collab", "ops")["files"] > 0
    assert ok(root, "search", "label", "--collab", "review")["filters"]["collab"] == review
    code, out, err = run("top", "--once", "--collab", "review", root=root)
    assert code == 0 and "review" in out and " ops" not in out, err


def test_an_exact_id_wins_then_a_label_then_a_prefix(tmp_path: Path) -> None:
    root = tmp_path / "state"
    first = opened(root, "first")
    # a label that is another collaboration's id, and one that is another's id prefix
    by_id = opened(root, first)
    by_prefix = opened(root, first[:8])
    assert ok(root, "status", "--collab", first)["collab"] == first
    assert ok(root, "status", "--collab", first[:8])["collab"] == by_prefix
    assert ok(root, "status", "--collab", by_id[:9])["collab"] == by_id


def test_an_ambiguous_name_exits_2_lists_the_candidates_and_writes_nothing(two: tuple[Path, str, str]) -> None:
    root, review, _ops = two
    other = opened(root, "review")
    ok(root, "join", "--collab", other, "--self", CAROL, "--alias", "carol")
    before = snapshot(root)
    code, out, err = run("send", "--collab", "review", "--self", ALICE, "--to", "bob", "--body", "x", root=root)
    assert (code, out) == (2, "")
    assert err.startswith("usage: collaboration 'review' is ambiguous: 2 match that label (")
    assert review in err and other in err
    assert snapshot(root) == before
    # a session in only one of them means that one; a closed one yields to the open one
    assert ok(root, "inbox", "--collab", "review", "--self", CAROL)["collab"] == other
    ok(root, "close", "--collab", review, "--self", ALICE)
    assert ok(root, "status", "--collab", "review")["collab"] == other
    prefix = run("status", "--collab", "0" * 8, root=root)
    assert prefix.code == 2 and "no collaboration has that label or id prefix" in prefix.stderr


@pytest.mark.parametrize("name, why", [
    ("nope", "no collaboration has that label or id prefix; agentmsg collabs lists them"),
    ("abc", "(an id prefix needs at least 8 characters)"),
])
def test_a_name_that_matches_nothing_is_bad_input(two: tuple[Path, str, str], name: str, why: str) -> None:
    root, _review, _ops = two
    code, out, err = run("inbox", "--collab", name, "--self", ALICE, root=root)
    assert (code, out) == (2, "")
    assert err.startswith(f"usage: invalid collaboration id {name!r}: expected a UUID, a label or an id prefix")
    assert why in err


def test_a_pin_with_no_binding_is_told_so(two: tuple[Path, str, str]) -> None:
    root, _review, _ops = two
    code, out, err = run("inbox", "--self", "human:bob", root=root)
    assert (code, out) == (2, "")
    assert err.startswith("usage: human:bob has no binding: it is in no collaboration")
