"""The thin client: an ``agentmsg`` command run by the state root's resident helper (docs/ARCHITECTURE.md).

A command costs about 150 ms as a process of its own, nearly all of it interpreter start and imports (typer,
rich, the package).  When the root's helper serves the command line (its ``cli`` duty,
:mod:`agentmsg.cli.serve`), this client connects to ``ROOT/idle/helper.sock`` and hands it the command:

* its descriptors 0, 1 and 2 (``SCM_RIGHTS``): the helper's child for this request puts them on its own 0, 1
  and 2, so a terminal, a pipe, stdin read to the end, the terminal's size and whether stdout is a tty are
  exactly the client's;
* argv, the working folder, the whole environment, the streams' encodings and ``sys.argv[0]`` and
  ``sys.executable`` as an in-process run would have them;
* its pid, which the helper takes from the socket's peer credentials (same user only), for the checks that
  walk the command's ancestry (:mod:`agentmsg.runtime.procs`).

The helper answers ``P<pid>`` (its child runs the command: signals the client gets, ``SIGINT``, ``SIGTERM``,
``SIGHUP``, go to it), then ``X<code>`` (the exit code); ``V`` (another version: they never talk) or ``R``
(refused before it began) and the client runs the command in-process.  A helper that ends after ``P`` and
before ``X`` leaves nothing half-done (each write is atomic in the store): a ``send`` with its own ``--id``
is run again in-process (idempotent), anything else says so in one line and exits 1.

The client and the helper talk only when their tags agree (:func:`tag`): the package's version and folder
and the interpreter (its folder and version).  A helper whose code on disk changed since it started refuses
(``V``) and leaves; the in-process run then starts a new one.

Forwarding is off with ``AGENTMSG_NO_HELPER=1``, and never happens for the commands in :data:`IN_PROCESS`
(long-running, interactive, or starting and stopping processes).  Without a helper the command runs
in-process and :func:`ensure` starts one in the background for the next command.

Standard library only, and little of it (``posix``, ``sys``, ``_socket``, ``_signal`` and agentmsg's ``pathops``;
:func:`ensure`, after an in-process run, imports what it needs then): it runs before anything else, from the
console script (``agentmsg.cli.main:run``) and, under ``python -I -S``, from the plugin's launcher
(``bin/agentmsg``).  No ``os`` (with ``-S`` nothing has loaded it: it would cost the client about 0.1x the
interpreter floor) and no ``from __future__`` (a search of the standard library's folder of its own).
"""

import posix
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

#: Commands that always run in-process: long-running (``watch``, ``mcp``, ``top``, ``sync``), interactive, or
#: starting and stopping processes (``spawn``, ``kill``, ``resume``, ``fork``, the groups below, ``wake on``).
IN_PROCESS = frozenset({"watch", "mcp", "top", "sync", "spawn", "kill", "resume", "fork"})
IN_PROCESS_GROUPS = frozenset({"install", "uninstall", "run", "guard"})
IN_PROCESS_SUBCOMMANDS = frozenset({("wake", "on")})
#: ``ROOT/idle/helper.sock`` (``backends/file/layout.py`` owns the names; a test holds these to it).
IDLE, SOCK = "idle", "helper.sock"
PROTOCOL = "agentmsg-thin/1"
#: Set by the plugin's launcher path when the client already tried: the in-process run does not try again.
TRIED = "AGENTMSG_THIN_TRIED"
SUN_PATH_MAX = 100  # sun_path holds 108 bytes
#: The replies (one line each): the child's pid, the exit code, another version, refused before it began.
STARTED, EXITED, VERSION, REFUSED = b"P", b"X", b"V", b"R"


def tag() -> str:
    """What a client and a helper share to talk: the package's version and folder, the interpreter's folder and
    version (the helper runs the interpreter an in-process run of this client would)."""
    from agentmsg import PACKAGE_DIR, __version__, pathops

    return "|".join((__version__, pathops.realpath(PACKAGE_DIR), pathops.dirname(sys.executable),
                     sys.version.replace("\n", " ")))


def environ() -> "Mapping[str, str]":
    """The environment as ``os.environ`` holds it (the same object once ``os`` is loaded, as under ``site``)."""
    os = sys.modules.get("os")
    if os is not None:
        return os.environ  # type: ignore[no-any-return]
    enc = sys.getfilesystemencoding()
    return {k.decode(enc, "surrogateescape"): v.decode(enc, "surrogateescape") for k, v in posix.environ.items()}


def fsencode(text: str) -> bytes:
    return text.encode(sys.getfilesystemencoding(), "surrogateescape")


