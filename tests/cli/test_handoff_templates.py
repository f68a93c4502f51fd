"""The seed's hand-off templates through the real CLI (issue 31): ``template list`` names them, ``template show``
prints a skeleton, ``send --template`` checks a payload against its template, and from/to must be the real
parties.  Filled-in instances of every example in the seed validate; each broken rule is one line with its own
exit code and stores nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cli.test_handoffs import ORCH, SPEC, Team
from tests.cli.test_handoffs import team as team
from tests.cli.test_handoffs import template as template
from tests.support.cli_helpers import run

# The seed's "3. Standard Hand-Off Templates", each placeholder replaced by a value of its type and each
# enumeration by one of its values; from and to are the message's parties (orch -> spec, any case).
PHASE_COMPLETION = """\
# Written by: completing agent
phase: build
completed_by: ORCH
timestamp: 2026-12-07T10:00:00Z
status: partial
artifact:
  type: report
  location: reports/build.txt
next_phase: deploy
handoff_notes: |
  the flaky test is quarantined, not fixed
"""
SPRINT_DEPLOY = """\
# RAZOR -> FORGE
from: ORCH
to: SPEC
artifact:
  image_tag: "registry/service:v1.2.0"
  tested_against: staging
  test_report: ".hseos-output/run-1/test-report.yaml"
  risk_level: MEDIUM
notes: "All regression tests pass. Performance within baseline."
"""
DEPLOY_VALIDATE = """\
# KUBE -> SABLE
from: orch
to: spec
artifact:
  argocd_app: "service-prod"
  deployed_at: 2026-12-07T10:05:00Z
  image: "registry/service:v1.2.0"
  environment: production
validation_required:
  - "ArgoCD app status = Healthy within 5 minutes"
  - "Error rate < baseline for 10 minutes"
  - "Smoke test suite passes"
"""
# The seed's "Payload by Type", filled in the same way.
SEED_TASK = """\
task_id: T-7
task_text: Add retries to the uploader; the full description is inline.
input_artifacts: [reports/build.txt]
acceptance_criteria: [three retries, backoff doubles]
constraints: [the upload API]
known_complications: [the staging bucket throttles]
timeout_minutes: 30
"""
SEED_RESULT = """\
task_id: T-7
status: BLOCKED
evidence:
  gate_1_functional: "12 passed, 1 failed"
  gate_2_spec: SPEC.md section 3
  gate_3_governance: "fix(uploader): retry on 503"
  gate_4_regressions: 14
