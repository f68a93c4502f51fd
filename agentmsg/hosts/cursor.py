"""Cursor: the hooks and the MCP configuration (not runnable here; see docs/MCP.md).

Cursor starts an MCP server per window, before any conversation, and gives
it no conversation id, so the agentmsg pin for Cursor is fixed per project:
``--self cursor:NAME`` in both ``.cursor/mcp.json`` (the server) and
``.cursor/hooks.json`` (the hooks).  Every conversation in that project acts
as that one pin (weaker than Claude Code or Codex, where each session is its
own pin; docs/MCP.md).

* ``sessionStart`` -> ``{"additional_context": ...}``: the identity block the
  Claude Code hook gives (pin, alias, collaboration, counts), or, unbound,
  which pin the MCP server acts as.
* ``stop`` -> ``{"followup_message": ...}`` only inside an enabled delivery
  envelope for that pin (``agentmsg delivery enable``), with pending requests
  framed in the untrusted boundary, a slot spent per follow-up.  Cursor's own
  ``loop_limit`` in hooks.json is written equal to the envelope's slots.
* ``beforeSubmitPrompt`` cannot inject context in Cursor, so it is not used:
  the MCP ``inbox`` tool is how a conversation reads its mail.

Entry points: ``python3 -m agentmsg.hosts.cursor hook --self cursor:NAME`` (stdin:
Cursor's hook JSON), ``python3 -m agentmsg.hosts.cursor install --self cursor:NAME
[--project DIR] [--slots N]``.  Stdlib only, like the hooks.
"""

from __future__ import annotations

import json
import os
import shlex
import sys

from agentmsg import records
from agentmsg.domain import envelope
from agentmsg.hooks.core import STDIN_MAX, Hook, HookError, _nothing, _Sink, _write_stdout, is_session, parse_stdin

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

EVENTS = {"sessionStart": "SessionStart", "stop": "Stop"}


class CursorHook(Hook):
    hosts = {"cursor": "cursor"}  # noqa: RUF012  (read only)

    def __init__(self, env: Mapping[str, str], pin: str) -> None:
        super().__init__("cursor", env)
        runtime, _, session = pin.partition(":")
        if runtime != "cursor" or not is_session(session):
            raise HookError(f"--self must be cursor:NAME, not {pin[:60]!r}")
        self.session = session

    def run(self, raw: bytes) -> tuple[bytes, Callable[[], None]]:
        data = parse_stdin(raw)
        event = EVENTS.get(str(data.get("hook_event_name")))
        if event is None:
            raise HookError(f"unsupported Cursor hook {str(data.get('hook_event_name'))[:40]!r}")
        if event == "Stop" and data.get("status", "completed") != "completed":
            return b"", _nothing  # aborted or failed: never continue a turn the user stopped
        loops = data.get("loop_count")
        inner = {"hook_event_name": event, "session_id": self.session, "source": "startup",
                 "stop_hook_active": isinstance(loops, int) and loops > 0}
        return super().run(records.dumps(inner).encode())

    def output(self, text: str) -> bytes:
        if self.event == "Stop":
            return records.dumps({"followup_message": text}).encode()
        return records.dumps({"additional_context": text}).encode()

    def unbound(self, event: str) -> bytes:
        if event != "SessionStart":
            return b""
        return self.output(f"agentmsg (peer messaging): this Cursor project acts as pin {self.pin} (the agentmsg MCP "
                           "server's identity); it has not joined a collaboration. The agentmsg MCP tools "
                           "(status, inbox, send, ...) act as that pin.\n")


def hook_main(pin: str, env: Mapping[str, str] | None = None) -> int:
    """Run one Cursor hook; like ``hooks.main``, always exit 0 and fail open."""
    saved = sys.stderr
    sys.stderr = _Sink()  # type: ignore[assignment,unused-ignore]
    env = os.environ if env is None else env
    try:
        hook = CursorHook(env, pin)
    except HookError:
        sys.stderr = saved
        return 0
    try:
        out, after = hook.run(sys.stdin.buffer.read(STDIN_MAX + 1))
        if out:
            _write_stdout(out)
            after()
    except BaseException as exc:
        hook.log(exc)
    finally:
        sys.stderr = saved
    return 0


def configs(pin: str, *, python: str | None = None, slots: int = envelope.DEFAULT_SLOTS,
            agentmsg: str = "agentmsg") -> dict[str, dict[str, Any]]:
    """``.cursor/hooks.json`` and ``.cursor/mcp.json`` for ``pin``: the same pin in both."""
    runtime, _, session = pin.partition(":")
    if runtime != "cursor" or not is_session(session):
        raise ValueError(f"the pin must be cursor:NAME, not {pin[:60]!r}")
    if not 1 <= slots <= envelope.MAX_SLOTS:
        raise ValueError(f"slots must be 1..{envelope.MAX_SLOTS}")
    py = python or sys.executable
    hook = f"{shlex.quote(py)} -m agentmsg.hosts.cursor hook --self {shlex.quote(pin)}"
    return {
        "hooks.json": {"version": 1, "hooks": {
            "sessionStart": [{"command": hook}],
            # loop_limit equals the envelope's slots: Cursor's cap and agentmsg's agree.
            "stop": [{"command": hook, "loop_limit": slots}],
        }},
        "mcp.json": {"mcpServers": {"agentmsg": {"type": "stdio", "command": agentmsg,
                                                 "args": ["mcp", "--self", pin]}}},
    }


def install(project: str, pin: str, *, slots: int = envelope.DEFAULT_SLOTS, python: str | None = None,
            agentmsg: str = "agentmsg") -> list[str]:
    """Write (merge) the two files under ``project/.cursor``; other hooks and servers are kept."""
    folder = os.path.join(project, ".cursor")
    os.makedirs(folder, exist_ok=True)
    written = []
    for name, doc in configs(pin, python=python, slots=slots, agentmsg=agentmsg).items():
        path = os.path.join(folder, name)
        try:
            with open(path, encoding="utf-8") as fh:
                old = json.load(fh)
        except FileNotFoundError:
            old = {}
        if name == "hooks.json":
            old.setdefault("version", 1)
            hooks = old.setdefault("hooks", {})
            for event, entries in doc["hooks"].items():
                kept = [e for e in hooks.get(event, []) if "agentmsg.hosts.cursor hook" not in str(e.get("command"))]
                hooks[event] = kept + entries
        else:
            old.setdefault("mcpServers", {}).update(doc["mcpServers"])
        with open(path + ".tmp", "w", encoding="utf-8") as fh:
            json.dump(old, fh, indent=2)
            fh.write("\n")
        os.replace(path + ".tmp", path)
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python3 -m agentmsg.hosts.cursor")
    sub = ap.add_subparsers(dest="what", required=True)
    h = sub.add_parser("hook", help="run one Cursor hook (stdin: Cursor's hook JSON)")
    h.add_argument("--self", dest="pin", required=True)
    i = sub.add_parser("install", help="write .cursor/hooks.json and .cursor/mcp.json")
    i.add_argument("--self", dest="pin", required=True, help="cursor:NAME, the same in both files")
    i.add_argument("--project", default=".")
    i.add_argument("--slots", type=int, default=envelope.DEFAULT_SLOTS,
                   help="Cursor's loop_limit; enable delivery with --max-continuations equal to it")
    i.add_argument("--agentmsg", default="agentmsg", help="the agentmsg command Cursor starts the server with")
    args = ap.parse_args(argv)
    if args.what == "hook":
        return hook_main(args.pin)
    for path in install(args.project, args.pin, slots=args.slots, agentmsg=args.agentmsg):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
