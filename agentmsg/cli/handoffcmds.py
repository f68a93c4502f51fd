"""Typed handoffs on the command line (issue 31): reading a payload file (YAML or JSON), and the commands
``handoffs``, ``gates`` and ``task show``.  The rules are ``domain/handoffs.py``; the work is
``service/handoffs.py``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from agentmsg.cli.options import Collab, Json, Root, Self, _ctx, _done

#: A payload file is read up to this size (the payload's own limit is smaller: domain/handoffs.py).
PAYLOAD_FILE_MAX_BYTES = 256 * 1024


def read_payload(path: str) -> tuple[Any, dict[str, Any]]:
    """``(payload, envelope)`` from a YAML or JSON file (``-``: stdin).

    The file holds the payload itself, or the seed's whole message (one ``message:`` key holding ``type``,
    ``from``, ``to``, ``workflow_run_id``, ``phase``, ``correlation_id`` and ``payload``).  A ``from`` and
    ``to`` either way are handed on as ``declared`` so the send checks them against the real parties.
    """
    from agentmsg.errors import PayloadInvalid, TooLarge, UsageError

    try:
        raw = sys.stdin.buffer.read(PAYLOAD_FILE_MAX_BYTES + 1) if path == "-" else _read(path)
    except OSError as exc:
        raise UsageError(f"cannot read payload file: {exc.strerror or exc}") from None
    if len(raw) > PAYLOAD_FILE_MAX_BYTES:
        raise TooLarge(f"payload file is over {PAYLOAD_FILE_MAX_BYTES} bytes; nothing was stored")
    doc = _parse(raw, path)
    if not isinstance(doc, dict):
        return doc, {}  # the type's schema refuses it, naming the type
    envelope: dict[str, Any] = {}
    if set(doc) == {"message"} and isinstance(doc["message"], dict):
        message = dict(doc["message"])
        doc = message.pop("payload", None) or {}
        if not isinstance(doc, dict):
            raise PayloadInvalid("message.payload: must be a mapping; nothing was stored")
        envelope = {k: message[k] for k in ("type", "workflow_run_id", "phase", "correlation_id", "from", "to")
                    if message.get(k) is not None}
    else:
        doc = dict(doc)
        for key in ("from", "to"):
            if key in doc:
                envelope[key] = doc.pop(key)
    return doc, envelope


def _read(path: str) -> bytes:
    import stat

    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(0, f"{path} is not a regular file")
    with open(path, "rb") as fh:
        return fh.read(PAYLOAD_FILE_MAX_BYTES + 1)


def _parse(raw: bytes, path: str) -> Any:
    from agentmsg.errors import PayloadInvalid

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadInvalid(f"payload file is not valid UTF-8 (byte {exc.start}); nothing was stored") from None
    if path.endswith(".json"):
        import json

        try:
            return json.loads(text)
        except ValueError as exc:
            raise PayloadInvalid(f"payload file is not JSON: {str(exc)[:120]}; nothing was stored") from None
        except RecursionError:
            raise PayloadInvalid("payload file is nested too deeply; nothing was stored") from None
    import yaml

    class NoAliases(yaml.SafeLoader):
        """YAML without aliases: ``*name`` repeats a node, and a few of them nest into an exponential payload."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                raise PayloadInvalid("payload file uses a YAML alias (*name); write the value out; "
                                     "nothing was stored")
            return super().compose_node(parent, index)

    try:
        return _plain(yaml.load(text, Loader=NoAliases))  # a SafeLoader subclass
    except RecursionError:
        raise PayloadInvalid("payload file is nested too deeply; nothing was stored") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        raise PayloadInvalid(f"payload file is not YAML{at}: {getattr(exc, 'problem', None) or 'parse error'}; "
                             "nothing was stored") from None


