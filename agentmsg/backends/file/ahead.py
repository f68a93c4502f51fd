"""Deliveries rendered ahead for the launcher (docs/DELIVERY.md, "Rendered ahead"): the files under ``idle/``.

Per session, beside the fast path's markers (``idle/<runtime>/<session>``):

* ``.env``: what the session's last full hook run saw and the renderer needs: the host, its cap and CLI
  command, the key the launcher compares with its own environment, and the interpreter and hook script
  that render for it (JSON; derived, rewritten only when it changes).
* ``.ready``: ``<generation> <key>`` on one line, then the exact bytes the session's next UserPromptSubmit
  hook would print.  Valid only while ``.gen`` holds that generation (every writer that could change
  what a session sees deletes ``.gen``), no ``.took`` exists, and the key matches the launcher's
  environment; anything else runs the hook in full.
* ``.fold``: what printing it changes (JSON): the attempt id, the binding, the messages it shows.
* ``.took``: a claim, made with ``O_EXCL``.  The launcher's: ``<generation>`` before it reads ``.ready``,
  then ``ok``, ``cut`` (printing failed) or ``no`` (the first line did not match: nothing printed).  The
  renderer's own: ``w <pid>`` while it writes ``.fold`` and ``.ready``.  So the ``.ready`` a launcher
  prints and the ``.fold`` folded for it are always one pair.

Per root, the resident helper's (``resident/helper.py``), which renders: ``idle/helper.lock``,
``idle/helper.pid`` and ``idle/helper.fifo`` (its doorbell: lines naming the pins to look at).

Everything here is derived or transient: a lost ``.took`` makes its messages come due again (never
acknowledged, never lost), a lost ``.ready`` costs one full hook run.  Lean: the hooks import it.
"""

from __future__ import annotations

import errno
import os
import stat
import time

from agentmsg import fsio, records
from agentmsg.backends.file import layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

FACTS, READY, FOLD, TOOK, FULL = layout.FACTS, layout.READY, layout.FOLD, layout.TOOK, layout.FULL  # layout.py
LOCK, PID, FIFO = layout.HELPER_LOCK, layout.HELPER_PID, layout.HELPER_FIFO
#: A launcher claim with no end line after this long: the launcher died while printing.
CLAIM_STALE = 2.0
#: A renderer's own claim older than this: that renderer died while writing.
WRITER_STALE = 10.0


def base(root: str, pin: str) -> str | None:
    """``idle/<runtime>/<session>`` for a pin the launcher can name, else None."""
    files = layout.idle_files(root, pin)
    return files[0][: -len(layout.GEN)] if files is not None else None


def root_file(root: str, name: str) -> str:
    return os.path.join(root, layout.IDLE, name)


def launcher_key(env: Any) -> str:
    """What the launcher compares with the first line's key: ``hooks/run`` builds the same string in sh
    (``${AGENTMSG_HOOK_CAP-}|${AGENTMSG_CLI-}|${PLUGIN_ROOT:+p}``)."""
    return f"{env.get('AGENTMSG_HOOK_CAP', '')}|{env.get('AGENTMSG_CLI', '')}|{'p' if env.get('PLUGIN_ROOT') else ''}"


# ---- facts ------------------------------------------------------------------------------------


def _load_json(path: str) -> dict[str, Any] | None:
    try:
        raw = fsio.read_bytes(path)
        doc = records.loads(raw.decode("utf-8")) if raw else None
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def facts(root: str, pin: str) -> dict[str, Any] | None:
    at = base(root, pin)
    doc = _load_json(at + FACTS) if at is not None else None
    return doc if doc is not None and doc.get("pin") == pin and doc.get("v") == 1 else None


def remember(root: str, pin: str, doc: dict[str, Any]) -> bool:
    """Write the session's facts if they changed (True when they did)."""
    at = base(root, pin)
    if at is None:
        return False
    data = records.dumps(doc).encode()
    if fsio.read_bytes(at + FACTS) == data:
        return False
    fsio.ensure_dir(fsio.ensure_dir(root, layout.IDLE), os.path.basename(os.path.dirname(at)))
    fsio.atomic_write(at + FACTS, data, durable=False)
    return True


