"""The renderer: each session's next prompt delivery, rendered ahead so the launcher prints it without Python.

``hooks/run <host> ahead ROOT [PIN...]`` (started by :mod:`agentmsg.runtime.doorbell`, or by the launcher right
after it printed a delivery and found no renderer running).  One per state root, under
``idle/ahead.lock``; it lives while it has work and exits after ``IDLE_EXIT`` seconds without any.

For every session with facts (``idle/<runtime>/<session>.env``, recorded by its own full hook runs) it
keeps one of these true, as the full prompt hook itself would find it:

* the idle marker names the current generation (nothing pending: the launcher exits at once), or
* ``.ready`` holds exactly what the next UserPromptSubmit hook would print for that generation and hook
  state, with ``.fold`` saying what printing it changes (``Hook.render_ahead``: the hook's own code), or
* neither (the next prompt runs the hook in full: several bindings, an active wake consent).

When the launcher has printed a delivery (``.took``), the renderer folds it into presented receipts and
the hook state (``Hook.settle_claim``), then renders the next one.  Writers ring its doorbell
(``idle/ahead.fifo``, one line per pin, written without blocking) when they change what a session would
see; the launcher, which cannot write without blocking, sends ``SIGURG`` instead (its default action is
to ignore it, so a pid reused since harms nobody), and the renderer then looks at every claim.  Every
``SWEEP`` seconds it looks at every session anyway.

Fail-open like the hooks: an error is one line in ``hooks.log`` and the session is left to the full
hook.  Everything it writes is derived (docs/DELIVERY.md, "Rendered ahead").
"""

from __future__ import annotations

import os
import select
import signal
import stat
import time

from agentmsg import __version__, fsio
from agentmsg.backends.file import ahead, layout
from agentmsg.hosts import registry
from agentmsg.runtime import spawn

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentmsg.backends.file.store import FileStore
    from agentmsg.hooks.core import Hook

IDLE_EXIT = 120.0  # seconds without a doorbell or any work: exit (the next writer starts one again)
SWEEP = 30.0  # seconds between looks at every session
RETRY = 0.05  # seconds before looking again at a claim the launcher is still printing
TAKEOVER = 2.0  # seconds a new renderer waits for the lock of one that is exiting


def main(argv: list[str]) -> int:
    """Run the renderer for ``argv[0]`` (a state root), looking first at the pins after it; always 0."""
    hook = None
    try:
        if not argv or not argv[0].startswith("/"):
            return 0
        spawn.detach()
        idle_env = os.environ.get("AGENTMSG_AHEAD_IDLE")
        os.environ.clear()  # started by the launcher, it got the host's environment: it needs none of it
        root = os.path.realpath(argv[0])
        if fsio.existing_dir(root, layout.IDLE) is None:
            return 0
        from agentmsg.backends.file.store import FileStore
        from agentmsg.hooks.core import Hook
        from agentmsg.runtime import doorbell

        hook = Hook(registry.NAMES[0], {})  # for logging only
        hook.root, hook.event = root, "ahead"
        renderer = Renderer(root, FileStore(root, lock_timeout=2.0, on_wake=doorbell.nudge), Hook)
        try:  # the tests' shorter idle exit; nothing else from the environment is used
            renderer.idle_exit = min(IDLE_EXIT, max(0.1, float(idle_env or "")))
        except ValueError:
            pass
        renderer.run([p for p in argv[1:] if ahead.base(root, p)])
    except BaseException as exc:  # fail open, whatever happened
        if hook is not None:
            hook.log(exc)
    return 0


