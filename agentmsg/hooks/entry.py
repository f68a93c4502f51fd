"""The hooks' entry: read stdin, find the host, run the event, and fail open (no output, exit 0) on
anything.  ``hooks/agentmsg_hook.py`` calls :func:`main`; ``python3 -m agentmsg.hooks.entry HOST`` too."""

from __future__ import annotations

import os
import sys

from agentmsg.hooks.base import STDIN_MAX
from agentmsg.hooks.core import Hook
from agentmsg.hosts import registry


class _Sink:
    """Stands in for stderr: a stray warning must never reach the host."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def main(host: str) -> int:
    """Run one hook for ``host`` (a name ``hooks/run`` serves, ``registry.hook_runtimes``) on stdin's JSON; always 0."""
    saved = sys.stderr
    sys.stderr = _Sink()  # type: ignore[assignment,unused-ignore]
    hook = Hook(registry.host_of(host, os.environ), os.environ)
    try:
        raw = sys.stdin.buffer.read(STDIN_MAX + 1)
        out, after = hook.run(raw)
        if out:
            _write_stdout(out)
            after()
    except BaseException as exc:  # fail open, whatever happened
        hook.log(exc)
        hook.distrust()
    finally:
        sys.stderr = saved
    return 0


def _write_stdout(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
