"""Trust, round three, classes 7 and 8: the recorded host session above the caller decides who it is.

Class 7: a session launched by another host inherits that host's variable (a Claude Code started by Codex
carries ``CODEX_THREAD_ID``) and could act as the outer session with ``--self``.  Class 8: an agent that
unsets its own variable (``env -u CLAUDE_CODE_SESSION_ID``) could act as ``human:alice``.

The ancestry is built for real: a "host" is a long-running python process renamed (``prctl``) so that it is
no shell or wrapper; its child records the session facts with the very calls the SessionStart hook makes
(``facts.record(root, pin, facts.gather(...))``), which find the host as the hook's parent; then the real
CLI runs below it through ``/bin/sh -c``, as an agent's shell tool runs it.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentmsg.hosts import registry
from tests.support.cli_helpers import clean_env
from tests.support.helpers_hooks import hook_command, host_env, payload

#: host module name -> (variable, pin runtime), for the five hosts whose agent's shell names its session.
VARS = {name: (h.shell_var, h.runtime) for name, h in registry.by_name().items() if h.shell_var}
HOSTS = ("claude", "codex", "gemini", "copilot", "opencode")
SESSION = {"claude": "5418c0de-1111-4222-8333-944455556666", "codex": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
           "gemini": "9b2f6c1e-aaaa-4bbb-8ccc-dddddddddddd", "copilot": "c0b1107a-1234-4567-89ab-cdefcdefcdef",
           "opencode": "ses_dcfccc393ffemHbMBI9qnko7Dz"}

#: A host process: renamed so ``facts.host_process`` stops at it, records its session (optional), runs a
#: child below itself and stays alive until the child ends.
HOST = r"""
import ctypes, json, subprocess, sys
step = json.loads(sys.argv[1])
ctypes.CDLL(None).prctl(15, step["name"].encode(), 0, 0, 0)  # PR_SET_NAME: not a shell, not python
if step.get("record"):
    subprocess.run(step["record"], check=True, env=step["env"])
sys.exit(subprocess.run(step["then"], env=step["env"]).returncode)
"""
#: What the SessionStart hook calls (agentmsg/hooks/base.py), run as a child of the host.
RECORD = ("import sys\nfrom agentmsg.runtime import facts\n"
          "root, host, session, pin = sys.argv[1:]\n"
          "import os\nfacts.record(root, pin, facts.gather(host, session, os.environ))\n")
#: The agent's command: several CLI calls, each through ``/bin/sh -c``, results as JSON lines.
CALLS = r"""
import json, subprocess, sys
for argv in json.loads(sys.argv[1]):
    done = subprocess.run(["/bin/sh", "-c", '"$@"; exit $?', "sh", *argv], capture_output=True, text=True)
    print(json.dumps([done.returncode, done.stdout, done.stderr]))
