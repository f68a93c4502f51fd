"""Drive the REAL agentmsg plugin on the real hosts, and read what reached the model.

Used by tests/e2e/test_e2e_hosts.py.  Builds on :mod:`tests.support.hosts.harness` (running
the hosts offline) and :mod:`tests.support.hosts.stubs` (the recorded request bodies).

* :class:`Host` loads the product plugin into one host, one of four ways:
  ``claude`` + ``plugin-dir`` (``--plugin-dir <repo>``), ``claude`` +
  ``installed`` (``claude plugin marketplace add`` + ``install``), ``codex`` +
  ``plugin`` (``codex plugin marketplace add`` + ``codex plugin add``, which
  copies the plugin into ``$CODEX_HOME/plugins/cache``) and ``codex`` +
  ``user-hooks`` (``agentmsg install codex``: user-level hooks running the
  repo's ``hooks/run``).
* :class:`Session` is one native session of a host: Claude's id is chosen up
  front (``--session-id``); Codex's is only known after a first run
  (``thread.started``), so :meth:`Host.begin` runs one unbound turn to learn it.
  Later turns resume it.  Each :meth:`Session.turn` returns a :class:`Turn`:
  the run plus exactly the model requests of that turn.
* Extraction, per host, from one recorded request: the ``additionalContext``
  injected in the current turn (:meth:`Host.contexts`), the Stop-hook reasons
  (:meth:`Host.stop_reasons`) and the shell tool's outputs
  (:meth:`Host.shell_outputs`).
* :func:`parse_block` parses the untrusted boundary strictly: any line inside
  it that is neither agentmsg's attribution nor a ``│ `` quoted line fails.

The agent's shell gets a ``python3`` that is the test venv's interpreter (the
CLI's dependencies are there) but NOT the venv's ``agentmsg`` console script:
inside Claude Code the plugin's ``bin/agentmsg`` must be found through the
plugin (Claude appends ``<plugin>/bin`` to the Bash tool's PATH); Codex does
not do that, so its PATH names the plugin's ``bin/`` explicitly, as a user
would.
"""

from __future__ import annotations

import html
import json
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import harness, stubs

REPO = harness.REPO_ROOT
PLUGIN = "agentmsg"
VENV_PYTHON = Path(sys.executable)
CLI = VENV_PYTHON.parent / "agentmsg"  # the dev console script, for the test process only
RUNTIME = {"claude": "claude-code", "codex": "codex", "gemini": "gemini", "copilot": "copilot"}
# What each host substitutes for an oversized additionalContext (docs/HOSTS-NOTES.md).
PREVIEW_MARKERS = {
    "claude": ("<persisted-output>", "Output too large", "Full output saved to"),
    "codex": ("Full hook output saved to", "Warning: truncated output", "tokens truncated"),
    # Gemini and Copilot: no replacement was seen (their system text already says "truncated"); the proof that
    # the text arrived verbatim is that the whole boundary parses out of the request at the size it was sent.
    "gemini": (),
    "copilot": (),
}
HOST_LIMIT = 10_000  # both hosts pass up to 10,000 units verbatim


# --------------------------------------------------------------------------
# The plugin as shipped, the agent's PATH, the CLI
# --------------------------------------------------------------------------


def export_plugin(dest: Path) -> Path:
    """Copy the repository's files as a clone of it holds them (tracked and
    untracked-but-not-ignored files of the working tree) to ``dest``.

    A directory marketplace install copies the WHOLE source directory, and the
    working tree also holds ``node_modules/`` and ``.venv/`` (1.2 GB, 4-5 s per
    host install), which no clone has.
    """
    out = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    for rel in filter(None, out.decode().split("\0")):
        src = REPO / rel
        if not src.is_file():  # deleted in the working tree
            continue
        dst = dest / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    return dest


def python_shim(dest: Path) -> Path:
    """A directory holding only ``python3``: the test venv's interpreter."""
    dest.mkdir(parents=True, exist_ok=True)
    shim = dest / "python3"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(str(VENV_PYTHON))} "$@"\n')
    shim.chmod(0o755)
    return dest


def host_path(*dirs: str | Path) -> str:
    """PATH for a host run: ``dirs``, node's directory, the system directories."""
    node = shutil.which("node")
    parts = [str(d) for d in dirs] + ([str(Path(node).parent)] if node else []) + ["/usr/local/bin", "/usr/bin", "/bin"]
    return ":".join(dict.fromkeys(parts))


