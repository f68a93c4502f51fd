"""Issue 28's "after B releases, or the claim expires, the same edit goes through": an expired claim in the claims
index refuses nothing (the pre-tool hook, as Claude Code and Codex run it), and is no news."""

from __future__ import annotations

import json
import time

from tests.hooks.test_claimnews import prompt
from tests.hooks.test_pretool import BOB, edit, hook, world  # noqa: F401  (world: a fixture)
from tests.support.cli_helpers import run


def test_an_expired_claim_refuses_nothing(world) -> None:  # noqa: F811
    root, cid, repo = world
    assert run("claim", "src/retry.py", "--collab", cid, "--self", BOB, root=root, cwd=repo).code == 0
    assert "claimed exclusively by bob" in hook(root, "claude", edit(repo))
    index = root / "claims.json"
    doc = json.loads(index.read_text())
    for c in doc["claims"]:
        c["expires_at"] = time.time() - 1  # its TTL has run out (nothing renews a claim on its own)
    index.write_text(json.dumps(doc))
    for host in ("claude", "codex"):
        assert hook(root, host, edit(repo)) == ""
    assert prompt(root, repo) == ""  # no news either
