"""End-to-end: agentmsg's OpenCode plugin on the real OpenCode 1.18.33 (issue 9).

The plugin is installed the way a user installs it (``agentmsg install
opencode`` into an isolated HOME), OpenCode runs offline against the
chat-completions stub, and the proof is what the stub recorded: the request
bodies OpenCode sent to its model.

1. test_prompt_delivery_shell_identity_and_ack: the agent joins with no
   ``--self`` (the plugin's ``OPENCODE_SESSION_ID``), a peer's request reaches
   the next prompt inside the boundary, presented is not acknowledged, and the
   agent's ``agentmsg ack`` is.
2. test_idle_continuation_only_inside_an_envelope: under ``opencode serve``,
   a continuation per slot and none without an envelope.
3. test_the_plugin_bounds_continuations_itself: a hook that always asks for
   more is stopped by the plugin's own bound; ``opencode run`` never spends a slot.
4. test_200_long_messages_inject_under_the_cap (UTF-16 units, what JS counts).
5. fail-open: garbage hook stdin, corrupt state, and a hook that misbehaves.
"""

from __future__ import annotations

import json
import random
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from agentmsg.hosts import opencode_files as oc_install
from tests.e2e.test_e2e_hosts import CAROL, GARBAGE, HIGH, LOG_LINE, ack_line, assert_untrusted, flood, log_lines
from tests.support.hosts import harness, product, stubs

pytestmark = pytest.mark.hosts

REPO = product.REPO
LAUNCHER = REPO / "bin" / "agentmsg"
DEFAULT_CAP = 8000
HOOK_CMD = oc_install.hook_command(REPO)


# --------------------------------------------------------------------------
# One OpenCode with the plugin installed, driven one way or the other
# --------------------------------------------------------------------------


class OpenCode:
    """OpenCode with agentmsg installed by ``agentmsg install opencode`` in ``base/home``."""

    def __init__(self, base: Path, root: Path) -> None:
        self.base, self.root = base, root
        self.home, self.cwd = base / "home", base / "work"
        self.cwd.mkdir(parents=True, exist_ok=True)
        env = harness.scrubbed_env(self.home, env_extra={"PYTHONPATH": str(REPO)})
        proc = subprocess.run([str(product.VENV_PYTHON), "-m", "agentmsg", "install", "opencode", "--json"], env=env,
                              capture_output=True, text=True, timeout=60)
        self.install = json.loads(proc.stdout)["result"]
        assert (self.install["plugin"], self.install["skill"]) == ("written", "written"), self.install
        self.plugin_file = Path(self.install["plugin_file"])
        self.path = product.host_path(product.python_shim(base / "pybin"))
        self.server: harness.OpencodeServer | None = None

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {"AGENTMSG_HOME": str(self.root), "PATH": self.path, **(extra or {})}

    def serve(self, stub: stubs.ChatCompletionsStub, env: dict[str, str] | None = None) -> harness.OpencodeServer:
        self.server = harness.OpencodeServer(cwd=self.cwd, home=self.home, stub=stub, env_extra=self.env(env))
        return self.server

    def turn(self, stub: stubs.ChatCompletionsStub, prompt: str, replies: list[Any], *, session: str | None = None,
             env: dict[str, str] | None = None, settle: float = 0.0) -> tuple[harness.HostRun, list[stubs.Recorded]]:
        """One turn (attached to the server if one runs); the agent requests it caused, after ``settle``
        seconds with no new request (a continuation comes after the attached run returns)."""
        assert stub.remaining() == 0, "replies left over from an earlier turn"
        stub.push(*replies)
        n0 = len(stub.snapshot())
        if self.server is not None:
            run = self.server.run(prompt, cwd=self.cwd, home=self.home, stub=stub, session=session,
                                  env_extra=self.env(env))
        else:
            run = harness.run_opencode(prompt, cwd=self.cwd, home=self.home, stub=stub, session=session,
                                       env_extra=self.env(env))
        run.check()
        if settle:
            quiet(stub, settle)
        assert run.session_id, run.stdout[-2000:]
        return run, [r for r in stub.snapshot()[n0:] if r.agent]


def quiet(stub: stubs.ChatCompletionsStub, seconds: float, limit: float = 90) -> None:
    """Wait until the stub has seen no request for ``seconds`` (at most ``limit``)."""
    deadline = time.monotonic() + limit
    seen, since = len(stub.snapshot()), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = len(stub.snapshot())
        if now != seen:
            seen, since = now, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return
    raise AssertionError("the stub never went quiet")


def user_texts(req: stubs.Recorded) -> list[str]:
    """The text parts of the last user message of a request."""
    msg = [m for m in req.body["messages"] if m.get("role") == "user"][-1]
    content = msg["content"]
    return [content] if isinstance(content, str) else [p["text"] for p in content if p.get("type") == "text"]


