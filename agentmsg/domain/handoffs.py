"""Typed handoffs (issue 31): the seed protocol's five message types, their payload schemas, and the rules
that tie a result to its task and a gate response to its open gate.

Pure and stdlib-only: the schemas are data (:data:`SCHEMAS`), checked by one small interpreter
(:func:`validate`); nothing here reads a file or parses YAML (the CLI does, and the service hashes
artifacts).  A broken rule raises :class:`agentmsg.errors.PayloadInvalid` (exit 2) with one line naming
the field and the rule; an answer with nothing open to answer is ``Conflict`` (exit 5); a participant not
permitted to answer is ``IdentityError`` (exit 9).  docs/HANDOFFS.md describes each type.
"""

from __future__ import annotations

from agentmsg import records

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: The seed's message types, in its order.
TYPES = ("task", "result", "gate_request", "gate_response", "status")
#: A typed message is a request (it needs action) or an update, as every message is.
KIND_OF = {"task": "request", "result": "update", "gate_request": "request", "gate_response": "update",
           "status": "update"}
#: The type a ``result`` or ``gate_response`` answers, and the payload field both carry.
ANSWERS = {"result": ("task", "task_id"), "gate_response": ("gate_request", "gate_id")}

RESULT_STATUSES = ("DONE", "DONE_WITH_CONCERNS", "NEEDS_CONTEXT", "BLOCKED")
GATE_ACTIONS = ("APPROVE", "ABORT", "PROVIDE_CONTEXT")
GATE_DECISIONS = ("APPROVE", "ABORT")
#: ``status`` has no fields in the seed; agentmsg defines them (docs/HANDOFFS.md).
STATUS_STATES = ("working", "waiting", "blocked", "done", "failed")
ARTIFACT_TYPES = ("build", "image", "manifest", "spec", "report", "file")
#: Who may answer a gate: its addressee (default), or its addressee only when that is a human: pin.
APPROVERS = ("addressee", "human")

ID_MAX_CHARS = 128
LINE_MAX_CHARS = 2000
TEXT_MAX_CHARS = 16 * 1024
TASK_TEXT_MAX_CHARS = 32 * 1024
LIST_MAX_ITEMS = 100
MAP_MAX_KEYS = 50
ARTIFACTS_MAX = 50
#: The whole payload as canonical JSON (the message's body limit is 64 KiB and the body carries it too).
PAYLOAD_MAX_BYTES = 48 * 1024
TIMEOUT_MAX_MINUTES = 7 * 24 * 60

# A field's spec: its kind and, per kind, its bounds.  Kinds: id (one line, <= ID_MAX_CHARS), line,
# text, int, enum, list (of lines), map (name -> text), artifacts (a list of artifact objects or paths).
_ID: dict[str, Any] = {"kind": "id"}
_LIST: dict[str, Any] = {"kind": "list"}
_TIMEOUT: dict[str, Any] = {"kind": "int", "min": 1, "max": TIMEOUT_MAX_MINUTES}

#: Each type's payload: field -> spec; ``required`` fields must be present and non-empty.
SCHEMAS: dict[str, dict[str, dict[str, Any]]] = {
    "task": {
        "task_id": {**_ID, "required": True},
        "task_text": {"kind": "text", "max": TASK_TEXT_MAX_CHARS, "required": True},
        "input_artifacts": {"kind": "artifacts"},
        "acceptance_criteria": _LIST,
        "constraints": _LIST,
        "known_complications": _LIST,
        "timeout_minutes": _TIMEOUT,
    },
    "result": {
        "task_id": {**_ID, "required": True},
        "status": {"kind": "enum", "values": RESULT_STATUSES, "required": True},
        "evidence": {"kind": "map"},
        "concerns": _LIST,
        "blockers": _LIST,
        "artifacts": {"kind": "artifacts"},
    },
    "gate_request": {
        "gate_id": {**_ID, "required": True},
        "required_action": {"kind": "enum", "values": GATE_ACTIONS, "required": True},
        "question": {"kind": "text", "max": TEXT_MAX_CHARS, "required": True},
        "context": {"kind": "text", "max": TEXT_MAX_CHARS},
        # the seed: "Never block indefinitely — set timeout on all gate requests"
        "timeout_minutes": {**_TIMEOUT, "required": True},
        "approver": {"kind": "enum", "values": APPROVERS},
    },
    "gate_response": {
        "gate_id": {**_ID, "required": True},
        "decision": {"kind": "enum", "values": GATE_DECISIONS, "required": True},
        "evidence": {"kind": "text", "max": TEXT_MAX_CHARS},
        "conditions": _LIST,
    },
    "status": {
        "state": {"kind": "enum", "values": STATUS_STATES, "required": True},
        "summary": {"kind": "text", "max": TEXT_MAX_CHARS, "required": True},
        "task_id": _ID,
        "progress": {"kind": "int", "min": 0, "max": 100},
    },
}