def _plain(value: Any) -> Any:
    """YAML's values as JSON's: a timestamp becomes its ISO-8601 text (the seed's ``timestamp`` fields)."""
    import datetime

    if isinstance(value, dict):
        return {str(k) if isinstance(k, (int, float, bool, datetime.date)) else k: _plain(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, datetime.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, datetime.date):
        return value.isoformat()
    return value


def typed_draft(type_: str | None, payload_file: str | None, workflow_run_id: str | None,
                phase: str | None, template: str | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """The ``handoff`` of a typed send from its options (None: an untyped one), and the correlation_id the
    file's message names, if any.  ``template``: one of the seed's hand-off templates, sent as its type."""
    from agentmsg.domain import handoffs as rules
    from agentmsg.errors import UsageError

    if template is not None:
        if template not in rules.TEMPLATES:
            raise UsageError(f"no hand-off template {template[:40]!r}: the templates are "
                             f"{' | '.join(rules.TEMPLATES)}")
        if type_ is not None and type_ != rules.TEMPLATE_TYPE:
            raise UsageError(f"--template {template} is sent as a {rules.TEMPLATE_TYPE}, not a {type_[:40]}")
        type_ = rules.TEMPLATE_TYPE
        if payload_file is None:
            raise UsageError(f"--template {template} needs --payload-file FILE (YAML or JSON, or - for stdin)")
    if payload_file is None:
        if type_ is not None:
            raise UsageError(f"--type {type_} needs --payload-file FILE (YAML or JSON, or - for stdin)")
        if workflow_run_id or phase:
            raise UsageError("--workflow-run-id and --phase belong to a typed message (--type)")
        return None, None
    payload, envelope = read_payload(payload_file)
    named = envelope.get("type")
    if type_ and named and named != type_:
        raise UsageError(f"--type {type_} but the file's message is a {str(named)[:40]}")
    out: dict[str, Any] = {"type": type_ or named, "payload": payload,
                           "workflow_run_id": workflow_run_id or envelope.get("workflow_run_id"),
                           "phase": phase or envelope.get("phase")}
    if not out["type"]:
        raise UsageError("name the message's type: --type task|result|gate_request|gate_response|status")
    if template is not None:
        out["template"] = template
    declared = {k: envelope[k] for k in ("from", "to") if k in envelope}
    if declared:
        out["declared"] = declared
    correlation = envelope.get("correlation_id")
    return out, str(correlation) if correlation is not None else None


# ---- printing ----------------------------------------------------------------------------


def _emit(command: str, payload: dict[str, Any], as_json: bool) -> int:
    if as_json:
        return _done(command, payload, True)
    PRINTERS[command](payload)
    return 0


def _line(m: dict[str, Any]) -> str:
    from agentmsg.domain import handoffs as rules

    return f"{m['ts'][:19].replace('T', ' ')}  {m['from']}->{m['to']}  {rules.summary(m)}  ({m['id']})"


def _artifacts(arts: list[dict[str, Any]], pad: str) -> None:
    from agentmsg.cli.output import say

    for a in arts:
        pinned = f"sha256 {a['sha256'][:12]}" if a.get("sha256") else f"version {a.get('version', '?')}"
        why = f": {a['why']}" if a.get("why") else ""
        say(f"{pad}artifact {a['location']} ({pinned}): {a['state']}{why}")


def _task_lines(t: dict[str, Any]) -> None:
    from agentmsg.cli.output import say

    run = " ".join(f"{k}={t[k]}" for k in ("workflow_run_id", "phase") if t.get(k))
    say(_line(t) + (f"  [{run}]" if run else ""))
    _artifacts(t.get("artifacts") or [], "    ")
    for r in t["results"]:
        say("  " + _line(r))
        _artifacts(r.get("artifacts") or [], "      ")
    for st in t["statuses"]:
        say("  " + _line(st))
    for g in t["gates"]:
        say(f"  gate {g['gate_id']}: {g['state']} (expires {g['expires']})  ({g['id']})")
    if not t["results"]:
        say("  no result yet")


def _print_handoffs(p: dict[str, Any]) -> None:
    from agentmsg.cli.output import say

    if not p["tasks"]:
        say("no tasks")
    for t in p["tasks"]:
        _task_lines(t)


def _print_task(p: dict[str, Any]) -> None:
    from agentmsg.cli.output import say

    if p["task"] is not None:
        _task_lines(p["task"])
        return
    for m in p["thread_messages"]:
        say(_line(m))


def _print_gates(p: dict[str, Any]) -> None:
    from agentmsg.cli.output import say

    if not p["gates"]:
        say("no gates")
    for g in p["gates"]:
        say(f"gate {g['gate_id']} {g['required_action']} {g['from']}->{g['to']}: {g['state']} "
            f"(expires {g['expires']})  ({g['id']})")
        question = str((g.get("payload") or {}).get("question", "")).splitlines()
        if question:
            say(f"  question: {question[0][:200]}")


PRINTERS: dict[str, Callable[[dict[str, Any]], None]] = {
    "handoffs": _print_handoffs, "task show": _print_task, "gates": _print_gates}


# ---- commands ----------------------------------------------------------------------------


def _service() -> Any:
    from agentmsg.service import handoffs

    return handoffs


def handoffs(
    workflow_run_id: Annotated[str | None, typer.Option(help="Only the tasks of this workflow run.")] = None,
    phase: Annotated[str | None, typer.Option(help="Only the tasks of this phase.")] = None,
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """List typed tasks with the results tied to them, their gates, and each artifact's state now."""
    return _emit("handoffs", _service().listing(_ctx(root), collab=collab, self_flag=self_, cwd=os.getcwd(),
                                                workflow_run_id=workflow_run_id, phase=phase), json_)


def gates(
    open_: Annotated[bool, typer.Option("--open", help="Only gates still waiting (open or timed out).")] = False,
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """List gate requests with their state: open, approved, aborted or timed out."""
    return _emit("gates", _service().gates(_ctx(root), collab=collab, self_flag=self_, open_only=open_), json_)


def task_show(
    message_id: Annotated[str, typer.Argument(metavar="MESSAGE_ID", help="The task's (or any typed message's) "
                                                                         "UUID.")],
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Show a task's thread: its results, statuses and gates, and each artifact as it is in this checkout."""
    return _emit("task show", _service().task_show(_ctx(root), collab=collab, self_flag=self_,
                                                   message_id=message_id, cwd=os.getcwd()), json_)


def template_list(json_: Json = False) -> int:
    """List the typed messages' types and the seed's hand-off templates, each with its required fields."""
    from agentmsg.domain import handoffs as rules

    rows: list[dict[str, Any]] = [{"name": t, "type": t, "kind": rules.KIND_OF[t], "template": False,
             "required": [k for k, s in rules.SCHEMAS[t].items() if s.get("required")],
             "fields": list(rules.SCHEMAS[t])} for t in rules.TYPES]
    rows += [{"name": n, "type": rules.TEMPLATE_TYPE, "kind": rules.KIND_OF[rules.TEMPLATE_TYPE], "template": True,
              "required": [k for k, s in rules.TEMPLATES[n].items() if s.get("required")],
              "fields": list(rules.TEMPLATES[n])} for n in rules.TEMPLATES]
    if json_:
        return _done("template list", {"templates": rows}, True)
    from agentmsg.cli.output import say

    for r in rows:
        how = f"send --template {r['name']} (a {r['type']})" if r["template"] else f"send --type {r['name']}"
        say(f"{r['name']} ({r['kind']}; {how}): requires {', '.join(r['required'])}; fields {', '.join(r['fields'])}")
    return 0


def template_show(
    name: Annotated[str, typer.Argument(metavar="NAME", help="A type (task, result, gate_request, gate_response, "
                                                             "status) or a hand-off template (phase_completion, "
                                                             "sprint_deploy, deploy_validate).")],
    json_: Json = False,
) -> int:
    """Print a payload of NAME that validates as it is (YAML, each field's rule above it): edit it and send."""
    from agentmsg.domain import handoffs as rules

    text = rules.template(name)
    if json_:
        example = rules.EXAMPLES[name] if name in rules.EXAMPLES else rules.TEMPLATE_EXAMPLES[name]
        return _done("template show", {"name": name, "type": rules.TEMPLATE_TYPE if name in rules.TEMPLATES else name,
                                       "template": name in rules.TEMPLATES, "yaml": text, "payload": example}, True)
    sys.stdout.write(text)
    return 0


COMMANDS: dict[str, Callable[..., int]] = {"handoffs": handoffs, "gates": gates}
GROUP_HELP = {"task": "Typed handoffs: a task's thread (docs/HANDOFFS.md).",
              "template": "Typed handoffs: each type's payload and the seed's hand-off templates, to fill in."}
GROUPS: dict[str, dict[str, Callable[..., int]]] = {"task": {"show": task_show},
                                                    "template": {"list": template_list, "show": template_show}}