def injected(req: stubs.Recorded) -> list[str]:
    """What the plugin added to the user's prompt (every part after the prompt's own)."""
    return user_texts(req)[1:]


def prompt_block(req: stubs.Recorded) -> product.Block:
    (text,) = [t for t in injected(req) if "peer message" in t.split("\n", 1)[0]]
    return product.parse_block(text)


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def no_agentmsg_text(reqs: list[stubs.Recorded]) -> None:
    for req in reqs:
        blob = product.body_text(req)
        assert "⟦agentmsg peer data" not in blob and "agentmsg: this session" not in blob


@pytest.fixture
def setup(tmp_path: Path) -> tuple[OpenCode, Path]:
    root = tmp_path / "state"
    return OpenCode(tmp_path, root), root


# --------------------------------------------------------------------------
# 1. Prompt-time delivery, the shell's identity, presented is not acknowledged
# --------------------------------------------------------------------------


def test_prompt_delivery_shell_identity_and_ack(setup, tmp_path):
    host, root = setup
    collab = product.open_collab(root, tmp_path / "cli-home")
    c = collab.id
    with stubs.ChatCompletionsStub() as stub:
        # The agent joins by itself: no --self, the pin comes from OPENCODE_SESSION_ID (shell.env).
        join = f"{LAUNCHER} join --collab {c} --alias worker --json"
        run, reqs = host.turn(stub, "join", [stubs.shell(join), stubs.text("joined")])
        sid = run.session_id
        assert sid.startswith("ses_") and run.result == "joined"
        (out,) = [m["content"] for m in reqs[-1].body["messages"] if m.get("role") == "tool"]
        assert json.loads(out)["result"]["pin"] == f"opencode:{sid}", out
        assert injected(reqs[0])[0].startswith("agentmsg (peer messaging; this session has not joined")

        subject = "R1: check the migration"
        r1 = collab.send(CAROL, "worker", subject, "Action: run `make check` and report.")

        def ack_it(req: stubs.Recorded) -> stubs.Reply:
            (mid,) = prompt_block(req).ids
            return stubs.shell(f"{LAUNCHER} ack --collab {c} --message {mid} --json")

        run, reqs = host.turn(stub, "next", [ack_it, stubs.text("acked")], session=sid)
        assert run.result == "acked" and not stub.errors
        first = injected(reqs[0])
        assert first[0].startswith(f"agentmsg: this session (opencode:{sid}) is participant worker in "
                                   f"collaboration {c}, opened by carol.")  # SessionStart, once per process
        block = prompt_block(reqs[0])
        assert_untrusted(block)
        assert block.lead == [f"agentmsg: 1 new peer message for worker in collaboration {c} is unacknowledged; "
                              "1 quoted below."]
        assert [(m.id, m.subject, m.sender, m.runtime, m.kind) for m in block.messages] == [
            (r1, subject, "carol", "human", "request")]
        assert block.after == [ack_line(c)]
        assert all(utf16(t) <= DEFAULT_CAP for t in first)
    receipts = collab.journal("receipts/worker.jsonl")
    presented = [r for r in receipts if r["type"] == "presented"]
    assert [(r["message"], r["host"], r["pin"]) for r in presented] == [(r1, "opencode", f"opencode:{sid}")]
    acks = [r for r in receipts if r["type"] == "ack"]
    assert [(r["message"], r.get("by")) for r in acks] == [(r1, f"opencode:{sid}")], receipts
    assert log_lines(root) == []


# --------------------------------------------------------------------------
# 2. Idle continuations under `opencode serve`: one per slot, none without an envelope
# --------------------------------------------------------------------------


def continuation(req: stubs.Recorded) -> product.Block:
    (text,) = user_texts(req)
    return product.parse_block(text)


