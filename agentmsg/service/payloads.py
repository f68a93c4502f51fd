"""Domain values -> JSON-ready payloads: the only mapping, shared by the CLI and the MCP server."""

from __future__ import annotations

import shlex
from typing import Any

from agentmsg.domain.search import Hit, Query
from agentmsg.domain.values import Message, Page

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


def ack_lines(payload: Payload) -> list[str]:
    """The ack result as text, one line per message in the order named (the CLI and the MCP tool print it)."""
    return [f"{'already acknowledged' if r['already'] else 'acknowledged'}: {r['message']} at {r['acknowledged_at']}"
            for r in payload["results"]]


def hit(h: Hit, query: Query, root_flag: str | None = None) -> Payload:
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


def note(rec: dict[str, Any]) -> Payload:
    return {k: rec.get(k) for k in ("id", "author", "text", "corrects", "ts", "seq")}
