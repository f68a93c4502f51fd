"""Domain values -> JSON-ready payloads: the only mapping, shared by the CLI and the MCP server."""

from __future__ import annotations

from typing import Any

from ..domain.values import Message, Page

Payload = dict[str, Any]


def message(msg: Message) -> Payload:
    return {
        "id": msg.id, "collab": msg.collab, "from": msg.sender, "from_runtime": msg.sender_runtime,
        "to": msg.to, "kind": msg.kind, "priority": msg.priority, "subject": msg.subject,
        "body": msg.body, "reply_to": msg.reply_to, "broadcast": msg.broadcast, "ts": msg.ts,
        "seq": msg.seq, "flags": list(msg.flags),
    }


def page(page_: Page, *, offset: int = 0) -> Payload:
    return {"count": page_.total, "shown": len(page_.messages), "offset": offset,
            "more": max(0, page_.total - offset - len(page_.messages)), "requests": page_.requests,
            "high": page_.high, "messages": [message(m) for m in page_.messages]}


def note(rec: dict[str, Any]) -> Payload:
    return {k: rec.get(k) for k in ("id", "author", "text", "corrects", "ts", "seq")}
