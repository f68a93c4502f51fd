"""OpenCode without running OpenCode: the installer, doctor, delivery inspect, identity, the manifest and the
plugin file itself.  tests/e2e/test_e2e_opencode.py runs the real host."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from agentmsg.domain import validate as model
from agentmsg.errors import IdentityError
from agentmsg.hooks import base as hooks
from agentmsg.hosts import identity
from agentmsg.hosts import opencode_files as oc
from tests.support.cli_helpers import REPO_ROOT, run_json

PLUGIN = REPO_ROOT / "opencode" / "agentmsg.js"


def env_for(home: Path) -> dict[str, str | None]:
    return {"HOME": str(home), "XDG_CONFIG_HOME": None}


def test_install_is_idempotent_and_uninstall_removes_exactly_ours(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code, doc, _ = run_json("install", "opencode", env=env_for(home))
    res = doc["result"]
    conf = home / ".config" / "opencode"
    assert code == 0 and (res["plugin"], res["skill"]) == ("written", "written")
    assert (res["plugin_file"], res["skill_file"]) == (str(conf / "plugins" / "agentmsg.js"),
                                                      str(conf / "skills" / "agentmsg" / "SKILL.md"))
    text = Path(res["plugin_file"]).read_text()
    assert f"const HOOK = {json.dumps(str(REPO_ROOT / 'hooks' / 'run'))};" in text
    assert f"const CLI = {json.dumps(str(REPO_ROOT / 'bin' / 'agentmsg'))};" in text
    changed = [(a, b) for a, b in zip(PLUGIN.read_text().splitlines(), text.splitlines(), strict=True) if a != b]
    assert [a for a, _ in changed] == ['const HOOK = ""; // absolute path of hooks/run (written by `agentmsg '
                                       'install opencode`)', 'const CLI = ""; // the agentmsg command the hook text '
                                       'names (written by `agentmsg install opencode`)']
    skill = Path(res["skill_file"]).read_text()
    assert skill.startswith((REPO_ROOT / "skills" / "agentmsg" / "SKILL.md").read_text().rstrip("\n"))
    assert skill.endswith(oc.SKILL_MARK + "\n")

    _, again, _ = run_json("install", "opencode", env=env_for(home))
    assert (again["result"]["plugin"], again["result"]["skill"]) == ("unchanged", "unchanged")

    mine = conf / "plugins" / "mine.js"
    mine.write_text("export const Mine = async () => ({})\n")
    _, gone, _ = run_json("uninstall", "opencode", env=env_for(home))
    assert sorted(gone["result"]["removed"]) == sorted([res["plugin_file"], res["skill_file"]])
    assert mine.exists() and not (conf / "skills").exists()


def test_a_file_that_is_not_ours_is_left_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    theirs = home / ".config" / "opencode" / "plugins" / "agentmsg.js"
    theirs.parent.mkdir(parents=True)
    theirs.write_text("// the user's own plugin\n")
    _, doc, _ = run_json("install", "opencode", env=env_for(home))
    assert doc["result"]["plugin"] == "left alone (not ours)" and doc["result"]["skill"] == "written"
    _, gone, _ = run_json("uninstall", "opencode", env=env_for(home))
    assert theirs.read_text() == "// the user's own plugin\n"
    assert gone["result"]["removed"] == [doc["result"]["skill_file"]]


def test_project_install_goes_where_opencode_looks_in_a_project(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    _, doc, _ = run_json("install", "opencode", "--project", str(proj), env=env_for(tmp_path / "home"))
    assert doc["result"]["plugin_file"] == str(proj / ".opencode" / "plugins" / "agentmsg.js")
    assert doc["result"]["skill_file"] == str(proj / ".agents" / "skills" / "agentmsg" / "SKILL.md")
    assert not (tmp_path / "home" / ".config").exists()


def test_xdg_config_home_is_followed(tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    _, doc, _ = run_json("install", "opencode", env={"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(xdg)})
    assert doc["result"]["plugin_file"] == str(xdg / "opencode" / "plugins" / "agentmsg.js")


def test_doctor_and_delivery_inspect_know_opencode(tmp_path: Path) -> None:
    home, root = tmp_path / "home", tmp_path / "state"
    env = env_for(home)
    run_json("install", "opencode", env=env)
    code, doc, _ = run_json("doctor", env=env, root=root)
    assert code == 0, doc["result"]["errors"]
    copies = [c for c in doc["result"]["copies"] if c["host"] == "opencode"]
    assert [(c["kind"], c["root"], c["enabled"]) for c in copies] == [("plugin file", str(REPO_ROOT), True)]
    assert copies[0]["hook"]["ok"] is True and copies[0]["hook"]["root"] == str(root)
    assert doc["result"]["adapters"]["opencode"]["installed"] is True

    pin = "opencode:ses_0123abcDEF"
    opened = run_json("open", "--self", pin, "--alias", "oc", "--label", "l", "--task", "t", env=env, root=root)
    collab = opened.doc["result"]["collab"]
    _, insp, _ = run_json("delivery", "inspect", "--collab", collab, "--self", pin, env=env, root=root)
    adapters = insp["result"]["adapters"]["opencode"]
    assert adapters["installed"] is True and adapters["hook"] == str(REPO_ROOT / "hooks" / "run")
    assert adapters["skill"] == "ours"


def test_opencode_session_variable_is_the_pin() -> None:
    env = {"OPENCODE_SESSION_ID": "ses_dcfccc393ffemHbMBI9qnko7Dz"}
    assert str(identity.resolve(None, env)) == "opencode:ses_dcfccc393ffemHbMBI9qnko7Dz"
    with pytest.raises(IdentityError):
        identity.resolve("opencode:ses_other", env)
    with pytest.raises(IdentityError):
        identity.resolve(None, dict(env, CLAUDE_CODE_SESSION_ID="4b5c"))


@pytest.mark.parametrize("session", ["ses_dcfccc393ffemHbMBI9qnko7Dz", "a_b", "_x", "a b", "a/b"])
def test_underscore_is_a_session_character_everywhere(session: str) -> None:
    ok = bool(model.SESSION_RE.fullmatch(session))
    assert hooks.is_session(session) is ok
    assert ok is (session in ("ses_dcfccc393ffemHbMBI9qnko7Dz", "a_b"))
    js = re.search(r"const SESSION = /(.+)/;", PLUGIN.read_text())
    assert js is not None and bool(re.fullmatch(js.group(1).strip("^$"), session)) is ok


def test_the_manifest_agrees_with_plugin_json() -> None:
    top = json.loads((REPO_ROOT / "plugin.json").read_text())
    mine = json.loads((REPO_ROOT / "opencode" / "package.json").read_text())
    assert {k: mine[k] for k in ("name", "version", "description")} == top
    assert (mine["type"], mine["main"]) == ("module", "agentmsg.js")


def test_the_plugin_uses_node_builtins_only_and_parses() -> None:
    text = PLUGIN.read_text()
    imports = re.findall(r'^import .* from "([^"]+)";$', text, re.M)
    assert imports and all(name.startswith("node:") for name in imports), imports
    assert "eval(" not in text and "new Function" not in text and "exec(" not in text
    node = shutil.which("node")
    assert node, "node is needed to check the plugin's syntax"
    done = subprocess.run([node, "--check", str(PLUGIN)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def readme_commands() -> list[list[str]]:
    """The `agentmsg ...` lines of README's "In OpenCode" code block, comments dropped."""
    text = (REPO_ROOT / "README.md").read_text()
    section = text.split("## In OpenCode", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].split() for line in block.splitlines() if line.strip()]


