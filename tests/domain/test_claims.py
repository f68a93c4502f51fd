"""The claim rules (agentmsg/domain/claims.py): the glob rule, pattern overlap, conflicts, expiry, the fold."""

from __future__ import annotations

import pytest

from agentmsg.domain import claims, kinds
from agentmsg.errors import Conflict, IdentityError, NotFound, UsageError

REPO = "root:" + "a" * 40
NOW = 1_000_000.0


@pytest.mark.parametrize(("a", "b"), [
    ("src/retry.py", "src/retry.py"),
    ("src", "src/retry.py"),                 # a directory covers what lies beneath it
    ("src/*.py", "src/retry.py"),
    ("src/*.py", "src/re*"),                 # pattern against pattern: src/retry.py is in both
    ("**/retry.py", "src/deep/retry.py"),
    ("**", "anything/at/all"),
    ("src/**/x.py", "src/x.py"),             # ** matches zero segments
    ("src/r?try.py", "src/retry.py"),
    ("src/[a-r]etry.py", "src/retry.py"),
    ("src/*", "src/**/*.md"),
    ("*.py", "*retry*"),
    ("src/[!a]x", "src/[a-c]x"),             # unsure (negated class): overlap is the safe answer
])
def test_overlapping_patterns(a: str, b: str) -> None:
    assert claims.overlap(a, b) and claims.overlap(b, a)


@pytest.mark.parametrize(("a", "b"), [
    ("src/retry.py", "src/other.py"),
    ("src/*.py", "docs/*"),
    ("src/*.py", "src/*.md"),
    ("*.py", "src"),                         # * stays within one segment: src is not *.py
    ("src/[s-z]etry.py", "src/retry.py"),
    ("src/a?", "src/abc"),
    ("src/retry.py", "src/retry.pyc"),
    ("a/**/b", "c/**"),
    (claims.escape("src/*.py"), "src/retry.py"),  # an escaped * is a literal star
])
def test_disjoint_patterns(a: str, b: str) -> None:
    assert not claims.overlap(a, b) and not claims.overlap(b, a)


def test_covers_a_literal_path() -> None:
    assert claims.covers("src/*.py", "src/retry.py")
    assert claims.covers("src", "src/a/b/c.txt")
    assert not claims.covers("src/*.py", "src/sub/retry.py")
    assert claims.covers("src/**/*.py", "src/sub/retry.py")


@pytest.mark.parametrize(("raw", "expected"), [
    ("./src//retry.py", "src/retry.py"), ("src/", "src"), ("a/./b", "a/b"), ("**", "**")])
def test_normalize(raw: str, expected: str) -> None:
    assert claims.normalize(raw) == expected


@pytest.mark.parametrize("raw", ["", "  ", "../x", "src/../../x", "/etc/passwd", ".", "a\nb", "x" * 600])
def test_bad_patterns_are_usage_errors(raw: str) -> None:
    with pytest.raises(UsageError):
        claims.normalize(raw)


def claimed(alias: str, pattern: str, *, exclusive: bool = True, expires_at: float = NOW + 600,
            repo: str = REPO) -> dict[str, object]:
    return {"type": kinds.CLAIMED, "alias": alias, "pin": f"codex:{alias}", "repo": repo, "pattern": pattern,
            "exclusive": exclusive, "reason": "r", "expires_at": expires_at, "ts": "t"}


