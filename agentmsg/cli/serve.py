"""The resident helper's ``cli`` duty: run ``agentmsg`` commands for the thin client (:mod:`agentmsg.cli.thin`).

``python -m agentmsg.cli.serve ROOT`` is the root's resident helper (:mod:`agentmsg.resident.helper`: it renders
ahead and rings deferred wake-ups as well) started by the CLI with its own interpreter, the one with the package's
dependencies (typer, rich, ...), which it imports once.  It listens on ``ROOT/idle/helper.sock`` (0600, in the
0700 root) while it holds the root.  Each connection from this user (peer credentials) gets a child of its own
(:func:`agentmsg.runtime.spawn.fork_child`; forked ahead, a spare waiting for the next connection on a socket
pair, so that a command does not wait for the fork), which puts the client's descriptors on 0, 1 and 2, takes
its working folder, environment, stream encodings and pid (for the ancestry checks), runs the same typer application
(:func:`agentmsg.cli.main.main`) and reports the exit code.  The forked child starts from the helper's imported
state, so a command skips interpreter start and imports.

How it coexists with the helper a hook starts (the hook's stdlib interpreter, which cannot run the CLI):
:func:`agentmsg.cli.thin.ensure`, called after a command ran in-process, starts this one through
:func:`agentmsg.runtime.spawn.spawn_detached`, and it takes the root over (doorbell line ``-``) from a running
helper that lacks the duty or serves another version (never from a newer one, never from a mirror).  The hooks
then ring it like any helper, and when it has gone idle they start their own again.  Never on a mirrored root:
there the mirror (``agentmsg sync``) is the helper, and commands run in-process.
"""

from __future__ import annotations

import os
import sys

from agentmsg.backends.file import ahead, layout
from agentmsg.cli import thin
from agentmsg.runtime import doorbell

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from collections.abc import Callable, Sequence

    from agentmsg.resident.helper import Helper

#: Request size bound (argv holds a message body: at most 1 MB of it, and the environment).
REQUEST_MAX = 8 << 20
#: How long a child waits for the rest of a request.
REQUEST_WAIT = 10.0


# ---- running it -----------------------------------------------------------------------------------------


def main(argv: Sequence[str]) -> int:
    """``python -m agentmsg.cli.serve ROOT``: the helper with the ``cli`` duty; always 0."""
    if not argv or not argv[0].startswith("/"):
        return 0
    root = os.path.realpath(argv[0])
    mine = thin.tag()
    if not os.path.isdir(root) or doorbell.is_replica(root):
        return 0
    start, leave = thin.should_start(root, mine)
    if not start:
        return 0
    _preload()
    from agentmsg.resident import helper

    duties = (doorbell.RENDER, doorbell.RETRY, doorbell.CLI)
    return helper.main([root], duties=duties, extra=lambda h: Server(h, mine), leave=leave, tag=mine)


#: Imported once by the helper so that no command pays for them (each child starts with them).
PRELOAD = ("agentmsg.domain", "agentmsg.text", "agentmsg.backends", "agentmsg.backends.file", "agentmsg.service",
           "agentmsg.runtime", "agentmsg.hosts", "agentmsg.cli")
#: Not imported ahead: this module's own entry, programs of their own, the optional drivers.
NOT_PRELOADED = ("agentmsg.cli.__main__", "agentmsg.cli.serve")


def _preload() -> None:
    """What commands import, imported once here, and the command line built once: each child starts with it."""
    import array  # noqa: F401
    import importlib
    import io  # noqa: F401
    import locale  # noqa: F401
    import pkgutil

    for package in PRELOAD:
        found = importlib.import_module(package)
        for info in pkgutil.iter_modules(found.__path__, package + "."):
            if info.name not in NOT_PRELOADED and not info.ispkg:
                try:
                    importlib.import_module(info.name)
                except Exception:  # an optional dependency that is not installed: the command says so itself
                    pass
    from agentmsg.cli import app

    app.build_all()  # each command's click object, and typer's and click's own lazy imports
    _warm()


def _warm() -> None:
    """Run commands that touch no state root, output discarded: the tables and caches every command's output
    builds on first use (the escape table, click's help and option lookups) are then built here."""
    warm_up()
    _compile_patterns()
    from agentmsg.text import boundary, escape

    escape.escape("\0")  # the escape tables, which printable ASCII output (the warm-up's) never builds
    boundary.one_line("\0")


