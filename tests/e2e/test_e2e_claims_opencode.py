"""End-to-end: claims refused before the tool runs in the REAL OpenCode 1.18.33 (issue 28, docs/CLAIMS.md).

agentmsg's OpenCode plugin (installed by ``agentmsg install opencode``) runs ``hooks/run opencode pretool`` from
its ``tool.execute.before`` and throws the refusal, which is how OpenCode refuses a tool call.  bob holds
``src/retry.py`` exclusively; the model's shell write to it is refused (the file unchanged, the next request
holding the refusal naming bob), and after bob releases the same write goes through.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_e2e_opencode import LAUNCHER, OpenCode
from tests.support import gitrepos
from tests.support.cli_helpers import run, run_json
from tests.support.hosts import stubs

pytestmark = pytest.mark.hosts

BOB = "codex:bob-1"
ORIGINAL = "def retry():\n    pass\n"
REFUSED = "src/retry.py is claimed exclusively by bob (codex:bob-1) until 20"


def test_opencode_shell_write_is_refused_until_the_claim_is_released(tmp_path: Path) -> None:
    root = tmp_path / "state"
    host = OpenCode(tmp_path, root)
    code, doc, err = run_json("open", "--self", "human:carol", "--alias", "carol", "--label", "c", "--task", "t",
                              root=root)
    assert code == 0, (doc, err)
    cid = doc["result"]["collab"]
    assert run("join", "--collab", cid, "--self", BOB, "--alias", "bob", root=root).code == 0
    repo = gitrepos.repo(host.cwd)
    target = repo / "src" / "retry.py"
    assert run("claim", "src/retry.py", "--reason", "fixing retries", "--collab", cid, "--self", BOB, root=root,
               cwd=repo).code == 0
    with stubs.ChatCompletionsStub() as stub:
        joined, _ = host.turn(stub, "join", [stubs.shell(f"{LAUNCHER} join --collab {cid} --alias ann --json"),
                                             stubs.text("joined")])
        sid = joined.session_id
        _run, reqs = host.turn(stub, "fix retry", [stubs.shell("echo x > src/retry.py"), stubs.text("done")],
                               session=sid)
        assert target.read_text() == ORIGINAL
        after = stubs_text(reqs[1])
        assert REFUSED in after and f"agentmsg send --collab {cid} --to bob" in after and "fixing retries" in after
        assert run("release", "src/retry.py", "--collab", cid, "--self", BOB, root=root, cwd=repo).code == 0
        host.turn(stub, "again", [stubs.shell("echo x > src/retry.py"), stubs.text("written")], session=sid)
        assert target.read_text() == "x\n"


def stubs_text(req: stubs.Recorded) -> str:
    return req.text_blob()
