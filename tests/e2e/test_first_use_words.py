"""What README says a newcomer will see, checked against the real host (issue 30, finding 10).

``test_gemini_warns_of_exactly_the_events_readme_names``: Gemini CLI, with this copy installed by
``agentmsg install gemini`` into a fresh HOME, runs one turn against the stub model; the events it says it
skips (one ``Invalid hook event name`` line each) are exactly the Claude-only events README lists, and
README's count of the Gemini events Claude Code ignores matches hooks/hooks.json.  Own HOME and state root.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.hosts import harness, product, stubs

pytestmark = pytest.mark.hosts

GEMINI_EVENTS = {"SessionStart", "BeforeAgent", "AfterAgent", "BeforeTool"}  # those hooks/hooks.json uses
NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def test_gemini_warns_of_exactly_the_events_readme_names(tmp_path: Path) -> None:
    readme = " ".join((product.REPO / "README.md").read_text().split())
    m = re.search(r"Gemini warns once per run for each of `hooks/hooks\.json`'s (\w+) Claude-only events \(([^)]*)\)"
                  r" that it skips it; Claude Code likewise ignores the (\w+) Gemini events\.", readme)
    assert m, "README's sentence about Gemini's skip warnings moved"
    named = re.findall(r"`(\w+)`", m[2])
    assert NUMBERS[m[1]] == len(named)
    events = set(json.loads((product.REPO / "hooks" / "hooks.json").read_text())["hooks"])
    assert NUMBERS[m[3]] == len(events & GEMINI_EVENTS - {"SessionStart"})

    clone = product.export_plugin(tmp_path / "clone")
    home = tmp_path / "home"
    harness._gemini_settings(home)  # offline Gemini (no auth dialog, no update check)
    path = product.host_path(product.python_shim(tmp_path / "pybin"), harness.NODE_BIN)
    env = harness.scrubbed_env(home, env_extra={"PATH": path, "AGENTMSG_HOME": str(tmp_path / "state")})
    done = subprocess.run(["/bin/sh", str(clone / "bin" / "agentmsg"), "install", "gemini"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (tmp_path / "work").mkdir()
    with stubs.GeminiStub() as stub:
        stub.push(stubs.text("ok"))
        run = harness.run_gemini("hello", cwd=tmp_path / "work", home=home, stub=stub,
                                 env_extra={"PATH": path, "AGENTMSG_HOME": str(tmp_path / "state")}).check()
    skipped = re.findall(r'Invalid hook event name: "(\w+)" from extensions config\. Skipping\.', run.stderr)
    assert sorted(skipped) == sorted(named), run.stderr
    assert set(skipped) == events - GEMINI_EVENTS


def test_codex_says_has_not_joined_once_not_at_every_resume(tmp_path: Path) -> None:
    """In Codex, the "has not joined" note (with no agentmsg on the shell's PATH, so it is due) comes at the
    session's start and is not added again when the session is resumed: the resumed turn's request holds it
    once, from the history."""
    clone = product.export_plugin(tmp_path / "clone")
    home = tmp_path / "home"
    codex_home = home / ".codex"
    installed = harness.install_codex_plugin(clone, "agentmsg", codex_home=codex_home, home=home)
    assert (installed / "hooks" / "run").is_file()
    path = product.host_path(product.python_shim(tmp_path / "pybin"))  # python3, and no agentmsg
    extra = {"PATH": path, "AGENTMSG_HOME": str(tmp_path / "state")}
    (tmp_path / "work").mkdir()
    note = "this session has not joined a collaboration"
    with stubs.OpenAIResponsesStub() as stub:
        stub.push(stubs.text("first"))
        first = harness.run_codex("hello", cwd=tmp_path / "work", codex_home=codex_home, home=home, stub=stub,
                                  env_extra=extra).check()
        (req1,) = [r for r in stub.snapshot() if r.agent]
        assert req1.text_blob().count(note) == 1, req1.text_blob()[-2000:]
        for turn in (1, 2):
            n0 = len(stub.snapshot())
            stub.push(stubs.text(f"resumed {turn}"))
            harness.run_codex("again", cwd=tmp_path / "work", codex_home=codex_home, home=home, stub=stub,
                              env_extra=extra, resume=first.session_id).check()
            (req,) = [r for r in stub.snapshot()[n0:] if r.agent]
            assert req.text_blob().count(note) == 1, (turn, req.text_blob()[-3000:])
