"""The claims index, ``ROOT/claims.json`` (derived): every live claim under the root, for the pre-tool hook.

The service rewrites it after each claim and release (:func:`write`), from the collaborations' records; with no
live claim left it removes it, so ``hooks/run`` can tell "nothing to check" from the file's absence alone.  The
hook reads it with :func:`read`; a damaged one reads as ``None`` (the hook fails open and logs it).

Shape: ``{"v": 1, "claims": [{collab, alias, pin, repo, pattern, mode, reason, expires_at, flags}], "repos":
{git common dir: repository key}}`` (``repos`` spares the hook a ``git`` process: runtime/gitrepo.py).
"""

from __future__ import annotations

import os

from agentmsg import fsio, records
from agentmsg.backends.file import layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

VERSION = 1


def path(root: str) -> str:
    return os.path.join(root, layout.CLAIMS)


def read(root: str) -> dict[str, Any] | None:
    """The index; ``{}`` when there is none; None when it is damaged (not JSON, not this shape)."""
    try:
        raw = fsio.read_bytes(path(root))
    except OSError:
        return None
    if not raw:
        return {}
    try:
        doc = records.loads(raw)
    except ValueError:
        return None
    if (not isinstance(doc, dict) or doc.get("v") != VERSION or not isinstance(doc.get("claims"), list)
            or not isinstance(doc.get("repos"), dict)):
        return None
    return doc


def write(root: str, claims: list[dict[str, Any]], repos: dict[str, str]) -> None:
    """Replace the index; none live: remove it (the launcher's "nothing to check")."""
    where = path(root)
    if not claims:
        try:
            os.unlink(where)
        except FileNotFoundError:
            pass
        return
    fsio.ensure_dir(root)
    fsio.atomic_write(where, records.dumps_plain({"v": VERSION, "claims": claims, "repos": repos}).encode(),
                      durable=False)
