"""``Hook``: one hook run (or the renderer's stand-in for one).

Each event's code is its own module (``session_start``, ``prompt``, ``midturn``, ``stop``, ``render_ahead``),
imported only when that event runs: a prompt does not pay for the Stop hook's code.
"""

from __future__ import annotations

from agentmsg.hooks.base import HookBase

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from agentmsg.backends.file.store import FileStore
    from agentmsg.domain.values import Registry

    Binding = tuple[str, str, Registry]


class Hook(HookBase):
    """A hook run for the host ``hooks/run`` was named with (``hooks.cursor`` has Cursor's own)."""

    def session_start(self, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
        from agentmsg.hooks import session_start

        return session_start.session_start(self, data, binds)

    def prompt(self, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
        from agentmsg.hooks import prompt

        return prompt.prompt(self, data, binds)

    def post_tool(self, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
        from agentmsg.hooks import midturn

        return midturn.post_tool(self, data, binds)

    def stop(self, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
        from agentmsg.hooks import stop

        return stop.stop(self, data, binds)

    @classmethod
    def for_session(cls, root: str, pin: str, facts: Mapping[str, Any], store: FileStore) -> Hook:
        """The hook as the session's last full run saw it (its host, cap and CLI), for the renderer."""
        from agentmsg.hooks import render_ahead

        return render_ahead.for_session(cls, root, pin, facts, store)

    def render_ahead(self) -> str:
        from agentmsg.hooks import render_ahead

        return render_ahead.render_ahead(self)

    def settle_claim(self, *, final: bool) -> bool:
        if not _claimed(self.root, self.pin):
            return False  # nothing the launcher printed to fold (the usual case): no need for the code that folds
        from agentmsg.hooks import render_ahead

        return render_ahead.settle_claim(self, final=final)

    def _keep_ahead(self, bound: bool) -> None:
        if self.env.get("AGENTMSG_NO_AHEAD") or self.env.get("AGENTMSG_NO_FASTPATH"):  # rendering ahead is off
            if self.root is not None:
                _forget(self.root, self.pin)
            return
        from agentmsg.hooks import render_ahead

        render_ahead.keep_ahead(self, bound)


def _claimed(root: str | None, pin: str) -> bool:
    """Whether anything is at the session's claim (``.took``): a claim, or something planted there."""
    import os

    from agentmsg.backends.file import ahead

    found = ahead.base(root, pin) if root is not None else None
    return found is not None and os.path.lexists(found + ahead.TOOK)


def _forget(root: str, pin: str) -> None:
    """No delivery rendered ahead for this session while rendering ahead is off (never fails the hook)."""
    from agentmsg.backends.file import ahead
    from agentmsg.backends.file.derived import quietly

    quietly(ahead.forget, root, pin)
