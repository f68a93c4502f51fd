"""The CLI locks through portalocker, the hooks through plain flock: they must exclude each other."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentmsg import fsio
from agentmsg.errors import StoreFailed

HOLD = """
import sys, time
import agentmsg.cli  # noqa: F401 - the CLI's own lock function
from agentmsg import fsio
from agentmsg.cli.main import _portalocker_nb
fsio.lock_nonblocking = _portalocker_nb
with fsio.locked(sys.argv[1], 5):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_a_portalocker_lock_in_the_cli_blocks_the_hooks_flock(tmp_path: Path) -> None:
    lock = tmp_path / "write.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock), "1.5"], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[3])
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert fsio.lock_nonblocking is fsio._flock_nb  # this process is on the hook path's lock
        with pytest.raises(StoreFailed), fsio.locked(lock, 0.3):
            pass
        started = time.monotonic()
        with fsio.locked(lock, 10):  # granted once the CLI process lets go
            waited = time.monotonic() - started
        assert waited > 0.2
    finally:
        holder.wait(timeout=10)
    assert holder.returncode == 0
