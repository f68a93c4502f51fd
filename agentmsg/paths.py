"""Where state lives: one root, resolved explicitly, never from the cwd.

Lean (the hooks resolve the root with :func:`resolve_root_str`, and the thin client, ``cli/thin.py``, before
anything else is imported); only :func:`resolve_root`, for the CLI, imports ``pathlib``.
"""

from agentmsg import pathops

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path


def resolve_root(flag: "str | None" = None, env: "Mapping[str, str] | None" = None) -> "tuple[Path, str]":
    """:func:`resolve_root_str` as a ``Path``."""
    from pathlib import Path

    root, source = resolve_root_str(flag, env)
    return Path(root), source


def resolve_root_str(flag: "str | None" = None, env: "Mapping[str, str] | None" = None) -> tuple[str, str]:
    """Return the root (normalized, absolute) and which rule chose it; UsageError when there is none.

    Order: ``--root``, ``AGENTMSG_HOME``, ``$XDG_STATE_HOME/agentmsg``,
    ``~/.local/state/agentmsg``.  A relative path would make the root depend
    on the cwd, which is exactly the misdelivery this design avoids.
    """
    if env is None:
        import os

        env = os.environ
    if flag:
        return _absolute(flag, "--root"), "--root"
    if env.get("AGENTMSG_HOME"):
        named = _absolute(env["AGENTMSG_HOME"], "AGENTMSG_HOME")
        try:  # the same root reports the same source, whether or not a hook exported AGENTMSG_HOME
            default = resolve_root_str(None, {k: v for k, v in env.items() if k != "AGENTMSG_HOME"})
        except Exception:  # no default root: AGENTMSG_HOME is the only rule that applies
            default = ("", "")
        return (named, default[1]) if default[0] == named else (named, "AGENTMSG_HOME")
    if env.get("XDG_STATE_HOME"):
        return pathops.join(_absolute(env["XDG_STATE_HOME"], "XDG_STATE_HOME"), "agentmsg"), "XDG_STATE_HOME"
    home = env.get("HOME")
    if not home:
        raise _usage("cannot resolve the state root: set AGENTMSG_HOME or HOME")
    return pathops.join(_absolute(home, "HOME"), ".local", "state", "agentmsg"), "HOME"


def _absolute(value: str, what: str) -> str:
    """``value`` with a leading ``~`` expanded as ``os.path.expanduser`` does (the process's ``HOME``), normalized;
    absolute, else UsageError.  ``os`` only for a ``~``: the thin client runs without it."""
    path = value
    if value.startswith("~"):
        import os

        path = os.path.expanduser(value)
    if not path.startswith("/"):
        raise _usage(f"{what} must be an absolute path, got {value[:80]!r}")
    return pathops.normpath(path)


def _usage(message: str) -> Exception:
    from agentmsg.errors import UsageError  # only when raising: the hooks resolve the root on every prompt

    return UsageError(message)


def pin_key(pin: str) -> str:
    """File name for a pin: a hash, so raw session text never names a file."""
    from agentmsg.records import sha256_hex

    return sha256_hex(pin.encode())[:32]
