"""The first program in a spawned session's tmux window: it becomes the host (``exec``) with exactly the
environment ``agentmsg spawn`` chose, read from a 0600 file under ``ROOT/spawn/`` and removed at once.

Why a file: tmux gives a new window its server's environment, not the spawner's, and a command line is
readable by every process on the machine, so neither may carry the environment (API keys, the one-time
ticket).  tmux's own ``TMUX`` and ``TMUX_PANE`` for the new pane are kept.

Run as a script (``python3 -I -S execenv.py FILE``), so it imports only the standard library: the package
need not be importable there.  It starts nothing: it replaces itself with the host (``runtime/spawn.py``
started the window).
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: execenv.py FILE", file=sys.stderr)
        return 2
    path = argv[1]
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        if os.fstat(fd).st_uid != os.getuid():
            print(f"{path}: not this user's file", file=sys.stderr)
            return 2
        with os.fdopen(fd, "rb") as fh:
            doc = json.loads(fh.read(1 << 22))
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    env = {str(k): str(v) for k, v in doc["env"].items()}
    for own in ("TMUX", "TMUX_PANE"):  # the pane's own, set by tmux
        if own in os.environ:
            env[own] = os.environ[own]
    program = [str(a) for a in doc["argv"]]
    os.chdir(str(doc["cwd"]))
    os.execve(program[0], program, env)
    return 127  # not reached: execve raises when it fails


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
