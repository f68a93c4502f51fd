"""What the derived-file modules need of a file store and its transaction, as Protocols.

:mod:`.store` builds on the view modules (:mod:`.registryview`, :mod:`.idindex`, ...), so they must
not import it back: they are typed against these instead, and only under ``TYPE_CHECKING`` (the hooks
import some of them on every prompt, and ``typing`` is not for them).  ``FileStore`` and ``FileTxn``
satisfy them structurally.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from agentmsg.backends.file.handles import Handles
    from agentmsg.backends.file.inboxmap import InboxMap
    from agentmsg.domain.values import Registry

    #: Told which pins a write woke (root, pins): the service or runtime supplies it (``runtime.doorbell.nudge``).
    WakeCallback = Callable[[str, list[str]], object]


class Root(Protocol):
    """A file store as the views see it: its root, its collaborations, and what it keeps between transactions."""

    registries: dict[str, tuple[tuple[int, int, int, int], Registry]]

    @property
    def root(self) -> str: ...

    @property
    def handles(self) -> Handles: ...

    @property
    def on_wake(self) -> WakeCallback | None: ...

    def collabs(self) -> list[str]: ...

    def base(self, collab: str) -> str: ...

    def registry(self, collab: str) -> Registry: ...

    def transaction(self, collab: str) -> AbstractContextManager[Txn]: ...


class Txn(Protocol):
    """One collaboration's transaction (its lock held) as the views see it."""

    @property
    def store(self) -> Root: ...

    @property
    def root(self) -> str: ...

    @property
    def collab(self) -> str: ...

    @property
    def base(self) -> str: ...

    @property
    def key(self) -> tuple[int, int, int, int] | None: ...

    def existing(self, *parts: str, create: bool = False) -> str | None: ...

    def dir(self, *parts: str) -> str: ...

    def registry(self) -> Registry: ...

    def set_registry(self, reg: Registry | None) -> None: ...

    def events(self) -> list[dict[str, Any]]: ...

    def events_key(self) -> tuple[int, int, int, int] | None: ...

    def notes(self) -> list[dict[str, Any]]: ...

    def aliases_with_inbox(self) -> list[str]: ...

    def next_cseq(self) -> int: ...

    def map(self, alias: str) -> InboxMap: ...

    def drop_map(self, alias: str) -> None: ...
