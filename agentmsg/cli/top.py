"""``agentmsg top``: a live terminal view for the person in charge (rich.live and a raw key reader).

Imported only when ``top`` runs: rich, termios and the overview stay off
every other command's start-up (tests/cli/test_startup.py).  Everything shown
is read through ``service.overview.Overview`` (the port, in pages); every
line is drawn as ``rich.text.Text`` (never as markup) through :func:`_line`,
which runs the one escape (``text/escape.line``) over the whole line, so no
field, peer text or not, reaches the terminal with a hidden character.  What
a section leaves out is counted on screen ("… N more"), with the command
that shows it.  Actions run through ``service.commands`` as the ``--self``
pin, which must be a ``human:`` pin; without it the view is read-only.
"""

from __future__ import annotations

import codecs
import os
import select
import sys
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from agentmsg.domain.values import Draft, Message, Pin
from agentmsg.errors import AgentmsgError, UsageError
from agentmsg.service.context import Ctx
from agentmsg.service.overview import Overview
from agentmsg.text.escape import escape, line

POLL = 0.25  # seconds between new-message polls (last_seq per inbox)
REFRESH = 2.0  # seconds between full refreshes (registries, unacked pages, receipts of the page, envelopes)
KEYS = {"\x1b[A": "up", "\x1bOA": "up", "\x1b[B": "down", "\x1bOB": "down", "\x1b[5~": "pgup",
        "\x1b[6~": "pgdn", "\x1b[H": "home", "\x1b[F": "end", "\x1b[1~": "home", "\x1b[4~": "end", "\x1bOH": "home",
        "\x1bOF": "end", "\r": "enter", "\n": "enter",
        "\x7f": "backspace", "\x08": "backspace", "\x1b": "esc", "\x03": "ctrl-c", "\x04": "ctrl-d"}
HELP_LIST = "↑↓/jk move  enter open  r reply  a ack  c close collab  q quit"
HELP_OPEN = "↑↓ scroll  esc/q back  r reply  a ack"
#: Read-only (no --self): only the keys that do something (issue 30).
HELP_LIST_RO = "↑↓/jk move  enter open  q quit"
HELP_OPEN_RO = "↑↓ scroll  esc/q back"


def one(text: str) -> str:
    """Peer text for one line: hidden characters escaped, line breaks and tabs shown as ``\\n``, ``\\t``."""
    return line(text)


def fit(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters (never under 20): cut in the middle, so both ends still show."""
    width = max(20, width)
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def _line(text: str, style: str = "") -> Text:
    """One line of the view: the one escape over all of it (idempotent, so fields escaped already stay)."""
    return Text(line(text), style=style)


def age(ts: str, now: float) -> str:
    from agentmsg.domain.envelope import _epoch

    s = max(0, int(now - _epoch(ts)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


class KeyReader:
    """stdin in cbreak mode; ``read(timeout)`` returns the keys typed so far (names or characters)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.old: Any = None
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def __enter__(self) -> KeyReader:
        import termios
        import tty

        self.old = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)
        return self

    def __exit__(self, *exc: object) -> None:
        import termios

        termios.tcsetattr(self.fd, termios.TCSADRAIN, self.old)

    def read(self, timeout: float) -> list[str]:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return []
        data = os.read(self.fd, 1024)
        if not data:
            return ["ctrl-d"]
        return split_keys(self.decoder.decode(data))


def split_keys(text: str) -> list[str]:
    out = []
    i = 0
    while i < len(text):
        for seq in sorted((k for k in KEYS if len(k) > 1), key=len, reverse=True):
            if text.startswith(seq, i):
                out.append(KEYS[seq])
                i += len(seq)
                break
        else:
            if text[i] == "\x1b" and i + 1 < len(text) and text[i + 1] in "[O":  # an unknown sequence: drop it
                j = i + 2
                while j < len(text) and not text[j].isalpha() and text[j] != "~":
                    j += 1
                i = j + 1
                continue
            out.append(KEYS.get(text[i], text[i]))
            i += 1
    return out


