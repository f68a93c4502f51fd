"""agentmsg.runtime.spawn: the one way agentmsg starts a background process, and the one "is it running?" probe."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentmsg.backends.file import ahead
from agentmsg.runtime import doorbell, spawn

REPO = Path(__file__).resolve().parents[2]

#: The detached child: reports who it is, then lives until its stop file appears (or 30 s).
CHILD = """
import json, os, sys, time
out, stop = sys.argv[1], sys.argv[2]
fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
doc = {"pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "pgid": os.getpgid(0), "cwd": os.getcwd(),
       "stdio": [os.readlink(f"/proc/self/fd/{n}") for n in (0, 1, 2)], "fds": fds,
       "env": dict(os.environ)}
with open(out + ".tmp", "w") as fh:
    json.dump(doc, fh)
os.replace(out + ".tmp", out)
deadline = time.time() + 30
while not os.path.exists(stop) and time.time() < deadline:
    time.sleep(0.02)
"""

#: The parent: holds an inheritable descriptor, spawns the child, says what it got, exits at once.
PARENT = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from agentmsg.runtime import spawn
leak = os.dup2(os.open(os.devnull, os.O_RDONLY), 50, inheritable=True)
cwd = sys.argv[5] or None
pid = spawn.spawn_detached([sys.executable, "-c", sys.argv[2], sys.argv[3], sys.argv[4]], cwd=cwd,
                           env={"PATH": os.defpath, "MARK": "kept"})
try:
    os.waitpid(-1, os.WNOHANG)
    children = True
except ChildProcessError:
    children = False
print(json.dumps({"pid": pid, "sid": os.getsid(0), "me": os.getpid(), "leak": leak, "children": children}))
"""


def _wait_for(path: Path, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc")
@pytest.mark.parametrize("cwd", ["", "sub"])
def test_the_child_outlives_its_parent_in_its_own_session_with_dev_null_stdio(tmp_path: Path, cwd: str) -> None:
    out, stop = tmp_path / "child.json", tmp_path / "stop"
    if cwd:
        (tmp_path / cwd).mkdir()
    parent = subprocess.run([sys.executable, "-c", PARENT, str(REPO), CHILD, str(out), str(stop),
                             str(tmp_path / cwd) if cwd else ""],
                            capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert parent.returncode == 0, parent.stderr
    said = json.loads(parent.stdout)
    try:
        _wait_for(out)
        child = json.loads(out.read_text())
        assert said["pid"] == child["pid"]  # the pid returned is the process itself, not the sh between
        assert not said["children"]  # no zombie is left to the caller: the sh between is reaped at once
        assert _alive(child["pid"])  # the parent has exited: the child lives on
        assert child["ppid"] != said["me"]
        assert child["sid"] != said["sid"] and child["sid"] != os.getsid(0)  # its own session
        assert child["stdio"] == ["/dev/null"] * 3
        assert said["leak"] == 50 and 50 not in child["fds"]  # the caller's descriptors stay behind
        assert set(child["fds"]) <= {0, 1, 2, 3}  # (3: the listing's own)
        assert child["env"].get("MARK") == "kept" and "HOME" not in child["env"]
        assert child["cwd"] == str(tmp_path / cwd) if cwd else child["cwd"] == str(tmp_path)
    finally:
        stop.touch()
    deadline = time.monotonic() + 60
    while _alive(child["pid"]) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(child["pid"])


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_the_child_gets_the_signals_python_ignores_back(tmp_path: Path) -> None:
    out = tmp_path / "status"
    pid = spawn.spawn_detached(["/bin/sh", "-c", f'cat /proc/$$/status > "{out}.tmp" && mv "{out}.tmp" "{out}"'])
    assert pid is not None
    _wait_for(out)
    ignored = int(re.search(r"^SigIgn:\s*([0-9a-f]+)$", out.read_text(), re.M).group(1), 16)  # type: ignore[union-attr]
    assert not ignored & (1 << (signal.SIGPIPE - 1))  # as subprocess's restore_signals gives it


def test_what_cannot_start_is_none_and_never_raises(tmp_path: Path) -> None:
    assert spawn.spawn_detached([]) is None
    assert spawn.spawn_detached([str(tmp_path / "missing")]) is None
    assert spawn.spawn_detached(["/bin/true"], cwd=str(tmp_path / "missing")) is None
    assert spawn.spawn_detached(["/bin/true"], env={"PATH": os.defpath}) is not None


HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def test_the_probe_says_running_while_another_process_holds_the_lock_and_not_after(tmp_path: Path) -> None:
    path = str(tmp_path / "x.lock")
    assert not spawn.running(path)  # no lock file: nobody runs
    assert "not running" in spawn.describe("thing", path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert spawn.running(path)
        assert spawn.running(path)  # probing never takes it away
        started = time.monotonic()
        assert spawn.lock(path, wait=0.3) is None  # held: given up after the wait
        assert time.monotonic() - started >= 0.25
        assert spawn.lock(path, wait=10, stop=lambda: True) is None  # ... or as soon as told to stop
        pid_file = tmp_path / "x.pid"
        pid_file.write_text(f"{holder.pid}\n")
        line = spawn.describe("thing", path, str(pid_file), "because")
        assert re.fullmatch(rf"thing: running since \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(pid {holder.pid}\): because",
                            line), line
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)
    assert not spawn.running(path)  # the holder is gone: so is its lock
    fd = spawn.lock(path)
    assert fd is not None
    try:
        assert os.stat(path).st_mode & 0o777 == 0o600
        probe = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(REPO)!r}); "
                                f"from agentmsg.runtime import spawn; print(spawn.running({path!r}))"],
                               capture_output=True, text=True, timeout=30)
        assert probe.stdout.strip() == "True"  # as another process sees it
    finally:
        os.close(fd)
    assert not spawn.running(path)


