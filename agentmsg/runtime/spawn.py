"""The one module that starts agentmsg's background processes, and the one "is it running?" probe.

What agentmsg may run in the background on this machine, each under one lock file it holds while it runs
(``flock``; never deleted), each exiting once its work is done:

* **the resident helper** (:mod:`agentmsg.resident.helper`), one per state root, which renders deliveries
  ahead, rings deferred wake-ups again and, on a replica root, mirrors the remote store; lock
  ``ROOT/idle/helper.lock``, pid and duties in ``ROOT/idle/helper.pid``.  Started from a session's facts
  (``PYTHON -I -S hooks/agentmsg_hook.py HOST helper ROOT PIN``, by :mod:`agentmsg.runtime.doorbell`), for a
  deferred ring (``PYTHON -m agentmsg.resident.helper ROOT``), or as the mirror (``agentmsg sync --root ROOT``).
* **the CLI's environment build** (:func:`prepare_cli`), once per machine:
  ``/bin/sh bin/agentmsg --prepare-env`` (``bin/agentmsg`` keeps its own ``venv.lock``).
* **the real MCP server behind the MCP front** (:func:`start_piped`): ``bin/agentmsg mcp`` answers
  ``initialize`` from a stdlib relay (:mod:`agentmsg.mcp.front`) that starts the SDK server as its child, on
  pipes, and ends with it (not in the background: no lock).
* **a command the helper runs for the thin client** (:func:`fork_child`): the helper that serves the command
  line (:mod:`agentmsg.cli.serve`) forks one child per request (ahead of it: a spare waits for the next one), in
  the helper's process group and session, which runs the command on the client's descriptors and exits (no
  lock: it is the helper's child, not a resident).
* **Claude Code's wake-up waiter** (:mod:`agentmsg.hooks.waiter`): Claude Code itself starts it (an
  ``asyncRewake`` hook), not this module; it takes its lock (``ROOT/wake/<session>.lock``) with
  :func:`lock` and senders probe it with :func:`running`, like the others.

:func:`spawn_detached` is the only place Python code starts one of them; :func:`running` the only probe;
:func:`lock` the only way one takes its lock; :func:`describe` says it in one line.

**The one exception**: the shell launcher ``hooks/run`` cannot import Python.  After printing a delivery
rendered ahead it starts the helper itself when none runs, with the same argv (``"$py" -I -S
"$here/agentmsg_hook.py" HOST helper ROOT PIN``, output discarded, in the background; the helper calls
``setsid`` itself), and its own probe reads the same files: ``idle/helper.pid``, the pid's ``/proc`` command
line and ``kill -0`` (a shell cannot ``flock``).

Lean: the hooks import it (``os`` only at import; ``fcntl`` to probe or lock, nothing else to spawn).
"""

from __future__ import annotations

import os

from agentmsg.fsio import held

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Mapping, Sequence

#: ``sh`` runs the command in the background and prints its pid: the process is a grandchild of the caller,
#: reparented at once, so a long-lived caller (the MCP server, a watch) never collects zombies.
_DETACH = '"$@" </dev/null >/dev/null 2>&1 & echo "$!"'
_DETACH_IN = 'cd "$1" || exit 1; shift; ' + _DETACH