def test_idle_continuation_only_inside_an_envelope(setup, tmp_path):
    host, root = setup
    collab = product.open_collab(root, tmp_path / "cli-home")
    c = collab.id
    with stubs.ChatCompletionsStub() as stub, host.serve(stub):
        run, _ = host.turn(stub, "start", [stubs.text("started")], settle=2)
        sid = run.session_id
        pin = f"opencode:{sid}"
        collab.join(pin, "worker")
        r1 = collab.send(CAROL, "worker", "R1", "Action: one.")

        # A request pending, no envelope: the idle session is not continued.
        _, reqs = host.turn(stub, "turn1", [stubs.text("t1")], session=sid, settle=4)
        assert len(reqs) == 1 and prompt_block(reqs[0]).ids == [r1]
        assert not (collab.dir / "delivery.jsonl").exists()

        env = collab.enable_delivery(pin, slots=2)
        _, reqs = host.turn(stub, "turn2", [stubs.text("t2"), stubs.text("after slot 1")], session=sid, settle=4)
        assert len(reqs) == 2, "expected the turn and exactly one continuation"
        block = continuation(reqs[1])
        assert_untrusted(block)
        assert block.lead == [f"agentmsg: 1 unacknowledged request from peers is waiting for worker in "
                              f"collaboration {c}; 1 quoted below. Stop continuations are enabled for this session "
                              f"until {env['expires']}; this one used slot 1 of 2."]
        assert block.ids == [r1]
        assert collab.slots() == [1]

        collab.ack(pin, r1)
        _, reqs = host.turn(stub, "turn3", [stubs.text("t3")], session=sid, settle=4)
        assert len(reqs) == 1 and collab.slots() == [1]

        r2 = collab.send(CAROL, "worker", "R2", "Action: two.")
        _, reqs = host.turn(stub, "turn4", [stubs.text("t4"), stubs.text("after slot 2")], session=sid, settle=4)
        assert len(reqs) == 2 and continuation(reqs[1]).ids == [r2]
        assert "this one used slot 2 of 2." in continuation(reqs[1]).lead[0]

        collab.send(CAROL, "worker", "R3", "Action: three.")  # both slots spent: no more continuations
        _, reqs = host.turn(stub, "turn5", [stubs.text("t5")], session=sid, settle=4)
        assert len(reqs) == 1
    slot_recs = [r for r in collab.journal("delivery.jsonl") if r["type"] == "delivery-slot"]
    assert [(r["slot"], r["host"], r["pin"], r["messages"]) for r in slot_recs] == [
        (1, "opencode", pin, [r1]), (2, "opencode", pin, [r2])]
    insp = collab.inspect_delivery(pin)
    assert (insp["envelope"]["status"], insp["envelope"]["remaining"]) == ("spent", 0)
    assert insp["last_hook_run"]["host"] == "opencode"
    assert log_lines(root) == []


# --------------------------------------------------------------------------
# 3. The plugin's own bound, and fail-open on a hook that misbehaves
# --------------------------------------------------------------------------


def fake_hook(host: OpenCode, script: str) -> Path:
    """Point the installed plugin at a stand-in hook (``sh`` code; its stdin JSON is logged to calls.jsonl)."""
    hook = host.base / "fake-hook" / "hooks" / "run"
    hook.parent.mkdir(parents=True, exist_ok=True)
    calls = host.base / "calls.jsonl"
    hook.write_text(f"#!/bin/sh\nin=$(cat)\nprintf '%s\\n' \"$in\" >> {shlex.quote(str(calls))}\n{script}\n")
    text = host.plugin_file.read_text()
    line = next(x for x in text.splitlines() if x.startswith("const HOOK = "))
    host.plugin_file.write_text(text.replace(line, f"const HOOK = {json.dumps(str(hook))};"))
    return calls


def events(calls: Path) -> list[str]:
    return [json.loads(x)["hook_event_name"] for x in calls.read_text().splitlines()] if calls.exists() else []


ALWAYS_BLOCK = """n=$(wc -l < "$(dirname "$0")/../../calls.jsonl")
case $in in *'"Stop"'*) printf '{"decision": "block", "reason": "continue please %s"}' "$n" ;; esac"""


def test_the_plugin_bounds_continuations_itself(setup):
    """A hook that blocks at every idle (as a broken one might): the plugin stops after
    AGENTMSG_OPENCODE_MAX_CONTINUATIONS; and a one-shot `opencode run` never asks the Stop hook."""
    host, _root = setup
    calls = fake_hook(host, ALWAYS_BLOCK)
    with stubs.ChatCompletionsStub() as stub:
        _, reqs = host.turn(stub, "oneshot", [stubs.text("done")], settle=2)
        assert len(reqs) == 1 and "Stop" not in events(calls)
    calls.unlink()
    with stubs.ChatCompletionsStub() as stub, host.serve(stub, {"AGENTMSG_OPENCODE_MAX_CONTINUATIONS": "3"}):
        run, reqs = host.turn(stub, "go", [stubs.text("t")], settle=5)
        texts = [user_texts(r)[0] for r in reqs[1:]]
        assert len(reqs) == 4 and all(t.startswith("continue please") for t in texts), texts
        assert events(calls).count("Stop") == 3  # the fourth idle is not even asked: the plugin's bound
        # A user prompt starts a new streak.
        _, reqs = host.turn(stub, "again", [stubs.text("t")], session=run.session_id, settle=5)
        assert len(reqs) == 4