def test_the_probe_never_follows_a_link(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.touch()
    (tmp_path / "x.lock").symlink_to(target)
    assert not spawn.running(str(tmp_path / "x.lock"))
    with pytest.raises(OSError):
        spawn.lock(str(tmp_path / "x.lock"))


def test_the_launcher_starts_the_helper_with_the_same_argv_and_files(tmp_path: Path) -> None:
    """hooks/run, the one exception (it cannot import Python), starts what :func:`doorbell.command` starts and
    reads the files the helper writes."""
    script = (REPO / "hooks" / "run").read_text()
    assert re.search(r'"\$py" -I -S "\$here/agentmsg_hook\.py" "\$1" helper "\$root" "\$2:\$3"', script)
    hook = REPO / "hooks" / "agentmsg_hook.py"
    argv = doorbell.command(str(tmp_path), "claude-code:s", {"python": sys.executable, "hook": str(hook),
                                                             "host": "claude"})
    assert argv == [sys.executable, "-I", "-S", str(hook), "claude", "helper", str(tmp_path), "claude-code:s"]
    from agentmsg.backends.file import layout

    # The helper's pid file, by the names layout.py gives the launcher (scripts/gen_layout.py).
    assert '"$root/$L_IDLE/$L_HELPER_PID"' in script
    assert f"\nL_IDLE={layout.IDLE}\n" in script and f"\nL_HELPER_PID={ahead.PID}\n" in script


def test_status_says_what_runs_in_the_background_since_when_and_why(tmp_path: Path) -> None:
    """``agentmsg status`` names the resident helper: running or not, since when, its pid, and its duties."""
    from tests.support.cli_helpers import run, run_json

    root = tmp_path / "state"
    (root / "idle").mkdir(parents=True, mode=0o700)
    root.chmod(0o700)
    (root / "wake").mkdir(mode=0o700)
    code, doc, _err = run_json("status", root=root)
    assert code == 0
    assert doc["result"]["processes"] == []  # nothing ever ran here
    from agentmsg.runtime import retries

    retries.request(str(root), "c1", "bob", "")
    code, doc, _err = run_json("status", root=root)
    assert doc["result"]["processes"] == [{"process": "helper", "running": False, "duties": [], "waiting": 1,
                                           "line": "helper: not running (1 deferred ring(s) waiting)"}]
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(root / "idle" / "helper.lock")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        (root / "idle" / "helper.pid").write_text(f"{holder.pid}\nrender retry\n")
        code, doc, _err = run_json("status", root=root)
        helper = next(p for p in doc["result"]["processes"] if p["process"] == "helper")
        assert helper["running"] is True and helper["duties"] == ["render", "retry"]
        assert re.fullmatch(rf"helper: running since \S+Z \(pid {holder.pid}\): renders each session's next "
                            r"prompt delivery ahead; rings deferred wake-ups again \(each at most 5 min\); "
                            r"exits when idle \(1 deferred ring\(s\) waiting\)", helper["line"])
        code, out, _err = run("status", root=root)
        assert code == 0 and f"(pid {holder.pid}): renders" in out
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=20)
