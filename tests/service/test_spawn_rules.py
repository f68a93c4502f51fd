"""Spawned sessions' rules on every backend: who may stop or resume one, and what a failed spawn undoes."""

from __future__ import annotations

import time

import pytest

from agentmsg.domain import rules
from agentmsg.domain.values import Pin
from agentmsg.errors import Conflict, IdentityError, UsageError

DRIVER, REVIEWER, OTHER = Pin("codex", "drv-1"), Pin("claude-code", "rev-1"), Pin("codex", "oth-1")
CAROL, NEW = Pin("human", "carol"), Pin("claude-code", "new-1")
PLACE = {"where": "tmux", "socket": "/tmp/s", "target_window": "u:1", "window": "@1", "pane": "%1", "pid": 4242,
         "pid_start": "123", "cwd": "/tmp"}


def _spawned(box, cid: str, spawner: Pin, alias: str, pin: Pin) -> dict:
    """``spawner`` spawned ``pin`` into ``alias`` (the ticket its hook would use, then the spawned event)."""
    box.invite(cid, spawner, "a" * 64, for_alias=alias, expires_at=time.time() + 60)
    box.join(cid, pin, alias, ticket="a" * 64)
    with box.store.transaction(cid) as tx:
        return dict(tx.append_event(rules.spawned_event(tx.registry(), spawner, alias, str(pin), PLACE,
                                                        host="claude", how="spawn")))


def test_the_spawner_the_opener_and_a_person_may_stop_a_spawned_session_and_nobody_else(box) -> None:
    cid = box.open(DRIVER, "driver", "review", "t").collab
    box.join(cid, OTHER, "other")
    box.join(cid, Pin("codex", "sp-1"), "spawner")
    ev = _spawned(box, cid, Pin("codex", "sp-1"), "rev", REVIEWER)
    reg = box.registry(cid)
    with pytest.raises(IdentityError):
        rules.kill_event(reg, OTHER, "rev", force=True, pid=4242, spawned=ev)
    for who in (Pin("codex", "sp-1"), DRIVER, CAROL):  # no --force needed for a session agentmsg spawned
        killed = rules.kill_event(reg, who, "rev", force=False, pid=4242, spawned=ev)
        assert killed["spawned"] is True and killed["pin"] == str(REVIEWER)
    assert rules.kill_event(reg, DRIVER, "rev", force=False, pid=1, spawned=ev)["alias"] == "driver"
    with pytest.raises(IdentityError):  # a spawn of an earlier pin is not this session's
        rules.kill_event(reg, DRIVER, "rev", force=False, pid=1, spawned={**ev, "pin": "claude-code:old"})
    with pytest.raises(UsageError):
        rules.kill_event(reg, CAROL, "rev", force=False, pid=1, spawned=None)
    assert rules.latest_spawn(box.store.events(cid), "rev", str(REVIEWER))["seq"] == ev["seq"]
    assert rules.latest_spawn(box.store.events(cid), "rev", "claude-code:other") is None


def test_resume_is_for_the_spawner_the_opener_or_a_person(box) -> None:
    cid = box.open(DRIVER, "driver", "review", "t").collab
    box.join(cid, OTHER, "other")
    ev = _spawned(box, cid, DRIVER, "rev", REVIEWER)
    reg = box.registry(cid)
    assert rules.may_restart(reg, DRIVER, "rev", ev) == str(REVIEWER)
    assert rules.may_restart(reg, CAROL, "rev", None) == str(REVIEWER)
    with pytest.raises(IdentityError):
        rules.may_restart(reg, OTHER, "rev", ev)


def test_a_spawn_needs_a_member_and_a_free_alias(box) -> None:
    cid = box.open(DRIVER, "driver", "review", "t").collab
    reg = box.registry(cid)
    assert rules.spawn_target(reg, DRIVER, "rev") == "driver"
    with pytest.raises(Conflict):
        rules.spawn_target(reg, DRIVER, "driver")
    with pytest.raises(IdentityError):
        rules.spawn_target(reg, OTHER, "rev")


def test_a_failed_spawn_revokes_its_ticket_and_undoes_the_binding_it_made(box) -> None:
    cid = box.open(DRIVER, "driver", "review", "t").collab
    box.invite(cid, DRIVER, "b" * 64, for_alias="rev", expires_at=time.time() + 60)
    box.invite(cid, DRIVER, "c" * 64, for_alias="imp", expires_at=time.time() + 60)
    box.join(cid, REVIEWER, "rev", ticket="b" * 64)  # its hook bound it, then its first turn never ended
    with box.store.transaction(cid) as tx:
        ev = tx.append_event(rules.spawn_failed_event(tx.registry(), DRIVER, "rev", "b" * 64, "timed out",
                                                      str(REVIEWER)))
        assert ev["pin"] == str(REVIEWER)
        ev = tx.append_event(rules.spawn_failed_event(tx.registry(), DRIVER, "imp", "c" * 64, "no hooks"))
        assert "pin" not in ev  # it never bound: only its ticket goes
    reg = box.registry(cid)
    assert set(reg.participants) == {"driver"} and reg.tickets == {}
    assert box.store.bindings(str(REVIEWER)) == []
    box.invite(cid, DRIVER, "d" * 64, for_alias="rev", expires_at=time.time() + 60)  # the alias is free again
    box.join(cid, NEW, "rev", ticket="d" * 64)
    assert box.registry(cid).holder("rev") == str(NEW)


def test_a_resume_ticket_moves_the_alias_only_to_a_new_session_id_and_only_once(box) -> None:
    cid = box.open(DRIVER, "driver", "review", "t").collab
    box.join(cid, REVIEWER, "rev")
    with box.store.transaction(cid) as tx:
        tx.append_event(rules.resume_ticket_event(tx.registry(), DRIVER, "rev", "e" * 64,
                                                  expires_at=time.time() + 60))
    reg = box.registry(cid)
    assert reg.tickets["e" * 64]["succeeds"] == str(REVIEWER)
    assert rules.resume_takeover(reg, REVIEWER, "e" * 64) is None  # the host kept the id: nothing moves
    with box.store.transaction(cid) as tx:
        ev = tx.append_event(rules.resume_takeover(tx.registry(), NEW, "e" * 64))
    assert (ev["type"], ev["reason"], ev["old_pin"], ev["pin"]) == ("succeeded", "resume", str(REVIEWER), str(NEW))
    reg = box.registry(cid)
    assert reg.holder("rev") == str(NEW) and reg.tickets == {}
    assert rules.resume_takeover(reg, Pin("claude-code", "third"), "e" * 64) is None  # spent
    with box.store.transaction(cid) as tx:  # a ticket a same-id resume did not need is spent by its spawned event
        tx.append_event(rules.resume_ticket_event(tx.registry(), DRIVER, "rev", "f" * 64,
                                                  expires_at=time.time() + 60))
        made = rules.spawned_event(tx.registry(), DRIVER, "rev", str(NEW), PLACE, host="claude", how="resume")
        tx.append_event({**made, "ticket": "f" * 64})
    assert box.registry(cid).tickets == {}
