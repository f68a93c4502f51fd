"""Which repository a path is in, as claims name it (docs/CLAIMS.md, "The repository rule").

A repository is its root commit (``root:<sha>``: the first commit, ``git rev-list --max-parents=0 HEAD``; with
several roots, the smallest), so every clone and worktree of it agrees, on one machine or two; before its first
commit it is its git common directory (``gitdir:<path>``), which its worktrees share.

:func:`find` walks up from a directory to the ``.git`` that holds it without starting a process (the pre-tool
hook's path); :func:`identify` asks git for the root commit (a process, so only where a claim is made or the
claims index names no key for this repository yet).

Lean: :mod:`agentmsg.pathops` (the pre-tool hook imports no ``os``); ``os`` and ``subprocess`` when git is asked.
"""

from __future__ import annotations

from agentmsg import pathops

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


class Repo:
    """A working tree: its top directory, its git common directory, and its key (``root:<sha>``/``gitdir:<path>``)."""

    __slots__ = ("common", "key", "top")

    def __init__(self, top: str, common: str, key: str) -> None:
        self.top, self.common, self.key = top, common, key

    def __repr__(self) -> str:
        return f"Repo(top={self.top!r}, common={self.common!r}, key={self.key!r})"


def find(start: str) -> tuple[str, str] | None:
    """``(top, common dir)`` of the working tree holding ``start`` (a directory), from the files alone; None
    outside any."""
    here = pathops.realpath(start)
    while True:
        dot = pathops.join(here, ".git")
        if pathops.isdir(dot):
            return here, dot
        if pathops.isfile(dot):
            common = _common_of_file(here, dot)
            return (here, common) if common else None
        up = pathops.dirname(here)
        if up == here:
            return None
        here = up


def _common_of_file(top: str, dot: str) -> str | None:
    """A worktree's ``.git`` file: ``gitdir: X``; X/commondir (when present) names the shared directory."""
    try:
        with open(dot, encoding="utf-8") as fh:
            line = fh.readline().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not line.startswith("gitdir:"):
        return None
    gitdir = pathops.join(top, line[len("gitdir:"):].strip())
    try:
        with open(pathops.join(gitdir, "commondir"), encoding="utf-8") as fh:
            common = pathops.join(gitdir, fh.readline().strip())
    except OSError:
        common = gitdir
    return pathops.realpath(common)


def _git(cwd: str, *args: str) -> str | None:
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False, env=env,
                              stdin=subprocess.DEVNULL, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def key_of(top: str, common: str) -> str:
    """The repository's key: its smallest root commit, or (no commit yet) its common directory."""
    out = _git(top, "rev-list", "--max-parents=0", "HEAD")
    roots = sorted(line.strip() for line in (out or "").splitlines() if line.strip())
    return f"root:{roots[0]}" if roots else f"gitdir:{pathops.realpath(common)}"


def identify(start: str, known: Mapping[str, str] | None = None) -> Repo | None:
    """The repository holding ``start``, keyed; ``known`` (common dir -> key, from the claims index) spares git."""
    found = find(start)
    if found is None:
        return None
    top, common = found
    key = (known or {}).get(common) or key_of(top, common)
    return Repo(top, common, key)


def hooks_dir(cwd: str) -> str | None:
    """Where git runs this repository's hooks from (``core.hooksPath`` honoured), absolute."""
    out = _git(cwd, "rev-parse", "--path-format=absolute", "--git-path", "hooks")
    return out.strip() if out and out.strip() else None


def staged(top: str) -> list[str]:
    """Paths a commit would record (added, changed, deleted, renamed), relative to the top."""
    out = _git(top, "diff", "--cached", "--name-only", "--no-renames", "-z")
    return [p for p in (out or "").split("\0") if p]


ZERO = "0" * 40


def pushed(top: str, lines: str) -> list[str]:
    """Paths the commits of a push (git's pre-push stdin: ``LOCAL_REF LOCAL_SHA REMOTE_REF REMOTE_SHA``) change."""
    found: list[str] = []
    for line in lines.splitlines():
        parts = line.split()
        if len(parts) != 4 or set(parts[1]) == {"0"}:
            continue  # not a ref line, or a deletion (it changes no file)
        local, remote = parts[1], parts[3]
        rng = [f"{remote}..{local}"] if set(remote) != {"0"} else [local, "--not", "--remotes"]
        out = _git(top, "log", "--format=", "--name-only", "--no-renames", "-z", *rng)
        found += [p.strip("\n") for p in (out or "").split("\0") if p.strip("\n")]
    return sorted(set(found))
