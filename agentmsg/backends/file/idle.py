"""``idle/``: the hook fast path's markers (docs/DELIVERY.md, "Fast path"), and waking a pin.

Lean: the hooks import it on every prompt.
"""

from __future__ import annotations

import os
import stat

from agentmsg import fsio
from agentmsg.backends.file import layout
from agentmsg.backends.file.derived import quietly

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from agentmsg.backends.file.protocols import Txn, WakeCallback

# Per pin two files, ``<session>.gen`` (a random generation token) and
# ``<session>.idle`` (a copy of the token).  ``hooks/run`` exits without an
# interpreter only when both are plain files holding the same non-empty line.
# A hook that finds nothing for a pin copies the generation it read *before*
# it read any state into ``.idle``; every writer that could give the pin
# something to show deletes ``.gen`` *after* its record is stored.  So either
# the writer's record was visible to the hook (which then writes no marker),
# or the ``.gen`` the marker names is gone and no later token equals it.  No
# lock is needed; a lost, stale or damaged file only costs one full hook run.


def wake(root: str, pins: Iterable[str], on_wake: WakeCallback | None = None) -> None:
    """Tell the launcher these pins may have something to show (derived, best effort, no fsync), and
    ``on_wake`` (the store's: the renderer of deliveries ahead, ``runtime.doorbell.nudge``) which of them
    had a marker: their next prompt changed.  A backend never starts a process itself."""
    woken = []
    for pin in pins:
        files = layout.idle_files(root, pin) if isinstance(pin, str) else None
        if files is None:
            continue
        try:
            if fsio.existing_dir(root, layout.IDLE, pin.partition(":")[0]) is None:  # idle_files' runtime
                continue  # no marker was ever written for this runtime
            woken.append(pin)
            os.unlink(files[0])
        except FileNotFoundError:
            pass
        except OSError:  # cannot remove it: nothing may ever match it again
            quietly(_invalidate, files)
        except Exception as exc:  # a planted link at idle/: the hooks refuse it too, and run in full
            from agentmsg.errors import UnsafePath

            if not isinstance(exc, UnsafePath):
                raise
    if woken and on_wake is not None:
        quietly(on_wake, root, woken)


def _invalidate(files: tuple[str, str]) -> None:
    base = files[0][: -len(layout.GEN)]
    for path in [base + suffix for suffix in layout.VOIDED_MARKS]:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def wake_aliases(tx: Txn, aliases: Iterable[str]) -> None:
    """:func:`wake` the pins that hold these aliases of ``tx``'s collaboration."""
    parts = tx.registry().participants
    wake(tx.root, [parts[a].pin for a in aliases if a in parts], tx.store.on_wake)


def idle_token(root: str, pin: str) -> str | None:
    """The pin's generation token, created if missing: read before anything that decides "nothing to show"."""
    files = layout.idle_files(root, pin)
    if files is None:
        return None
    token = idle_token_now(root, pin)
    if token is None:
        token = os.urandom(16).hex()
        runtime = os.path.basename(os.path.dirname(files[0]))
        fsio.ensure_dir(fsio.ensure_dir(root, layout.IDLE), runtime)
        fsio.atomic_write(files[0], (token + "\n").encode(), durable=False)
    return token


def idle_token_now(root: str, pin: str) -> str | None:
    """The pin's generation token as it is on disk now (never created): None when a writer deleted it."""
    files = layout.idle_files(root, pin)
    raw = fsio.read_bytes(files[0]) if files is not None else None
    token = raw.decode("ascii", "replace").strip() if raw else ""
    return token if len(token) == 32 and set(token) <= _HEX else None


def mark_idle(root: str, pin: str, token: str) -> None:
    """Record that the pin had nothing to show as of generation ``token`` (the launcher may skip Python)."""
    files = layout.idle_files(root, pin)
    if files is not None:
        fsio.atomic_write(files[1], (token + "\n").encode(), durable=False)


def clear_idle(root: str, pin: str) -> None:
    """Drop the pin's idle marker: the next hook runs in full."""
    files = layout.idle_files(root, pin)
    if files is not None:
        quietly(_invalidate, files)


# The mid-turn marker, ``<session>.mid``: the same generation scheme as ``.idle``, for PostToolUse
# (``hooks/run claude midturn``).  A PostToolUse hook that finds nothing due between tool calls copies
# the generation it read first into it.  Every writer's :func:`wake` voids it with ``.gen``; a full
# prompt or SessionStart run that may change what is due (a prompt counted, a cleared context) drops it.


def _mark(root: str, pin: str, suffix: str, token: str) -> None:
    path = layout.marker_file(root, pin, suffix)
    if path is not None:
        fsio.atomic_write(path, (token + "\n").encode(), durable=False)


def _clear(root: str, pin: str, suffix: str) -> None:
    path = layout.marker_file(root, pin, suffix)
    if path is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def mark_midturn_quiet(root: str, pin: str, token: str) -> None:
    """Record that nothing was due mid-turn for the pin as of generation ``token``."""
    _mark(root, pin, layout.MID, token)


def clear_midturn(root: str, pin: str) -> None:
    """Drop the pin's mid-turn marker: the next PostToolUse hook runs in full."""
    _clear(root, pin, layout.MID)


def mark_stop_quiet(root: str, pin: str, token: str) -> None:
    """Record that a Stop hook had nothing to do for the pin as of generation ``token`` (no active envelope,
    no active wake consent): ``hooks/run <host> stop`` may exit without Python while unread mail waits."""
    _mark(root, pin, layout.STOP, token)


def clear_stop(root: str, pin: str) -> None:
    """Drop the pin's Stop marker: the next Stop hook runs in full."""
    _clear(root, pin, layout.STOP)


_HEX = frozenset("0123456789abcdef")


# ---- presence: a session's last prompt or tool call (``.turn``) and its last Stop or start (``.rest``) ----------
# Only their modification times count (runtime/presence.py reads them); ``hooks/run`` touches the same files
# without Python, so a full run and a fast exit leave the same trace.


def mark_presence(root: str, pin: str, suffix: str) -> None:
    """Touch the session's ``.turn`` or ``.rest``: created ``0600``, never through a link or into a FIFO."""
    path = layout.marker_file(root, pin, suffix)
    if path is None:
        return
    fsio.ensure_dir(root, layout.IDLE, os.path.basename(os.path.dirname(path)))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    os.close(fd)


def presence_marks(root: str, pin: str) -> tuple[float | None, float | None]:
    """``(last prompt or tool call, last Stop or start)``, as times; None where there is no mark."""
    out: list[float | None] = []
    for suffix in (layout.TURN, layout.REST):
        path = layout.marker_file(root, pin, suffix)
        try:
            st = os.lstat(path) if path is not None else None
        except OSError:
            st = None
        out.append(st.st_mtime if st is not None and stat.S_ISREG(st.st_mode) else None)
    return out[0], out[1]
