"""The resident helper: the one background process agentmsg keeps per state root, and how it is started.

One helper per root, under ``idle/helper.lock``; ``idle/helper.pid`` names its pid (first line) and its duties
(second line); ``idle/helper.fifo`` is its doorbell.  Its duties:

* ``render``: each session's next prompt delivery, rendered ahead (:mod:`agentmsg.resident.renderer`); on a
  replica root the mirror renders, between its rounds (its hooks' records go to the outbox, as the full hook's).
* ``retry``: deferred wake-up rings (:mod:`agentmsg.runtime.retries`), rung again each second until they ring.
* ``mirror``: on a replica root, keeping it in step with the remote store (:mod:`agentmsg.resident.mirror`).
* ``cli``: running ``agentmsg`` commands for the thin client over ``idle/helper.sock`` (:mod:`agentmsg.cli.serve`,
  which plugs into :attr:`Helper.extra`); only a helper started by the CLI, with the CLI's interpreter, has it.

Doorbell lines: a pin (render it), ``+`` (a deferred ring is waiting), ``-`` (leave: ``agentmsg sync`` takes the
root over; a helper that mirrors ignores it).  The shell launcher, which cannot write to a FIFO without
blocking, sends ``SIGURG`` instead: look at every claim.

It exits once it has been idle for its idle time, and correctness never depends on it: killed at any moment or
never started, every hook and command gives the same results, only slower (a claim is folded by the next full
hook, a deferred ring is simply not rung again, a replica is current once a mirror runs again).

How it starts (:mod:`agentmsg.runtime.doorbell` rings it or starts it), always through
:func:`agentmsg.runtime.spawn.spawn_detached` (the shell launcher is the one exception, see there):

* from a session's recorded facts (:mod:`agentmsg.runtime.doorbell`): ``PYTHON -I -S hooks/agentmsg_hook.py
  HOST helper ROOT PIN``, the hook's own interpreter and code, standard library only;
* for a deferred ring with no facts to start from: ``PYTHON -m agentmsg.resident.helper ROOT``;
* on a replica root: ``agentmsg sync --root ROOT`` (it needs the store's URL and driver), by
  :func:`agentmsg.runtime.doorbell.ensure_mirror`;
* by a command the CLI ran in-process, for the next one: ``PYTHON -m agentmsg.cli.serve ROOT`` (the CLI's own
  interpreter, with the package's dependencies), which takes the root over from a helper without the ``cli``
  duty (``-``, leave) and then renders, retries and serves the command line.
"""

from __future__ import annotations

import os

from agentmsg.backends.file import ahead, layout
from agentmsg.runtime.doorbell import LEAVE, MIRROR, RENDER, RETRY, RING_RETRY, duties, is_replica

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Protocol, TypeVar

    from agentmsg.resident.renderer import Renderer

    T = TypeVar("T")

    class Extra(Protocol):
        """Another duty served on descriptors of its own (the command line's socket, :mod:`agentmsg.cli.serve`)."""

        def open(self) -> None: ...  # the root is held: start serving
        def fds(self) -> list[int]: ...
        def ready(self, fd: int) -> None: ...  # ``fd`` is readable
        def busy(self) -> bool: ...  # work still running (the helper does not go idle)
        def close(self) -> None: ...  # the root is let go: stop serving

IDLE_EXIT = 120.0  # seconds without a doorbell or any work: exit (the next writer starts one again)
SWEEP = 30.0  # seconds between looks at every session
TAKEOVER = 2.0  # seconds a new helper waits for the lock of one that is exiting