def warm_up(stop: Callable[[], bool] | None = None) -> None:
    """The commands of :func:`_warm`; ``stop``: asked before each, True ends the warm-up.

    The spare child runs them too while it waits: a command's first writes to the objects it shares with the
    helper copy their pages (a forked command took about 800 page faults, 1 to 2 ms), and these commands write
    to most of the ones every command touches, off the command's path."""
    import contextlib
    import io

    from agentmsg.cli.main import main

    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        for args in (["template", "list"], ["send", "--help"], ["inbox", "--no-such-option"]):
            if stop is not None and stop():
                return
            try:
                main(args)
            except BaseException:  # only ever a head start
                pass


def _compile_patterns() -> None:
    """Every pattern the package compiles on first use (``text.gate.Lazy``: the secret scanner's, which a send
    runs), compiled here: a child would compile each again (a send's gate pattern alone: about 3 ms)."""
    import gc

    from agentmsg.text.gate import Lazy

    for obj in gc.get_objects():
        if isinstance(obj, Lazy):
            try:
                obj.pattern  # noqa: B018 (compiles and keeps it)
            except Exception:  # a pattern that does not compile fails where it is used, as it would have
                pass


def fingerprint(top: str) -> tuple[tuple[str, int, int], ...]:
    """The code on disk under ``top`` (the package): every module's path, size and modification time."""
    found: list[tuple[str, int, int]] = []
    for folder in folders(top):
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(".py") and not entry.is_dir(follow_symlinks=False):
                    st = entry.stat()
                    found.append((entry.path, st.st_size, st.st_mtime_ns))
    return tuple(sorted(found))


def folders(top: str) -> list[str]:
    """``top`` and every folder below it but ``__pycache__``."""
    out, stack = [], [top]
    while stack:
        folder = stack.pop()
        out.append(folder)
        with os.scandir(folder) as entries:
            stack += [e.path for e in entries if e.is_dir(follow_symlinks=False) and e.name != "__pycache__"]
    return out


