"""SessionStart: who this session is in each collaboration it is bound to, and what waits for it."""

from __future__ import annotations

from agentmsg.domain import envelope
from agentmsg.hooks.base import (
    HookBase,
    _nothing,
)
from agentmsg.text import boundary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from agentmsg.domain.values import Registry

    Binding = tuple[str, str, Registry]

class SessionStartEvent(HookBase):

    def session_start(self, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
        lines = []
        for collab, alias, reg in binds:
            with self.txn(collab) as tx:
                st = self.load_state(tx, alias)
                if data.get("source") in ("clear", "compact"):
                    st["shown"] = {}  # the context that held them is gone: show them again
                self._fold_receipts(tx, alias, st)
                page = tx.unacked(alias, limit=1)
                self.save_state(tx, alias, st)
                env = self._envelope(tx, alias, reg)
            lines.append(self._identity(collab, alias, reg, page.total, page.requests)
                         + self._envelope_note(env))
        self.spec.session_started(self.env, self.root or "")
        return self.output(self._within_cap(lines)), _nothing

    def _within_cap(self, lines: list[str]) -> str:
        """One identity block per binding, as many as fit the cap; the rest are counted."""
        size = boundary.measure(self.unit)
        room = self.cap - 200  # the "more" line
        kept: list[str] = []
        for line in lines:
            if size("".join(kept)) + size(line) > room:
                break
            kept.append(line)
        left = len(lines) - len(kept)
        if left:
            kept.append(f"agentmsg: {left} more binding{'s' * (left != 1)} of this session did not fit here; "
                        f"`{self.cli} status` lists them.\n")
        return "".join(kept)

    def _identity(self, collab: str, alias: str, reg: Registry, total: int, requests: int) -> str:
        counts = f"{total} ({requests} request{'s' * (requests != 1)}, {total - requests} other)"
        opener = reg.opener_alias or next((a for a, p in reg.participants.items() if p.pin == reg.opener), "?")
        label, task = str(reg.label)[:64], str(reg.task)[:500]
        from agentmsg.text import injection as flags  # SessionStart only: its patterns cost milliseconds to compile

        own = opener == alias and reg.opener == self.pin  # this very session opened it and wrote label and task
        if own:
            role, author = "which this session opened", f"this session ({alias}), when it opened the collaboration"
        elif opener == alias:  # a handover moved the alias to this session; another session opened it
            role = f"which {alias} opened before this session took {alias} over"
            author = f"{alias}, the collaboration's opener, before this session took it over"
        else:
            role, author = f"opened by {boundary.one_line(opener)}", f"{opener}, the collaboration's opener"
        cli = f" The agentmsg CLI here is {self.cli}." if self.cli != "agentmsg" else ""
        return (
            f"agentmsg: this session ({self.pin}) is participant {alias} in collaboration {collab}, "
            f"{role}. "
            f"State root: {self.root}. Unacknowledged messages for {alias}: {counts}; they are quoted at "
            f"the next prompt inside an untrusted peer-data boundary, and "
            f"`{boundary.inbox_command(collab)}` lists them.{cli}\n"
            + boundary.peer_fields((("label", label), ("task", task)), flags.detect(label + "\n" + task), author,
                                   peer=not own)
        )

    def _envelope_note(self, env: envelope.Envelope | None) -> str:
        if env is None:
            return "\n"
        return (f" Stop continuations are enabled for this session until {envelope.iso(env.expires_at)}: "
                f"{env.remaining} of {env.slots} slots left.\n")
