"""Run the REAL host CLIs (Claude Code, Codex, GitHub Copilot CLI) for one non-interactive turn,
offline, against a stub model server owned by the test.

The hosts come from ``node_modules`` (``npm install`` in the repo root, pinned
by ``package.json``).  Nothing here skips: a missing host is an error.

Isolation for every run:

* a fresh environment built from scratch (nothing inherited: no real API keys,
  no ``CLAUDECODE``/``CODEX_*`` of an enclosing agent session), with
  ``HOME`` (and ``CODEX_HOME``) pointing at test-owned directories;
* ``HTTP(S)_PROXY``/``ALL_PROXY`` point at the stub itself with
  ``NO_PROXY=127.0.0.1,localhost``, so whatever a host tries to reach besides
  the stub (Codex's curated-plugin ``git ls-remote`` of github.com, for one)
  is refused on loopback and recorded as ``stub.leaks()``;
* the non-essential traffic/telemetry switches of both hosts are off;
* the host runs in its own process group, which is killed on timeout.

See docs/HOSTS-NOTES.md for what was verified with these helpers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .stubs import AnthropicStub, ChatCompletionsStub, GeminiStub, OpenAIResponsesStub

REPO_ROOT = Path(__file__).resolve().parents[3]
NODE_BIN = REPO_ROOT / "node_modules" / ".bin"
CLAUDE_VERSION = "2.1.328"
CODEX_VERSION = "0.169.0"
COPILOT_VERSION = "1.0.102"
GEMINI_VERSION = "0.61.0"
INSTALL_HINT = (
    "run `npm install` in the repository root (it installs the pinned "
    "@anthropic-ai/claude-code, @openai/codex and @github/copilot from package.json), then the "
    "README test command"
)
CODEX_MODEL = "gpt-stub"
CODEX_PROVIDER = "stub"
CODEX_KEY_ENV = "STUB_KEY"


class HostMissing(RuntimeError):
    """The host CLI is not installed under node_modules."""


class HostTimeout(RuntimeError):
    """The host did not finish within its timeout (its process group was killed)."""

    def __init__(self, msg: str, stdout: str, stderr: str) -> None:
        super().__init__(f"{msg}\n--- stdout (tail) ---\n{stdout[-4000:]}\n--- stderr (tail) ---\n{stderr[-4000:]}")
        self.stdout, self.stderr = stdout, stderr


class HostRun(tuple):
    """``(returncode, stdout, stderr, session_id)``, plus attributes.

    Unpacks as a 4-tuple.  Extra attributes:
      ``argv``, ``duration`` (seconds), ``events`` (parsed JSON output: Claude's
      single ``--output-format json`` result object in a 1-list, or Codex's
      ``--json`` JSONL events), ``result`` (final assistant text, if found),
      ``host`` ("claude" | "codex").
    """

    def __new__(cls, returncode: int, stdout: str, stderr: str, session_id: str | None, **attrs: Any):
        self = super().__new__(cls, (returncode, stdout, stderr, session_id))
        self.__dict__.update(attrs)
        return self

    returncode = property(lambda self: self[0])
    stdout = property(lambda self: self[1])
    stderr = property(lambda self: self[2])
    session_id = property(lambda self: self[3])

    def check(self) -> HostRun:
        """Raise with the host's output if it exited non-zero; return self."""
        if self.returncode != 0:
            raise AssertionError(
                f"{self.__dict__.get('host')} exited {self.returncode}\nargv={self.__dict__.get('argv')}\n"
                f"--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}"
            )
        return self


# --------------------------------------------------------------------------
# Locating the hosts
# --------------------------------------------------------------------------


def _host_bin(name: str, package: str) -> Path:
    path = NODE_BIN / name
    if not path.exists():
        raise HostMissing(f"{path} not found: the real {package} CLI is not installed; {INSTALL_HINT}.")
    if name == "codex" and shutil.which("node") is None:
        raise HostMissing("`node` is not on PATH; the codex npm launcher needs Node >= 20.")
    return path


def claude_bin() -> Path:
    """Path of the pinned Claude Code CLI (``node_modules/.bin/claude``)."""
    return _host_bin("claude", f"@anthropic-ai/claude-code@{CLAUDE_VERSION}")