class Top:
    def __init__(self, ctx: Ctx, overview: Overview, me: Pin | None, console: Console) -> None:
        self.ctx, self.ov, self.me, self.console = ctx, overview, me, console
        self.selected: tuple[str, str] | None = None  # (collab, id)
        self.opened: Message | None = None
        self.scroll = 0
        self.prompt: dict[str, Any] | None = None  # {"kind": "reply"|"close", "target": ..., "text": ""}
        self.status = "" if me else "read-only: pass --self human:NAME to reply, ack or close"
        self.running = True

    # ---- state -----------------------------------------------------------------------------

    def index(self) -> int:
        msgs = self.ov.messages
        if self.selected is not None:
            for i, m in enumerate(msgs):
                if (m.collab, m.id) == self.selected:
                    return i
        return 0

    def current(self) -> Message | None:
        if self.opened is not None:
            return self.opened
        msgs = self.ov.messages
        return msgs[self.index()] if msgs else None

    def move(self, delta: int) -> None:
        msgs = self.ov.messages
        if msgs:
            i = max(0, min(len(msgs) - 1, self.index() + delta))
            self.selected = (msgs[i].collab, msgs[i].id)

    # ---- keys --------------------------------------------------------------------------------

    def key(self, k: str) -> None:
        if k in ("ctrl-c", "ctrl-d") and self.prompt is None:
            self.running = False
            return
        if self.prompt is not None:
            self.prompt_key(k)
            return
        if self.opened is not None:
            page = max(1, self.console.size.height - 12)
            moves = {"up": -1, "k": -1, "down": 1, "j": 1, "pgup": -page, "pgdn": page, " ": page}
            if k in moves:
                self.scroll = max(0, self.scroll + moves[k])
            elif k in ("esc", "q", "backspace", "left"):
                self.opened, self.scroll = None, 0
            elif k in ("r", "a"):
                self.act(k)
            return
        moves = {"up": -1, "k": -1, "down": 1, "j": 1, "pgup": -10, "pgdn": 10, "home": -10**9, "end": 10**9}
        if k in moves:
            self.move(moves[k])
        elif k in ("enter", "o") and self.ov.messages:
            self.opened, self.scroll = self.current(), 0
            self.selected = (self.opened.collab, self.opened.id) if self.opened else None
        elif k in ("r", "a", "c"):
            self.act(k)
        elif k == "q":
            self.running = False

    def act(self, k: str) -> None:
        if self.me is None:
            self.status = "read-only: pass --self human:NAME to reply, ack or close"
            return
        msg = self.current()
        if k == "c":
            cid = self.ov.only or (msg.collab if msg else None)
            if cid is None:
                self.status = "no collaboration selected"
                return
            self.prompt = {"kind": "close", "target": cid, "text": ""}
            return
        if msg is None:
            self.status = "no message selected"
            return
        if k == "r":
            self.prompt = {"kind": "reply", "target": msg, "text": ""}
        elif k == "a":
            self.ack(msg)

    def prompt_key(self, k: str) -> None:
        assert self.prompt is not None
        if k in ("esc", "ctrl-c"):
            self.prompt, self.status = None, "cancelled"
        elif self.prompt["kind"] == "close":
            if k in ("y", "Y"):
                self.close(self.prompt["target"])
            else:
                self.status = "not closed"
            self.prompt = None
        elif k == "enter":
            text, msg = self.prompt["text"], self.prompt["target"]
            self.prompt = None
            if text.strip():
                self.reply(msg, text)
            else:
                self.status = "empty reply: nothing sent"
        elif k == "backspace":
            self.prompt["text"] = self.prompt["text"][:-1]
        elif len(k) == 1 and k.isprintable():
            self.prompt["text"] += k

    # ---- actions, as the overseer's own pin ----------------------------------------------------

    def _do(self, what: str, fn: Any, **kwargs: Any) -> dict[str, Any] | None:
        from agentmsg.service import commands

        try:
            result: dict[str, Any] = getattr(commands, fn)(self.ctx, self_flag=str(self.me), **kwargs)
        except AgentmsgError as err:
            result_payload = getattr(err, "result", None)
            self.status = f"{what}: {one(str(err))}"
            return result_payload if isinstance(result_payload, dict) else None
        finally:
            self.ov.refresh()
        return result

    def reply(self, msg: Message, text: str) -> None:
        from agentmsg.domain.validate import SUBJECT_MAX_CHARS

        subject = msg.subject if msg.subject.startswith("Re: ") or not msg.subject else f"Re: {msg.subject}"
        draft = Draft(reply_to=f"{msg.to}/{msg.id}", subject=subject[:SUBJECT_MAX_CHARS], body=text)
        out = self._do("reply refused", "send", collab=msg.collab, draft=draft)
        if out and out.get("results") and not self.status.startswith("reply refused"):
            self.status = f"replied: {out['results'][0]['id']} to {out['results'][0]['to']}"

    def ack(self, msg: Message) -> None:
        reg = self.ov.registries.get(msg.collab) or self.ctx.store.registry(msg.collab)
        mine = reg.alias_of(str(self.me))
        if mine != msg.to:
            self.status = (f"not yours to acknowledge: it is addressed to {msg.to}, and {self.me} holds "
                           f"{mine or 'no alias'} there")
            return
        if self._do("ack refused", "ack", collab=msg.collab, message_ids=[msg.id]) is not None:
            self.status = f"acknowledged {msg.id}"

    def close(self, cid: str) -> None:
        out = self._do("close refused", "close", collab=cid)
        if out is not None and "closed_by" in out:
            self.status = f"closed {cid} ({out['unresolved_count']} unresolved)"

    # ---- drawing -----------------------------------------------------------------------------

    def render(self, now: float | None = None) -> Group:
        now = time.time() if now is None else now
        width, height = self.console.size.width, self.console.size.height
        lines = self.render_open(width, height) if self.opened is not None else self.render_list(now, height)
        foot = self.footer()
        body = lines[:max(0, height - len(foot))]
        body += [Text("") for _ in range(height - len(foot) - len(body))]
        for t in body + foot:
            t.no_wrap, t.overflow = True, "ellipsis"
        return Group(*body, *foot)

    def footer(self) -> list[Text]:
        out = []
        if self.prompt is not None:
            if self.prompt["kind"] == "reply":
                msg = self.prompt["target"]
                out.append(_line(f"reply as {self.me} to {one(msg.sender)} re {msg.id[:8]}> ", style="bold")
                           + _line(self.prompt["text"]) + Text("█"))
            else:
                out.append(_line(f"close collaboration {self.prompt['target']} as {self.me}? [y/N] ", style="bold"))
        else:
            out.append(_line(self.status, style="yellow"))
        keys = (HELP_OPEN, HELP_LIST) if self.me is not None else (HELP_OPEN_RO, HELP_LIST_RO)
        out.append(_line(keys[0] if self.opened is not None else keys[1], style="dim"))
        return out

    def _collab(self, cid: str) -> str:
        label = one(self.ov.label(cid))[:14]
        return f"{label}/{cid[:8]}" if label else cid[:8]

    def _where(self, cid: str) -> str:
        """The collaboration column: absent when the view shows one, else as wide as its widest name."""
        if self.ov.only or len(self.ov.registries) <= 1:
            return ""
        width = max(len(self._collab(c)) for c in self.ov.registries)
        return f"{self._collab(cid):{width}} "

    def budgets(self, height: int, needs: list[int]) -> list[int]:
        """Rows for participants, requests and stuck mail: shared out evenly, none given more than it needs, and
        at least three rows left for the latest messages (a cut section uses one of its rows for "… N more")."""
        room = max(len(needs), height - 9 - 3)
        got = [0] * len(needs)
        while room > 0 and any(g < n for g, n in zip(got, needs, strict=True)):
            for i, n in enumerate(needs):
                if got[i] < n and room > 0:
                    got[i] += 1
                    room -= 1
        return [g if g >= n else max(1, g - 1) for g, n in zip(got, needs, strict=True)]

    def coverage(self, first: int, end: int) -> str:
        """Which messages the list shows, of how many stored, and where the rest are."""
        held, total = len(self.ov.messages), self.ov.total_messages()
        out = f"{held} newest of {total}" if total > held else f"all {total}"
        if (first, end) != (0, held):
            out += f"; rows {first + 1}-{end} on screen, ↑↓ scroll"
        if total > held:
            out += f"; the {total - held} older: agentmsg log render --html"
        return out

    def render_list(self, now: float, height: int) -> list[Text]:
        ov = self.ov
        who = f"as {self.me}" if self.me else "read-only"
        one_cid = ov.only or (next(iter(ov.registries)) if len(ov.registries) == 1 else None)
        scope = self._collab(one_cid) if one_cid else f"{len(ov.registries)} collaborations"
        lines = [_line(f"agentmsg top  {scope}  {who}  {time.strftime('%H:%M:%S', time.localtime(now))}",
                      style="bold reverse")]
        total_req = sum(p.requests for p in ov.people)
        budget, req_budget, stuck_budget = self.budgets(height, [len(ov.people), len(ov.requests), len(ov.stuck)])
        lines.append(_line(f"Participants ({len(ov.people)})", style="bold"))
        people = ov.people[:budget]
        cw = len(self._where(people[0].collab)) if people else 0
        aw = max([len(one(p.alias)) for p in people] + [5])
        if people:
            lines.append(_line(f"  {'':{cw}}{'alias':{aw}} {'state':8} pin  unacked/requests · notify · delivery",
                               style="dim"))
        for p in people:
            d = p.delivery
            env = (f"delivery {d['status']} {d['remaining']}/{d['slots']} wait {d['wait_seconds']:g}s "
                   f"exp {d['expires_in_seconds'] // 60}m") if d else "no envelope"
            counts = f"{p.pending}/{p.requests}"
            # what is left for the pin, which shows whole (or cut in its middle), then the counts; only notify and
            # the envelope may run off an 80-column screen
            pw = self.console.size.width - (2 + cw + aw + 1 + 8 + 1) - (2 + len(counts)) - 1
            lines.append(_line(f"  {self._where(p.collab)}{one(p.alias):{aw}} "
                               f"{(p.presence or 'active') if p.active else 'left':8} {fit(one(p.pin), pw)}  "
                               f"{counts} · {p.notify} · {env}"))
        if len(ov.people) > budget:
            lines.append(_line(f"  … {len(ov.people) - budget} more: agentmsg roster", style="dim"))
        if ov.claims:  # docs/CLAIMS.md
            lines.append(_line(f"Claims ({len(ov.claims)})", style="bold"))
            for cid, c in ov.claims[:budget]:
                lines.append(_line(f"  {self._where(cid)}{one(c.alias):12} {c.mode:9} {one(c.pattern)}  until "
                                   f"{time.strftime('%H:%M', time.localtime(c.expires_at))}"))
            if len(ov.claims) > budget:
                lines.append(_line(f"  … {len(ov.claims) - budget} more: agentmsg claims", style="dim"))
        if ov.gates:  # docs/HANDOFFS.md "Gates"
            lines.append(_line(f"Open gates ({len(ov.gates)})", style="bold"))
            for cid, g in ov.gates[:budget]:
                m = g["message"]
                lines.append(_line(f"  {self._where(cid)}{one(g['gate_id'])} {g['required_action']} {one(m.sender)} -> "
                                   f"{one(m.to)}: {g['state']} (until "
                                   f"{time.strftime('%H:%M', time.localtime(g['expires_at']))})  {m.id[:8]}",
                                   style="yellow" if g["state"] == "timed out" else ""))
            if len(ov.gates) > budget:
                lines.append(_line(f"  … {len(ov.gates) - budget} more: agentmsg gates --open", style="dim"))
        total_req = sum(p.requests for p in ov.people)
        lines.append(_line(f"Unacknowledged requests ({total_req})", style="bold"))
        shown = ov.requests[:req_budget]
        for m in shown:
            lines.append(_line(f"  {age(m.ts, now):>7} old  {self._where(m.collab)}{m.id[:8]} {one(m.sender)} -> "
                               f"{one(m.to)}  {one(m.subject) or '(no subject)'}"))
        if total_req > len(shown):
            lines.append(_line(f"  … {total_req - len(shown)} more not shown here (no room or beyond the oldest "
                               f"{ov.sample} of an inbox): agentmsg log render --html",
                               style="dim"))
        lines.append(_line(f"Stuck ({len(ov.stuck)} among the oldest {ov.sample} unacknowledged of each inbox)",
                           style="bold red" if ov.stuck else "bold"))
        for s in ov.stuck[:stuck_budget]:
            lines.append(_line(f"  {s.message.id[:8]} {one(s.message.sender)} -> {one(s.message.to)}: "
                               f"{one(s.reason)}", style="red"))
        if len(ov.stuck) > stuck_budget:
            lines.append(_line(f"  … {len(ov.stuck) - stuck_budget} more stuck, not shown for room", style="dim"))
        for e in ov.errors[:2]:
            lines.append(_line(f"  ! {one(e)}", style="red"))
        if len(ov.errors) > 2:
            lines.append(_line(f"  ! … {len(ov.errors) - 2} more unreadable inbox(es) or collaboration(s)",
                               style="red"))
        msgs = ov.messages
        room = max(1, height - len(lines) - 3)
        sel = self.index()
        start = max(0, min(sel - room // 2, len(msgs) - room))
        lines.append(_line(f"Latest messages ({self.coverage(start, min(len(msgs), start + room))})", style="bold"))
        for i, m in enumerate(msgs[start:start + room], start):
            flags = f" [{','.join(one(f) for f in m.flags)}]" if m.flags else ""
            mark = "!" if m.priority == "high" else " "
            subject = one(m.subject) or "(no subject)"
            text = (f"{'>' if i == sel else ' '} {m.ts[11:19]} {m.id[:8]} {self._where(m.collab)}"
                    f"{one(m.sender)}({m.sender_runtime}) -> {one(m.to)} {m.kind:7}{mark}{subject}")
            if len(text) > self.console.size.width:  # narrow: the subject before the sender's runtime
                text = text.replace(f"{one(m.sender)}({m.sender_runtime}) -> ", f"{one(m.sender)} -> ", 1)
            row = _line(text)
            if flags:
                row.append(flags, style="bold yellow")
            if i == sel:
                row.stylize("reverse")
            lines.append(row)
        if not msgs:
            lines.append(_line("  (no messages yet)", style="dim"))
        return lines

    def render_open(self, width: int, height: int) -> list[Text]:
        m = self.opened
        assert m is not None
        head = [
            _line(f"Message {m.id}  ({self._collab(m.collab)})", style="bold reverse"),
            _line(f"From:     {one(m.sender)} ({m.sender_runtime})"),
            _line(f"To:       {one(m.to)}"),
            _line(f"Kind:     {m.kind}, priority {m.priority}   sent {m.ts}"),
            _line(f"Subject:  {one(m.subject)}"),
        ]
        if m.reply_to:
            head.append(_line(f"Reply to: {one(m.reply_to)}"))
        if m.flags:
            head.append(_line(f"Flags:    {', '.join(one(f) for f in m.flags)}", style="bold yellow"))
        head.append(_line("─" * min(width, 80), style="dim"))
        body = Text(escape(m.body).replace("\t", "    "))
        wrapped = list(body.wrap(self.console, max(10, width - 1)))
        room = max(1, height - len(head) - 3)
        self.scroll = max(0, min(self.scroll, max(0, len(wrapped) - room)))
        shown = wrapped[self.scroll:self.scroll + room]
        end = self.scroll + len(shown)
        tail = _line(f"── lines {self.scroll + 1}-{end} of {len(wrapped)}" if len(wrapped) > room
                    else f"── end of message ({len(wrapped)} lines)", style="dim")
        return [*head, *shown, tail]


def run(ctx: Ctx, *, collab: str | None, self_flag: str | None, once: bool = False) -> int:
    from agentmsg.domain import validate

    me = None
    if self_flag:
        me = validate.pin(self_flag)
        if not me.human:
            raise UsageError(f"top acts only as a human: pin (--self human:NAME), not {me}")
        me = ctx.who(self_flag)  # the same identity checks as every other command
    from agentmsg.service import readers

    # What top reads follows the one reading rule: a host session reads its own collaborations; the person at
    # their terminal (no host session variable; --self human:NAME only names who acts) reads every one.
    reading = readers.reader(ctx, None)
    cid = ctx.named(collab, me) if collab else None  # an id, a unique label or an id prefix
    if cid:
        readers.check(ctx, reading, cid)
        ctx.store.registry(cid)  # an unknown collaboration is NotFound now, not an empty screen
    ov = Overview(ctx.store, cid, root=str(ctx.root), reader=reading)
    ov.refresh()
    if once or not (sys.stdin.isatty() and sys.stdout.isatty()):
        console = Console(width=int(ctx.env.get("COLUMNS", "120") or 120), height=10**4, soft_wrap=False)
        lines = Top(ctx, ov, me, console).render_list(time.time(), 10**4)
        for t in lines:
            t.no_wrap, t.overflow = True, "ellipsis"
        console.print(Group(*lines))
        return 0
    console = Console()
    top = Top(ctx, ov, me, console)
    last_full = last_poll = time.monotonic()
    with KeyReader(sys.stdin.fileno()) as keys, Live(top.render(), console=console, screen=True,
                                                        auto_refresh=False, redirect_stdout=False,
                                                        redirect_stderr=False) as live:
        drawn = 0.0
        while top.running:
            now = time.monotonic()
            dirty = False
            if now - last_full >= REFRESH:
                top.ov.refresh()
                last_full = last_poll = now
                dirty = True
            elif now - last_poll >= POLL:
                dirty = top.ov.poll() > 0
                if dirty:
                    top.ov.refresh()
                    last_full = now
                last_poll = now
            if dirty or now - drawn >= 1.0:
                live.update(top.render(), refresh=True)
                drawn = now
            pressed = keys.read(POLL)
            for k in pressed:
                top.key(k)
            if pressed:
                live.update(top.render(), refresh=True)
                drawn = time.monotonic()
    return 0