concerns: []
blockers: [the staging bucket is down]
"""
SEED_GATE = """\
gate_id: G-7
required_action: PROVIDE_CONTEXT
question: Which region does the uploader target?
context: the config names two
timeout_minutes: 60
"""
SEED_GATE_RESPONSE = """\
gate_id: G-7
decision: ABORT
evidence: the region is being retired
conditions: [retry after the migration]
"""


@pytest.fixture
def repo_team(team: Team) -> Team:
    (team.repo / "reports").mkdir()
    (team.repo / "reports" / "build.txt").write_text("build 42 ok\n")
    return team


def test_the_seeds_templates_and_examples_validate_as_filled_in(repo_team: Team) -> None:
    t = repo_team
    sent = {}
    for name, text in (("phase_completion", PHASE_COMPLETION), ("sprint_deploy", SPRINT_DEPLOY),
                       ("deploy_validate", DEPLOY_VALIDATE)):
        (t.repo / f"{name}.yaml").write_text(text)
        doc = t.json("send", "--collab", t.collab, "--self", ORCH, "--to", "spec", "--template", name,
                     "--payload-file", f"{name}.yaml")
        sent[name] = t.sent_id(doc)
    task_id = t.sent_id(t.send("orch", "task", SEED_TASK, "--to", "spec"))
    t.sent_id(t.send("spec", "result", SEED_RESULT, "--correlation-id", task_id))
    gate_id = t.sent_id(t.send("orch", "gate_request", SEED_GATE, "--to", "spec"))
    t.sent_id(t.send("spec", "gate_response", SEED_GATE_RESPONSE, "--correlation-id", gate_id))
    code, doc, err = t.json("inbox", "--collab", t.collab, "--self", SPEC)
    assert code == 0, err
    by_id = {m["id"]: m for m in doc["result"]["messages"]}
    phase = by_id[sent["phase_completion"]]
    assert (phase["kind"], phase["subject"]) == ("update", "phase_completion build: partial")
    hand = phase["handoff"]
    assert (hand["type"], hand["template"]) == ("status", "phase_completion")
    art = hand["payload"]["artifact"]
    assert (art["location"], art["type"], art["size"], len(art["sha256"])) == ("reports/build.txt", "report", 12, 64)
    assert hand["payload"]["timestamp"] == "2026-12-07T10:00:00Z"
    deploy = by_id[sent["sprint_deploy"]]["handoff"]
    assert (deploy["payload"]["from"], deploy["payload"]["artifact"]["risk_level"]) == ("ORCH", "MEDIUM")
    assert by_id[sent["sprint_deploy"]]["subject"] == "sprint_deploy registry/service:v1.2.0: MEDIUM"
    validate = by_id[sent["deploy_validate"]]["handoff"]["payload"]
    assert validate["artifact"]["deployed_at"] == "2026-12-07T10:05:00Z"
    assert len(validate["validation_required"]) == 3
    # the body is the template as readable YAML, named
    body = yaml.safe_load(by_id[sent["deploy_validate"]]["body"])
    assert body["template"] == "deploy_validate" and body["payload"]["to"] == "spec"
    # task show of a template names its artifact's state in this checkout
    code, doc, err = t.json("task", "show", sent["phase_completion"], "--collab", t.collab)
    assert code == 0, err
    (msg,) = doc["result"]["thread_messages"]
    assert [a["state"] for a in msg["artifacts"]] == ["unchanged"]


def test_template_list_and_show_skeletons(repo_team: Team) -> None:
    t = repo_team
    code, doc, err = t.json("template", "list")
    assert code == 0, err
    rows = {r["name"]: r for r in doc["result"]["templates"]}
    assert rows["sprint_deploy"]["template"] and rows["sprint_deploy"]["type"] == "status"
    assert rows["deploy_validate"]["required"] == ["from", "to", "artifact", "validation_required"]
    code, out, err = run("template", "list", root=t.root)
    assert code == 0 and "phase_completion (update; send --template phase_completion (a status))" in out, err
    for name in ("sprint_deploy", "deploy_validate"):
        code, out, err = run("template", "show", name, root=t.root)
        assert code == 0, err
        assert f"# agentmsg send --template {name} --payload-file FILE" in out
        assert "#   risk_level: required; LOW | MEDIUM | HIGH" in out or name != "sprint_deploy"
        # the skeleton's parties are the seed's: replaced with the real ones, it is sent as it is
        filled = yaml.safe_load(out)
        assert (filled["from"], filled["to"]) in (("RAZOR", "FORGE"), ("KUBE", "SABLE"))
        (t.repo / f"{name}.yaml").write_text(out.replace(filled["from"], "ORCH").replace(filled["to"], "SPEC"))
        t.sent_id(t.json("send", "--collab", t.collab, "--self", ORCH, "--to", "spec", "--template", name,
                         "--payload-file", f"{name}.yaml"))
    code, out, err = run("template", "show", "phase_completion", root=t.root)
    assert code == 0 and yaml.safe_load(out)["artifact"]["version"] == "v1.2.0", err


def test_template_refusals_are_one_line_with_their_code_and_store_nothing(repo_team: Team, tmp_path: Path) -> None:
    t = repo_team
    good = yaml.safe_load(SPRINT_DEPLOY)
    phase = yaml.safe_load(PHASE_COMPLETION)
    validate = yaml.safe_load(DEPLOY_VALIDATE)
    art = good["artifact"]
    tpl = ["--to", "spec", "--template"]
    t.refusals([
        ("orch", "status", {**good, "to": "CAROL"}, [*tpl, "sprint_deploy"], 9,
         "identity: the payload's to is 'CAROL' but the message's recipient is spec"),
        ("orch", "status", {**good, "from": "SPEC"}, [*tpl, "sprint_deploy"], 9,
         "identity: the payload's from is 'SPEC' but the message's sender is orch"),
        ("orch", "status", {**phase, "completed_by": "carol"}, [*tpl, "phase_completion"], 9,
         "identity: the payload's from is 'carol'"),
        ("orch", "status", {k: v for k, v in good.items() if k != "to"}, [*tpl, "sprint_deploy"], 2,
         "payload: sprint_deploy.to: required"),
        ("orch", "status", {**good, "artifact": {**art, "risk_level": "SEVERE"}}, [*tpl, "sprint_deploy"], 2,
         "payload: sprint_deploy.artifact.risk_level: must be one of LOW | MEDIUM | HIGH"),
        ("orch", "status", {**good, "artifact": {**art, "image_tag": None}}, [*tpl, "sprint_deploy"], 2,
         "payload: sprint_deploy.artifact.image_tag: required"),
        ("orch", "status", {**good, "artifact": {**art, "digest": "x"}}, [*tpl, "sprint_deploy"], 2,
         "payload: sprint_deploy.artifact.digest: unknown field"),
        ("orch", "status", {**good, "artifact": "registry/service:v1.2.0"}, [*tpl, "sprint_deploy"], 2,
         "payload: sprint_deploy.artifact: must be a mapping"),
        ("orch", "status", {**phase, "status": "done"}, [*tpl, "phase_completion"], 2,
         "payload: phase_completion.status: must be one of complete | partial | failed"),
        ("orch", "status", {**phase, "timestamp": "yesterday"}, [*tpl, "phase_completion"], 2,
         "payload: phase_completion.timestamp: must be an ISO-8601 time"),
        ("orch", "status", {**phase, "artifact": {"location": "reports/none.txt"}}, [*tpl, "phase_completion"], 2,
         "payload: phase_completion.artifact.location: no such file 'reports/none.txt'"),
        ("orch", "status", {**phase, "artifact": {"location": "x", "type": "binary"}}, [*tpl, "phase_completion"], 2,
         "payload: phase_completion.artifact.type: must be one of build | image"),
        ("orch", "status", {**validate, "validation_required": "smoke"}, [*tpl, "deploy_validate"], 2,
         "payload: deploy_validate.validation_required: must be a list"),
        ("orch", "status", {**validate, "artifact": {**validate["artifact"], "deployed_at": 5}},
         [*tpl, "deploy_validate"], 2, "payload: deploy_validate.artifact.deployed_at: must be an ISO-8601 time"),
        ("orch", "status", good, [*tpl, "release_notes"], 2, "usage: no hand-off template 'release_notes'"),
        ("orch", "task", good, [*tpl, "sprint_deploy"], 2, "usage: --template sprint_deploy is sent as a status"),
        ("orch", "status", phase, [*tpl, "phase_completion", "--attach", "reports/build.txt"], 2,
         "payload: --attach: the phase_completion template carries its artifact"),
        ("orch", "status", {**good, "notes": "use token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"},
         [*tpl, "sprint_deploy"], 11, "REFUSED(secret)"),
    ])