def cli(*args: str, root: Path | None, home: Path, ok: bool = True) -> dict[str, Any]:
    """``agentmsg <args> --json [--root ROOT]`` from the test process; the parsed envelope."""
    argv = [str(VENV_PYTHON), "-m", "agentmsg.cli", *args, "--json",
            *(["--root", str(root)] if root is not None else [])]
    env = harness.scrubbed_env(home, env_extra={"PYTHONPATH": str(REPO)})  # this checkout's code, not the venv's
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, cwd=str(REPO))
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"{argv}: no JSON envelope\nstdout={proc.stdout!r}\nstderr={proc.stderr!r}") from None
    if ok:
        assert doc["ok"] and proc.returncode == 0, (argv, doc, proc.stderr)
    return doc


@dataclass
class Collab:
    """A collaboration in ``root``, set up through the CLI (``--self`` pins)."""

    id: str
    root: Path
    home: Path  # HOME for the CLI processes

    @property
    def dir(self) -> Path:
        return self.root / "collabs" / self.id

    def join(self, pin: str, alias: str) -> None:
        cli("join", "--collab", self.id, "--self", pin, "--alias", alias, root=self.root, home=self.home)

    def send(self, pin: str, to: str, subject: str, body: str, *, kind: str = "request") -> str:
        doc = cli("send", "--collab", self.id, "--self", pin, "--to", to, "--kind", kind, "--subject", subject,
                  "--body", body, root=self.root, home=self.home)
        (res,) = doc["result"]["results"]
        return res["id"]

    def ack(self, pin: str, message: str) -> None:
        cli("ack", "--collab", self.id, "--self", pin, "--message", message, root=self.root, home=self.home)

    def enable_delivery(self, pin: str, slots: int) -> dict[str, Any]:
        return cli("delivery", "enable", "--collab", self.id, "--self", pin, "--max-continuations", str(slots),
                   root=self.root, home=self.home)["result"]

    def inspect_delivery(self, pin: str) -> dict[str, Any]:
        return cli("delivery", "inspect", "--collab", self.id, "--self", pin, root=self.root, home=self.home)["result"]

    def journal(self, name: str) -> list[dict[str, Any]]:
        path = self.dir / name
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    def slots(self) -> list[int]:
        """Slot numbers of the ``delivery-slot`` records, in order."""
        return [r["slot"] for r in self.journal("delivery.jsonl") if r["type"] == "delivery-slot"]

    def presented(self, alias: str) -> dict[str, list[str]]:
        """Presented attempts from ``receipts/<alias>.jsonl``: attempt id -> message ids, in order."""
        out: dict[str, list[str]] = {}
        for r in self.journal(f"receipts/{alias}.jsonl"):
            if r["type"] == "presented":
                out.setdefault(r["attempt"], []).append(r["message"])
        return out


def open_collab(root: Path, home: Path, *, opener: str = "human:carol", alias: str = "carol",
                label: str = "e2e", task: str = "end-to-end test of delivery on the real hosts") -> Collab:
    doc = cli("open", "--self", opener, "--alias", alias, "--label", label, "--task", task, root=root, home=home)
    return Collab(doc["result"]["collab"], root, home)


# --------------------------------------------------------------------------
# Hosts and sessions
# --------------------------------------------------------------------------


@dataclass
class Turn:
    run: harness.HostRun
    prompt: str
    requests: list[stubs.Recorded]  # the model requests of this turn, in order
    host: Host

    def contexts(self, i: int = 0) -> dict[str, str]:
        return self.host.contexts(self.requests[i], self.prompt)

    def new_stop_reasons(self) -> list[str]:
        """Stop-hook reasons that appeared during this turn (each request vs the one before)."""
        out: list[str] = []
        for prev, cur in zip(self.requests, self.requests[1:], strict=False):
            before = list(self.host.stop_reasons(prev))
            for r in self.host.stop_reasons(cur):
                if r in before:
                    before.remove(r)
                else:
                    out.append(r)
        return out