def forget(root: str, pin: str) -> None:
    """No rendering ahead for this session (``AGENTMSG_NO_AHEAD``): its facts and delivery go."""
    at = base(root, pin)
    if at is not None:
        for suffix in (FACTS, READY, FOLD, FULL):
            _unlink(at + suffix)


# ---- the delivery ----------------------------------------------------------------------------


def write(root: str, pin: str, gen: str, key: str, payload: bytes, fold: dict[str, Any]) -> None:
    """``.fold``, then ``.ready``: written under the renderer's own claim (see :func:`take`)."""
    at = base(root, pin)
    if at is None or "\n" in key:
        return
    fsio.atomic_write(at + FOLD, records.dumps(dict(fold, gen=gen)).encode(), durable=False)
    fsio.atomic_write(at + READY, f"{gen} {key}\n".encode() + payload, durable=False)
    _unlink(at + FULL)


def drop(root: str, pin: str) -> None:
    """The delivery no longer matches the session's state: the next hook runs in full, or the renderer
    renders again.  ``.fold`` stays: a claim in flight may still need it (it names its generation).  A
    ``.full`` goes too: it was decided from the state before."""
    at = base(root, pin)
    if at is not None:
        _unlink(at + READY)
        _unlink(at + FULL)


def mark_full(root: str, pin: str, gen: str) -> None:
    """The next prompt of generation ``gen`` runs the hook in full: a launcher waiting for a render stops."""
    at = base(root, pin)
    if at is not None:
        fsio.atomic_write(at + FULL, f"{gen}\n".encode(), durable=False)


def current(root: str, pin: str) -> bool:
    """Whether the launcher has an answer for the generation in ``.gen``: a ``.ready`` naming it, or the
    idle marker holding it (nothing pending)."""
    at = base(root, pin)
    if at is None:
        return False
    gen = _first_line(at + layout.GEN)
    if gen is None or len(gen) != 32:
        return False
    head = _first_line(at + READY)
    return (head is not None and head.split(" ", 1)[0] == gen) or _first_line(at + layout.IDLE_MARK) == gen


def load_fold(root: str, pin: str) -> dict[str, Any] | None:
    at = base(root, pin)
    return _load_json(at + FOLD) if at is not None else None


# ---- claims -------------------------------------------------------------------------------------


class Claim:
    """What ``.took`` says: the launcher's (``gen``, ``end``) or the renderer's own (``writer``)."""

    __slots__ = ("age", "end", "gen", "writer")

    def __init__(self, raw: bytes, age: float) -> None:
        lines = raw.decode("ascii", "replace").split("\n")
        first = lines[0].strip()
        self.age = age
        self.writer: int | None = None
        self.gen: str | None = None
        self.end: str | None = None
        if first.startswith("w "):
            self.writer = int(first[2:]) if first[2:].isdigit() else 0
        else:
            self.gen = first
            ends = [ln.strip() for ln in lines[1:] if ln.strip()]
            self.end = ends[0] if ends and ends[0] in ("ok", "cut", "no") else None

    @property
    def finished(self) -> bool:
        """The launcher is done with it: it said how printing ended, or died before saying."""
        return self.writer is None and (self.end is not None or self.age > CLAIM_STALE)

    @property
    def stale_writer(self) -> bool:
        return self.writer is not None and self.age > WRITER_STALE


def claim(root: str, pin: str) -> Claim | None:
    """The session's claim, if there is one (read without a lock: see :func:`settling`)."""
    at = base(root, pin)
    if at is None:
        return None
    try:
        fd, st = fsio.open_regular(at + TOOK)
    except FileNotFoundError:
        return None
    try:
        return Claim(os.pread(fd, 256, 0), time.time() - st.st_mtime)
    finally:
        os.close(fd)


