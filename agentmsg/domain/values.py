"""Value types: one ``Message``, the registry, drafts and results.

Plain slotted classes rather than dataclasses: the hooks build ``Message``
and ``Registry`` on every prompt, where importing ``dataclasses`` (and the
``re``/``inspect`` it pulls in) would cost more than the hook's whole
budget.  Treat instances as immutable; ``replace`` returns a changed copy.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, TypeVar

    V = TypeVar("V", bound="Value")

#: The shape of one stored record or event as the port hands it over
#: (a JSON object: ``type``, ``ts``, ``seq`` plus its own fields).
Event = dict


class Value:
    """Equality, repr and ``replace`` from ``__slots__``."""

    __slots__: tuple[str, ...] = ()

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and isinstance(other, Value) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash((type(self).__name__, *(repr(f) for f in self._fields())))

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({inner})"

    def replace(self: V, **changes: Any) -> V:
        new = object.__new__(type(self))
        for name in self.__slots__:
            object.__setattr__(new, name, changes[name] if name in changes else getattr(self, name))
        return new


class Pin(Value):
    """An exact native session identity, ``runtime:session_id``."""

    __slots__ = ("runtime", "session")
    runtime: str
    session: str

    def __init__(self, runtime: str, session: str) -> None:
        self.runtime, self.session = runtime, session

    def __str__(self) -> str:
        return f"{self.runtime}:{self.session}"

    @property
    def human(self) -> bool:
        return self.runtime == "human"


class Participant(Value):
    __slots__ = ("active", "alias", "joined_at", "notify", "pin", "runtime")
    alias: str
    pin: str
    runtime: str
    notify: dict[str, Any]
    joined_at: str
    active: bool

    def __init__(self, alias: str, pin: str, runtime: str, notify: dict[str, Any] | None = None,
                 joined_at: str = "", active: bool = True) -> None:
        self.alias, self.pin, self.runtime = alias, pin, runtime
        self.notify = notify if notify is not None else {"adapter": "hook"}
        self.joined_at, self.active = joined_at, active


class Registry(Value):
    """The authoritative alias -> participant map of one collaboration."""

    __slots__ = ("closed_at", "collab", "handovers", "label", "opened_at", "opener", "opener_alias",
                 "participants", "policy", "task", "tickets")
    collab: str
    label: str
    task: str
    opener: str
    opener_alias: str
    opened_at: str
    closed_at: str | None
    participants: dict[str, Participant]
    #: alias -> pin its holder agreed may take it over (consumed by the takeover)
    handovers: dict[str, str]
    #: the contact policy: ``open`` or ``invite-only`` (docs/LIFECYCLE.md, "Invitations")
    policy: str
    #: sha256 of each unused ticket -> ``{"for": alias or None, "expires_at": epoch seconds, "by": pin}``
    tickets: dict[str, dict[str, Any]]

    def __init__(self, collab: str, label: str, task: str, opener: str, opened_at: str, closed_at: str | None,
                 participants: dict[str, Participant], *, opener_alias: str = "",
                 handovers: dict[str, str] | None = None, policy: str = "open",
                 tickets: dict[str, dict[str, Any]] | None = None) -> None:
        self.collab, self.label, self.task, self.opener = collab, label, task, opener
        self.opened_at, self.closed_at, self.participants = opened_at, closed_at, participants
        self.opener_alias = opener_alias
        self.handovers = handovers if handovers is not None else {}
        self.policy = policy
        self.tickets = tickets if tickets is not None else {}

    @property
    def closed(self) -> bool:
        return self.closed_at is not None

    def active(self) -> dict[str, Participant]:
        return {a: p for a, p in self.participants.items() if p.active}

    def alias_of(self, pin: str) -> str | None:
        for a, p in self.participants.items():
            if p.active and p.pin == pin:
                return a
        return None

    def holder(self, alias: str) -> str | None:
        p = self.participants.get(alias)
        return p.pin if p is not None and p.active else None


class Message(Value):
    __slots__ = ("body", "broadcast", "collab", "cseq", "digest", "flags", "handoff", "id", "kind", "priority",
                 "reply_to", "sender", "sender_pin", "sender_runtime", "seq", "subject", "thread", "to", "ts")
    id: str
    collab: str
    sender: str
    sender_pin: str
    sender_runtime: str
    to: str
    kind: str
    priority: str
    subject: str
    body: str
    reply_to: str | None
    ts: str
    seq: int
    digest: str
    broadcast: str | None
    flags: tuple[str, ...]
    cseq: int
    #: a typed message's type, payload, correlation, run, phase and thread (domain/handoffs.py); None: untyped
    handoff: dict[str, Any] | None
    #: the thread, as stored: an explicit ``--thread NAME``, or the root of its reply chain; None: its own id
    #: (``domain.rules.thread_of`` gives every message's thread)
    thread: str | None

    def __init__(self, *, id: str, collab: str, sender: str, sender_runtime: str, to: str, kind: str,
                 priority: str, subject: str, body: str, reply_to: str | None, ts: str, seq: int, digest: str,
                 broadcast: str | None = None, flags: tuple[str, ...] = (), cseq: int = 0,
                 sender_pin: str = "", handoff: dict[str, Any] | None = None, thread: str | None = None) -> None:
        self.id, self.collab, self.sender, self.sender_runtime, self.to = id, collab, sender, sender_runtime, to
        self.kind, self.priority, self.subject, self.body, self.reply_to = kind, priority, subject, body, reply_to
        self.ts, self.seq, self.digest, self.broadcast = ts, seq, digest, broadcast
        self.flags, self.cseq, self.sender_pin = tuple(flags), cseq, sender_pin
        self.handoff, self.thread = handoff, thread

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> Message:
        return cls(id=rec["id"], collab=rec["collab"], sender=rec["sender"], sender_runtime=rec["sender_runtime"],
                   to=rec["to"], kind=rec["kind"], priority=rec["priority"], subject=rec["subject"],
                   body=rec["body"], reply_to=rec.get("reply_to"), ts=rec["ts"], seq=rec["seq"],
                   digest=rec["digest"], broadcast=rec.get("broadcast"), flags=tuple(rec.get("flags") or ()),
                   cseq=rec.get("cseq", 0), sender_pin=rec.get("sender_pin", ""), handoff=rec.get("handoff"),
                   thread=rec.get("thread"))


class Draft(Value):
    """What a sender asks to send: the request object of ``send``."""

    __slots__ = ("body", "handoff", "id", "kind", "priority", "reply_to", "subject", "thread", "to")
    to: str
    kind: str
    priority: str
    subject: str
    body: str
    id: str | None
    reply_to: str | None
    #: a typed send: ``{"type", "payload", "workflow_run_id", "phase", "declared"}`` (domain/handoffs.py)
    handoff: dict[str, Any] | None
    #: an explicit thread name (``send --thread NAME``); a reply is in its parent's thread
    thread: str | None

    def __init__(self, to: str = "", kind: str = "update", priority: str = "normal", subject: str = "",
                 body: str = "", id: str | None = None, reply_to: str | None = None,
                 handoff: dict[str, Any] | None = None, thread: str | None = None) -> None:
        self.to, self.kind, self.priority, self.subject, self.body = to, kind, priority, subject, body
        self.id, self.reply_to, self.handoff, self.thread = id, reply_to, handoff, thread


class Sent(Value):
    __slots__ = ("already", "message")
    message: Message
    already: bool

    def __init__(self, message: Message, already: bool) -> None:
        self.message, self.already = message, already


class Page(Value):
    """Some unacknowledged messages, in presentation order, and how many there are in all."""

    __slots__ = ("high", "messages", "problems", "requests", "skipped", "total")
    messages: list[Message]
    total: int
    requests: int
    high: int
    #: unacknowledged messages left out because the reader asked to skip them
    skipped: int
    #: lines the reader had to skip (torn or damaged), as ``{"path", "offset", "reason", "torn"}``
    problems: list[dict[str, Any]]

    def __init__(self, messages: list[Message], total: int, requests: int = 0, high: int = 0,
                 skipped: int = 0, problems: list[dict[str, Any]] | None = None) -> None:
        self.messages, self.total, self.requests, self.high = messages, total, requests, high
        self.skipped, self.problems = skipped, problems or []

    @property
    def more(self) -> int:
        return max(0, self.total - len(self.messages))


class MessageState(Value):
    """A message's distinct states: stored, presented, acknowledged, replied (and notify results)."""

    __slots__ = ("acknowledged", "enqueued", "notify", "presented", "replied")
    enqueued: str
    presented: list[dict[str, Any]]
    acknowledged: str | None
    replied: list[str]
    notify: dict[str, Any] | None

    def __init__(self, enqueued: str, presented: list[dict[str, Any]], acknowledged: str | None,
                 replied: list[str], notify: dict[str, Any] | None) -> None:
        self.enqueued, self.presented, self.acknowledged = enqueued, presented, acknowledged
        self.replied, self.notify = replied, notify

    @property
    def label(self) -> str:
        if self.acknowledged:
            return "acknowledged"
        if self.presented:
            return "presented"
        return "enqueued"

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in ("enqueued", "presented", "acknowledged", "replied", "notify")}
