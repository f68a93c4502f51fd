"""Stopping a spawned session signals only the recorded process: same pid *and* start time."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentmsg.runtime import spawned
from agentmsg.runtime.procs import proc_stat


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_reused_pid_is_never_signalled(sleeper: subprocess.Popen) -> None:
    stat = proc_stat(sleeper.pid)
    assert stat is not None
    reused = {"pid": sleeper.pid, "pid_start": str(int(stat[2]) - 1), "socket": "/nonexistent", "window": "@1",
              "pane": "%1"}  # the recorded process started earlier: this pid is another process now
    with pytest.raises(LookupError):
        spawned.stop(reused)
    assert sleeper.poll() is None


def test_the_recorded_process_group_is_ended(sleeper: subprocess.Popen) -> None:
    stat = proc_stat(sleeper.pid)
    assert stat is not None
    how = spawned.stop({"pid": sleeper.pid, "pid_start": stat[2]}, grace=0.2)
    assert how == "SIGTERM" and sleeper.wait(timeout=10) == -15
    with pytest.raises(LookupError):
        spawned.stop({"pid": sleeper.pid, "pid_start": stat[2]})
