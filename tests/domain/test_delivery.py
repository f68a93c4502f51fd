"""Delivery envelopes (agentmsg/delivery.py): the pure fold, and enable/disable/inspect/retry."""

from __future__ import annotations

import json
import time

import pytest

from agentmsg.domain import envelope as env_
from agentmsg.domain import kinds
from agentmsg.domain import validate as model
from agentmsg.errors import Closed, Conflict, DeliveryInactive, IdentityError, NotFound, UsageError
from agentmsg.service import delivery
from tests.support.facade import Draft

T0 = 1_800_000_000.0
PIN = "claude-code:abc"


def enabled(envelope="e1", pin=PIN, alias="reviewer", created=T0, expires_in=7200, cap=86400, slots=20, wait=0):
    return {"type": kinds.ENABLED, "envelope": envelope, "alias": alias, "pin": pin, "ts": env_.iso(created),
            "expires_at": created + expires_in, "hard_cap_at": created + cap, "slots": slots, "wait": wait}


def slot(n, envelope="e1"):
    return {"type": kinds.SLOT, "envelope": envelope, "slot": n, "ts": env_.iso(T0)}


# ---- the pure fold ----------------------------------------------------------------------


def test_fresh_envelope_is_active_with_defaults():
    env = env_.latest(env_.fold([enabled()]), "reviewer", PIN)
    assert env is not None and env.status(T0 + 1, holder=PIN, closed=False) == "active"
    assert env.remaining == 20
    d = env.describe(T0 + 60, holder=PIN, closed=False)
    assert d["expires_in_seconds"] == 7140 and d["owner"] == {"alias": "reviewer", "pin": PIN}


@pytest.mark.parametrize(("records", "now", "holder", "closed", "status"), [
    ([enabled()], T0 + 7200, PIN, False, "expired"),
    ([enabled(expires_in=10**6)], T0 + 86400, PIN, False, "expired"),  # the hard cap wins
    ([enabled(slots=2), slot(1), slot(2)], T0, PIN, False, "spent"),
    ([enabled(slots=2), slot(1), slot(1)], T0, PIN, False, "active"),  # a slot number counts once
    ([enabled(), {"type": kinds.DISABLED, "envelope": "e1", "ts": "t"}], T0, PIN, False, "disabled"),
    ([enabled()], T0, PIN, True, "closed"),
    ([enabled()], T0, "claude-code:new", False, "taken-over"),
    ([enabled()], T0, None, False, "left"),
])
def test_what_makes_an_envelope_inert(records, now, holder, closed, status):
    env = env_.latest(env_.fold(records), "reviewer", PIN)
    assert env.status(now, holder=holder, closed=closed) == status


def test_latest_is_per_exact_binding_and_ignores_strays():
    envs = env_.fold([slot(1, "nope"), enabled("e1"), enabled("e2", pin="codex:x"), enabled("e3"),
                          {"type": kinds.DISABLED, "envelope": "zzz", "ts": "t"}, slot(1, "e3")])
    assert env_.latest(envs, "reviewer", PIN).id == "e3"
    assert env_.latest(envs, "reviewer", "codex:x").id == "e2"
    assert env_.latest(envs, "driver", PIN) is None
    assert envs["e3"].remaining == 19 and envs["e1"].remaining == 20


def test_interrupted_attempts():
    old, new = env_.iso(T0 - 600), env_.iso(T0 - 5)
    receipts = [
        {"type": "presented", "message": "m1", "attempt": "a1", "ts": old, "host": "claude", "hook": "Stop"},
        {"type": "presented", "message": "m2", "attempt": "a1", "ts": old},
        {"type": "presented", "message": "m3", "attempt": "a2", "ts": old},
        {"type": "attempt-complete", "attempt": "a2", "ts": old},
        {"type": "presented", "message": "m4", "attempt": "a3", "ts": new},  # may still be running
        {"type": "ack", "message": "m2", "ts": old},
        {"type": "presented", "message": "m5", "attempt": "a4", "ts": old},
        {"type": "retry", "message": "m5", "attempt": "a4", "ts": old},
    ]
    got = env_.interrupted(receipts, T0)
    assert got == [{"attempt": "a1", "ts": old, "host": "claude", "hook": "Stop", "messages": ["m1"]}]


# ---- what the CLI calls -----------------------------------------------------------------


def test_enable_defaults_and_record(store, collab):
    out = delivery.enable(store, collab.id, collab.reviewer, now=T0)
    assert out["status"] == "active" and out["slots"] == 20 and out["remaining"] == 20
    assert out["expires"] == env_.iso(T0 + 7200) and out["hard_cap"] == env_.iso(T0 + 86400)
    assert out["wait_seconds"] == 0 and out["owner"] == {"alias": "reviewer", "pin": str(collab.reviewer)}
    (rec,) = [json.loads(line) for line in (collab.dir / "delivery.jsonl").read_text().splitlines()]
    assert rec["type"] == kinds.ENABLED and rec["pin"] == str(collab.reviewer) and rec["alias"] == "reviewer"