def spawn_detached(argv: Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None) -> int | None:
    """Start ``argv`` in the background, detached: its own session, stdin/stdout/stderr on ``/dev/null``, no
    descriptor of the caller's, the signals Python ignores (SIGPIPE, SIGXFSZ) back to their defaults, ``env``
    (default: this process's environment), ``cwd`` (default: this one's).  Its pid, or None when it could not
    be started; never raises ``OSError`` and never waits for it."""
    if not argv or ("/" in argv[0] and not os.access(argv[0], os.X_OK)):
        return None
    script, extra = (_DETACH_IN, [cwd]) if cwd is not None else (_DETACH, [])
    sh_argv = ["sh", "-c", script, "sh", *extra, *argv]
    environ = dict(os.environ if env is None else env)
    try:
        read, write = os.pipe()
    except OSError:
        return None
    try:
        try:
            child = _spawn_sh(sh_argv, environ, write)
        finally:
            os.close(write)
    except OSError:
        os.close(read)
        return None
    out = b""
    try:
        while chunk := os.read(read, 64):  # sh prints the pid and exits at once
            out += chunk
    except OSError:
        out = b""
    finally:
        os.close(read)
    try:
        _, status = os.waitpid(child, 0)
    except ChildProcessError:  # reaped already (a SIGCHLD handler of the caller's)
        status = 0
    except OSError:
        return None
    text = out.strip()
    return int(text) if status == 0 and text.isdigit() else None


def _spawn_sh(sh_argv: list[str], environ: dict[str, str], stdout: int) -> int:
    """``/bin/sh`` in a new session, stdout on ``stdout`` (the pid comes back there), stdin and stderr on
    ``/dev/null``, every other inheritable descriptor closed (as ``subprocess``'s ``close_fds`` does).

    ``posix_spawn``, not ``subprocess``: importing ``subprocess`` costs a hook 20 ms and more."""
    if not hasattr(os, "posix_spawn"):
        return _popen_sh(sh_argv, environ, stdout)
    actions: list[tuple[int | str, ...]] = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, stdout, 1),
        (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
    ]
    actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable_fds() if fd > 2 and fd != stdout]
    try:
        sig = __import__("_signal")  # signal's C half (``import signal`` loads enum: 10 ms); it has no stub
        defaults = [sig.SIGPIPE, sig.SIGXFSZ]
    except (ImportError, AttributeError):
        defaults = []
    try:
        return os.posix_spawn("/bin/sh", sh_argv, environ, file_actions=actions, setsigdef=defaults, setsid=True)
    except NotImplementedError:  # no POSIX_SPAWN_SETSID here: subprocess does the same
        return _popen_sh(sh_argv, environ, stdout)


def _popen_sh(sh_argv: list[str], environ: dict[str, str], stdout: int) -> int:
    import subprocess

    return subprocess.Popen(["/bin/sh", *sh_argv[1:]], stdin=subprocess.DEVNULL, stdout=stdout,
                            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True, env=environ).pid


def _inheritable_fds() -> list[int]:
    """This process's descriptors that a new program would inherit (most are close-on-exec already)."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        found = []
        for name in names:
            try:
                if name.isdigit() and os.get_inheritable(int(name)):
                    found.append(int(name))
            except OSError:
                pass  # the listing's own descriptor, closed by now
        return found
    return []


def start_piped(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` as a child whose stdin and stdout are pipes to the caller (stderr is the caller's), in the
    caller's session: the MCP front (:mod:`agentmsg.mcp.front`) relays to the real server this way, and the
    child ends with it.  Raises ``OSError`` when it cannot be started."""
    import subprocess

    return subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True,
                            env=dict(os.environ if env is None else env))


def fork_child(body: Callable[[], object]) -> int:
    """Fork a child that runs ``body`` and then exits (``os._exit``: never back into the caller's loop); the
    child's pid in the parent.  The resident helper runs each thin client's command this way
    (:mod:`agentmsg.cli.serve`), from its already imported state.  Raises ``OSError`` when it cannot fork.

    The parent's objects are frozen for the collector first: a child's collection would otherwise touch, and so
    copy, every page the parent holds."""
    import gc

    gc.freeze()
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        body()
    except BaseException:  # the body reports its own outcome; whatever escapes it ends the child
        code = 1
    os._exit(code)


def detach() -> None:
    """A process the shell launcher started in the background (the helper) leaves the hook's process group
    and session, which the host may end at once: the same detachment :func:`spawn_detached` gives."""
    try:
        os.setsid()
    except OSError:
        pass