def forwardable(args: "Sequence[str]") -> bool:
    """Whether the helper may run this command (not one of :data:`IN_PROCESS`)."""
    words = list(_without_store(args))
    if not words or words[0].startswith("-"):
        return True  # help, --version: the full tree's answers
    if words[0] in IN_PROCESS or words[0] in IN_PROCESS_GROUPS:
        return False
    return (words[0], words[1] if len(words) > 1 else "") not in IN_PROCESS_SUBCOMMANDS


def _without_store(args: "Sequence[str]") -> "Sequence[str]":
    """``args`` without the global ``--store URL`` in front (``cli.main`` takes it anywhere; enough here)."""
    out = list(args)
    while out and (out[0] == "--store" or out[0].startswith("--store=")):
        out = out[2:] if out[0] == "--store" else out[1:]
    return out


def root_of(args: "Sequence[str]", env: "Mapping[str, str]") -> "str | None":
    """The state root the command names (its last ``--root``, else the environment's), or None when there is
    none (the in-process run says why)."""
    flag = None
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--root" and i + 1 < len(args):
            flag = args[i + 1]
        elif arg.startswith("--root="):
            flag = arg[len("--root="):]
    from agentmsg.paths import resolve_root_str

    try:
        return resolve_root_str(flag, env)[0]
    except Exception:
        return None


def idempotent(args: "Sequence[str]") -> bool:
    """A command that may run again after a helper died mid-way: a ``send`` with its own ``--id`` whose body is
    not read from stdin (that was read already)."""
    words = list(_without_store(args))
    return bool(words) and words[0] == "send" and "--body-stdin" not in words \
        and any(a == "--id" or a.startswith("--id=") for a in words)


# ---- talking to the helper -----------------------------------------------------------------------------


def connect(root: str) -> object:
    """A connected socket to ``ROOT/idle/helper.sock`` whose peer is this user; ``OSError`` otherwise."""
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        at_socket(sock.connect, root.rstrip("/") + "/" + IDLE, SOCK)
        if peer(sock)[1] != posix.getuid():
            raise PermissionError("the helper's socket belongs to another user")
    except BaseException:
        sock.close()
        raise
    return sock


def at_socket(call: "Callable[[str], object]", folder: str, name: str) -> None:
    """``call(FOLDER/NAME)`` (a socket's ``connect`` or ``bind``); a path too long for ``sun_path`` goes through
    the folder's descriptor (``/proc/self/fd/N/NAME``)."""
    path = folder + "/" + name
    if len(fsencode(path)) <= SUN_PATH_MAX:
        call(path)
        return
    fd = posix.open(folder, posix.O_RDONLY | posix.O_DIRECTORY | posix.O_CLOEXEC)
    try:
        call(f"/proc/self/fd/{fd}/{name}")
    finally:
        posix.close(fd)


def peer(sock: object) -> tuple[int, int, int]:
    """``(pid, uid, gid)`` of a unix socket's other end (``SO_PEERCRED``)."""
    import _socket

    raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)  # type: ignore[attr-defined]
    order = sys.byteorder
    return (int.from_bytes(raw[0:4], order, signed=True), int.from_bytes(raw[4:8], order, signed=True),
            int.from_bytes(raw[8:12], order, signed=True))


def _streams(env: "Mapping[str, str]") -> list[str]:
    """Each stream's encoding and errors as the in-process run would set them up."""
    out = []
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        out += [getattr(stream, "encoding", None) or "utf-8", getattr(stream, "errors", None) or "strict"]
    if sys.flags.ignore_environment:  # -I: the in-process run (no -I) would honour these
        if env.get("PYTHONUTF8") == "1":
            out[0:4] = ["utf-8", "surrogateescape", "utf-8", "surrogateescape"]
            out[4] = "utf-8"
        if env.get("PYTHONIOENCODING"):
            enc, _, errors = env["PYTHONIOENCODING"].partition(":")
            for i in (0, 2, 4):
                out[i] = enc or out[i]
            for i in (1, 3):
                out[i] = errors or out[i]
    return out


def request(args: "Sequence[str]", *, argv0: str, executable: str, env: "Mapping[str, str]") -> bytes:
    """The request: a 4-byte length, then NUL-separated fields (none of them can hold a NUL)."""
    fields = [PROTOCOL, tag(), posix.getcwd(), argv0, executable, *_streams(env), str(len(args)), *args,
              *(f"{k}={v}" for k, v in env.items())]
    data = b"\0".join(fsencode(f) for f in fields)
    return len(data).to_bytes(4, "big") + data