def test_exclusive_conflicts_with_any_overlap_and_shared_only_with_exclusive() -> None:
    held = claims.fold([claimed("bob", "src/retry.py", exclusive=False)])
    # shared + shared: fine; exclusive over a shared: refused
    assert claims.claimed_events(held, "ann", "codex:ann", REPO, ["src"], exclusive=False, reason="",
                                 expires_at=NOW + 60, now=NOW)
    with pytest.raises(Conflict) as err:
        claims.claimed_events(held, "ann", "codex:ann", REPO, ["src/*.py"], exclusive=True, reason="",
                              expires_at=NOW + 60, now=NOW)
    line = str(err.value)
    assert "held by bob (codex:bob)" in line and "shared claim on src/retry.py" in line and "until" in line
    held = claims.fold([claimed("bob", "src/retry.py")])
    with pytest.raises(Conflict):
        claims.claimed_events(held, "ann", "codex:ann", REPO, ["src"], exclusive=False, reason="",
                              expires_at=NOW + 60, now=NOW)
    # one's own claims never conflict; another repository never collides; an expired claim is no claim
    assert claims.claimed_events(held, "bob", "codex:bob", REPO, ["src"], exclusive=True, reason="",
                                 expires_at=NOW + 60, now=NOW)
    assert claims.claimed_events(held, "ann", "codex:ann", "root:" + "b" * 40, ["src/retry.py"], exclusive=True,
                                 reason="", expires_at=NOW + 60, now=NOW)
    assert claims.claimed_events(held, "ann", "codex:ann", REPO, ["src/retry.py"], exclusive=True, reason="",
                                 expires_at=NOW + 60, now=NOW + 601)


def test_the_fold_releases_on_release_leave_kill_and_close() -> None:
    evs = [claimed("bob", "a"), claimed("bob", "b"), claimed("cat", "c"), claimed("dan", "d")]
    assert len(claims.fold(evs)) == 4
    released = {"type": kinds.RELEASED, "alias": "bob", "repo": REPO, "patterns": ["a"]}
    assert sorted(k[2] for k in claims.fold([*evs, released])) == ["b", "c", "d"]
    forced = {"type": kinds.RELEASED, "target": "cat", "by": "human:x", "force": True, "repo": REPO, "patterns": None}
    assert sorted(k[2] for k in claims.fold([*evs, forced])) == ["a", "b", "d"]
    gone = [{"type": "left", "alias": "cat"}, {"type": "killed", "target": "dan", "by": "human:x"}]
    assert sorted(k[2] for k in claims.fold([*evs, *gone])) == ["a", "b"]
    assert claims.fold([*evs, {"type": "closed", "by": "human:x"}]) == {}
    everything = {"type": kinds.RELEASED, "alias": "bob", "repo": None, "patterns": None}
    assert sorted(k[0] for k in claims.fold([*evs, everything])) == ["cat", "dan"]


def test_renewing_extends_only_live_claims_and_nothing_renews_itself() -> None:
    held = claims.fold([claimed("bob", "a", expires_at=NOW + 10), claimed("bob", "b", expires_at=NOW - 1)])
    evs = claims.renewed_events(held, "bob", "codex:bob", REPO, None, expires_at=NOW + 999, now=NOW)
    assert [(e["pattern"], e["expires_at"]) for e in evs] == [("a", NOW + 999)]
    assert claims.live(held, NOW + 11) == []
    with pytest.raises(NotFound):
        claims.renewed_events(held, "bob", "codex:bob", REPO, None, expires_at=NOW + 999, now=NOW + 11)


def test_release_rules() -> None:
    held = claims.fold([claimed("bob", "src/retry.py")])
    with pytest.raises(IdentityError):  # another's claim: exit 9
        claims.released_event(held, "ann", "codex:ann", REPO, ["src/retry.py"])
    with pytest.raises(IdentityError):  # --force is a person's
        claims.released_event(held, "ann", "codex:ann", REPO, ["src/retry.py"], holder="bob", force=True)
    ev = claims.released_event(held, None, "human:carol", REPO, ["src/retry.py"], holder="bob", force=True,
                               human=True)
    assert ev == {"type": kinds.RELEASED, "target": "bob", "by": "human:carol", "repo": REPO,
                  "patterns": ["src/retry.py"], "force": True}
    with pytest.raises(NotFound):
        claims.released_event(held, "bob", "codex:bob", REPO, ["nothing.py"])
    assert claims.released_event(held, "bob", "codex:bob", None, None)["alias"] == "bob"
