"""Smoke tests for the real-host harness (tests/support/hosts/).

They run the REAL Claude Code and Codex CLIs (from node_modules) against the
loopback stubs, with a THROWAWAY plugin generated in tmp_path (a tiny stdlib
hook script), and prove, on both hosts, the hook behaviour the product relies
on.  Proof is always the stub's recorded request bodies plus the hook's own log.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import uuid
from pathlib import Path

import pytest

from tests.support.hosts import harness, stubs

from_here = Path(__file__).resolve().parent

EVENTS = ("SessionStart", "UserPromptSubmit", "Stop")
# Observed threshold (see docs/HOSTS-NOTES.md): additionalContext of up to
# 10,000 characters is passed verbatim; longer is replaced with a preview +
# file path.  Same on both hosts for ASCII text.
SIZE_CAP = 10_000

# --------------------------------------------------------------------------
# Throwaway plugin
# --------------------------------------------------------------------------

HOOK_PY = r'''
"""Throwaway test hook: logs its input/env, then does what hookcfg.json says."""
import json, os, sys

cfg_path, log_path = sys.argv[1], sys.argv[2]
data = json.load(sys.stdin)
event = data.get("hook_event_name", "?")
keep = ("CLAUDE", "CODEX", "PLUGIN")
with open(log_path, "a") as f:
    f.write(json.dumps({"event": event, "input": data,
                        "env": {k: v for k, v in os.environ.items() if any(s in k for s in keep)}}) + "\n")
try:
    with open(cfg_path) as f:
        cfg = json.load(f).get(event, {})
except FileNotFoundError:
    cfg = {}
out = None
if "context" in cfg or "context_size" in cfg:
    ctx = cfg.get("context", "")
    if "context_size" in cfg:
        n = int(cfg["context_size"])
        ctx = (ctx + "".join("%09d|" % i for i in range(n // 10 + 1)))[:n]
    out = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": ctx}}
if event == "Stop" and "block_reason" in cfg and not data.get("stop_hook_active"):
    out = {"decision": "block", "reason": cfg["block_reason"]}
if out is not None:
    sys.stdout.write(json.dumps(out))
'''


class Throwaway:
    """A marketplace at ``root`` holding plugin ``throwaway`` for both hosts."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "mkt"
        self.plugin = self.root / "plugins" / "throwaway"
        self.cfg = base / "hookcfg.json"
        self.log = base / "hooklog.jsonl"
        self.name = "throwaway"
        p = self.plugin
        (p / ".claude-plugin").mkdir(parents=True)
        (p / ".codex-plugin").mkdir()
        (p / "hooks").mkdir()
        (p / "hooks" / "hook.py").write_text(HOOK_PY)
        manifest = {"name": "throwaway", "version": "0.0.1", "description": "agentmsg harness smoke-test plugin"}
        (p / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
        (p / ".codex-plugin" / "plugin.json").write_text(json.dumps({**manifest, "hooks": "./hooks/codex-hooks.json"}))
        args = f"{shlex.quote(str(self.cfg))} {shlex.quote(str(self.log))}"
        py = shlex.quote(sys.executable)
        # Claude substitutes ${CLAUDE_PLUGIN_ROOT}; Codex runs `$SHELL -lc` with $PLUGIN_ROOT set.
        (p / "hooks" / "hooks.json").write_text(
            json.dumps(self.hooks(f'{py} "${{CLAUDE_PLUGIN_ROOT}}/hooks/hook.py" {args}'))
        )
        (p / "hooks" / "codex-hooks.json").write_text(
            json.dumps(self.hooks(f'{py} "$PLUGIN_ROOT/hooks/hook.py" {args}'))
        )
        # The same script addressed absolutely, for Codex user-level hooks.json.
        self.user_hooks = self.hooks(f"{py} {shlex.quote(str(p / 'hooks' / 'hook.py'))} {args}")
        harness.write_marketplace(self.root, "throwaway-mkt", {"throwaway": "./plugins/throwaway"})
        self.configure({})

    @staticmethod
    def hooks(command: str) -> dict:
        return {"hooks": {ev: [{"hooks": [{"type": "command", "command": command, "timeout": 30}]}] for ev in EVENTS}}

    def configure(self, cfg: dict) -> None:
        self.cfg.write_text(json.dumps(cfg))

    def entries(self, event: str | None = None) -> list[dict]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]
        return [r for r in rows if event is None or r["event"] == event]