def test_readme_install_steps_run_as_written(tmp_path: Path) -> None:
    """Each command of README's OpenCode block, run from a project folder, does what its comment says."""
    home, proj = tmp_path / "home", tmp_path / "proj"
    proj.mkdir()
    cmds = readme_commands()
    assert [c[:3] for c in cmds] == [["agentmsg", "install", "opencode"]] * 2 + [["agentmsg", "uninstall",
                                                                                   "opencode"]] * 2
    results = [run_json(*c[1:], env=env_for(home), cwd=proj).doc["result"] for c in cmds]
    conf = home / ".config" / "opencode"
    assert results[0]["plugin_file"] == str(conf / "plugins" / "agentmsg.js")
    assert results[1]["plugin_file"] == str(proj / ".opencode" / "plugins" / "agentmsg.js")
    assert results[1]["skill_file"] == str(proj / ".agents" / "skills" / "agentmsg" / "SKILL.md")
    assert sorted(results[2]["removed"]) == sorted([results[0]["plugin_file"], results[0]["skill_file"]])
    assert sorted(results[3]["removed"]) == sorted([results[1]["plugin_file"], results[1]["skill_file"]])
    assert not (proj / ".opencode").exists() and not (proj / ".agents").exists()


def test_a_wheel_install_writes_a_plugin_naming_its_own_hook(tmp_path: Path) -> None:
    """setup.py ships the plugin template; from a wheel layout the plugin names that copy's hooks/run and the
    console script, and that hook answers as opencode."""
    import ast
    import sys

    tree = ast.parse((REPO_ROOT / "setup.py").read_text())
    shipped = next(ast.literal_eval(n.value) for n in ast.walk(tree)
                   if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "SHIPPED")
    assert {"opencode/agentmsg.js", "opencode/package.json"} <= set(shipped)
    plugin = tmp_path / "site-packages" / "agentmsg" / "_plugin"
    shutil.copytree(REPO_ROOT / "agentmsg", plugin.parent, ignore=shutil.ignore_patterns("__pycache__"))
    for rel in shipped:
        (plugin / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / rel, plugin / rel)
    out = oc.install({"HOME": str(tmp_path / "home")}, plugin, cli="/opt/pipx/bin/agentmsg")
    text = Path(out["plugin_file"]).read_text()
    assert f"const HOOK = {json.dumps(str(plugin / 'hooks' / 'run'))};" in text
    assert 'const CLI = "/opt/pipx/bin/agentmsg";' in text
    assert oc.installed_hook(Path(out["plugin_file"])) == plugin / "hooks" / "run"
    probe = subprocess.run(["/bin/sh", "-c", out["hook"]], input=b'{"hook_event_name": "AgentmsgProbe"}',
                           capture_output=True, timeout=60,
                           env={"HOME": str(tmp_path), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})
    doc = json.loads(probe.stdout)
    assert (doc["host"], doc["package"]) == ("opencode", str(plugin.parent))