#: ``(field, value, then required)``: a payload whose field has that value must carry a non-empty other field.
WHEN: dict[str, tuple[tuple[str, str, str], ...]] = {
    "result": (("status", "DONE_WITH_CONCERNS", "concerns"), ("status", "BLOCKED", "blockers")),
}

#: An artifact object's fields (a bare string is its ``location``).
ARTIFACT: dict[str, dict[str, Any]] = {
    "location": {"kind": "line", "max": 4096, "required": True},
    "sha256": {"kind": "sha256"},
    "version": {"kind": "line", "max": 256},
    "size": {"kind": "int", "min": 0, "max": 2**62},
    "type": {"kind": "enum", "values": ARTIFACT_TYPES},
    # the repository's key as the claims name it (runtime/gitrepo.py): recorded at send with the hash
    "repo": {"kind": "line", "max": 4200},
}

#: The message's own fields beside the payload (the seed's envelope).
ENVELOPE: dict[str, dict[str, Any]] = {
    "workflow_run_id": _ID,
    "phase": _ID,
}


#: The seed's three standard hand-off templates ("3. Standard Hand-Off Templates"), each a schema of its own.
#: A template is sent as a ``status`` (an update: it reports a stage done and hands its artifact on) whose
#: handoff names the template; ``from`` and ``to`` (``completed_by``: the sender) must name the message's parties.
TEMPLATE_TYPE = "status"
RISK_LEVELS = ("LOW", "MEDIUM", "HIGH")
PHASE_STATUSES = ("complete", "partial", "failed")
_LINE: dict[str, Any] = {"kind": "line", "max": 1024}
_PARTY: dict[str, Any] = {**_ID, "required": True}
TEMPLATES: dict[str, dict[str, dict[str, Any]]] = {
    "phase_completion": {
        "phase": {**_ID, "required": True},
        "completed_by": {**_ID, "required": True},
        "timestamp": {"kind": "timestamp"},
        "status": {"kind": "enum", "values": PHASE_STATUSES, "required": True},
        "artifact": {"kind": "artifact", "required": True},
        "next_phase": _ID,
        "handoff_notes": {"kind": "text", "max": TEXT_MAX_CHARS},
    },
    "sprint_deploy": {
        "from": _PARTY,
        "to": _PARTY,
        "artifact": {"kind": "object", "required": True, "fields": {
            "image_tag": {**_LINE, "required": True},
            "tested_against": _ID,
            "test_report": _LINE,
            "risk_level": {"kind": "enum", "values": RISK_LEVELS, "required": True},
        }},
        "notes": {"kind": "text", "max": TEXT_MAX_CHARS},
    },
    "deploy_validate": {
        "from": _PARTY,
        "to": _PARTY,
        "artifact": {"kind": "object", "required": True, "fields": {
            "argocd_app": {**_ID, "required": True},
            "deployed_at": {"kind": "timestamp", "required": True},
            "image": {**_LINE, "required": True},
            "environment": {**_ID, "required": True},
        }},
        "validation_required": {**_LIST, "required": True},
    },
}
#: The template field that names the sender, beside ``from``.
TEMPLATE_SENDER = {"phase_completion": "completed_by"}


