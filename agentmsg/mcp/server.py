"""``agentmsg mcp``: a stdio MCP server on the official SDK (the optional extra ``agentmsg[mcp]``).

Nothing else imports this module: the hooks and every other command stay
free of the SDK.

* **Identity is fixed at start.**  The acting pin comes from ``--self`` or the
  host's session variable in the server's own environment
  (``identity.resolve``), once.  No tool takes a pin.
* **The same work as the CLI.**  Every tool calls ``service.commands`` (or the
  ``Mailbox``) with keyword arguments; an ``AgentmsgError`` becomes a tool
  error whose text is the CLI's line and whose structured content carries the
  CLI's exit code and error type.
* **Peer text is framed as the hooks frame it.**  Messages go through
  ``text.boundary.render`` (nonce markers, attribution, flags, the cap); a
  shown message gets a ``presented`` receipt through the service, never an
  ack.  Structured content never holds peer text (a client may hand it to the
  model unframed), only ids, counts and agentmsg's own fields.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from agentmsg import __version__
from agentmsg.domain import validate
from agentmsg.domain.values import Draft, Message, Pin
from agentmsg.errors import AgentmsgError, WatchTimeout
from agentmsg.mcp import front
from agentmsg.service import commands, payloads, readers
from agentmsg.service.context import Ctx
from agentmsg.text import boundary

HOST = "mcp"  # the ``host`` of the presented receipts this server writes
WAIT_DEFAULT = 60.0
WAIT_MAX = 600.0  # a tool call is not a place to park a model for long: 10 minutes at most
SHOW_UNIT = "utf16"  # MCP clients are mostly JavaScript: count what they count
TRANSCRIPT_MAX = 256 * 1024

INSTRUCTIONS = front.INSTRUCTIONS  # the front (bin/agentmsg mcp) answers initialize with the same text

#: Claims: the directory patterns are relative to (docs/CLAIMS.md).
CwdArg = Annotated[str | None, Field(description=(
    "The directory the patterns are relative to, inside the git repository (default: the server's working "
    "directory)."))]
CollabArg = Annotated[str | None, Field(
    description="Collaboration: its UUID, its label, or a unique id prefix of at least 8 characters. Omit it when "
                "this session is in exactly one collaboration (the usual case).")]
MessageId = Annotated[str, Field(description="A message UUID, as shown after 'id' in inbox or wait_for_reply.")]


def _error(err: AgentmsgError) -> CallToolResult:
    """A tool error that says what the CLI says, with its exit code."""
    doc: dict[str, Any] = {"error": {"code": err.code, "type": type(err).__name__, "message": err.line()}}
    if err.result is not None:
        doc["result"] = err.result
    text = f"{err.line()} (exit code {err.code}, {type(err).__name__})"
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=doc, is_error=True)


def _ok(text: str, doc: dict[str, Any] | None = None) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=doc)


def _json(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, ensure_ascii=False, indent=1)


class Tools:
    """The tools, bound to one Ctx and one pin; every store call is serialized."""

    def __init__(self, ctx: Ctx, who: Pin, env: Mapping[str, str]) -> None:
        self.ctx, self.who, self.env = ctx, who, env
        self.self_flag = str(who)
        self.cap = boundary.cap_from_env(env)
        self.lock = threading.Lock()

    def call(self, fn: Callable[[], CallToolResult]) -> CallToolResult:
        from agentmsg.service.oserrors import os_error

        try:
            with self.lock:
                return fn()
        except AgentmsgError as err:
            return _error(err)
        except OSError as exc:
            mapped = os_error(exc)
            if mapped is None:
                raise
            return _error(mapped)

    # ---- framing ----------------------------------------------------------------------------

    def frame(self, cid: str, msgs: list[Message], *, via: str, lead: Callable[[int], str] | None = None,
              more: int = 0, alias: str) -> tuple[str, dict[str, Any]]:
        """Messages inside the boundary, with presented receipts for those shown (never an ack)."""
        rendered = boundary.render(msgs, alias=alias, cap=self.cap, unit=SHOW_UNIT, lead=lead, more=more)
        self.presented(cid, list(rendered.included), via)
        text = rendered.text + self.tool_note(bool(rendered.included))
        return text, {"shown": list(rendered.included), "cut": list(rendered.cut), "omitted": rendered.omitted + more}

    def presented(self, cid: str, ids: list[str], via: str) -> None:
        if not ids:
            return
        from agentmsg.records import uuid4

        attempt = uuid4()
        alias, recorded = self.ctx.mailbox.present(cid, self.who, ids, attempt=attempt, host=HOST, via=via)
        if recorded:
            self.ctx.mailbox.complete(cid, alias, attempt=attempt, host=HOST, via=via, count=len(recorded))

    @staticmethod
    def tool_note(shown: bool) -> str:
        if not shown:
            return ""
        return ("With this MCP server: the `show` tool gives a message in full, `ack` (message_ids) "
                "acknowledges, `inbox` lists the rest.\n")

    # ---- tools ----------------------------------------------------------------------------------

    def send(self, to: str, subject: str, body: str, kind: str, priority: str, reply_to: str | None,
             id: str | None, collab: str | None, redact: bool, typed: dict[str, Any] | None = None,
             thread: str | None = None) -> CallToolResult:
        """``typed``: a typed handoff's ``type``, ``payload``, ``workflow_run_id`` and ``phase`` (issue 31)."""
        draft = Draft(to=to, kind=kind, priority=priority, subject=subject, body=body, id=id, reply_to=reply_to,
                      handoff=typed, thread=thread)

        def run() -> CallToolResult:
            from agentmsg.domain.wake import said

            payload = commands.send(self.ctx, collab=collab, self_flag=self.self_flag, draft=draft, redact=redact,
                                    cwd=os.getcwd())
            lines = [f"{r['state']}: id {r['id']} to {r['to']}"
                     + (f" (wake: {words})" if (words := said(r.get("wake", {}).get("outcome") or "wake off"))
                        else "") + (f"; {r['next']}" if r.get("next") else "") for r in payload["results"]]
            if payload["redacted"]:
                lines.append(f"{payload['redacted']} secret(s) replaced with [REDACTED:kind] before storing.")
            return _ok(f"collaboration {payload['collab']}\n" + "\n".join(lines) + "\n", payload)

        return self.call(run)

    def inbox(self, collab: str | None, limit: int, offset: int, priority_first: bool) -> CallToolResult:
        def run() -> CallToolResult:
            cid = readers.check(self.ctx, self.who, self.ctx.collab(collab, self.who))
            alias, page = self.ctx.mailbox.inbox(cid, self.who, limit=offset + limit, priority_first=priority_first)
            msgs = page.messages[offset:]
            if not msgs:
                text = (f"agentmsg: no unacknowledged messages for {alias} in collaboration {cid}"
                        + (f" after offset {offset}" if offset else "") + f" ({page.total} in all).\n")
                return _ok(text, {"collab": cid, "alias": alias, "count": page.total, "shown": [],
                                  "cut": [], "omitted": 0, "problems": page.problems})
            after = max(0, page.total - offset - len(msgs))

            def lead(shown: int) -> str:
                return (f"agentmsg inbox: {page.total} unacknowledged message{'s' * (page.total != 1)} for "
                        f"{alias} in collaboration {cid} ({page.requests} request{'s' * (page.requests != 1)}); "
                        f"from offset {offset}, {shown} quoted below. Listing does not acknowledge.\n")

            text, doc = self.frame(cid, msgs, via="inbox", lead=lead, more=after, alias=alias)
            return _ok(text, {"collab": cid, "alias": alias, "count": page.total, "offset": offset,
                              **doc, "problems": page.problems})

        return self.call(run)

    def show(self, message_id: str, collab: str | None) -> CallToolResult:
        def run() -> CallToolResult:
            msg = commands.shown(self.ctx, self.who, collab, message_id)  # the reading rule: service.readers
            state = self.ctx.mailbox.state(msg)
            payload = {"state": state.label, "states": state.as_dict()}
            nonce = boundary.new_nonce()
            begin, end = boundary.markers(nonce)
            text = (f"agentmsg show: message {msg.id} in collaboration {msg.collab}, in full; "
                    f"state: {payload['state']}.\n" + boundary.explanation(nonce) + begin
                    + (boundary.attribution(msg, 1, True, note=_artifact_note(msg)) or "")
                    + (boundary.quote(msg.body) if msg.body else "") + end
                    + "Being shown here does not acknowledge it; the `ack` tool does.\n")
            self.presented(msg.collab, [msg.id], "show")  # readers.message: the pin is a current member
            return _ok(text, {"id": msg.id, "collab": msg.collab, "from": msg.sender, "to": msg.to,
                              "kind": msg.kind, "state": payload["state"], "states": payload["states"]})

        return self.call(run)

    def ack(self, message_ids: list[str], collab: str | None) -> CallToolResult:
        def run() -> CallToolResult:
            payload = commands.ack(self.ctx, collab=collab, self_flag=self.self_flag, message_ids=message_ids)
            return _ok("\n".join(payloads.ack_lines(payload)) + "\n", payload)

        return self.call(run)

    def status(self, collab: str | None) -> CallToolResult:
        def run() -> CallToolResult:
            payload = commands.status(self.ctx, collab=collab, self_flag=self.self_flag)
            label, task = payload.pop("label", None), payload.pop("task", None)
            framed = _frame_claims(payload)
            text = "agentmsg status:\n" + _json(payload) + "\n" + framed
            if label is not None or task is not None:
                from agentmsg.text import injection

                reg = self.ctx.store.registry(payload["collab"])
                own = reg.opener == self.self_flag
                author = "this session, when it opened the collaboration" if own else "the collaboration's opener"
                text += boundary.peer_fields((("label", str(label)), ("task", str(task))),
                                             injection.detect(f"{label}\n{task}"), author, peer=not own)
            return _ok(text, payload)

        return self.call(run)

    def roster(self, collab: str | None) -> CallToolResult:
        def run() -> CallToolResult:
            from agentmsg.service import roster

            payload = roster.roster(self.ctx, collab=collab, self_flag=self.self_flag)
            payload.pop("label", None)  # a peer's text: status quotes it inside the boundary
            framed = _frame_claims(payload)
            return _ok("agentmsg roster:\n" + _json(payload) + "\n" + framed, payload)

        return self.call(run)

    # ---- claims (docs/CLAIMS.md) ----------------------------------------------------------------------------

    def claim(self, patterns: list[str], shared: bool, ttl: str | None, reason: str | None, renew: bool,
              cwd: str | None, collab: str | None) -> CallToolResult:
        def run() -> CallToolResult:
            from agentmsg.service import claims

            payload = claims.claim(self.ctx, collab=collab, self_flag=self.self_flag, patterns=patterns,
                                   shared=shared, ttl=ttl, reason=reason, renew=renew, cwd=cwd)
            lines = [f"{'renewed' if renew else 'claimed'} {c['pattern']} ({c['mode']}) until {c['expires_at']}"
                     for c in payload["claims"]]
            return _ok("\n".join(lines) + "\n", payload)

        return self.call(run)

    def release(self, patterns: list[str], all_: bool, cwd: str | None, collab: str | None) -> CallToolResult:
        def run() -> CallToolResult:
            from agentmsg.service import claims

            payload = claims.release(self.ctx, collab=collab, self_flag=self.self_flag, patterns=patterns,
                                     all_=all_, cwd=cwd)
            return _ok("released: " + _json(payload["released"]) + "\n", payload)

        return self.call(run)

    def claims(self, mine: bool, collab: str | None) -> CallToolResult:
        def run() -> CallToolResult:
            from agentmsg.service import claims

            payload = claims.listing(self.ctx, collab=collab, self_flag=self.self_flag, mine=mine)
            framed = _frame_claims(payload)
            return _ok("agentmsg claims:\n" + _json(payload) + "\n" + framed, payload)

        return self.call(run)

    def template(self, name: str | None) -> CallToolResult:
        def run() -> CallToolResult:
            from agentmsg.domain import handoffs as rules

            if name is None:
                rows = [{"name": t, "send": f"type={t}", "required": [k for k, v in rules.SCHEMAS[t].items()
                                                                       if v.get("required")]} for t in rules.TYPES]
                rows += [{"name": n, "send": f"template={n}", "required": [k for k, v in rules.TEMPLATES[n].items()
                                                                            if v.get("required")]}
                         for n in rules.TEMPLATES]
                return _ok("agentmsg templates:\n" + "".join(f"{r['name']} ({r['send']}): requires "
                                                             f"{', '.join(r['required'])}\n" for r in rows),
                           {"templates": rows})
            text = rules.template(name)
            example = rules.EXAMPLES.get(name) or rules.TEMPLATE_EXAMPLES[name]
            return _ok(text, {"name": name, "template": name in rules.TEMPLATES, "payload": example})

        return self.call(run)

    def gates(self, open_only: bool, collab: str | None) -> CallToolResult:
        def run() -> CallToolResult:
            from agentmsg.service import handoffs

            cid = readers.check(self.ctx, self.who, self.ctx.collab(collab, self.who))
            found = handoffs.gates(self.ctx, collab=cid, self_flag=self.self_flag, open_only=open_only)["gates"]
            rows = [{"n": n, "id": g["id"], "from": g["from"], "to": g["to"], "required_action": g["required_action"],
                     "state": g["state"], "expires": g["expires"],
                     "decision": ((g.get("response") or {}).get("payload") or {}).get("decision")}
                    for n, g in enumerate(found, 1)]
            fields = []
            for n, g in enumerate(found, 1):
                fields.append((f"gate {n} gate_id", str(g["gate_id"])))
                fields.append((f"gate {n} question", str((g.get("payload") or {}).get("question", ""))))
            text = f"agentmsg gates ({len(rows)}):\n" + _json({"collab": cid, "gates": rows}) + "\n"
            if fields:
                from agentmsg.text import injection

                text += boundary.peer_fields(fields, injection.detect("\n".join(v for _, v in fields)),
                                             "the gates' requesters")
            return _ok(text, {"collab": cid, "gates": rows})

        return self.call(run)

    def spawn(self, host: str, alias: str, collab: str | None, task: str | None, cwd: str | None, where: str,
              timeout_seconds: float, host_args: list[str]) -> CallToolResult:
        def run() -> CallToolResult:
            from agentmsg.service import lifecycle

            payload = lifecycle.spawn(self.ctx, collab=collab, self_flag=self.self_flag, host=host, alias=alias,
                                      task=task, cwd=cwd, where=where, timeout=f"{timeout_seconds:g}s",
                                      args=host_args)
            return _ok(f"spawned {payload['alias']} ({payload['pin']}), ready; it runs in tmux "
                       f"{payload['tmux']['target']}\n", payload)

        return self.call(run)

    def kill(self, alias: str, collab: str | None) -> CallToolResult:
        def run() -> CallToolResult:
            from agentmsg.service import lifecycle

            payload = lifecycle.kill(self.ctx, collab=collab, self_flag=self.self_flag, alias=alias, force=False)
            return _ok(f"stopped {payload['alias']} ({payload['pin']}); its alias stays, gone\n", payload)

        return self.call(run)

    def log_append(self, text: str, corrects: str | None, collab: str | None) -> CallToolResult:
        def run() -> CallToolResult:
            payload = commands.log_append(self.ctx, collab=collab, self_flag=self.self_flag, text=text,
                                          corrects=corrects)
            entry = payload["entry"]
            return _ok(f"log entry {entry['id']} appended by {entry['author']} to collaboration "
                       f"{payload['collab']}\n", payload)

        return self.call(run)

    def wait_for_reply(self, message_id: str, timeout_seconds: float, collab: str | None) -> CallToolResult:
        seconds = max(0.0, min(float(timeout_seconds), WAIT_MAX))

        def setup() -> CallToolResult:
            cid = readers.check(self.ctx, self.who, self.ctx.collab(collab, self.who))
            return _ok("", {"collab": cid, "id": validate.message_id(message_id)})

        first = self.call(setup)
        if first.is_error:
            return first
        cid = first.structured_content["collab"]  # type: ignore[index,unused-ignore]
        mid = first.structured_content["id"]  # type: ignore[index,unused-ignore]
        # Waiting holds no lock and uses a store of its own: other tools keep working meanwhile.
        waiter = Ctx(self.ctx.root, self.ctx.root_source, self.env)
        try:
            alias, found = waiter.mailbox.watch(cid, self.who, for_reply=mid, timeout=seconds)
        except WatchTimeout as err:
            return _error(WatchTimeout(f"no reply to {mid} within {seconds:g}s; nothing was shown or acknowledged "
                                       f"({err})"))
        except AgentmsgError as err:
            return _error(err)

        def run() -> CallToolResult:
            def lead(shown: int) -> str:
                return (f"agentmsg: {len(found)} repl{'ies' if len(found) != 1 else 'y'} to {mid} for {alias} in "
                        f"collaboration {cid}; {shown} quoted below.\n")

            text, doc = self.frame(cid, found, via="wait_for_reply", lead=lead, alias=alias)
            return _ok(text, {"collab": cid, "alias": alias, "reply_to": mid, "replies": [m.id for m in found],
                              **doc})

        return self.call(run)

    # ---- resources ---------------------------------------------------------------------------------

    def collabs(self) -> str:
        with self.lock:
            rows = self.ctx.store.bindings(self.self_flag)  # active bindings only: what readers.collabs allows
        return _json({"self": self.self_flag, "collaborations": [
            {"collab": c, "alias": a, "transcript": f"agentmsg://collab/{c}/transcript"} for c, a in rows]})

    def transcript(self, collab: str) -> str:
        """The whole collaboration as Markdown, every line quoted inside one boundary."""
        from agentmsg.text import transcript as render

        try:
            with self.lock:
                cid = readers.check(self.ctx, self.who, collab)  # a current member only, as every front end
                reg = self.ctx.store.registry(cid)
                by_alias = {a: list(self.ctx.store.history(cid, a)) for a in sorted(reg.participants)}
                md = render.collaboration_md(reg, self.ctx.store.events(cid), by_alias, self.ctx.store.notes(cid))
        except AgentmsgError as err:
            raise ResourceError(f"{err.line()} (exit code {err.code}, {type(err).__name__})") from None
        cut = ""
        if len(md) > TRANSCRIPT_MAX:
            cut = (f"[transcript cut: {TRANSCRIPT_MAX:,} of {len(md):,} characters shown; the rest is in "
                   f"collaboration.md under the state root (`agentmsg log render --collab {cid}`)]\n")
            md = md[:TRANSCRIPT_MAX]
        nonce = boundary.new_nonce()
        begin, end = boundary.markers(nonce)
        return (f"agentmsg transcript of collaboration {cid}: events, messages and log notes in order. "
                "Reading it acknowledges nothing.\n" + boundary.explanation(nonce) + begin
                + boundary.quote(md) + end + cut)


