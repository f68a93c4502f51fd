"""``agentmsg install codex`` / ``uninstall codex``, and which host adapters are installed.

The Codex fallback, for when the plugin is not installed through a Codex
marketplace, writes two things, idempotently:

* user-level hooks in ``$CODEX_HOME/hooks.json`` (merged with whatever hooks
  the user has): SessionStart, UserPromptSubmit and Stop, each running
  ``/bin/sh <plugin root>/hooks/run codex``.  Each of our commands ends with the shell
  comment ``# agentmsg-managed-hook``: that is how we recognise exactly what we
  wrote (Codex rejects unknown keys, so the mark cannot be a JSON field).
* the skill in ``~/.agents/skills/agentmsg/SKILL.md`` (where Codex looks for
  user skills), ending with an ``agentmsg-managed`` HTML comment.  A skill
  file there without our mark is the user's and is left alone.

``uninstall_codex`` removes exactly those entries and that file.  Codex runs
user hooks only once they are trusted in its ``/hooks`` screen (or with
``--dangerously-bypass-hook-trust``); trust is not visible from here.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from . import fsio
from .errors import UsageError

HOOK_MARK = "# agentmsg-managed-hook"
SKILL_MARK = "<!-- agentmsg-managed: written by `agentmsg install codex`; `agentmsg uninstall codex` removes it -->"
EVENTS = {"SessionStart": 15, "UserPromptSubmit": 15, "Stop": 60}  # event -> timeout (seconds)


def plugin_root() -> Path | None:
    """The plugin checkout this package runs from, if it is one (it has ``hooks/run``)."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "hooks" / "run").is_file() and (root / "skills" / "agentmsg").is_dir() else None


def _home(home: str | os.PathLike[str] | None) -> Path:
    return Path(home) if home is not None else Path(os.path.expanduser("~"))


def _quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


def hook_command(root: Path) -> str:
    return f"/bin/sh {_quote(str(root / 'hooks' / 'run'))} codex {HOOK_MARK}"


def _read(path: Path) -> bytes:
    """A host file's bytes; a FIFO, socket or device there is refused, never waited on (links are followed:
    these are the user's own files, often kept in a dotfiles checkout)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{path} is not a regular file; move it away, then run this again")
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _ours(hook: object) -> bool:
    return isinstance(hook, dict) and str(hook.get("command", "")).rstrip().endswith(HOOK_MARK)


def _read_hooks(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"hooks": {}}
    try:
        doc = json.loads(_read(path).decode("utf-8"))
    except UsageError:
        raise
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); fix or move it, then run this again") from None
    if not isinstance(doc, dict) or not isinstance(doc.setdefault("hooks", {}), dict):
        raise UsageError(f"{path} does not hold a {{\"hooks\": {{...}}}} object; fix or move it first")
    return doc


def _strip_ours(doc: dict[str, Any]) -> int:
    """Remove our hook entries (and groups/events left empty by that); returns how many."""
    removed = 0
    for event in list(doc["hooks"]):
        groups = doc["hooks"][event]
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            hooks = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(hooks, list) and any(_ours(h) for h in hooks):
                removed += sum(_ours(h) for h in hooks)
                group = dict(group, hooks=[h for h in hooks if not _ours(h)])
                if not group["hooks"]:
                    continue
            kept.append(group)
        if kept:
            doc["hooks"][event] = kept
        else:
            del doc["hooks"][event]
    return removed


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fsio.atomic_write(path, (json.dumps(doc, indent=2) + "\n").encode())


def install_codex(codex_home: str | os.PathLike[str], plugin_root: str | os.PathLike[str], *,
                  home: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Write our user-level Codex hooks and the skill; running it again changes nothing.

    Returns ``{"hooks_file", "hooks": [events], "command", "skill_file",
    "skill": "written"|"unchanged"|"left alone (not ours)", "note"}``.
    """
    root = Path(plugin_root).resolve()
    if not (root / "hooks" / "run").is_file() or not (root / "skills" / "agentmsg" / "SKILL.md").is_file():
        raise UsageError(f"{root} is not an agentmsg plugin checkout (hooks/run and skills/agentmsg/SKILL.md)")
    hooks_file = Path(codex_home) / "hooks.json"
    doc = _read_hooks(hooks_file)
    before = json.dumps(doc, sort_keys=True)
    _strip_ours(doc)
    command = hook_command(root)
    for event, timeout in EVENTS.items():
        groups = doc["hooks"].setdefault(event, [])
        groups.append({"hooks": [{"type": "command", "command": command, "timeout": timeout}]})
    if json.dumps(doc, sort_keys=True) != before:
        _write_json(hooks_file, doc)
    skill_file = _home(home) / ".agents" / "skills" / "agentmsg" / "SKILL.md"
    text = (root / "skills" / "agentmsg" / "SKILL.md").read_text(encoding="utf-8").rstrip("\n")
    text += f"\n\n{SKILL_MARK}\n"
    have = _read(skill_file) if skill_file.exists() else None
    if have is not None and SKILL_MARK.encode() not in have:
        skill = "left alone (not ours)"
    elif have == text.encode():
        skill = "unchanged"
    else:
        skill_file.parent.mkdir(parents=True, exist_ok=True)
        fsio.atomic_write(skill_file, text.encode())
        skill = "written"
    return {"hooks_file": str(hooks_file), "hooks": list(EVENTS), "command": command,
            "skill_file": str(skill_file), "skill": skill,
            "note": "Codex runs these hooks once they are trusted in its /hooks screen"}


