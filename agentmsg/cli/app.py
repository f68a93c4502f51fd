"""Typer command definitions. Each callback only translates arguments.

The work is in :mod:`agentmsg.service.commands` (messaging) and
:mod:`agentmsg.cli.admin` (install, doctor, version); output is :mod:`.output`.

Callbacks are plain functions listed in :data:`COMMANDS` and :data:`GROUPS`;
nothing is registered with typer at import time.  :func:`app_command` builds
the whole tree (for ``agentmsg``, ``--help``, an unknown command and the
README reference); :func:`one_command` builds only the command ``argv``
names, which is what every real invocation pays for (docs/BENCHMARKS.md).
Each callback imports the service layer it needs when it runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from agentmsg.cli import claimcmds, handoffcmds, hostcmds
from agentmsg.cli.options import Collab, Json, Notify, NotifyCommand, Root, Self, _ctx, _done

HELP = "Durable, addressed messaging between coding-agent sessions."
#: Sub-command groups: name -> help (their commands are in :data:`GROUPS`, filled in below).
GROUP_HELP = {
    "log": "The collaboration log: immutable notes and the rendered transcript.",
    "delivery": "Stop continuations for one binding, inside a finite, immutable envelope.",
    "wake": "Opt-in, bounded wake-ups of this idle session when mail arrives (off by default).",
    "install": "Install host adapters that are not installed as a plugin.",
    "uninstall": "Remove agentmsg from a host (what it wrote, the host's plugin, caches).",
    "run": "Start a host with the session identity its shell lacks.",
    "db": "The PostgreSQL store (--store URL or AGENTMSG_STORE): its schema.",
    "guard": "Git hooks that refuse a commit or push touching paths another participant claimed.",
    **handoffcmds.GROUP_HELP,
}
#: Settings of every Typer built here (the full tree's root, and a single command).
_SETTINGS: dict[str, Any] = {"add_completion": False, "pretty_exceptions_enable": False, "rich_markup_mode": None}

def _actions() -> Any:
    from agentmsg.service import commands

    return commands


def _delivery() -> Any:
    from agentmsg.service import delivery_commands

    return delivery_commands


def _wake() -> Any:
    from agentmsg.service import wake_commands

    return wake_commands


def _lifecycle() -> Any:
    from agentmsg.service import lifecycle

    return lifecycle


def _admin() -> Any:
    from agentmsg.cli import admin

    return admin


def open_(
    alias: Annotated[str, typer.Option(help="Your alias in this collaboration.")],
    label: Annotated[str, typer.Option(help="Short label, e.g. review.")],
    task: Annotated[str, typer.Option(help="The bounded task this collaboration is for.")],
    self_: Self = None,
    notify: Notify = None,
    notify_command: NotifyCommand = None,
    invite_only: Annotated[bool, typer.Option("--invite-only", help="Admit only holders of a one-time ticket "
                                                                    "(agentmsg invite).")] = False,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Open a collaboration and print its UUID and the state root."""
    payload = _actions().open_collab(_ctx(root), self_flag=self_, alias=alias, label=label, task=task,
                                  notify_spec=notify, notify_command=notify_command, invite_only=invite_only)
    return _done("open", payload, json_)