class settling:  # lower case: used like a function, ``with ahead.settling(root, pin) as found:``
    """Exclusive handling of one claim: ``found`` is None when there is none (or another process just
    settled it; :func:`give_back` removes it).  An ``flock`` on ``.took`` itself orders the processes that
    settle (the renderer, a full hook run); the launcher never locks and never removes it."""

    def __init__(self, root: str, pin: str) -> None:
        self.path = (base(root, pin) or "") + TOOK
        self.fd: int | None = None

    def __enter__(self) -> Claim | None:
        if self.path == TOOK:
            return None
        try:
            self.fd, _st = fsio.open_regular(self.path)
        except FileNotFoundError:
            return None
        import fcntl

        deadline = time.monotonic() + 5.0
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.005)
        st = os.fstat(self.fd)
        if st.st_nlink == 0:  # settled by another process while this one waited
            return None
        return Claim(os.pread(self.fd, 256, 0), time.time() - st.st_mtime)

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)


def refuse_planted_claim(root: str, pin: str) -> None:
    """A ``.took`` that is not a regular file (a planted link, FIFO or directory) is removed, never followed:
    the launcher refuses to serve while anything is there."""
    at = base(root, pin)
    if at is None:
        return
    try:
        st = os.lstat(at + TOOK)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            os.rmdir(at + TOOK)
        else:
            os.unlink(at + TOOK)


def take(root: str, pin: str) -> bool:
    """The renderer's own claim, so no launcher claims a half-written pair; False if one exists."""
    at = base(root, pin)
    if at is None:
        return False
    try:
        fd = os.open(at + TOOK, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return False
    try:
        os.write(fd, f"w {os.getpid()}\n".encode())
    finally:
        os.close(fd)
    return True


def give_back(root: str, pin: str) -> None:
    """Remove the claim: the renderer's own when it is done writing, or a settled one (under
    :class:`settling`, so its name is still that file: only ``O_EXCL`` creates one, never over one)."""
    at = base(root, pin)
    if at is not None:
        _unlink(at + TOOK)


def sessions(root: str, suffixes: tuple[str, ...] = (READY, TOOK)) -> Iterator[str]:
    """Every pin with one of these files under ``idle/`` (by default: a delivery rendered ahead or a claim,
    the renderer's periodic sweep)."""
    idle = fsio.existing_dir(root, layout.IDLE)
    if idle is None:
        return
    for runtime in sorted(os.listdir(idle)):
        sub = os.path.join(idle, runtime)
        if not os.path.isdir(sub) or os.path.islink(sub):
            continue
        seen = set()
        for name in sorted(os.listdir(sub)):
            for suffix in suffixes:
                if name.endswith(suffix):
                    pin = f"{runtime}:{name[: -len(suffix)]}"
                    if pin not in seen and base(root, pin) is not None:
                        seen.add(pin)
                        yield pin


# ---- the doorbell -----------------------------------------------------------------------------------


def ring(root: str, pins: Iterable[str]) -> str:
    """Name ``pins`` to the running renderer: ``rung``; ``absent`` when no renderer holds the doorbell open
    (opening a FIFO to write without blocking fails then: exactly "none runs"); ``refused`` for anything
    else there (a planted file or link: left alone, the hooks run in full)."""
    try:
        fd = os.open(root_file(root, FIFO), os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        return "absent" if exc.errno in (errno.ENXIO, errno.ENOENT) else "refused"
    try:
        data = "".join(f"{pin}\n" for pin in pins).encode()
        if data:
            os.write(fd, data)
    except OSError:
        pass  # full (a renderer busy for a while): its periodic sweep finds them
    finally:
        os.close(fd)
    return "rung"


def _first_line(path: str) -> str | None:
    try:
        fd, _st = fsio.open_regular(path)
    except OSError:
        return None
    try:
        return os.pread(fd, 512, 0).split(b"\n", 1)[0].decode("ascii", "replace")
    finally:
        os.close(fd)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
