"""Which store a command runs against: ``--store URL`` / ``AGENTMSG_STORE``, else the file store at the root.

``file:///abs/path`` is a file store at another state root (a shared disk,
and the mirror's tests); ``postgresql://`` is the PostgreSQL backend.
"""

from __future__ import annotations

from collections.abc import Mapping

from .errors import UsageError
from .ports import Store

ENV = "AGENTMSG_STORE"


def configured(flag: str | None, env: Mapping[str, str]) -> str | None:
    """The remote store URL this command names, if any."""
    return flag or env.get(ENV) or None


def open_store(url: str) -> Store:
    scheme, sep, rest = url.partition("://")
    if sep and scheme == "file":
        import os

        from .backends.file.store import FileStore

        if not rest.startswith("/"):
            raise UsageError(f"a file store URL names an absolute path (file:///PATH), got {url[:80]!r}")
        os.makedirs(rest, 0o700, exist_ok=True)
        return FileStore(rest)
    if sep and scheme in ("postgresql", "postgres"):
        return _postgres(url)
    raise UsageError(f"unknown store URL {url[:80]!r}: expected postgresql://… or file:///PATH")


def _postgres(url: str) -> Store:
    try:
        from .backends import postgres  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        raise UsageError("this agentmsg has no PostgreSQL backend; pip install 'agentmsg[postgres]'") from None
    return postgres.open_store(url)  # type: ignore[no-any-return,unused-ignore]
