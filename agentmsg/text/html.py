"""One self-contained HTML page per collaboration. Pure: records in, a string out.

The rule that keeps it unforgeable: every piece of peer text (labels,
tasks, subjects, bodies, notes, reasons, aliases) goes through :func:`text`,
which makes hidden characters visible (the escape table transcripts use)
and then ``html.escape``s it, so no stored text can open an element, close
one, or carry an attribute.  Structure (one ``<h2 class="msg-head">`` per
message, the metadata lists) is written only by this module.  The page has
inline CSS and nothing else: no script, no external resource, and a
Content-Security-Policy that forbids both, as a second wall.
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping
from typing import Any

from agentmsg.domain.values import Message, MessageState, Registry
from agentmsg.text import escape as visible
from agentmsg.text.transcript import event_text, when

CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1rem 1.5rem;color:#1d232a;
background:#fafafa}
h1{font-size:1.5rem;margin:.2rem 0}
header.collab{border-bottom:2px solid #ccd;margin-bottom:1rem;padding-bottom:.5rem}
table.people{border-collapse:collapse;margin:.5rem 0}
table.people td,table.people th{border:1px solid #ccd;padding:.2rem .6rem;text-align:left}
article.msg{background:#fff;border:1px solid #ccd;border-left:4px solid #5677a8;border-radius:4px;
margin:.8rem 0;padding:.5rem .9rem}
article.msg.request{border-left-color:#b3641b}
article.msg.flagged{outline:2px dashed #c0392b}
h2.msg-head{font-size:1rem;margin:.1rem 0 .4rem}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:.1rem .8rem;margin:.3rem 0;font-size:.9rem}
dl.meta dt{color:#556}
dl.meta dd{margin:0;overflow-wrap:anywhere}
pre.body{white-space:pre-wrap;overflow-wrap:anywhere;background:#f3f4f7;padding:.5rem .7rem;margin:.4rem 0;
border-radius:3px;font:13px/1.4 ui-monospace,monospace}
.state{display:inline-block;border-radius:3px;padding:0 .4rem;font-size:.85rem;color:#fff;background:#777}
.state.acknowledged{background:#2e7d32}.state.presented{background:#b8860b}.state.enqueued{background:#777}
.state.replied{background:#1565c0}
p.flags{color:#c0392b;font-weight:600;margin:.2rem 0}
div.replies{margin-left:1.5rem;border-left:2px solid #dde;padding-left:.8rem}
section.event,section.note{color:#445;margin:.6rem 0;font-size:.92rem}
section.event h3,section.note h3{font-size:.92rem;margin:.1rem 0;font-weight:600}
code{font:13px ui-monospace,monospace}
"""

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; script-src 'none'"


def text(value: object) -> str:
    """Peer text, safe anywhere in element content or a quoted attribute."""
    return html.escape(visible.escape(str(value)), quote=True)


def _dl(rows: list[tuple[str, str]]) -> str:
    return '<dl class="meta">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _state_html(state: MessageState | None) -> str:
    if state is None:
        return '<span class="state enqueued">enqueued</span>'
    parts = [f'<span class="state {state.label}">{state.label}</span>']
    if state.replied:
        parts.append('<span class="state replied">replied</span>')
    detail = [f"enqueued {text(when(state.enqueued))}"]
    if state.presented:
        detail.append(f"presented {len(state.presented)}× (last {text(when(str(state.presented[-1]['ts'])))})")
    if state.acknowledged:
        detail.append(f"acknowledged {text(when(state.acknowledged))}")
    if state.replied:
        detail.append("replied by " + ", ".join(f'<a href="#m-{text(r)}"><code>{text(r)}</code></a>'
                                                 for r in state.replied))
    if state.notify is not None:
        ok = "ok" if state.notify.get("ok") else "FAILED"
        detail.append(f"notify {ok} ({text(state.notify.get('detail', ''))})")
    return " ".join(parts) + " · " + "; ".join(detail)


def message_html(msg: Message, state: MessageState | None) -> str:
    """One message as an ``<article>`` of its own (a thread nests replies: :meth:`Threads.html`)."""
    return _open_article(msg, state) + "</article>\n"