@pytest.mark.parametrize("script", [
    "printf 'not json at all'",
    "printf '{\"hookSpecificOutput\": {\"additionalContext\": 42}}'",
    "printf '{\"hookSpecificOutput\": {\"additionalContext\": \"%s\"}}' \"$(head -c 20000 /dev/zero | tr '\\0' x)\"",
    "echo '{\"decision\": \"block\", \"reason\": \"x\"}'; exit 3",
    "exec sleep 60",
], ids=["garbage", "wrong-type", "over-cap", "non-zero-exit", "hangs"])
def test_a_misbehaving_hook_adds_nothing_and_the_turn_completes(setup, script):
    host, _root = setup
    calls = fake_hook(host, script)
    with stubs.ChatCompletionsStub() as stub:
        run, reqs = host.turn(stub, "hello", [stubs.text("fine")])
        assert run.result == "fine" and len(reqs) == 1
        assert injected(reqs[0]) == []
    assert events(calls) == ["SessionStart", "UserPromptSubmit"]  # asked (each once), its answer dropped


# --------------------------------------------------------------------------
# 4. 200 long messages: under the cap in UTF-16 units
# --------------------------------------------------------------------------


def test_200_long_messages_inject_under_the_cap(setup, tmp_path):
    host, root = setup
    collab = product.open_collab(root, tmp_path / "cli-home")
    c = collab.id
    with stubs.ChatCompletionsStub() as stub:
        run, _ = host.turn(stub, "start", [stubs.text("started")])
        sid = run.session_id
        collab.join(f"opencode:{sid}", "worker")
        sent = flood(collab, "worker", 200)
        order = [sent[i] for i in HIGH] + [x for i, x in enumerate(sent) if i not in HIGH]
        _, reqs = host.turn(stub, "read", [stubs.text("read")], session=sid)
    (text,) = [t for t in injected(reqs[0]) if "peer messages" in t.split("\n", 1)[0]]
    assert DEFAULT_CAP - 600 <= utf16(text) <= DEFAULT_CAP
    block = product.parse_block(text)
    assert_untrusted(block)
    k = len(block.messages)
    assert k >= 3 and block.ids == [mid for mid, _ in order[:k]]
    for m, (mid, body) in zip(block.messages, order, strict=False):
        assert m.cut is not None and m.cut[1:] == (len(body), f"agentmsg show {mid} --collab {c}")
    assert block.after[0] == ack_line(c) and block.after[1].startswith(f"{200 - k:,} more messages are waiting")
    assert log_lines(root) == []


# --------------------------------------------------------------------------
# 5. Fail open: garbage stdin on the hook command, corrupt state under the real host
# --------------------------------------------------------------------------


@pytest.mark.parametrize("garbage", list(GARBAGE))
def test_hook_command_fails_open_on_garbage_stdin(tmp_path, garbage):
    """The command the plugin runs (and doctor probes): exit 0, no output, one log line."""
    root = tmp_path / "state"
    root.mkdir()
    env = harness.scrubbed_env(tmp_path / "home", env_extra={
        "AGENTMSG_HOME": str(root), "PATH": product.host_path(product.python_shim(tmp_path / "pybin"))})
    stdin, why = GARBAGE[garbage]
    proc = subprocess.run(["/bin/sh", "-c", HOOK_CMD], input=stdin, env=env, capture_output=True, timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    (line,) = log_lines(root)
    m = LOG_LINE.fullmatch(line)
    assert m and (m["host"], m["pin"]) == ("opencode", "?"), line
    assert m["what"].startswith(f"HookError: {why}"), line


def test_corrupt_state_fails_open_and_the_turn_completes(setup, tmp_path):
    host, root = setup
    collab = product.open_collab(root, tmp_path / "cli-home")
    garbage = random.Random(9).randbytes(2048) + b"\n{not: yaml, nor json\n"
    with stubs.ChatCompletionsStub() as stub:
        run, _ = host.turn(stub, "start", [stubs.text("started")])
        sid = run.session_id
        collab.join(f"opencode:{sid}", "worker")
        hook_state = collab.dir / "state" / "worker.hook.json"
        hook_state.parent.mkdir(exist_ok=True)
        hook_state.write_bytes(garbage)
        run, reqs = host.turn(stub, "corrupt", [stubs.text("first completed")], session=sid)
        assert run.result == "first completed" and len(reqs) == 1
        no_agentmsg_text(reqs)
        lines = log_lines(root)
        assert lines and all(f"opencode SessionStart opencode:{sid}: HookError: corrupt hook state" in x
                             or " opencode UserPromptSubmit " in x for x in lines), lines

        collab.send(CAROL, "worker", "pending", "Would be injected at the next prompt.")
        (collab.dir / "registry.yaml").write_bytes(garbage)
        (collab.dir / "collab.jsonl").write_bytes(garbage)
        run, reqs = host.turn(stub, "corrupt2", [stubs.text("second completed")], session=sid)
        assert run.result == "second completed" and len(reqs) == 1
        no_agentmsg_text(reqs)
    assert any(" opencode UserPromptSubmit " in x and "NotFound: " in x for x in log_lines(root)[len(lines):])
