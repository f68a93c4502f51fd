"""The store API the behaviour tests were written against, over the service and a backend.

``Mailbox`` (the service) takes the store once and the acting pin per
call; these tests also read receipts, history and transcripts, so this
wrapper adds those few reads.  ``FileStore(root)`` and ``MemoryStore()``
give the same API over either backend, which is what lets one suite run
against both (tests/backends/test_contract.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentmsg.backends.file.store import FileStore as FilePort
from agentmsg.backends.memory import MemoryStore as MemoryPort
from agentmsg.domain import kinds, rules
from agentmsg.domain.values import Draft, Message, MessageState, Page, Pin, Registry, Sent
from agentmsg.errors import NotFound
from agentmsg.ports import Store
from agentmsg.service.messaging import Mailbox

__all__ = ["Draft", "FileStore", "Inbox", "MemoryStore", "Sent", "TestStore"]


class Inbox:
    def __init__(self, alias: str, page: Page, problems: list[dict[str, Any]]) -> None:
        self.alias, self.messages, self.problems = alias, page.messages, problems
        self.total = page.total


class TestStore:
    __test__ = False

    def __init__(self, port: Store) -> None:
        self.port = port
        self.mailbox = Mailbox(port)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.port, name)

    @property
    def root(self) -> Path:
        return Path(self.port.root)  # type: ignore[attr-defined]

    def open(self, opener: Pin, alias: str, label: str, task: str, notify: dict[str, Any] | None = None) -> Registry:
        return self.mailbox.open(opener, alias, label, task, notify)

    def join(self, collab: str, who: Pin, alias: str, **kw: Any) -> Registry:
        return self.mailbox.join(collab, who, alias, **kw)

    def leave(self, collab: str, who: Pin) -> str:
        return self.mailbox.leave(collab, who)

    def close(self, collab: str, who: Pin) -> dict[str, list[str]]:
        return self.mailbox.close(collab, who)

    def set_notify(self, collab: str, who: Pin, notify: dict[str, Any]) -> None:
        self.mailbox.set_notify(collab, who, notify)

    def send(self, collab: str, who: Pin, draft: Draft) -> list[Sent]:
        from agentmsg.text.injection import detect

        return self.mailbox.send(collab, who, draft, flags=tuple(detect(draft.subject + "\n" + draft.body)))

    def inbox(self, collab: str, alias: str) -> Inbox:
        page = self.port.unacked(collab, alias, limit=1 << 30, priority_first=False)
        return Inbox(alias, page, page.problems)

    def messages(self, collab: str, alias: str) -> list[Message]:
        return list(self.port.history(collab, alias))

    def message(self, collab: str, message_id: str) -> Message:
        return self.mailbox.message(collab, message_id)

    def find_message(self, message_id: str) -> Message:
        return self.mailbox.find(message_id)

    def state(self, collab: str, msg: Message) -> MessageState:
        return self.mailbox.state(msg)

    def ack(self, collab: str, who: Pin, message_id: str) -> tuple[dict[str, Any], bool]:
        (_mid, rec, already), = self.mailbox.ack(collab, who, [message_id])
        return rec, already

    def receipt(self, collab: str, alias: str, fields: dict[str, Any]) -> dict[str, Any]:
        with self.port.transaction(collab) as tx:
            return tx.append_receipts(alias, [fields])[0]

    def log_append(self, collab: str, who: Pin, text: str, corrects: str | None = None) -> dict[str, Any]:
        return self.mailbox.log_append(collab, who, text, corrects)

    def log_entries(self, collab: str) -> list[dict[str, Any]]:
        return self.port.notes(collab)

    def render(self, collab: str) -> list[Path]:
        from agentmsg.backends.file import transcripts

        with self.port.transaction(collab) as tx:
            return [Path(p) for p in transcripts.render_all(tx)]  # type: ignore[arg-type]

    def require_alias(self, reg: Registry, who: Pin) -> str:
        return rules.require_alias(reg, who)

    def _replay(self, collab: str) -> Registry:
        reg = rules.replay(self.port.events(collab))
        if reg is None:
            raise NotFound(collab)
        return reg

    def inbox_total(self, collab: str, alias: str) -> int:
        return self.port.last_seq(collab, alias)


def FileStore(root: Path | str, **kw: Any) -> TestStore:
    from agentmsg.runtime import doorbell

    kw.setdefault("on_wake", doorbell.nudge)  # as the CLI and the hooks build theirs
    return TestStore(FilePort(root, **kw))


def MemoryStore() -> TestStore:
    return TestStore(MemoryPort())


_ = kinds