@dataclass
class Session:
    host: Host
    id: str
    started: bool

    @property
    def pin(self) -> str:
        return f"{self.host.runtime}:{self.id}"

    def turn(self, stub: Any, prompt: str, replies: Sequence[stubs.Reply | str], *, root: Path,
             env: Mapping[str, str] | None = None, tools: Sequence[str] = ("Bash",)) -> Turn:
        """One host turn; the stub answers exactly ``replies`` (asserted), then ``ok``."""
        assert stub.remaining() == 0, "replies left over from an earlier turn"
        stub.push(*replies)
        n0 = len(stub.snapshot())
        if self.started:
            run = self.host.run(stub, prompt, root=root, resume=self.id, env=env, tools=tools)
        else:
            run = self.host.run(stub, prompt, root=root, session_id=self.id, env=env, tools=tools)
            self.started = True
        run.check()
        assert run.session_id == self.id, (run.session_id, self.id)
        reqs = [r for r in stub.snapshot()[n0:] if r.reply is not None]
        assert stub.remaining() == 0, f"{stub.remaining()} scripted replies unused: fewer model requests than expected"
        if self.host.name in ("gemini", "copilot") and reqs and reqs[-1].reply is not None:
            # Gemini's stream-json joins the assistant text before and after an AfterAgent continuation into one
            # message, and Copilot prints every reply: the turn's final text is the stub's last reply, which the
            # host's output must end with.
            final = reqs[-1].reply.text
            assert (run.result or "").endswith(final), (run.result, final)
            run.__dict__["result"] = final
        return Turn(run, prompt, reqs, self.host)


class Host:
    """One host with the product plugin loaded one way.  ``base`` is a private directory."""

    def __init__(self, name: str, mode: str, base: Path, *, export: Path | None = None) -> None:
        self.name, self.mode, self.base = name, mode, base
        self.runtime = RUNTIME[name]
        self.home = base / "home"
        self.cwd = base / "work"
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        shim = python_shim(base / "pybin")
        self.plugin_root: Path  # where the hooks and bin/agentmsg run from
        self.codex_home = base / "codex_home"
        self.install_result: Any = None
        if (name, mode) == ("claude", "plugin-dir"):
            self.plugin_root = REPO
            self.path = host_path(shim)
        elif (name, mode) == ("claude", "installed"):
            assert export is not None
            self.install_result = harness.install_claude_plugin(export, PLUGIN, home=self.home)
            self.plugin_root = export  # a directory marketplace runs in place
            self.path = host_path(shim)
        elif (name, mode) == ("codex", "plugin"):
            assert export is not None
            self.plugin_root = harness.install_codex_plugin(export, PLUGIN, codex_home=self.codex_home, home=self.home)
            self.install_result = self.plugin_root
            self.path = host_path(shim, self.plugin_root / "bin")
        elif (name, mode) == ("codex", "user-hooks"):
            self.install_result = cli("install", "codex", "--codex-home", str(self.codex_home), root=None,
                                      home=self.home)["result"]
            self.plugin_root = REPO
            self.path = host_path(shim, REPO / "bin")
        elif (name, mode) == ("gemini", "extension"):
            assert export is not None  # `gemini extensions install <dir> --consent` copies it to ~/.gemini/extensions
            self.install_result = harness.gemini_cli(["extensions", "install", str(export), "--consent"],
                                                     home=self.home)
            self.plugin_root = self.home / ".gemini" / "extensions" / PLUGIN
            self.path = host_path(shim, self.plugin_root / "bin")
        elif (name, mode) == ("copilot", "plugin-dir"):
            self.plugin_root = REPO
            self.path = host_path(shim, REPO / "bin")  # Copilot puts no plugin bin/ on PATH: named, as for Codex
        elif (name, mode) == ("copilot", "marketplace"):
            assert export is not None  # a directory marketplace is loaded in place
            chome = self.base / "copilot_home"
            harness.copilot_plugin_cli(["marketplace", "add", str(export)], home=self.home, copilot_home=chome)
            self.install_result = harness.copilot_plugin_cli(["install", f"{PLUGIN}@{PLUGIN}"], home=self.home,
                                                             copilot_home=chome)
            self.plugin_root = export
            self.path = host_path(shim, export / "bin")
        else:
            raise ValueError(f"unknown host mode {name}/{mode}")

    def __repr__(self) -> str:
        return f"Host({self.name}, {self.mode})"

    # ---- running ---------------------------------------------------------

    def stub(self) -> Any:
        return {"claude": stubs.AnthropicStub, "codex": stubs.OpenAIResponsesStub, "gemini": stubs.GeminiStub,
                "copilot": stubs.ChatCompletionsStub}[self.name]()

    def run(self, stub: Any, prompt: str, *, root: Path, session_id: str | None = None, resume: str | None = None,
            env: Mapping[str, str] | None = None, tools: Sequence[str] = ("Bash",)) -> harness.HostRun:
        """``tools``: Claude Code's ``--allowedTools``."""
        extra = {"AGENTMSG_HOME": str(root), "PATH": self.path, **(env or {})}
        if self.name == "claude":
            plugin_dir = REPO if self.mode == "plugin-dir" else None
            return harness.run_claude(prompt, cwd=self.cwd, home=self.home, stub=stub, plugin_dir=plugin_dir,
                                      env_extra=extra, session_id=session_id, resume=resume, timeout=90,
                                      allowed_tools=tools)
        if self.name == "gemini":  # through `agentmsg run gemini`, which exports the id to the agent's shell
            return harness.run_gemini(prompt, cwd=self.cwd, home=self.home, stub=stub, session_id=session_id,
                                      resume=resume, env_extra=extra, timeout=90, launcher=LAUNCHER)
        if self.name == "copilot":
            plugin = ["--plugin-dir", str(REPO)] if self.mode == "plugin-dir" else []
            return harness.run_copilot(prompt, cwd=self.cwd, home=self.home, copilot_home=self.base / "copilot_home",
                                       stub=stub, session_id=session_id, resume=resume, env_extra=extra, timeout=90,
                                       extra_args=plugin)
        assert session_id is None, "Codex session ids cannot be chosen"
        return harness.run_codex(prompt, cwd=self.cwd, codex_home=self.codex_home, home=self.home, stub=stub,
                                 env_extra=extra, resume=resume, timeout=90)

    def begin(self, stub: Any, *, root: Path) -> Session:
        """A new native session.  Codex: one first (unbound) turn to learn the thread id."""
        if self.name != "codex":
            return Session(self, str(uuid.uuid4()), started=False)
        assert stub.remaining() == 0
        stub.push(stubs.text("session started"))
        run = self.run(stub, "start a session", root=root).check()
        assert run.result == "session started" and run.session_id, run.stdout[-2000:]
        return Session(self, run.session_id, started=True)

    # ---- reading recorded requests ---------------------------------------

    def measure(self, text: str) -> int:
        """Size as this host counts it (UTF-8 bytes for Codex; UTF-16 units for the JS hosts)."""
        if self.name != "codex":
            return len(text.encode("utf-16-le", "surrogatepass")) // 2
        return len(text.encode("utf-8", "surrogatepass"))

    def contexts(self, req: stubs.Recorded, prompt: str) -> dict[str, str]:
        """``{event: additionalContext}`` injected in the turn whose user prompt is ``prompt``."""
        return _READERS[self.name][0](req.body, prompt)

    def stop_reasons(self, req: stubs.Recorded) -> list[str]:
        return _READERS[self.name][1](req.body)

    def shell_outputs(self, req: stubs.Recorded) -> list[str]:
        return _READERS[self.name][2](req.body)


