"""The typed handoffs' rules (domain/handoffs.py): each schema rule refused with its field named, the
seed's own examples valid once filled in, gates' states, and the YAML a typed message shows."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from agentmsg.domain import handoffs
from agentmsg.errors import Conflict, IdentityError, PayloadInvalid

# The seed protocol's payload examples, verbatim ("Inter-Agent Communication — Full Protocol", section 2).
SEED_PAYLOADS = {
    "task": """
payload:
  task_id: <id>
  task_text: <full task description — not a file reference>
  input_artifacts: [<file path>, ...]
  acceptance_criteria: [<criterion>, ...]
  constraints: [<what must not change>, ...]
  known_complications: [<what previous agents discovered>, ...]
  timeout_minutes: 30
""",
    "result": """
payload:
  task_id: <id>
  status: DONE | DONE_WITH_CONCERNS | NEEDS_CONTEXT | BLOCKED
  evidence:
    gate_1_functional: <test output>
    gate_2_spec: <spec reference>
    gate_3_governance: <commit message>
    gate_4_regressions: <test count>
  concerns: [<concern if DONE_WITH_CONCERNS>, ...]
  blockers: [<blocker if BLOCKED>, ...]
""",
    "gate_request": """
payload:
  gate_id: <id>
  required_action: APPROVE | ABORT | PROVIDE_CONTEXT
  question: <specific question>
  context: <evidence or state for decision>
  timeout_minutes: 60
""",
    "gate_response": """
payload:
  gate_id: <id>
  decision: APPROVE | ABORT
  evidence: <rationale or additional context>
  conditions: [<condition if conditional approval>, ...]
""",
}
# The phase-completion template's artifact (section 3): its fields are an artifact's.
SEED_ARTIFACT = """
artifact:
  type: <build|image|manifest|spec|report>
  location: <path or reference>
  version: <tag or hash>