def invalid(where: str, rule: str) -> Exception:
    """The one-line refusal (exit 2) naming ``where`` and its ``rule``."""
    from agentmsg.errors import PayloadInvalid

    return PayloadInvalid(f"{where}: {rule}; nothing was stored")


def _line_ok(value: str) -> bool:
    return not any(ord(c) < 32 or ord(c) == 127 for c in value)


def _check(where: str, value: Any, spec: dict[str, Any]) -> Any:
    """``value`` as ``spec`` allows it (a normalized copy), or PayloadInvalid naming ``where``."""
    kind = spec["kind"]
    if kind in ("id", "line", "text", "sha256", "enum"):
        if not isinstance(value, str):
            raise invalid(where, f"must be a string, not {_json_type(value)}")
        if kind == "enum":
            if value not in spec["values"]:
                raise invalid(where, f"must be one of {' | '.join(spec['values'])}")
            return value
        if kind == "sha256":
            if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
                raise invalid(where, "must be 64 lowercase hex digits")
            return value
        limit = ID_MAX_CHARS if kind == "id" else spec.get("max", LINE_MAX_CHARS if kind == "line" else TEXT_MAX_CHARS)
        if len(value) > limit:
            raise invalid(where, f"is {len(value)} characters; the limit is {limit}")
        if kind != "text" and not _line_ok(value):
            raise invalid(where, "must be one line without control characters")
        if kind == "id" and not value.strip():
            raise invalid(where, "must not be blank")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise invalid(where, f"must be an integer, not {_json_type(value)}")
        if not spec["min"] <= value <= spec["max"]:
            raise invalid(where, f"must be between {spec['min']} and {spec['max']}")
        return value
    if kind == "list":
        if not isinstance(value, list):
            raise invalid(where, f"must be a list, not {_json_type(value)}")
        if len(value) > LIST_MAX_ITEMS:
            raise invalid(where, f"has {len(value)} items; the limit is {LIST_MAX_ITEMS}")
        return [_check(f"{where}[{i}]", v, {"kind": "text", "max": LINE_MAX_CHARS}) for i, v in enumerate(value)]
    if kind == "map":
        if not isinstance(value, dict):
            raise invalid(where, f"must be a mapping, not {_json_type(value)}")
        if len(value) > MAP_MAX_KEYS:
            raise invalid(where, f"has {len(value)} keys; the limit is {MAP_MAX_KEYS}")
        out = {}
        for k, v in value.items():
            _check(f"{where} key", k, {"kind": "id"})
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                v = str(v)  # a test count is evidence too
            out[k] = _check(f"{where}.{k}", v, {"kind": "text", "max": TEXT_MAX_CHARS})
        return out
    if kind == "artifact":
        return artifact(where, value)
    if kind == "object":
        return _fields(where, value, spec["fields"])
    if kind == "timestamp":
        if not isinstance(value, str):
            raise invalid(where, f"must be an ISO-8601 time, not {_json_type(value)}")
        if not _stamp_ok(value):
            raise invalid(where, "must be an ISO-8601 time such as 2026-12-07T10:00:00Z")
        return value
    if kind == "artifacts":
        if not isinstance(value, list):
            raise invalid(where, f"must be a list, not {_json_type(value)}")
        if len(value) > ARTIFACTS_MAX:
            raise invalid(where, f"has {len(value)} items; the limit is {ARTIFACTS_MAX}")
        return [artifact(f"{where}[{i}]", v) for i, v in enumerate(value)]
    raise AssertionError(f"unknown field kind {kind}")  # pragma: no cover - the schemas are data above