def body_text(req: stubs.Recorded) -> str:
    """The parsed request body as JSON text, non-ASCII unescaped (for "never present" checks)."""
    return json.dumps(req.body, ensure_ascii=False)


# --------------------------------------------------------------------------
# Claude request bodies
# --------------------------------------------------------------------------


def _claude_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]


def _last_index(items: Sequence[Any], pred: Any) -> int:
    idx = [i for i, it in enumerate(items) if pred(it)]
    assert idx, "the turn's user prompt is not in the request"
    return idx[-1]


def claude_contexts(body: Mapping[str, Any], prompt: str) -> dict[str, str]:
    """Claude puts SessionStart and UserPromptSubmit context, as ``<Event> hook
    additional context: <ctx>`` segments separated by blank lines, in the first
    ``role: system`` message after the user prompt."""
    msgs = body["messages"]
    i = _last_index(msgs, lambda m: m["role"] == "user" and prompt in _claude_texts(m["content"]))
    system = next((m for m in msgs[i + 1 :] if m["role"] == "system"), None)
    if system is None:
        return {}
    text = "".join(_claude_texts(system["content"]))
    out = {}
    for event in ("SessionStart", "UserPromptSubmit"):
        prefix = f"{event} hook additional context: "
        assert text.count(prefix) <= 1, f"{event} context appears more than once in one system message"
        at = text.find(prefix)
        if at < 0:
            continue
        start = at + len(prefix)
        end = text.find("\n\n", start)
        if end < 0:
            out[event] = text[start:]
            continue
        run = len(text[end:]) - len(text[end:].lstrip("\n"))
        out[event] = text[start : end + run - 2]  # the host's separator is the last two newlines
    return out


def claude_stop_reasons(body: Mapping[str, Any]) -> list[str]:
    """Reasons of Stop blocks: Claude adds a user message ``Stop hook feedback:\\n<reason>``."""
    prefix = "Stop hook feedback:\n"
    out = []
    for m in body["messages"]:
        if m["role"] == "user":
            out += [t[len(prefix) :] for t in _claude_texts(m["content"]) if t.startswith(prefix)]
    return out


