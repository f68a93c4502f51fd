"""Which store a ``--store URL`` / ``AGENTMSG_STORE`` names.

``postgresql://`` is the PostgreSQL backend; ``file:///abs/path`` is a file
store at another state root (a shared disk, and the mirror's tests).
Neither set: the file store at the state root (``service/context.py``).
"""

from __future__ import annotations

from agentmsg.errors import UsageError
from agentmsg.ports import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentmsg.backends.file.protocols import WakeCallback


def open_store(url: str, *, on_wake: WakeCallback | None = None) -> Store:
    """``on_wake``: a file store's (`FileStore`), supplied by the caller: a backend never rings the runtime."""
    scheme = url.split(":", 1)[0].lower()
    if scheme == "file" and url.startswith("file:///"):
        import os

        from agentmsg.backends.file.store import FileStore

        path = url[len("file://"):]
        os.makedirs(path, 0o700, exist_ok=True)
        return FileStore(path, on_wake=on_wake)
    if scheme not in ("postgresql", "postgres"):
        raise UsageError(f"--store/AGENTMSG_STORE must be a postgresql:// URL (or file:///PATH), not {scheme[:20]!r}")
    try:
        from agentmsg.backends.postgres.store import PgStore
    except ImportError:
        import sys  # agentmsg is not on PyPI: name what works for this very interpreter

        raise UsageError("the PostgreSQL store needs psycopg: "
                         f"{sys.executable} -m pip install 'psycopg[binary]>=3.2,<4'") from None
    return PgStore(url)
