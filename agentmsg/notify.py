"""Notification adapters: the only runtime-specific step of a send.

A send stores first and notifies second.  An adapter only ever receives a
short pointer (ids, sender, kind), never the body: the body stays in the
store, where it is attributed and bounded when a hook presents it.
"""

from __future__ import annotations

import shlex
import subprocess
from typing import Any, Protocol

from .errors import UsageError
from .model import Message

COMMAND_TIMEOUT = 10.0
PLACEHOLDERS = ("collab", "id", "to", "from", "kind", "priority", "pointer")


class NotifyError(Exception):
    """The adapter could not surface the message; it stays stored."""


class Adapter(Protocol):
    def notify(self, config: dict[str, Any], msg: Message) -> str: ...


def pointer(msg: Message) -> str:
    return (
        f"agentmsg: new {msg.kind} {msg.id} from {msg.sender} "
        f"(run: agentmsg inbox --collab {msg.collab})"
    )


class HookAdapter:
    """Nothing to do at send time: the recipient's hooks pick the message up."""

    def notify(self, config: dict[str, Any], msg: Message) -> str:
        return f"hook: surfaces at {msg.to}'s next prompt"


class CommandAdapter:
    """Run a configured argv with placeholders, e.g. ``tmux send-keys``."""

    def notify(self, config: dict[str, Any], msg: Message) -> str:
        values = {"collab": msg.collab, "id": msg.id, "to": msg.to, "from": msg.sender,
                  "kind": msg.kind, "priority": msg.priority, "pointer": pointer(msg)}
        argv = [arg.format_map(values) for arg in config["argv"]]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=COMMAND_TIMEOUT, check=False,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NotifyError(f"{argv[0]}: {exc}") from None
        if done.returncode != 0:
            err = done.stderr.decode(errors="replace").strip().splitlines()
            raise NotifyError(f"{argv[0]} exited {done.returncode}" + (f": {err[-1][:200]}" if err else ""))
        return f"command: {argv[0]} ran"


ADAPTERS: dict[str, Adapter] = {"hook": HookAdapter(), "command": CommandAdapter()}


def notify(config: dict[str, Any], msg: Message) -> str:
    adapter = ADAPTERS.get(config.get("adapter", "hook"))
    if adapter is None:
        raise NotifyError(f"unknown adapter {config.get('adapter')!r}")
    return adapter.notify(config, msg)


def command_config(command: str | None) -> dict[str, Any]:
    """Parse ``--notify-command``; placeholders are checked now, not at send time."""
    if not command:
        return {"adapter": "hook"}
    try:
        command.encode("utf-8")
    except UnicodeEncodeError as exc:  # undecodable bytes in argv arrive as lone surrogates
        raise UsageError(f"--notify-command is not valid UTF-8 (character {exc.start}); nothing was stored") from None
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"--notify-command: {exc}") from None
    if not argv:
        raise UsageError("--notify-command is empty")
    for arg in argv:
        try:
            arg.format_map(dict.fromkeys(PLACEHOLDERS, ""))
        except (KeyError, ValueError, IndexError) as exc:
            raise UsageError(
                f"--notify-command: bad placeholder {exc} (allowed: {', '.join(PLACEHOLDERS)})"
            ) from None
    return {"adapter": "command", "argv": argv}