def claude_shell_outputs(body: Mapping[str, Any]) -> list[str]:
    out = []
    for m in body["messages"]:
        if m["role"] != "user" or isinstance(m["content"], str):
            continue
        for b in m["content"]:
            if b.get("type") == "tool_result":
                out.append(b["content"] if isinstance(b["content"], str) else "".join(_claude_texts(b["content"])))
    return out


# --------------------------------------------------------------------------
# Codex request bodies
# --------------------------------------------------------------------------


def _codex_message(item: Any, role: str) -> list[str] | None:
    if not (isinstance(item, dict) and item.get("type") == "message" and item.get("role") == role):
        return None
    return [c.get("text", "") for c in item["content"] if c.get("type") == "input_text"]


def codex_contexts(body: Mapping[str, Any], prompt: str) -> dict[str, str]:
    """Codex puts each additionalContext in its own developer item: SessionStart's
    right before the user prompt item, UserPromptSubmit's right after it."""
    items = body["input"]
    i = _last_index(items, lambda it: _codex_message(it, "user") == [prompt])
    out = {}
    for event, j in (("SessionStart", i - 1), ("UserPromptSubmit", i + 1)):
        texts = _codex_message(items[j], "developer") if 0 <= j < len(items) else None
        if texts is not None:
            (out[event],) = texts
    return out


_HOOK_PROMPT = re.compile(r'<hook_prompt hook_run_id="stop:[^"]*">(.*)</hook_prompt>', re.S)


def codex_stop_reasons(body: Mapping[str, Any]) -> list[str]:
    """Reasons of Stop blocks: Codex adds a user item
    ``<hook_prompt hook_run_id="stop:…">reason (XML-escaped)</hook_prompt>``."""
    out = []
    for it in body["input"]:
        for t in _codex_message(it, "user") or ():
            m = _HOOK_PROMPT.fullmatch(t)
            if m:
                out.append(html.unescape(m.group(1)))
    return out


def codex_shell_outputs(body: Mapping[str, Any]) -> list[str]:
    """The stdout of each ``exec_command`` (Codex wraps it in a ``… Output:\\n`` header)."""
    out = []
    for it in body["input"]:
        if it.get("type") == "function_call_output":
            text = it["output"] if isinstance(it["output"], str) else json.dumps(it["output"])
            out.append(text.split("\nOutput:\n", 1)[1] if "\nOutput:\n" in text else text)
    return out


# --------------------------------------------------------------------------
# Gemini CLI request bodies (Gemini API contents)
# --------------------------------------------------------------------------

_HOOK_CONTEXT = re.compile(r"<hook_context>(.*)</hook_context>", re.S)


def _gemini_texts(content: Mapping[str, Any]) -> list[str]:
    return [p["text"] for p in content.get("parts", []) if isinstance(p, dict) and isinstance(p.get("text"), str)]


def gemini_contexts(body: Mapping[str, Any], prompt: str) -> dict[str, str]:
    """Gemini prepends SessionStart context to the prompt's text part as ``<hook_context>CTX</hook_context>\n\n``
    and adds BeforeAgent context as another part of the same user content, ``<hook_context>CTX</hook_context>``."""
    contents = body["contents"]
    tail = "</hook_context>\n\n" + prompt

    def is_prompt(t: str) -> bool:
        return t == prompt or (t.startswith("<hook_context>") and t.endswith(tail))

    i = _last_index(contents, lambda c: c.get("role") == "user" and any(is_prompt(t) for t in _gemini_texts(c)))
    texts = _gemini_texts(contents[i])
    j = next(k for k, t in enumerate(texts) if is_prompt(t))
    out = {}
    if texts[j] != prompt:
        out["SessionStart"] = texts[j][len("<hook_context>"):-len(tail)]
    after = [m.group(1) for t in texts[j + 1:] if (m := _HOOK_CONTEXT.fullmatch(t))]
    assert len(after) <= 1, "BeforeAgent context appears more than once in one prompt"
    if after:
        out["UserPromptSubmit"] = after[0]
    return out


def gemini_stop_reasons(body: Mapping[str, Any]) -> list[str]:
    """Reasons of AfterAgent blocks: Gemini makes the reason the next user turn's text, unwrapped."""
    return [t for c in body["contents"] if c.get("role") == "user" for t in _gemini_texts(c)
            if t.startswith("agentmsg: ")]


_GEMINI_OUTPUT = re.compile(r"<untrusted_context>\nOutput: (.*?)(?:\nProcess Group PGID: \d+)?\n</untrusted_context>",
                            re.S)


