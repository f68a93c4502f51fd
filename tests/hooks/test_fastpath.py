"""The launcher's fast path: no interpreter when a session has nothing to show (docs/DELIVERY.md, "Fast path").

Every run here goes through ``hooks/run`` exactly as the host starts it, with
``AGENTMSG_PYTHON`` pointing at a shim that records each interpreter start,
so "the fast path was taken" means "no Python process started".
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agentmsg.backends.file import idle, layout
from agentmsg.domain import validate as model
from agentmsg.service import delivery
from tests.support.facade import Draft
from tests.support.helpers_hooks import REVIEWER_SESSION, python_shim, run_hook, starts

NEW_SESSION = "9999c0de-1111-4222-8333-944455556666"


@pytest.fixture
def shim(tmp_path: Path) -> Path:
    return python_shim(tmp_path)


def hook(tmp_path, root, shim, event="UserPromptSubmit", session=REVIEWER_SESSION, **fields):
    """(output, whether an interpreter started) of one Claude hook run through the launcher."""
    before = starts(tmp_path)
    res = run_hook("claude", event, tmp_path, root, session, extra_env={"AGENTMSG_PYTHON": str(shim)}, **fields)
    assert res.returncode == 0 and res.stderr == ""
    return res.stdout, starts(tmp_path) > before


def send(store, collab, subject, *, kind="request", priority="normal", to="reviewer"):
    (sent, *_rest) = store.send(collab.id, collab.driver, Draft(to=to, kind=kind, priority=priority, subject=subject,
                                                                  body="body"))
    return sent.message.id


def files(root: Path, session: str = REVIEWER_SESSION) -> tuple[Path, Path]:
    found = layout.idle_files(str(os.path.realpath(root)), f"claude-code:{session}")
    assert found is not None
    return Path(found[0]), Path(found[1])


def settle(tmp_path, root, shim, **kw):
    """Runs until the marker is set: the first full run finds nothing, the second takes the fast path."""
    out, ran = hook(tmp_path, root, shim, **kw)
    assert out == ""
    out, ran = hook(tmp_path, root, shim, **kw)
    assert (out, ran) == ("", False)


# ---- the fast path itself ----------------------------------------------------------------------


def test_nothing_to_show_starts_no_interpreter(tmp_path, store, collab, shim):
    out, ran = hook(tmp_path, collab.root, shim)
    assert (out, ran) == ("", True)  # the first run finds nothing and leaves the marker
    gen, idle = files(collab.root)
    assert gen.read_text() == idle.read_text() and len(gen.read_text().strip()) == 32
    for _ in range(3):
        assert hook(tmp_path, collab.root, shim) == ("", False)
        assert hook(tmp_path, collab.root, shim, event="Stop", stop_hook_active=False) == ("", False)


def test_an_unbound_session_is_fast_too(tmp_path, store, collab, shim):
    settle(tmp_path, collab.root, shim, session=NEW_SESSION)


def test_session_start_always_runs_in_full(tmp_path, store, collab, shim):
    settle(tmp_path, collab.root, shim)
    out, ran = hook(tmp_path, collab.root, shim, event="SessionStart")
    assert ran and "participant reviewer" in out


def test_no_state_root_creates_nothing(tmp_path, shim):
    root = tmp_path / "nothing-here"
    assert hook(tmp_path, root, shim) == ("", True)
    assert hook(tmp_path, root, shim) == ("", True)
    assert not root.exists()


def test_a_session_id_variable_naming_another_session_writes_no_marker(tmp_path, store, collab, shim):
    res = run_hook("claude", "UserPromptSubmit", tmp_path, collab.root, REVIEWER_SESSION,
                   extra_env={"AGENTMSG_PYTHON": str(shim), "CLAUDE_CODE_SESSION_ID": NEW_SESSION})
    assert res.stdout == ""
    assert not files(collab.root)[1].exists() and not files(collab.root, NEW_SESSION)[1].exists()


def test_fast_path_can_be_turned_off(tmp_path, store, collab, shim):
    settle(tmp_path, collab.root, shim)
    before = starts(tmp_path)
    run_hook("claude", "UserPromptSubmit", tmp_path, collab.root, REVIEWER_SESSION,
             extra_env={"AGENTMSG_PYTHON": str(shim), "AGENTMSG_NO_FASTPATH": "1"})
    assert starts(tmp_path) == before + 1


# ---- a damaged marker costs one full run, never a message ---------------------------------------


def _deleted_gen(gen: Path, idle: Path) -> None:
    gen.unlink()


def _deleted_idle(gen: Path, idle: Path) -> None:
    idle.unlink()


def _deleted_dir(gen: Path, idle: Path) -> None:
    """The runtime's whole folder is gone (its presence marks with it)."""
    import shutil

    shutil.rmtree(gen.parent)


