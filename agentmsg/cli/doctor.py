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

from agentmsg import PACKAGE_DIR, TOOL
from agentmsg.hosts import install as installer
from agentmsg.hosts import registry

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


def entry_points(env: Mapping[str, str], plugin_root: Path | None) -> list[Probe]:
    """Each entry point, run the way its caller runs it (see :func:`report`)."""
    probes: list[Probe] = report(env, plugin_root)["_probes"]
    return probes


def _launchers(found: list[dict[str, Any]], plugin_root: Path | None) -> list[Path]:
    roots = [Path(c["root"]) for c in found if c["root"]]
    if plugin_root is not None and (plugin_root / "bin" / "agentmsg").is_file():
        roots.append(plugin_root)
    return [r / "bin" / "agentmsg" for r in dict.fromkeys(roots) if (r / "bin" / "agentmsg").is_file()]


def report(env: Mapping[str, str], plugin_root: Path | None) -> dict[str, Any]:
    """One verdict: which copies exist, which ones each host runs, and what each entry point resolves.

    Errors: a host that would run agentmsg's hooks more than once (two copies enabled), an enabled copy
    whose hook does not answer, and entry points that disagree on version or state root.  Not errors:
    no ``agentmsg`` on PATH when a plugin launcher is there (some hosts never put it on PATH), a disabled copy.
    """
    found = installer.copies_env(env)
    errors = installer.duplicates(found)
    notes: list[str] = []
    cautions = [_working_tree(c) for c in found if c["root"] and _is_working_tree(Path(c["root"]))]
    probes: list[Probe] = []
    copies_out = []
    for copy in found:
        name = f"{copy['host']} {copy['kind']} {copy['id']}"
        hook = None
        if copy["root"] is None:
            problem = f"{name}: the host lists it, but its files are missing"
            (errors if copy["enabled"] else notes).append(problem)
        else:
            commands = [copy["command"]] if copy.get("command") else _hook_commands(Path(copy["hooks_file"]))
            if commands:
                hook = probe_hook(f"{name} hook", commands[0], dict(env, **copy["env"]))
                probes.append(hook)
                if not hook.ok:
                    (errors if copy["enabled"] else notes).append(f"{hook.name} did not answer: {hook.error}")
        if not copy["enabled"]:
            notes.append(f"{name} is installed but not enabled: its hooks do not run")
        copies_out.append({k: copy[k] for k in ("host", "kind", "id", "root", "enabled")}
                          | {"runs_hooks": copy["enabled"], "hook": asdict(hook) if hook else None})
    launchers = _launchers(found, plugin_root)
    for launcher in launchers:
        probe = probe_cli(f"launcher {launcher}", str(launcher), env)
        probes.append(probe)
        if not probe.ok:
            errors.append(f"{probe.name} did not answer: {probe.error}")
    on_path = shutil.which("agentmsg", path=env.get("PATH"))
    if on_path:
        probe = probe_cli("PATH CLI", on_path, env)
        probes.append(probe)
        if not probe.ok:
            errors.append(f"PATH CLI {on_path} did not answer: {probe.error}")
    elif launchers:
        notes.append("no agentmsg on PATH: fine, the plugin launcher answers (a host that puts the plugin's bin/ "
                     "on its shell's PATH finds it there; the others' hook text names it by its absolute path)")
    else:
        notes.append("no agentmsg on PATH and no plugin launcher")
    if not found:
        notes.append("no host runs agentmsg's hooks (no plugin enabled, no `agentmsg install HOST`)")
    for host in registry.all_hosts():
        note = host.doctor_note([c for c in found if c["host"] == host.name and c["enabled"]])
        if note:
            notes.append(note)
    answered = [p for p in probes if p.ok]
    return {"copies": copies_out, "_probes": probes, "errors": errors, "notes": notes, "answered": answered,
            "cautions": cautions}


def _is_working_tree(root: Path) -> bool:
    """A git checkout (``.git`` is a folder, or a file in a ``git worktree``), where a host runs the files in place."""
    return (root / ".git").exists()


def _working_tree(copy: dict[str, Any]) -> str:
    """Issue 30: a host that runs a plugin from a clone changes with every pull and breaks when it is deleted."""
    return (f"{copy['host']} {copy['kind']} {copy['id']} runs from a git working tree ({copy['root']}): pulling "
            "there changes the installed agentmsg, deleting it breaks it; install from a copy you keep for it, "
            "or a wheel (README, Install)")


def disagreements(probes: list[Probe]) -> list[str]:
    ok = [p for p in probes if p.ok]
    warnings = []
    for field, what in (("version", "versions"), ("root", "state roots")):
        values = {getattr(p, field) for p in ok}
        if len(values) > 1:
            detail = "; ".join(f"{p.name}: {getattr(p, field)}" for p in ok)
            warnings.append(f"entry points disagree on {what}: {detail}")
    return warnings


def run(env: Mapping[str, str], root: str) -> dict[str, Any]:
    found = report(env, installer.plugin_root())
    this = Probe("this process", "agentmsg doctor", True, TOOL, sys.executable, root,
                 str(Path(PACKAGE_DIR).resolve()))
    probes = [this, *found["_probes"]]
    errors = [*found["errors"], *disagreements(probes)]
    return {"verdict": "error" if errors else "ok", "errors": errors, "notes": found["notes"],
            "cautions": found["cautions"],
            "copies": found["copies"], "probes": [asdict(p) for p in probes], "warnings": errors,
            "adapters": installer.detect_env(env)}