def main(argv: Sequence[str], *, duties: Sequence[str] = (RENDER, RETRY),
         extra: Callable[[Helper], Extra] | None = None, leave: bool = False, tag: str = "") -> int:
    """``hooks/agentmsg_hook.py HOST helper ROOT [PIN...]`` and ``python -m agentmsg.resident.helper ROOT``: run
    the helper for ROOT (looking first at the pins after it) with the render and retry duties; always 0.
    ``agentmsg.cli.serve`` adds its duty, what serves it (``extra``), whether to ask a running helper to leave
    first, and the ``tag`` its pid file names (third line)."""
    hook = None
    try:
        if not argv or not argv[0].startswith("/"):
            return 0
        from agentmsg import fsio
        from agentmsg.runtime import spawn

        spawn.detach()
        idle_env = os.environ.get("AGENTMSG_AHEAD_IDLE")
        os.environ.clear()  # it got a host's or a CLI's environment: it needs none of it (a ring brings PATH)
        root = os.path.realpath(argv[0])
        if not os.path.isdir(root) or is_replica(root):
            return 0  # a replica root's helper is its mirror (ensure_mirror)
        fsio.ensure_dir(root, layout.IDLE)
        from agentmsg.backends.file.store import FileStore
        from agentmsg.hooks.core import Hook
        from agentmsg.hosts import registry
        from agentmsg.resident.renderer import Renderer
        from agentmsg.runtime import doorbell

        hook = Hook(registry.NAMES[0], {})  # for logging only
        hook.root, hook.event = root, "helper"
        store = FileStore(root, lock_timeout=2.0, on_wake=doorbell.nudge)
        helper = Helper(root, duties, store, log=hook.log)
        helper.leave_first, helper.tag = leave, tag
        if extra is not None:
            helper.extra = extra(helper)
        try:  # the tests' shorter idle exit; nothing else from the environment is used
            helper.idle_exit = min(IDLE_EXIT, max(0.1, float(idle_env or "")))
        except ValueError:
            pass
        helper.renderer = Renderer(root, store, Hook)
        helper.serve([p for p in argv[1:] if ahead.base(root, p)])
    except BaseException as exc:  # fail open, whatever happened
        if hook is not None:
            hook.log(exc)
    return 0