PLUGIN_DRIVER = r"""
const [plugin] = process.argv.slice(1);
const { AgentmsgPlugin } = await import(plugin);
const prompts = [];
const client = { session: { prompt: async (req) => { prompts.push(req); return {}; } } };
const hooks = await AgentmsgPlugin({ client, directory: "/nowhere" });
const said = async (sid, text) => {
  const output = { message: { id: "msg_1" }, parts: [{ id: "prt_1", type: "text", text }] };
  await hooks["chat.message"]({ sessionID: sid }, output);
  return output.parts.slice(1).map((p) => [p.id, p.synthetic, p.text]);
};
const env = async (sid) => {
  const output = { env: {} };
  await hooks["shell.env"]({ sessionID: sid }, output);
  return output.env;
};
const out = {};
out.first = await said("ses_a1", "hello");
out.second = await said("ses_a1", "again");
await hooks.event({ event: { type: "session.compacted", properties: { sessionID: "ses_a1" } } });
out.compacted = await said("ses_a1", "after compaction");
out.bad = await said("../etc", "x");
out.env = [await env("ses_a1"), await env("../etc"), await env(undefined)];
for (let i = 0; i < 4; i++) await hooks.event({ event: { type: "session.idle", properties: { sessionID: "ses_a1" } } });
out.prompts = prompts.map((p) => [p.path.id, p.body.parts[0].text]);
console.log(JSON.stringify(out));
"""