@pytest.mark.parametrize("kwargs", [
    {"expires_in": 0}, {"expires_in": 7200, "max_duration": 3600}, {"max_duration": 86401},
    {"slots": 0}, {"slots": 101}, {"wait": -1}, {"wait": 31},
])
def test_enable_refuses_out_of_bounds(store, collab, kwargs):
    with pytest.raises(UsageError):
        delivery.enable(store, collab.id, collab.reviewer, **kwargs)
    assert not (collab.dir / "delivery.jsonl").exists()


def test_an_envelope_is_never_changed_only_replaced(store, collab):
    first = delivery.enable(store, collab.id, collab.reviewer)
    with pytest.raises(Conflict):
        delivery.enable(store, collab.id, collab.reviewer, slots=50)
    delivery.disable(store, collab.id, collab.reviewer)
    with pytest.raises(DeliveryInactive):
        delivery.disable(store, collab.id, collab.reviewer)
    second = delivery.enable(store, collab.id, collab.reviewer, slots=5)
    assert second["envelope"] != first["envelope"] and second["remaining"] == 5
    info = delivery.inspect(store, collab.id, collab.reviewer)
    assert info["envelope"]["envelope"] == second["envelope"]
    assert [h["status"] for h in info["history"]] == ["disabled"]


def test_only_a_bound_participant_may_enable(store, collab):
    with pytest.raises(IdentityError):
        delivery.enable(store, collab.id, model.pin("codex:stranger"))
    store.close(collab.id, collab.driver)
    with pytest.raises(Closed):
        delivery.enable(store, collab.id, collab.reviewer)


def test_inspect_after_takeover_shows_the_old_envelope_inert(store, collab):
    delivery.enable(store, collab.id, collab.reviewer)
    store.join(collab.id, model.pin("claude-code:fresh"), "reviewer", succeeds=collab.reviewer, reason="restart")
    info = delivery.inspect(store, collab.id, collab.reviewer)
    assert info["envelope"]["status"] == "taken-over"
    assert delivery.inspect(store, collab.id, model.pin("claude-code:fresh"))["envelope"] is None
    with pytest.raises(IdentityError):
        delivery.inspect(store, collab.id, model.pin("codex:stranger"))


def test_inspect_shape(store, collab, tmp_path):
    delivery.enable(store, collab.id, collab.reviewer)
    info = delivery.inspect(store, collab.id, collab.reviewer, env={"HOME": str(tmp_path),
                                                                    "CODEX_HOME": str(tmp_path / "cx")})
    assert set(info) == {"collab", "alias", "pin", "envelope", "history", "interrupted", "last_hook_run", "adapters",
                         "midturn"}
    assert info["last_hook_run"] is None and info["interrupted"] == [] and info["midturn"] is None
    assert set(info["adapters"]) == {"claude", "codex", "gemini", "copilot", "opencode"}
    assert not any(info["adapters"][host]["installed"] for host in info["adapters"])


def test_retry_checks_what_it_is_given(store, collab):
    (sent,) = store.send(collab.id, collab.driver, Draft(to="reviewer", kind="request", priority="normal",
                                                         subject="s", body="b"))
    mid = sent.message.id
    a1, a2 = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
    store.receipt(collab.id, "reviewer", {"type": "presented", "message": mid, "attempt": a1})
    store.receipt(collab.id, "reviewer", {"type": "presented", "message": mid, "attempt": a2})
    store.receipt(collab.id, "reviewer", {"type": "attempt-complete", "attempt": a2})
    with pytest.raises(NotFound):
        delivery.retry(store, collab.id, collab.reviewer, "33333333-3333-4333-8333-333333333333", mid)
    with pytest.raises(Conflict):
        delivery.retry(store, collab.id, collab.reviewer, a2, mid)
    with pytest.raises(NotFound):  # only the exact recipient's attempts exist for it
        delivery.retry(store, collab.id, collab.carol, a1, mid)
    with pytest.raises(UsageError):
        delivery.retry(store, collab.id, collab.reviewer, "not-a-uuid", mid)
    out = delivery.retry(store, collab.id, collab.reviewer, a1, mid)
    assert out["attempt"] == a1 and out["message"] == mid
    store.ack(collab.id, collab.reviewer, mid)
    with pytest.raises(Conflict):
        delivery.retry(store, collab.id, collab.reviewer, a1, mid)


def test_expired_by_the_clock(store, collab):
    delivery.enable(store, collab.id, collab.reviewer, expires_in=60)
    info = delivery.inspect(store, collab.id, collab.reviewer, now=time.time() + 61)
    assert info["envelope"]["status"] == "expired" and info["envelope"]["expires_in_seconds"] == 0
