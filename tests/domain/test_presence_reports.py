"""Presence reported across machines (domain/presence.py): what a report may say, and what a reader trusts."""

from __future__ import annotations

import pytest

from agentmsg.domain import presence

PIN = "claude-code:5418c0de-1111-4222-8333-944455556666"
NOW = 1_800_000_000.0


def report(**over: object) -> dict[str, object]:
    return {"pin": PIN, "state": "idle", "quiet": 12.0, "age": 3.0, "pulled_at": NOW - 2.0} | over


def test_a_fresh_report_gives_the_state_on_another_machine_and_when_it_was_last_active():
    got = presence.from_report(report(), PIN, NOW)
    assert got is not None
    assert (got.state, got.why) == ("idle", presence.REMOTE)
    assert got.last == pytest.approx(NOW - 2.0 - 3.0 - 12.0)  # ages add up; no other machine's clock is read
    line = presence.next_step(got, "reviewer", rang=False, midturn=False, now=NOW)
    assert line == "reviewer is idle on another machine: it sees this at its next prompt there"


@pytest.mark.parametrize("bad", [
    {"pin": "claude-code:another"},  # the alias moved to another session since
    {"state": "unknown"}, {"state": "listening\n"}, {"state": None},
    {"age": True}, {"age": -1.0}, {"age": float("nan")}, {"age": float("inf")}, {"age": "3"},
    {"pulled_at": None}, {"age": presence.REPORT_FOR + 1},  # too old to say anything
])
def test_a_report_that_is_wrong_stale_or_damaged_says_nothing(bad):
    assert presence.from_report(report(**bad), PIN, NOW) is None


def test_a_damaged_quiet_keeps_the_state_but_no_time():
    got = presence.from_report(report(quiet=float("inf")), PIN, NOW)
    assert got is not None and got.state == "idle" and got.last is None


def test_this_machine_reports_only_sessions_its_hooks_ran_for():
    assert presence.report(presence.Presence(presence.WORKING, "", NOW - 4), PIN, NOW) == {
        "pin": PIN, "state": "working", "quiet": 4.0}
    assert presence.report(presence.Presence(presence.GONE, "its host process has ended", None), PIN, NOW) == {
        "pin": PIN, "state": "gone", "quiet": None}
    for unknown in (presence.NEVER, presence.REMOTE, presence.HUMAN):
        assert presence.report(presence.Presence(presence.UNKNOWN, unknown), PIN, NOW) is None
    # what another machine reported is never reported on as this one's
    assert presence.report(presence.Presence(presence.IDLE, presence.REMOTE, NOW), PIN, NOW) is None