class Renderer:
    def __init__(self, root: str, store: FileStore, hook_class: type[Hook]) -> None:
        self.root, self.store, self.hook_class = root, store, hook_class
        self.idle = os.path.join(root, layout.IDLE)
        self.later: dict[str, float] = {}  # pin -> when to look again (a claim still being printed)
        self.idle_exit = IDLE_EXIT

    def run(self, first: list[str]) -> None:
        lock = self._lock()
        if lock is None:  # another renderer runs: hand it these pins
            ahead.ring(self.root, first)
            return
        fifo = bell = None
        try:
            fifo = self._doorbell()
            bell = self._bell()  # before the pid file names this process to the launcher
            fsio.atomic_write(ahead.root_file(self.root, ahead.PID), f"{os.getpid()}\n".encode(), durable=False)
            self.loop(fifo, first, bell)
        finally:
            self._unlink_pid()
            if fifo is not None:
                os.close(fifo)  # from here a writer's open fails, and it starts a new renderer
            if bell is not None:
                signal.set_wakeup_fd(-1)
                for fd in bell:
                    os.close(fd)
            os.close(lock)

    def loop(self, fifo: int, first: list[str], bell: tuple[int, int] | None = None) -> None:
        todo = set(first) | set(ahead.sessions(self.root))
        again: set[str] = set()  # the sweep: rendered again even if current (the store may have been damaged)
        last_sweep = last_work = time.monotonic()
        while True:
            now = time.monotonic()
            todo |= {pin for pin, at in self.later.items() if at <= now}
            for pin in sorted(todo):
                self.later.pop(pin, None)
                if self.visit(pin, again=pin in again) and pin not in again:
                    last_work = now  # the sweep's own renders are upkeep: they never keep the renderer alive
            todo, again = set(), set()
            if not os.path.isdir(self.idle):
                return  # the root is gone
            wait = min([SWEEP - (now - last_sweep), self.idle_exit, *[at - now for at in self.later.values()]])
            ready, _w, _x = select.select([fifo] if bell is None else [fifo, bell[0]], [], [], max(0.0, wait))
            now = time.monotonic()
            if ready:
                todo = self._rung(fifo) | self._claims(bell)
                last_work = now
            elif not self.later and now - last_sweep >= SWEEP:
                todo = again = set(ahead.sessions(self.root))
                last_sweep = now
            if not ready and not self.later and now - last_work > self.idle_exit:
                todo = self._rung(fifo) | self._claims(bell)  # one last look: a ring may have come in just now
                if not todo:
                    return

    def visit(self, pin: str, *, again: bool = False) -> bool:
        """Settle the session's claim, then render its next prompt if what is there no longer matches (or
        ``again``: checked against the store anew).  True if there was anything to do."""
        facts = ahead.facts(self.root, pin)
        if facts is not None and facts.get("version") != __version__:
            facts = None  # recorded by another version's hook: its own renderer renders it (settled here)
        claimed = ahead.claim(self.root, pin) is not None
        if facts is None and not claimed:
            return False
        hook = self.hook_class.for_session(self.root, pin, facts or self._host_of(pin), self.store)
        try:
            if hook.settle_claim(final=False):
                self.later[pin] = time.monotonic() + RETRY
                return True
            if facts is None or (ahead.current(self.root, pin) and not again):
                return claimed  # no facts (a printed claim, settled above): nothing to render from
            hook.render_ahead()
        except Exception as exc:
            if not _reported_by_the_hook(exc):
                hook.log(exc)
        return True

    def _host_of(self, pin: str) -> dict[str, str]:
        """Facts enough to settle a claim of a session whose facts are gone: its host, from the runtime."""
        runtime = pin.partition(":")[0]
        host = registry.of_runtime(runtime)
        return {"host": host.name if host is not None and host.runs_hooks else registry.NAMES[0]}

    def _rung(self, fifo: int) -> set[str]:
        pins: set[str] = set()
        while True:
            try:
                chunk = os.read(fifo, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            for line in chunk.decode("utf-8", "replace").splitlines():
                if ahead.base(self.root, line) is not None:
                    pins.add(line)
        return pins

    def _claims(self, bell: tuple[int, int] | None) -> set[str]:
        """After the launcher's ``SIGURG`` (a byte on the wake-up pipe): every session with a claim."""
        if bell is None:
            return set()
        rung = False
        try:
            while os.read(bell[0], 512):
                rung = True
        except BlockingIOError:
            pass
        return set(ahead.sessions(self.root, (ahead.TOOK,))) if rung else set()

    def _bell(self) -> tuple[int, int] | None:
        """The launcher's ring: ``SIGURG``, which wakes ``select`` through a wake-up pipe (read end, write end).
        The launcher sends a signal because a shell cannot write to a FIFO without blocking: a full
        doorbell would hold its ring forever.  None where signals cannot be set (not the main thread)."""
        bell = os.pipe()
        for fd in bell:
            os.set_blocking(fd, False)
        try:
            signal.signal(signal.SIGURG, _ignore)
            signal.set_wakeup_fd(bell[1], warn_on_full_buffer=False)
        except (ValueError, OSError):
            for fd in bell:
                os.close(fd)
            return None
        return bell

    def _lock(self) -> int | None:
        """The root's renderer lock, waiting briefly for one that is on its way out; None if held."""
        return spawn.lock(ahead.root_file(self.root, ahead.LOCK), wait=TAKEOVER, poll=0.02,
                          stop=lambda: ahead.ring(self.root, ()) == "rung")  # it still listens

    def _doorbell(self) -> int:
        """``idle/ahead.fifo``, opened read-write (never at end of file, never blocking writers)."""
        path = ahead.root_file(self.root, ahead.FIFO)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISFIFO(st.st_mode):
            os.unlink(path)  # a planted file or link: replaced, never followed
            st = None
        if st is None:
            os.mkfifo(path, 0o600)
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(f"{path} is not a FIFO")
        return fd

    def _unlink_pid(self) -> None:
        path = ahead.root_file(self.root, ahead.PID)
        raw = fsio.read_bytes(path) if os.path.isfile(path) else None
        if raw is not None and raw.strip() == str(os.getpid()).encode():
            try:
                os.unlink(path)
            except OSError:
                pass


def _ignore(_signum: int, _frame: object) -> None:
    """The Python-level handler: the wake-up pipe carries the ring."""


def _reported_by_the_hook(exc: Exception) -> bool:
    """A store or hook-state problem (a vanished or corrupt collaboration, a corrupt hook state, a lock held
    too long): the renderer leaves the session to the full hook, which reports it in hooks.log (once)."""
    from agentmsg import errors
    from agentmsg.hooks.base import HookError

    return isinstance(exc, (errors.AgentmsgError, HookError))