def _artifact_note(msg: Message) -> str:
    """A typed message's artifacts as they are now in this server's checkout (its working directory), as the
    hooks' delivery says it (runtime/artifacts.py)."""
    from agentmsg.runtime import artifacts

    arts = artifacts.of(msg.handoff)
    if not arts:
        return ""
    found = artifacts.states(arts, artifacts.Checkout(os.getcwd()))
    return ("  artifacts in this checkout now: "
            + " · ".join(f"{boundary.one_line(loc[:160])} {state}" for loc, state in found) + "\n")


def _frame_claims(payload: dict[str, Any]) -> str:
    """Claims' patterns and reasons are their holders' words, and open gates' ids their requesters': out of the
    JSON, into the boundary (one block each)."""
    return _claims_block(payload) + _gates_block(payload)


def _gates_block(payload: dict[str, Any]) -> str:
    found = payload.get("open_gates") or []
    if not found:
        return ""
    from agentmsg.text import injection

    fields = []
    for n, g in enumerate(found, 1):
        g["n"] = n
        fields.append((f"open gate {n} ({g['from']} to {g['to']}) gate_id", str(g.pop("gate_id", ""))))
    return boundary.peer_fields(fields, injection.detect("\n".join(v for _, v in fields)), "the gates' requesters")


def _claims_block(payload: dict[str, Any]) -> str:
    found = payload.get("claims") or []
    if not found:
        return ""
    from agentmsg.text import injection

    fields = []
    for n, c in enumerate(found, 1):
        c["n"] = n
        fields.append((f"claim {n} ({c['alias']}) pattern", str(c.pop("pattern", ""))))
        reason = c.pop("reason", "")
        if reason:
            fields.append((f"claim {n} ({c['alias']}) reason", str(reason)))
    return boundary.peer_fields(fields, injection.detect("\n".join(v for _, v in fields)),
                                "the claims' holders")