def gemini_shell_outputs(body: Mapping[str, Any]) -> list[str]:
    out = []
    for c in body["contents"]:
        for p in c.get("parts", []):
            resp = p.get("functionResponse") if isinstance(p, dict) else None
            if resp and resp.get("name") == "run_shell_command":
                text = str(resp.get("response", {}).get("output", ""))
                m = _GEMINI_OUTPUT.fullmatch(text)
                out.append(m.group(1) if m else text)
    return out


# --------------------------------------------------------------------------
# Copilot CLI request bodies (OpenAI chat completions)
# --------------------------------------------------------------------------

_DATETIME = re.compile(r"<current_datetime>[^<]*</current_datetime>\n\n", re.S)
_REMINDER = re.compile(r"\n\n<system_reminder>\n(.*)</system_reminder>\Z", re.S)


def _copilot_user(m: Any) -> str | None:
    if not (isinstance(m, dict) and m.get("role") == "user"):
        return None
    content = m.get("content")
    if isinstance(content, list):
        content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return content if isinstance(content, str) else None


def _copilot_split(text: str) -> tuple[str | None, str, str | None]:
    """(datetime header or None, the prompt, the system reminder or None) of one user message."""
    head = _DATETIME.match(text)
    rest = text[head.end():] if head else text
    m = _REMINDER.search(rest)
    return (head.group(0) if head else None, rest[:m.start()] if m else rest, m.group(1) if m else None)


def copilot_contexts(body: Mapping[str, Any], prompt: str) -> dict[str, str]:
    """Copilot makes sessionStart context its own user message (before the prompt's), and appends prompt
    context to the prompt's user message inside ``<system_reminder>``."""
    msgs = body["messages"]
    i = _last_index(msgs, lambda m: (t := _copilot_user(m)) is not None and _copilot_split(t)[1] == prompt)
    out = {}
    reminder = _copilot_split(_copilot_user(msgs[i]) or "")[2]
    if reminder is not None:
        out["UserPromptSubmit"] = reminder
    before = _copilot_user(msgs[i - 1]) if i > 0 else None
    if before is not None and _DATETIME.match(before) is None and before.startswith("agentmsg"):
        out["SessionStart"] = before
    return out


def copilot_stop_reasons(body: Mapping[str, Any]) -> list[str]:
    """Reasons of Stop blocks: Copilot makes the reason the next user prompt (after its datetime header)."""
    out = []
    for m in body["messages"]:
        text = _copilot_user(m)
        if text is None or _DATETIME.match(text) is None:
            continue
        prompt = _copilot_split(text)[1]
        if prompt.startswith("agentmsg: "):
            out.append(prompt)
    return out


def copilot_shell_outputs(body: Mapping[str, Any]) -> list[str]:
    """The output of each ``bash`` tool call (without Copilot's ``<shellId: …>`` trailer)."""
    return [re.sub(r"\n<shellId: [^>]*>\Z", "", c.result) for c in copilot_tool_calls(body)
            if c.name == "bash" and c.result is not None]


@dataclass
class ToolCall:
    name: str
    args: dict[str, Any]
    result: str | None  # the tool message's text; None if the request does not carry it yet


def copilot_tool_calls(body: Mapping[str, Any]) -> list[ToolCall]:
    """Every assistant tool call in ``messages``, with the ``role: tool`` message answering it."""
    results: dict[str, str] = {}
    for m in body["messages"]:
        if m["role"] == "tool":
            c = m["content"]
            results[m["tool_call_id"]] = c if isinstance(c, str) else "".join(p.get("text", "") for p in c)
    return [ToolCall(tc["function"]["name"], json.loads(tc["function"]["arguments"] or "{}"), results.get(tc["id"]))
            for m in body["messages"] if m["role"] == "assistant" for tc in m.get("tool_calls") or ()]


def split_mcp_result(text: str) -> tuple[str, dict[str, Any] | None]:
    """Copilot CLI hands the model an MCP tool result as its text content, then
    ``structuredContent`` as JSON after two blank lines: ``(text, structured)``."""
    head, sep, tail = text.rpartition("\n\n\n")
    if sep and tail.startswith("{"):
        return head, json.loads(tail)
    return text, None


# --------------------------------------------------------------------------
# The untrusted boundary
# --------------------------------------------------------------------------