FAKE_HOOK = """#!/bin/sh
in=$(cat)
printf '%s\\n' "$in" >> "$CALLS"
case $in in
  *'"SessionStart"'*) printf '{"hookSpecificOutput": {"additionalContext": "ID"}}' ;;
  *'"UserPromptSubmit"'*) printf '{"hookSpecificOutput": {"additionalContext": "MAIL"}}' ;;
  *'"Stop"'*) printf '{"decision": "block", "reason": "MORE %s"}' "$(wc -l < "$CALLS")" ;;
esac
"""


def test_the_plugin_logic_against_a_stand_in_hook(tmp_path: Path) -> None:
    """The plugin alone, in node: SessionStart once per session (again, as "compact", after a compaction),
    the prompt hook at every user prompt, the shell's variable only for a valid session id, and idle
    continuations that tell the hook they follow one and stop at AGENTMSG_OPENCODE_MAX_CONTINUATIONS."""
    hook = tmp_path / "hooks" / "run"
    hook.parent.mkdir()
    hook.write_text(FAKE_HOOK)
    calls = tmp_path / "calls.jsonl"
    installed = tmp_path / "agentmsg.js"
    installed.write_text(oc.render(REPO_ROOT).replace(json.dumps(str(REPO_ROOT / "hooks" / "run")),
                                                      json.dumps(str(hook))))
    node = shutil.which("node")
    assert node
    done = subprocess.run([node, "--input-type=module", "-e", PLUGIN_DRIVER, "--", str(installed)],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "CALLS": str(calls),
                               "AGENTMSG_OPENCODE_MAX_CONTINUATIONS": "2"})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["first"] == [["prt_1am0", True, "ID"], ["prt_1am1", True, "MAIL"]]
    assert out["second"] == [["prt_1am0", True, "MAIL"]]
    assert out["compacted"] == [["prt_1am0", True, "ID"], ["prt_1am1", True, "MAIL"]]
    assert out["bad"] == []
    assert out["env"] == [{"OPENCODE_SESSION_ID": "ses_a1"}, {}, {}]
    seen = [json.loads(x) for x in calls.read_text().splitlines()]
    assert [(c["hook_event_name"], c.get("source"), c.get("stop_hook_active")) for c in seen] == [
        ("SessionStart", "startup", None), ("UserPromptSubmit", None, None), ("UserPromptSubmit", None, None),
        ("SessionStart", "compact", None), ("UserPromptSubmit", None, None),
        ("Stop", None, False), ("Stop", None, True)]  # the third and fourth idle: the plugin's bound
    assert all(c["session_id"] == "ses_a1" for c in seen)
    assert out["prompts"] == [["ses_a1", "MORE 6"], ["ses_a1", "MORE 7"]]


def test_doctor_reports_a_user_and_a_project_plugin_as_running_twice(tmp_path: Path) -> None:
    home, proj, root = tmp_path / "home", tmp_path / "proj", tmp_path / "state"
    proj.mkdir()
    run_json("install", "opencode", env=env_for(home))
    run_json("install", "opencode", "--project", str(proj), env=env_for(home))
    code, doc, err = run_json("doctor", env=env_for(home), root=root, cwd=proj)
    kinds = sorted(c["kind"] for c in doc["result"]["copies"] if c["host"] == "opencode")
    assert kinds == ["plugin file", "project plugin file"]
    assert code == 16 and "opencode: agentmsg is installed 2 times and every hook runs 2 times" in err
    run_json("uninstall", "opencode", "--project", str(proj), env=env_for(home))
    code, doc, _ = run_json("doctor", env=env_for(home), root=root, cwd=proj)
    assert code == 0, doc["result"]["errors"]
