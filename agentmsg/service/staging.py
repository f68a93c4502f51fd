"""A send as a request, and its outcome, as text: what a writer stages on a combining store (``ports.Combining``).

On PostgreSQL a send that finds its collaboration locked stages its request, and whichever writer holds
the lock applies it (``Mailbox._send``) in a transaction of its own (docs/POSTGRES.md, "Many writers, one
collaboration").  The request carries everything ``send`` was given; the outcome carries what ``send``
returns, or the error it raised, which the writer that asked raises as its own: the same class, line and
exit code as if it had applied its request itself.  Both are JSON, read back only by the same database
role that wrote them.
"""

from __future__ import annotations

import json
from typing import Any

from agentmsg import errors
from agentmsg.domain.values import Draft, Message, Pin, Sent

_DRAFT = Draft.__slots__
_MESSAGE = Message.__slots__


def send_request(who: Pin, draft: Draft, flags: tuple[str, ...]) -> str:
    return json.dumps({"send": {name: getattr(draft, name) for name in _DRAFT},
                       "who": [who.runtime, who.session], "flags": list(flags)}, sort_keys=True)


def send_of(request: str) -> tuple[Pin, Draft, tuple[str, ...]]:
    """The pin, draft and flags of a ``send_request``."""
    got = json.loads(request)
    runtime, session = got["who"]
    return Pin(runtime, session), Draft(**got["send"]), tuple(got["flags"])


def outcome(sent: list[Sent]) -> str:
    return json.dumps({"sent": [[{name: getattr(s.message, name) for name in _MESSAGE}, s.already] for s in sent]})


def refused(exc: Exception) -> str:
    """The outcome of a request that raised ``exc``: its class, arguments and attributes."""
    if isinstance(exc, errors.AgentmsgError) and getattr(errors, type(exc).__name__, None) is type(exc):
        attrs = {k: v for k, v in vars(exc).items() if _plain(v)}
        return json.dumps({"error": type(exc).__name__, "args": [a for a in exc.args if _plain(a)], "attrs": attrs})
    return json.dumps({"bug": f"{type(exc).__name__}: {exc}"})


def sent(text: str) -> list[Sent]:
    """What ``send`` returns for the outcome ``text``, or the error it raised, raised again."""
    got: dict[str, Any] = json.loads(text)
    if "sent" in got:
        out = []
        for fields, already in got["sent"]:
            out.append(Sent(Message(**fields), already=bool(already)))
        return out
    if "error" in got:
        cls = getattr(errors, str(got["error"]), None)
        if isinstance(cls, type) and issubclass(cls, errors.AgentmsgError):
            exc = cls.__new__(cls)
            Exception.__init__(exc, *got["args"])
            for key, value in got["attrs"].items():
                setattr(exc, key, tuple(value) if isinstance(value, list) else value)
            raise exc
    raise RuntimeError(f"a send applied by another writer failed: {got.get('bug', text)}")


def _plain(value: object) -> bool:
    """A value JSON keeps as it is (and a tuple, which comes back as one)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False
