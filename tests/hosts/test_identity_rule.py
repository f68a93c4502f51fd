"""``identity.resolve``'s two rules, without processes (tests/adversarial/test_identity_ancestry.py runs them)."""

from __future__ import annotations

import pytest

from agentmsg.errors import IdentityError
from agentmsg.hosts import identity

BOTH = {"CLAUDE_CODE_SESSION_ID": "inner", "CODEX_THREAD_ID": "outer"}


def test_recorded_session_decides_between_two_variables() -> None:
    inside = (4242, ["claude-code:inner"])
    assert str(identity.resolve(None, BOTH, inside)) == "claude-code:inner"
    assert str(identity.resolve("claude-code:inner", BOTH, inside)) == "claude-code:inner"
    with pytest.raises(IdentityError, match=r"inside session claude-code:inner \(host process 4242.*codex:outer$"):
        identity.resolve("codex:outer", BOTH, inside)


def test_recorded_session_refuses_a_human_pin_with_no_variable() -> None:
    with pytest.raises(IdentityError, match=r"refusing to act as human:alice$"):
        identity.resolve("human:alice", {}, (7, ["codex:outer"]))
    assert str(identity.resolve(None, {}, (7, ["codex:outer"]))) == "codex:outer"


def test_one_process_with_several_sessions() -> None:
    inside = (9, ["opencode:ses_a", "opencode:ses_b"])
    assert str(identity.resolve(None, {"OPENCODE_SESSION_ID": "ses_b"}, inside)) == "opencode:ses_b"
    assert str(identity.resolve("opencode:ses_a", {"OPENCODE_SESSION_ID": "ses_b"}, inside)) == "opencode:ses_a"
    with pytest.raises(IdentityError, match="pass --self to choose one of them"):
        identity.resolve(None, {}, inside)


def test_without_a_record_the_variables_decide_as_before() -> None:
    assert str(identity.resolve("codex:outer", BOTH)) == "codex:outer"
    with pytest.raises(IdentityError, match="pass --self to choose"):
        identity.resolve(None, BOTH)
    assert str(identity.resolve("human:alice", {})) == "human:alice"
