"""Validation of everything a user or peer hands in. Pure: nothing here touches the disk.

Every name that reaches the filesystem passes through a validator here
first, so a path can only ever be built from an alias, a UUID or a hash.
"""

from __future__ import annotations

import re
import uuid

from agentmsg.domain import kinds
from agentmsg.domain.values import Pin
from agentmsg.errors import TooLarge, UsageError

ALIAS_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
SESSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}")  # "_": OpenCode's ses_... ids
RUNTIMES = ("claude-code", "codex", "cursor", "gemini", "copilot", "opencode", "aider", "human")
RESERVED_ALIASES = ("all",)
KINDS = kinds.KINDS
PRIORITIES = kinds.PRIORITIES

SUBJECT_MAX_CHARS = 200
BODY_MAX_BYTES = 64 * 1024
LABEL_MAX_CHARS = 64
TASK_MAX_CHARS = 500
REASON_MAX_CHARS = 500
LOG_MAX_BYTES = 16 * 1024


def alias(value: str) -> str:
    if value in RESERVED_ALIASES or not ALIAS_RE.fullmatch(value):
        raise UsageError(
            f"invalid alias {value[:40]!r}: must match ^[a-z][a-z0-9_-]{{0,31}}$ and not be 'all'"
        )
    return value


THREAD_MAX_CHARS = 128


def thread(value: str) -> str:
    """A thread's name (``send --thread``, ``--thread`` filters): one line of at most 128 characters, no control
    characters, not blank."""
    if not value.strip() or len(value) > THREAD_MAX_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise UsageError(f"invalid thread {value[:40]!r}: one line of 1 to {THREAD_MAX_CHARS} characters without "
                         "control characters")
    return value


def collab_id(value: str) -> str:
    return as_uuid(value, "collaboration id")


def message_id(value: str) -> str:
    return as_uuid(value, "message id")


def as_uuid(value: str, what: str) -> str:
    """Return the canonical lowercase form; anything else is refused."""
    try:
        parsed = uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise UsageError(f"invalid {what} {str(value)[:40]!r}: expected a UUID") from None
    if str(parsed) != value.lower():
        raise UsageError(f"invalid {what} {value[:40]!r}: expected canonical UUID form")
    return str(parsed)


def pin(value: str) -> Pin:
    runtime, sep, session = value.partition(":")
    if not sep or runtime not in RUNTIMES or not SESSION_RE.fullmatch(session):
        raise UsageError(
            f"invalid pin {value[:60]!r}: expected RUNTIME:SESSION_ID with RUNTIME one of "
            + ", ".join(RUNTIMES)
        )
    return Pin(runtime, session)


def text(value: str, what: str, max_chars: int, *, single_line: bool = False) -> str:
    if len(value) > max_chars:
        raise TooLarge(f"{what} is {len(value)} characters; the limit is {max_chars} (nothing was stored)")
    if single_line and ("\n" in value or "\r" in value):
        raise UsageError(f"{what} must be a single line")
    _encodable(value, what)
    return value


def body(value: str, what: str = "body", limit: int = BODY_MAX_BYTES) -> str:
    size = len(_encodable(value, what))
    if size > limit:
        raise TooLarge(f"{what} is {size} bytes; the limit is {limit} bytes (nothing was stored)")
    return value


def _encodable(value: str, what: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{what} is not valid UTF-8 text") from None


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(value: str, what: str, *, maximum: float, allow_zero: bool = False) -> float:
    """``90``, ``90s``, ``10m``, ``2h``, ``1d`` -> seconds, within (0, maximum] ([0, maximum] if allowed)."""
    raw = value.strip().lower()
    unit = raw[-1:] if raw[-1:] in _UNITS else "s"
    number = raw[:-1] if raw[-1:] in _UNITS else raw
    try:
        seconds = float(number) * _UNITS[unit]
    except ValueError:
        raise UsageError(f"invalid {what} {value[:20]!r}: expected e.g. 90s, 10m, 2h") from None
    if not (0 <= seconds if allow_zero else 0 < seconds) or not seconds <= maximum:
        floor = "at least 0" if allow_zero else "more than 0"
        raise UsageError(f"{what} must be {floor} and at most {_human(maximum)}")
    return seconds


def _human(seconds: float) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise UsageError(f"invalid {what} {value[:40]!r}: expected one of {', '.join(allowed)}")
    return value