class Forwarder:
    """One forwarded command: send it, relay signals to the child running it, read how it ended."""

    def __init__(self, sock: object) -> None:
        self.sock = sock
        self.child = 0
        self.pending: list[int] = []
        self.ending = 0  # a terminating signal forwarded (SIGTERM, SIGHUP): the client ends by it too

    def send(self, data: bytes) -> None:
        import _socket

        fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
        sent = self.sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])  # type: ignore[attr-defined]
        if sent < len(data):
            self.sock.sendall(data[sent:])  # type: ignore[attr-defined]

    def relay(self, signum: int, _frame: object) -> None:
        if signum != _signals().SIGINT:
            self.ending = signum
        if self.child:
            try:
                posix.kill(self.child, signum)
            except OSError:
                pass
        else:
            self.pending.append(signum)

    def outcome(self) -> tuple[bytes, int]:
        """``(X, code)``, ``(V, 0)`` or ``(R, 0)``; ``(P, pid)`` when the connection ended after the child began
        and before it said how it ended; ``(b"", 0)`` when it ended before."""
        buf = b""
        while True:
            chunk = self.sock.recv(256)  # type: ignore[attr-defined]
            if not chunk:
                return (STARTED, self.child) if self.child else (b"", 0)
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                kind, value = line[:1], line[1:]
                if kind == STARTED and value.isdigit():
                    self.child = int(value)
                    for signum in self.pending:
                        self.relay(signum, None)
                    self.pending = []
                elif kind == EXITED and value.lstrip(b"-").isdigit():
                    return EXITED, int(value)
                elif kind in (VERSION, REFUSED):
                    return kind, 0


def forward(args: "Sequence[str]", *, argv0: "str | None" = None, env: "Mapping[str, str] | None" = None,
            ) -> "int | None":
    """Run ``agentmsg ARGS`` in the root's helper: its exit code, or None to run it in-process (no helper, another
    version, forwarding off, a command that stays in-process, a helper that died before it began or during an
    idempotent command)."""
    env = environ() if env is None else env
    if env.get("AGENTMSG_NO_HELPER") or not forwardable(args):
        return None
    root = root_of(args, env)
    if root is None:
        return None
    try:
        sock = connect(root)
    except OSError:
        return None
    try:
        return _forward(sock, args, argv0 if argv0 is not None else sys.argv[0], env)
    finally:
        sock.close()  # type: ignore[attr-defined]


def _signals() -> "Any":
    """``signal``'s C half (``import signal`` loads ``enum``: milliseconds); it has no stub."""
    return __import__("_signal")


def _forward(sock: object, args: "Sequence[str]", argv0: str, env: "Mapping[str, str]") -> "int | None":
    _signal = _signals()
    job = Forwarder(sock)
    signals = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)
    before = {}
    try:
        for signum in signals:
            before[signum] = _signal.signal(signum, job.relay)
    except (ValueError, OSError):  # not the main thread
        pass
    try:
        try:
            job.send(request(args, argv0=argv0, executable=sys.executable, env=env))
            kind, code = job.outcome()
        except OSError:
            kind, code = (STARTED, job.child) if job.child else (b"", 0)
    finally:
        for signum, handler in before.items():
            _signal.signal(signum, handler)
    if job.ending:
        _signal.signal(job.ending, _signal.SIG_DFL)
        posix.kill(posix.getpid(), job.ending)  # ended by the signal, as the in-process run would be
    if kind == EXITED:
        return code
    if kind != STARTED or idempotent(args):
        return None
    from agentmsg.cli import output  # only here (standard library only, as the client): the CLI's one error path
    from agentmsg.errors import OutcomeUnknown

    lost = OutcomeUnknown(f"the agentmsg helper running this command (pid {code}) ended before it finished; it "
                          "may or may not have taken effect: check (agentmsg inbox --history, status), then run "
                          "it again (AGENTMSG_NO_HELPER=1 runs it in-process)")
    return output.fail(output.command_name(_without_store(args)), lost, "--json" in args)


# ---- starting the helper that serves the command line (after a command ran in-process) -----------------


def _version(tag: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in tag.split("|", 1)[0].split("."))
    except ValueError:
        return ()


def should_start(root: str, mine: str) -> tuple[bool, bool]:
    """``(start, leave)``: whether to start this helper for ``root``, and whether it asks a running one to leave."""
    from agentmsg.runtime import doorbell

    now = doorbell.helper_info(root)
    if now is None:
        return True, False
    held, theirs = now
    if doorbell.MIRROR in held or (doorbell.CLI in held and theirs == mine):
        return False, False
    if doorbell.CLI in held and _version(theirs) > _version(mine):
        return False, False  # a newer one serves: never replaced by an older one
    return True, True


