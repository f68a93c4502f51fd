"""A delivery that carries a typed message's artifacts is never rendered ahead (issue 31, docs/HANDOFFS.md): their
state is told as of the prompt, in the session's own checkout, so the prompt hook renders it in full."""

from __future__ import annotations

from pathlib import Path

from agentmsg.backends.file import ahead
from agentmsg.backends.file.store import FileStore
from agentmsg.hooks.core import Hook
from agentmsg.service import handoffs
from tests.runtime.test_ahead import PIN, Session
from tests.runtime.test_ahead import session as session  # the fixture
from tests.support.facade import Draft


def test_a_delivery_with_artifacts_is_left_to_the_prompt_hook(session: Session, tmp_path: Path) -> None:
    repo = tmp_path / "checkout"
    (repo / ".git").mkdir(parents=True)
    (repo / "a.txt").write_text("v1\n")
    session.start()
    typed, _n = handoffs.prepare({"type": "task", "payload": {"task_id": "T-1", "task_text": "look"}},
                                 attach=["a.txt"], cwd=str(repo), redact=False)
    session.store.send(session.collab.id, session.collab.driver, Draft(to="reviewer", handoff=typed))
    session.stop_renderer()
    Path(session.base + ahead.TOOK).unlink(missing_ok=True)
    hook = Hook.for_session(session.root, PIN, ahead.facts(session.root, PIN), FileStore(session.root))
    assert hook.render_ahead() == "full"
    assert not ahead.current(session.root, PIN)
    (repo / "a.txt").write_text("v2\n")  # changed after sending: the prompt says so, in the session's checkout
    text, ran = session.hook(cwd=str(repo))
    assert ran and " UTC: a.txt changed\n" in text, text
