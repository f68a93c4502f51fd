"""Run the hooks exactly as the hosts do: the command from the plugin's hooks file, through a shell.

Claude Code runs ``hooks/hooks.json``'s command with ``sh -c`` and
``CLAUDE_PLUGIN_ROOT``/``CLAUDE_PLUGIN_DATA``/``CLAUDE_PROJECT_DIR``/
``CLAUDE_CODE_SESSION_ID`` (plus ``CLAUDE_ENV_FILE`` for SessionStart) in the
environment; Codex runs ``hooks/codex-hooks.json``'s command with
``$SHELL -c`` (docs/HOSTS-NOTES.md: strace shows ``-c``, not ``-lc``) and
``CODEX_HOME``/``PLUGIN_ROOT``/``PLUGIN_DATA`` (and the ``CLAUDE_PLUGIN_*``
aliases).  Nothing else is inherited from the test run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HOOK_FILES = {"claude": REPO / "hooks" / "hooks.json", "codex": REPO / "hooks" / "codex-hooks.json",
              "copilot": REPO / "hooks" / "copilot-hooks.json"}
# What the sessions in conftest's `collab` fixture are called on stdin.
REVIEWER_SESSION = "5418c0de-1111-4222-8333-944455556666"  # claude-code:...
DRIVER_SESSION = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"  # codex:...


def hook_command(host: str, event: str) -> str:
    doc = json.loads(HOOK_FILES[host].read_text())
    # The delivery hook; Claude's asyncRewake wake-up waiter (issue 11) is a second group beside it, and the
    # collision notices' hook (matched to the edit tools, docs/CLAIMS.md) a third.
    (group,) = [g for g in doc["hooks"][event] if not any(h.get("asyncRewake") or " edited" in h["command"]
                                                          for h in g["hooks"])]
    (hook,) = group["hooks"]
    assert hook["type"] == "command"
    return hook["command"]


def python_dir() -> str:
    """A directory with a real python3 (this interpreter's), for PATH."""
    return str(Path(sys.executable).parent)


def python_shim(tmp: Path) -> Path:
    """An interpreter that records every start in ``tmp/python-starts``, then runs the real one."""
    log = tmp / "python-starts"
    path = tmp / "python3-shim"
    real = Path(python_dir()) / "python3"
    path.write_text(f'#!/bin/sh\necho start >> "{log}"\nexec "{real}" "$@"\n')
    path.chmod(0o755)
    return path


def starts(tmp: Path) -> int:
    """How many interpreters :func:`python_shim` started so far."""
    log = tmp / "python-starts"
    return len(log.read_text().splitlines()) if log.exists() else 0


def host_env(host: str, tmp: Path, root: Path | None, session: str, event: str,
             extra: dict[str, str] | None = None) -> dict[str, str]:
    home = tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    data = tmp / f"plugin-data-{host}"
    env = {
        "HOME": str(home), "PATH": f"{python_dir()}:/usr/bin:/bin", "LANG": "C.UTF-8", "SHELL": "/bin/sh",
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        # Deliveries rendered ahead are on for users; tests that are not about them keep every prompt on
        # the full path, so what they read right after a hook is already written (tests/runtime/test_ahead.py
        # turns it on with AGENTMSG_NO_AHEAD="").
        "AGENTMSG_NO_AHEAD": "1",
    }
    if root is not None:
        env["AGENTMSG_HOME"] = str(root)
    if host == "claude":
        env.update(CLAUDE_PLUGIN_ROOT=str(REPO), CLAUDE_PLUGIN_DATA=str(data), CLAUDE_PROJECT_DIR=str(tmp),
                   CLAUDE_CODE_SESSION_ID=session)
        if event == "SessionStart":
            env["CLAUDE_ENV_FILE"] = str(tmp / "claude-env-file")
    else:
        env.update(CODEX_HOME=str(tmp / "codex-home"), PLUGIN_ROOT=str(REPO), PLUGIN_DATA=str(data),
                   CLAUDE_PLUGIN_ROOT=str(REPO), CLAUDE_PLUGIN_DATA=str(data))
    env.update(extra or {})
    return env


@dataclass
class HookResult:
    returncode: int
    stdout: str
    stderr: str
    raw: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)

    @property
    def text(self) -> str:
        """The text the model would see: additionalContext or the Stop reason."""
        doc = self.json
        return doc["reason"] if "decision" in doc else doc["hookSpecificOutput"]["additionalContext"]


def payload(event: str, session: str, host: str = "claude", **fields: Any) -> dict[str, Any]:
    """Stdin as the host sends it (unknown extra fields included, as hosts add them)."""
    doc: dict[str, Any] = {"session_id": session, "transcript_path": None if host == "codex" else "/tmp/t.jsonl",
                           "cwd": "/tmp", "hook_event_name": event, "permission_mode": "default",
                           "model": "stub-model", "some_future_field": {"x": 1}}
    if event == "SessionStart":
        doc["source"] = "startup"
    elif event == "UserPromptSubmit":
        doc["prompt"] = "carry on"
        doc["prompt_id" if host == "claude" else "turn_id"] = "p-1"
    elif event == "Stop":
        doc.update(stop_hook_active=False, last_assistant_message="done")
        if host == "codex":
            doc["turn_id"] = "t-1"
    doc.update(fields)
    return doc


#: The host process a hook runs under: renamed (``PR_SET_NAME``) so that ``runtime.facts.host_process`` stops at
#: it, as it stops at a real host, instead of walking up to whatever runs the tests; it ends with the hook, so
#: the session it records is not an ancestor of the CLI calls a test makes next (``hosts/identity``'s rule).
TEST_HOST = ("import ctypes, subprocess, sys\n"
             "ctypes.CDLL(None).prctl(15, b'test-host', 0, 0, 0)\n"
             "sys.exit(subprocess.run(sys.argv[1:]).returncode)\n")


def run_hook(host: str, event: str, tmp: Path, root: Path | None, session: str, *,
             stdin: bytes | dict[str, Any] | None = None, extra_env: dict[str, str] | None = None,
             timeout: float = 30, **fields: Any) -> HookResult:
    """One hook process, started the way ``host`` starts it."""
    if stdin is None:
        stdin = payload(event, session, host, **fields)
    data = stdin if isinstance(stdin, bytes) else json.dumps(stdin).encode()
    wired = json.loads(HOOK_FILES[host].read_text())["hooks"]
    command = hook_command(host, event if event in wired else "Stop")
    env = host_env(host, tmp, root, session, event, extra_env)
    shell = ["/bin/sh", "-c", command] if host == "claude" else [env["SHELL"], "-c", command]
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", TEST_HOST, *shell], input=data, capture_output=True,
                          env=env, cwd=tmp, timeout=timeout)
    return HookResult(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"),
                      proc.stdout)


def log_lines(root: Path) -> list[str]:
    path = root / "hooks.log"
    return path.read_text().splitlines() if path.exists() else []


def receipts(root: Path, collab: str, alias: str) -> list[dict[str, Any]]:
    path = root / "collabs" / collab / "receipts" / f"{alias}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def boundary_lines(text: str, nonce: str) -> tuple[list[str], list[str], list[str]]:
    """(before, inside, after) the boundary whose markers carry ``nonce``."""
    lines = text.split("\n")
    marked = [i for i, line in enumerate(lines) if nonce in line and line.startswith("⟦")]
    assert len(marked) == 2, f"expected exactly two marker lines, got {marked}"
    return lines[: marked[0]], lines[marked[0] + 1 : marked[1]], lines[marked[1] + 1 :]