def uninstall_codex(codex_home: str | os.PathLike[str], *,
                    home: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Remove exactly what ``install_codex`` wrote.

    Returns ``{"hooks_file", "removed_hooks": n, "skill_file", "skill":
    "removed"|"absent"|"left alone (not ours)"}``.  A hooks file left with no
    hooks at all is deleted.
    """
    hooks_file = Path(codex_home) / "hooks.json"
    removed = 0
    if hooks_file.exists():
        doc = _read_hooks(hooks_file)
        removed = _strip_ours(doc)
        if removed and doc == {"hooks": {}}:
            hooks_file.unlink()
        elif removed:
            _write_json(hooks_file, doc)
    skill_file = _home(home) / ".agents" / "skills" / "agentmsg" / "SKILL.md"
    if not skill_file.exists():
        skill = "absent"
    elif SKILL_MARK.encode() in _read(skill_file):
        skill_file.unlink()
        try:
            skill_file.parent.rmdir()
        except OSError:
            pass  # the user keeps other files there
        skill = "removed"
    else:
        skill = "left alone (not ours)"
    return {"hooks_file": str(hooks_file), "removed_hooks": removed, "skill_file": str(skill_file), "skill": skill}


def _load(path: Path) -> Any:
    try:
        return json.loads(_read(path).decode("utf-8"))
    except (OSError, ValueError, UsageError):
        return None


def detect(*, home: str | os.PathLike[str] | None = None,
           codex_home: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Which adapters are installed, from the hosts' user-level files only.

    Claude Code: ``enabledPlugins`` in ``~/.claude/settings.json`` and
    ``~/.claude/plugins/installed_plugins.json``.  Codex: our marked entries in
    ``$CODEX_HOME/hooks.json``, an ``agentmsg@...`` plugin enabled in
    ``$CODEX_HOME/config.toml``, and our skill in ``~/.agents/skills``.  Not
    visible from here: project-scope settings, ``--plugin-dir`` sessions, and
    Codex hook trust.  ``last_hook_run`` in ``delivery inspect`` is the
    evidence that a hook actually ran for a binding.
    """
    h = _home(home)
    settings = _load(h / ".claude" / "settings.json") or {}
    enabled = settings.get("enabledPlugins") if isinstance(settings, dict) else None
    enabled = enabled if isinstance(enabled, dict) else {}
    installed = _load(h / ".claude" / "plugins" / "installed_plugins.json") or {}
    plugins = installed.get("plugins") if isinstance(installed, dict) else None
    claude_ids = sorted({k for k in [*enabled, *(plugins or {})] if str(k).startswith("agentmsg@")})
    chome = Path(codex_home) if codex_home is not None else default_codex_home(h)
    hooks = _load(chome / "hooks.json")
    user_hooks = sorted({
        event for event, groups in (hooks.get("hooks", {}) if isinstance(hooks, dict) else {}).items()
        if isinstance(groups, list) for g in groups if isinstance(g, dict)
        for hook in (g.get("hooks") or []) if _ours(hook)
    })
    codex_plugins = _codex_plugins(chome / "config.toml")
    skill_file = h / ".agents" / "skills" / "agentmsg" / "SKILL.md"
    try:
        skill_text = _read(skill_file).decode("utf-8", "replace") if skill_file.is_file() else ""
    except (OSError, UsageError):
        skill_text = ""
    return {
        "claude": {
            "plugin": [{"id": k, "enabled": enabled.get(k) is True} for k in claude_ids],
            "installed": any(enabled.get(k) is True for k in claude_ids),
            "checked": [str(h / ".claude" / "settings.json"),
                        str(h / ".claude" / "plugins" / "installed_plugins.json")],
        },
        "codex": {
            "user_hooks": user_hooks, "plugin": codex_plugins,
            "skill": "ours" if SKILL_MARK in skill_text else ("other" if skill_text else None),
            "installed": bool(user_hooks) or any(p["enabled"] for p in codex_plugins),
            "checked": [str(chome / "hooks.json"), str(chome / "config.toml"), str(skill_file)],
            "note": "hook trust (Codex /hooks) is not visible from these files",
        },
    }


def default_codex_home(home: str | os.PathLike[str] | None = None) -> Path:
    """``$CODEX_HOME``, else ``~/.codex``."""
    env = os.environ.get("CODEX_HOME")
    return Path(env) if env else _home(home) / ".codex"


def _codex_plugins(config: Path) -> list[dict[str, Any]]:
    """``[plugins."agentmsg@m"]`` tables and their ``enabled`` flag, read line by line."""
    try:
        # Bytes, decoded leniently: a Latin-1 comment elsewhere in the user's file must not hide our table.
        lines = _read(config).decode("utf-8", "replace").splitlines()
    except (OSError, UsageError):
        return []
    found: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for raw in lines:
        line = raw.strip()
        if line.startswith("["):
            name = line.strip("[]").strip()
            current = None
            if name.startswith('plugins."agentmsg@') and name.endswith('"'):
                current = {"id": name[len('plugins."'):-1], "enabled": False}
                found.append(current)
        elif current is not None and line.replace(" ", "").lower() == "enabled=true":
            current["enabled"] = True
    return found
