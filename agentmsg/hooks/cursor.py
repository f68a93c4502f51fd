"""Cursor's hooks: ``python3 -m agentmsg.hooks.cursor --self cursor:NAME`` (stdin: Cursor's hook JSON).

* ``sessionStart`` -> ``{"additional_context": ...}``: the identity block the
  Claude Code hook gives (pin, alias, collaboration, counts), or, unbound,
  which pin the MCP server acts as.
* ``stop`` -> ``{"followup_message": ...}`` only inside an enabled delivery
  envelope for that pin (``agentmsg delivery enable``), with pending requests
  framed in the untrusted boundary, a slot spent per follow-up.  Cursor's own
  ``loop_limit`` in hooks.json is written equal to the envelope's slots.
* ``beforeSubmitPrompt`` cannot inject context in Cursor, so it is not used:
  the MCP ``inbox`` tool is how a conversation reads its mail.
* ``beforeShellExecution`` -> ``{"permission": "deny", "user_message", "agent_message"}`` when the command
  writes a path another participant holds exclusively (docs/CLAIMS.md; the pre-tool hook's rule,
  ``hooks/pretool.py``), else ``{"permission": "allow"}``.  Cursor has no hook before a file edit (its
  ``afterFileEdit`` runs after it), so only shell writes are refused there.

``agentmsg.hosts.cursor`` writes the files that run it.  Stdlib only, like the other hooks.
"""

from __future__ import annotations

import os
import sys

from agentmsg import records
from agentmsg.hooks.base import STDIN_MAX, HookError, _nothing, is_session, parse_stdin
from agentmsg.hooks.core import Hook
from agentmsg.hooks.entry import _Sink, _write_stdout
from agentmsg.hosts.cursor import HOST

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

EVENTS = {"sessionStart": "SessionStart", "stop": "Stop"}
SHELL = "beforeShellExecution"


class CursorHook(Hook):
    def serves(self) -> bool:
        return self.spec is HOST

    def __init__(self, env: Mapping[str, str], pin: str) -> None:
        super().__init__(HOST.name, env)
        runtime, _, session = pin.partition(":")
        if runtime != HOST.runtime or not is_session(session):
            raise HookError(f"--self must be {HOST.runtime}:NAME, not {pin[:60]!r}")
        self.session = session

    def run(self, raw: bytes) -> tuple[bytes, Callable[[], None]]:
        data = parse_stdin(raw)
        if data.get("hook_event_name") == SHELL:
            return self.before_shell(data), _nothing
        event = EVENTS.get(str(data.get("hook_event_name")))
        if event is None:
            raise HookError(f"unsupported {HOST.title} hook {str(data.get('hook_event_name'))[:40]!r}")
        if event == "Stop" and data.get("status", "completed") != "completed":
            return b"", _nothing  # aborted or failed: never continue a turn the user stopped
        loops = data.get("loop_count")
        inner = {"hook_event_name": event, "session_id": self.session, "source": "startup",
                 "stop_hook_active": isinstance(loops, int) and loops > 0}
        return super().run(records.dumps(inner).encode())

    def before_shell(self, data: Mapping[str, object]) -> bytes:
        """Claims before a shell command runs: Cursor's own permission shape around the pre-tool hook's line."""
        from agentmsg.backends.file import layout
        from agentmsg.hooks import pretool
        from agentmsg.paths import resolve_root_str

        self.event = SHELL
        root = os.path.realpath(resolve_root_str(None, self.env)[0])
        roots = data.get("workspace_roots")
        cwd = data.get("cwd") or (roots[0] if isinstance(roots, list) and roots else None)
        inner = {"session_id": self.session, "cwd": cwd if isinstance(cwd, str) else os.getcwd(),
                 "tool_name": "Bash", "tool_input": {"command": str(data.get("command") or "")}}
        index = os.path.join(root, layout.CLAIMS)
        line = None
        if os.path.isfile(index) and os.path.getsize(index):  # no claims index: nothing is held anywhere
            line = pretool.decide(HOST.runtime, records.dumps(inner).encode(), index, os.path.join(root, layout.PINS))
        if line is None:
            return records.dumps({"permission": "allow"}).encode()
        return records.dumps({"permission": "deny", "user_message": line.split("\n", 1)[0],
                              "agent_message": line}).encode()

    def output(self, text: str) -> bytes:
        if self.event == "Stop":
            return records.dumps({"followup_message": text}).encode()
        return records.dumps({"additional_context": text}).encode()

    def unbound(self, event: str) -> bytes:
        if event != "SessionStart":
            return b""
        return self.output(f"agentmsg (peer messaging): this {HOST.title} project acts as pin {self.pin} (the "
                           "agentmsg MCP server's identity); it has not joined a collaboration. The agentmsg MCP tools "
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


def main(argv: list[str]) -> int:
    """``--self cursor:NAME`` (``hook --self ...`` too, as files written before 0.1 name it)."""
    args = argv[1:] if argv[:1] == ["hook"] else argv
    if len(args) != 2 or args[0] != "--self":
        sys.stderr.write(f"usage: python3 -m {__spec__.name if __spec__ else __name__} --self {HOST.runtime}:NAME\n")
        return 2
    return hook_main(args[1])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
