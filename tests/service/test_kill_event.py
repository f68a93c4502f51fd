"""The ``killed`` event on every backend: recorded by a person, the alias stays (its inbox kept)."""

from __future__ import annotations

import pytest

from agentmsg.domain import rules
from agentmsg.domain.values import Pin
from agentmsg.errors import IdentityError, NotFound

DRIVER, REVIEWER, CAROL = Pin("codex", "drv-1"), Pin("claude-code", "rev-1"), Pin("human", "carol")


def test_a_kill_is_recorded_and_the_alias_stays(box) -> None:
    cid = box.open(DRIVER, "driver", "review", "t").collab
    box.join(cid, REVIEWER, "reviewer")
    with box.store.transaction(cid) as tx:
        with pytest.raises(IdentityError):
            rules.kill_event(tx.registry(), DRIVER, "reviewer", force=True, pid=123)
        with pytest.raises(NotFound):
            rules.kill_event(tx.registry(), CAROL, "nobody", force=True, pid=123)
        ev = tx.append_event(rules.kill_event(tx.registry(), CAROL, "reviewer", force=True, pid=123))
    assert (ev["type"], ev["target"], ev["pin"]) == ("killed", "reviewer", str(REVIEWER))
    reg = box.registry(cid)
    assert reg.holder("reviewer") == str(REVIEWER) and reg.participants["reviewer"].active
