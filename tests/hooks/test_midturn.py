"""Mid-turn delivery: the PostToolUse hook, its opt-in setting and its launcher marker (docs/DELIVERY.md).

Every hook run goes through ``hooks/run claude midturn`` as Claude Code starts
it, with an interpreter shim that records each start (see test_fastpath.py),
so "fast" means "no Python process started".
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentmsg.backends.file import layout
from agentmsg.domain import midturn
from agentmsg.domain import validate as model
from agentmsg.service import delivery
from tests.hooks.test_fastpath import NEW_SESSION, files, send
from tests.support.cli_helpers import run, run_json
from tests.support.helpers_hooks import REVIEWER_SESSION, python_shim, receipts, run_hook, starts

POST = "PostToolUse"


@pytest.fixture
def shim(tmp_path: Path) -> Path:
    return python_shim(tmp_path)


def tool(tmp_path, root, shim, session=REVIEWER_SESSION):
    """(additionalContext or "", whether an interpreter started) of one PostToolUse run through the launcher."""
    before = starts(tmp_path)
    res = run_hook("claude", POST, tmp_path, root, session, extra_env={"AGENTMSG_PYTHON": str(shim)},
                   tool_name="Bash", tool_input={"command": "sleep 1"}, tool_response={"stdout": "", "stderr": ""},
                   tool_use_id="toolu_1")
    assert res.returncode == 0 and res.stderr == ""
    text = ""
    if res.stdout:
        doc = res.json
        assert set(doc) == {"hookSpecificOutput"} and doc["hookSpecificOutput"]["hookEventName"] == POST
        text = doc["hookSpecificOutput"]["additionalContext"]
    return text, starts(tmp_path) > before


def prompt(tmp_path, root, shim, session=REVIEWER_SESSION):
    res = run_hook("claude", "UserPromptSubmit", tmp_path, root, session, extra_env={"AGENTMSG_PYTHON": str(shim)})
    assert res.returncode == 0 and res.stderr == ""
    return res.text if res.stdout else ""


def mid_file(root: Path, session: str = REVIEWER_SESSION) -> Path:
    path = layout.midturn_file(str(os.path.realpath(root)), f"claude-code:{session}")
    assert path is not None
    return Path(path)


def settle(tmp_path, root, shim, session=REVIEWER_SESSION):
    """A full run that finds nothing due, then a fast one."""
    assert tool(tmp_path, root, shim, session)[0] == ""
    assert tool(tmp_path, root, shim, session) == ("", False)


def on(store, collab, **kw):
    return delivery.set_midturn(store, collab.id, collab.reviewer, on=True, **kw)


# ---- the rules (pure) -----------------------------------------------------------------------------------


def test_setting_fold_is_per_exact_binding_and_newest_wins():
    recs = [{"type": "delivery-midturn", "alias": "r", "pin": "claude-code:a", "on": True, "priority": "all",
             "min_gap": 5, "ts": "t1"},
            {"type": "delivery-midturn", "alias": "r", "pin": "claude-code:b", "on": True, "ts": "t2"},
            {"type": "delivery-enabled", "alias": "r", "pin": "claude-code:a"}]
    s = midturn.latest(recs, "r", "claude-code:a")
    assert s is not None and (s.on, s.priority, s.min_gap) == (True, "all", 5.0)
    assert midturn.active(recs, "r", "claude-code:a", holder="claude-code:b", closed=False) is None  # taken over
    assert midturn.active(recs, "r", "claude-code:a", holder="claude-code:a", closed=True) is None
    b = midturn.latest(recs, "r", "claude-code:b")
    assert b is not None and (b.priority, b.min_gap) == ("high", midturn.DEFAULT_GAP)  # the defaults
    recs.append({"type": "delivery-midturn", "alias": "r", "pin": "claude-code:a", "on": False, "ts": "t3"})
    assert midturn.active(recs, "r", "claude-code:a", holder="claude-code:a", closed=False) is None
    damaged = midturn.Setting({"alias": "r", "pin": "p", "on": "yes", "priority": "urgent", "min_gap": True})
    assert (damaged.on, damaged.priority, damaged.min_gap) == (False, "high", midturn.DEFAULT_GAP)


def test_gap():
    s = midturn.Setting({"alias": "r", "pin": "p", "on": True, "min_gap": 60})
    assert s.may_inject(None, 100.0) and s.may_inject(40.0, 100.0) and not s.may_inject(41.0, 100.0)


# ---- the hook ---------------------------------------------------------------------------------------------


def test_off_by_default_nothing_arrives_mid_turn(tmp_path, store, collab, shim):
    send(store, collab, "urgent but not opted in", priority="high")
    assert tool(tmp_path, collab.root, shim) == ("", True)
    assert tool(tmp_path, collab.root, shim) == ("", False)  # off: nothing is ever due mid-turn
    assert "urgent but not opted in" in prompt(tmp_path, collab.root, shim)  # it waits for the prompt


def test_a_high_priority_message_arrives_mid_turn_inside_the_boundary_presented_not_acked(
        tmp_path, store, collab, shim):
    on(store, collab, min_gap=0)
    settle(tmp_path, collab.root, shim)
    normal = send(store, collab, "normal waits")
    text, ran = tool(tmp_path, collab.root, shim)
    assert (text, ran) == ("", True)  # woken, nothing qualifies, marker rebuilt
    assert tool(tmp_path, collab.root, shim) == ("", False)
    urgent = send(store, collab, "urgent now", priority="high")
    text, ran = tool(tmp_path, collab.root, shim)
    assert ran and "mid-turn delivery" in text and "subject: urgent now" in text and "normal waits" not in text
    nonce = text.split("⟦", 1)[1].split("⟧", 1)[0]
    inside = text.split(nonce)[1]
    assert "subject: urgent now" in inside
    kinds = [(r["type"], r.get("message"), r.get("hook")) for r in receipts(collab.root, collab.id, "reviewer")]
    assert ("presented", urgent, POST) in kinds and not any(k == "ack" for k, *_ in kinds)
    assert tool(tmp_path, collab.root, shim) == ("", True)  # already shown: nothing more
    assert tool(tmp_path, collab.root, shim) == ("", False)
    later = prompt(tmp_path, collab.root, shim)
    assert "normal waits" in later and "urgent now" not in later  # shown mid-turn counts as shown
    assert normal in later


def test_priority_all_lets_normal_messages_through(tmp_path, store, collab, shim):
    on(store, collab, priority="all", min_gap=0)
    send(store, collab, "a normal update", kind="update")
    assert "a normal update" in tool(tmp_path, collab.root, shim)[0]


def test_the_gap_holds_a_second_message_and_keeps_the_slow_path_until_it_passes(tmp_path, store, collab, shim):
    on(store, collab, min_gap=3600)
    send(store, collab, "first", priority="high")
    assert "subject: first" in tool(tmp_path, collab.root, shim)[0]
    send(store, collab, "second", priority="high")
    for _ in range(2):  # held by the gap: no output, and no marker (time alone will let it through)
        assert tool(tmp_path, collab.root, shim) == ("", True)
    assert not mid_file(collab.root).exists()
    state = collab.root / "collabs" / collab.id / "state" / "reviewer.hook.json"
    doc = json.loads(state.read_text())
    doc["mid"] -= 3601  # the gap has passed
    state.write_text(json.dumps(doc))
    text, _ran = tool(tmp_path, collab.root, shim)
    assert "subject: second" in text and "subject: first" not in text


def test_turning_it_on_or_off_wakes_the_session(tmp_path, store, collab, shim):
    send(store, collab, "waiting", priority="high")
    settle(tmp_path, collab.root, shim)
    on(store, collab, min_gap=0)
    assert "subject: waiting" in tool(tmp_path, collab.root, shim)[0]
    send(store, collab, "after off", priority="high")
    delivery.set_midturn(store, collab.id, collab.reviewer, on=False)
    assert tool(tmp_path, collab.root, shim) == ("", True)
    assert tool(tmp_path, collab.root, shim) == ("", False)


def test_no_state_root_starts_no_interpreter_and_creates_nothing(tmp_path, shim):
    root = tmp_path / "never-used"
    for _ in range(2):
        assert tool(tmp_path, root, shim) == ("", False)
    assert not root.exists()


def test_a_takeover_does_not_inherit_the_setting(tmp_path, store, collab, shim):
    on(store, collab, min_gap=0)
    store.join(collab.id, model.pin(f"claude-code:{NEW_SESSION}"), "reviewer", succeeds=collab.reviewer,
               reason="session restarted")
    send(store, collab, "for the new holder", priority="high")
    assert tool(tmp_path, collab.root, shim, NEW_SESSION) == ("", True)
    assert tool(tmp_path, collab.root, shim) == ("", True)  # the old session lost the binding


# ---- the marker: derived; damage costs one full run, never a message ------------------------------------------


def _deleted(mid: Path, gen: Path) -> None:
    mid.unlink()


def _corrupt(mid: Path, gen: Path) -> None:
    mid.write_bytes(b"\xff\x00garbage")


def _backdated(mid: Path, gen: Path) -> None:
    os.utime(mid, (1, 1))
    os.utime(gen, (1, 1))


def _a_link(mid: Path, gen: Path) -> None:
    mid.unlink()
    mid.symlink_to(gen)


def _gen_deleted(mid: Path, gen: Path) -> None:
    gen.unlink()


@pytest.mark.parametrize("damage", [_deleted, _corrupt, _backdated, _a_link, _gen_deleted])
def test_a_damaged_marker_never_hides_an_urgent_message(tmp_path, store, collab, shim, damage):
    on(store, collab, min_gap=0)
    settle(tmp_path, collab.root, shim)
    damage(mid_file(collab.root), files(collab.root)[0])
    send(store, collab, "after the damage", priority="high")
    text, ran = tool(tmp_path, collab.root, shim)
    assert ran and "subject: after the damage" in text


@pytest.mark.parametrize("damage", [_deleted, _corrupt, _a_link, _gen_deleted])
def test_a_damaged_marker_costs_one_full_run_then_is_rebuilt(tmp_path, store, collab, shim, damage):
    settle(tmp_path, collab.root, shim)
    damage(mid_file(collab.root), files(collab.root)[0])
    assert tool(tmp_path, collab.root, shim) == ("", True)
    assert tool(tmp_path, collab.root, shim) == ("", False)


def test_a_marker_left_while_a_send_landed_is_void(tmp_path, store, collab, shim):
    """A marker planted from the current generation is voided by the send that follows it."""
    on(store, collab, min_gap=0)
    settle(tmp_path, collab.root, shim)
    gen = files(collab.root)[0]
    token = gen.read_text()
    send(store, collab, "raced", priority="high")
    mid_file(collab.root).write_text(token)
    assert "subject: raced" in tool(tmp_path, collab.root, shim)[0]


def test_the_prompt_marker_and_the_mid_turn_marker_are_independent(tmp_path, store, collab, shim):
    """Normal mail keeps prompts on the full path, yet tool calls stay fast once checked."""
    on(store, collab, min_gap=0)
    send(store, collab, "normal", kind="update")
    settle(tmp_path, collab.root, shim)
    assert "normal" in prompt(tmp_path, collab.root, shim)
    assert tool(tmp_path, collab.root, shim) == ("", True)  # a prompt was counted: one full check
    assert tool(tmp_path, collab.root, shim) == ("", False)


def test_a_full_prompt_run_with_pending_mail_drops_the_mid_turn_marker(tmp_path, store, collab, shim):
    """A prompt counted can bring a shown, unacknowledged message due again: the next tool call checks in full."""
    on(store, collab, min_gap=0)
    send(store, collab, "still open", priority="high")
    assert "still open" in tool(tmp_path, collab.root, shim)[0]
    settle(tmp_path, collab.root, shim)
    assert mid_file(collab.root).exists()
    prompt(tmp_path, collab.root, shim)
    assert not mid_file(collab.root).exists()
    assert tool(tmp_path, collab.root, shim) == ("", True)
    assert tool(tmp_path, collab.root, shim) == ("", False)


# ---- the CLI -------------------------------------------------------------------------------------------------


def test_cli_midturn_on_off_and_inspect(tmp_path, store, collab):
    self_ = str(collab.reviewer)
    code, doc, _err = run_json("delivery", "midturn", "on", "--priority", "all", "--min-gap", "2m",
                               "--collab", collab.id, "--self", self_, root=collab.root)
    assert code == 0 and doc["result"]["on"] is True and doc["result"]["priority"] == "all"
    assert doc["result"]["min_gap_seconds"] == 120
    code, out, _err = run("delivery", "inspect", "--collab", collab.id, "--self", self_, root=collab.root)
    assert code == 0 and "mid-turn delivery: on, priority all, at least 120s apart" in out
    code, out, _err = run("delivery", "midturn", "off", "--collab", collab.id, "--self", self_, root=collab.root)
    assert code == 0 and "mid-turn delivery: off" in out


@pytest.mark.parametrize("args", [("maybe",), ("on", "--priority", "urgent"), ("on", "--min-gap", "2h"),
                                  ("on", "--min-gap", "soon")])
def test_cli_midturn_bad_input_is_one_line_exit_2(tmp_path, store, collab, args):
    code, out, err = run("delivery", "midturn", *args, "--collab", collab.id, "--self", str(collab.reviewer),
                         root=collab.root)
    assert code == 2 and out == "" and err.count("\n") == 1


# ---- the setting through the port (every backend) -------------------------------------------------------


def test_setting_round_trips_through_every_backend(port, box):
    from agentmsg.errors import IdentityError, UsageError

    driver, reviewer = model.pin("codex:d-1"), model.pin("claude-code:r-1")
    cid = box.open(driver, "driver", "x", "t", {"adapter": "hook"}).collab
    box.join(cid, reviewer, "reviewer")
    assert delivery.inspect(port, cid, reviewer, adapters={})["midturn"] is None
    out = delivery.set_midturn(port, cid, reviewer, on=True, priority="all", min_gap=5)
    assert (out["alias"], out["on"], out["priority"], out["min_gap_seconds"]) == ("reviewer", True, "all", 5.0)
    assert delivery.inspect(port, cid, reviewer, adapters={})["midturn"]["on"] is True
    delivery.set_midturn(port, cid, reviewer, on=False)
    assert delivery.inspect(port, cid, reviewer, adapters={})["midturn"]["on"] is False
    with pytest.raises(UsageError):
        delivery.set_midturn(port, cid, reviewer, on=True, priority="urgent")
    with pytest.raises(IdentityError):
        delivery.set_midturn(port, cid, model.pin("claude-code:stranger"), on=True)