def _open_article(msg: Message, state: MessageState | None, depth: int = 0, note: str = "") -> str:
    """A message's ``<article>`` up to its replies (left open)."""
    classes = ["msg", "request" if msg.kind == "request" else "update"] + (["flagged"] if msg.flags else [])
    rows = [
        ("id", f"<code>{text(msg.id)}</code> (inbox seq {text(msg.seq)})"),
        ("from", f"{text(msg.sender)} ({text(msg.sender_runtime)}) <code>{text(msg.sender_pin)}</code>"
         if msg.sender_pin else f"{text(msg.sender)} ({text(msg.sender_runtime)})"),
        ("to", text(msg.to)),
        ("kind", f"{text(msg.kind)} · priority {text(msg.priority)}"),
        ("subject", text(msg.subject)),
        ("state", _state_html(state)),
    ]
    if msg.reply_to:
        target = msg.reply_to.rpartition("/")[2]
        rows.append(("reply to", f'<a href="#m-{text(target)}"><code>{text(msg.reply_to)}</code></a>'))
    if getattr(msg, "handoff", None):  # a typed message (issue 31)
        from agentmsg.text.boundary import handoff_fields

        rows.append(("handoff", " · ".join(f"{text(k)} <code>{text(v)}</code>" for k, v in
                                          handoff_fields(msg.handoff))))
    if depth or note:
        rows.append(("thread", text("; ".join(filter(None, [f"reply depth {depth}" if depth else "", note])))))
    if msg.broadcast:
        rows.append(("broadcast", f"<code>{text(msg.broadcast)}</code>"))
    flags = (f'<p class="flags">⚠ instruction-like text: {text(", ".join(msg.flags))}</p>'
             if msg.flags else "")
    head = f"[{text(msg.sender)} → {text(msg.to)}] {text(when(msg.ts))}"
    return (f'<article class="{" ".join(classes)}" id="m-{text(msg.id)}">'
            f'<h2 class="msg-head">{head}</h2>{flags}{_dl(rows)}'
            f'<pre class="body">{text(msg.body) if msg.body else "(empty)"}</pre>')


def event_html(ev: Mapping[str, Any]) -> str:
    extra = ""
    if ev.get("unresolved"):
        extra = "".join(f"<div>unresolved for {text(a)}: {len(ids)} message(s)</div>"
                        for a, ids in sorted(ev["unresolved"].items()))
    return (f'<section class="event"><h3>{text(when(str(ev["ts"])))} · {text(event_text(dict(ev)))}</h3>'
            f"{extra}</section>\n")


def note_html(rec: Mapping[str, Any]) -> str:
    fix = f" · corrects <code>{text(rec['corrects'])}</code>" if rec.get("corrects") else ""
    return (f'<section class="note" id="n-{text(rec.get("id", ""))}"><h3>{text(when(str(rec["ts"])))} · note by '
            f"{text(rec.get('author', '?'))}{fix}</h3><pre class=\"body\">{text(rec.get('text', ''))}</pre>"
            "</section>\n")


def _people(reg: Registry) -> str:
    rows = "".join(
        f"<tr><td>{text(a)}</td><td>{text(p.runtime)}</td><td><code>{text(p.pin)}</code></td>"
        f"<td>{'active' if p.active else 'left'}</td><td>{text(p.notify.get('adapter', 'hook'))}</td></tr>"
        for a, p in sorted(reg.participants.items()))
    return ('<table class="people"><tr><th>alias</th><th>runtime</th><th>pin</th><th>status</th>'
            f"<th>notify</th></tr>{rows}</table>")


#: Replies nest visually this deep; a deeper reply is drawn at this indentation, after the message it
#: answers, with its real depth in its ``thread`` row.  Only the drawing stops nesting: every message is on the
#: page (a browser's parser flattens elements nested hundreds deep on its own, and indentation runs off screen).
NEST_MAX = 8