#: Whether a process holds a lock file: the one probe, kept in :mod:`agentmsg.fsio` so that a host's ring (below
#: this layer) probes its waiter the same way.
running = held


def lock(lock_path: str, *, wait: float = 0.0, poll: float = 0.02,
         stop: Callable[[], bool] | None = None) -> int | None:
    """Take ``lock_path`` (created ``0600``, never followed through a link) for as long as this process keeps
    the returned descriptor open.  While another process holds it, try again every ``poll`` seconds for up to
    ``wait`` seconds, giving up early once ``stop()`` says so; None then.  Opening it may raise ``OSError``."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    import fcntl
    import time

    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError:
            if time.monotonic() >= deadline or (stop is not None and stop()):
                os.close(fd)
                return None
            time.sleep(poll)


def describe(what: str, lock_path: str, pid_path: str | None = None, why: str = "") -> str:
    """One status line: ``helper: running since 2026-01-02T03:04:05Z (pid 123): <why>`` or ``...: not
    running``.  Since when and the pid come from ``pid_path`` (its mtime: written when the process started)."""
    if not running(lock_path):
        return f"{what}: not running"
    line = f"{what}: running"
    if pid_path is not None:
        try:
            st = os.stat(pid_path)
            with open(pid_path, "rb") as fh:
                pid = fh.read(32).split(b"\n", 1)[0].strip().decode("ascii", "replace")
        except OSError:
            pass
        else:
            import time

            line += time.strftime(" since %Y-%m-%dT%H:%M:%SZ", time.gmtime(st.st_mtime))
            if pid.isdigit():
                line += f" (pid {pid})"
    return f"{line}: {why}" if why else line


def prepare_cli(env: Mapping[str, str], package_dir: str | None = None) -> bool:
    """At SessionStart: if this machine has no launcher folder yet (``${XDG_DATA_HOME:-~/.local/share}/agentmsg``),
    start ``bin/agentmsg --prepare-env`` detached, in the background, output discarded.  It builds the CLI's
    private environment when python3 lacks the CLI's dependencies (about 15 s of pip), so the model's first
    ``agentmsg`` command does not wait for it.  Never blocks and never fails the hook; True if started."""
    if env.get("AGENTMSG_NO_PREPARE"):
        return False
    base = env.get("XDG_DATA_HOME") or os.path.join(env.get("HOME") or "/nonexistent", ".local", "share")
    if os.path.exists(os.path.join(base, "agentmsg")):
        return False
    from agentmsg import PACKAGE_DIR
    from agentmsg.hosts.base import launcher

    found = launcher(package_dir or os.path.abspath(PACKAGE_DIR))
    if found is None:
        return False
    return spawn_detached(["/bin/sh", found, "--prepare-env"], env=env) is not None


# ---- sessions agentmsg spawns (``agentmsg spawn``, ``resume``; docs/LIFECYCLE.md) --------------------------------

#: A spawned session's one-time ticket and the collaboration it admits to, in its environment (hooks/ticket.py).
TICKET_VAR, TICKET_COLLAB_VAR = "AGENTMSG_TICKET", "AGENTMSG_TICKET_COLLAB"
#: The window format spawn reads back: session, window, pane and the pane's first process.
_WINDOW = "#{session_name}:#{window_index} #{window_id} #{pane_id} #{pane_pid}"
#: A headless session's terminal size (no client ever attaches unless a person does).
_HEADLESS_SIZE = ("200", "50")
_SOCKET_MAX = 100  # sun_path holds 108 bytes


def headless_socket(root: str) -> str:
    """agentmsg's own tmux server for headless sessions: ``ROOT/spawn/tmux.sock``, or, when that path is too long
    for a unix socket, a folder of this user's under the temp dir named by the root's hash."""
    from agentmsg import fsio, records
    from agentmsg.backends.file import layout

    path = os.path.join(root, layout.SPAWN, layout.SPAWN_TMUX)
    if len(path.encode()) <= _SOCKET_MAX:
        fsio.ensure_dir(root, layout.SPAWN)
        return path
    base = os.path.join(os.environ.get("TMUX_TMPDIR") or "/tmp", f"agentmsg-{os.getuid()}")
    fsio.ensure_dir(base)
    return os.path.join(base, records.sha256_hex(root.encode())[:16] + ".sock")


def user_tmux(env: Mapping[str, str]) -> tuple[str, str] | None:
    """``(socket, pane)`` of the tmux the caller runs in (``$TMUX``, ``$TMUX_PANE``), or None outside tmux."""
    raw, pane = env.get("TMUX", ""), env.get("TMUX_PANE", "")
    socket = raw.split(",", 1)[0]
    if not socket.startswith("/") or not pane.startswith("%"):
        return None
    return socket, pane


def start_session(root: str, argv: Sequence[str], env: Mapping[str, str], *, cwd: str, where: str, name: str,
                  caller_env: Mapping[str, str]) -> dict[str, object]:
    """Start ``argv`` as a long-lived interactive session in a new tmux window, with exactly ``env``.

    ``where``: ``tmux``, a new window in the caller's own tmux session (``$TMUX``); ``headless``, a new session
    of agentmsg's own detached tmux server (:func:`headless_socket`).  The window's first program is
    ``runtime/execenv.py``, which reads the environment from a 0600 file (removed as it starts) and becomes
    the host.  Returns where it runs: socket, session, window, pane, pid and start time of its first process.
    SpawnFailed when tmux could not start it (nothing is left behind)."""
    import sys

    from agentmsg import fsio, records
    from agentmsg.backends.file import layout
    from agentmsg.errors import SpawnFailed
    from agentmsg.runtime import spawned
    from agentmsg.runtime.procs import proc_stat

    if where == "tmux":
        found = user_tmux(caller_env)
        if found is None:
            raise SpawnFailed("--where tmux opens a window in the tmux you run in, and $TMUX is not set: run it "
                              "inside tmux, or use --where headless")
        socket, here = found
        session = spawned.tmux(socket, "display-message", "-p", "-t", here, "#{session_id}").strip()
        create = ["new-window", "-d", "-P", "-F", _WINDOW, "-t", f"{session}:", "-n", name, "-c", cwd]
    else:
        socket = headless_socket(root)
        create = ["-f", "/dev/null", "new-session", "-d", "-P", "-F", _WINDOW, "-s", name, "-x", _HEADLESS_SIZE[0],
                  "-y", _HEADLESS_SIZE[1], "-c", cwd]
    fsio.ensure_dir(root, layout.SPAWN)
    env_file = os.path.join(root, layout.SPAWN, records.uuid4() + layout.SPAWN_ENV)
    fsio.atomic_write(env_file, records.dumps({"argv": list(argv), "env": dict(env), "cwd": cwd}).encode(),
                      durable=False)
    shim = os.path.join(os.path.dirname(os.path.abspath(__file__)), "execenv.py")
    try:
        out = spawned.tmux(socket, *create, "--", sys.executable, "-I", "-S", shim, env_file).split()
    except SpawnFailed:
        if os.path.lexists(env_file):
            os.unlink(env_file)
        raise
    if len(out) != 4 or not out[3].isdigit():
        raise SpawnFailed(f"tmux did not say where the new window is: {' '.join(out)[:200]}")
    target, window, pane, pid = out[0], out[1], out[2], int(out[3])
    stat = proc_stat(pid)
    place: dict[str, object] = {"where": where, "socket": socket, "target_window": target, "window": window,
                                "pane": pane,
                                "pid": pid, "pid_start": stat[2] if stat else None, "cwd": cwd}
    try:
        spawned.keep_dead(socket, window, True)
    except SpawnFailed:
        pass  # it exited already: spawn's wait reads the pane
    return place