def build(ctx: Ctx, who: Pin, env: Mapping[str, str] | None = None, *, allow_spawn: bool = False) -> MCPServer:
    """The server for ``who`` over ``ctx``'s store; tools are registered with typed, described arguments.
    ``spawn`` and ``kill`` only with ``allow_spawn`` (``agentmsg mcp --allow-spawn``): they start and stop
    processes on this machine."""
    env = os.environ if env is None else env
    tools = Tools(ctx, who, env)
    server = MCPServer("agentmsg", version=__version__, instructions=INSTRUCTIONS + f" This server's pin: {who}.",
                       log_level="WARNING")
    write = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    read = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    # ``inbox``/``show``/``wait_for_reply`` write presented receipts, so they are not quite read-only;
    # they change no message state a model can see (nothing is acknowledged).

    @server.tool(annotations=write, description=(
        "Send a message to a participant of the collaboration. It is stored durably before this returns. "
        "Use kind='request' when you need the recipient to act or answer (then wait_for_reply with the returned "
        "id), kind='update' for information. To answer a message, give reply_to=its id (to= may then be "
        "omitted: the reply goes to the other party). Credentials in subject or body are refused "
        "(REFUSED(secret), exit code 11) unless redact=true. An unknown recipient fails with "
        "'FAILED(unknown agent): NAME' (exit code 4) and stores nothing."))
    def send(
        subject: Annotated[str, Field(description="One-line subject (at most 200 characters).")],
        to: Annotated[str, Field(description="Recipient alias (e.g. 'reviewer'), or 'all' for a copy to every "
                                             "other participant. May be empty only with reply_to.")] = "",
        body: Annotated[str, Field(description="Message body, plain text or Markdown (at most 64 KiB).")] = "",
        kind: Annotated[Literal["request", "update"], Field(
            description="'request' needs action or an answer; 'update' is information.")] = "update",
        priority: Annotated[Literal["normal", "high"], Field(
            description="'high' is shown first; it grants nothing.")] = "normal",
        reply_to: Annotated[str | None, Field(
            description="Id of the message this answers (MESSAGE_ID or ALIAS/MESSAGE_ID).")] = None,
        id: Annotated[str | None, Field(
            description="Optional message UUID for an idempotent retry: the same id and content is a no-op.")] = None,
        collab: CollabArg = None,
        redact: Annotated[bool, Field(
            description="Replace detected secrets with [REDACTED:kind] instead of refusing.")] = False,
        type: Annotated[Literal["task", "result", "gate_request", "gate_response", "status"] | None, Field(
            description="A typed handoff (docs/HANDOFFS.md): payload is then checked against the type's schema. "
                        "A result or gate_response names what it answers with reply_to (the task's or gate's "
                        "message id); body may be empty (the payload is shown as YAML). The template tool "
                        "prints each type's payload.")] = None,
        template: Annotated[Literal["phase_completion", "sprint_deploy", "deploy_validate"] | None, Field(
            description="One of the seed's hand-off templates, sent as a status: payload is checked against it, "
                        "and its from and to (phase_completion: completed_by) must name you and the recipient "
                        "(the template tool prints each).")] = None,
        payload: Annotated[dict[str, Any] | None, Field(
            description="The typed message's payload, e.g. a task: {task_id, task_text, input_artifacts: [paths], "
                        "acceptance_criteria: [...], timeout_minutes}; a result: {task_id, status: DONE | "
                        "DONE_WITH_CONCERNS | NEEDS_CONTEXT | BLOCKED, evidence: {...}, concerns: [...]}.")] = None,
        workflow_run_id: Annotated[str | None, Field(description="The workflow run of a typed message.")] = None,
        phase: Annotated[str | None, Field(description="The workflow phase of a typed message.")] = None,
        thread: Annotated[str | None, Field(
            description="Start or join the thread of this name in the collaboration (default: a reply joins its "
                        "parent's thread; anything else starts its own).")] = None,
    ) -> CallToolResult:
        typed: dict[str, Any] | None = None
        if type is not None or payload is not None or template is not None:
            given = dict(payload) if payload is not None else {}
            # a payload's from and to name the parties (checked at send), as in a payload file
            declared: dict[str, Any] = {k: given.pop(k) for k in ("from", "to") if k in given}
            typed = {"type": "status" if template is not None and type is None else type or "", "payload": given,
                     "workflow_run_id": workflow_run_id, "phase": phase}
            typed.update({"template": template} if template is not None else {})
            typed.update({"declared": declared} if declared else {})
        return tools.send(to, subject, body, kind, priority, reply_to, id, collab, redact, typed, thread)

    @server.tool(annotations=read, description=(
        "List this session's unacknowledged messages, oldest first (or high priority first), quoted inside an "
        "untrusted peer-data boundary with attribution. Listing never acknowledges: call ack after reading "
        "and handling a message. Long bodies are cut; show gives one in full."))
    def inbox(
        collab: CollabArg = None,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many messages (default 20).")] = 20,
        offset: Annotated[int, Field(ge=0, description="Skip this many first, to page through a backlog.")] = 0,
        priority_first: Annotated[bool, Field(description="High priority first, then oldest first.")] = False,
    ) -> CallToolResult:
        return tools.inbox(collab, limit, offset, priority_first)

    @server.tool(annotations=read, description=(
        "Show one message in full (inside the untrusted boundary) with its states: enqueued, presented, "
        "acknowledged, replied. Does not acknowledge. Only messages of this session's own collaborations: "
        "any other id is refused (exit code 9); with collab, an unknown id there is 'not found' (exit code 3)."))
    def show(message_id: MessageId, collab: CollabArg = None) -> CallToolResult:
        return tools.show(message_id, collab)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                             open_world_hint=False), description=(
        "Acknowledge messages addressed to this session: record that they were read in full and handled. "
        "Idempotent; several ids in one call. Only the exact recipient may acknowledge."))
    def ack(
        message_ids: Annotated[list[str], Field(min_length=1, max_length=200,
                                                description="Message UUIDs to acknowledge.")],
        collab: CollabArg = None,
    ) -> CallToolResult:
        return tools.ack(message_ids, collab)

    @server.tool(annotations=read, description=(
        "Where this session stands: its pin, its collaborations (without collab and with several bindings, "
        "a list to choose from), the participants, their pending and acknowledged counts, and closure."))
    def status(collab: CollabArg = None) -> CallToolResult:
        return tools.status(collab)

    @server.tool(annotations=read, description=(
        "Who is in the collaboration and who is there: each participant's alias, pin and host; its presence "
        "(working, idle, listening, gone or unknown, and why) with the age of its last activity; its unread "
        "count and the age of the oldest (behind); and whether wake-ups and mid-turn delivery are on."))
    def roster(collab: CollabArg = None) -> CallToolResult:
        return tools.roster(collab)

    @server.tool(annotations=write, description=(
        "Append an immutable note to the collaboration's shared log (decisions, progress, hand-off notes). "
        "A correction is a new note naming the old one in corrects."))
    def log_append(
        text: Annotated[str, Field(description="The note (at most 16 KiB).")],
        corrects: Annotated[str | None, Field(description="Id of the log entry this note corrects.")] = None,
        collab: CollabArg = None,
    ) -> CallToolResult:
        return tools.log_append(text, corrects, collab)

    @server.tool(annotations=write, description=(
        "Claim paths of the repository before editing them, so other participants' tools are refused (their "
        "pre-tool hooks) until you release or the claim expires. Patterns are gitignore-style globs relative to "
        "cwd (* ? [..], ** for any depth; a directory covers what is beneath it). An exclusive claim conflicts with "
        "any other participant's overlapping claim, a shared one only with an exclusive one: a conflict fails "
        "(exit code 5) naming the holder. renew=true extends your live claims by ttl."))
    def claim(
        patterns: Annotated[list[str], Field(max_length=64, description="Paths or globs to claim.")] = [],  # noqa: B006
        shared: Annotated[bool, Field(description="A shared claim (default: exclusive).")] = False,
        ttl: Annotated[str | None, Field(description="How long it holds: e.g. 30m (default), 2h, at most 24h.")] = None,
        reason: Annotated[str | None, Field(description="Why, shown to whoever is refused.")] = None,
        renew: Annotated[bool, Field(description="Extend your live claims (those named, or all) instead.")] = False,
        cwd: CwdArg = None,
        collab: CollabArg = None,
    ) -> CallToolResult:
        return tools.claim(list(patterns), shared, ttl, reason, renew, cwd, collab)

    @server.tool(annotations=write, description=(
        "Release your claims: the named patterns, or all=true for every claim you hold in the collaboration. "
        "Another participant's claim cannot be released here (exit code 9)."))
    def release(
        patterns: Annotated[list[str], Field(max_length=64, description="Patterns you claimed.")] = [],  # noqa: B006
        all: Annotated[bool, Field(description="Release every claim you hold.")] = False,
        cwd: CwdArg = None,
        collab: CollabArg = None,
    ) -> CallToolResult:
        return tools.release(list(patterns), all, cwd, collab)

    @server.tool(annotations=read, description=(
        "The collaboration's live claims: holder, repository, mode and expiry (patterns and reasons are the "
        "holders' words, quoted inside the untrusted boundary)."))
    def claims(
        mine: Annotated[bool, Field(description="Only your own claims.")] = False,
        collab: CollabArg = None,
    ) -> CallToolResult:
        return tools.claims(mine, collab)

    @server.tool(annotations=read, description=(
        "Typed handoffs (docs/HANDOFFS.md): without name, the five message types (task, result, gate_request, "
        "gate_response, status) and the seed's three hand-off templates (phase_completion, sprint_deploy, "
        "deploy_validate) with their required fields; with name, a payload of it that validates as it is "
        "(YAML with each field's rule, and as an object): fill it in and pass it to send as payload, with "
        "type=NAME or template=NAME."))
    def template(
        name: Annotated[str | None, Field(description="A type or a hand-off template (default: list them).")] = None,
    ) -> CallToolResult:
        return tools.template(name)

    @server.tool(annotations=read, description=(
        "The collaboration's gates (gate_request messages) with their state: open, approved, aborted or timed "
        "out (still answerable by its addressee). open_only: only those still waiting. Questions are the "
        "requesters' words, quoted inside the untrusted boundary."))
    def gates(
        open_only: Annotated[bool, Field(description="Only gates still waiting (open or timed out).")] = False,
        collab: CollabArg = None,
    ) -> CallToolResult:
        return tools.gates(open_only, collab)

    @server.tool(annotations=read, description=(
        "Block until a reply to one of your messages arrives (or one already waiting is found), at most "
        f"timeout_seconds (capped at {WAIT_MAX:g}). Replies are quoted inside the untrusted boundary and not "
        "acknowledged. No reply in time: a 'timeout' error (exit code 14); nothing is lost, call again later."))
    def wait_for_reply(
        message_id: Annotated[str, Field(description="Id of the message you sent and want the reply to.")],
        timeout_seconds: Annotated[float, Field(gt=0, le=WAIT_MAX, description=(
            f"How long to wait, in seconds (default {WAIT_DEFAULT:g}, at most {WAIT_MAX:g}).")) ] = WAIT_DEFAULT,
        collab: CollabArg = None,
    ) -> CallToolResult:
        return tools.wait_for_reply(message_id, timeout_seconds, collab)

    if allow_spawn:
        _lifecycle_tools(server, tools)

    server.resource("agentmsg://collabs", name="collaborations", mime_type="application/json",
                    description="This session's collaborations and their transcript URIs.")(tools.collabs)

    @server.resource("agentmsg://collab/{collab}/transcript", name="transcript", mime_type="text/markdown",
                     description="A collaboration's whole transcript (events, messages, notes), quoted inside "
                                 "the untrusted boundary.")
    def transcript(collab: str) -> str:
        return tools.transcript(collab)

    return server