def _stamp_ok(value: str) -> bool:
    import datetime

    if len(value) > 40 or not _line_ok(value) or len(value) < 10:
        return False
    try:
        datetime.datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        return False
    return True


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _fields(where: str, doc: Any, schema: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise invalid(where, f"must be a mapping, not {_json_type(doc)}")
    for key in doc:
        if key not in schema:
            raise invalid(f"{where}.{key}", f"unknown field (known: {', '.join(schema)})")
    out: dict[str, Any] = {}
    for key, spec in schema.items():
        value = doc.get(key)
        if value is None or value in ("", [], {}):
            if spec.get("required"):
                raise invalid(f"{where}.{key}", "required")
            continue
        out[key] = _check(f"{where}.{key}", value, spec)
    return out


def artifact(where: str, value: Any) -> dict[str, Any]:
    """One artifact: a path (its ``location``) or an object of :data:`ARTIFACT`'s fields."""
    if isinstance(value, str):
        value = {"location": value}
    return _fields(where, value, ARTIFACT)


def validate(type_: str, payload: Any) -> dict[str, Any]:
    """The payload of a ``type_`` message, checked against its schema and normalized (empty fields dropped)."""
    if type_ not in SCHEMAS:
        raise invalid("type", f"must be one of {' | '.join(TYPES)}")
    out = _fields(type_, payload, SCHEMAS[type_])
    for field, value, then in WHEN.get(type_, ()):
        if out.get(field) == value and not out.get(then):
            raise invalid(f"{type_}.{then}", f"required when {field} is {value}")
    size = len(records.canonical(out))
    if size > PAYLOAD_MAX_BYTES:
        raise invalid(type_, f"payload is {size} bytes; the limit is {PAYLOAD_MAX_BYTES}")
    return out


def validate_template(name: str, payload: Any) -> dict[str, Any]:
    """A payload of the hand-off template ``name``, checked against its schema and normalized."""
    if name not in TEMPLATES:
        raise invalid("--template", f"must be one of {' | '.join(TEMPLATES)}")
    out = _fields(name, payload, TEMPLATES[name])
    size = len(records.canonical(out))
    if size > PAYLOAD_MAX_BYTES:
        raise invalid(name, f"payload is {size} bytes; the limit is {PAYLOAD_MAX_BYTES}")
    return out


def template_parties(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The parties a template's payload names: ``from`` (or ``completed_by``) and ``to``."""
    out: dict[str, Any] = {k: payload[k] for k in ("from", "to") if k in payload}
    sender = TEMPLATE_SENDER.get(name)
    if sender and sender in payload:
        out["from"] = payload[sender]
    return out


def envelope(fields: dict[str, Any]) -> dict[str, Any]:
    """``workflow_run_id`` and ``phase``, checked (absent ones dropped)."""
    return _fields("message", {k: v for k, v in fields.items() if v is not None}, ENVELOPE)


def artifacts_of(type_: str) -> str | None:
    """The payload field that lists a type's artifacts (where ``--attach`` adds them), if it has one."""
    return {"task": "input_artifacts", "result": "artifacts"}.get(type_)


def key_of(handoff: dict[str, Any]) -> str:
    """The id a typed message names its work by: its task_id or gate_id, or ''."""
    payload = handoff.get("payload") or {}
    return str(payload.get("task_id") or payload.get("gate_id") or "")


def subject(handoff: dict[str, Any]) -> str:
    """A subject for a typed message sent without one: its type, its id, and its outcome."""
    p, type_ = handoff["payload"], handoff["type"]
    if handoff.get("template"):
        art = p.get("artifact") if isinstance(p.get("artifact"), dict) else {}
        what = p.get("phase") or art.get("image_tag") or art.get("argocd_app") or ""
        tail = p.get("status") or art.get("risk_level") or art.get("environment")
        head = f"{handoff['template']} {what}".strip()
        return f"{head}: {tail}" if tail else head
    head = f"{type_} {key_of(handoff)}".strip()
    tail = {"result": p.get("status"), "gate_request": p.get("required_action"), "gate_response": p.get("decision"),
            "status": p.get("state")}.get(type_)
    return f"{head}: {tail}" if tail else head


# ---- templates ------------------------------------------------------------------------------

#: Example values per field: ``agentmsg template show TYPE`` prints a payload that validates as it is.
EXAMPLES: dict[str, dict[str, Any]] = {
    "task": {"task_id": "T-1", "task_text": "What to do, in full (inline, not a file reference).\n",
             "input_artifacts": ["src/module.py"], "acceptance_criteria": ["the tests pass"],
             "constraints": ["the public API does not change"], "known_complications": ["what earlier agents found"],
             "timeout_minutes": 30},
    "result": {"task_id": "T-1", "status": "DONE_WITH_CONCERNS",
               "evidence": {"gate_1_functional": "test output", "gate_2_spec": "spec reference",
                            "gate_3_governance": "commit message", "gate_4_regressions": "test count"},
               "concerns": ["a concern (required with DONE_WITH_CONCERNS)"], "blockers": [],
               "artifacts": ["src/module.py"]},
    "gate_request": {"gate_id": "G-1", "required_action": "APPROVE", "question": "The specific question?",
                     "context": "Evidence or state for the decision.", "timeout_minutes": 60, "approver": "human"},
    "gate_response": {"gate_id": "G-1", "decision": "APPROVE", "evidence": "Rationale or added context.",
                      "conditions": ["a condition of a conditional approval"]},
    "status": {"state": "working", "summary": "What is happening now.", "task_id": "T-1", "progress": 50},
}


#: The seed's hand-off templates filled in: ``agentmsg template show NAME`` prints them (from and to to replace).
TEMPLATE_EXAMPLES: dict[str, dict[str, Any]] = {
    "phase_completion": {"phase": "build", "completed_by": "RAZOR", "timestamp": "2026-12-07T10:00:00Z",
                         "status": "complete",
                         "artifact": {"type": "image", "location": "registry/service", "version": "v1.2.0"},
                         "next_phase": "deploy",
                         "handoff_notes": "Anything the next agent must know that is not obvious from artifacts.\n"},
    "sprint_deploy": {"from": "RAZOR", "to": "FORGE",
                      "artifact": {"image_tag": "registry/service:v1.2.0", "tested_against": "staging",
                                   "test_report": ".hseos-output/run-1/test-report.yaml", "risk_level": "LOW"},
                      "notes": "All regression tests pass. Performance within baseline."},
    "deploy_validate": {"from": "KUBE", "to": "SABLE",
                        "artifact": {"argocd_app": "service-prod", "deployed_at": "2026-12-07T10:00:00Z",
                                     "image": "registry/service:v1.2.0", "environment": "production"},
                        "validation_required": ["ArgoCD app status = Healthy within 5 minutes",
                                                "Error rate < baseline for 10 minutes", "Smoke test suite passes"]},
}


def names() -> tuple[str, ...]:
    """What ``template show`` knows: the five types, then the three hand-off templates."""
    return (*TYPES, *TEMPLATES)


def template(name: str) -> str:
    """A payload of the type or hand-off template ``name`` that validates as it is, as YAML, each field's rule
    in a comment above it (a template's ``from`` and ``to``: replace them with the real parties)."""
    if name in SCHEMAS:
        schema, example = SCHEMAS[name], EXAMPLES[name]
        lines = [f"# agentmsg send --type {name} --payload-file FILE (docs/HANDOFFS.md)"]
    elif name in TEMPLATES:
        schema, example = TEMPLATES[name], TEMPLATE_EXAMPLES[name]
        lines = [f"# agentmsg send --template {name} --payload-file FILE (docs/HANDOFFS.md): sent as a "
                 f"{TEMPLATE_TYPE}",
                 "# from and to (completed_by: the sender) must name the message's sender and recipient"]
    else:
        from agentmsg.errors import UsageError

        raise UsageError(f"no template {name[:40]!r}: the types are {' | '.join(TYPES)}; the hand-off "
                         f"templates are {' | '.join(TEMPLATES)}")
    for key, spec in schema.items():
        lines.append(f"# {key}: {_rule(spec)}")
        for sub, subspec in (spec.get("fields") or {}).items():
            lines.append(f"#   {sub}: {_rule(subspec)}")
        lines += _yaml({key: example[key]}, 0) if example.get(key) not in (None, []) else [f"{key}: []"]
    return "\n".join(lines) + "\n"


def _rule(spec: dict[str, Any]) -> str:
    kind = spec["kind"]
    what = {"id": f"one line, at most {ID_MAX_CHARS} characters", "text": f"text, at most {spec.get('max')} characters",
            "int": f"an integer from {spec.get('min')} to {spec.get('max')}",
            "enum": " | ".join(spec.get("values", ())), "list": f"a list of at most {LIST_MAX_ITEMS} lines",
            "map": "a mapping of names to text", "artifacts": "paths (hashed at send), or {location, sha256 | version}",
            "artifact": "a path (hashed at send), or {location, type, sha256 | version}",
            "object": "a mapping of the fields below", "timestamp": "an ISO-8601 time",
            "line": f"one line, at most {spec.get('max', LINE_MAX_CHARS)} characters",
            }.get(kind, kind)
    return ("required; " if spec.get("required") else "") + str(what)


# ---- answers ----------------------------------------------------------------------------------


def answer(handoff: dict[str, Any], parent: dict[str, Any] | None, *, parent_id: str, parent_to: str,
           sender: str, sender_human: bool, closed_by: str | None) -> None:
    """A ``result`` or ``gate_response`` answers what it names, or the send is refused.

    ``parent`` is the named message's handoff (None: untyped); ``closed_by`` the decision of a
    gate_response already stored for it.
    """
    type_ = handoff["type"]
    if type_ not in ANSWERS:
        return
    want, key = ANSWERS[type_]
    from agentmsg import errors

    if parent is None or parent.get("type") != want:
        what = f"a {parent['type']}" if parent else "an untyped message"
        raise errors.Conflict(f"correlation_id {parent_id} is {what}, not a {want}: a {type_} answers a {want}; "
                              "nothing was stored")
    if closed_by is not None:
        raise errors.Conflict(f"gate {key_of(parent)} is closed ({closed_by}); nothing was stored")
    if handoff["payload"][key] != parent["payload"][key]:
        raise invalid(f"{type_}.{key}", f"must equal the {want}'s {key} ({parent['payload'][key]})")
    if sender != parent_to:
        raise errors.IdentityError(f"{sender} may not answer {want} {key_of(parent)}: it is addressed to "
                                   f"{parent_to}; nothing was stored")
    if type_ == "gate_response" and parent["payload"].get("approver") == "human" and not sender_human:
        raise errors.IdentityError(f"gate {key_of(parent)} asks for a human: only a human: pin may answer it; "
                                   "nothing was stored")


def declared_parties(declared: dict[str, Any], sender: str, to: str) -> None:
    """A template's ``from`` and ``to`` name the message's sender and recipient (agent codes: any case)."""
    from agentmsg import errors

    for field, actual in (("from", sender), ("to", to)):
        named = declared.get(field)
        if named is not None and str(named).lower() != actual:
            raise errors.IdentityError(f"the payload's {field} is {str(named)[:40]!r} but the message's "
                                       f"{'sender' if field == 'from' else 'recipient'} is {actual}; "
                                       "nothing was stored")


# ---- gates ----------------------------------------------------------------------------------


def gate_state(request_ts_epoch: float, timeout_minutes: int, decision: str | None, now: float) -> str:
    """open, approved, aborted or timed out."""
    if decision is not None:
        return {"APPROVE": "approved", "ABORT": "aborted"}.get(decision, decision.lower())
    return "timed out" if now >= request_ts_epoch + 60 * timeout_minutes else "open"


class Gates:
    """Gate requests and the decisions answering them, folded from messages in any order (``top`` feeds it
    each message once, as it reads on; ``status`` and ``roster`` a collaboration's messages)."""

    def __init__(self) -> None:
        self.requests: dict[str, Any] = {}
        self.decisions: dict[str, str] = {}

    def add(self, msg: Any) -> None:
        h = getattr(msg, "handoff", None) or {}
        if h.get("type") == "gate_request":
            self.requests[msg.id] = msg
        elif h.get("type") == "gate_response" and h.get("correlation_id"):
            self.decisions[str(h["correlation_id"])] = str((h.get("payload") or {}).get("decision"))

    def listing(self, now: float, *, open_only: bool = False) -> list[dict[str, Any]]:
        """Each gate, oldest first: its request message, gate_id, required_action, state and expiry (epoch)."""
        from agentmsg.domain.envelope import _epoch

        out = []
        for m in sorted(self.requests.values(), key=lambda m: (m.ts, m.cseq, m.id)):
            p = m.handoff["payload"]
            sent = _epoch(m.ts)
            state = gate_state(sent, int(p["timeout_minutes"]), self.decisions.get(m.id), now)
            if open_only and state not in ("open", "timed out"):
                continue
            out.append({"message": m, "gate_id": str(p["gate_id"]), "required_action": str(p["required_action"]),
                        "state": state, "expires_at": sent + 60 * int(p["timeout_minutes"])})
        return out


# ---- rendering --------------------------------------------------------------------------------

_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./ ()+,=<>;@")


def _scalar(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return records.dumps(value)
    if isinstance(value, (int, float)):
        return str(value)
    text = str(value)
    if text and all(c in _PLAIN for c in text) and text[0] not in "-. " and text[-1] != " " \
            and text.lower() not in ("null", "true", "false", "yes", "no", "on", "off", "~") \
            and not text.replace(".", "").replace("-", "").isdigit():
        return text
    # a JSON string is a YAML double-quoted scalar; YAML reads a few characters JSON keeps as line breaks
    odd = any(c in "\x85\u2028\u2029\ufeff" or 0xD800 <= ord(c) <= 0xDFFF for c in text)
    return records.dumps_plain(text) if odd else records.dumps(text)


def _block_ok(text: str) -> bool:
    """Whether a multi-line text reads back exactly as a YAML literal block (else it is quoted)."""
    lines = text.removesuffix("\n").split("\n")
    return (len(lines) > 1 and not text.endswith("\n\n") and lines[0][:1] not in (" ", "\t", "")
            and all(not line.endswith((" ", "\t")) for line in lines)
            and all(c in "\n\t" or (ord(c) >= 32 and c not in "\x7f\x85\u2028\u2029\ufeff") for c in text))


def _yaml(value: Any, indent: int) -> list[str]:
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{_scalar(k)}:")
                lines += _yaml(v, indent + 1)
            elif isinstance(v, str) and _block_ok(v):
                lines.append(f"{pad}{_scalar(k)}: {'|' if v.endswith(chr(10)) else '|-'}")
                lines += [f"{pad}  {line}" if line else "" for line in v.removesuffix("\n").split("\n")]
            else:
                lines.append(f"{pad}{_scalar(k)}: {_scalar(v)}")
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, dict) and v:
                inner = _yaml(v, indent + 1)
                lines.append(f"{pad}- {inner[0].lstrip()}")
                lines += inner[1:]
            else:
                lines.append(f"{pad}- {_scalar(v)}")
    return lines


def render(handoff: dict[str, Any]) -> str:
    """A typed message as readable YAML: its type, correlation, run and phase, then its payload."""
    head = {"type": handoff["type"]}
    for key in ("template", "correlation_id", "thread", "workflow_run_id", "phase"):
        if handoff.get(key):
            head[key] = handoff[key]
    return "\n".join([*_yaml(head, 0), "payload:", *_yaml(handoff["payload"], 1)]) + "\n"


def summary(handoff: dict[str, Any]) -> str:
    """One line for a hook's delivery header: the type and the key fields (peer text: the caller escapes it)."""
    p = handoff.get("payload") or {}
    parts = [str(handoff.get("type", "?"))]
    if handoff.get("template"):
        parts.append(f"template={str(handoff['template'])[:32]}")
    for key in ("task_id", "gate_id", "status", "required_action", "decision", "state", "timeout_minutes"):
        if key in p:
            parts.append(f"{key}={str(p[key])[:64]}")
    if handoff.get("correlation_id"):
        parts.append(f"correlation_id={handoff['correlation_id']}")
    return " ".join(parts)