# --------------------------------------------------------------------------
# Host drivers: one interface over both hosts and both install modes
# --------------------------------------------------------------------------


class Host:
    name: str
    session_env: str

    def __init__(self, tmp: Path, plug: Throwaway, mode: str) -> None:
        self.tmp, self.plug, self.mode = tmp, plug, mode
        self.cwd = tmp / "work"
        self.cwd.mkdir()

    def stub(self, script):  # pragma: no cover - abstract
        raise NotImplementedError

    def run(self, stub, prompt: str = "hello from the harness test") -> harness.HostRun:  # pragma: no cover
        raise NotImplementedError


class ClaudeHost(Host):
    name = "claude"
    session_env = "CLAUDE_CODE_SESSION_ID"

    def __init__(self, tmp: Path, plug: Throwaway, mode: str) -> None:
        super().__init__(tmp, plug, mode)
        self.home = tmp / "home"
        if mode == "installed":
            harness.install_claude_plugin(plug.root, plug.name, home=self.home)

    def stub(self, script):
        return stubs.AnthropicStub(script)

    def run(self, stub, prompt="hello from the harness test", **kw):
        plugin_dir = self.plug.plugin if self.mode == "plugin_dir" else None
        return harness.run_claude(
            prompt, cwd=self.cwd, home=self.home, plugin_dir=plugin_dir, stub=stub, timeout=90, **kw
        )


class CodexHost(Host):
    name = "codex"
    session_env = "CODEX_THREAD_ID"

    def __init__(self, tmp: Path, plug: Throwaway, mode: str) -> None:
        super().__init__(tmp, plug, mode)
        self.codex_home = tmp / "codex_home"
        self.home = tmp / "home"
        self.user_hooks = None
        if mode == "installed":
            harness.install_codex_plugin(plug.root, plug.name, codex_home=self.codex_home, home=self.home)
        else:
            self.user_hooks = plug.user_hooks

    def stub(self, script):
        return stubs.OpenAIResponsesStub(script)

    def run(self, stub, prompt="hello from the harness test", **kw):
        return harness.run_codex(
            prompt,
            cwd=self.cwd,
            codex_home=self.codex_home,
            home=self.home,
            stub=stub,
            hooks=self.user_hooks,
            timeout=90,
            **kw,
        )


HOST_MODES = [
    pytest.param(ClaudeHost, "plugin_dir", id="claude-plugin_dir"),
    pytest.param(ClaudeHost, "installed", id="claude-installed"),
    pytest.param(CodexHost, "installed", id="codex-plugin"),
    pytest.param(CodexHost, "user_hooks", id="codex-user_hooks"),
]
# The default way each host loads the product's hooks in these tests.
HOSTS = [
    pytest.param(ClaudeHost, "plugin_dir", id="claude"),
    pytest.param(CodexHost, "installed", id="codex"),
]


@pytest.fixture
def plug(tmp_path: Path) -> Throwaway:
    return Throwaway(tmp_path)


def _host(tmp_path, plug, cls, mode) -> Host:
    return cls(tmp_path, plug, mode)


def _context_items(host: Host, req: stubs.Recorded) -> list[str]:
    """Texts of the places injected context lands in one agent request."""
    body = req.body
    texts: list[str] = []
    if host.name == "claude":
        for m in body["messages"]:
            if m["role"] != "system":
                continue
            c = m["content"]
            texts += [c] if isinstance(c, str) else [b.get("text", "") for b in c if b.get("type") == "text"]
    else:
        for it in body["input"]:
            if it.get("type") == "message" and it.get("role") == "developer":
                texts += [c.get("text", "") for c in it["content"] if c.get("type") == "input_text"]
    return texts