class Threads:
    """Messages in collaboration order, each placed exactly once: under the message it answers, or as a root.

    A reply nests under the earliest message with the id it answers when that message comes before it; any
    other message is a root, and ``why`` says why one with a ``reply_to`` is (a reply to an id not in this
    collaboration, to itself, or to a later message, which only a forged record can be).  Parents always
    come first, so a ``reply_to`` cycle can neither hide a message nor loop.
    """

    def __init__(self, messages: list[Message]) -> None:
        self.ordered = sorted(messages, key=lambda m: m.cseq)
        first: dict[str, int] = {}
        for i, m in enumerate(self.ordered):
            first.setdefault(m.id, i)
        self.roots: list[int] = []
        self.children: dict[int, list[int]] = {}
        self.why: dict[int, str] = {}
        for i, m in enumerate(self.ordered):
            parent = m.reply_to.rpartition("/")[2] if m.reply_to else None
            at = first.get(parent) if parent is not None else None
            if at is not None and at < i:
                self.children.setdefault(at, []).append(i)
                continue
            self.roots.append(i)
            if parent is not None:
                self.why[i] = ("it answers itself" if parent == m.id else
                               "the message it answers comes later" if at is not None else
                               "the message it answers is not in this collaboration")

    def html(self, root: int, states: Mapping[str, MessageState]) -> str:
        """One thread, drawn without recursion: a chain thousands deep is as safe as a single reply."""
        out: list[str] = []
        stack: list[tuple[int, int]] = [(root, 0)]  # (position, depth); position -1 closes a replies block
        while stack:
            i, depth = stack.pop()
            if i < 0:
                out.append("</div></article>\n")
                continue
            m, kids = self.ordered[i], self.children.get(i, [])
            notes = [self.why[i]] if i in self.why else []
            if depth > NEST_MAX:
                notes.append(f"drawn at nesting level {NEST_MAX}, below the message it answers")
            out.append(_open_article(m, states.get(m.id), depth, "; ".join(notes)))
            if kids and depth < NEST_MAX:
                out.append('<div class="replies">')
                stack.append((-1, depth))
            else:
                out.append("</article>\n")
            stack.extend((k, depth + 1) for k in reversed(kids))
        return "".join(out)


def _gates(messages: list[Message], now: float) -> list[tuple[str, str]]:
    """Header rows (issue 31): the gates still waiting (open, or timed out as of rendering), then every gate
    with its state."""
    from agentmsg.domain.handoffs import Gates

    fold = Gates()
    for m in messages:
        fold.add(m)
    rows, waiting = [], []
    for g in fold.listing(now):
        m = g["message"]
        p = m.handoff.get("payload") or {}
        state = text(g["state"])
        if g["state"] in ("open", "timed out"):
            state += (f" ({'timed out' if g['state'] == 'timed out' else 'times out'} "
                      f"{text(p.get('timeout_minutes'))} min after {text(when(m.ts))})")
        row = (f'<a href="#m-{text(m.id)}">{text(g["gate_id"])}</a> {text(g["required_action"])} '
               f"{text(m.sender)} → {text(m.to)}: {state}")
        rows.append(row)
        if g["state"] in ("open", "timed out"):
            waiting.append(row)
    out = [("open gates", "<br>".join(waiting) if waiting else "none")] if rows else []
    return out + ([("gates", "<br>".join(rows))] if rows else [])


def collaboration_html(reg: Registry, events: list[dict[str, Any]], messages: list[Message],
                       notes: list[dict[str, Any]], states: Mapping[str, MessageState],
                       now: float | None = None) -> str:
    """Every event, note and message in collaboration order; a reply sits under the message it answers.
    ``now``: when the gates' states are told as of (default: now).

    Nothing is left out: every message is drawn once (:class:`Threads`), however deep its thread or odd its
    ``reply_to``.
    """
    threads = Threads(messages)

    items: list[tuple[int, str]] = [(int(e.get("cseq", 0)), event_html(e)) for e in events]
    items += [(int(n.get("cseq", 0)), note_html(n)) for n in notes]
    items += [(threads.ordered[i].cseq, threads.html(i, states)) for i in threads.roots]
    body = "".join(part for _c, part in sorted(items, key=lambda i: i[0]))
    closed = f"closed {text(when(reg.closed_at))}" if reg.closed_at else "open"
    head = _dl([("id", f"<code>{text(reg.collab)}</code>"), ("task", text(reg.task)),
                ("opened", f"{text(when(reg.opened_at))} by {text(reg.opener_alias or reg.opener)}"),
                ("status", closed), ("messages", str(len(messages))),
                *_gates(messages, time.time() if now is None else now)])
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>agentmsg · {text(reg.label)}</title><style>{CSS}</style></head>\n<body>\n"
            f'<header class="collab"><h1>Collaboration {text(reg.label)}</h1>{head}{_people(reg)}</header>\n'
            f"<main>\n{body}</main>\n</body></html>\n")
