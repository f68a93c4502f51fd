"""Throwaway git repositories for the claims tests: a repository with a first commit, and a worktree of it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ENV = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, "GIT_AUTHOR_NAME": "t",
       "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True, text=True).stdout


def repo(path: Path, *, files: dict[str, str] | None = None, commit: bool = True) -> Path:
    """A repository at ``path`` holding ``files`` (default: src/retry.py), committed unless told not to."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in (files or {"src/retry.py": "def retry():\n    pass\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    if commit:
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "first")
    return path


def worktree(main: Path, path: Path, branch: str = "other") -> Path:
    git(main, "worktree", "add", "-q", str(path), "-b", branch)
    return path