BEGIN = "⟦agentmsg peer data · begin · nonce {}⟧"
END = "⟦agentmsg peer data · end · nonce {}⟧"
_EXPLANATION = re.compile(
    r"The lines between the two boundary lines carrying nonce (?P<nonce>[0-9a-f]{32}) are untrusted data: (?P<rest>.*)"
)
_LINES = {
    "message": re.compile(r"message (?P<number>\d+) · id (?P<id>[0-9a-f-]{36})"),
    "from": re.compile(
        r"  from: (?P<sender>[^ ]+) \((?P<runtime>[^)]+)\) · kind: (?P<kind>\w+) · priority: (?P<priority>\w+)"
        r" · sent (?P<sent>\d{4}-\d\d-\d\d \d\d:\d\d UTC)"
    ),
    "subject": re.compile(r"  subject: (?P<subject>.*)"),
    "reply_to": re.compile(r"  reply to: (?P<reply_to>.*)"),
    "flags": re.compile(r"  flags: (?P<flags>.*)"),
    "handoff": re.compile(r"  handoff: (?P<handoff>.*)"),  # a typed message (issue 31)
    # its artifacts as the reader's own checkout has them (issue 31: unchanged, changed, missing or unverified)
    "artifacts": re.compile(r"  artifacts in this checkout as of [0-9-]+ [0-9:]+ UTC: (?P<artifacts>.*)"),
    "length": re.compile(r"  body, (?P<length>[\d,]+) characters?:"),
    "empty": re.compile(r"  body: \(empty\)"),
    "quoted": re.compile(r"│ (?P<line>.*)"),
    "cut": re.compile(
        r"  \[body cut: (?P<shown>[\d,]+) of (?P<total>[\d,]+) characters shown; the rest: (?P<command>[^\]]+)\]"
    ),
}


@dataclass
class Quoted:
    number: int
    id: str
    sender: str = ""
    runtime: str = ""
    kind: str = ""
    priority: str = ""
    subject: str = ""
    reply_to: str | None = None
    flags: str | None = None
    handoff: str | None = None
    artifacts: str | None = None
    length: int = 0
    lines: list[str] = field(default_factory=list)
    cut: tuple[int, int, str] | None = None  # (shown, total, command)

    @property
    def body(self) -> str:
        return "\n".join(self.lines)


@dataclass
class Block:
    lead: list[str]  # agentmsg's fact lines before the explanation
    nonce: str
    explanation: str
    messages: list[Quoted]
    after: list[str]  # agentmsg's lines after the end marker

    @property
    def ids(self) -> list[str]:
        return [m.id for m in self.messages]


#: The CLI as a host that cannot find it by name is told to run it (Codex: the launcher's absolute path);
#: tests/hosts/test_newcomer.py checks that form, the block parser reads it as plain ``agentmsg``.
_CLI_PATH = re.compile(r"(?:'[^'`\n]*/bin/agentmsg'|/[^\s`']*/bin/agentmsg)(?= )")


def parse_block(text: str) -> Block:
    """Parse one injected text strictly (AssertionError on anything unexpected)."""
    text = _CLI_PATH.sub("agentmsg", text)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    exp = [i for i, line in enumerate(lines) if _EXPLANATION.fullmatch(line)]
    assert len(exp) == 1, f"expected one untrusted-data statement, found {len(exp)}:\n{text[:2000]}"
    e = exp[0]
    m = _EXPLANATION.fullmatch(lines[e])
    assert m is not None
    nonce = m["nonce"]
    begin, end = BEGIN.format(nonce), END.format(nonce)
    assert lines[e + 1] == begin, f"no begin marker after the statement: {lines[e + 1]!r}"
    assert lines.count(begin) == 1 and lines.count(end) == 1, "begin/end marker is not unique"
    stop = lines.index(end)
    assert stop > e + 1
    msgs: list[Quoted] = []
    for line in lines[e + 2 : stop]:
        assert "⟦" not in line and "⟧" not in line, f"a boundary bracket inside the boundary: {line!r}"
        kind, mm = next(((k, rx.fullmatch(line)) for k, rx in _LINES.items() if rx.fullmatch(line)), (None, None))
        assert kind is not None and mm is not None, f"unexpected line inside the boundary: {line!r}"
        if kind == "message":
            msgs.append(Quoted(int(mm["number"]), mm["id"]))
            continue
        assert msgs, f"{kind} line before any message line: {line!r}"
        cur = msgs[-1]
        if kind == "from":
            cur.sender, cur.runtime, cur.kind, cur.priority = mm["sender"], mm["runtime"], mm["kind"], mm["priority"]
        elif kind == "subject":
            cur.subject = mm["subject"]
        elif kind in ("reply_to", "flags", "handoff", "artifacts"):
            setattr(cur, kind, mm[kind])
        elif kind == "length":
            cur.length = int(mm["length"].replace(",", ""))
        elif kind == "quoted":
            assert cur.cut is None, "a quoted line after the cut marker"
            cur.lines.append(mm["line"])
        elif kind == "cut":
            cur.cut = (int(mm["shown"].replace(",", "")), int(mm["total"].replace(",", "")), mm["command"])
    assert [q.number for q in msgs] == list(range(1, len(msgs) + 1)), "messages are not numbered 1..n"
    return Block(lines[:e], nonce, lines[e], msgs, lines[stop + 1 :])


