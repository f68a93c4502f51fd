"""Claims through the service on every backend (file, memory, PostgreSQL with its record checks): docs/CLAIMS.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmsg.domain import kinds
from agentmsg.domain.values import Pin
from agentmsg.errors import Conflict, IdentityError
from agentmsg.service import claims as service
from agentmsg.service.context import Ctx
from agentmsg.service.messaging import Mailbox
from tests.support import gitrepos

ANN, BOB, CAROL = Pin("codex", "ann-1"), Pin("claude-code", "bob-1"), Pin("human", "carol")


@pytest.fixture
def world(port, tmp_path: Path):
    box = Mailbox(port)
    cid = box.open(CAROL, "carol", "claims", "t").collab
    box.join(cid, ANN, "ann")
    box.join(cid, BOB, "bob")
    ctx = Ctx(tmp_path / "state", "test", {}, store=port)
    return ctx, cid, gitrepos.repo(tmp_path / "repo")


def test_claim_conflict_release_and_force_on_every_backend(world) -> None:
    ctx, cid, repo = world
    kw = {"collab": cid, "cwd": str(repo)}
    out = service.claim(ctx, self_flag=str(BOB), patterns=["src/retry.py"], reason="fixing retries", **kw)
    assert [c["pattern"] for c in out["claims"]] == ["src/retry.py"] and out["repo"].startswith("root:")
    with pytest.raises(Conflict, match="held by bob"):
        service.claim(ctx, self_flag=str(ANN), patterns=["src"], shared=True, **kw)
    with pytest.raises(IdentityError):
        service.release(ctx, self_flag=str(ANN), patterns=["src/retry.py"], **kw)
    done = service.release(ctx, self_flag=str(CAROL), patterns=["src/retry.py"], force=True, **kw)
    assert done["forced"] and done["released"][0]["alias"] == "bob"
    assert service.listing(ctx, collab=cid, self_flag=str(ANN))["claims"] == []
    service.claim(ctx, self_flag=str(ANN), patterns=["src"], **kw)
    renewed = service.claim(ctx, self_flag=str(ANN), patterns=[], renew=True, ttl="2h", **kw)
    assert renewed["renewed"] and [c["pattern"] for c in renewed["claims"]] == ["src"]
    service.release(ctx, self_flag=str(ANN), patterns=[], all_=True, **kw)
    types = [e["type"] for e in ctx.store.events(cid)]
    assert types.count(kinds.CLAIMED) == 3 and types.count(kinds.RELEASED) == 2


def test_leaving_releases_a_holders_claims(world) -> None:
    ctx, cid, repo = world
    service.claim(ctx, collab=cid, self_flag=str(BOB), patterns=["src"], cwd=str(repo))
    Mailbox(ctx.store).leave(cid, BOB)
    assert service.listing(ctx, collab=cid, self_flag=str(ANN))["claims"] == []
    service.claim(ctx, collab=cid, self_flag=str(ANN), patterns=["src"], cwd=str(repo))