"""


def pin(host: str) -> str:
    return f"{VARS[host][1]}:{SESSION[host]}"


def host_step(name: str, root: Path, record: str | None, then: list[str], env: dict[str, str]) -> list[str]:
    step: dict[str, Any] = {"name": name, "then": then, "env": env}
    if record is not None:
        step["record"] = [sys.executable, "-c", RECORD, str(root), record, SESSION[record], pin(record)]
    return [sys.executable, "-c", HOST, json.dumps(step)]


def under_hosts(root: Path, chain: list[tuple[str, str | None]], calls: list[list[str]],
                env: dict[str, str | None]) -> list[tuple[int, str, str]]:
    """Run ``calls`` (CLI argument lists) below the host processes of ``chain``, outermost first."""
    full = clean_env(root, env)
    argv: list[str] = [sys.executable, "-c", CALLS,
                       json.dumps([[sys.executable, "-m", "agentmsg.cli", *c] for c in calls])]
    for name, record in reversed(chain):
        argv = host_step(name, root, record, argv, full)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = [tuple(json.loads(line)) for line in done.stdout.splitlines()]
    for code, _, err in out:
        assert "Traceback" not in err
        assert code == 0 or len(err.splitlines()) == 1, err
    return out  # type: ignore[return-value]


def both_vars(inner: str, outer: str) -> dict[str, str | None]:
    env: dict[str, str | None] = {VARS[h][0]: None for h in HOSTS}
    env.update({VARS[outer][0]: SESSION[outer], VARS[inner][0]: SESSION[inner]})
    return env


def refused(result: tuple[int, str, str], inner: str, wanted: str) -> None:
    code, _, err = result
    assert code == 9, result
    assert err.startswith(f"identity: this process runs inside session {pin(inner)} (host process "), err
    assert err.rstrip("\n").endswith(f"refusing to act as {wanted}"), err


def acts_as(result: tuple[int, str, str], who: str) -> None:
    code, out, err = result
    assert code == 0, err
    assert json.loads(out)["result"]["self"] == who


@pytest.mark.parametrize(("inner", "outer"), list(itertools.permutations(HOSTS, 2)))
def test_inherited_variable_does_not_choose_the_outer_session(tmp_path: Path, inner: str, outer: str) -> None:
    """Class 7, every ordered pair: ``outer`` launched ``inner``; both recorded, both variables set."""
    root = tmp_path / "root"
    calls = [["status", "--json", "--self", pin(outer)], ["status", "--json", "--self", pin(inner)],
             ["status", "--json"]]
    out = under_hosts(root, [(f"{outer[:6]}-host", outer), (f"{inner[:6]}-host", inner)], calls,
                      both_vars(inner, outer))
    refused(out[0], inner, pin(outer))
    acts_as(out[1], pin(inner))
    acts_as(out[2], pin(inner))  # no --self: the nearest recorded session, not "both are set"


@pytest.mark.parametrize(("inner", "outer"), [("claude", "codex"), ("codex", "claude")])
def test_outer_session_alone_recorded_still_decides(tmp_path: Path, inner: str, outer: str) -> None:
    """The inner host recorded nothing: the nearest recorded ancestor (the outer) decides, and no other pin
    (nor the unproven inner one) is taken; SECURITY.md states this limit."""
    root = tmp_path / "root"
    out = under_hosts(root, [("outer-host", outer), ("inner-host", None)],
                      [["status", "--json", "--self", pin(inner)], ["status", "--json", "--self", "human:alice"]],
                      both_vars(inner, outer))
    refused(out[0], outer, pin(inner))
    refused(out[1], outer, "human:alice")


@pytest.mark.parametrize("host", HOSTS)
def test_agent_that_unsets_its_variable_is_not_a_human(tmp_path: Path, host: str) -> None:
    """Class 8: ``env -u VAR agentmsg --self human:alice`` inside a recorded session is refused."""
    root = tmp_path / "root"
    env: dict[str, str | None] = {VARS[h][0]: None for h in HOSTS}
    calls = [["status", "--json", "--self", "human:alice"], ["status", "--json"],
             ["status", "--json", "--self", "claude-code:someone-else" if host != "claude" else "codex:another"]]
    out = under_hosts(root, [("agent-host", host)], calls, env)
    refused(out[0], host, "human:alice")
    acts_as(out[1], pin(host))  # no variable, no --self: still that session
    assert out[2][0] == 9


def test_human_outside_every_session_and_a_dead_host(tmp_path: Path) -> None:
    """What stays allowed: a person's shell below no recorded host (here a host process that recorded
    nothing, after another session's record went stale) takes ``--self human:alice``."""
    root = tmp_path / "root"
    env: dict[str, str | None] = {VARS[h][0]: None for h in HOSTS}
    under_hosts(root, [("gone-host", "claude")], [], env)  # recorded, then the process ended
    out = under_hosts(root, [("terminal", None)], [["status", "--json", "--self", "human:alice"]], env)
    acts_as(out[0], "human:alice")


def test_real_session_start_hook_records_what_identity_reads(tmp_path: Path) -> None:
    """End to end: the real ``hooks/run claude`` SessionStart (not the helper calls) under a Codex-launched
    Claude Code host; the agent below then cannot act as the Codex thread, nor as a human."""
    root = tmp_path / "root"
    root.mkdir()
    session = SESSION["claude"]
    hook_env = host_env("claude", tmp_path, root, session, "SessionStart")
    hook = ["/bin/sh", "-c", f"printf '%s' {json.dumps(json.dumps(payload('SessionStart', session)))} | "
            + hook_command("claude", "SessionStart")]
    env = clean_env(root, both_vars("claude", "codex"))
    calls = [["status", "--json", "--self", pin("codex")], ["status", "--json", "--self", "human:alice"],
             ["status", "--json"]]
    inner_then = [sys.executable, "-c", CALLS, json.dumps([[sys.executable, "-m", "agentmsg.cli", *c]
                                                           for c in calls])]
    # The host runs the hook as its own child first (stdout kept off the agent's), then the agent's commands.
    quiet_hook = [sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:], "
                  "env=" + repr(hook_env) + ", capture_output=True).returncode)", *hook]
    step = {"name": "claude", "record": quiet_hook, "then": inner_then, "env": env}
    argv = [sys.executable, "-c", HOST, json.dumps(step)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = [tuple(json.loads(line)) for line in done.stdout.splitlines()]
    refused(out[0], "claude", pin("codex"))  # type: ignore[arg-type]
    refused(out[1], "claude", "human:alice")  # type: ignore[arg-type]
    acts_as(out[2], pin("claude"))  # type: ignore[arg-type]