class Helper:
    """One root's helper: its lock, pid file, doorbell and duties."""

    def __init__(self, root: str, duties: Sequence[str], store: object, *,
                 log: Callable[[BaseException], None] | None = None) -> None:
        self.root, self.duties, self.store = root, tuple(duties), store
        self.log = log or (lambda exc: None)
        self.idle_exit = IDLE_EXIT
        self.renderer: Renderer | None = None
        self.ring_store: object = store  # where a deferred ring is decided and recorded (the remote, mirroring)
        self.fifo: int | None = None
        self.bell: tuple[int, int] | None = None
        self.retry_at: float | None = None
        self.left = False  # asked to leave (agentmsg sync took the root over)
        self.rendered = False  # the mirror's render duty has looked at every session once
        self.leave_first = False  # ask a running helper to leave before taking the root (the CLI's helper)
        self.tag = ""  # the pid file's third line: what serves the CLI (cli.serve's version tag)
        self.extra: Extra | None = None
        self.lock_fd: int | None = None

    # ---- holding the root ----------------------------------------------------------------------------

    def take(self, *, leave: bool = False) -> int | None:
        """The root's lock, waiting briefly for a helper on its way out (``leave``: asking one that does not
        mirror to go); None if another helper keeps it."""
        from agentmsg import fsio
        from agentmsg.runtime import spawn

        fsio.ensure_dir(self.root, layout.IDLE)
        held = duties(self.root)
        if leave and held is not None and MIRROR not in held:
            ahead.ring(self.root, [LEAVE])
            return spawn.lock(ahead.root_file(self.root, ahead.LOCK), wait=TAKEOVER * 2)
        return spawn.lock(ahead.root_file(self.root, ahead.LOCK), wait=TAKEOVER, poll=0.02,
                          stop=lambda: ahead.ring(self.root, ()) == "rung")  # it still listens

    def hold(self, lock: int, body: Callable[[], T], *, bell: bool = True) -> T:
        """Run ``body`` as the root's helper: doorbell open, pid and duties named, everything undone after."""
        from agentmsg import fsio

        self.lock_fd = lock
        try:
            self.fifo = _doorbell(self.root)
            self.bell = _bell() if bell else None  # before the pid file names this process to the launcher
            data = f"{os.getpid()}\n{' '.join(self.duties)}\n{self.tag}\n".encode()
            fsio.atomic_write(ahead.root_file(self.root, ahead.PID), data, durable=False)
            if self.extra is not None:
                self.extra.open()
            return body()
        finally:
            if self.extra is not None:
                self.extra.close()
            self._unlink_pid()
            if self.fifo is not None:
                os.close(self.fifo)  # from here a writer's open fails, and it starts a new helper
            if self.bell is not None:
                import signal

                signal.set_wakeup_fd(-1)
                for fd in self.bell:
                    os.close(fd)
            os.close(lock)
            self.lock_fd = None

    def own_fds(self) -> list[int]:
        """The descriptors that make this process the root's helper (lock, doorbell, bell): a child it forks
        closes them, so that it never holds the root once the helper is gone."""
        return [fd for fd in (self.lock_fd, self.fifo, *(self.bell or ())) if fd is not None]

    def serve(self, first: list[str]) -> None:
        """The helper of a root that is not a replica: render and retry until idle.  A ring left just as it
        went idle (after its last look, before its doorbell closed) keeps it: it serves again."""
        import functools

        from agentmsg.runtime import retries

        pins = first
        leave = self.leave_first
        while True:
            lock = self.take(leave=leave)
            leave = False
            if lock is None:  # another helper runs: hand it these pins, and any waiting ring
                ahead.ring(self.root, [*pins, RING_RETRY])
                return
            self.hold(lock, functools.partial(self.loop, pins))
            if self.left or next(retries.pending(self.root), None) is None:
                return
            pins = []

    # ---- the loop ------------------------------------------------------------------------------------

    def loop(self, first: list[str]) -> None:
        import select
        import time

        renderer = self.renderer
        todo = set(first) | (set(ahead.sessions(self.root)) if renderer is not None else set())
        again: set[str] = set()  # the sweep: rendered again even if current (the store may have been damaged)
        last_sweep = last_work = time.monotonic()
        self._retry_soon(last_work)
        idle = os.path.join(self.root, layout.IDLE)
        while True:
            now = time.monotonic()
            if renderer is not None:
                if renderer.render(todo, again):
                    last_work = now
            todo, again = set(), set()
            if self._retries(now):
                last_work = now
            if not os.path.isdir(idle):
                return  # the root is gone
            waits = [SWEEP - (now - last_sweep), self.idle_exit]
            if renderer is not None:
                waits += [at - now for at in renderer.later.values()]
            if self.retry_at is not None:
                waits.append(self.retry_at - now)
            extra = self.extra.fds() if self.extra is not None else []
            if self.extra is not None and self.extra.busy():
                waits.append(0.01)  # look again soon: its children end (and it forks ahead for the next)
            watched = [fd for fd in (self.fifo, self.bell[0] if self.bell else None) if fd is not None]
            ready, _w, _x = select.select(watched + extra, [], [], max(0.0, min(waits)))
            now = time.monotonic()
            for fd in ready:
                if fd in extra and self.extra is not None:
                    self.extra.ready(fd)
                    last_work = now
            ready = [fd for fd in ready if fd not in extra]
            if ready:
                pins, leave = self.drain()
                if leave and MIRROR not in self.duties:
                    self.left = True
                    return  # agentmsg sync takes this root over; waiting rings stay in their files
                todo = pins
                last_work = now
            elif renderer is not None and not renderer.later and now - last_sweep >= SWEEP:
                todo = again = set(ahead.sessions(self.root))
                last_sweep = now
            busy = bool(renderer is not None and renderer.later) or self.retry_at is not None \
                or (self.extra is not None and self.extra.busy())
            if not ready and not busy and now - last_work > self.idle_exit:
                todo, _leave = self.drain()  # one last look: a ring may have come in just now
                if not todo and self.retry_at is None:
                    return

    def between(self) -> bool:
        """The mirror's turn for the other duties, between its rounds: read the doorbell, render the sessions it
        names (and those with a claim, after the launcher's ``SIGURG``), ring what is due.  True while a deferred
        ring waits (the mirror stays)."""
        import time

        if self.fifo is not None:
            pins, _leave = self.drain()  # a mirror never leaves for a ring
            if self.renderer is not None:
                try:  # the render duty never stops the mirror: a failure is a line in hooks.log
                    if not self.rendered:  # the first look: every session, as the loop's
                        pins |= set(ahead.sessions(self.root))
                        self.rendered = True
                    self.renderer.render(pins, set())
                except Exception as exc:
                    self.log(exc)
        self._retries(time.monotonic())
        return self.retry_at is not None

    def soon(self) -> bool:
        """Whether a prompt may soon claim a delivery this mirror rendered (one waits): then the mirror looks
        at its doorbell every half second, so a served claim is folded and the next prompt rendered soon."""
        return self.renderer is not None and next(ahead.sessions(self.root), None) is not None

    def drain(self) -> tuple[set[str], bool]:
        """Every line on the doorbell, and the launcher's ``SIGURG``: the pins to look at, and whether asked to
        leave.  A ``+`` line schedules the waiting rings now."""
        import time

        pins: set[str] = set()
        leave = False
        for line in _read_lines(self.fifo):
            if line == LEAVE:
                leave = True
            elif line == RING_RETRY:
                self._retry_soon(time.monotonic(), force=True)
            elif ahead.base(self.root, line) is not None:
                pins.add(line)
        if self.bell is not None and _read_lines(self.bell[0], raw=True) and self.renderer is not None:
            pins |= set(ahead.sessions(self.root, (ahead.TOOK,)))
        return (pins if self.renderer is not None else set()), leave

    # ---- deferred rings ------------------------------------------------------------------------------

    def _retry_soon(self, now: float, *, force: bool = False) -> None:
        from agentmsg.runtime import retries

        if force or next(retries.pending(self.root), None) is not None:
            self.retry_at = now if self.retry_at is None or force else min(self.retry_at, now)

    def _retries(self, now: float) -> bool:
        """Ring the waiting rings when due; True if any was rung (work: the helper stays)."""
        if self.retry_at is None or now < self.retry_at or RETRY not in self.duties:
            return False
        from agentmsg.runtime import retries

        try:
            left = retries.tick(self.root, self._ring)
        except Exception as exc:
            self.log(exc)
            left = False
        self.retry_at = now + retries.RETRY_EVERY if left else None
        return True

    def _ring(self, collab: str, alias: str) -> str:
        from agentmsg.service import wake

        got = wake.ring(self.ring_store, self.root, collab, alias, retry=True)  # type: ignore[arg-type]
        return str(got["outcome"])

    def _unlink_pid(self) -> None:
        from agentmsg import fsio

        path = ahead.root_file(self.root, ahead.PID)
        raw = fsio.read_bytes(path) if os.path.isfile(path) else None
        if raw is not None and raw.split(b"\n", 1)[0].strip() == str(os.getpid()).encode():
            try:
                os.unlink(path)
            except OSError:
                pass


# ---- the doorbell --------------------------------------------------------------------------------------


def _read_lines(fd: int | None, *, raw: bool = False) -> list[str]:
    """Everything waiting on a non-blocking descriptor, as lines (``raw``: one entry if anything came)."""
    if fd is None:
        return []
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except (BlockingIOError, InterruptedError):
            break
        if not chunk:
            break
        data += chunk
    if raw:
        return ["rung"] if data else []
    return data.decode("utf-8", "replace").splitlines()


def _doorbell(root: str) -> int:
    """``idle/helper.fifo``, opened read-write (never at end of file, never blocking writers)."""
    import stat

    path = ahead.root_file(root, ahead.FIFO)
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


def _bell() -> tuple[int, int] | None:
    """The launcher's ring: ``SIGURG``, which wakes ``select`` through a wake-up pipe (read end, write end).
    The launcher sends a signal because a shell cannot write to a FIFO without blocking: a full doorbell
    would hold its ring forever.  None where signals cannot be set (not the main thread)."""
    import signal

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


def _ignore(_signum: int, _frame: object) -> None:
    """The Python-level handler: the wake-up pipe carries the ring."""


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
