"""Gemini CLI and GitHub Copilot CLI: install, uninstall, and which copies of agentmsg they run.

Both hosts install agentmsg through their own CLI, from this copy's plugin files (a checkout, or
``agentmsg/_plugin`` inside an installed wheel), and both run it in place, so the hooks run this very
package:

* Gemini: ``gemini extensions link <root> --consent``.  ``~/.gemini/extensions/agentmsg/`` then holds
  ``.gemini-extension-install.json`` (``{"source": <root>, "type": "link"}``); an extension installed by
  ``gemini extensions install <dir>`` is a copy in that folder (``"type": "local"``).
* Copilot: ``copilot plugin marketplace add <root>`` and ``copilot plugin install agentmsg@agentmsg``.
  ``$COPILOT_HOME/settings.json`` (default ``~/.copilot``) then names the marketplace's directory under
  ``extraKnownMarketplaces`` and enables ``agentmsg@agentmsg`` under ``enabledPlugins``; Copilot reads
  ``.plugin/plugin.json`` there, which names ``hooks/copilot-hooks.json``.

Not visible from these files: ``--plugin-dir`` sessions, and workspace-scoped Gemini settings.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentmsg.errors import Conflict, UsageError

NAME = "agentmsg"
PLUGIN_ID = f"{NAME}@{NAME}"


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def gemini_dir(env: Mapping[str, str]) -> Path:
    return _home(env) / ".gemini" / "extensions" / NAME


def copilot_home(env: Mapping[str, str]) -> Path:
    """``$COPILOT_HOME``, else ``~/.copilot``."""
    return Path(env["COPILOT_HOME"]) if env.get("COPILOT_HOME") else _home(env) / ".copilot"


def _load(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _gemini_copy(env: Mapping[str, str]) -> dict[str, Any] | None:
    folder = gemini_dir(env)
    if not folder.is_dir():
        return None
    meta = _load(folder / ".gemini-extension-install.json")
    meta = meta if isinstance(meta, dict) else {}
    kind = str(meta.get("type") or "unknown")
    source = meta.get("source") if isinstance(meta.get("source"), str) else None
    root = source if kind == "link" else str(folder)
    disabled = False
    enablement = _load(folder.parent / "extension-enablement.json")
    if isinstance(enablement, dict) and isinstance(enablement.get(NAME), dict):
        disabled = any(str(o).startswith("!") for o in enablement[NAME].get("overrides", []))
    return {"id": f"{NAME} ({kind})", "kind": kind, "root": root, "source": source, "enabled": not disabled}


def _copilot_copies(env: Mapping[str, str]) -> list[dict[str, Any]]:
    settings = _load(copilot_home(env) / "settings.json")
    settings = settings if isinstance(settings, dict) else {}
    enabled = settings.get("enabledPlugins")
    enabled = enabled if isinstance(enabled, dict) else {}
    markets = settings.get("extraKnownMarketplaces")
    markets = markets if isinstance(markets, dict) else {}
    found = []
    for pid in sorted(k for k in enabled if str(k).startswith(f"{NAME}@")):
        mkt = pid.split("@", 1)[1]
        entry = markets.get(mkt)
        source = entry.get("source") if isinstance(entry, dict) else None
        path = source.get("path") if isinstance(source, dict) and source.get("source") == "directory" else None
        found.append({"id": pid, "marketplace": mkt, "root": path if isinstance(path, str) else None,
                      "enabled": enabled.get(pid) is True})
    return found


def hook_command(root: str, host: str) -> str:
    return f"/bin/sh {shlex.quote(str(Path(root) / 'hooks' / 'run'))} {host}"


def copies(env: Mapping[str, str]) -> list[dict[str, Any]]:
    """Gemini's and Copilot's copies, shaped as :func:`agentmsg.hosts.install.copies` entries."""
    found: list[dict[str, Any]] = []
    gem = _gemini_copy(env)
    if gem is not None:
        root = gem["root"] if gem["root"] and (Path(gem["root"]) / "hooks" / "run").is_file() else None
        found.append({"host": "gemini", "kind": "extension", "id": gem["id"], "root": root, "data": None,
                      "enabled": gem["enabled"], "cache": None if gem["kind"] == "link" else str(gemini_dir(env)),
                      "hooks_file": str(Path(root) / "hooks" / "hooks.json") if root else None,
                      "command": hook_command(root, "gemini") if root else None, "env": {}})
    for cp in _copilot_copies(env):
        root = cp["root"] if cp["root"] and (Path(cp["root"]) / "hooks" / "run").is_file() else None
        found.append({"host": "copilot", "kind": "plugin", "id": cp["id"], "root": root, "data": None,
                      "enabled": cp["enabled"], "cache": None,
                      "hooks_file": str(Path(root) / "hooks" / "copilot-hooks.json") if root else None,
                      "command": hook_command(root, "copilot") if root else None,
                      "env": {"COPILOT_CLI": "1", "COPILOT_PLUGIN_ROOT": root or "", "PLUGIN_ROOT": root or ""}})
    return found


def detect(env: Mapping[str, str]) -> dict[str, Any]:
    """What ``doctor`` and ``delivery inspect`` report for these two hosts."""
    gem = _gemini_copy(env)
    cps = _copilot_copies(env)
    return {
        "gemini": {"extension": gem, "installed": bool(gem and gem["enabled"]),
                   "checked": [str(gemini_dir(env))],
                   "note": "the agent's shell has this session's id only when Gemini runs as `agentmsg run gemini`"},
        "copilot": {"plugin": cps, "installed": any(c["enabled"] for c in cps),
                    "checked": [str(copilot_home(env) / "settings.json")],
                    "note": "--plugin-dir sessions are not visible from here"},
    }


def _run(host: str, args: list[str], env: Mapping[str, str]) -> tuple[bool, str]:
    from agentmsg.hosts.base import run_host_cli

    return run_host_cli(host, args, env)


def install_gemini(root: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """Link this copy's extension into Gemini CLI (in place: the hooks run this package); idempotent."""
    if not (root / "gemini-extension.json").is_file():
        raise UsageError(f"{root} has no gemini-extension.json; reinstall agentmsg")
    have = _gemini_copy(env)
    if have is not None:
        if have["kind"] == "link" and have["source"] and Path(have["source"]).resolve() == root.resolve():
            return {"host": "gemini", "extension": str(gemini_dir(env)), "root": str(root), "ran": [],
                    "state": "unchanged"}
        raise Conflict(f"Gemini already has an agentmsg extension ({have['id']}, from {have['source']}); remove it "
                       f"first: gemini extensions uninstall {NAME}")
    args = ["extensions", "link", str(root), "--consent"]
    ok, detail = _run("gemini", args, env)
    if not ok:
        raise UsageError(f"gemini {' '.join(args)} failed: {detail}")
    return {"host": "gemini", "extension": str(gemini_dir(env)), "root": str(root), "ran": [f"gemini {' '.join(args)}"],
            "state": "linked",
            "note": "start Gemini as `agentmsg run gemini -- ARGS` so that its shell acts as this session"}


