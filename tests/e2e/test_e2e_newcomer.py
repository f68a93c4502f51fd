"""First use, as a newcomer meets it, on the REAL hosts (issue "First use, as a newcomer meets it").

1. ``test_newcomer_runs_every_command_it_is_shown`` (claude, codex): a fresh HOME, the host installed
   exactly as README's "In Claude Code and Codex" says (``claude plugin marketplace add <checkout>`` +
   ``claude plugin install agentmsg@agentmsg``; ``codex plugin marketplace add <checkout>`` +
   ``codex plugin add agentmsg@agentmsg``), from a copy of the checkout as a clone holds it (no
   ``.venv``/``node_modules``, as README advises).  Two sessions of that host on the same machine:
   the stub model of session A runs SKILL.md's ``open``; session B runs the ``join`` line ``open``
   printed (its ``share with peers:`` line) and SKILL.md's ``send`` heredoc; session A, at its next
   prompt, runs the ``inbox`` command its SessionStart text names and the ``ack`` command its
   prompt text names.  Every command is taken from SKILL.md or from the text agentmsg injected (read
   out of the recorded request body the command answers), substituting only ids and aliases, and in
   Codex the CLI the SessionStart line names in place of ``agentmsg`` (as SKILL.md says).  Each runs
   through the host's own shell tool, and each result, as the next recorded request carries it back
   to the model, is checked: exit code 0 and the expected output.

   The machine has no agentmsg environment yet: PATH holds only the system directories (whose
   ``python3`` lacks typer, rich, portalocker and pyyaml) and node, so the very first ``open`` goes
   through the launcher's first-run build of its private venv (started in the background by
   SessionStart; the command waits for it).  What is simulated: PyPI.  The launcher's pip installs
   from a wheelhouse this module packs from the test venv's installed distributions
   (``PIP_NO_INDEX=1``, ``PIP_FIND_LINKS=<wheelhouse>``, ``PIP_CONFIG_FILE=/dev/null`` so the
   machine's own pip configuration plays no part); the launcher honours pip's own variables.  The
   model is the loopback stub (tests/support/hosts/stubs.py).

2. ``test_codex_plugin_and_fallback_run_each_hook_once``: ``agentmsg install codex`` (the fallback)
   then ``codex plugin add`` of the same plugin: the user-level hooks step aside while the plugin is
   enabled, so a bound session's turn carries one identity line and one peer-data boundary; and
   ``agentmsg install codex`` once the plugin is enabled is refused (exit 5), writing nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support import wheels
from tests.support.hosts import harness, product, stubs

pytestmark = pytest.mark.hosts

#: The launcher's DEPS (bin/agentmsg), by distribution name; their requirements are packed too.
DEPS = ("typer", "rich", "portalocker", "PyYAML")
SKILL = (product.REPO / "skills" / "agentmsg" / "SKILL.md").read_text()


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e-newcomer")


@pytest.fixture(scope="module")
def wheelhouse(base: Path) -> Path:
    return wheels.wheelhouse(base / "wheelhouse", DEPS)


@pytest.fixture(scope="module")
def export(base: Path) -> Path:
    return product.export_plugin(base / "agentmsg-checkout")


def newcomer_env(wheelhouse: Path) -> dict[str, str]:
    return {"PATH": product.host_path(), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse),
            "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


# --------------------------------------------------------------------------
# Commands as SKILL.md and the injected text show them
# --------------------------------------------------------------------------


def skill_command(verb: str) -> str:
    """The one command SKILL.md shows for ``verb`` (inline, or the ``send`` heredoc block)."""
    if verb == "send":
        (block,) = re.findall(r"```sh\n(agentmsg send .*?\nEOF)\n```", SKILL, re.S)
        return block
    found = sorted(set(re.findall(rf"`(agentmsg {verb} [^`]*)`", SKILL)))
    assert len(found) == 1, (verb, found)
    return found[0]


def as_host(command: str, cli: str) -> str:
    """SKILL.md: in Codex, put the CLI the session-start line names in place of ``agentmsg``."""
    assert command.startswith("agentmsg ")
    return cli + command[len("agentmsg"):]


def fill(command: str, **values: str) -> str:
    """Substitute placeholders (ids, aliases), each exactly once."""
    for old, new in values.items():
        assert command.count(old) == 1, (old, command)
        command = command.replace(old, new)
    return command


_CODEX_CLI = re.compile(r"run it as (\S+) wherever the agentmsg skill or a message shows `agentmsg`, "
                        r"e\.g\. `\1 status`\.")


def host_cli(host: str, req: stubs.Recorded, prompt: str) -> str:
    """The CLI as this session was told to run it: Claude, ``agentmsg`` (on the Bash tool's PATH, no
    SessionStart text for an unbound session); Codex, the command its SessionStart line names."""
    ctx = contexts(host, req, prompt)
    if host == "claude":
        assert "SessionStart" not in ctx, ctx  # an unbound Claude session is told nothing
        return "agentmsg"
    m = _CODEX_CLI.search(ctx["SessionStart"])
    assert m, ctx
    return m[1]


def contexts(host: str, req: stubs.Recorded, prompt: str) -> dict[str, str]:
    return product.claude_contexts(req.body, prompt) if host == "claude" else product.codex_contexts(req.body, prompt)


def last_output(host: str, req: stubs.Recorded) -> tuple[str, bool]:
    """The output of the last shell command, as carried back to the model, and whether it exited 0."""
    body = req.body
    if host == "claude":
        blocks = [b for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)
                  for b in m["content"] if b.get("type") == "tool_result"]
        last = blocks[-1]
        content = last["content"]
        out = content if isinstance(content, str) else "".join(product._claude_texts(content))
        return out, not last.get("is_error")
    items = [it for it in body["input"] if it.get("type") == "function_call_output"]
    raw = items[-1]["output"]
    raw = raw if isinstance(raw, str) else json.dumps(raw)
    ok = "Process exited with code 0\n" in raw
    return (raw.split("\nOutput:\n", 1)[1] if ok and "\nOutput:\n" in raw else raw), ok


def last_result(host: str, req: stubs.Recorded) -> str:
    """The output of the last shell command; asserts it exited 0."""
    out, ok = last_output(host, req)
    assert ok, out
    return out


#: What the launcher says when the machine's first build outlasts the wait a host's shell allows (Codex gives a
#: command 10 s; a loaded machine builds slower): a model runs the command again, and so does the script.
BUILDING = "run the same command again in a few seconds"


# --------------------------------------------------------------------------
# 1. The newcomer's whole first exchange, per host
# --------------------------------------------------------------------------


class Newcomer:
    """One host, installed from the checkout per README into a fresh HOME, with two sessions."""

    def __init__(self, host: str, base: Path, export: Path, wheelhouse: Path) -> None:
        self.host, self.base = host, base
        self.home = base / "home"
        self.codex_home = self.home / ".codex"
        self.cwd = base / "work"
        self.cwd.mkdir(parents=True)
        self.home.mkdir(parents=True)
        self.env = newcomer_env(wheelhouse)
        if host == "claude":
            assert harness.install_claude_plugin(export, "agentmsg", home=self.home) == "agentmsg@agentmsg"
        else:
            harness.install_codex_plugin(export, "agentmsg", codex_home=self.codex_home, home=self.home)

    def run(self, stub: Any, prompt: str, replies: list[Any], *, session: str | None = None,
            resume: str | None = None) -> tuple[harness.HostRun, list[stubs.Recorded]]:
        assert stub.remaining() == 0
        stub.push(*replies)
        n0 = len(stub.snapshot())
        if self.host == "claude":
            run = harness.run_claude(prompt, cwd=self.cwd, home=self.home, stub=stub, env_extra=self.env,
                                     session_id=session, resume=resume, timeout=150)
        else:
            run = harness.run_codex(prompt, cwd=self.cwd, codex_home=self.codex_home, home=self.home, stub=stub,
                                    env_extra=self.env, resume=resume, timeout=150)
        assert not stub.errors, stub.errors
        run.check()
        assert stub.remaining() == 0, f"{stub.remaining()} scripted replies unused"
        return run, [r for r in stub.snapshot()[n0:] if r.agent]


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_newcomer_runs_every_command_it_is_shown(host: str, base: Path, export: Path, wheelhouse: Path) -> None:
    new = Newcomer(host, base / host, export, wheelhouse)
    env = {**harness.scrubbed_env(new.home), **new.env}
    probe = subprocess.run(["python3", "-c", "import typer"], env=env, capture_output=True, timeout=30)
    assert probe.returncode != 0, "the newcomer's python3 must lack the CLI's dependencies"
    data = new.home / ".local" / "share" / "agentmsg"
    assert not data.exists()
    state: dict[str, Any] = {}
    ran: list[str] = []

    def run_cmd(cmd: str) -> stubs.Reply:
        ran.append(cmd)
        return stubs.shell(cmd)

    # ---- session A: open (SKILL.md), the machine's very first agentmsg command
    p1 = "Open an agentmsg collaboration to review retry.py; call yourself driver."

    def do_open(req: stubs.Recorded) -> stubs.Reply:
        state["cli"] = host_cli(host, req, p1)
        return run_cmd(as_host(fill(skill_command("open"), ALIAS="driver", LABEL="review", TASK="Review retry.py"),
                               state["cli"]))

    def opened(req: stubs.Recorded) -> stubs.Reply | str:
        out, ok = last_output(host, req)
        if not ok and BUILDING in out and state.setdefault("again", 0) < 20:
            state["again"] += 1  # the build still runs: as the line says, the same command again
            stub.again(opened)
            return run_cmd(ran[-1])
        out = last_result(host, req)
        state["collab"] = re.search(r"^collaboration: ([0-9a-f-]{36})$", out, re.M)[1]  # type: ignore[index]
        state["share"] = re.search(r"^share with peers: (agentmsg join .*)$", out, re.M)[1]  # type: ignore[index]
        return "opened"

    with (stubs.AnthropicStub() if host == "claude" else stubs.OpenAIResponsesStub()) as stub:
        sid_a = str(uuid.uuid4()) if host == "claude" else None
        run_a, _ = new.run(stub, p1, [do_open, opened], session=sid_a)
        sid_a = run_a.session_id
        assert (data / "venv" / ".agentmsg-ready").is_file(), "the first command did not get the private venv"
        root = new.home / ".local" / "state" / "agentmsg"
        assert f"--root {root}" in state["share"] and "--self" not in state["share"]

        # ---- session B: the join line `open` printed, then SKILL.md's send heredoc
        p2 = f"Join the agentmsg collaboration as reviewer: {state['share']}"

        def do_join(req: stubs.Recorded) -> stubs.Reply:
            state["cli_b"] = host_cli(host, req, p2)
            return run_cmd(as_host(fill(state["share"], NAME="reviewer"), state["cli_b"]))

        def do_send(req: stubs.Recorded) -> stubs.Reply:
            out = last_result(host, req)
            assert f"reviewer ({product.RUNTIME[host]}:" in out and "participants: driver, reviewer" in out, out
            return run_cmd(as_host(fill(skill_command("send"), **{"--collab C": f"--collab {state['collab']}",
                                                                   "--to ALIAS": "--to driver"}), state["cli_b"]))

        def sent(req: stubs.Recorded) -> str:
            out = last_result(host, req)
            state["msg"] = re.search(r"^stored\+notified: ([0-9a-f-]{36}) -> driver ", out, re.M)[1]  # type: ignore[index]
            return "sent"

        new.run(stub, p2, [do_join, do_send, sent], session=str(uuid.uuid4()) if host == "claude" else None)

        # ---- session A again: inbox (its SessionStart text), ack (its prompt text)
        p3 = "Anything from the reviewer?"
        cid, mid = state["collab"], state["msg"]

        def do_inbox(req: stubs.Recorded) -> stubs.Reply:
            ctx = contexts(host, req, p3)
            inbox = re.findall(r"`([^`]* inbox --collab [^`]*)` lists them", ctx["SessionStart"])
            assert inbox == [f"{state['cli']} inbox --collab {cid}"], ctx["SessionStart"]
            block = product.parse_block(ctx["UserPromptSubmit"])
            assert block.ids == [mid] and block.messages[0].sender == "reviewer"
            acks = re.findall(r"`([^`]* ack --collab [^`]* --message MESSAGE_ID)`", ctx["UserPromptSubmit"])
            assert len(acks) == 1, ctx["UserPromptSubmit"]
            state["ack"] = acks[0]
            return run_cmd(inbox[0])

        def do_ack(req: stubs.Recorded) -> stubs.Reply:
            out = last_result(host, req)
            assert f"- id: `{mid}`" in out and "Please review retry.py (commit abc123)" in out, out
            return run_cmd(fill(state["ack"], MESSAGE_ID=mid))

        def acked(req: stubs.Recorded) -> str:
            out = last_result(host, req)
            assert f"acknowledged: {mid} at " in out, out
            return "acknowledged"

        new.run(stub, p3, [do_inbox, do_ack, acked], resume=sid_a)
        # pip stayed on the wheelhouse (the hosts' own off-box attempts, e.g. Codex's github.com, are theirs)
        assert not [r.path for r in stub.leaks() if "pypi" in r.path or "pythonhosted" in r.path]

    cli = "agentmsg" if host == "claude" else state["cli"]
    assert ran[0] == f"{cli} open --alias driver --label review --task 'Review retry.py'"
    assert [c.split()[1] for c in ran[state.get("again", 0):]] == ["open", "join", "send", "inbox", "ack"]
    pin = f"{product.RUNTIME[host]}:{sid_a}"
    doc = product.cli("inbox", "--collab", cid, "--self", pin, root=root, home=new.home)
    assert doc["result"]["alias"] == "driver" and doc["result"]["count"] == 0, doc  # acknowledged by that ack


# --------------------------------------------------------------------------
# 2. The Codex plugin and the fallback together: each hook runs once
# --------------------------------------------------------------------------


def test_codex_plugin_and_fallback_run_each_hook_once(base: Path, export: Path) -> None:
    host = product.Host("codex", "user-hooks", base / "double")  # `agentmsg install codex` first
    hooks_file = host.codex_home / "hooks.json"
    before = hooks_file.read_bytes()
    root_plugin = harness.install_codex_plugin(export, "agentmsg", codex_home=host.codex_home, home=host.home)
    host.path = product.host_path(product.python_shim(host.base / "pybin"), root_plugin / "bin")
    # the fallback once the plugin is enabled: refused, nothing written
    doc = product.cli("install", "codex", "--codex-home", str(host.codex_home), root=None, home=host.home, ok=False)
    assert not doc["ok"] and doc["exit_code"] == 5
    assert "codex plugin remove agentmsg@agentmsg" in doc["error"]["message"]
    assert hooks_file.read_bytes() == before
    root = base / "double" / "state"
    collab = product.open_collab(root, host.home)
    with host.stub() as stub:
        session = host.begin(stub, root=root)
        collab.join(session.pin, "driver")
        mid = collab.send("human:carol", "driver", "Status?", "Where are we on retry.py?")
        turn = session.turn(stub, "go on", ["fine"], root=root)
    items = [t for it in turn.requests[0].body["input"] for t in product._codex_message(it, "developer") or ()]
    identity = [t for t in items if t.startswith(f"agentmsg: this session ({session.pin}) is participant driver")]
    shown = [t for t in items if mid in t]
    assert len(identity) == 1 and len(shown) == 1, items  # SessionStart once, UserPromptSubmit once
    assert len(collab.presented("driver")) == 1  # one presented attempt: one UserPromptSubmit hook showed it
