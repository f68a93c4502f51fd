"""Markdown transcripts rendered from records. Pure: strings in, string out.

The one rule that keeps transcripts unforgeable: peer text never starts a
line.  Bodies are an indented code block (every line gets four spaces, so no
body line can be a header or close a fence), and one-line fields sit in code
spans after a label.  Line breaks other than ``\\n``, control characters and
invisible/bidi characters are shown as escapes, so no reader (a Markdown
renderer, ``grep '^## \\['``, a terminal) sees structure that is not there.
Every line a section writes outside its body block passes through
``escape.line`` whole, so a field forged in a record (an alias, a runtime, a
kind, an id) is escaped too, not only the free-text ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from agentmsg.domain.values import Message, Registry
from agentmsg.text import escape as visible


def escape_hidden(text: str) -> str:
    """Make every control, line-break and invisible character visible."""
    return visible.escape(text)


def one_line(text: str) -> str:
    """A code span holding ``text`` on a single line, whatever it contains."""
    shown = visible.line(text)
    longest = max((len(run) for run in re.findall(r"`+", shown)), default=0) if "`" in shown else 0
    fence = "`" * (longest + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") or not shown else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def body_block(body: str, label: str = "body") -> str:
    """A column-0 label, then the text as an indented code block.

    The label ends any list above it, so the indented text cannot continue
    a list item (where an indented ``## ...`` would render as a heading).
    """
    lines = body.split("\n") if body else ["(empty)"]
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # a heredoc's final newline ends the last line; it is not an empty line of its own
    return f"{label}:\n\n" + "".join(f"    {escape_hidden(line)}\n" for line in lines)


def _lines(lines: list[str]) -> str:
    """Header lines, each one line whatever a record's fields hold (``escape.line`` is idempotent)."""
    return "\n".join(visible.line(ln) for ln in lines)


def when(ts: str) -> str:
    """``2026-11-30T07:15:12.123Z`` -> ``2026-11-30 07:15 UTC``."""
    return f"{ts[:10]} {ts[11:16]} UTC"


def message_section(msg: Message) -> str:
    lines = [
        f"## [{msg.sender}→{msg.to}] {when(msg.ts)}",
        "",
        f"- id: `{msg.id}` (inbox seq {msg.seq})",
        f"- from: {msg.sender} ({msg.sender_runtime}) · kind: {msg.kind} · priority: {msg.priority}",
        f"- subject: {one_line(msg.subject)}",
    ]
    if msg.reply_to:
        lines.append(f"- reply to: `{msg.reply_to}`")
    if msg.broadcast:
        lines.append(f"- broadcast: `{msg.broadcast}`")
    if msg.flags:
        lines.append(f"- flags: instruction-like text ({', '.join(msg.flags)})")
    if getattr(msg, "handoff", None):  # a typed message (issue 31): its payload is the body's YAML
        from agentmsg.text.boundary import handoff_fields

        lines.append("- handoff: " + " · ".join(f"{k} {one_line(v)}" for k, v in handoff_fields(msg.handoff)))
    return _lines(lines) + "\n\n" + body_block(msg.body) + "\n"


_EVENTS = {
    "opened": "{alias} opened the collaboration ({runtime})",
    "joined": "{alias} joined ({runtime})",
    "succeeded": "{alias} was taken over by a new session ({runtime}); previous pin {old_pin}",
    "left": "{alias} left",
    "closed": "closed by {by}",
    "notify-set": "{alias} changed notification adapter",
    "policy-set": "{alias} set who may join: {policy}",
    "invited": "{alias} issued a one-time ticket (for {for}; until {expires})",
    "killed": "{target}'s session was stopped by {by}",
    "claimed": "{alias} claimed {pattern} ({mode}) until {expires}",
    "released": "{alias}'s claim on {patterns} released{forced}",
    "spawned": "{alias} started {target} ({host}, {how}; {where} {target_window}, pid {pid}): {pin}",
    "spawn-failed": "{alias}'s spawn of {target} failed: {why}",
}


def event_text(ev: dict[str, Any]) -> str:
    text: str = _EVENTS.get(ev["type"], ev["type"]).format_map(_Fields(_shown(ev)))
    return text + (f" (reason: {ev['reason']})" if ev.get("reason") else "")


def _shown(ev: dict[str, Any]) -> dict[str, Any]:
    """An event's fields as a line shows them: a ticket's alias (any, when it names none) and its expiry."""
    if ev.get("type") in ("claimed", "released"):
        return _claim_fields(ev)
    if ev.get("type") != "invited":
        return ev
    import time

    at = ev.get("expires_at")
    expires = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at)) if isinstance(at, (int, float)) else "?"
    return {**ev, "for": ev.get("for") or "any alias", "expires": expires}


def _claim_fields(ev: dict[str, Any]) -> dict[str, Any]:
    """A claim's line (docs/CLAIMS.md): its mode and expiry; a release's patterns, and who forced it."""
    import time

    at = ev.get("expires_at")
    expires = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at)) if isinstance(at, (int, float)) else "?"
    pats = ev.get("patterns")
    shown = ", ".join(str(p) for p in pats) if isinstance(pats, list) and pats else "everything"
    return {**ev, "alias": ev.get("alias") or ev.get("target") or "?", "mode": "exclusive" if ev.get("exclusive")
            else "shared", "expires": expires, "patterns": shown,
            "forced": f" by {ev.get('by')} (forced)" if ev.get("force") else ""}


def event_section(ev: dict[str, Any]) -> str:
    text = _EVENTS.get(ev["type"], ev["type"]).format_map(_Fields(_shown(ev)))
    out = []
    if ev["type"] == "opened":
        out += [f"# Collaboration {one_line(ev['label'])}", "",
                f"- id: `{ev['collab']}`", f"- task: {one_line(ev['task'])}", ""]
    out.append(f"### {when(ev['ts'])} · {escape_hidden(text)}")
    if ev.get("reason"):
        out.append(f"- reason: {one_line(ev['reason'])}")
    if ev.get("unresolved"):
        for alias, ids in sorted(ev["unresolved"].items()):
            out.append(f"- unresolved for {alias}: {len(ids)} message(s)")
    return _lines(out) + "\n\n"


class _Fields(dict[str, object]):
    def __missing__(self, key: str) -> str:
        return "?"


def log_section(rec: dict[str, Any]) -> str:
    head = f"### {when(rec['ts'])} · note by {escape_hidden(rec['author'])} · `{rec['id']}`"
    lines = [head]
    if rec.get("corrects"):
        lines.append(f"- corrects: `{rec['corrects']}`")
    return _lines(lines) + "\n\n" + body_block(rec["text"], "note") + "\n"


def inbox_header(collab: str, alias: str) -> str:
    return _lines([f"# Inbox of {alias}", "", f"- collaboration: `{collab}`"]) + "\n\n"


def inbox_md(reg: Registry, alias: str, msgs: Iterable[Message]) -> str:
    return inbox_header(reg.collab, alias) + "".join(message_section(m) for m in msgs)


def collaboration_md(
    reg: Registry,
    events: list[dict[str, Any]],
    by_alias: dict[str, list[Message]],
    notes: list[dict[str, Any]],
) -> str:
    """Every event, message and note in collaboration order (``cseq``)."""
    items: list[tuple[int, str]] = [(e["cseq"], event_section(e)) for e in events]
    items += [(n["cseq"], log_section(n)) for n in notes]
    items += [(m.cseq, message_section(m)) for msgs in by_alias.values() for m in msgs]
    return "".join(text for _, text in sorted(items, key=lambda item: item[0]))