def codex_bin() -> Path:
    """Path of the pinned Codex CLI (``node_modules/.bin/codex``)."""
    return _host_bin("codex", f"@openai/codex@{CODEX_VERSION}")


def copilot_bin() -> Path:
    """Path of the pinned GitHub Copilot CLI (``node_modules/.bin/copilot``)."""
    return _host_bin("copilot", f"@github/copilot@{COPILOT_VERSION}")


def gemini_bin() -> Path:
    """Path of the pinned Gemini CLI (``node_modules/.bin/gemini``)."""
    return _host_bin("gemini", f"@google/gemini-cli@{GEMINI_VERSION}")


# --------------------------------------------------------------------------
# Environment
# --------------------------------------------------------------------------


def _default_path() -> str:
    dirs: list[str] = [str(Path(sys.executable).parent)]  # venv bin: python3 + console scripts
    node = shutil.which("node")
    if node:
        dirs.append(str(Path(node).parent))
    dirs += ["/usr/local/bin", "/usr/bin", "/bin"]
    seen: list[str] = []
    for d in dirs:
        if d not in seen:
            seen.append(d)
    return os.pathsep.join(seen)


def scrubbed_env(
    home: str | os.PathLike, *, stub: Any = None, env_extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A from-scratch environment for a host process.

    ``PATH`` = this interpreter's bin dir (so ``python3`` is the test venv's and
    the project's console scripts resolve), node's dir, then system dirs.
    ``env_extra`` is applied last (may override anything; a value of ``None``
    removes the key).
    """
    home = str(home)
    os.makedirs(os.path.join(home, ".tmp"), exist_ok=True)
    env = {
        "HOME": home,
        "USER": "agentmsg-test",
        "LOGNAME": "agentmsg-test",
        "PATH": _default_path(),
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        # Per-HOME temp dir: Codex writes oversized hook output to
        # $TMPDIR/hook_outputs/, Claude its per-session scratch dirs.
        "TMPDIR": os.path.join(home, ".tmp"),
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
        "XDG_STATE_HOME": os.path.join(home, ".local", "state"),
    }
    if stub is not None:
        proxy = stub.base_url
        for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            env[k] = proxy
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost,::1"
    for k, v in (env_extra or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def _run(host: str, argv: list[str], *, cwd: str | os.PathLike, env: dict[str, str], timeout: float) -> HostRun:
    Path(cwd).mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=str(cwd),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _killpg(proc.pid)
        out, err = proc.communicate(timeout=10)
        raise HostTimeout(
            f"{host} did not finish within {timeout}s: {argv!r}",
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
        ) from None
    finally:
        _killpg(proc.pid)  # reap anything the host left behind in its group
    return HostRun(
        proc.returncode,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
        None,
        argv=argv,
        duration=time.monotonic() - t0,
        host=host,
        events=[],
        result=None,
    )


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _cli(host: str, argv: list[str], *, env: dict[str, str], cwd: str | os.PathLike, timeout: float = 60) -> HostRun:
    run = _run(host, argv, cwd=cwd, env=env, timeout=timeout)
    return run.check()


# --------------------------------------------------------------------------
# Claude Code
# --------------------------------------------------------------------------

CLAUDE_QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no /api/hello probe, no api.anthropic.com lookups
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
}


def claude_env(
    home: str | os.PathLike, stub: AnthropicStub, env_extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    base = {"ANTHROPIC_BASE_URL": stub.base_url, "ANTHROPIC_API_KEY": "sk-ant-stub-not-a-key", **CLAUDE_QUIET_ENV}
    return scrubbed_env(home, stub=stub, env_extra={**base, **(env_extra or {})})


def run_claude(
    prompt: str,
    *,
    cwd: str | os.PathLike,
    home: str | os.PathLike,
    stub: AnthropicStub,
    plugin_dir: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
    env_extra: Mapping[str, str] | None = None,
    allowed_tools: Iterable[str] = ("Bash",),
    timeout: float = 120,
    session_id: str | None = None,
    resume: str | None = None,
    extra_args: Sequence[str] = (),
) -> HostRun:
    """One real ``claude -p`` turn against ``stub``.

    * ``plugin_dir``: one or more ``--plugin-dir`` roots (session-only plugins).
      For an installed plugin use :func:`install_claude_plugin` on the same
      ``home`` and pass ``plugin_dir=None``.
    * ``session_id``: the native session id to use; a fresh UUID4 if omitted
      (Claude accepts ``--session-id <uuid>``), so the id is always known in
      advance.  ``resume=<id>`` continues an existing session instead (mutually
      exclusive with ``session_id``).
    * Returns ``HostRun(rc, stdout, stderr, session_id)``; stdout is the
      ``--output-format json`` result object (``run.events[0]``), whose
      ``session_id`` is cross-checked; ``run.result`` is the final text.
    """
    if resume and session_id:
        raise ValueError("pass either session_id or resume, not both")
    sid = resume or session_id or str(uuid.uuid4())
    argv = [str(claude_bin()), "-p", "--output-format", "json"]
    tools = list(allowed_tools)
    if tools:
        argv += ["--allowedTools", ",".join(tools)]
    argv += ["--resume", sid] if resume else ["--session-id", sid]
    if plugin_dir is None:
        dirs = []
    elif isinstance(plugin_dir, (str, os.PathLike)):
        dirs = [plugin_dir]
    else:
        dirs = list(plugin_dir)
    for d in dirs:
        argv += ["--plugin-dir", str(d)]
    argv += list(extra_args)
    argv += ["--", prompt]
    Path(home).mkdir(parents=True, exist_ok=True)
    run = _run("claude", argv, cwd=cwd, env=claude_env(home, stub, env_extra), timeout=timeout)
    events: list[Any] = []
    result = None
    reported = None
    try:
        obj = json.loads(run.stdout)
        events = [obj]
        if isinstance(obj, dict):
            result = obj.get("result")
            reported = obj.get("session_id")
    except ValueError:
        pass
    if reported and reported != sid:
        # Should not happen (e.g. --fork-session in extra_args): trust the host.
        sid = reported
    return HostRun(
        run.returncode,
        run.stdout,
        run.stderr,
        sid,
        argv=argv,
        duration=run.duration,
        host="claude",
        events=events,
        result=result,
    )


def claude_plugin_cli(
    args: Sequence[str], *, home: str | os.PathLike, cwd: str | os.PathLike | None = None, timeout: float = 60
) -> HostRun:
    """Run ``claude plugin <args>`` offline with an isolated HOME (no stub needed)."""
    # No ANTHROPIC_API_KEY here on purpose: with a key but no ANTHROPIC_BASE_URL,
    # `claude plugin ...` calls api.anthropic.com and retries for ~18 s.
    env = scrubbed_env(home, stub=_ClosedProxy(), env_extra=CLAUDE_QUIET_ENV)
    return _cli("claude", [str(claude_bin()), "plugin", *args], env=env, cwd=cwd or home, timeout=timeout)


def install_claude_plugin(marketplace_dir: str | os.PathLike, plugin: str, *, home: str | os.PathLike) -> str:
    """Offline install: ``claude plugin marketplace add <dir>`` +
    ``claude plugin install <plugin>@<marketplace>`` (user scope, enabled).

    ``marketplace_dir`` must hold ``.claude-plugin/marketplace.json``.  Returns
    ``"<plugin>@<marketplace>"``.  A directory marketplace is read in place:
    ``CLAUDE_PLUGIN_ROOT`` is the source directory, not a cache copy.
    """
    Path(home).mkdir(parents=True, exist_ok=True)
    mkt = json.loads((Path(marketplace_dir) / ".claude-plugin" / "marketplace.json").read_text())["name"]
    claude_plugin_cli(["marketplace", "add", str(marketplace_dir)], home=home)
    claude_plugin_cli(["install", f"{plugin}@{mkt}"], home=home)
    return f"{plugin}@{mkt}"


# --------------------------------------------------------------------------
# Codex
# --------------------------------------------------------------------------


def codex_config_args(stub: OpenAIResponsesStub | None) -> list[str]:
    """``-c`` overrides selecting the stub provider (config.toml is left alone,
    so ``codex plugin ...`` can keep writing its marketplace/plugin tables)."""
    args = ["-c", "analytics.enabled=false", "-c", "check_for_update_on_startup=false"]
    if stub is not None:
        provider = (
            f'{{name="{CODEX_PROVIDER}", base_url="{stub.base_url}/v1", '
            f'env_key="{CODEX_KEY_ENV}", wire_api="responses"}}'
        )
        args += [
            "-c",
            f'model="{CODEX_MODEL}"',
            "-c",
            f'model_provider="{CODEX_PROVIDER}"',
            "-c",
            f"model_providers.{CODEX_PROVIDER}={provider}",
        ]
    return args


def codex_env(
    home: str | os.PathLike, codex_home: str | os.PathLike, stub: Any = None, env_extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    base = {"CODEX_HOME": str(codex_home), CODEX_KEY_ENV: "stub-not-a-key"}
    return scrubbed_env(home, stub=stub, env_extra={**base, **(env_extra or {})})


def run_codex(
    prompt: str,
    *,
    cwd: str | os.PathLike,
    codex_home: str | os.PathLike,
    stub: OpenAIResponsesStub,
    home: str | os.PathLike | None = None,
    env_extra: Mapping[str, str] | None = None,
    hooks: Mapping[str, Any] | None = None,
    timeout: float = 120,
    resume: str | None = None,
    bypass_hook_trust: bool = True,
    login_profile: bool = True,
    extra_args: Sequence[str] = (),
) -> HostRun:
    """One real ``codex exec --json`` turn against ``stub``.

    * ``codex_home``: the isolated ``CODEX_HOME``; plugins installed there with
      :func:`install_codex_plugin` are loaded.  ``home`` defaults to
      ``<codex_home>/../home`` (created).
    * ``hooks``: if given, written to ``$CODEX_HOME/hooks.json`` (user hooks)
      before the run.
    * ``resume=<thread_id>`` runs ``codex exec resume <id>`` (same session).
    * Codex cannot be given a session id up front: it is learned from the
      ``thread.started`` JSONL event and returned as ``session_id`` (equals the
      hooks' ``session_id`` and the shell's ``CODEX_THREAD_ID``).
    * ``run.events`` are the JSONL events; ``run.result`` the last
      ``agent_message`` text.
    * ``login_profile``: Codex runs the agent's shell commands in an
      environment snapshotted from a LOGIN shell, so /etc/profile resets PATH
      (the venv bin dir disappears).  By default the harness writes
      ``$HOME/.profile`` putting the run's PATH back in front, as a real
      user's profile would for their installed tools.  Hooks are not affected
      (Codex runs them with ``$SHELL -c`` and the inherited PATH).
    """
    codex_home = Path(codex_home)
    codex_home.mkdir(parents=True, exist_ok=True)
    home = Path(home) if home is not None else codex_home.parent / "home"
    home.mkdir(parents=True, exist_ok=True)
    if hooks is not None:
        (codex_home / "hooks.json").write_text(json.dumps(hooks, indent=2))
    argv = [
        str(codex_bin()),
        "exec",
        *codex_config_args(stub),
        "--skip-git-repo-check",
        "--json",
        "--dangerously-bypass-approvals-and-sandbox",
    ]
    if bypass_hook_trust:
        argv.append("--dangerously-bypass-hook-trust")
    argv += list(extra_args)
    if resume:
        argv += ["resume", resume]
    argv += ["--", prompt]
    env = codex_env(home, codex_home, stub, env_extra)
    if login_profile:
        _write_login_profile(home, env["PATH"])
    run = _run("codex", argv, cwd=cwd, env=env, timeout=timeout)
    events: list[Any] = []
    for line in run.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                pass
    sid = next((e.get("thread_id") for e in events if e.get("type") == "thread.started"), None) or resume
    result = None
    for e in events:
        item = e.get("item") or {}
        if e.get("type") == "item.completed" and item.get("type") == "agent_message":
            result = item.get("text")
    return HostRun(
        run.returncode,
        run.stdout,
        run.stderr,
        sid,
        argv=argv,
        duration=run.duration,
        host="codex",
        events=events,
        result=result,
    )


_PROFILE_MARK = "# written by tests/support/hosts/harness.py (login shells reset PATH)"


def _write_login_profile(home: Path, path: str) -> None:
    prof = home / ".profile"
    if prof.exists() and _PROFILE_MARK not in prof.read_text():
        return  # a test wrote its own profile: leave it alone
    prof.write_text(f'{_PROFILE_MARK}\nexport PATH="{path}:$PATH"\n')


def codex_plugin_cli(
    args: Sequence[str], *, codex_home: str | os.PathLike, home: str | os.PathLike | None = None, timeout: float = 60
) -> HostRun:
    """Run ``codex plugin <args>`` offline with an isolated CODEX_HOME/HOME."""
    codex_home = Path(codex_home)
    codex_home.mkdir(parents=True, exist_ok=True)
    home = Path(home) if home is not None else codex_home.parent / "home"
    home.mkdir(parents=True, exist_ok=True)
    # No stub here: point the proxies at a closed loopback port instead.
    env = codex_env(home, codex_home, _ClosedProxy(), None)
    argv = [str(codex_bin()), "plugin", *args, *codex_config_args(None)]
    return _cli("codex", argv, env=env, cwd=home, timeout=timeout)


class _ClosedProxy:
    """Stand-in 'stub' whose base_url is a loopback port nobody listens on."""

    def __init__(self) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.base_url = f"http://127.0.0.1:{s.getsockname()[1]}"


def install_codex_plugin(
    marketplace_dir: str | os.PathLike,
    plugin: str,
    *,
    codex_home: str | os.PathLike,
    home: str | os.PathLike | None = None,
) -> Path:
    """Offline install: ``codex plugin marketplace add <dir>`` +
    ``codex plugin add <plugin>@<marketplace>``.

    ``marketplace_dir`` must hold ``.agents/plugins/marketplace.json`` (or the
    legacy ``.claude-plugin/marketplace.json``).  Codex records
    ``[marketplaces.<m>]`` and ``[plugins."<plugin>@<m>"] enabled = true`` in
    ``$CODEX_HOME/config.toml`` and COPIES the plugin to
    ``$CODEX_HOME/plugins/cache/<m>/<plugin>/<version>/`` (that copy is what
    runs: re-install after changing the source).  Returns the installed path.
    """
    res = codex_plugin_cli(["marketplace", "add", str(marketplace_dir), "--json"], codex_home=codex_home, home=home)
    mkt = json.loads(res.stdout)["marketplaceName"]
    res = codex_plugin_cli(["add", f"{plugin}@{mkt}", "--json"], codex_home=codex_home, home=home)
    return Path(json.loads(res.stdout)["installedPath"])


# --------------------------------------------------------------------------
# Marketplace scaffolding (usable for throwaway and product plugins alike)
# --------------------------------------------------------------------------


def write_marketplace(
    root: str | os.PathLike, name: str, plugins: Mapping[str, str], owner: str = "agentmsg-tests"
) -> Path:
    """Write a local marketplace at ``root`` for both hosts.

    ``plugins`` maps plugin name -> relative source path (``"./plugins/x"``;
    ``"./"`` for a plugin at the marketplace root).  Writes
    ``.claude-plugin/marketplace.json`` (Claude) and
    ``.agents/plugins/marketplace.json`` (Codex).
    """
    root = Path(root)
    claude = {
        "name": name,
        "owner": {"name": owner},
        "plugins": [{"name": n, "source": src, "description": f"{n} (test)"} for n, src in plugins.items()],
    }
    codex = {
        "name": name,
        "owner": {"name": owner},
        "plugins": [
            {"name": n, "source": {"source": "local", "path": src}, "description": f"{n} (test)"}
            for n, src in plugins.items()
        ],
    }
    (root / ".claude-plugin").mkdir(parents=True, exist_ok=True)
    (root / ".claude-plugin" / "marketplace.json").write_text(json.dumps(claude, indent=2))
    (root / ".agents" / "plugins").mkdir(parents=True, exist_ok=True)
    (root / ".agents" / "plugins" / "marketplace.json").write_text(json.dumps(codex, indent=2))
    return root


# --------------------------------------------------------------------------
# GitHub Copilot CLI
# --------------------------------------------------------------------------

COPILOT_MODEL = "stub-model"


def copilot_env(
    home: str | os.PathLike, copilot_home: str | os.PathLike, stub: ChatCompletionsStub,
    env_extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Offline: a custom OpenAI-compatible provider at the stub (/work/shared/HOSTS-MORE.md)."""
    base = {
        "COPILOT_HOME": str(copilot_home),
        "COPILOT_OFFLINE": "true",
        "COPILOT_AUTO_UPDATE": "false",
        "COPILOT_PROVIDER_BASE_URL": f"{stub.base_url}/v1",
        "COPILOT_PROVIDER_API_KEY": "stub-not-a-key",
        "COPILOT_MODEL": COPILOT_MODEL,
    }
    return scrubbed_env(home, stub=stub, env_extra={**base, **(env_extra or {})})


def run_copilot(
    prompt: str,
    *,
    cwd: str | os.PathLike,
    home: str | os.PathLike,
    copilot_home: str | os.PathLike,
    stub: ChatCompletionsStub,
    session_id: str | None = None,
    resume: str | None = None,
    mcp_config: Mapping[str, Any] | None = None,
    env_extra: Mapping[str, str] | None = None,
    timeout: float = 90,
    extra_args: Sequence[str] = (),
) -> HostRun:
    """One real ``copilot -p PROMPT --allow-all-tools`` turn against ``stub``.

    * ``session_id``: ``--session-id`` (a new session with that id; a fresh
      UUID4 if omitted), also what Copilot gives MCP servers as
      ``COPILOT_AGENT_SESSION_ID``; ``resume``: ``--resume ID`` continues it.
    * ``mcp_config``: ``{"mcpServers": {...}}``, written next to ``copilot_home``
      and passed with ``--additional-mcp-config @FILE``.  Copilot names an MCP
      tool ``<server>-<tool>``.
    * ``run.result`` is stdout with ``--silent`` (the agent's text and, in text
      mode, one line per tool call).
    """
    copilot_home = Path(copilot_home)
    copilot_home.mkdir(parents=True, exist_ok=True)
    Path(home).mkdir(parents=True, exist_ok=True)
    sid = resume or session_id or str(uuid.uuid4())
    argv = [str(copilot_bin()), "-p", prompt, "--allow-all-tools", "--silent", "--resume" if resume else "--session-id",
            sid]
    if mcp_config is not None:
        cfg = copilot_home.parent / f"mcp-config-{sid}.json"
        cfg.write_text(json.dumps(mcp_config, indent=2))
        argv += ["--additional-mcp-config", f"@{cfg}"]
    argv += list(extra_args)
    run = _run("copilot", argv, cwd=cwd, env=copilot_env(home, copilot_home, stub, env_extra), timeout=timeout)
    return HostRun(run.returncode, run.stdout, run.stderr, sid, argv=argv, duration=run.duration, host="copilot",
                   events=[], result=run.stdout.strip())


def copilot_plugin_cli(args: Sequence[str], *, home: str | os.PathLike, copilot_home: str | os.PathLike,
                       cwd: str | os.PathLike | None = None) -> HostRun:
    """``copilot plugin ARGS`` offline (``marketplace add DIR``, ``install NAME@MKT``, ``list``, ...)."""
    env = scrubbed_env(home, env_extra={"COPILOT_HOME": str(copilot_home), "COPILOT_OFFLINE": "true",
                                        "COPILOT_AUTO_UPDATE": "false"})
    return _cli("copilot", [str(copilot_bin()), "plugin", *args], env=env, cwd=cwd or home)


# --------------------------------------------------------------------------
# Gemini CLI
# --------------------------------------------------------------------------

GEMINI_MODEL = "gemini-2.5-flash"
#: Offline: API-key auth, no folder-trust prompt, no update check, no usage statistics (HOSTS-MORE.md).
GEMINI_SETTINGS = {"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
                   "general": {"disableAutoUpdate": True}, "privacy": {"usageStatisticsEnabled": False}}


def _gemini_settings(home: str | os.PathLike) -> None:
    path = Path(home) / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = json.loads(path.read_text()) if path.exists() else {}
    for key, value in GEMINI_SETTINGS.items():
        doc.setdefault(key, {}).update(value)
    path.write_text(json.dumps(doc, indent=2))


def gemini_env(home: str | os.PathLike, stub: GeminiStub | None,
               env_extra: Mapping[str, str] | None = None) -> dict[str, str]:
    _gemini_settings(home)
    base = {"GEMINI_API_KEY": "stub-not-a-key", "GEMINI_CLI_NO_RELAUNCH": "true"}
    if stub is not None:
        base["GOOGLE_GEMINI_BASE_URL"] = stub.base_url
    return scrubbed_env(home, stub=stub, env_extra={**base, **(env_extra or {})})


def gemini_cli(args: Sequence[str], *, home: str | os.PathLike, cwd: str | os.PathLike | None = None,
               check: bool = True) -> HostRun:
    """``gemini ARGS`` offline, e.g. ``extensions install DIR --consent`` or ``extensions validate DIR``."""
    run = _run("gemini", [str(gemini_bin()), *args], env=gemini_env(home, None), cwd=cwd or home, timeout=120)
    return run.check() if check else run


def run_gemini(
    prompt: str,
    *,
    cwd: str | os.PathLike,
    home: str | os.PathLike,
    stub: GeminiStub,
    session_id: str | None = None,
    resume: str | None = None,
    env_extra: Mapping[str, str] | None = None,
    timeout: float = 120,
    extra_args: Sequence[str] = (),
    launcher: Sequence[str] = (),
) -> HostRun:
    """One real ``gemini -p PROMPT --yolo --output-format stream-json`` turn against ``stub``.

    ``launcher``: a command put in front, which finds ``gemini`` on PATH (``agentmsg run gemini --``).

    ``session_id``: ``--session-id`` (a fresh UUID4 if neither it nor ``resume`` is given); ``resume``:
    ``--resume ID``.  ``run.events`` are the JSON lines; ``run.result`` is the last assistant message.
    """
    Path(home).mkdir(parents=True, exist_ok=True)
    argv = [*launcher] if launcher else [str(gemini_bin())]
    argv += ["-p", prompt, "-m", GEMINI_MODEL, "--yolo", "--output-format", "stream-json"]
    sid = resume or session_id or str(uuid.uuid4())
    argv += ["--resume", resume] if resume else ["--session-id", sid]
    argv += list(extra_args)
    env = gemini_env(home, stub, env_extra)
    if launcher:  # the launcher finds the pinned gemini on PATH
        env["PATH"] = f"{env['PATH']}:{NODE_BIN}"
    run = _run("gemini", argv, cwd=cwd, env=env, timeout=timeout)
    events = []
    for line in run.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    parts: list[str] = []
    for ev in events:  # the last assistant message: its deltas, after the last event of any other kind
        if ev.get("type") == "message" and ev.get("role") == "assistant":
            parts.append(str(ev.get("content", "")))
        elif ev.get("type") in ("message", "tool_use", "tool_result"):
            parts = []
        if ev.get("type") == "init":
            sid = ev.get("session_id") or sid
    return HostRun(run.returncode, run.stdout, run.stderr, sid, argv=argv, duration=run.duration, host="gemini",
                   events=events, result="".join(parts) if events else None)


# --------------------------------------------------------------------------
# OpenCode
# --------------------------------------------------------------------------

OPENCODE_VERSION = "1.18.33"
OPENCODE_QUIET_ENV = {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"}


def opencode_bin() -> Path:
    """Path of the pinned OpenCode CLI (``node_modules/.bin/opencode``)."""
    return _host_bin("opencode", f"opencode-ai@{OPENCODE_VERSION}")


def write_opencode_config(home: str | os.PathLike, stub: ChatCompletionsStub) -> Path:
    """``$XDG_CONFIG_HOME/opencode/opencode.json`` (XDG_CONFIG_HOME = ``home/.config``, as :func:`scrubbed_env`
    sets it): the stub as an OpenAI-compatible provider, bash allowed, and commands may name paths outside
    the project (the state root), per /work/shared/HOSTS-MORE.md."""
    path = Path(home) / ".config" / "opencode" / "opencode.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    provider = {"npm": "@ai-sdk/openai-compatible", "name": "Stub",
                "options": {"baseURL": f"{stub.base_url}/v1", "apiKey": "stub-not-a-key"},
                "models": {ChatCompletionsStub.model: {"name": "Stub", "tool_call": True}}}
    path.write_text(json.dumps({
        "autoupdate": False, "share": "disabled", "model": f"stub/{ChatCompletionsStub.model}",
        "provider": {"stub": provider}, "permission": {"bash": "allow", "external_directory": "allow"},
    }, indent=2))
    return path


def opencode_env(home: str | os.PathLike, stub: ChatCompletionsStub,
                 env_extra: Mapping[str, str] | None = None) -> dict[str, str]:
    write_opencode_config(home, stub)
    return scrubbed_env(home, stub=stub, env_extra={**OPENCODE_QUIET_ENV, **(env_extra or {})})


def _opencode_events(stdout: str) -> list[Any]:
    events = []
    for line in stdout.splitlines():
        if line.strip().startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                pass
    return events


def run_opencode(
    prompt: str,
    *,
    cwd: str | os.PathLike,
    home: str | os.PathLike,
    stub: ChatCompletionsStub,
    session: str | None = None,
    attach: str | None = None,
    env_extra: Mapping[str, str] | None = None,
    timeout: float = 90,
) -> HostRun:
    """One real ``opencode run PROMPT --format json`` turn against ``stub``.

    * ``session``: continue that session (``--session``); OpenCode's ids
      (``ses_...``) cannot be chosen, so a new one is learned from the events.
    * ``attach``: a running :class:`OpencodeServer` URL (``--attach URL --dir
      CWD``): the turn runs in that server, where plugins live on past
      ``session.idle``.
    * ``run.events`` are the JSON events; ``run.result`` the last text part.
    """
    Path(home).mkdir(parents=True, exist_ok=True)
    argv = [str(opencode_bin()), "run", prompt, "--format", "json"]
    if session:
        argv += ["--session", session]
    if attach:
        argv += ["--attach", attach, "--dir", str(cwd)]
    run = _run("opencode", argv, cwd=cwd, env=opencode_env(home, stub, env_extra), timeout=timeout)
    events = _opencode_events(run.stdout)
    sid = next((e.get("sessionID") for e in events if e.get("sessionID")), None) or session
    texts = [e["part"].get("text") for e in events if e.get("type") == "text" and isinstance(e.get("part"), dict)]
    return HostRun(run.returncode, run.stdout, run.stderr, sid, argv=argv, duration=run.duration, host="opencode",
                   events=events, result=texts[-1] if texts else None)


class OpencodeServer:
    """``opencode serve`` on a free loopback port, in its own process group (killed on exit).

    Plugins load in the server, and it outlives each attached ``opencode run``:
    the only place an idle session can be continued (HOSTS-MORE.md).
    """

    def __init__(self, *, cwd: str | os.PathLike, home: str | os.PathLike, stub: ChatCompletionsStub,
                 env_extra: Mapping[str, str] | None = None, timeout: float = 60) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.known: set[str] = set()
        Path(cwd).mkdir(parents=True, exist_ok=True)
        self.log = Path(home) / f"opencode-serve-{self.port}.log"
        Path(home).mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [str(opencode_bin()), "serve", "--port", str(self.port), "--hostname", "127.0.0.1"],
                cwd=str(cwd), env=opencode_env(home, stub, env_extra), stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"opencode serve exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        self.close()
        raise HostTimeout(f"opencode serve did not listen within {timeout}s", self.log.read_text(), "")

    def sessions(self) -> list[dict[str, Any]]:
        """The server's sessions (``GET /session``)."""
        import urllib.request

        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"{self.url}/session", timeout=10) as resp:
            return list(json.loads(resp.read()))

    def run(self, prompt: str, *, cwd: str | os.PathLike, home: str | os.PathLike, stub: ChatCompletionsStub,
            session: str | None = None, env_extra: Mapping[str, str] | None = None, timeout: float = 90) -> HostRun:
        """One ``opencode run --attach`` turn in this server.  Attached runs print no events, so a new
        session's id is the one ``GET /session`` lists that no earlier run of this helper saw (asking before
        the first run blocks until the server has set up its project)."""
        run = run_opencode(prompt, cwd=cwd, home=home, stub=stub, session=session, attach=self.url,
                           env_extra=env_extra, timeout=timeout)
        listed = self.sessions()
        new = sorted((s for s in listed if s["id"] not in self.known), key=lambda s: s["time"]["created"])
        self.known.update(s["id"] for s in listed)
        if session is None and new:  # the newest: sessions of earlier one-shot runs in this HOME are listed too
            run = HostRun(*run[:3], new[-1]["id"], **run.__dict__)
        return run

    def close(self) -> None:
        _killpg(self.proc.pid)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def __enter__(self) -> OpencodeServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
