"""The render duty of the resident helper: each session's next prompt delivery, rendered ahead so the launcher
prints it without Python.

The helper (:mod:`agentmsg.resident.helper`: one per state root, its lock, doorbell and loop) runs it on every root
that is not a replica; on a replica root the mirror (:mod:`agentmsg.resident.mirror`) runs it between its rounds.

For every session with facts (``idle/<runtime>/<session>.env``, recorded by its own full hook runs) it
keeps one of these true, as the full prompt hook itself would find it:

* the idle marker names the current generation (nothing pending: the launcher exits at once), or
* ``.ready`` holds exactly what the next UserPromptSubmit hook would print for that generation and hook
  state, with ``.fold`` saying what printing it changes (``Hook.render_ahead``: the hook's own code), or
* neither (the next prompt runs the hook in full: a wake-up pending, artifacts or news to tell; ``.full`` says so).

When the launcher has printed a delivery (``.took``), the renderer folds it into presented receipts and
the hook state (``Hook.settle_claim``), then renders the next one.  Writers ring its doorbell
(``idle/helper.fifo``, one line per pin, written without blocking) when they change what a session would
see; the launcher, which cannot write without blocking, sends ``SIGURG`` instead (its default action is
to ignore it, so a pid reused since harms nobody), and the renderer then looks at every claim.  Every
``SWEEP`` seconds it looks at every session anyway.

Fail-open like the hooks: an error is one line in ``hooks.log`` and the session is left to the full
hook.  Everything it writes is derived (docs/DELIVERY.md, "Rendered ahead").
"""

from __future__ import annotations

import time

from agentmsg import __version__
from agentmsg.backends.file import ahead
from agentmsg.hosts import registry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentmsg.backends.file.store import FileStore
    from agentmsg.hooks.core import Hook

RETRY = 0.05  # seconds before looking again at a claim the launcher is still printing


class Renderer:
    """The helper's render duty (:mod:`agentmsg.resident.helper` holds the root, its doorbell and its loop)."""

    def __init__(self, root: str, store: FileStore, hook_class: type[Hook], *, mirrors: bool = False) -> None:
        self.root, self.store, self.hook_class = root, store, hook_class
        self.mirrors = mirrors  # this process is the root's mirror: a replica root is rendered too
        self.later: dict[str, float] = {}  # pin -> when to look again (a claim still being printed)

    def render(self, todo: set[str], again: set[str]) -> bool:
        """Visit ``todo`` and every pin whose later look is due; True if any had work (``again``: the sweep's
        own renders are upkeep, they never count)."""
        now = time.monotonic()
        todo = todo | {pin for pin, at in self.later.items() if at <= now}
        worked = False
        for pin in sorted(todo):
            self.later.pop(pin, None)
            if self.visit(pin, again=pin in again) and pin not in again:
                worked = True
        return worked

    def visit(self, pin: str, *, again: bool = False) -> bool:
        """Settle the session's claim, then render its next prompt if what is there no longer matches (or
        ``again``: checked against the store anew).  True if there was anything to do."""
        facts = ahead.facts(self.root, pin)
        if facts is not None and facts.get("version") != __version__:
            facts = None  # recorded by another version's hook: its own renderer renders it (settled here)
            _no_wait(self.root, pin)
        claimed = ahead.claim(self.root, pin) is not None
        if facts is None and not claimed:
            return False
        hook = self.hook_class.for_session(self.root, pin, facts or self._host_of(pin), self.store)
        hook.mirror_runs = self.mirrors
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


def _reported_by_the_hook(exc: Exception) -> bool:
    """A store or hook-state problem (a vanished or corrupt collaboration, a corrupt hook state, a lock held
    too long): the renderer leaves the session to the full hook, which reports it in hooks.log (once)."""
    from agentmsg import errors
    from agentmsg.hooks.base import HookError

    return isinstance(exc, (errors.AgentmsgError, HookError))


def _no_wait(root: str, pin: str) -> None:
    """A session this renderer never renders: a launcher waiting for it runs the hook in full at once."""
    from agentmsg.backends.file import idle
    from agentmsg.backends.file.derived import quietly

    try:
        token = idle.idle_token(root, pin)  # read first, as any hook does (made when a writer voided it)
    except OSError:
        return
    if token is not None:
        quietly(ahead.mark_full, root, pin, token)