def _corrupt_idle(gen: Path, idle: Path) -> None:
    idle.write_bytes(b"\xff\x00garbage")


def _corrupt_gen(gen: Path, idle: Path) -> None:
    gen.write_text("")


def _empty_both(gen: Path, idle: Path) -> None:
    gen.write_text("\n")
    idle.write_text("\n")


def _idle_is_a_link(gen: Path, idle: Path) -> None:
    idle.unlink()
    idle.symlink_to(gen)


def _backdated(gen: Path, idle: Path) -> None:
    os.utime(gen, (1, 1))
    os.utime(idle, (1, 1))


@pytest.mark.parametrize("damage", [_deleted_gen, _deleted_idle, _deleted_dir, _corrupt_idle, _corrupt_gen,
                                    _empty_both, _idle_is_a_link, _backdated])
def test_a_damaged_marker_never_hides_a_message(tmp_path, store, collab, shim, damage):
    settle(tmp_path, collab.root, shim)
    damage(*files(collab.root))
    send(store, collab, "after the damage")
    out, ran = hook(tmp_path, collab.root, shim)
    assert ran and "subject: after the damage" in out


@pytest.mark.parametrize("damage", [_deleted_gen, _deleted_idle, _corrupt_idle, _corrupt_gen, _empty_both,
                                    _idle_is_a_link])
def test_a_damaged_marker_makes_the_next_run_full_and_is_rebuilt(tmp_path, store, collab, shim, damage):
    settle(tmp_path, collab.root, shim)
    damage(*files(collab.root))
    assert hook(tmp_path, collab.root, shim) == ("", True)
    assert hook(tmp_path, collab.root, shim) == ("", False)


def test_a_marker_written_from_a_generation_read_before_a_send_is_void(tmp_path, store, collab, shim):
    """The race the design closes: a hook read the generation, a send landed, then the hook marked idle."""
    settle(tmp_path, collab.root, shim)
    root, pin = str(os.path.realpath(collab.root)), f"claude-code:{REVIEWER_SESSION}"
    os.unlink(files(collab.root)[0])
    token = idle.idle_token(root, pin)  # the hook's first step
    assert token is not None
    send(store, collab, "raced")  # lands while that hook reads an inbox that does not have it yet
    idle.mark_idle(root, pin, token)  # ... and that hook, having seen nothing, marks the session idle
    out, ran = hook(tmp_path, collab.root, shim)
    assert ran and "subject: raced" in out


# ---- every writer keeps it right ---------------------------------------------------------------------


def test_a_send_wakes_the_recipient_only(tmp_path, store, collab, shim):
    settle(tmp_path, collab.root, shim)
    send(store, collab, "to carol", to="carol")
    assert hook(tmp_path, collab.root, shim) == ("", False)
    send(store, collab, "to reviewer")
    out, ran = hook(tmp_path, collab.root, shim)
    assert ran and "subject: to reviewer" in out


def test_a_broadcast_wakes_every_recipient(tmp_path, store, collab, shim):
    settle(tmp_path, collab.root, shim)
    send(store, collab, "to everyone", to="all")
    out, ran = hook(tmp_path, collab.root, shim)
    assert ran and "subject: to everyone" in out