# --------------------------------------------------------------------------
# Running a hook command exactly as the hosts do
# --------------------------------------------------------------------------


HOOK_FILES = {"claude": "hooks.json", "codex": "codex-hooks.json", "gemini": "hooks.json",
              "copilot": "copilot-hooks.json"}
GEMINI_EVENTS = {"UserPromptSubmit": "BeforeAgent", "Stop": "AfterAgent"}


def hook_command(host: str, event: str) -> str:
    """The command line the plugin's hooks file gives ``event`` (Gemini: its own event names in hooks.json,
    with ``${extensionPath}`` substituted as Gemini does)."""
    if host == "gemini":
        event = GEMINI_EVENTS.get(event, event)
    groups = json.loads((REPO / "hooks" / HOOK_FILES[host]).read_text())["hooks"][event]
    # Claude's asyncRewake wake-up waiter (issue 11) is a group of its own beside the delivery hook.
    (group,) = [g for g in groups if not any(h.get("asyncRewake") for h in g["hooks"])]
    (hook,) = group["hooks"]
    assert hook["type"] == "command"
    return hook["command"].replace("${extensionPath}", str(REPO)) if host == "gemini" else hook["command"]


def run_hook_command(host: str, event: str, stdin: bytes, *, root: Path, base: Path, path: str,
                     timeout: float = 30) -> subprocess.CompletedProcess[bytes]:
    """``/bin/sh -c <command>`` with the plugin variables each host sets (docs/HOSTS-NOTES.md)."""
    home = base / "home"
    data = base / f"plugin-data-{host}"
    env = harness.scrubbed_env(home, env_extra={"AGENTMSG_HOME": str(root), "PATH": path})
    if host == "claude":
        env.update(CLAUDE_PLUGIN_ROOT=str(REPO), CLAUDE_PLUGIN_DATA=str(data), CLAUDE_PROJECT_DIR=str(base))
    elif host == "gemini":  # Gemini: the session id, and Claude's project variable too (HOSTS-MORE.md)
        env.update(GEMINI_SESSION_ID=str(uuid.uuid4()), GEMINI_PROJECT_DIR=str(base), CLAUDE_PROJECT_DIR=str(base))
    elif host == "copilot":  # Copilot also sets Claude's plugin variables: COPILOT_CLI tells it apart
        env.update(COPILOT_CLI="1", COPILOT_PLUGIN_ROOT=str(REPO), PLUGIN_ROOT=str(REPO), PLUGIN_DATA=str(data),
                   CLAUDE_PLUGIN_ROOT=str(REPO), CLAUDE_PLUGIN_DATA=str(data), CLAUDE_PROJECT_DIR=str(base))
    else:
        env.update(CODEX_HOME=str(base / "codex_home"), PLUGIN_ROOT=str(REPO), PLUGIN_DATA=str(data),
                   CLAUDE_PLUGIN_ROOT=str(REPO), CLAUDE_PLUGIN_DATA=str(data))
    return subprocess.run(["/bin/sh", "-c", hook_command(host, event)], input=stdin, env=env, capture_output=True,
                          timeout=timeout)


#: Per host: (contexts, stop_reasons, shell_outputs) readers of one recorded request body.
_READERS = {
    "claude": (claude_contexts, claude_stop_reasons, claude_shell_outputs),
    "codex": (codex_contexts, codex_stop_reasons, codex_shell_outputs),
    "gemini": (gemini_contexts, gemini_stop_reasons, gemini_shell_outputs),
    "copilot": (copilot_contexts, copilot_stop_reasons, copilot_shell_outputs),
}
#: The Gemini CLI runs through `agentmsg run gemini --` (this checkout's CLI), so its shell has GEMINI_SESSION_ID.
LAUNCHER = [str(VENV_PYTHON), "-c", f"import sys; sys.path.insert(0, {str(REPO)!r}); "
            "from agentmsg.cli.main import main; sys.exit(main())", "run", "gemini", "--"]
