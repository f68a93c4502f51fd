"""Run the real ``agentmsg`` CLI as a subprocess with a controlled environment.

``run`` starts ``python -m agentmsg.cli ARGS...`` with an environment built
from scratch rules: no state-root variable except the ``root`` given (as
``AGENTMSG_HOME``), no host session variable unless the caller sets it, and
this checkout importable.  Every call checks the two promises that hold for
any input: no traceback on stderr, and stderr is at most one line on
failure.  ``run_json`` adds ``--json`` and parses and checks the envelope.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

REPO_ROOT = Path(__file__).resolve().parents[2]

#: Variables that choose a state root or an identity: never inherited.
CONTROLLED_VARS = (
    "AGENTMSG_HOME",
    "AGENTMSG_COLLAB",
    "AGENTMSG_RAISE_ERRORS",
    "XDG_STATE_HOME",
    "CLAUDE_CODE_SESSION_ID",
    "CODEX_THREAD_ID",
    "CODEX_SESSION_ID",
)

ENVELOPE_KEYS = {"ok", "command", "exit_code", "result", "error"}
ERROR_KEYS = {"code", "type", "message"}


class Result(NamedTuple):
    code: int
    stdout: str
    stderr: str


class JsonResult(NamedTuple):
    code: int
    doc: dict[str, Any]
    stderr: str


def clean_env(root: Path | str | None = None, env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The child's environment: inherited minus controlled vars, plus ``env`` (``None`` unsets)."""
    out = {k: v for k, v in os.environ.items() if k not in CONTROLLED_VARS and not k.startswith("AGENTMSG_")}
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    out["COLUMNS"] = "100"
    out["TERM"] = "dumb"
    out.pop("NO_COLOR", None)
    if root is not None:
        out["AGENTMSG_HOME"] = str(root)
    # no background `agentmsg sync` outliving a test; tests/runtime/test_mirror.py opts in
    out["AGENTMSG_NO_MIRROR"] = "1"
    # no resident helper started for the next command of every test root; tests/cli/test_thin.py opts in
    out["AGENTMSG_NO_HELPER"] = "1"
    for key, value in (env or {}).items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def on_tty(argv: list[str], env: Mapping[str, str], cwd: Path | str | None = None) -> tuple[int, str, str]:
    """``argv`` with its stdout on a new pseudo-terminal (stdin from /dev/null, stderr a pipe): its exit code, what
    it printed on the terminal (line ends as the terminal sends them, ``\\r\\n``), and its stderr."""
    import pty

    primary, secondary = pty.openpty()
    proc = subprocess.Popen(argv, stdout=secondary, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=dict(env),
                            cwd=cwd)
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 65536)
        except OSError:  # EIO: the terminal's other side closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(primary)
    code = proc.wait(timeout=60)
    err = proc.stderr.read().decode() if proc.stderr else ""
    return code, b"".join(chunks).decode("utf-8"), err


def run(
    *args: str,
    env: Mapping[str, str | None] | None = None,
    input: str | bytes | None = None,
    root: Path | str | None = None,
    cwd: Path | str | None = None,
    timeout: float = 60,
) -> Result:
    """Run ``agentmsg ARGS`` and return ``(code, stdout, stderr)``."""
    data = input.encode() if isinstance(input, str) else input
    done = subprocess.run(
        [sys.executable, "-m", "agentmsg.cli", *args],
        input=data if data is not None else b"",
        capture_output=True,
        env=clean_env(root, env),
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
    out, err = done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
    assert "Traceback" not in err, f"traceback on stderr for {args!r}:\n{err}"
    assert "Traceback" not in out, f"traceback on stdout for {args!r}:\n{out}"
    if done.returncode != 0:
        lines = err.splitlines()
        assert len(lines) == 1, f"expected one stderr line for exit {done.returncode} of {args!r}, got:\n{err}"
    return Result(done.returncode, out, err)


def run_json(*args: str, **kwargs: Any) -> JsonResult:
    """Run with ``--json``; the envelope is parsed and its shape checked."""
    code, out, err = run(*args, "--json", **kwargs)
    assert out.endswith("\n") and out.count("\n") == 1, f"not exactly one line of JSON for {args!r}: {out!r}"
    doc = json.loads(out)
    check_envelope(doc, code, err)
    return JsonResult(code, doc, err)


def check_envelope(doc: dict[str, Any], code: int, stderr: str) -> None:
    assert set(doc) == ENVELOPE_KEYS, doc
    assert doc["exit_code"] == code
    assert doc["ok"] is (code == 0)
    assert isinstance(doc["command"], str)
    if code == 0:
        assert doc["error"] is None
    else:
        assert set(doc["error"]) == ERROR_KEYS, doc["error"]
        assert doc["error"]["code"] == code
        assert stderr == doc["error"]["message"] + "\n", (stderr, doc["error"])


def snapshot(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every path under ``root`` with its kind, size and content digest."""
    out: dict[str, tuple[str, int, str]] = {}
    if not os.path.lexists(root):
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = ("link", 0, os.readlink(path))
            elif path.is_dir():
                out[rel] = ("dir", 0, "")
            elif not path.is_file():  # a FIFO or socket: reading it would block
                out[rel] = ("special", 0, "")
            else:
                data = path.read_bytes()
                out[rel] = ("file", len(data), hashlib.sha256(data).hexdigest())
    return out