def test_unacknowledged_mail_keeps_the_full_path_until_acked_then_it_comes_due_again(tmp_path, store, collab, shim):
    """Shown but unacknowledged: every prompt runs in full (the hook counts prompts), and prompt 5 shows it again."""
    settle(tmp_path, collab.root, shim)
    mid = send(store, collab, "pending")
    out, ran = hook(tmp_path, collab.root, shim)
    assert "subject: pending" in out
    for _ in range(4):
        assert hook(tmp_path, collab.root, shim) == ("", True)
    out, ran = hook(tmp_path, collab.root, shim)
    assert ran and "subject: pending" in out
    store.ack(collab.id, collab.reviewer, mid)
    settle(tmp_path, collab.root, shim)


def test_a_retry_wakes_the_session(tmp_path, store, collab, shim):
    mid = send(store, collab, "retried")
    attempt = "3f0c5f8e-0c1a-4d55-9c6b-6c1d2a3b4c5d"
    store.receipt(collab.id, "reviewer", {"type": "presented", "message": mid, "attempt": attempt,
                                          "host": "claude", "hook": "UserPromptSubmit"})
    assert "subject: retried" in hook(tmp_path, collab.root, shim)[0]
    assert hook(tmp_path, collab.root, shim) == ("", True)
    # a marker left by mistake (planted) is exactly what a retry receipt must undo
    gen, idle = files(collab.root)
    idle.write_text(gen.read_text())
    delivery.retry(store, collab.id, collab.reviewer, attempt, mid)
    out, ran = hook(tmp_path, collab.root, shim)
    assert ran and "subject: retried" in out


def stop(tmp_path, root, shim):
    return hook(tmp_path, root, shim, event="Stop", stop_hook_active=False)


def test_stop_skips_the_interpreter_while_mail_waits_and_nothing_can_block(tmp_path, store, collab, shim):
    """The .stop marker: unread mail keeps .idle off, but with no envelope and no wake consent a Stop does
    nothing, so after one full run that finds so it starts no interpreter."""
    settle(tmp_path, collab.root, shim)
    send(store, collab, "unread")
    assert "subject: unread" in hook(tmp_path, collab.root, shim)[0]
    assert stop(tmp_path, collab.root, shim) == ("", True)  # full: finds nothing to do, writes .stop
    base = files(collab.root)[0].with_suffix("")
    assert (base.parent / (base.name + ".stop")).read_text() == files(collab.root)[0].read_text()
    for _ in range(3):
        assert stop(tmp_path, collab.root, shim) == ("", False)
    assert hook(tmp_path, collab.root, shim)[1]  # the prompt still counts (the message comes due again)


def test_an_envelope_voids_the_stop_marker_and_blocks(tmp_path, store, collab, shim):
    settle(tmp_path, collab.root, shim)
    send(store, collab, "hold it")
    hook(tmp_path, collab.root, shim)
    assert stop(tmp_path, collab.root, shim) == ("", True)
    assert stop(tmp_path, collab.root, shim) == ("", False)
    delivery.enable(store, collab.id, collab.reviewer)  # a writer: the generation goes
    out, ran = stop(tmp_path, collab.root, shim)
    assert ran and '"decision"' in out and "hold it" in out


def test_wake_consent_keeps_stop_on_the_full_path(tmp_path, store, collab, shim):
    from agentmsg.service import wake

    settle(tmp_path, collab.root, shim)
    send(store, collab, "waiting")
    hook(tmp_path, collab.root, shim)
    assert stop(tmp_path, collab.root, shim) == ("", True)
    wake.on(store.port, str(collab.root), collab.id, collab.reviewer, {})
    for _ in range(2):  # the Stop hook notes the turn's end for the doorbell: it runs every time
        assert stop(tmp_path, collab.root, shim)[1]


@pytest.mark.parametrize("damage", ["deleted", "other generation", "a link", "garbage"])
def test_a_damaged_stop_marker_costs_one_full_run(tmp_path, store, collab, shim, damage):
    settle(tmp_path, collab.root, shim)
    send(store, collab, "first")
    hook(tmp_path, collab.root, shim)
    stop(tmp_path, collab.root, shim)
    gen = files(collab.root)[0]
    marker = gen.with_name(gen.name[: -len(".gen")] + ".stop")
    if damage == "deleted":
        marker.unlink()
    elif damage == "other generation":
        marker.write_text("0" * 32 + "\n")
    elif damage == "a link":
        marker.unlink()
        marker.symlink_to(gen)
    else:
        marker.write_bytes(b"\xff\x00")
    assert stop(tmp_path, collab.root, shim) == ("", True)  # one full run, which writes it again
    assert stop(tmp_path, collab.root, shim) == ("", False)
    delivery.enable(store, collab.id, collab.reviewer)  # and a writer still voids it
    send(store, collab, "second")
    out, ran = stop(tmp_path, collab.root, shim)
    assert ran and "second" in out


