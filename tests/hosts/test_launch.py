"""``agentmsg run gemini``: Gemini CLI started with a fixed session id that its shell can name.

A stand-in ``gemini`` on PATH (a shell script) records the argv and environment it was started with, and
runs ``agentmsg open`` the way the model's shell would: the pin it acts as is ``gemini:<the fixed id>``.
The real Gemini CLI with this launcher runs in tests/e2e/test_e2e_hosts.py.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

from tests.support.cli_helpers import REPO_ROOT, run, run_json


def fake_gemini(tmp_path: Path) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "gemini"
    script.write_text(f"""#!/bin/sh
printf '%s\\n' "$@" > "{tmp_path}/argv"
printf '%s' "$GEMINI_SESSION_ID" > "{tmp_path}/sid"
PYTHONPATH="{REPO_ROOT}" exec "{sys.executable}" -m agentmsg.cli open --alias g --label l --task t --json
""")
    script.chmod(0o755)
    return bindir


def test_run_gemini_fixes_the_session_id_and_the_shell_acts_as_it(tmp_path):
    path = f"{fake_gemini(tmp_path)}:/usr/bin:/bin"
    env = {"PATH": path, "CLAUDE_CODE_SESSION_ID": None, "CODEX_THREAD_ID": None, "COPILOT_AGENT_SESSION_ID": None,
           "GEMINI_SESSION_ID": None}
    code, out, err = run("run", "gemini", "--", "-p", "hello", "--yolo", env=env, root=tmp_path / "state")
    assert code == 0, err
    sid = (tmp_path / "sid").read_text()
    assert str(uuid.UUID(sid)) == sid
    assert (tmp_path / "argv").read_text().splitlines() == ["--session-id", sid, "-p", "hello", "--yolo"]
    doc = json.loads(out)
    assert doc["ok"] and doc["result"]["pin"] == f"gemini:{sid}", doc


def test_run_gemini_keeps_a_chosen_id_and_a_resumed_uuid(tmp_path):
    path = f"{fake_gemini(tmp_path)}:/usr/bin:/bin"
    sid = str(uuid.uuid4())
    for args in (["--session-id", sid, "-p", "x"], ["--resume", sid, "-p", "x"]):
        code, _out, err = run("run", "gemini", "--", *args, env={"PATH": path}, root=tmp_path / "state")
        assert code == 0, err
        assert (tmp_path / "sid").read_text() == sid
        assert (tmp_path / "argv").read_text().splitlines() == args


def test_run_gemini_refuses_what_it_cannot_bind(tmp_path):
    path = f"{fake_gemini(tmp_path)}:/usr/bin:/bin"
    for args, why in ((["--resume", "latest"], "--resume needs the session's UUID"),
                      (["--session-id", "abc"], "--session-id must be a UUID")):
        code, out, err = run("run", "gemini", "--", *args, env={"PATH": path}, root=tmp_path / "state")
        assert code == 2 and err.startswith("usage: agentmsg run gemini: ") and why in err and out == ""
        assert not (tmp_path / "argv").exists()
    code, _out, err = run("run", "gemini", env={"PATH": "/usr/bin:/bin"}, root=tmp_path / "state")
    assert code == 2 and err.startswith("usage: `gemini` is not on PATH")
    res = run_json("run", "gemini", "--nope", root=tmp_path / "state")  # its own options are checked as usual
    assert res.code == 2 and res.doc["command"] == "run gemini"
