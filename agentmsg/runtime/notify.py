"""Notification adapters: typed, validated, and never peer-controlled code.

A send stores first and notifies second, in the *sender's* process.  So
nothing a peer wrote into the shared registry may choose what runs there:
an adapter is one of a few typed kinds whose program is fixed by agentmsg
and whose only parameters are validated identifiers the recipient's own
session recorded (a tmux pane, a Codex thread id).  Each runs with a
scrubbed environment (no tokens or keys of the sender's), gets a fixed
doorbell line and never the message text; the hooks quote the message
itself, attributed and bounded, at the recipient's next prompt.

Free-form commands are not adapters: a ``command`` entry found in a
registry (written by an older version, or planted) is never run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from agentmsg.domain.values import Message
from agentmsg.errors import UsageError

COMMAND_TIMEOUT = 10.0
KINDS = ("hook", "tmux", "codex-queue")


class NotifyError(Exception):
    """The adapter could not surface the message; it stays stored."""


def doorbell(msg: Message) -> str:
    """The fixed line a wake-up carries: ids and aliases (validated), never sender text."""
    return (f"agentmsg: new {msg.kind} {msg.id} for {msg.to} from {msg.sender}; "
            "it is quoted at your next prompt.")


def _is_pane(value: object) -> bool:
    return isinstance(value, str) and len(value) <= 12 and value[:1] == "%" and value[1:].isdigit()


def _is_socket(value: object) -> bool:
    return (isinstance(value, str) and value.startswith("/") and len(value) <= 256 and "\x00" not in value
            and all(c.isprintable() and c not in "\n\r" for c in value))


def _is_thread(value: object) -> bool:
    return (isinstance(value, str) and 0 < len(value) <= 64
            and all(c.isalnum() or c in "-_" for c in value))


def validate(config: Mapping[str, Any]) -> dict[str, Any]:
    """A registry entry as a typed adapter; anything else is refused (and never run)."""
    kind = config.get("adapter", "hook")
    if kind == "hook":
        return {"adapter": "hook"}
    if kind == "tmux" and _is_pane(config.get("pane")) and _is_socket(config.get("socket")):
        return {"adapter": "tmux", "pane": config["pane"], "socket": config["socket"]}
    if kind == "codex-queue" and _is_thread(config.get("thread")):
        return {"adapter": "codex-queue", "thread": config["thread"]}
    raise NotifyError(f"adapter {str(kind)[:20]!r} is not a valid typed adapter; it was not run")


def from_option(spec: str | None, env: Mapping[str, str]) -> dict[str, Any]:
    """``--notify hook|tmux|codex-queue``: the parameters come from the caller's own session."""
    if not spec or spec == "hook":
        return {"adapter": "hook"}
    if spec == "tmux":
        tmux, pane = env.get("TMUX", ""), env.get("TMUX_PANE", "")
        socket = tmux.split(",", 1)[0]
        if not (_is_pane(pane) and _is_socket(socket)):
            raise UsageError("--notify tmux needs this session to run inside tmux (TMUX and TMUX_PANE)")
        return {"adapter": "tmux", "pane": pane, "socket": socket}
    if spec == "codex-queue":
        thread = env.get("CODEX_THREAD_ID", "")
        if not _is_thread(thread):
            raise UsageError("--notify codex-queue needs this session's CODEX_THREAD_ID")
        return {"adapter": "codex-queue", "thread": thread}
    raise UsageError(f"invalid --notify {spec[:20]!r}: expected one of {', '.join(KINDS)}")


def refuse_command(command: str | None) -> None:
    if command is not None:
        raise UsageError("--notify-command is no longer accepted: a command in the shared registry would run "
                         "in every sender's process; use --notify tmux or --notify codex-queue")


def _scrubbed(program: str) -> dict[str, str]:
    return {"PATH": os.path.dirname(program) or os.defpath, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


def _run(argv: list[str], extra_env: Mapping[str, str] | None = None) -> None:
    import shutil  # only a typed adapter that rings runs a program: a hook-only send never pays for these
    import subprocess

    program = shutil.which(argv[0])
    if program is None:
        raise NotifyError(f"{argv[0]}: not found on PATH")
    try:
        done = subprocess.run([program, *argv[1:]], capture_output=True, timeout=COMMAND_TIMEOUT, check=False,
                              stdin=subprocess.DEVNULL, env={**_scrubbed(program), **(extra_env or {})},
                              close_fds=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NotifyError(f"{argv[0]}: {exc}") from None
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip().splitlines()
        raise NotifyError(f"{argv[0]} exited {done.returncode}" + (f": {err[-1][:200]}" if err else ""))


def notify(config: Mapping[str, Any], msg: Message) -> str:
    """Ring the recipient's doorbell; returns what happened (NotifyError when it could not)."""
    if config.get("adapter", "hook") == "command":
        return "command adapter ignored: registry commands never run; surfaces at the recipient's next prompt"
    adapter = validate(config)
    if adapter["adapter"] == "hook":
        return f"hook: surfaces at {msg.to}'s next prompt"
    if adapter["adapter"] == "tmux":
        base = ["tmux", "-S", adapter["socket"], "send-keys", "-t", adapter["pane"]]
        _run([*base, "-l", doorbell(msg)])
        time.sleep(0.2)  # an Enter in the same burst is swallowed by some TUIs
        _run([*base, "Enter"])
        return f"tmux: rang pane {adapter['pane']}"
    _run(["codex", "queue", "--thread", adapter["thread"], "--message", doorbell(msg)])
    return f"codex-queue: queued for thread {adapter['thread']}"
