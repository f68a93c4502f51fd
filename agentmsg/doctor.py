"""Which agentmsg does each entry point really run?

A stale copy of a send tool prints the same success line while writing to a
root nobody reads; that is the classic silent failure of hand-rolled agent
messaging.  So ``doctor`` runs every entry point the way its caller would
(the CLI on PATH, the plugin launcher, each host's hook command) and
compares the version, interpreter and state root each one reports.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import TOOL, installer

PROBE_TIMEOUT = 120.0  # the plugin launcher may build its private venv on first use
PROBE_EVENT = {"hook_event_name": "AgentmsgProbe", "session_id": "agentmsg-doctor"}


@dataclass(frozen=True)
class Probe:
    name: str
    command: str
    ok: bool
    version: str | None = None
    python: str | None = None
    root: str | None = None
    package: str | None = None
    error: str | None = None


def _run(argv: list[str], env: Mapping[str, str], stdin: bytes = b"") -> tuple[int, str, str]:
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, env=dict(env), timeout=PROBE_TIMEOUT,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, "", str(exc)
    return done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")


def probe_cli(name: str, program: str, env: Mapping[str, str]) -> Probe:
    code, out, err = _run([program, "version", "--json"], env)
    try:
        res = json.loads(out)["result"]
        return Probe(name, program, True, res["tool"], res["python"], res["root"], res.get("package"))
    except (ValueError, KeyError, TypeError):
        last = (err.strip().splitlines() or [f"exit {code}, no output"])[-1]
        return Probe(name, program, False, error=last[:300])


def probe_hook(name: str, command: str, env: Mapping[str, str]) -> Probe:
    code, out, err = _run(["/bin/sh", "-c", command], env, json.dumps(PROBE_EVENT).encode())
    try:
        res = json.loads(out)
        return Probe(name, command, True, res["tool"], res["python"], res["root"], res.get("package"))
    except (ValueError, KeyError, TypeError):
        why = "no answer to the probe (an old hook, or one that failed open: see hooks.log)"
        return Probe(name, command, False, error=why if code == 0 else f"exit {code}: {err.strip()[:200]}")


def _hook_commands(hooks_file: Path) -> list[str]:
    """The distinct commands of a hooks.json, UserPromptSubmit first."""
    try:
        doc = json.loads(hooks_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    events = doc.get("hooks", {}) if isinstance(doc, dict) else {}
    found: list[str] = []
    for event in sorted(events, key=lambda e: e != "UserPromptSubmit"):
        for group in events[event] if isinstance(events[event], list) else []:
            for hook in group.get("hooks", []) if isinstance(group, dict) else []:
                cmd = hook.get("command") if isinstance(hook, dict) else None
                if isinstance(cmd, str) and cmd not in found:
                    found.append(cmd)
    return found


def entry_points(env: Mapping[str, str], plugin_root: Path | None, codex_home: Path) -> list[Probe]:
    probes = []
    on_path = shutil.which("agentmsg", path=env.get("PATH"))
    probes.append(probe_cli("PATH CLI", on_path, env) if on_path
                  else Probe("PATH CLI", "agentmsg", False, error="not on PATH"))
    if plugin_root is not None:
        probes.append(probe_cli("plugin launcher", str(plugin_root / "bin" / "agentmsg"), env))
        claude_env = dict(env, CLAUDE_PLUGIN_ROOT=str(plugin_root))
        for cmd in _hook_commands(plugin_root / "hooks" / "hooks.json")[:1]:
            probes.append(probe_hook("Claude hook (plugin)", cmd, claude_env))
    copies = sorted(codex_home.glob("plugins/cache/*/agentmsg/*/hooks/codex-hooks.json"))
    if not copies and plugin_root is not None:
        copies = [plugin_root / "hooks" / "codex-hooks.json"]
    for hooks_file in copies:
        copy = hooks_file.parents[1]
        codex_env = dict(env, PLUGIN_ROOT=str(copy), CLAUDE_PLUGIN_ROOT=str(copy))
        for cmd in _hook_commands(hooks_file)[:1]:
            probes.append(probe_hook(f"Codex hook (plugin at {copy})", cmd, codex_env))
    for cmd in _hook_commands(codex_home / "hooks.json"):
        if installer.HOOK_MARK in cmd:
            probes.append(probe_hook("Codex hook (user hooks.json)", cmd, env))
            break
    return probes


def disagreements(probes: list[Probe]) -> list[str]:
    ok = [p for p in probes if p.ok]
    warnings = [f"{p.name} did not answer: {p.error}" for p in probes if not p.ok]
    for field, what in (("version", "versions"), ("root", "state roots")):
        values = {getattr(p, field) for p in ok}
        if len(values) > 1:
            detail = "; ".join(f"{p.name}: {getattr(p, field)}" for p in ok)
            warnings.append(f"entry points disagree on {what}: {detail}")
    return warnings


def run(env: Mapping[str, str], root: str) -> dict[str, Any]:
    home = env.get("HOME")
    codex_home = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else installer.default_codex_home(home)
    probes = entry_points(env, installer.plugin_root(), codex_home)
    this = Probe("this process", "agentmsg doctor", True, TOOL, sys.executable, root,
                 str(Path(__file__).resolve().parent))
    probes.insert(0, this)
    return {"probes": [asdict(p) for p in probes], "warnings": disagreements(probes),
            "adapters": installer.detect(home=home, codex_home=codex_home)}