def ensure(args: "Sequence[str]", env: "Mapping[str, str] | None" = None) -> bool:
    """After a command ran in-process: start the CLI's helper for its root unless one that serves this version
    runs (or forwarding is off, the command stays in-process, the root is mirrored or does not exist).  Cheap:
    two reads and a probe, and a detached start when needed.  True if started."""
    import os

    environ = os.environ if env is None else env
    if environ.get("AGENTMSG_NO_HELPER") or not forwardable(args):
        return False
    root = root_of(args, environ)
    if root is None or not os.path.isdir(root):
        return False
    from agentmsg.runtime import doorbell

    if doorbell.mirror_wanted(root, environ):
        return False
    start, _leave = should_start(root, tag())
    if not start:
        return False
    from agentmsg import PACKAGE_DIR
    from agentmsg.runtime.spawn import spawn_detached

    path = os.pathsep.join(filter(None, [os.path.dirname(PACKAGE_DIR), environ.get("PYTHONPATH")]))
    child_env = {"PATH": os.defpath, "PYTHONPATH": path}
    for name in ("AGENTMSG_AHEAD_IDLE", "LANG", "LC_ALL", "LC_CTYPE"):
        if environ.get(name):
            child_env[name] = environ[name]
    flags = ["-S"] if sys.flags.no_site else []  # its packages come from PYTHONPATH then, as this one's do
    # cwd "/": ``-m`` puts the working folder first on sys.path, where another agentmsg (a checkout) may be
    return spawn_detached([sys.executable, *flags, "-m", "agentmsg.cli.serve", root], cwd="/",
                          env=child_env) is not None


def finish(code: int) -> None:
    """End the client with ``code`` (nothing of its own to clean up: skip the interpreter's teardown)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except OSError:
            pass
    posix._exit(code & 0xFF if code >= 0 else 1)


#: The plugin launcher's client, run as ``python -I -S -c CLIENT LAUNCHER BINDIR ARGS...`` by bin/agentmsg (its
#: ``client`` is this text; tests/cli/test_thin.py holds the two to each other).  It finds the folder holding the
#: package as the launcher's ``cd "$bindir/.." && pwd -P`` would, without that subshell (about 0.1x the interpreter
#: floor): the folder above ``bin`` by its name (a relative one from the shell's ``$PWD`` when that is this
#: folder), resolved by the kernel (``/proc/self/fd``); inside a wheel (``agentmsg/_plugin``), the folder above the
#: package.  Without ``/proc`` it runs the launcher again, which then takes its own way (``AGENTMSG_LAUNCH_SLOW``).
CLIENT = """import sys,posix
b=sys.argv[2]
if b[:1]!="/":
 w=posix.getcwd()
 try:
  v=posix.environ[b"PWD"].decode(sys.getfilesystemencoding(),"surrogateescape");s=posix.stat(v);t=posix.stat(".")
  if v[:1]=="/"and(s.st_dev,s.st_ino)==(t.st_dev,t.st_ino):w=v
 except(KeyError,OSError):pass
 b=w+"/"+b
p=[]
for s in b.split("/"):
 if s=="..":p=p[:-1]
 elif s and s!=".":p.append(s)
c=""
try:
 f=posix.open("/"+"/".join(p[:-1]),posix.O_RDONLY|posix.O_DIRECTORY|posix.O_CLOEXEC)
 try:c=posix.readlink("/proc/self/fd/%d"%f)
 finally:posix.close(f)
except OSError:pass
if c.endswith("/agentmsg/_plugin"):c=c[:-17]or"/"
if c[:1]=="/":
 sys.path.insert(0,c)
 try:from agentmsg.cli.thin import launch
 except ImportError:launch=None
 if launch:launch(sys.argv[3:],c)
e=dict(posix.environ);e[b"AGENTMSG_LAUNCH_SLOW"]=b"1"
posix.execve("/bin/sh",["/bin/sh"]+sys.argv[1:2]+sys.argv[3:],e)
"""


def launch(args: "Sequence[str]", code: str) -> None:
    """The plugin launcher's client (:data:`CLIENT`; ``code``: the folder holding the package): forward, else run
    the command in-process with the same interpreter, this time with its site-packages.  Either way the command's
    environment has ``code`` first on ``PYTHONPATH``, as the launcher's other ways set it."""
    env = dict(environ())
    env["PYTHONPATH"] = code + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    result = forward(args, argv0=code.rstrip("/") + "/agentmsg/cli/__main__.py", env=env)  # as ``python -m``'s
    if result is not None:
        finish(result)
    env[TRIED] = "1"
    posix.execve(sys.executable, [sys.executable, "-m", "agentmsg.cli", *args],
                 {fsencode(k): fsencode(v) for k, v in env.items()})
