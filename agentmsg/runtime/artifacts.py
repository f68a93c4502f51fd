"""Artifacts by reference and hash (issue 31, docs/HANDOFFS.md "Artifacts"): hashed in the sender's checkout at
send time, and again in the reader's own checkout of the same repository when shown (``show``, ``task show``,
the hooks' delivery).

The repository is the claims issue's (:mod:`agentmsg.runtime.gitrepo`, docs/CLAIMS.md "The repository rule"):
its root commit, or before a first commit its git common directory.  An artifact records its location relative
to the repository's top, its size, its sha256, and the repository's key, so a reader in another clone or
worktree of the same repository checks the same file, and a reader in another repository is told so.

Lean: ``os``, ``stat`` and ``hashlib`` (the hooks use it); git is asked only for a repository's key.
"""

from __future__ import annotations

import os
import stat

from agentmsg.runtime import gitrepo

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_CHUNK = 1 << 20


def sha256(path: str) -> tuple[str, int]:
    """A regular file's sha256 and size.  FileNotFoundError; IsADirectoryError; ValueError for anything but a
    regular file (a FIFO, a device or a socket is never opened for reading: its mode is read first)."""
    import hashlib

    st = os.stat(path)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(path)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("is not a regular file (a FIFO, a device or a socket)")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the stat
            raise ValueError("is not a regular file")
        h, size = hashlib.sha256(), 0
        while chunk := os.read(fd, _CHUNK):
            h.update(chunk)
            size += len(chunk)
        return h.hexdigest(), size
    finally:
        os.close(fd)


def pinned(where: str, art: dict[str, Any], cwd: str) -> dict[str, Any]:
    """An artifact named by a path, as sent: its location relative to its repository's top, its size, its
    sha256 and the repository's key.  One given with a ``sha256`` or a ``version`` is kept as given.

    Refused (PayloadInvalid, one line): no repository here, a path outside it, a missing file, a directory, a
    FIFO, a device or a socket."""
    from agentmsg.domain.handoffs import invalid

    if art.get("sha256") or art.get("version"):
        return art
    loc = str(art["location"])
    repo = gitrepo.identify(cwd)
    if repo is None:
        raise invalid(f"{where}.location", f"{loc!r}: the working directory is in no git repository (an artifact "
                                           "is a file of the repository, by its path in it)")
    path = os.path.join(cwd, loc)
    real = os.path.realpath(path)
    top = os.path.realpath(repo.top)
    if os.path.commonpath([real, top]) != top or os.path.relpath(real, top).split(os.sep)[0] == ".git":
        raise invalid(f"{where}.location", f"{loc!r} is outside the repository {top}")
    try:
        digest, size = sha256(real)
    except FileNotFoundError:
        raise invalid(f"{where}.location", f"no such file {loc!r}") from None
    except IsADirectoryError:
        raise invalid(f"{where}.location", f"{loc!r} is a directory, not a file") from None
    except ValueError as exc:
        raise invalid(f"{where}.location", f"{loc!r} {exc}") from None
    except OSError as exc:
        raise invalid(f"{where}.location", f"cannot read {loc!r}: {exc.strerror or exc}") from None
    rel = os.path.relpath(real, top).replace(os.sep, "/")
    return {**art, "location": rel, "sha256": digest, "size": size, "repo": repo.key}


class Checkout:
    """The reader's checkout, found once per view: its top and its repository's key (git asked at most once)."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self._found: tuple[str, str] | bool | None = False
        self._key: str | None = None

    def top(self) -> str | None:
        if self._found is False:
            self._found = gitrepo.find(self.cwd)
        return self._found[0] if isinstance(self._found, tuple) else None

    def key(self) -> str | None:
        if self._key is None and self.top() is not None and isinstance(self._found, tuple):
            self._key = gitrepo.key_of(*self._found)
        return self._key


def state(art: dict[str, Any], here: Checkout) -> dict[str, Any]:
    """An artifact as it is now in the reader's checkout: ``unchanged``, ``changed``, ``missing``, or
    ``unverified`` (named by a version only, read outside any repository, or in another repository: ``why``)."""
    out = dict(art)
    if not art.get("sha256"):
        out["state"] = "unverified"
        out["why"] = "named by a version, not a hash"
        return out
    loc = str(art["location"])
    if os.path.isabs(loc):
        path = loc
    else:
        top = here.top()
        if top is None:
            out["state"], out["why"] = "unverified", "read outside any git repository"
            return out
        if art.get("repo") and here.key() != art["repo"]:
            out["state"], out["why"] = "unverified", "read in another repository than the sender's"
            return out
        path = os.path.join(top, loc)
    try:
        digest, _size = sha256(path)
    except FileNotFoundError:
        out["state"] = "missing"
        return out
    except (OSError, ValueError):
        out["state"] = "changed"  # a directory or a FIFO where the file was
        return out
    out["state"] = "unchanged" if digest == art["sha256"] else "changed"
    return out


#: The payload field of each type that lists its artifacts (domain/handoffs.py ``artifacts_of``); a hand-off
#: template's one artifact is its ``artifact``.
_FIELDS = {"task": "input_artifacts", "result": "artifacts"}


def of(handoff: Any) -> list[dict[str, Any]]:
    """The artifacts a typed message carries: a task's inputs, a result's, a hand-off template's one."""
    if not isinstance(handoff, dict) or not isinstance(handoff.get("payload"), dict):
        return []
    payload = handoff["payload"]
    if handoff.get("template"):
        one = payload.get("artifact")
        return [one] if isinstance(one, dict) and one.get("location") else []
    field = _FIELDS.get(str(handoff.get("type")))
    found = payload.get(field) if field else None
    return [a for a in found if isinstance(a, dict)] if isinstance(found, list) else []


def states(arts: list[dict[str, Any]], here: Checkout) -> list[tuple[str, str]]:
    """``(location, state)`` of each artifact, for a one-line summary (the hooks' delivery)."""
    return [(str(a.get("location", "?")), state(a, here)["state"]) for a in arts]
