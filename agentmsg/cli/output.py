"""Printing: one JSON envelope for machines, plain text (rich on a TTY) for people.

The envelope is the same for every command, success or failure::

    {"ok": true, "command": "send", "exit_code": 0, "result": {...}, "error": null}

On failure ``error`` is ``{"code", "type", "message"}`` and ``result`` holds
whatever did happen first (for example a message stored before its
notification failed).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from agentmsg.domain.values import Message
from agentmsg.errors import AgentmsgError
from agentmsg.text import escape as visible
from agentmsg.text.transcript import body_block, message_section, one_line

Payload = dict[str, Any]


def command_name(args: Sequence[str]) -> str:
    words = [a for a in args if not a.startswith("-")]
    if words[:1] and words[0] in ("log", "delivery", "wake", "install", "uninstall", "run", "db", "task",
                                           "template", "guard") \
            and len(words) > 1:
        return f"{words[0]} {words[1]}"
    return words[0] if words else ""


def envelope(command: str, result: Payload | None, err: AgentmsgError | None = None) -> str:
    doc = {
        "ok": err is None,
        "command": command,
        "exit_code": err.code if err else 0,
        "result": result,
        "error": {"code": err.code, "type": type(err).__name__, "message": err.line()} if err else None,
    }
    return json.dumps(doc, ensure_ascii=False)


def emit(command: str, payload: Payload, as_json: bool) -> int:
    if as_json:
        print(envelope(command, payload))
    else:
        HUMAN.get(command, _generic)(payload)
    return 0


def fail(command: str, err: AgentmsgError, as_json: bool) -> int:
    if as_json:
        print(envelope(command, err.result, err))
    elif err.result is not None:
        HUMAN.get(command, _generic)(err.result)
    sys.stderr.write(visible.line(err.line()) + "\n")
    return err.code


def say(text: str = "", *, flush: bool = False) -> None:
    """Print one piece of a human view.  Every byte a view prints passes here or through :func:`write`:
    the one escape (``text/escape``) runs over the whole text, so a field a printer forgot to escape still
    shows its hidden characters as escapes (escaping is idempotent; ``\\n`` and tabs stay)."""
    sys.stdout.write(visible.escape(text) + "\n")
    if flush:
        sys.stdout.flush()


def write(text: str) -> None:
    """:func:`say` for text that brings its own line ends."""
    sys.stdout.write(visible.escape(text))


def is_tty() -> bool:
    return sys.stdout.isatty()


def to_message(p: Payload) -> Message:
    return Message(
        id=p["id"], collab=p["collab"], sender=p["from"], sender_runtime=p["from_runtime"], to=p["to"],
        kind=p["kind"], priority=p["priority"], subject=p["subject"], body=p["body"],
        reply_to=p["reply_to"], ts=p["ts"], seq=p["seq"], digest="", broadcast=p["broadcast"],
        flags=tuple(p["flags"]), handoff=p.get("handoff"),
        thread=p.get("thread") if p.get("thread") != p["id"] else None,
    )


def yaml_text(doc: Any) -> str:
    """YAML that reads back exactly and hides nothing: a string holding a character the one escape
    (``text/escape``) shows as an escape (a control, NEL, LS, PS, BOM, a bidi or other invisible character,
    a lone surrogate), or a non-character, is written double-quoted with those escapes, which YAML reads
    back as the characters (plain or block styles would print them raw, and a raw NEL reads back as a
    space)."""
    import yaml

    class Dumper(yaml.SafeDumper):
        def write_double_quoted(self, text: str, split: bool = True) -> None:
            self.write_indicator('"', True)
            data = yaml_quoted(text)
            self.column += len(data)
            self.stream.write(data.encode(self.encoding) if self.encoding else data)
            self.write_indicator('"', False)

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = '"' if visible.escape(value) != value or _YAML_RAW.search(value) else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return yaml.dump(doc, Dumper=Dumper, sort_keys=False, allow_unicode=True)


def yaml_quoted(value: str) -> str:
    """The inside of a YAML double-quoted scalar: ``text/escape``'s escapes are YAML's own (``\\xNN``,
    ``\\uNNNN``, ``\\UNNNNNNNN``, ``\\n``, ``\\t``, ``\\r``), so the view shows what every other view shows."""
    shown = visible.line(value.replace("\\", "\\\\").replace('"', '\\"'))
    return shown.replace("\ufffe", "\\ufffe").replace("\uffff", "\\uffff")


_YAML_RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")


def _generic(payload: Payload) -> None:
    for key, value in payload.items():
        say(visible.line(f"{key}: {value if not isinstance(value, (dict, list)) else json.dumps(value)}"))


def _open(p: Payload) -> None:
    say(f"collaboration: {p['collab']}")
    say(f"root: {p['root']}  (from {p['root_source']})")
    say(f"you: {p['alias']} = {p['pin']}")
    say(f"share with peers: agentmsg join --collab {p['collab']} --alias NAME --root {_sh(p['root'])}")


def _sh(value: str) -> str:
    import shlex

    return shlex.quote(value)


def _join(p: Payload) -> None:
    verb = f"took over from {p['succeeded']}" if p.get("succeeded") else "joined"
    say(f"{p['alias']} ({p['pin']}) {verb} collaboration {p['collab']}")
    say(f"root: {p['root']}")
    say(f"participants: {', '.join(visible.line(a) for a in p['participants'])}")


def _send(p: Payload) -> None:
    from agentmsg.domain.wake import said

    for r in p["results"]:
        detail = f" ({r['detail']})" if r.get("detail") else ""
        say(f"{r['state']}: {r['id']} -> {visible.line(r['to'])}{visible.line(detail)}")
        if r.get("next"):
            say(f"  {visible.line(r['next'])}")
        words = said(r["wake"]["outcome"]) if r.get("wake") else None
        if words:
            how = f" via {r['wake']['mechanism']}" if r["wake"].get("mechanism") else ""
            say(f"  wake: {visible.line(words)}{how}")
    if p.get("redacted"):
        say(f"redacted {p['redacted']} secret(s) before storing")


def _inbox(p: Payload) -> None:
    msgs = p["messages"]
    if is_tty() and msgs:
        _table(["seq", "from", "kind", "priority", "subject", "id"],
               [[str(m["seq"]), f"{m['from']} ({m['from_runtime']})", m["kind"], m["priority"],
                 one_line(m["subject"]), m["id"]] for m in msgs], title=f"inbox of {p['alias']}",
               essential=("seq", "from", "id"), drop=("priority", "kind"), shrink=("subject",))
    say(f"{p['count']} unacknowledged message(s) for {p['alias']}; printing is not acknowledging")
    if p["more"]:
        what = "message(s) of the history" if "history" in p else "more unacknowledged message(s)"
        say(f"showing {len(msgs)} from offset {p['offset']}; {p['more']} {what} not shown: "
              f"--offset {p['offset'] + len(msgs)} for the next page, --all for every one")
    for problem in p["problems"]:
        say(f"warning: skipped {'torn' if problem['torn'] else 'damaged'} line at {problem['path']}:"
              f"{problem['offset']} ({problem['reason']})")
    for m in msgs:
        say()
        write(message_section(to_message(m)))


def _show(p: Payload) -> None:
    write(message_section(to_message(p["message"])))
    for a in p.get("artifacts") or []:  # a typed message's, in this checkout (docs/HANDOFFS.md)
        pinned = f"sha256 {str(a['sha256'])[:12]}" if a.get("sha256") else f"version {a.get('version', '?')}"
        why = f": {a['why']}" if a.get("why") else ""
        say(visible.line(f"artifact {a.get('location')} ({pinned}): {a['state']}{why}"))
    s = p["states"]
    say(f"state: {p['state']}")
    say(f"  enqueued: {s['enqueued']}")
    say(f"  presented: {len(s['presented'])} attempt(s)")
    say(f"  acknowledged: {s['acknowledged'] or 'no'}")
    say(f"  replied: {visible.line(', '.join(s['replied'])) or 'no'}")
    if s["notify"]:
        say(f"  notify: {'ok' if s['notify']['ok'] else 'failed'} ({visible.line(str(s['notify']['detail']))})")
    for m in p.get("thread") or ():  # a typed message's thread (issue 31)
        mark = "  <- this message" if m["id"] == p["message"]["id"] else ""
        say(f"thread: {m['ts'][:19].replace('T', ' ')} {visible.line(str(m['type']))} {m['from']}->{m['to']} "
            f"({m['id']}){mark}")


def _ack(p: Payload) -> None:
    from agentmsg.service.payloads import ack_lines

    say("\n".join(ack_lines(p)))


def _store_line(store: Payload | None) -> None:
    """The store, when it is not the file store at the root the ``root:`` line names already."""
    if store and store.get("store") != "file":
        state = "reachable" if store.get("reachable") else f"NOT reachable ({store.get('problem', '')})"
        say(f"store: {store['store']} {store['location']} ({state})")


def _status(p: Payload) -> None:
    say(f"root: {p['root']}  (from {p['root_source']})")
    _store_line(p.get("store"))
    if p.get("mirror"):
        m = p["mirror"]
        say(f"replica of: {m['replica_of']}  (mirror {'running' if m['running'] else 'not running'}; "
              f"outbox: {m['outbox']})")
    for proc in p.get("processes") or []:  # what runs in the background, what it does, since when
        r = p.get("renderer") if proc["process"] == "helper" else None
        extra = f" (deliveries rendered ahead: {r['ready']}; claims not yet folded: {r['claims']})" if r else ""
        say(f"{proc['line']}{extra}")
    say(f"self: {p.get('self') or '(no session identity)'}")
    if p.get("collab") is None:
        for b in p.get("bindings", []):
            say(f"bound: {b['alias']} in {b['collab']}")
        _collab_rows(p)
        return
    say(f"collaboration: {p['collab']}  label: {one_line(p['label'])}")
    say(f"task: {one_line(p['task'])}")
    say(f"binding: {p['binding']['alias'] if p['binding'] else 'none'}")
    say(f"closed: {p['closed_at'] or 'no'}")
    keys = ("pending", "pending_requests", "enqueued", "presented", "replied", "acknowledged")
    rows = [[x["alias"] + (f" ({x['problem']})" if x.get("problem") else ""), x["pin"],
             "yes" if x["active"] else "left", x["notify"], *(str(x[k]) for k in keys)]
            for x in p["participants"]]
    _table(["alias", "pin", "active", "notify", "pending", "requests", "enqueued", "presented", "replied",
            "acked"], rows, title="participants (enqueued/presented/replied count pending mail)",
           essential=("alias", "pin", "active", "pending"),
           drop=("enqueued", "presented", "replied", "notify", "acked", "requests"))
    woken = [f"{x['alias']}: {x['wake']}" for x in p["participants"] if x.get("wake", "off") != "off"]
    say(f"wake: {', '.join(woken) or 'off for everyone'}")
    here = [f"{visible.line(x['alias'])} {x['presence']['state']}" for x in p["participants"] if x.get("presence")]
    if here:
        say(f"presence: {', '.join(here)} (agentmsg roster)")
    _claim_lines(p)
    say(f"awaiting notification: {', '.join(p['awaiting_notification']) or 'none'}")


def _collab_rows(p: Payload) -> None:
    """The collaborations a reader may name: id, label, participants, unread (issue 30)."""
    rows = p.get("collaborations") or []
    whose = "yours" if p.get("self") else "all"
    if not rows:
        say("collaborations: none" + (f" with {p['self']} in it" if p.get("self") else " under this root"))
        return
    _table(["id", "label", "participants", f"unread ({whose})", "state"],
           [[r["collab"], r["label"], ", ".join(r["participants"]) or "-", str(r["unread"]),
             r.get("problem") or ("closed" if r["closed"] else "open") + (f", you: {r['alias']}" if r["alias"] else "")]
            for r in rows], title="collaborations", essential=("id", "label"), shrink=("participants",))
    say("name one with --collab: its id, its label, or its id's first 8 or more characters")


def _collabs(p: Payload) -> None:
    _collab_rows(p)


def _search(p: Payload) -> None:
    for i, h in enumerate(p["hits"], start=1):
        who = visible.line(f"{h['from']}→{h['to']}" if h["type"] == "message" else f"note by {h['from']}")
        subject = f" · {one_line(h['subject'])}" if h["subject"] else ""
        say(f"{i}. [{who}] {h['ts'][:10]} {h['ts'][11:16]} UTC · {h['kind']} · score {h['score']:g}{subject}")
        say(f"   {one_line(h['snippet'])}")
        say(f"   {h['show']}")
    shown = "no match" if not p["hits"] else f"{p['count']} hit(s), best first"
    say(f"{shown} for {one_line(p['query'])} ({p['index']['kind']})")


def _close(p: Payload) -> None:
    say(f"closed {p['collab']} (by {p['closed_by']}); history kept")
    say(f"unresolved (not acknowledged, left as is): {p['unresolved_count']}")
    for alias, ids in sorted(p["unresolved"].items()):
        say(visible.line(f"  {alias}: {', '.join(ids)}"))


def _envelope(e: Payload) -> None:
    say(f"envelope {e['envelope']} for {e['owner']['alias']} ({e['owner']['pin']}): {e['status']}")
    say(f"  slots: {e['remaining']} of {e['slots']} left (never reused); expires {e['expires']}; "
          f"hard cap {e['hard_cap']}; wait {e['wait_seconds']:g}s")


def _inspect(p: Payload) -> None:
    say(f"binding: {p['alias']} = {p['pin']} in {p['collab']}")
    if p["envelope"]:
        _envelope(p["envelope"])
    else:
        say("no delivery envelope: Stop is never held (inbox at turn start and end is the fallback)")
    if p.get("wake"):
        _wake(p["wake"])
    for a in p["interrupted"]:
        say(f"interrupted attempt {a['attempt']} ({a['host']} {a['hook']}, {a['ts']}): "
              f"{', '.join(a['messages'])}; retry: agentmsg delivery retry --attempt {a['attempt']} --message ID")
    _midturn_line(p.get("midturn"))
    run = p["last_hook_run"]
    say(f"last hook run: {run['host']} {run['event']} at {run['ts']}" if run else "last hook run: none seen")
    for host, info in p["adapters"].items():
        say(f"{host} adapter: {'installed' if info['installed'] else 'not installed'}")


def _midturn_line(m: Payload | None) -> None:
    if not m or not m["on"]:
        say("mid-turn delivery: off (messages wait for the next prompt)")
    else:
        say(f"mid-turn delivery: on, priority {m['priority']}, at least {m['min_gap_seconds']:g}s apart")


def _midturn(p: Payload) -> None:
    say(f"binding: {p['alias']} = {p['pin']} in {p['collab']}")
    _midturn_line(p)


def _doctor(p: Payload) -> None:
    for c in p.get("copies", []):
        runs = "runs its hooks" if c["runs_hooks"] else "installed, not enabled"
        say(f"{c['host']} {c['kind']} {c['id']}: {runs}; files {c['root'] or '(missing)'}")
    rows = [[x["name"], x["version"] or "-", x["python"] or "-", x["root"] or "-",
             "ok" if x["ok"] else f"FAILED: {x['error']}"] for x in p["probes"]]
    _table(["entry point", "version", "python", "state root", "status"], rows, title="agentmsg entry points")
    _store_line(p.get("store"))
    for note in p.get("notes", []):
        say(f"note: {note}")
    for caution in p.get("cautions", []):
        say(f"warning: {caution}")
    for warning in p["warnings"]:
        say(f"ERROR: {warning}")
    say(f"verdict: {p.get('verdict', 'error' if p['warnings'] else 'ok')}")


def _db_migrate(p: Payload) -> None:
    applied = ", ".join(p["applied"]) or "nothing to apply"
    say(f"schema {p['from']} -> {p['to']} at {p['store']}: {applied}")


def _db_grant(p: Payload) -> None:
    say(f"{p['role']} {'was already' if p['already'] else 'is now'} in {p['collab']}")


def _db_move(p: Payload) -> None:
    say(f"moved {p['collab']}: {p['records']} records in {len(p['streams'])} streams, "
          f"from {p['from']} to {p['to']}; verify clean on both")


def _notify(p: Payload) -> None:
    for r in p["results"]:
        say(visible.line(f"{r['state']}: {r['id']} -> {r['to']}" + (f" ({r['detail']})" if r.get("detail") else "")))


def _log_append(p: Payload) -> None:
    e = p["entry"]
    fix = f", correcting {e['corrects']}" if e.get("corrects") else ""
    say(f"logged {e['id']} by {e['author']} at {e['ts']}{fix}")


def _log_render(p: Payload) -> None:
    for path in p["written"]:
        say(f"rendered {path}")


def _leave(p: Payload) -> None:
    say(f"{p['alias']} ({p['pin']}) left {p['collab']}; inbox and history kept")


def _verify(p: Payload) -> None:
    for f in p["findings"]:
        label = "TAMPERED" if f["tampering"] else f["kind"]
        say(visible.line(f"{label}: {f['kind']} at {f['path']}:{f['line']}: {f['detail']}"))
    healed = f", {p['healed']} derived file(s) brought up to date" if p.get("healed") else ""
    say(f"checked {p['files']} record file(s) under {p['root']}: "
          f"{p['tampering']} tampering finding(s), {p['torn']} torn write(s){healed}")


def _flat(text: str) -> str:
    """One line, whatever the text holds: a line break could fake another entry."""
    return visible.line(text)


def _log_show(p: Payload) -> None:
    if p.get("thread") is not None:
        say(f"thread {_flat(p['thread'])}: {len(p['entries'])} message(s)")
    for e in p["entries"]:
        if e["kind"] == "message":
            typed = f" · {_flat(e['type'])}" if e.get("type") else ""
            say(f"{_flat(e['ts'])} · {_flat(e['author'])}→{_flat(e['to'])}{typed} · {_flat(e['id'])}")
            if e["subject"]:
                say(f"  subject: {one_line(e['subject'])}")
            write(body_block(e["text"], "message"))
            continue
        if e["kind"] == "event":
            say(f"{_flat(e['ts'])} · {_flat(e['text'])}")
            continue
        fix = f" (corrects {_flat(e['corrects'])})" if e.get("corrects") else ""
        say(f"{_flat(e['ts'])} · note by {_flat(e['author'])} {_flat(e['id'])}{fix}")
        write(body_block(e["text"], "note"))
    left = p.get("left_out")
    if left and left["messages"]:
        say(f"not listed here: {left['messages']} message(s) ({left['why']}); every one: {left['see']}")


#: Below this many columns a table becomes one card per row (``field: value`` lines).
CARDS_BELOW = 60


def _table(headers: list[str], rows: list[list[str]], title: str = "", *, essential: Sequence[str] = (),
           drop: Sequence[str] = (), shrink: Sequence[str] = ()) -> None:
    """A rich table on a TTY; tab-separated text otherwise (pipes keep the plain text).

    On a TTY nothing ``essential`` (an alias, a pin, an id) is ever cut: when
    the table is wider than the terminal, the ``drop`` columns go first (in
    that order, and the output says which), ``shrink`` columns fold their
    text, and under :data:`CARDS_BELOW` columns (or when the essential
    columns alone do not fit) each row is printed as a card.
    """
    rows = [[visible.line(cell) for cell in row] for row in rows]  # a tab or line break cannot add a cell or row
    title = visible.line(title)
    if not is_tty():
        say("\t".join(headers))
        for row in rows:
            say("\t".join(row))
        return
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    width = console.width
    natural = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def needed(cols: list[int]) -> int:
        return sum(min(natural[i], 10) if headers[i] in shrink else natural[i] for i in cols) + 2 * (len(cols) - 1)

    keep = list(range(len(headers)))
    dropped: list[str] = []
    for name in drop:
        if needed(keep) <= width:
            break
        keep.remove(headers.index(name))
        dropped.append(name)
    if width < CARDS_BELOW or needed(keep) > width:
        _cards(headers, rows, title, essential)
        return
    table = Table(title=title or None, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for i in keep:
        if headers[i] in shrink:
            table.add_column(headers[i], overflow="fold")
        else:
            table.add_column(headers[i], no_wrap=True, min_width=natural[i])
    for row in rows:
        table.add_row(*(escape(row[i]) for i in keep))
    console.print(table)
    if dropped:
        say(f"(hidden at {width} columns: {', '.join(dropped)})")


def _cards(headers: list[str], rows: list[list[str]], title: str, essential: Sequence[str]) -> None:
    """One card per row: the first field heads it, essential fields get a line each, the rest share lines."""
    if title:
        say(f"{title}:")
    for row in rows:
        cells = dict(zip(headers, row, strict=True))
        say(f"- {headers[0]}: {row[0]}")
        for name in headers[1:]:
            if name in essential:
                say(f"  {name}: {cells[name]}")
        rest = [f"{name} {cells[name]}" for name in headers[1:] if name not in essential]
        line = "  "
        for part in rest:
            if len(line) > 2 and len(line) + len(part) + 3 > CARDS_BELOW - 20:
                say(line)
                line = "  "
            line += (" · " if len(line) > 2 else "") + part
        if len(line) > 2:
            say(line)


def _wake(w: Payload) -> None:
    if w.get("status") == "off" and "consent" not in w:
        say("wake: off (agentmsg wake on lets senders ring this idle session)")
        return
    last = w["last_ring"]
    ring = f"{last['outcome']} at {last['ts']}" if last else "none"
    say(f"wake: {w['status']} (consent {w['consent']}, expires {w['expires']}); "
          f"{w['consecutive']} of {w['consecutive_cap']} consecutive wakes, {w['rings_last_hour']} of "
          f"{w['hourly_cap']} this hour; last ring: {ring}")
    facts = w.get("facts") or {}
    say("  session: " + ", ".join(f"{k} {facts[k]}" for k in ("host", "pid", "pane", "thread") if k in facts))


def _wake_status(p: Payload) -> None:
    say(f"binding: {p['alias']} = {p['pin']} in {p['collab']}")
    _wake(p["wake"])


def _wake_on(p: Payload) -> None:
    say(f"wake on for {p['alias']} ({p['owner']['pin']}): a send may ring this idle session until {p['expires']}, "
        "then wake-ups end (nothing renews them; agentmsg wake off ends them now)")


def _wake_off(p: Payload) -> None:
    say(f"wake off for {p['alias']} ({p['owner']['pin']}): sends no longer ring this session; its hooks show mail "
        "at the next prompt (agentmsg wake on allows wake-ups again)")


def _invite(p: Payload) -> None:
    who = f"alias {p['alias']}" if p["alias"] else "one session"
    say(f"ticket (admits {who} once, until {p['expires_at']}): {p['ticket']}")
    say(f"  {p['join']}")


def _spawn(p: Payload) -> None:
    tmux = p["tmux"]
    say(f"{p['how']}: {visible.line(p['alias'])} is {visible.line(p['pin'])} ({p['host']}), ready; it runs in tmux "
        f"{visible.line(tmux['target'])} (pane {visible.line(tmux['pane'])}, pid {p['pid']}"
        + (f", socket {visible.line(tmux['socket'])})" if p["where"] == "headless" else ")"))
    if p["where"] == "headless":
        say(f"  look: tmux -S {visible.line(tmux['socket'])} attach -t {visible.line(tmux['target'])}")
    if p.get("task"):
        say(f"  task sent as request {p['task']['id']} ({visible.line(p['task']['ring'])})")
    if p.get("succeeded"):
        say(f"  {visible.line(p['alias'])} moved from {visible.line(p['succeeded'])} (reason: resume)")


def _kill(p: Payload) -> None:
    say(f"stopped {visible.line(p['alias'])} ({visible.line(p['pin'])}, pid {p['pid']}, {p['signal']}); its alias "
        "stays, gone, and sends to it are still stored")


def _policy(p: Payload) -> None:
    say(f"collaboration {p['collab']}: {p['policy']} ({p['tickets']} unused ticket(s))")


def _roster(p: Payload) -> None:
    from agentmsg.domain.presence import age

    say(f"collaboration: {p['collab']}  label: {one_line(p['label'])}")
    for r in p["participants"]:
        pres = r["presence"]
        last = age(pres["last_activity_age"]) if pres["last_activity_age"] is not None else "-"
        unread = f"{r['unread']} unread, {age(r['behind'] or 0)}" if r["unread"] else "no unread"
        state = pres["state"] if r["active"] else "left"
        say(f"{visible.line(r['alias']):<12} {state:<9}  last {last:<7}  {unread:<18}  "
            f"wake {'on' if r['wake'] == 'active' else 'off':<3}  mid-turn {'on' if r['midturn'] else 'off'}")
        pin = f"  {visible.line(r['pin'])} ({visible.line(r['host'])})"
        why = f": {pres['why']}" if pres.get("why") else ""
        if len(pin) + len(why) <= 80:
            say(pin + why)
        else:  # 80 columns: the reason on a line of its own
            say(pin)
            say(f"    {why[2:]}")
    _claim_lines(p)


def _claim_lines(p: Payload) -> None:
    """Status and roster: each live claim on one line (docs/CLAIMS.md), then each open gate (docs/HANDOFFS.md)."""
    for c in p.get("claims") or []:
        why = f" ({c['reason']})" if c.get("reason") else ""
        say(f"claim: {c['alias']} holds {c['pattern']} {c['mode']}{why} until {c['until']}")
    for g in p.get("open_gates") or []:
        when = "timed out at" if g["state"] == "timed out" else "times out at"
        say(visible.line(f"gate {g['gate_id']} {g['required_action']} {g['from']}->{g['to']}: {g['state']} "
                         f"({when} {g['expires']})  ({g['id']})"))


def _claim(p: Payload) -> None:
    verb = "renewed" if p.get("renewed") else "claimed"
    for c in p["claims"]:
        say(f"{verb} {c['pattern']} ({c['mode']}) as {c['alias']} until {c['expires_at']}")


def _release(p: Payload) -> None:
    for r in p["released"]:
        what = ", ".join(r["patterns"]) if r["patterns"] else "every claim"
        say(f"released {what} of {r['alias']}" + (" (forced)" if p.get("forced") else ""))


def _claims(p: Payload) -> None:
    if not p["claims"]:
        say(f"no live claim in collaboration {p['collab']}")
    for c in p["claims"]:
        why = f" ({c['reason']})" if c["reason"] else ""
        say(f"{c['alias']:<12} {c['mode']:<9} {c['pattern']}{why} until {c['until']}  [{c['repo'][:17]}]")


HUMAN: dict[str, Callable[[Payload], None]] = {
    "claim": _claim, "release": _release, "claims": _claims,
    "roster": _roster, "collabs": _collabs, "invite": _invite, "policy": _policy, "kill": _kill, "spawn": _spawn,
    "resume": _spawn, "fork": _spawn,
    "wake on": _wake_on, "wake off": _wake_off, "wake status": _wake_status,
    "open": _open, "join": _join, "send": _send, "inbox": _inbox, "show": _show, "ack": _ack,
    "status": _status, "search": _search, "close": _close, "leave": _leave, "log show": _log_show,
    "log append": _log_append,
    "log render": _log_render, "verify": _verify, "notify": _notify, "delivery enable": _envelope,
    "delivery disable": _envelope, "delivery inspect": _inspect, "doctor": _doctor, "db migrate": _db_migrate,
    "db grant": _db_grant, "db move": _db_move, "delivery midturn": _midturn,
}