def install_copilot(root: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """Add this copy as a Copilot CLI marketplace and install agentmsg from it (loaded in place); idempotent."""
    if not (root / ".plugin" / "plugin.json").is_file() or not (root / ".claude-plugin" / "marketplace.json").is_file():
        raise UsageError(f"{root} has no .plugin/plugin.json or .claude-plugin/marketplace.json; reinstall agentmsg")
    mine = [c for c in _copilot_copies(env) if c["id"] == PLUGIN_ID]
    if mine and mine[0]["root"] and Path(mine[0]["root"]).resolve() == root.resolve() and mine[0]["enabled"]:
        return {"host": "copilot", "plugin": PLUGIN_ID, "root": str(root), "ran": [], "state": "unchanged"}
    if mine:
        raise Conflict(f"Copilot already has {PLUGIN_ID} from {mine[0]['root']}; remove it first: "
                       f"agentmsg uninstall copilot")
    ran = []
    for args in (["plugin", "marketplace", "add", str(root)], ["plugin", "install", PLUGIN_ID]):
        ok, detail = _run("copilot", args, env)
        if not ok:
            raise UsageError(f"copilot {' '.join(args)} failed: {detail}")
        ran.append(f"copilot {' '.join(args)}")
    return {"host": "copilot", "plugin": PLUGIN_ID, "root": str(root), "ran": ran, "state": "installed"}


def uninstall(host: str, env: Mapping[str, str], removed: list[str] | None = None) -> tuple[list[str], list[str]]:
    """Remove agentmsg from ``host`` ("gemini" or "copilot") through the host's CLI: ``(ran, left)``.

    Only what is still installed is asked for, so a second run (``uninstall all --purge`` again) has nothing to
    complain about.  Then the plugin's data folder goes (into ``removed``), and ``left`` names what the host's
    own bookkeeping keeps of agentmsg and why (issue 30: the report says exactly what remains).
    """
    if host == "gemini":
        steps = [["extensions", "uninstall", NAME]] if _gemini_copy(env) is not None else []
    else:
        ours = _copilot_copies(env)
        known = _copilot_marketplaces(env)
        steps = [["plugin", "uninstall", c["id"]] for c in ours if c["enabled"] or c["marketplace"] in known]
        steps += [["plugin", "marketplace", "remove", m] for m in dict.fromkeys(c["marketplace"] for c in ours)
                  if m in known]
    ran: list[str] = []
    left: list[str] = []
    for args in steps:
        ok, detail = _run(host, args, env)
        line = f"{host} {' '.join(args)}"
        (ran if ok else left).append(line if ok else f"{line}: not done ({detail}); run it yourself")
    left += _leftovers(host, env, removed if removed is not None else [])
    return ran, left


def _copilot_marketplaces(env: Mapping[str, str]) -> set[str]:
    settings = _load(copilot_home(env) / "settings.json")
    markets = settings.get("extraKnownMarketplaces") if isinstance(settings, dict) else None
    return {str(k) for k in markets} if isinstance(markets, dict) else set()


def _leftovers(host: str, env: Mapping[str, str], removed: list[str]) -> list[str]:
    """After the host's own uninstall: remove what it keeps of agentmsg where that is safe, and name the rest
    and why (issue 30, finding 7).

    * Copilot: the plugin's data folder, and the ``enabledPlugins`` entry ``agentmsg@agentmsg: false`` that
      ``copilot plugin uninstall`` leaves in settings.json (the rest of the file is kept as it is).
    * Gemini: ``extension_integrity.json`` is signed as a whole with a key Gemini keeps in its keychain, so
      one entry cannot be taken out; a file that holds only agentmsg's entry is deleted (Gemini reads a
      missing file as empty), any other is named with the reason.
    """
    import shutil

    from agentmsg import fsio

    out: list[str] = []
    if host == "copilot":
        data = copilot_home(env) / "plugin-data"
        for folder in sorted(data.glob(f"{NAME}*")) if data.is_dir() else []:
            if folder.is_dir() and not folder.is_symlink():
                shutil.rmtree(folder)
                removed.append(str(folder))
        if data.is_dir() and not any(data.iterdir()):
            data.rmdir()
        settings = copilot_home(env) / "settings.json"
        doc = _load(settings)
        enabled = doc.get("enabledPlugins") if isinstance(doc, dict) else None
        stale = [k for k, v in enabled.items() if str(k).startswith(f"{NAME}@") and v is not True] \
            if isinstance(enabled, dict) else []
        if isinstance(doc, dict) and isinstance(enabled, dict) and stale:
            for key in stale:
                del enabled[key]
            fsio.write_outside(settings.parent, settings.name, (json.dumps(doc, indent=2) + "\n").encode())
            removed += [f"{settings}: enabledPlugins {key} (false)" for key in stale]
    elif host == "gemini":
        integrity = _home(env) / ".gemini" / "extension_integrity.json"
        doc = _load(integrity)
        store = doc.get("store") if isinstance(doc, dict) else None
        if isinstance(store, dict) and set(store) == {NAME} and integrity.is_file() and not integrity.is_symlink():
            integrity.unlink()
            removed.append(str(integrity))
        elif isinstance(doc, dict) and NAME in json.dumps(store if isinstance(store, dict) else doc):
            out.append(f"{integrity}: Gemini's integrity record of the {NAME} extension, kept: Gemini signs the "
                       "file as a whole with its own key, so one entry cannot be removed without invalidating the "
                       "others; it runs nothing")
    return out
