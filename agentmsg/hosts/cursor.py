"""Cursor: its hooks file and MCP configuration (not runnable here; see docs/MCP.md).

Cursor starts an MCP server per window, before any conversation, and gives
it no conversation id, so the agentmsg pin for Cursor is fixed per project:
``--self cursor:NAME`` in both ``.cursor/mcp.json`` (the server) and
``.cursor/hooks.json`` (the hooks, ``agentmsg.hooks.cursor``).  Every conversation in that project acts
as that one pin (weaker than Claude Code or Codex, where each session is its
own pin; docs/MCP.md).

Entry point: ``python3 -m agentmsg.hosts.cursor install --self cursor:NAME [--project DIR] [--slots N]``.
"""

from __future__ import annotations

import os
import sys

from agentmsg.domain import envelope
from agentmsg.hosts.base import Host

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: What marks a hooks.json entry as agentmsg's: today's hook module, and the entry point files written by
#: earlier versions named.
OURS = (" -m agentmsg.hooks.cursor ", "agentmsg.hosts.cursor hook", "agentmsg.cursor hook")


def _is_session(value: str) -> bool:
    from agentmsg.domain.validate import SESSION_RE

    return SESSION_RE.fullmatch(value) is not None


class Cursor(Host):
    name = runtime = "cursor"
    title = "Cursor"


HOST = Cursor()


def configs(pin: str, *, python: str | None = None, slots: int = envelope.DEFAULT_SLOTS,
            agentmsg: str = "agentmsg") -> dict[str, dict[str, Any]]:
    """``.cursor/hooks.json`` and ``.cursor/mcp.json`` for ``pin``: the same pin in both."""
    runtime, _, session = pin.partition(":")
    if runtime != HOST.runtime or not _is_session(session):
        raise ValueError(f"the pin must be cursor:NAME, not {pin[:60]!r}")
    if not 1 <= slots <= envelope.MAX_SLOTS:
        raise ValueError(f"slots must be 1..{envelope.MAX_SLOTS}")
    import shlex  # not at import time: the hooks import every host module

    py = python or sys.executable
    hook = f"{shlex.quote(py)} -m agentmsg.hooks.cursor --self {shlex.quote(pin)}"
    return {
        "hooks.json": {"version": 1, "hooks": {
            "sessionStart": [{"command": hook}],
            # loop_limit equals the envelope's slots: Cursor's cap and agentmsg's agree.
            "stop": [{"command": hook, "loop_limit": slots}],
            # Claims (docs/CLAIMS.md): a shell command that writes another participant's claimed path is denied.
            "beforeShellExecution": [{"command": hook}],
        }},
        "mcp.json": {"mcpServers": {"agentmsg": {"type": "stdio", "command": agentmsg,
                                                 "args": ["mcp", "--self", pin]}}},
    }


def install(project: str, pin: str, *, slots: int = envelope.DEFAULT_SLOTS, python: str | None = None,
            agentmsg: str = "agentmsg") -> list[str]:
    """Write (merge) the two files under ``project/.cursor``; other hooks and servers are kept.

    Both go through ``fsio.write_outside`` (a project may be someone else's clone: a link planted at
    ``.cursor`` or at either file is refused, not followed), and both are checked before either is written.
    """
    import json

    from agentmsg import fsio
    from agentmsg.errors import UsageError

    docs = configs(pin, python=python, slots=slots, agentmsg=agentmsg)
    for name in docs:
        fsio.check_outside(project, f".cursor/{name}")
    merged = []
    for name, doc in docs.items():
        path = os.path.join(project, ".cursor", name)
        try:
            old = json.loads(fsio.read_bytes(path) or b"{}")
        except ValueError as exc:
            raise UsageError(f"{path} is not valid JSON ({exc}); fix or move it, then run this again") from None
        if not isinstance(old, dict):
            raise UsageError(f"{path} does not hold a JSON object; fix or move it, then run this again")
        if name == "hooks.json":
            old.setdefault("version", 1)
            hooks = old.setdefault("hooks", {})
            for event, entries in doc["hooks"].items():
                kept = [e for e in hooks.get(event, []) if not any(m in str(e.get("command")) for m in OURS)]
                hooks[event] = kept + entries
        else:
            old.setdefault("mcpServers", {}).update(doc["mcpServers"])
        merged.append((name, (json.dumps(old, indent=2) + "\n").encode()))
    return [fsio.write_outside(project, f".cursor/{name}", data) for name, data in merged]


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python3 -m agentmsg.hosts.cursor")
    sub = ap.add_subparsers(dest="what", required=True)
    i = sub.add_parser("install", help="write .cursor/hooks.json and .cursor/mcp.json")
    i.add_argument("--self", dest="pin", required=True, help="cursor:NAME, the same in both files")
    i.add_argument("--project", default=".")
    i.add_argument("--slots", type=int, default=envelope.DEFAULT_SLOTS,
                   help="Cursor's loop_limit; enable delivery with --max-continuations equal to it")
    i.add_argument("--agentmsg", default="agentmsg", help="the agentmsg command Cursor starts the server with")
    args = ap.parse_args(argv)
    from agentmsg.errors import AgentmsgError, UsageError

    try:
        try:
            written = install(args.project, args.pin, slots=args.slots, agentmsg=args.agentmsg)
        except ValueError as exc:  # a bad pin or slot count
            raise UsageError(str(exc)) from None
    except AgentmsgError as exc:  # one line and the error's exit code, as the CLI reports it
        sys.stderr.write(exc.line() + "\n")
        return exc.code
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
