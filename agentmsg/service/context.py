"""What one command runs against: the state root, the environment, the store (built once), the actor."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from agentmsg.domain.values import Pin
from agentmsg.errors import UsageError
from agentmsg.hosts import identity
from agentmsg.paths import resolve_root
from agentmsg.ports import Store
from agentmsg.service.messaging import Mailbox


class Ctx:
    """The resolved state root and environment of one command; the store and mailbox are built once."""

    def __init__(self, root: Path, root_source: str, env: Mapping[str, str], store: Store | None = None) -> None:
        self.root, self.root_source, self.env = root, root_source, env
        self._store = store
        self._mailbox: Mailbox | None = None

    @classmethod
    def create(cls, root_flag: str | None, env: Mapping[str, str] | None = None, *,
               store: Store | None = None) -> Ctx:
        env = dict(os.environ) if env is None else env
        root, source = resolve_root(root_flag, env)
        return cls(root, source, env, store)

    @property
    def store_url(self) -> str | None:
        """``AGENTMSG_STORE`` (the CLI's global ``--store URL`` sets it); None: the file store at the root."""
        return self.env.get("AGENTMSG_STORE") or None

    @property
    def store(self) -> Store:
        """``--store``/``AGENTMSG_STORE``'s store (and this root's mirror, started if none runs), else the root's."""
        if self._store is None:
            from agentmsg.runtime import doorbell  # a write that wakes a session rings its renderer

            if self.store_url:
                from agentmsg.backends import url as storeurl

                self._store = storeurl.open_store(self.store_url, on_wake=doorbell.nudge)
                self._start_mirror()
            else:
                from agentmsg.backends.file.store import FileStore

                self._store = FileStore(self.root, on_wake=doorbell.nudge)
        return self._store

    def _start_mirror(self) -> None:
        """The local root follows the remote store: hooks read it (agentmsg/resident/helper.py mirrors it)."""
        import sys

        from agentmsg.runtime import doorbell

        try:
            env = dict(self.env, AGENTMSG_STORE=self.store_url or "")
            doorbell.ensure_mirror(str(self.root), env, [sys.executable, "-m", "agentmsg"])
        except OSError:
            pass  # best effort: the next command or hook starts it

    @property
    def mailbox(self) -> Mailbox:
        if self._mailbox is None:
            self._mailbox = Mailbox(self.store)
        return self._mailbox

    def who(self, self_flag: str | None) -> Pin:
        """The acting pin (``identity.resolve``): a host session recorded in this root above this process decides."""
        return identity.resolve(self_flag, self.env, self.inside())

    def inside(self) -> tuple[int, Sequence[str]] | None:
        """The nearest host process above this one that a session's hooks recorded in this root, and its pins."""
        from agentmsg.runtime import facts  # /proc and ROOT/wake: only for commands that resolve a pin

        return facts.nearest_recorded(facts.recorded_hosts(str(self.root)))

    def collab(self, flag: str | None, who: Pin | None = None) -> str:
        """``--collab``, else the pin's only binding (which ``AGENTMSG_COLLAB``, if set, must name).

        Either may be an id, a unique label or a unique id prefix (``service/collabs``).
        """
        if flag:
            return self.named(flag, who)
        bound = self.store.bindings(str(who)) if who is not None else []
        env = self.env.get("AGENTMSG_COLLAB")
        if env:
            cid = self.named(env, who)
            # An exported variable goes stale when the session joins another collaboration: it never
            # chooses between bindings, and never names one the pin does not hold.
            if len(bound) > 1:
                raise UsageError(f"{who} is bound in {len(bound)} collaborations and AGENTMSG_COLLAB may be stale; "
                                 "pass --collab UUID")
            if bound and cid != bound[0][0]:
                raise UsageError(f"AGENTMSG_COLLAB={cid} is not one of {who}'s collaborations; pass --collab UUID")
            return cid
        if len(bound) == 1:
            return bound[0][0]
        if bound:
            raise UsageError(f"{who} is bound in {len(bound)} collaborations; pass --collab UUID")
        if who is not None:  # issue 30: say whose binding is missing, not only that no --collab was given
            raise UsageError(f"{who} has no binding: it is in no collaboration (join one, or pass --collab ID or "
                             "LABEL; agentmsg collabs lists them)")
        raise UsageError("no collaboration given: pass --collab ID or LABEL (agentmsg collabs lists them)")

    def named(self, text: str, who: Pin | None = None) -> str:
        """The collaboration ``text`` names: an id, a unique label or a unique id prefix (``service/collabs``)."""
        from agentmsg.service import collabs

        return collabs.resolve(self.store, text, who)