def _landed(host: Host, req: stubs.Recorded, event: str, ctx: str) -> bool:
    """Did ``ctx`` land verbatim where ``host`` puts ``event``'s additionalContext?"""
    for t in _context_items(host, req):
        if host.name == "claude" and f"{event} hook additional context: {ctx}" in t:
            return True
        if host.name == "codex" and t == ctx:
            return True
    return False


# --------------------------------------------------------------------------
# Host tests
# --------------------------------------------------------------------------

hosts = pytest.mark.hosts


@hosts
@pytest.mark.parametrize("cls,mode", HOST_MODES)
def test_session_start_and_prompt_context_land_in_request(tmp_path, plug, cls, mode):
    host = _host(tmp_path, plug, cls, mode)
    tag = uuid.uuid4().hex[:8]
    plug.configure(
        {"SessionStart": {"context": f"SS-CONTEXT-{tag}"}, "UserPromptSubmit": {"context": f"UPS-CONTEXT-{tag}"}}
    )
    with host.stub([stubs.text("done")]) as stub:
        run = host.run(stub).check()
        agent = stub.agent_requests()
        assert stub.leaks() == [] or host.name == "codex"  # Codex: curated-plugin git sync, refused
    assert run.result == "done"
    assert len(agent) == 1, [r.path for r in stub.requests]
    req = agent[0]
    assert _landed(host, req, "SessionStart", f"SS-CONTEXT-{tag}")
    assert _landed(host, req, "UserPromptSubmit", f"UPS-CONTEXT-{tag}")
    # Hooks saw the same session id that the harness reports.
    for ev in ("SessionStart", "UserPromptSubmit", "Stop"):
        (row,) = plug.entries(ev)
        assert row["input"]["session_id"] == run.session_id
    assert plug.entries("SessionStart")[0]["input"]["source"] == "startup"
    assert plug.entries("UserPromptSubmit")[0]["input"]["prompt"] == "hello from the harness test"


@hosts
@pytest.mark.parametrize("cls,mode", HOSTS)
def test_stop_block_makes_another_model_request(tmp_path, plug, cls, mode):
    host = _host(tmp_path, plug, cls, mode)
    reason = f"STOP-REASON-{uuid.uuid4().hex[:8]}: one more message is waiting"
    plug.configure({"Stop": {"block_reason": reason}})
    with host.stub([stubs.text("first answer"), stubs.text("second answer")]) as stub:
        run = host.run(stub).check()
        agent = stub.agent_requests()
    assert run.result == "second answer"
    assert len(agent) == 2
    assert reason not in agent[0].text_blob()
    assert reason in agent[1].text_blob()
    stops = plug.entries("Stop")
    assert [s["input"]["stop_hook_active"] for s in stops] == [False, True]
    assert stops[0]["input"]["last_assistant_message"] == "first answer"
    assert stops[1]["input"]["last_assistant_message"] == "second answer"


@hosts
@pytest.mark.parametrize("cls,mode", HOSTS)
def test_shell_tool_sees_hook_session_id(tmp_path, plug, cls, mode):
    host = _host(tmp_path, plug, cls, mode)
    cmd = f'printf "SID=[%s] PY=[%s]" "${host.session_env}" "$(command -v python)"'
    kw = {}
    if host.name == "claude":
        kw["session_id"] = str(uuid.uuid4())  # Claude lets the caller choose the id
    with host.stub([stubs.shell(cmd), stubs.text("done")]) as stub:
        run = host.run(stub, **kw).check()
        agent = stub.agent_requests()
    assert len(agent) == 2
    if kw:
        assert run.session_id == kw["session_id"]
    hook_sid = plug.entries("UserPromptSubmit")[0]["input"]["session_id"]
    assert hook_sid == run.session_id
    assert f"SID=[{hook_sid}]" in agent[1].text_blob()
    assert f"SID=[{hook_sid}]" not in agent[0].text_blob()
    # The agent's shell finds the test interpreter (venv) first on PATH.
    assert f"PY=[{Path(sys.executable).parent}/python]" in agent[1].text_blob()