def _lifecycle_tools(server: MCPServer, tools: Tools) -> None:
    """``spawn`` and ``kill`` (docs/LIFECYCLE.md): registered only when the server was started to allow them."""
    start = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)

    @server.tool(annotations=start, description=(
        "Start a new interactive coding-agent session (a host agentmsg spawn knows) bound to "
        "a new alias in the collaboration, in tmux (where='tmux': the tmux this server runs in; 'headless': a "
        "private detached tmux server). Returns once the session's own hooks bound it and its first turn ended, "
        "with its pin and where it runs; on failure it is stopped and nothing stays bound (exit code 17). The "
        "task, if given, is sent to it as your request."))
    def spawn(
        host: Annotated[str, Field(description="The host CLI to start, by its agentmsg name (docs/LIFECYCLE.md).")],
        alias: Annotated[str, Field(description="The new session's alias (free in the collaboration).")],
        task: Annotated[str | None, Field(description="Sent to it as your request once it is ready.")] = None,
        cwd: Annotated[str | None, Field(description="Its working folder (default: the server's).")] = None,
        where: Annotated[Literal["tmux", "headless"], Field(description="tmux or headless.")] = "headless",
        timeout_seconds: Annotated[float, Field(gt=0, le=600, description="How long to wait for it.")] = 60,
        host_args: Annotated[list[str] | None, Field(description="The host CLI's own arguments.")] = None,
        collab: CollabArg = None,
    ) -> CallToolResult:
        return tools.spawn(host, alias, collab, task, cwd, where, timeout_seconds, host_args or [])

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True),
                 description=(
        "Stop a session agentmsg spawned (only its spawner, the opener's alias or a human: pin may; otherwise "
        "exit code 9). Its alias stays in the collaboration as gone; its inbox is kept."))
    def kill(alias: Annotated[str, Field(description="The spawned participant to stop.")],
             collab: CollabArg = None) -> CallToolResult:
        return tools.kill(alias, collab)


def serve(root_flag: str | None, self_flag: str | None, *, allow_spawn: bool = False) -> int:
    """Resolve the root and the pin once, then serve MCP on stdin/stdout until the client goes away."""
    env = dict(os.environ)
    ctx = Ctx.create(root_flag, env)
    who = ctx.who(self_flag)  # IdentityError (exit 9) before serving anything
    server = build(ctx, who, env, allow_spawn=allow_spawn)
    server.run("stdio")
    return 0