class CodeWatch:
    """Whether the package's code on disk is still what this helper imported, asked before every command.

    :func:`fingerprint` answers it with a stat of every module (about 1 ms); with ``inotify`` (Linux, through
    ``ctypes``: the helper imports it once) it is asked only after the kernel reported a change in one of the
    package's folders, and otherwise costs one read that finds nothing.  Watches are placed before the
    fingerprint is taken, so no change between the two is missed; any event (a folder created, the queue
    overflowed) takes the fingerprint again and watches every folder anew."""

    #: IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE, IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE, IN_DELETE_SELF,
    #: IN_MOVE_SELF
    MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800

    def __init__(self, top: str) -> None:
        self.top = top
        self.fd: int | None = None
        self.libc: object = None
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd >= 0:
                self.fd, self.libc = fd, libc
        except (ImportError, OSError, AttributeError):  # no ctypes, no inotify: a fingerprint every time
            pass
        self.watch()
        self.code = fingerprint(top)

    def watch(self) -> None:
        if self.fd is None:
            return
        for folder in folders(self.top):
            if self.libc.inotify_add_watch(self.fd, os.fsencode(folder), self.MASK) < 0:  # type: ignore[attr-defined]
                self.close()  # a watch limit reached: a fingerprint every time
                return

    def unchanged(self) -> bool:
        if self.fd is not None:
            if not self._events():
                return True  # nothing happened to the code since the last look
            self.watch()  # a folder made since is watched too
        return fingerprint(self.top) == self.code

    def _events(self) -> bool:
        """Whether the kernel reported anything since the last look (all of it read); True when it cannot say."""
        seen = False
        while self.fd is not None:
            try:
                if not os.read(self.fd, 1 << 16):
                    break
            except BlockingIOError:
                break
            except OSError:
                self.close()  # a fingerprint every time from here
                return True
            seen = True
        return seen

    def close(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None


# ---- serving --------------------------------------------------------------------------------------------


class Server:
    """The socket, and one child per command (:class:`agentmsg.resident.helper.Extra`)."""

    def __init__(self, helper: Helper, tag: str) -> None:
        self.helper, self.tag = helper, tag
        self.path = ahead.root_file(helper.root, layout.HELPER_SOCK)
        self.sock: socket.socket | None = None
        self.bound: tuple[int, int] | None = None  # (device, inode) of the socket file this helper made
        self.children: set[int] = set()
        self.spare: tuple[int, socket.socket] | None = None  # a child forked ahead, waiting for the next command
        from agentmsg import PACKAGE_DIR

        self.code = CodeWatch(PACKAGE_DIR)

    def open(self) -> None:
        import socket
        import stat

        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            st = None
        if st is not None:
            os.unlink(self.path)  # a socket left by a helper that died (this one holds the root now), or planted
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            thin.at_socket(sock.bind, os.path.dirname(self.path), os.path.basename(self.path))
        except OSError:
            sock.close()
            return  # no socket: commands run in-process; the other duties go on
        finally:
            os.umask(old)
        st = os.lstat(self.path)
        if not stat.S_ISSOCK(st.st_mode):
            sock.close()
            return
        self.bound = (st.st_dev, st.st_ino)
        sock.listen(64)
        sock.setblocking(False)
        self.sock = sock
        self.fork_spare()

    def fds(self) -> list[int]:
        return [self.sock.fileno()] if self.sock is not None else []

    def ready(self, fd: int) -> None:
        while self.sock is not None:
            try:
                conn, _addr = self.sock.accept()
            except OSError:  # BlockingIOError: nobody else waits
                return
            try:
                self.start(conn)
            except Exception as exc:
                self.helper.log(exc)
            finally:
                conn.close()  # before the next fork: no child but the one that serves it holds it

    def start(self, conn: socket.socket) -> None:
        """A child for this connection, if it comes from this user and this helper's code is still on disk."""
        from agentmsg.runtime import spawn

        conn.setblocking(True)
        pid, uid, _gid = thin.peer(conn)
        if uid != os.getuid() or pid <= 0:
            return  # closed: the client runs the command in-process
        if not self.code.unchanged():  # the code changed under this helper: refuse, and leave
            conn.sendall(thin.VERSION + b"\n")
            ahead.ring(self.helper.root, [doorbell.LEAVE])
            return
        if not self.hand_over(conn, pid):
            self.children.add(spawn.fork_child(lambda: self.child(conn, pid)))

    def fork_spare(self) -> None:
        """Fork the child for the next command now, off its path: it waits on a socket pair for the connection."""
        import socket

        from agentmsg.runtime import spawn

        if self.spare is not None or self.sock is None:
            return
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid = spawn.fork_child(lambda: self.wait(theirs, mine))
        except OSError:
            mine.close()
            return
        finally:
            theirs.close()
        self.spare = (pid, mine)

    def hand_over(self, conn: socket.socket, client: int) -> bool:
        """Give the connection to the spare child; False when there is none or it is gone."""
        import socket

        if self.spare is None:
            return False
        pid, pipe = self.spare
        self.spare = None
        try:
            socket.send_fds(pipe, [str(client).encode()], [conn.fileno()])
            handed = True
        except OSError:
            handed = False
        pipe.close()
        self.children.add(pid)  # reaped once it ends, whether it runs the command or found the pipe closed
        return handed

    def wait(self, pipe: socket.socket, other: socket.socket) -> None:
        """In the spare child: wait for a connection (the helper closes the pipe instead when it stops)."""
        import socket

        other.close()
        self.detach()
        import select

        warm_up(lambda: bool(select.select([pipe], [], [], 0)[0]))  # until a connection comes
        try:
            data, fds, _flags, _addr = socket.recv_fds(pipe, 64, 1)
        except OSError:
            return
        pipe.close()
        if len(fds) != 1 or not data.isdigit():
            return
        self.serve(socket.socket(fileno=fds[0]), int(data))

    def busy(self) -> bool:
        for pid in list(self.children):
            try:
                done, _status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                self.children.discard(pid)
        if not self.children:
            self.fork_spare()  # the child for the next command, once this one's has ended: off its path
        return bool(self.children)

    def close(self) -> None:
        if self.spare is not None:  # it reads the end of its pipe and exits
            pid, pipe = self.spare
            pipe.close()
            self.children.add(pid)
            self.spare = None
        if self.sock is None:
            return
        try:
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self.bound:
                os.unlink(self.path)
        except OSError:
            pass
        self.sock.close()
        self.sock = None

    # ---- the child ------------------------------------------------------------------------------------

    def child(self, conn: socket.socket, client: int) -> None:
        """In a child forked for this connection."""
        self.detach()
        self.serve(conn, client)

    def detach(self) -> None:
        """In a forked child, once: let go of what makes the parent the root's helper; a command's signals."""
        for fd in self.helper.own_fds():
            try:
                os.close(fd)
            except OSError:
                pass
        if self.sock is not None:
            self.sock.close()
        if self.spare is not None:
            self.spare[1].close()
        self.code.close()
        _signals()

    def serve(self, conn: socket.socket, client: int) -> None:
        """Become the client's command, run it, report its exit code."""
        try:
            fds, fields = receive(conn)
        except (OSError, ValueError):
            return
        try:
            if len(fields) < 12 or fields[0] != thin.PROTOCOL or fields[1] != self.tag or len(fds) != 3:
                conn.sendall(thin.VERSION + b"\n")
                return
            conn.sendall(thin.STARTED + str(os.getpid()).encode() + b"\n")
            args = become(fds, fields, client)
        except Exception:
            conn.sendall(thin.REFUSED + b"\n")  # nothing ran: the client runs it in-process
            return
        finally:
            for fd in fds:
                os.close(fd)
        from agentmsg.cli.main import main

        try:
            code = main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        conn.sendall(thin.EXITED + str(code).encode() + b"\n")


def _signals() -> None:
    """The child's signals as a command's: the helper's wake-up pipe and ``SIGURG`` handler gone."""
    import signal

    try:
        signal.set_wakeup_fd(-1)
    except (ValueError, OSError):
        pass
    signal.signal(signal.SIGURG, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def receive(conn: socket.socket) -> tuple[list[int], list[str]]:
    """The client's descriptors and request fields (:func:`agentmsg.cli.thin.request`)."""
    import array
    import socket

    conn.settimeout(REQUEST_WAIT)
    ints = array.array("i")
    data, ancillary, _flags, _addr = conn.recvmsg(65536, socket.CMSG_SPACE(3 * ints.itemsize))
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            got = array.array("i")
            got.frombytes(payload[: len(payload) - len(payload) % ints.itemsize])
            fds += list(got)
    try:
        if len(data) < 4:
            raise ValueError("short request")
        size = int.from_bytes(data[:4], "big")
        if size > REQUEST_MAX:
            raise ValueError("request too large")
        body = bytearray(data[4:])
        while len(body) < size:
            chunk = conn.recv(min(1 << 20, size - len(body)))
            if not chunk:
                raise ValueError("short request")
            body += chunk
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return fds, [os.fsdecode(f) for f in bytes(body).split(b"\0")]


def become(fds: Sequence[int], fields: Sequence[str], client: int) -> list[str]:
    """Take on the client's descriptors, folder, environment, streams and pid; the command's arguments."""
    import io
    import time

    from agentmsg.runtime import procs

    _protocol, _tag, cwd, argv0, executable = fields[:5]
    encodings = fields[5:11]
    count = int(fields[11])
    args = list(fields[12:12 + count])
    env = dict(item.split("=", 1) for item in fields[12 + count:] if "=" in item)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)  # inheritable, as a command's 0, 1 and 2 are
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    time.tzset()
    try:
        import locale

        locale.setlocale(locale.LC_CTYPE, "")
    except Exception:  # an unknown locale: the interpreter would fall back to C too
        pass
    tty = os.isatty(1)
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding=encodings[0],
                                 errors=encodings[1], newline="\n")
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding=encodings[2],
                                  errors=encodings[3], newline="\n", line_buffering=tty)
    sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding=encodings[4],
                                  errors="backslashreplace", newline="\n", line_buffering=True)
    for name in ("stdin", "stdout", "stderr"):
        setattr(sys, f"__{name}__", getattr(sys, name))
    sys.argv = [argv0, *args]
    sys.executable = executable
    procs.caller = client
    return args


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