"""
ENUM = re.compile(r"^(\s*\w+: )([A-Z_]+(?: \| [A-Z_]+)+)\s*$", re.M)
INLINE_ENUM = re.compile(r"<(\w+(?:\|\w+)+)>")


def fill(text: str, choice: int) -> list[str]:
    """Every filled-in instance: placeholders become values of their type, an enumeration each of its members."""
    text = re.sub(r"\[<[^>]*>, \.\.\.\]", '["a filled-in item", "another"]', text)
    m = ENUM.search(text) or INLINE_ENUM.search(text)
    if m is None:
        return [re.sub(r"<[^>]*>", '"T-7"', text)]
    members = re.split(r" ?\| ?", m.group(2) if m.re is ENUM else m.group(1))
    out = []
    for member in members:
        one = text[: m.start()] + (f"{m.group(1)}{member}" if m.re is ENUM else member) + text[m.end():]
        out.append(re.sub(r"<[^>]*>", '"T-7"', one))
    return out


@pytest.mark.parametrize("type_", list(SEED_PAYLOADS))
def test_filled_in_seed_examples_validate(type_: str) -> None:
    instances = fill(SEED_PAYLOADS[type_], 0)
    assert instances
    for text in instances:
        payload = yaml.safe_load(text)["payload"]
        assert "<" not in str(payload)
        assert handoffs.validate(type_, payload)[handoffs.ANSWERS.get(type_, ("", "task_id" if type_ == "task"
                                                                             else "gate_id"))[1]] == "T-7"
    if type_ in ("result", "gate_request", "gate_response"):
        assert len(instances) == {"result": 4, "gate_request": 3, "gate_response": 2}[type_]


def test_the_seed_templates_artifact_validates() -> None:
    for text in fill(SEED_ARTIFACT, 0):
        art = yaml.safe_load(text)["artifact"]
        assert handoffs.artifact("artifact", art)["type"] in handoffs.ARTIFACT_TYPES
    assert len(fill(SEED_ARTIFACT, 0)) == 5


TASK = {"task_id": "T-1", "task_text": "Fix it.", "timeout_minutes": 30}
RESULT = {"task_id": "T-1", "status": "DONE"}
GATE = {"gate_id": "G-1", "required_action": "APPROVE", "question": "Ship?", "timeout_minutes": 60}


def _bad(type_: str, base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    doc = {**base, **changes}
    return {k: v for k, v in doc.items() if v is not ...}


#: (type, payload, the line's start): one rule each.
BAD = [
    ("task", _bad("task", TASK, task_id=...), "task.task_id: required"),
    ("task", _bad("task", TASK, task_text=""), "task.task_text: required"),
    ("task", _bad("task", TASK, task_id=7), "task.task_id: must be a string, not a number"),
    ("task", _bad("task", TASK, task_id="a\nb"), "task.task_id: must be one line"),
    ("task", _bad("task", TASK, task_id="x" * 129), "task.task_id: is 129 characters; the limit is 128"),
    ("task", _bad("task", TASK, task_text="x" * (32 * 1024 + 1)), "task.task_text: is 32769 characters"),
    ("task", _bad("task", TASK, timeout_minutes="30"), "task.timeout_minutes: must be an integer, not a string"),
    ("task", _bad("task", TASK, timeout_minutes=True), "task.timeout_minutes: must be an integer, not a boolean"),
    ("task", _bad("task", TASK, timeout_minutes=0), "task.timeout_minutes: must be between 1 and 10080"),
    ("task", _bad("task", TASK, constraints="keep the API"), "task.constraints: must be a list, not a string"),
    ("task", _bad("task", TASK, constraints=["x"] * 101), "task.constraints: has 101 items; the limit is 100"),
    ("task", _bad("task", TASK, constraints=[3]), "task.constraints[0]: must be a string, not a number"),
    ("task", _bad("task", TASK, input_artifacts=[{"sha256": "0" * 64}]), "task.input_artifacts[0].location: "
                                                                         "required"),
    ("task", _bad("task", TASK, input_artifacts=[{"location": "a", "sha256": "xyz"}]),
     "task.input_artifacts[0].sha256: must be 64 lowercase hex digits"),
    ("task", _bad("task", TASK, input_artifacts=[{"location": "a", "type": "zip"}]),
     "task.input_artifacts[0].type: must be one of build | image"),
    ("task", _bad("task", TASK, tasktext="typo"), "task.tasktext: unknown field"),
    ("result", _bad("result", RESULT, status="done"), "result.status: must be one of DONE | DONE_WITH_CONCERNS"),
    ("result", _bad("result", RESULT, status="DONE_WITH_CONCERNS"), "result.concerns: required when status is "
                                                                     "DONE_WITH_CONCERNS"),
    ("result", _bad("result", RESULT, status="BLOCKED"), "result.blockers: required when status is BLOCKED"),
    ("result", _bad("result", RESULT, evidence=["x"]), "result.evidence: must be a mapping, not a list"),
    ("result", _bad("result", RESULT, evidence={"g": "x" * 20000}), "result.evidence.g: is 20000 characters"),
    ("gate_request", _bad("gate_request", GATE, timeout_minutes=...), "gate_request.timeout_minutes: required"),
    ("gate_request", _bad("gate_request", GATE, required_action="MAYBE"), "gate_request.required_action: must be "
                                                                          "one of APPROVE | ABORT | PROVIDE_CONTEXT"),
    ("gate_request", _bad("gate_request", GATE, approver="anyone"), "gate_request.approver: must be one of"),
    ("gate_response", {"gate_id": "G-1", "decision": "PROVIDE_CONTEXT"}, "gate_response.decision: must be one of "
                                                                         "APPROVE | ABORT"),
    ("status", {"state": "working"}, "status.summary: required"),
    ("status", {"state": "busy", "summary": "x"}, "status.state: must be one of working"),
    ("status", {"state": "working", "summary": "x", "progress": 101}, "status.progress: must be between 0 and 100"),
    ("task", ["not", "a", "mapping"], "task: must be a mapping, not a list"),
    ("chore", {}, "type: must be one of task | result"),
]


@pytest.mark.parametrize(("type_", "payload", "line"), BAD, ids=[line.split(":")[0] + ":" + line.split(":")[1][:30]
                                                                  for _t, _p, line in BAD])
def test_each_rule_is_refused_naming_its_field(type_: str, payload: Any, line: str) -> None:
    with pytest.raises(PayloadInvalid) as err:
        handoffs.validate(type_, payload)
    assert str(err.value).startswith(line), str(err.value)
    assert err.value.code == 2 and "\n" not in str(err.value)


def test_a_whole_payload_over_its_limit_is_refused() -> None:
    big = {**TASK, "known_complications": ["x" * 2000] * 25}
    with pytest.raises(PayloadInvalid, match=r"^task: payload is \d+ bytes; the limit is 49152"):
        handoffs.validate("task", big)


def test_valid_payloads_are_normalized() -> None:
    got = handoffs.validate("task", {**TASK, "constraints": [], "input_artifacts": ["src/a.py"]})
    assert got == {**TASK, "input_artifacts": [{"location": "src/a.py"}]}  # empty fields dropped
    assert handoffs.validate("result", {**RESULT, "evidence": {"gate_4_regressions": 12}})["evidence"] == {
        "gate_4_regressions": "12"}


def _answer(handoff: dict[str, Any], parent: dict[str, Any] | None, **kw: Any) -> None:
    args: dict[str, Any] = {"parent_id": "m-1", "parent_to": "spec", "sender": "spec", "sender_human": False,
                            "closed_by": None, **kw}
    handoffs.answer(handoff, parent, **args)


def test_answers_tie_to_what_they_answer() -> None:
    task = {"type": "task", "payload": TASK}
    gate = {"type": "gate_request", "payload": {**GATE, "approver": "human"}}
    result = {"type": "result", "payload": RESULT}
    response = {"type": "gate_response", "payload": {"gate_id": "G-1", "decision": "ABORT"}}
    _answer(result, task)
    with pytest.raises(Conflict, match="is an untyped message, not a task"):
        _answer(result, None)
    with pytest.raises(Conflict, match="is a gate_request, not a task"):
        _answer(result, gate)
    with pytest.raises(PayloadInvalid, match=r"^result.task_id: must equal the task's task_id \(T-1\)"):
        _answer({"type": "result", "payload": {**RESULT, "task_id": "T-2"}}, task)
    with pytest.raises(IdentityError, match="carol may not answer task T-1: it is addressed to spec"):
        _answer(result, task, sender="carol")
    with pytest.raises(IdentityError, match="asks for a human"):
        _answer(response, gate)
    _answer(response, gate, sender_human=True)
    with pytest.raises(Conflict, match=r"gate G-1 is closed \(approved\)"):
        _answer(response, gate, sender_human=True, closed_by="approved")
    with pytest.raises(IdentityError, match="the payload's from is 'RAZOR' but the message's sender is forge"):
        handoffs.declared_parties({"from": "RAZOR", "to": "FORGE"}, "forge", "razor")
    handoffs.declared_parties({"from": "RAZOR", "to": "FORGE"}, "razor", "forge")


def test_gate_states() -> None:
    assert handoffs.gate_state(1000.0, 1, None, 1059.0) == "open"
    assert handoffs.gate_state(1000.0, 1, None, 1060.0) == "timed out"
    assert handoffs.gate_state(1000.0, 1, "APPROVE", 9999.0) == "approved"
    assert handoffs.gate_state(1000.0, 1, "ABORT", 1001.0) == "aborted"


def test_render_is_yaml_that_reads_back() -> None:
    handoff = {"type": "task", "thread": "t-1", "workflow_run_id": "run-1",
               "payload": {**TASK, "task_text": "line one\nline: two", "constraints": ["yes", "- dash", "a: b", "7"],
                           "input_artifacts": [{"location": "a b.py", "sha256": "0" * 64, "size": 3}]}}
    text = handoffs.render(handoff)
    back = yaml.safe_load(text)
    assert back["payload"]["constraints"] == ["yes", "- dash", "a: b", "7"]
    assert back["payload"]["task_text"] == "line one\nline: two"
    assert back["payload"]["input_artifacts"][0]["location"] == "a b.py"
    assert back["type"] == "task" and back["workflow_run_id"] == "run-1"
    assert handoffs.summary(handoff) == "task task_id=T-1 timeout_minutes=30"


@pytest.mark.parametrize("text", ["a\nb", "a\nb\n", "a\n\nb", "a\nb\n\n", " a\nb", "a \nb", "a\u2028b\nc",
                                  "a\x85b\nc", "a\rb\nc", "tab\there\nx", "\ufeffa\nb", "", "x", "a: b\n- c"])
def test_any_text_reads_back_exactly(text: str) -> None:
    back = yaml.safe_load(handoffs.render({"type": "status", "payload": {"state": "working", "summary": text}}))
    assert back["payload"]["summary"] == text


@pytest.mark.parametrize("type_", handoffs.TYPES)
def test_each_template_validates_as_it_is(type_: str) -> None:
    text = handoffs.template(type_)
    assert text.startswith(f"# agentmsg send --type {type_} ")
    payload = yaml.safe_load(text)
    assert set(payload) == set(handoffs.SCHEMAS[type_])  # every field, each with its rule above it
    assert handoffs.validate(type_, payload)
    for key, spec in handoffs.SCHEMAS[type_].items():
        assert f"# {key}: {'required; ' if spec.get('required') else ''}" in text
