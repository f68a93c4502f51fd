"""The launcher's fast path for Codex and Copilot CLI: the session id read from stdin by ``hooks/run``.

Their hooks get no session variable, so ``hooks/run`` reads the head of the
hook JSON with shell builtins (and one ``head``) and takes ``session_id`` and
``hook_event_name`` only from the top-level object's leading keys.  Runs go
through the real hooks files' commands; ``AGENTMSG_PYTHON`` is a shim that
records each interpreter start, or one that records the bytes it was given.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agentmsg.backends.file import layout
from tests.hooks.test_fastpath import (
    _backdated,
    _corrupt_gen,
    _corrupt_idle,
    _deleted_dir,
    _deleted_gen,
    _deleted_idle,
    _empty_both,
    _idle_is_a_link,
)
from tests.support.facade import Draft
from tests.support.helpers_hooks import DRIVER_SESSION, REPO, host_env, python_shim, run_hook, starts

DAMAGES = [_deleted_gen, _deleted_idle, _deleted_dir, _corrupt_idle, _corrupt_gen, _empty_both, _idle_is_a_link,
           _backdated]

OTHER = "7777c0de-1111-4222-8333-944455556666"


@pytest.fixture
def shim(tmp_path: Path) -> Path:
    return python_shim(tmp_path)


def codex(tmp_path: Path, root: Path, shim: Path, stdin: bytes | dict | None = None, event: str = "UserPromptSubmit",
          session: str = DRIVER_SESSION, **extra: str) -> tuple[str, bool]:
    """(output, whether an interpreter started) of one Codex hook run through the launcher."""
    before = starts(tmp_path)
    res = run_hook("codex", event, tmp_path, root, session, stdin=stdin,
                   extra_env={"AGENTMSG_PYTHON": str(shim), **extra})
    assert res.returncode == 0 and res.stderr == ""
    return res.stdout, starts(tmp_path) > before


def copilot(tmp_path: Path, root: Path, shim: Path, event: str, session: str) -> tuple[str, bool]:
    """One Copilot CLI hook run: copilot-hooks.json's command, Copilot's variables, no session variable."""
    doc = json.loads((REPO / "hooks" / "copilot-hooks.json").read_text())["hooks"][event]
    env = host_env("codex", tmp_path, root, session, event, {"AGENTMSG_PYTHON": str(shim)})
    for var in ("CODEX_HOME", "PLUGIN_DATA"):
        env.pop(var)
    env.update(COPILOT_CLI="1", COPILOT_PLUGIN_ROOT=str(REPO), COPILOT_PLUGIN_DATA=str(tmp_path / "copilot-data"))
    stdin = {"hook_event_name": event, "session_id": session, "timestamp": "2026-12-01T07:00:00.000Z",
             "cwd": str(tmp_path), "prompt": "carry on"}
    before = starts(tmp_path)
    proc = subprocess.run(["/bin/sh", "-c", doc[0]["hooks"][0]["command"]], input=json.dumps(stdin).encode(),
                          capture_output=True, env=env, cwd=tmp_path, timeout=30)
    assert proc.returncode == 0 and proc.stderr == b""
    return proc.stdout.decode(), starts(tmp_path) > before


def compact(doc: dict) -> bytes:
    """The hook JSON as the hosts write it: no whitespace."""
    return json.dumps(doc, separators=(",", ":")).encode()


def meta(session: str = DRIVER_SESSION, event: str = "UserPromptSubmit") -> dict:
    return {"session_id": session, "turn_id": "t-1", "transcript_path": None, "cwd": "/tmp",
            "hook_event_name": event, "model": "stub-model", "permission_mode": "default"}


def send(store, collab, subject: str, to: str = "driver") -> None:
    store.send(collab.id, collab.reviewer, Draft(to=to, kind="request", subject=subject, body="body"))


def settle(tmp_path, root, shim, **kw) -> None:
    assert codex(tmp_path, root, shim, **kw) == ("", True)  # the full run finds nothing and sets the marker
    assert codex(tmp_path, root, shim, **kw) == ("", False)


# ---- the fast path ---------------------------------------------------------------------------------


def test_codex_with_nothing_to_show_starts_no_interpreter(tmp_path, store, collab, shim):
    settle(tmp_path, collab.root, shim)
    assert (collab.root / layout.IDLE / "codex" / f"{DRIVER_SESSION}.idle").is_file()
    assert codex(tmp_path, collab.root, shim, event="Stop") == ("", False)
    # An inherited CODEX_THREAD_ID naming another session changes nothing: stdin names the session.
    assert codex(tmp_path, collab.root, shim, CODEX_THREAD_ID=OTHER) == ("", False)
    assert codex(tmp_path, collab.root, shim, stdin=compact({**meta(), "prompt": "x"})) == ("", False)


def test_codex_session_start_always_runs_in_full(tmp_path, store, collab, shim):
    settle(tmp_path, collab.root, shim)
    out, ran = codex(tmp_path, collab.root, shim, event="SessionStart")
    assert ran and "participant driver" in out


def test_a_send_wakes_codex(tmp_path, store, collab, shim):
    settle(tmp_path, collab.root, shim)
    send(store, collab, "urgent-subject")
    out, ran = codex(tmp_path, collab.root, shim)
    assert ran and "urgent-subject" in out


def test_copilot_with_nothing_to_show_starts_no_interpreter(tmp_path, store, collab, shim):
    assert copilot(tmp_path, collab.root, shim, "UserPromptSubmit", OTHER) == ("", True)
    assert (collab.root / layout.IDLE / "copilot" / f"{OTHER}.idle").is_file()
    assert copilot(tmp_path, collab.root, shim, "UserPromptSubmit", OTHER) == ("", False)
    assert copilot(tmp_path, collab.root, shim, "Stop", OTHER) == ("", False)
    assert copilot(tmp_path, collab.root, shim, "SessionStart", OTHER)[1]


def test_fast_path_can_be_turned_off_for_codex(tmp_path, store, collab, shim):
    settle(tmp_path, collab.root, shim)
    assert codex(tmp_path, collab.root, shim, AGENTMSG_NO_FASTPATH="1") == ("", True)


# ---- a forged or misplaced id never hides a message --------------------------------------------------


def _forged_prompt_first(other: str) -> bytes:
    """A prompt naming another (idle) session, before the real fields."""
    doc = {"prompt": f'"session_id":"{other}","hook_event_name":"UserPromptSubmit"', **meta()}
    return compact(doc)


def _forged_in_prompt_after(other: str) -> bytes:
    return compact({**meta(), "prompt": f'","session_id":"{other}"'})


def _nested_first(other: str) -> bytes:
    return compact({"tool_input": {"session_id": other, "hook_event_name": "Stop"}, **meta()})


def _escaped_key(other: str) -> bytes:
    doc = meta()
    del doc["session_id"]
    return compact({"session\\u005fid": other, **doc, "session_id": DRIVER_SESSION}).replace(b"\\\\u005f", b"\\u005f")


def _long_value_first(other: str) -> bytes:
    return compact({"last_assistant_message": "a" * 300, **meta(), "session_id_x": other})


@pytest.mark.parametrize("stdin", [_forged_prompt_first, _forged_in_prompt_after, _nested_first, _escaped_key,
                                   _long_value_first])
def test_a_forged_or_misplaced_session_id_never_hides_a_message(tmp_path, store, collab, shim, stdin):
    # OTHER is an idle session with a valid marker; DRIVER_SESSION has mail.
    settle(tmp_path, collab.root, shim, session=OTHER, stdin=compact(meta(OTHER)))
    send(store, collab, "for-the-driver")
    out, ran = codex(tmp_path, collab.root, shim, stdin=stdin(OTHER))
    assert ran and "for-the-driver" in out


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_codex_marker_never_hides_a_message(tmp_path, store, collab, shim, damage):
    settle(tmp_path, collab.root, shim)
    idle = collab.root / layout.IDLE / "codex" / f"{DRIVER_SESSION}.idle"
    damage(idle.with_suffix(".gen"), idle)
    send(store, collab, "after-damage")
    out, ran = codex(tmp_path, collab.root, shim)
    assert ran and "after-damage" in out


# ---- the full path gets stdin unchanged ------------------------------------------------------------


def recorder(tmp_path: Path) -> Path:
    """An "interpreter" that keeps the bytes it was given on stdin."""
    path = tmp_path / "recorder"
    path.write_text(f'#!/bin/sh\ncat > "{tmp_path}/received"\n')
    path.chmod(0o755)
    return path


BIG = "é€😀 \\\" ".join(str(i) for i in range(30000))


@pytest.mark.parametrize("stdin", [
    compact({**meta(), "prompt": "no trailing newline"}),
    compact({**meta(), "prompt": "trailing newlines"}) + b"\n\n\n",
    json.dumps({**meta(), "prompt": "pretty, CRLF"}, indent=1).replace("\n", "\r\n").encode() + b"\r\n",
    compact({**meta(), "prompt": BIG}),  # far over the head the launcher reads
    compact({"prompt": BIG, **meta()}),
    compact({**meta(), "prompt": "x"})[:-1] + b',"raw":"\xff\xfe"}',  # not UTF-8: Python decides
    b"",
    b"\n\n",
], ids=["no-newline", "newlines", "crlf", "huge", "huge-first", "not-utf8", "empty", "blank"])
def test_the_full_path_gets_every_byte(tmp_path, stdin):
    rec = recorder(tmp_path)
    res = run_hook("codex", "UserPromptSubmit", tmp_path, tmp_path / "state", DRIVER_SESSION, stdin=stdin,
                   extra_env={"AGENTMSG_PYTHON": str(rec)})
    assert res.returncode == 0
    assert (tmp_path / "received").read_bytes() == stdin


@pytest.mark.parametrize("stdin", [b"\0" + compact(meta()), compact(meta())[:-1] + b',"x":"\0"}'],
                         ids=["leading", "in-a-string"])
def test_a_nul_byte_never_turns_garbage_into_json(tmp_path, stdin):
    # A shell variable cannot hold NUL: the launcher hands Python \001 instead, which is no more JSON.
    rec = recorder(tmp_path)
    res = run_hook("codex", "UserPromptSubmit", tmp_path, tmp_path / "state", DRIVER_SESSION, stdin=stdin,
                   extra_env={"AGENTMSG_PYTHON": str(rec)})
    assert res.returncode == 0
    received = (tmp_path / "received").read_bytes()
    assert received == stdin.replace(b"\0", b"\1")
    with pytest.raises(ValueError):
        json.loads(received)


def test_a_huge_stdin_on_the_fast_path_is_drained(tmp_path, store, collab, shim):
    settle(tmp_path, collab.root, shim)
    huge = compact({**meta(), "prompt": "p" * (4 << 20)})
    assert codex(tmp_path, collab.root, shim, stdin=huge) == ("", False)


# ---- Codex PostToolUse (hooks/run codex midturn) ------------------------------------------------------


def codex_tool(tmp_path: Path, root: Path, shim: Path, stdin: bytes | None = None) -> tuple[str, bool]:
    doc = {**meta(event="PostToolUse"), "tool_name": "Bash", "tool_input": {"command": "ls"},
           "tool_response": "x" * 100_000, "tool_use_id": "call-1"}
    return codex(tmp_path, root, shim, stdin=stdin if stdin is not None else compact(doc), event="PostToolUse")


def test_codex_post_tool_use_with_nothing_due_starts_no_interpreter(tmp_path, store, collab, shim):
    from agentmsg.service import delivery

    delivery.set_midturn(store, collab.id, collab.driver, on=True, min_gap=0)
    assert codex_tool(tmp_path, collab.root, shim) == ("", True)
    assert (collab.root / layout.IDLE / "codex" / f"{DRIVER_SESSION}.mid").is_file()
    assert codex_tool(tmp_path, collab.root, shim) == ("", False)
    store.send(collab.id, collab.reviewer, Draft(to="driver", kind="request", priority="high", subject="urgent-mid",
                                                 body="body"))
    out, ran = codex_tool(tmp_path, collab.root, shim)
    assert ran and "urgent-mid" in out and '"hookEventName":"PostToolUse"' in out.replace(" ", "")


def test_codex_post_tool_use_without_a_state_root_starts_nothing(tmp_path, shim):
    root = tmp_path / "nothing-here"
    assert codex_tool(tmp_path, root, shim) == ("", False)
    assert not root.exists()
