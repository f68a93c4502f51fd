"""A host's hook JSON on stdin: bounded, one object, and the session ids it may carry.  Lean."""

from __future__ import annotations

from agentmsg import records

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STDIN_MAX = 16 << 20


class HookError(Exception):
    """A reason to fail open, written to hooks.log."""


def parse_stdin(raw: bytes) -> dict[str, Any]:
    """A host's hook JSON: one object, bounded; anything else is a reason to fail open."""
    if len(raw) > STDIN_MAX:
        raise HookError(f"stdin is over {STDIN_MAX} bytes")
    try:
        data = records.loads(raw.decode("utf-8"))
    except ValueError as exc:
        raise HookError(f"stdin is not JSON: {type(exc).__name__}") from None
    if not isinstance(data, dict):
        raise HookError(f"stdin is JSON {type(data).__name__}, not an object")
    return data


_SESSION_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_SESSION_REST = _SESSION_FIRST | frozenset("_.@-")


def is_session(value: object) -> bool:
    """``model.SESSION_RE`` without ``re``: a session id that may become part of a pin."""
    return (isinstance(value, str) and 0 < len(value) <= 128 and value[0] in _SESSION_FIRST
            and set(value) <= _SESSION_REST)
