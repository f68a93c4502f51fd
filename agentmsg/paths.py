"""Where state lives: one root, resolved explicitly, never from the cwd."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

from .errors import UsageError


def resolve_root(flag: str | None = None, env: Mapping[str, str] | None = None) -> tuple[Path, str]:
    """Return the root and which rule chose it.

    Order: ``--root``, ``AGENTMSG_HOME``, ``$XDG_STATE_HOME/agentmsg``,
    ``~/.local/state/agentmsg``.  A relative path would make the root depend
    on the cwd, which is exactly the misdelivery this design avoids.
    """
    env = os.environ if env is None else env
    if flag:
        return _absolute(flag, "--root"), "--root"
    if env.get("AGENTMSG_HOME"):
        return _absolute(env["AGENTMSG_HOME"], "AGENTMSG_HOME"), "AGENTMSG_HOME"
    if env.get("XDG_STATE_HOME"):
        base = _absolute(env["XDG_STATE_HOME"], "XDG_STATE_HOME")
        return base / "agentmsg", "XDG_STATE_HOME"
    home = env.get("HOME")
    if not home:
        raise UsageError("cannot resolve the state root: set AGENTMSG_HOME or HOME")
    return _absolute(home, "HOME") / ".local" / "state" / "agentmsg", "HOME"


def _absolute(value: str, what: str) -> Path:
    path = Path(os.path.expanduser(value))
    if not path.is_absolute():
        raise UsageError(f"{what} must be an absolute path, got {value[:80]!r}")
    return Path(os.path.normpath(path))


def pin_key(pin: str) -> str:
    """File name for a pin: a hash, so raw session text never names a file."""
    return hashlib.sha256(pin.encode()).hexdigest()[:32]
