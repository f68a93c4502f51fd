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
        event = EVENTS.get(str(data.get("hook_event_name")))
        if event is None:
            raise HookError(f"unsupported {HOST.title} hook {str(data.get('hook_event_name'))[:40]!r}")
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
