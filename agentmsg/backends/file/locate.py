"""Finding a collaboration's directory under the root: no symlink, and (by default) an opening record."""

from __future__ import annotations

import os

from agentmsg import fsio
from agentmsg.backends.file import layout


def collab_dir(root: str, collab: str, *, subdirs: bool = True) -> str | None:
    """The collaboration's directory, or None; a symlinked directory or subdirectory raises UnsafePath.

    ``subdirs=False`` leaves the subdirectories to the caller (a transaction
    checks them once it holds the lock: `FileTxn.__enter__`).
    """
    found = locate(root, collab)
    if found is None:
        return None
    if subdirs:
        for sub in layout.COLLAB_SUBDIRS:
            fsio.existing_dir(found[0], sub)
    return found[0]


def locate(root: str, collab: str, *, opened: bool = True) -> tuple[str, os.stat_result] | None:
    """The collaboration's directory and its ``lstat`` (a transaction keys what it checked on it), or None.

    ``opened=False`` leaves the opening record (``collab.jsonl``) to the
    caller: a transaction looks for it once it holds the lock.
    """
    if not layout.is_uuid(collab):
        return None
    parent = fsio.existing_dir(root, layout.COLLABS)
    if parent is None:
        return None
    base = layout.collab(root, collab)
    st = fsio.dir_stat(base)
    if st is None or (opened and not os.path.exists(f"{base}/{layout.EVENTS}")):
        return None
    return base, st