def test_an_envelope_that_waits_keeps_stop_on_the_full_path(tmp_path, store, collab, shim):
    settle(tmp_path, collab.root, shim)
    delivery.enable(store, collab.id, collab.reviewer, wait=1)
    for _ in range(2):
        assert hook(tmp_path, collab.root, shim, event="Stop", stop_hook_active=False) == ("", True)
    delivery.disable(store, collab.id, collab.reviewer)
    settle(tmp_path, collab.root, shim, event="Stop", stop_hook_active=False)


def test_an_envelope_without_wait_still_blocks_a_stop_for_a_new_request(tmp_path, store, collab, shim):
    settle(tmp_path, collab.root, shim, event="Stop", stop_hook_active=False)
    delivery.enable(store, collab.id, collab.reviewer)
    settle(tmp_path, collab.root, shim, event="Stop", stop_hook_active=False)  # nothing pending: still fast
    send(store, collab, "hold the stop")
    out, ran = hook(tmp_path, collab.root, shim, event="Stop", stop_hook_active=False)
    assert ran and '"decision": "block"' in out.replace('":"', '": "') and "hold the stop" in out


def test_a_takeover_wakes_the_new_session(tmp_path, store, collab, shim):
    send(store, collab, "before the takeover")
    settle(tmp_path, collab.root, shim, session=NEW_SESSION)  # not bound yet: fast
    store.join(collab.id, model.pin(f"claude-code:{NEW_SESSION}"), "reviewer", succeeds=collab.reviewer,
               reason="session restarted")
    out, ran = hook(tmp_path, collab.root, shim, session=NEW_SESSION)
    assert ran and "subject: before the takeover" in out
    # the old session lost its binding: a full run, then fast again
    assert hook(tmp_path, collab.root, shim)[1]
    settle(tmp_path, collab.root, shim)


def test_a_join_wakes_the_joining_session(tmp_path, store, collab, shim):
    settle(tmp_path, collab.root, shim, session=NEW_SESSION)
    store.join(collab.id, model.pin(f"claude-code:{NEW_SESSION}"), "newcomer")
    send(store, collab, "welcome", to="newcomer")
    out, ran = hook(tmp_path, collab.root, shim, session=NEW_SESSION)
    assert ran and "subject: welcome" in out


def test_leave_and_close_wake_the_sessions(tmp_path, store, collab, shim):
    send(store, collab, "left behind")
    assert "left behind" in hook(tmp_path, collab.root, shim)[0]
    store.leave(collab.id, collab.reviewer)
    assert hook(tmp_path, collab.root, shim) == ("", True)
    settle(tmp_path, collab.root, shim)
    store.join(collab.id, collab.reviewer, "reviewer")
    assert hook(tmp_path, collab.root, shim)[1]
    store.close(collab.id, collab.driver)
    assert hook(tmp_path, collab.root, shim) == ("", True)
    settle(tmp_path, collab.root, shim)


def test_repair_wakes_every_participant(tmp_path, store, collab, shim):
    settle(tmp_path, collab.root, shim)
    gen, _idle = files(collab.root)
    store.port.rebuild(collab.id) if hasattr(store, "port") else store.rebuild(collab.id)
    assert not gen.exists()
    assert hook(tmp_path, collab.root, shim) == ("", True)


def test_the_marker_files_are_private(tmp_path, store, collab, shim):
    settle(tmp_path, collab.root, shim)
    gen, idle = files(collab.root)
    for path in (gen, idle):
        assert path.stat().st_mode & 0o777 == 0o600
    assert (collab.root / layout.IDLE).stat().st_mode & 0o777 == 0o700
    assert time.time() - idle.stat().st_mtime < 60