@hosts
@pytest.mark.parametrize("cls,mode", HOSTS)
def test_resume_continues_same_native_session(tmp_path, plug, cls, mode):
    host = _host(tmp_path, plug, cls, mode)
    plug.configure({"UserPromptSubmit": {"context": "UPS-CTX-RESUME"}})
    with host.stub([stubs.text("one")]) as stub:
        first = host.run(stub, prompt="first prompt").check()
        stub.push(stubs.text("two"))
        second = host.run(stub, prompt="second prompt", resume=first.session_id).check()
        agent = stub.agent_requests()
    assert (first.result, second.result) == ("one", "two")
    assert second.session_id == first.session_id
    assert {e["input"]["session_id"] for e in plug.entries()} == {first.session_id}
    assert [e["input"]["source"] for e in plug.entries("SessionStart")] == ["startup", "resume"]
    # The resumed request carries the history, including the first turn's injected context.
    assert "first prompt" in agent[1].text_blob()
    assert agent[1].text_blob().count("UPS-CTX-RESUME") == 2


@hosts
@pytest.mark.parametrize("size,verbatim", [(9_000, True), (SIZE_CAP, True), (SIZE_CAP + 1, False), (12_000, False)])
@pytest.mark.parametrize("cls,mode", HOSTS)
def test_hook_output_size_threshold(tmp_path, plug, cls, mode, size, verbatim):
    """<= 10,000 chars of additionalContext pass verbatim; beyond, each host
    substitutes a notice + file path (the file holds the full text)."""
    host = _host(tmp_path, plug, cls, mode)
    tag = f"BIG-{uuid.uuid4().hex[:8]}-"
    plug.configure({"UserPromptSubmit": {"context": tag, "context_size": size}})
    with host.stub([stubs.text("done")]) as stub:
        host.run(stub).check()
        (req,) = stub.agent_requests()
    full = (tag + "".join(f"{i:09d}|" for i in range(size // 10 + 1)))[:size]
    landed = _landed(host, req, "UserPromptSubmit", full)
    blob_has_full = full in req.text_blob()
    assert landed is verbatim and blob_has_full is verbatim  # plain bools: no giant assertion diffs
    if verbatim:
        return
    (text,) = [t for t in _context_items(host, req) if tag in t]
    if host.name == "claude":
        # "UserPromptSubmit hook additional context: <persisted-output>\nOutput too large (9.8KB).
        #  Full output saved to: <path>\n\nPreview (first 2KB):\n...\n...\n</persisted-output>"
        m = re.search(
            r"<persisted-output>\nOutput too large \([^)]*\)\. Full output saved to: (\S+)\n\n"
            r"Preview \(first 2KB\):\n(.*?)\n\.\.\.\n</persisted-output>",
            text,
            re.S,
        )
        assert m, text[-3000:]
        preview = m.group(2)
        assert full.startswith(preview) and len(preview) <= 2048
        saved = Path(m.group(1))
        assert str(saved).startswith(str(host.home))
    else:
        # "Warning: truncated output (original token count: N)\nTotal output lines: 1\n\n<head>…N tokens
        #  truncated…<tail>\n\nFull hook output saved to: $TMPDIR/hook_outputs/<thread>/<uuid>.txt"
        assert text.startswith("Warning: truncated output (original token count: "), text[:300]
        assert "tokens truncated…" in text
        m = re.search(r"\n\nFull hook output saved to: (\S+)$", text)
        assert m, text[-500:]
        saved = Path(m.group(1))
        assert str(saved).startswith(str(host.home / ".tmp" / "hook_outputs"))
    assert saved.read_text() == full


# --------------------------------------------------------------------------
# Harness/stub unit tests (no host needed)
# --------------------------------------------------------------------------


def _post(url: str, body: dict | None = None, method: str = "POST"):
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _sse(raw: str) -> list[tuple[str, dict]]:
    out = []
    for chunk in raw.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_anthropic_stub_script_and_recording():
    with stubs.AnthropicStub([stubs.shell("echo hi"), "plain"]) as st:
        tools = {"tools": [{"name": "Bash"}], "stream": True, "messages": []}
        s, side = _post(st.base_url + "/v1/messages?beta=true", {"messages": [], "stream": True})
        assert s == 200 and _sse(side)[2][1]["delta"] == {"type": "text_delta", "text": "ok"}
        s, raw = _post(st.base_url + "/v1/messages?beta=true", tools)
        ev = _sse(raw)
        assert [e for e, _ in ev] == [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
        assert ev[1][1]["content_block"]["name"] == "Bash"
        assert json.loads(ev[2][1]["delta"]["partial_json"]) == {"command": "echo hi"}
        assert ev[4][1]["delta"]["stop_reason"] == "tool_use"
        _, raw = _post(st.base_url + "/v1/messages", tools)
        assert _sse(raw)[2][1]["delta"]["text"] == "plain"
        _, raw = _post(st.base_url + "/v1/messages", tools)
        assert _sse(raw)[2][1]["delta"]["text"] == "ok"  # exhausted -> fallback
        assert _post(st.base_url + "/v1/messages/count_tokens?beta=true", {"messages": []}) == (
            200,
            '{"input_tokens": 10}',
        )
        assert _post(st.base_url + "/nope", {})[0] == 404
        s, js = _post(st.base_url + "/v1/messages", {**tools, "stream": False})
        assert json.loads(js)["content"][0]["text"] == "ok"
        assert len(st.agent_requests()) == 4 and len(st.requests) == 7
        assert st.requests[0].query == "beta=true" and not st.requests[0].agent
        assert st.leaks() == []


def test_openai_stub_script_and_recording():
    with stubs.OpenAIResponsesStub([stubs.shell("ls -la")]) as st:
        req = {"tools": [{"type": "function", "name": "exec_command"}], "input": [], "stream": True}
        _, raw = _post(st.base_url + "/v1/responses", req)
        ev = _sse(raw)
        assert ev[0][0] == "response.created" and ev[-1][0] == "response.completed"
        assert "usage" in ev[-1][1]["response"]
        item = ev[-2][1]["item"]
        assert item["type"] == "function_call" and item["name"] == "exec_command"
        assert json.loads(item["arguments"]) == {"cmd": "ls -la"}
        _, raw = _post(st.base_url + "/v1/responses", req)
        names = [e for e, _ in _sse(raw)]
        assert names == [
            "response.created",
            "response.output_item.added",
            "response.output_text.delta",
            "response.output_item.done",
            "response.completed",
        ]
        assert _post(st.base_url + "/v1/models", method="GET")[0] == 200
        assert len(st.agent_requests()) == 2


def test_chat_completions_stub_script_and_recording():
    script = [stubs.shell("ls"), stubs.tool("agentmsg-inbox", {"limit": 5}), stubs.text("done")]
    with stubs.ChatCompletionsStub(script) as st:
        req = {"tools": [{"type": "function", "function": {"name": "bash"}}], "messages": [], "stream": True}
        _, raw = _post(st.base_url + "/v1/chat/completions", {"messages": [], "stream": True})  # a side request
        assert raw.endswith("data: [DONE]\n\n")
        calls = []
        for _ in range(2):
            _, raw = _post(st.base_url + "/v1/chat/completions", req)
            chunks = [json.loads(x[6:]) for x in raw.split("\n\n") if x.startswith("data: {")]
            assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
            calls.append(chunks[0]["choices"][0]["delta"]["tool_calls"][0]["function"])
        assert calls[0]["name"] == "bash" and json.loads(calls[0]["arguments"])["command"] == "ls"
        assert calls[1] == {"name": "agentmsg-inbox", "arguments": json.dumps({"limit": 5})}
        status, raw = _post(st.base_url + "/v1/chat/completions", dict(req, stream=False))
        doc = json.loads(raw)
        assert status == 200 and doc["choices"][0]["message"]["content"] == "done"
        assert doc["choices"][0]["finish_reason"] == "stop"
        assert _post(st.base_url + "/v1/models", method="GET")[0] == 200
        assert len(st.agent_requests()) == 3 and len(st.model_requests()) == 4


def test_stub_refuses_and_records_proxy_requests():
    import http.client

    with stubs.OpenAIResponsesStub() as st:
        c = http.client.HTTPConnection("127.0.0.1", st.port, timeout=10)
        c.request("CONNECT", "github.com:443")
        assert c.getresponse().status == 403
        c.close()
        (leak,) = st.leaks()
        assert leak.method == "CONNECT" and leak.path == "github.com:443"


def test_missing_host_is_an_error_not_a_skip(monkeypatch, tmp_path):
    monkeypatch.setattr(harness, "NODE_BIN", tmp_path)
    with pytest.raises(harness.HostMissing, match="npm install"):
        harness.claude_bin()
    with pytest.raises(harness.HostMissing, match="npm install"):
        harness.codex_bin()
    with pytest.raises(harness.HostMissing, match="npm install"):
        harness.copilot_bin()


def test_scrubbed_env_has_no_inherited_secrets(monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "real-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "real-secret")
    monkeypatch.setenv("CLAUDECODE", "1")
    with stubs.AnthropicStub() as st:
        env = harness.claude_env(tmp_path, st, {"EXTRA": "1", "LANG": None})
    assert "real-secret" not in env.values()
    assert "CLAUDECODE" not in env and "OPENAI_API_KEY" not in env and "LANG" not in env
    assert env["HOME"] == str(tmp_path) and env["EXTRA"] == "1"
    assert env["HTTPS_PROXY"] == st.base_url and "127.0.0.1" in env["NO_PROXY"]


def test_run_timeout_kills_whole_process_group(tmp_path):
    pidfile = tmp_path / "bg.pid"
    script = f"sleep 60 & echo $! > {pidfile}; wait"
    with pytest.raises(harness.HostTimeout):
        harness._run("sh", ["sh", "-c", script], cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, timeout=1)
    pid = int(pidfile.read_text())
    import os
    import time

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        # a killed child may linger as a zombie until reaped by init
        try:
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"background child {pid} survived the timeout kill")


@hosts
def test_pinned_host_versions(tmp_path):
    import subprocess

    env = harness.scrubbed_env(tmp_path)
    out = subprocess.run(
        [str(harness.claude_bin()), "--version"], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.split()[0] == harness.CLAUDE_VERSION, out
    out = subprocess.run(
        [str(harness.codex_bin()), "--version"], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.split()[-1] == harness.CODEX_VERSION, out
    out = subprocess.run(
        [str(harness.copilot_bin()), "--version"], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.split("\n")[0] == f"GitHub Copilot CLI {harness.COPILOT_VERSION}.", out
    out = subprocess.run(
        [str(harness.gemini_bin()), "--version"], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.strip() == harness.GEMINI_VERSION, out
    pkg = json.loads((harness.REPO_ROOT / "package.json").read_text())["devDependencies"]
    pinned = {"@anthropic-ai/claude-code": harness.CLAUDE_VERSION, "@openai/codex": harness.CODEX_VERSION,
              "@github/copilot": harness.COPILOT_VERSION, "@google/gemini-cli": harness.GEMINI_VERSION}
    assert pinned.items() <= pkg.items(), pkg  # OpenCode's pin is checked where its harness lives