def join(
    alias: Annotated[str, typer.Option(help="Your alias: ^[a-z][a-z0-9_-]{0,31}$, unique here.")],
    collab: Collab = None,
    self_: Self = None,
    succeeds: Annotated[str | None, typer.Option(help="Take over OLD_PIN's alias and inbox.")] = None,
    reason: Annotated[str | None, typer.Option(help="Why, for the log (required with --succeeds).")] = None,
    notify: Notify = None,
    notify_command: NotifyCommand = None,
    ticket: Annotated[str | None, typer.Option(
        "--ticket", help="A one-time ticket from agentmsg invite (an invite-only collaboration; also "
                         "AGENTMSG_TICKET).")] = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Join a collaboration under an alias (or take one over with --succeeds)."""
    payload = _actions().join(_ctx(root), collab=collab, self_flag=self_, alias=alias, succeeds=succeeds,
                           reason=reason, notify_spec=notify, notify_command=notify_command, ticket=ticket)
    return _done("join", payload, json_)


def invite(
    alias: Annotated[str | None, typer.Option("--alias", help="The ticket admits only this alias.")] = None,
    expires_in: Annotated[str | None, typer.Option("--expires-in", help="How long the ticket is valid "
                                                                        "(default 1h, at most 7d).")] = None,
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Print a one-time ticket that admits one session (the collaboration records only its hash)."""
    return _done("invite", _actions().invite(_ctx(root), collab=collab, self_flag=self_, alias=alias,
                                             expires_in=expires_in), json_)


def kill(
    alias: Annotated[str, typer.Argument(metavar="ALIAS", help="The participant whose session to stop.")],
    force: Annotated[bool, typer.Option("--force", help="Stop a session agentmsg did not spawn (a human: pin "
                                                        "only), through the host process its hooks recorded.")] = False,
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Stop a participant's session: one agentmsg spawned (its spawner, the opener or a human: pin), or another
    with --force (a human: pin). Its alias stays, gone; sends to it are still stored."""
    return _done("kill", _lifecycle().kill(_ctx(root), collab=collab, self_flag=self_, alias=alias, force=force),
                 json_)


HostArgs = Annotated[list[str] | None, typer.Argument(metavar="[-- HOST ARGS]",
                                                      help="The host CLI's own arguments, after `--`, as given.")]
Timeout = Annotated[str | None, typer.Option("--timeout", help="How long to wait for the session to get ready "
                                                                "(default 60s, at most 10m).")]
Where = Annotated[str, typer.Option("--where", metavar="tmux|headless",
                                    help="tmux: a new window in the tmux you run in ($TMUX); headless: agentmsg's "
                                         "own detached tmux server under the state root.")]


def spawn(
    host: Annotated[str, typer.Argument(metavar="HOST", help="The host to start (docs/LIFECYCLE.md lists them).")],
    alias: Annotated[str, typer.Option(help="The new session's alias (free in the collaboration).")],
    task: Annotated[str | None, typer.Option(help="Sent to it as your request once it is ready.")] = None,
    cwd: Annotated[str | None, typer.Option(help="Its working folder (default: this one).")] = None,
    where: Where = "tmux",
    timeout: Timeout = None,
    args: HostArgs = None,
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Start a host's interactive session bound to ALIAS (a one-time ticket its own SessionStart hook uses);
    returns once it is bound and has answered, with its pin and where it runs."""
    return _done("spawn", _lifecycle().spawn(_ctx(root), collab=collab, self_flag=self_, host=host, alias=alias,
                                             task=task, cwd=cwd, where=where, timeout=timeout, args=args or []),
                 json_)


def fork(
    alias: Annotated[str, typer.Argument(metavar="ALIAS", help="The participant whose conversation to fork.")],
    new_alias: Annotated[str, typer.Option("--alias", help="The forked session's alias (free).")],
    cwd: Annotated[str | None, typer.Option(help="Its working folder (default: where ALIAS was spawned).")] = None,
    where: Where = "tmux",
    timeout: Timeout = None,
    args: HostArgs = None,
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Start a new session from ALIAS's conversation (the host's own fork) under a new alias, bound and
    awaited as a spawn is."""
    return _done("fork", _lifecycle().fork(_ctx(root), collab=collab, self_flag=self_, alias=alias,
                                           new_alias=new_alias, cwd=cwd, where=where, timeout=timeout,
                                           args=args or []), json_)


def resume(
    alias: Annotated[str, typer.Argument(metavar="ALIAS", help="The participant whose session to start again.")],
    cwd: Annotated[str | None, typer.Option(help="Its working folder (default: this one).")] = None,
    where: Where = "tmux",
    timeout: Timeout = None,
    args: HostArgs = None,
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Start ALIAS's ended session again through its host's own resume (same alias; a new session id moves the
    alias by an audited takeover, reason resume)."""
    return _done("resume", _lifecycle().resume(_ctx(root), collab=collab, self_flag=self_, alias=alias, cwd=cwd,
                                               where=where, timeout=timeout, args=args or []), json_)


def policy(
    who_may_join: Annotated[str, typer.Argument(metavar="open|invite-only",
                                                help="open: anyone who knows the id; invite-only: a ticket's "
                                                     "holder.")],
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Set who may join: anyone who knows the collaboration's id, or only the holder of a ticket."""
    return _done("policy", _actions().set_policy(_ctx(root), collab=collab, self_flag=self_, policy=who_may_join),
                 json_)


def handover(
    to: Annotated[str, typer.Option(help="The pin RUNTIME:SESSION_ID that may take your alias over.")],
    alias: Annotated[str | None, typer.Option(help="The alias to hand over (a human: pin may name any).")] = None,
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Agree that another session may take over your alias (join --succeeds) across runtimes."""
    return _done("handover", _actions().handover(_ctx(root), collab=collab, self_flag=self_, to=to, alias=alias), json_)


def send(
    to: Annotated[str, typer.Option(help="Recipient alias, or 'all' for point-to-point copies to everyone.")] = "",
    subject: Annotated[str, typer.Option(help="One-line subject.")] = "",
    kind: Annotated[str, typer.Option(help="request (needs action) or update (information).")] = "update",
    priority: Annotated[str, typer.Option(help="normal or high (ordering only; grants nothing).")] = "normal",
    body: Annotated[str | None, typer.Option(help="Body text.")] = None,
    body_stdin: Annotated[bool, typer.Option(help="Read the body from stdin.")] = False,
    body_file: Annotated[Path | None, typer.Option(help="Read the body from a file.")] = None,
    id_: Annotated[str | None, typer.Option("--id", help="Message UUID (default: new). Same id + same "
                                                         "content is a no-op.")] = None,
    reply_to: Annotated[str | None, typer.Option(
        help="The message this answers: MESSAGE_ID, or ALIAS/MESSAGE_ID with ALIAS its sender or its recipient; "
             "recorded as RECIPIENT/MESSAGE_ID. The reply goes to the other party unless --to is given.")] = None,
    redact: Annotated[bool, typer.Option(help="Replace detected secrets with [REDACTED:kind] and send.")] = False,
    type_: Annotated[str | None, typer.Option(
        "--type", help="A typed handoff: task, result, gate_request, gate_response or status "
                       "(docs/HANDOFFS.md); needs --payload-file.")] = None,
    payload_file: Annotated[str | None, typer.Option(
        help="The typed message's payload: a YAML or JSON file, or - for stdin; checked against its type's "
             "schema.")] = None,
    correlation_id: Annotated[str | None, typer.Option(
        help="The message a result or gate_response answers (its task's or gate's MESSAGE_ID; the same as "
             "--reply-to).")] = None,
    workflow_run_id: Annotated[str | None, typer.Option(help="The workflow run a typed message belongs to.")] = None,
    phase: Annotated[str | None, typer.Option(help="The phase of the workflow a typed message belongs to.")] = None,
    thread: Annotated[str | None, typer.Option(
        help="Start or join the thread NAME in the collaboration (default: a reply joins the thread of what it "
             "answers; any other message starts its own).")] = None,
    template: Annotated[str | None, typer.Option(
        help="One of the seed's hand-off templates (phase_completion, sprint_deploy, deploy_validate): the "
             "payload file is checked against it and sent as a status.")] = None,
    attach: Annotated[list[str] | None, typer.Option(
        help="An artifact of a task or result (repeatable): recorded by path, size and sha256, never copied.",
        show_default=False)] = None,
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Store a message durably, then notify the recipient."""
    import os

    from agentmsg.cli import handoffcmds
    from agentmsg.domain.values import Draft

    handoff, correlation = handoffcmds.typed_draft(type_, payload_file, workflow_run_id, phase, template)
    if handoff is not None and body is None and not body_stdin and body_file is None:
        text = ""  # a typed message's body is its payload, rendered
    else:
        text = _read_body(body, body_stdin, body_file)
    answers = {r for r in (reply_to, correlation_id) if r}
    if len(answers) > 1:
        from agentmsg.errors import UsageError

        raise UsageError("--reply-to and --correlation-id name different messages; give one")
    reply = next(iter(answers), None) or correlation
    draft = Draft(to=to, kind=kind, priority=priority, subject=subject, body=text, id=id_, reply_to=reply,
                  handoff=handoff, thread=thread)
    payload = _actions().send(_ctx(root), collab=collab, self_flag=self_, draft=draft, redact=redact,
                              attach=attach or (), cwd=os.getcwd())
    return _done("send", payload, json_)


def _read_body(body: str | None, from_stdin: bool, path: Path | None) -> str:
    from agentmsg.errors import UsageError

    given = [body is not None, from_stdin, path is not None]
    if sum(given) != 1:
        raise UsageError("give the body exactly once: --body TEXT, --body-stdin or --body-file PATH")
    if body is not None:
        return body
    from agentmsg.domain.validate import BODY_MAX_BYTES as limit
    try:
        raw = sys.stdin.buffer.read(limit + 1) if from_stdin else _read_file(path, limit)  # type: ignore[arg-type]
    except OSError as exc:
        raise UsageError(f"cannot read body: {exc.strerror or exc}") from None
    if len(raw) > limit:
        from agentmsg.errors import TooLarge

        raise TooLarge(f"body is over {limit} bytes; nothing was stored")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"body is not valid UTF-8 (byte {exc.start}); nothing was stored") from None


def _read_file(path: Path, limit: int) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(limit + 1)


def inbox(
    collab: Collab = None,
    self_: Self = None,
    limit: Annotated[int, typer.Option(help="At most this many messages (default 20); the rest are counted.")] = 20,
    offset: Annotated[int, typer.Option(help="Skip this many first (to page through a backlog).")] = 0,
    all_: Annotated[bool, typer.Option("--all", help="Print every unacknowledged message, not one page.")] = False,
    history: Annotated[bool, typer.Option(help="Include acknowledged messages (the whole history, paged).")] = False,
    priority_first: Annotated[bool, typer.Option(help="High priority first, then oldest first.")] = False,
    thread: Annotated[str | None, typer.Option(
        help="Only the messages of this thread: its name, or the id of any of its messages.")] = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """List unacknowledged messages, oldest first, with full bodies: one page of 20 unless asked. Does not ack."""
    payload = _actions().inbox(_ctx(root), collab=collab, self_flag=self_, limit=limit, offset=offset, everything=all_,
                            include_acked=history, priority_first=priority_first, thread=thread)
    return _done("inbox", payload, json_)


def show(
    message_id: Annotated[str, typer.Argument(metavar="MESSAGE_ID", help="Message UUID.")],
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Print one message in full, with its states (a session: only of its own collaborations)."""
    return _done("show", _actions().show(_ctx(root), collab=collab, message_id=message_id, self_flag=self_), json_)


def ack(
    ids: Annotated[list[str] | None, typer.Argument(metavar="[MESSAGE_ID]...",
                                                     help="Message UUIDs to acknowledge.", show_default=False)] = None,
    message: Annotated[list[str] | None, typer.Option(
        help="Message UUID to acknowledge (repeat for several; the same as naming it).", show_default=False)] = None,
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Record that you (the exact recipient) read messages in full. Idempotent; several ids in one call."""
    named = [*(ids or ()), *(message or ())]
    if not named:
        from agentmsg.errors import UsageError

        raise UsageError("name the messages to acknowledge: agentmsg ack ID [ID...] (or --message ID, repeated)")
    return _done("ack", _actions().ack(_ctx(root), collab=collab, self_flag=self_, message_ids=named), json_)


def notify(
    retry: Annotated[str, typer.Option(help="Message UUID whose notification to retry.")],
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Retry a failed notification without re-sending the body (its sender or recipient only)."""
    return _done("notify", _actions().notify_retry(_ctx(root), collab=collab, self_flag=self_, message_id=retry), json_)


def status(
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Show the root, your binding, participants, pending mail and closure."""
    return _done("status", _actions().status(_ctx(root), collab=collab, self_flag=self_), json_)


def collabs(self_: Self = None, root: Root = None, json_: Json = False) -> int:
    """List the collaborations you can name: id, label, participants, unread (the owner: all under the root)."""
    return _done("collabs", _actions().collaborations(_ctx(root), self_flag=self_), json_)


def roster(
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Who is in the collaboration and who is there: working, idle, listening, gone; unread and how far behind."""
    from agentmsg.service import roster as service

    return _done("roster", service.roster(_ctx(root), collab=collab, self_flag=self_), json_)


def search(
    query: Annotated[str, typer.Argument(metavar="QUERY", help='Words that must all occur; "a phrase" in quotes '
                                                             "must occur as written (case and punctuation ignored).")],
    collab: Annotated[str | None, typer.Option("--collab", help="Only this collaboration (id, label or id prefix; "
                                                                "default: all).")] = None,
    from_: Annotated[str | None, typer.Option("--from", help="Only from this sender alias (a note's author).")] = None,
    to: Annotated[str | None, typer.Option("--to", help="Only to this recipient alias.")] = None,
    kind: Annotated[str | None, typer.Option(help="Only request, update or note.")] = None,
    since: Annotated[str | None, typer.Option(help="Only from this date on (YYYY-MM-DD or a UTC time).")] = None,
    until: Annotated[str | None, typer.Option(help="Only up to this date (inclusive).")] = None,
    limit: Annotated[int, typer.Option(help="At most this many hits (best first).")] = 20,
    thread: Annotated[str | None, typer.Option(
        help="Only the messages of this thread: its name, or the id of any of its messages (no notes).")] = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Search message subjects, bodies and log notes; ranked hits, each with the command that shows it."""
    payload = _actions().search(_ctx(root), text=query, collab=collab, sender=from_, to=to, kind=kind, since=since,
                             until=until, limit=limit, root_flag=root, self_flag=self_, thread=thread)
    return _done("search", payload, json_)


def registry(collab: Collab = None, self_: Self = None, root: Root = None, json_: Json = False) -> int:
    """Print the authoritative registry (YAML; JSON with --json)."""
    doc = _actions().registry(_ctx(root), collab=collab, self_flag=self_)
    if json_:
        return _done("registry", doc, True)
    from agentmsg.cli.output import write, yaml_text

    write(yaml_text(doc))
    return 0


def leave(collab: Collab = None, self_: Self = None, root: Root = None, json_: Json = False) -> int:
    """End your binding. Your inbox and history stay."""
    return _done("leave", _actions().leave(_ctx(root), collab=collab, self_flag=self_), json_)


def close(collab: Collab = None, self_: Self = None, root: Root = None, json_: Json = False) -> int:
    """Make a collaboration inert. History is kept; unresolved mail is reported, not acked."""
    return _done("close", _actions().close(_ctx(root), collab=collab, self_flag=self_), json_)


def log_append(
    text: Annotated[str | None, typer.Option(help="Note text.")] = None,
    stdin: Annotated[bool, typer.Option("--stdin", help="Read the note from stdin.")] = False,
    corrects: Annotated[str | None, typer.Option(help="Id of the entry this corrects.")] = None,
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Add an immutable note; a correction is a new note that names the old one."""
    note = _read_body(text, stdin, None)
    return _done("log append", _actions().log_append(_ctx(root), collab=collab, self_flag=self_, text=note,
                                                         corrects=corrects), json_)


def log_render(
    collab: Collab = None,
    html: Annotated[bool, typer.Option("--html", help="Write one self-contained HTML page instead "
                                                      "(collaboration.html next to the records).")] = False,
    out: Annotated[str | None, typer.Option("--out", help="Write the HTML page to this file instead.")] = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Regenerate collaboration.md and every inbox transcript from the records (or, with --html, one page)."""
    return _done("log render", _actions().log_render(_ctx(root), collab=collab, as_html=html, out=out,
                                                                self_flag=self_), json_)


def log_show(
    collab: Collab = None,
    self_: Self = None,
    thread: Annotated[str | None, typer.Option(
        help="Instead, the messages of this thread in order: its name, or the id of any of its messages.")] = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Print the log entries (with --thread: one thread's messages)."""
    return _done("log show", _actions().log_show(_ctx(root), collab=collab, self_flag=self_, thread=thread), json_)


def watch(
    for_reply: Annotated[str | None, typer.Option(help="Wait for a reply to this message id.")] = None,
    timeout: Annotated[str | None, typer.Option(help="How long to wait: default 10m, at most 30m.")] = None,
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Wait for a new request (or a reply), print one line per event, exit. Never re-arms."""
    from agentmsg.cli.output import say
    from agentmsg.text.escape import line as one_line

    emit = (lambda line: None) if json_ else (lambda line: say(one_line(line), flush=True))
    payload = _actions().watch(_ctx(root), collab=collab, self_flag=self_, for_reply=for_reply, timeout=timeout,
                            emit=emit)
    return _done("watch", payload, json_) if json_ else 0


def top(
    collab: Annotated[str | None, typer.Option("--collab", help="Only this collaboration (id, label or id prefix; "
                                                             "default: every collaboration under the root).")] = None,
    self_: Annotated[str | None, typer.Option("--self", help="Your own human:NAME pin: lets you reply, "
                                                            "ack what is addressed to you, and close "
                                                            "(default: read-only).")] = None,
    once: Annotated[bool, typer.Option("--once", help="Print one frame and exit (the default when not "
                                                     "on a terminal).")] = False,
    root: Root = None,
) -> int:
    """Watch collaborations live: participants, unacked requests, latest messages, envelopes, stuck mail."""
    from agentmsg.cli import top as view

    return view.run(_ctx(root), collab=collab, self_flag=self_, once=once)


def verify(collab: Collab = None, root: Root = None, json_: Json = False) -> int:
    """Check every record and every derived file against the records; exit 13 on tampering."""
    return _done("verify", _actions().verify(_ctx(root), collab=collab), json_)


def repair(collab: Collab = None, root: Root = None, json_: Json = False) -> int:
    """Rebuild every derived file (registry, indexes, maps, transcripts) from the records; clean temp files."""
    return _done("repair", _actions().repair(_ctx(root), collab=collab), json_)


def delivery_enable(
    expires_in: Annotated[str, typer.Option(help="When the envelope expires (at most --max-duration).")] = "2h",
    max_duration: Annotated[str, typer.Option(help="Hard cap, at most 24h.")] = "24h",
    max_continuations: Annotated[int, typer.Option(help="Stop continuation slots; never reused.")] = 20,
    wait: Annotated[str, typer.Option(help="How long a Stop may wait for a request (0 = no wait).")] = "0",
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Let pending requests hold this session's Stop, within a finite envelope nothing renews."""
    payload = _delivery().enable(_ctx(root), collab=collab, self_flag=self_, expires_in=expires_in,
                                      max_duration=max_duration, slots=max_continuations, wait=wait)
    return _done("delivery enable", payload, json_)


def delivery_disable(collab: Collab = None, self_: Self = None, root: Root = None, json_: Json = False) -> int:
    """Make this binding's envelope inert now. History is kept."""
    return _done("delivery disable", _delivery().disable(_ctx(root), collab=collab, self_flag=self_), json_)


def delivery_inspect(collab: Collab = None, self_: Self = None, root: Root = None, json_: Json = False) -> int:
    """Show the envelope: owner, remaining slots, expiry, interrupted attempts, installed adapters."""
    return _done("delivery inspect", _delivery().inspect(_ctx(root), collab=collab, self_flag=self_), json_)


def delivery_midturn(
    state: Annotated[str, typer.Argument(help="on or off.")],
    priority: Annotated[str, typer.Option(help="Which messages may interrupt a turn: high or all.")] = "high",
    min_gap: Annotated[str, typer.Option(help="Least time between two mid-turn injections.")] = "60s",
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Show due messages between tool calls (PostToolUse), not only at the next prompt; opt-in, bounded."""
    payload = _delivery().midturn(_ctx(root), state=state, priority=priority, min_gap=min_gap, collab=collab,
                                  self_flag=self_)
    return _done("delivery midturn", payload, json_)


def delivery_retry(
    attempt: Annotated[str, typer.Option(help="The interrupted attempt id (from delivery inspect).")],
    message: Annotated[str, typer.Option(help="The message id to present again.")],
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Present a message again at the next prompt because its attempt was interrupted."""
    return _done("delivery retry", _delivery().retry(_ctx(root), collab=collab, self_flag=self_, attempt=attempt,
                                                                   message=message), json_)


def wake_on(
    expires_in: Annotated[str, typer.Option(help="When the consent ends (at most 24h); nothing renews it.")] = "8h",
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Let senders ring this idle session with a fixed doorbell line (bounded; only for yourself)."""
    payload = _wake().on(_ctx(root), collab=collab, self_flag=self_, expires_in=expires_in)
    return _done("wake on", payload, json_)


def wake_off(collab: Collab = None, self_: Self = None, root: Root = None, json_: Json = False) -> int:
    """End this binding's wake consent now. History is kept."""
    return _done("wake off", _wake().off(_ctx(root), collab=collab, self_flag=self_), json_)


def wake_status(collab: Collab = None, self_: Self = None, root: Root = None, json_: Json = False) -> int:
    """Show this binding's wake consent: expiry, session facts, rings, the bounds."""
    return _done("wake status", _wake().status(_ctx(root), collab=collab, self_flag=self_), json_)


def mcp(self_: Self = None, root: Root = None,
        allow_spawn: Annotated[bool, typer.Option("--allow-spawn", help="Also serve the spawn and kill tools "
                                                                        "(they start and stop sessions here).")]
        = False) -> int:
    """Serve the messaging tools over MCP on stdio (needs agentmsg[mcp]); the pin is fixed at start."""
    try:
        from agentmsg.mcp import server as mcpserver
    except ImportError as exc:
        from agentmsg.errors import UsageError

        raise UsageError(f"agentmsg mcp needs the MCP SDK ({exc.name} is missing): "  # not on PyPI: no 'agentmsg[mcp]'
                         f"{sys.executable} -m pip install 'mcp>=2.3,<3'") from None
    return mcpserver.serve(root, self_, allow_spawn=allow_spawn)


def doctor(root: Root = None, json_: Json = False) -> int:
    """Check which agentmsg each entry point runs (CLI, launcher, hooks); exit 16 if they disagree."""
    return _done("doctor", _admin().doctor(_ctx(root)), json_)


def version(root: Root = None, json_: Json = False) -> int:
    """Print the version, the interpreter and the state root this copy resolves."""
    return _done("version", _admin().version(_ctx(root)), json_)


def db_migrate(root: Root = None, json_: Json = False) -> int:
    """Apply the shipped SQL migrations to the --store/AGENTMSG_STORE database, in one transaction."""
    return _done("db migrate", _admin().db_migrate(_ctx(root)), json_)


def db_grant(
    role: Annotated[str, typer.Option("--role", help="The PostgreSQL role to let in.")],
    collab: Annotated[str, typer.Option("--collab", help="Collaboration: id, label or id prefix.")],
    root: Root = None,
    json_: Json = False,
) -> int:
    """Let another PostgreSQL role (machine or principal) into a collaboration you are in."""
    return _done("db grant", _admin().db_grant(_ctx(root), collab, role), json_)


def sync(
    once: Annotated[bool, typer.Option("--once", help="Catch up once and exit.")] = False,
    idle_exit: Annotated[str | None, typer.Option("--idle-exit", help="Exit after this long with nothing to "
                                                                     "copy or push (default 15m).")] = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Mirror --store/AGENTMSG_STORE into this root so hooks read local files (one per root; started automatically)."""
    from agentmsg.resident import mirror  # the resident helper of a replica root, run in the foreground

    return _done("sync", mirror.command(_ctx(root), once=once, idle_exit=idle_exit), json_)


def db_move(
    collab: Annotated[str, typer.Option("--collab", help="Collaboration: id, label or id prefix.")],
    root: Root = None,
    json_: Json = False,
) -> int:
    """Move a collaboration from the file store at --root into --store: history and hash chains intact."""
    return _done("db move", _admin().db_move(_ctx(root), collab), json_)


#: Top-level commands, in the order ``agentmsg --help`` lists them.
COMMANDS: dict[str, Callable[..., int]] = {
    "open": open_, "join": join, "invite": invite, "policy": policy, "spawn": spawn, "kill": kill,
    "resume": resume, "fork": fork, "handover": handover, "send": send,
    "inbox": inbox, "show": show, "ack": ack,
    "notify": notify, "status": status, "collabs": collabs, "roster": roster, "registry": registry, "leave": leave,
    "close": close,
    "watch": watch, "search": search, "top": top, "verify": verify, "repair": repair, "mcp": mcp, "doctor": doctor,
    "version": version, "sync": sync,
    **claimcmds.COMMANDS, **handoffcmds.COMMANDS,
}
#: Groups and their commands, in that order (``agentmsg --help`` lists groups after commands).
GROUPS: dict[str, dict[str, Callable[..., int]]] = {
    "log": {"append": log_append, "render": log_render, "show": log_show},
    "delivery": {"enable": delivery_enable, "disable": delivery_disable, "inspect": delivery_inspect,
                 "retry": delivery_retry, "midturn": delivery_midturn},
    "wake": {"on": wake_on, "off": wake_off, "status": wake_status},
    **hostcmds.GROUPS,
    **handoffcmds.GROUPS,
    "db": {"migrate": db_migrate, "grant": db_grant, "move": db_move},
    "guard": claimcmds.GUARD,
}


def _print_version(asked: bool) -> None:
    if asked:
        raise typer.Exit(version())


def _root_options(
    version_: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                           help="Print the version (as agentmsg version does) and exit.")] = False,
) -> None:
    """The options of ``agentmsg`` itself (issue 30: ``agentmsg --version`` is what people type first)."""


def full_app() -> typer.Typer:
    """The whole command tree: every command and group."""
    app = typer.Typer(name="agentmsg", help=HELP, no_args_is_help=True, **_SETTINGS)
    app.callback()(_root_options)
    for name, callback in COMMANDS.items():
        app.command(name)(callback)
    for group, commands in GROUPS.items():
        sub = typer.Typer(help=GROUP_HELP[group], no_args_is_help=True)
        for name, callback in commands.items():
            sub.command(name)(callback)
        app.add_typer(sub, name=group)
    return app


def app_command() -> Any:
    """The full tree as a click command (help, unknown commands, the README reference)."""
    return typer.main.get_command(full_app())


def one_command(args: Sequence[str]) -> tuple[Any, str, list[str]] | None:
    """``(command, prog_name, rest)`` with only the command ``args`` names built, or None.

    None (build the full tree) for no command, an option first, an unknown
    command, or a group without a known sub-command: there the full tree's
    help and "No such command" messages are the answer.
    """
    if not args:
        return None
    name, rest = args[0], list(args[1:])
    callback = COMMANDS.get(name)
    path = name
    if callback is None:
        commands = GROUPS.get(name)
        if commands is None or not rest or rest[0] not in commands:
            return None
        callback = commands[rest[0]]
        path, rest = f"{name} {rest[0]}", rest[1:]
    built = BUILT.get(path)
    if built is None:
        one = typer.Typer(**_SETTINGS)
        one.command(path.rsplit(" ", 1)[-1])(callback)
        built = typer.main.get_command(one)
    return built, f"agentmsg {path}", rest


#: Commands built ahead (``build_all``): the resident helper that runs commands (``cli/serve.py``) builds each
#: once, and every command it runs in a forked child skips typer's reading of the callback's signature.
BUILT: dict[str, Any] = {}


def build_all() -> None:
    """Build every command once (:data:`BUILT`), and the whole tree, for a long-lived process."""
    for path in [*COMMANDS, *(f"{g} {c}" for g, commands in GROUPS.items() for c in commands)]:
        words = path.split()
        found = one_command([*words, "--help"])
        if found is not None:
            BUILT[path] = found[0]
    app_command()
