"""One concept, two kinds: the Stop envelope and the wake consent are both ``domain.consent.Consent``."""

from __future__ import annotations

from typing import Any

import pytest

from agentmsg.domain import attempts, consent, envelope, kinds, wake


def _envelope(**more: Any) -> dict[str, Any]:
    return {"type": kinds.ENABLED, "envelope": "e1", "alias": "rev", "pin": "codex:a", "ts": "2026-01-01T00:00:00Z",
            "expires_at": 1000.0, "hard_cap_at": 2000.0, "slots": 2, **more}


def _wake(**more: Any) -> dict[str, Any]:
    return {"type": kinds.WAKE_ON, "consent": "w1", "alias": "rev", "pin": "codex:a", "ts": "2026-01-01T00:00:00Z",
            "expires_at": 1000.0, **more}


@pytest.mark.parametrize(("kind", "fold", "first", "withdraw", "word"), [
    (envelope.Envelope, envelope.fold, _envelope, {"type": kinds.DISABLED, "envelope": "e1"}, "disabled"),
    (wake.Consent, wake.fold, _wake, {"type": kinds.WAKE_OFF, "consent": "w1"}, "off"),
])
def test_both_kinds_end_alike(kind: type[consent.Consent], fold: Any, first: Any, withdraw: dict[str, Any],
                              word: str) -> None:
    folded = fold([first()])
    (one,) = folded.values()
    assert isinstance(one, kind) and isinstance(one, consent.Consent)
    assert one.ended(10.0, holder="codex:a", closed=False) is None
    assert one.ended(10.0, holder="codex:b", closed=False) == "taken-over"
    assert one.ended(10.0, holder=None, closed=False) == "left"
    assert one.ended(10.0, holder="codex:a", closed=True) == "closed"
    assert one.ended(1000.0, holder="codex:a", closed=False) == "expired"
    gone = fold([first(), {**withdraw, "ts": "2026-01-01T00:01:00Z"}, {**withdraw, "ts": "2026-01-01T00:02:00Z"}])
    (off,) = gone.values()
    assert off.withdrawn == "2026-01-01T00:01:00Z"  # the first withdrawal counts; nothing renews it
    assert off.ended(10.0, holder="codex:a", closed=False) == word
    assert fold([withdraw | {"ts": "t"}]) == {}  # records of an unknown consent are ignored


def test_a_new_consent_replaces_never_renews_and_latest_is_this_bindings_newest() -> None:
    folded = envelope.fold([_envelope(), _envelope(envelope="e2"), _envelope(envelope="e3", pin="codex:b")])
    assert consent.latest(folded, "rev", "codex:a") is folded["e2"]
    assert consent.latest(folded, "rev", "codex:z") is None


def test_the_envelope_spends_numbered_slots_and_the_wake_consent_counts_rings() -> None:
    slot = attempts.slot(envelope="e1", number=1, alias="rev", pin="codex:a", host="codex", attempt="a1",
                         messages=["m1"])
    env = envelope.fold([_envelope(), {**slot, "ts": "t"}, {**slot, "ts": "t"}])["e1"]
    assert env.remaining == 1 and env.status(10.0, holder="codex:a", closed=False) == "active"
    spent = envelope.fold([_envelope(), {**slot, "ts": "t"}, {**slot, "slot": 2, "ts": "t"}])["e1"]
    assert spent.status(10.0, holder="codex:a", closed=False) == "spent"
    ring = {"type": kinds.WAKE_RING, "consent": "w1", "outcome": wake.RANG, "at": 5.0, "ts": "t"}
    con = wake.fold([_wake(), ring, {**ring, "at": 6.0}])["w1"]
    assert con.rings == [5.0, 6.0] and con.consecutive == 2 and con.pending(7.0)


def test_an_attempts_records_are_the_same_for_every_front_end() -> None:
    shown = attempts.presented(["m1", "m2"], attempt="a1", host="mcp", via="inbox", pin="codex:a")
    assert [r["type"] for r in shown] == [kinds.PRESENTED] * 2 and {r["attempt"] for r in shown} == {"a1"}
    done = attempts.complete(attempt="a1", host="mcp", via="inbox", count=2)
    assert done == {"type": kinds.COMPLETE, "attempt": "a1", "host": "mcp", "hook": "inbox", "messages": 2}
    folded = envelope.attempts([{**r, "ts": "2026-01-01T00:00:00Z"} for r in [*shown, done]])
    assert folded[0]["complete"] is True and folded[0]["messages"] == ["m1", "m2"]
