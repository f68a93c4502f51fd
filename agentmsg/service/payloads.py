"""Domain values -> JSON-ready payloads: the only mapping, shared by the CLI and the MCP server."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any, TypedDict

from agentmsg.domain.rules import thread_of
from agentmsg.domain.search import Hit, Query
from agentmsg.domain.values import Message, Page

if TYPE_CHECKING:
    from typing_extensions import NotRequired

Payload = dict[str, Any]

#: What every front end (the CLI's ``--json``, the MCP tools) says of a message, a page of them, a search hit
#: and a log note: the typed shapes that cross from the service to them.
MessagePayload = TypedDict("MessagePayload", {
    "id": str, "collab": str, "from": str, "from_runtime": str, "to": str, "kind": str, "priority": str,
    "subject": str, "body": str, "reply_to": "str | None", "broadcast": "str | None", "ts": str, "seq": int,
    "flags": list[str], "thread": str, "handoff": "NotRequired[dict[str, Any]]"})


class PagePayload(TypedDict):
    count: int
    shown: int
    offset: int
    more: int
    requests: int
    high: int
    messages: list[MessagePayload]


HitPayload = TypedDict("HitPayload", {
    "type": str, "id": "str | None", "collab": "str | None", "from": "str | None", "from_runtime": "str | None",
    "to": "str | None", "kind": str, "priority": "str | None", "subject": str, "ts": "str | None",
    "reply_to": "str | None", "flags": list[str], "score": float, "snippet": str, "show": str})


class NotePayload(TypedDict):
    id: str | None
    author: str | None
    text: str | None
    corrects: str | None
    ts: str | None
    seq: int | None


def message(msg: Message) -> MessagePayload:
    out: MessagePayload = {
        "id": msg.id, "collab": msg.collab, "from": msg.sender, "from_runtime": msg.sender_runtime,
        "to": msg.to, "kind": msg.kind, "priority": msg.priority, "subject": msg.subject,
        "body": msg.body, "reply_to": msg.reply_to, "broadcast": msg.broadcast, "ts": msg.ts,
        "seq": msg.seq, "flags": list(msg.flags), "thread": thread_of(msg),
    }
    if msg.handoff is not None:  # a typed message (issue 31): its parsed payload; untyped output is unchanged
        out["handoff"] = msg.handoff
    return out


def page(page_: Page, *, offset: int = 0) -> PagePayload:
    return {"count": page_.total, "shown": len(page_.messages), "offset": offset,
            "more": max(0, page_.total - offset - len(page_.messages)), "requests": page_.requests,
            "high": page_.high, "messages": [message(m) for m in page_.messages]}


def ack_lines(payload: Payload) -> list[str]:
    """The ack result as text, one line per message in the order named (the CLI and the MCP tool print it)."""
    return [f"{'already acknowledged' if r['already'] else 'acknowledged'}: {r['message']} at {r['acknowledged_at']}"
            for r in payload["results"]]


def hit(h: Hit, query: Query, root_flag: str | None = None) -> HitPayload:
    """One search hit, with the command that shows it whole (``--root`` only when the search was given one)."""
    from agentmsg.domain.search import snippet

    where = f" --root {shlex.quote(root_flag)}" if root_flag else ""
    if h.message is not None:
        m = h.message
        return {"type": "message", "id": m.id, "collab": m.collab, "from": m.sender, "from_runtime": m.sender_runtime,
                "to": m.to, "kind": m.kind, "priority": m.priority, "subject": m.subject, "ts": m.ts,
                "reply_to": m.reply_to, "flags": list(m.flags), "score": h.score,
                "snippet": snippet(query, m.body if query_in(query, m.body) else m.subject),
                "show": f"agentmsg show {m.id} --collab {m.collab}{where}"}
    n = h.note or {}
    return {"type": "note", "id": n.get("id"), "collab": n.get("collab"), "from": n.get("author"),
            "from_runtime": None, "to": None, "kind": "note", "priority": None, "subject": "", "ts": n.get("ts"),
            "reply_to": None, "flags": [], "score": h.score, "snippet": snippet(query, str(n.get("text", ""))),
            "show": f"agentmsg log show --collab {n.get('collab')}{where}"}


def query_in(query: Query, text: str) -> bool:
    from agentmsg.domain.search import words

    have = " " + " ".join(words(text)) + " "
    return any(" " + " ".join(t) + " " in have for t in query.terms)


def note(rec: dict[str, Any]) -> NotePayload:
    return {"id": rec.get("id"), "author": rec.get("author"), "text": rec.get("text"),
            "corrects": rec.get("corrects"), "ts": rec.get("ts"), "seq": rec.get("seq")}
