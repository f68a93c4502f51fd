"""Path operations on ``posix`` alone, for the hook that runs before every tool call (hooks/pretool.py).

``import os`` costs that hook about 0.13x the interpreter floor (it brings ``posixpath``, ``stat``,
``genericpath`` and ``_collections_abc``, none of which ``python -S`` loads), a quarter of what the hook may
spend over the floor in all.  The few operations it needs are these, with ``posixpath``'s meaning for ``str``
paths: tests/unit/test_pathops.py compares every one with ``os.path`` on generated paths and on a tree of
symbolic links.  Nothing else should use this module: ``os.path`` is the ordinary choice.
"""

import posix

_DIR, _FILE, _LINK, _KIND = 0o040000, 0o100000, 0o120000, 0o170000


def join(a: str, *rest: str) -> str:
    path = a
    for b in rest:
        if b.startswith("/"):
            path = b
        elif not path or path.endswith("/"):
            path += b
        else:
            path += "/" + b
    return path


def split(path: str) -> tuple[str, str]:
    i = path.rfind("/") + 1
    head, tail = path[:i], path[i:]
    if head and head != "/" * len(head):
        head = head.rstrip("/")
    return head, tail


def dirname(path: str) -> str:
    return split(path)[0]


def basename(path: str) -> str:
    return path[path.rfind("/") + 1:]


def normpath(path: str) -> str:
    if not path:
        return "."
    slashes = 2 if path.startswith("//") and not path.startswith("///") else 1 if path.startswith("/") else 0
    kept: list[str] = []
    for comp in path.split("/"):
        if comp in ("", "."):
            continue
        if comp != ".." or (not slashes and not kept) or (kept and kept[-1] == ".."):
            kept.append(comp)
        elif kept:
            kept.pop()
    return "/" * slashes + "/".join(kept) or "."


def abspath(path: str) -> str:
    return normpath(path if path.startswith("/") else join(posix.getcwd(), path))


def _kind(path: str, *, follow: bool = True) -> int:
    try:
        return (posix.stat(path) if follow else posix.lstat(path)).st_mode & _KIND
    except (OSError, ValueError):
        return 0


def isdir(path: str) -> bool:
    return _kind(path) == _DIR


def isfile(path: str) -> bool:
    return _kind(path) == _FILE


def islink(path: str) -> bool:
    return _kind(path, follow=False) == _LINK


def realpath(path: str) -> str:
    """``os.path.realpath(path)`` (not strict: a missing part is kept as written)."""
    found, _ = _joinrealpath("", path, {})
    return abspath(found)


def _joinrealpath(path: str, rest: str, seen: dict[str, str | None]) -> tuple[str, bool]:
    """posixpath's own walk, one component at a time; ``seen`` breaks a loop of links."""
    if rest.startswith("/"):
        rest, path = rest[1:], "/"
    while rest:
        name, _, rest = rest.partition("/")
        if not name or name == ".":
            continue
        if name == "..":
            if path:
                path, name = split(path)
                if name == "..":
                    path = join(path, "..", "..")
            else:
                path = ".."
            continue
        newpath = join(path, name)
        try:
            is_link = posix.lstat(newpath).st_mode & _KIND == _LINK
        except (OSError, ValueError):
            is_link = False
        if not is_link:
            path = newpath
            continue
        if newpath in seen:
            known = seen[newpath]
            if known is not None:
                path = known
                continue
            return join(newpath, rest), False  # a loop: the rest as written
        seen[newpath] = None
        path, ok = _joinrealpath(path, posix.readlink(newpath), seen)
        if not ok:
            return join(path, rest), False
        seen[newpath] = path
    return path, True

