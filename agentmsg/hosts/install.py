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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import ModuleType

from agentmsg import PACKAGE_DIR, fsio
from agentmsg.errors import UsageError
from agentmsg.hosts.base import run_host_cli

HOOK_MARK = "# agentmsg-managed-hook"
SKILL_MARK = "<!-- agentmsg-managed: written by `agentmsg install codex`; `agentmsg uninstall codex` removes it -->"
EVENTS = {"SessionStart": 15, "UserPromptSubmit": 15, "Stop": 60}  # event -> timeout (seconds)
#: Tool events (docs/CLAIMS.md): event -> (hooks/run mode, matcher or None, timeout): claims refused before a
#: tool runs, and collision notices after an apply_patch.
TOOL_EVENTS = {"PreToolUse": ("pretool", None, 15), "PostToolUse": ("edited", "apply_patch", 15)}
_TOOL_MODES = tuple(f" codex {mode}" for mode, _m, _t in TOOL_EVENTS.values())
HOSTS = ("claude", "codex", "gemini", "copilot", "opencode")


def plugin_root() -> Path | None:
    """The plugin files this package runs with: its checkout (``hooks/run`` next to the package), else the
    copy shipped inside an installed wheel (``agentmsg/_plugin/``), else None."""
    here = Path(PACKAGE_DIR).resolve()
    for root in (here.parent, here / "_plugin"):
        if (root / "hooks" / "run").is_file() and (root / "skills" / "agentmsg").is_dir():
            return root
    return None


def cli_path() -> str | None:
    """The absolute path of the ``agentmsg`` console script running now (a pip/pipx/uv install), if any."""
    import shutil
    import sys

    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "agentmsg" and os.path.isfile(argv0):
        return os.path.abspath(argv0)
    near = Path(sys.executable).parent / "agentmsg"
    return str(near) if near.is_file() else shutil.which("agentmsg")


def plugin_files(*, need: str | os.PathLike[str] = "", what: str = "hook files", where: str = "",
                 hint: str = "") -> Any:
    """This copy's plugin folder (``hooks/run`` and the rest; a ``pathlib.Path``), or a usage error saying
    how to get it.  ``need``: a file the host's install copies from it."""
    root = plugin_root()
    if root is None or (need and not (root / need).is_file()):
        raise UsageError(f"this agentmsg has no {what} (neither a plugin checkout nor a wheel with "
                         f"agentmsg/_plugin{where}); reinstall it{hint}")
    return root


def wheel_cli(root: Any) -> str | None:
    """Inside a wheel, the console script the hook text names for the CLI; None in a plugin checkout."""
    return cli_path() if root.name == "_plugin" else None


def _home(home: str | os.PathLike[str] | None) -> Path:
    return Path(home) if home is not None else Path(os.path.expanduser("~"))


def _quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


def hook_command(root: Path, cli: str | None = None, mode: str = "") -> str:
    """The user-level hook command; ``cli`` (the CLI to name in hook text) when it is not ``root/bin/agentmsg``;
    ``mode``: ``hooks/run``'s second word (``pretool``, ``edited``)."""
    prefix = f"AGENTMSG_CLI={_quote(cli)} " if cli else ""
    return f"{prefix}/bin/sh {_quote(str(root / 'hooks' / 'run'))} codex {mode + ' ' if mode else ''}{HOOK_MARK}"


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


HOOKS_JSON = "hooks.json"  # in the Codex home
SKILL_REL = ".agents/skills/agentmsg/SKILL.md"  # in the home folder


def _json_bytes(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, indent=2) + "\n").encode()


def install_codex(codex_home: str | os.PathLike[str], plugin_root: str | os.PathLike[str], *,
                  home: str | os.PathLike[str] | None = None, cli: str | None = None) -> dict[str, Any]:
    """Write our user-level Codex hooks and the skill; running it again changes nothing.

    Refused (``Conflict``) when agentmsg is already enabled as a Codex plugin:
    both copies' hooks would run, so every message would be shown twice.  A
    previous copy of our own user-level hooks is replaced, never duplicated.
    ``cli``: the command hook text names (default: ``<plugin_root>/bin/agentmsg``).

    Returns ``{"hooks_file", "hooks": [events], "command", "skill_file",
    "skill": "written"|"unchanged"|"left alone (not ours)", "note"}``.
    """
    from agentmsg.errors import Conflict

    root = Path(plugin_root).resolve()
    if not (root / "hooks" / "run").is_file() or not (root / "skills" / "agentmsg" / "SKILL.md").is_file():
        raise UsageError(f"{root} is not an agentmsg plugin checkout (hooks/run and skills/agentmsg/SKILL.md)")
    plugins = [p["id"] for p in _codex_plugins(Path(codex_home) / "config.toml") if p["enabled"]]
    if plugins:
        raise Conflict(f"agentmsg is already installed as the Codex plugin {plugins[0]} "
                       f"({Path(codex_home) / 'config.toml'}); a second copy would run every hook twice. "
                       f"Keep the plugin (nothing to do), or remove it first: codex plugin remove {plugins[0]}")
    hooks_file = Path(codex_home) / HOOKS_JSON
    doc = _read_hooks(hooks_file)
    before = json.dumps(doc, sort_keys=True)
    _strip_ours(doc)
    command = hook_command(root, cli)
    for event, timeout in EVENTS.items():
        groups = doc["hooks"].setdefault(event, [])
        groups.append({"hooks": [{"type": "command", "command": command, "timeout": timeout}]})
    for event, (mode, matcher, timeout) in TOOL_EVENTS.items():
        entry: dict[str, Any] = {"matcher": matcher} if matcher else {}
        entry["hooks"] = [{"type": "command", "command": hook_command(root, cli, mode), "timeout": timeout}]
        doc["hooks"].setdefault(event, []).append(entry)
    skill_file = _home(home) / SKILL_REL
    text = (root / "skills" / "agentmsg" / "SKILL.md").read_text(encoding="utf-8").rstrip("\n")
    text += f"\n\n{SKILL_MARK}\n"
    have = _read(skill_file) if skill_file.exists() else None
    skill = ("left alone (not ours)" if have is not None and SKILL_MARK.encode() not in have
             else "unchanged" if have == text.encode() else "written")
    writes = [(Path(codex_home), HOOKS_JSON, _json_bytes(doc))] if json.dumps(doc, sort_keys=True) != before else []
    if skill == "written":
        writes.append((_home(home), SKILL_REL, text.encode()))
    for base, rel, _data in writes:  # every target checked before any is written: a refusal writes nothing
        fsio.check_outside(base, rel)
    for base, rel, data in writes:
        fsio.write_outside(base, rel, data)
    return {"hooks_file": str(hooks_file), "hooks": [*EVENTS, *TOOL_EVENTS], "command": command,
            "skill_file": str(skill_file), "skill": skill,
            "note": "Codex runs these hooks once they are trusted in its /hooks screen"}


def uninstall_codex(codex_home: str | os.PathLike[str], *,
                    home: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Remove exactly what ``install_codex`` wrote.

    Returns ``{"hooks_file", "removed_hooks": n, "skill_file", "skill":
    "removed"|"absent"|"left alone (not ours)"}``.  A hooks file left with no
    hooks at all is deleted.
    """
    hooks_file = Path(codex_home) / HOOKS_JSON
    removed = 0
    if hooks_file.exists():
        doc = _read_hooks(hooks_file)
        removed = _strip_ours(doc)
        if removed and doc == {"hooks": {}}:
            hooks_file.unlink()
        elif removed:
            fsio.write_outside(codex_home, HOOKS_JSON, _json_bytes(doc))
    skill_file = _home(home) / SKILL_REL
    if not skill_file.exists():
        skill = "absent"
    elif SKILL_MARK.encode() in _read(skill_file):
        skill_file.unlink()
        _rmdir_empty(skill_file.parent, skill_file.parent.parent, skill_file.parents[2])  # ours, or left empty
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
    from agentmsg.hosts import cliinstall as hostinstall

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
        **hostinstall.detect(_host_env(h)),
        "opencode": _opencode().detect(_opencode_env(h)),
    }


def detect_env(env: Mapping[str, str]) -> dict[str, Any]:
    """:func:`detect` for the homes ``env`` names (callers outside ``hosts/`` never name a host's folder)."""
    return detect(home=env.get("HOME"), codex_home=env.get("CODEX_HOME") or None)


def copies_env(env: Mapping[str, str]) -> list[dict[str, Any]]:
    """:func:`copies` for the homes ``env`` names."""
    return copies(home=env.get("HOME"), codex_home=env.get("CODEX_HOME") or None)


def _opencode() -> ModuleType:
    from agentmsg.hosts import opencode_files as opencode

    return opencode


def _opencode_env(home: Path) -> dict[str, str]:
    """This environment with ``home`` as HOME (OpenCode's folders follow XDG_CONFIG_HOME, else HOME)."""
    return dict(os.environ, HOME=str(home))


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


def _rmdir_empty(*dirs: Path) -> None:
    """Remove each directory that is empty, in order (children before parents); others stay."""
    for d in dirs:
        try:
            d.rmdir()
        except OSError:
            pass  # not empty, or not there


def _hook_root(command: str) -> Path | None:
    """The plugin root a hook command runs (``.../hooks/run``), from its shell words."""
    import shlex

    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return None
    for word in words:
        if word.endswith("/hooks/run"):
            return Path(word).parents[1]
    return None


def _claude_root(home: Path, mkt: str, install_path: str | None) -> str | None:
    """Where Claude Code runs the plugin from: a local-directory marketplace is run in place (its
    ``CLAUDE_PLUGIN_ROOT`` is the clone itself); any other marketplace from its cache copy."""
    known = _load(home / ".claude" / "plugins" / "known_marketplaces.json") or {}
    entry = known.get(mkt) if isinstance(known, dict) else None
    source = entry.get("source") if isinstance(entry, dict) else None
    if isinstance(source, dict) and source.get("source") == "directory" and isinstance(source.get("path"), str):
        base = Path(source["path"])
        doc = _load(base / ".claude-plugin" / "marketplace.json") or {}
        for plugin in doc.get("plugins", []) if isinstance(doc, dict) else []:
            if isinstance(plugin, dict) and plugin.get("name") == "agentmsg" and isinstance(plugin.get("source"), str):
                return os.path.normpath(base / str(plugin["source"]))
        return str(base)
    return install_path


def copies(*, home: str | os.PathLike[str] | None = None,
           codex_home: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Every copy of agentmsg's hooks a host knows about, from the hosts' user-level files.

    Each: ``{"host", "kind": "plugin"|"user hooks", "id", "root", "data", "enabled", "hooks_file", "env"}``:
    ``root`` is the folder the host runs the hooks from, ``env`` the variables the host gives them.
    A copy with ``enabled`` true runs on every event (Codex: once its hooks are trusted).
    """
    h = _home(home)
    chome = Path(codex_home) if codex_home is not None else default_codex_home(h)
    found: list[dict[str, Any]] = []
    settings = _load(h / ".claude" / "settings.json") or {}
    enabled = settings.get("enabledPlugins") if isinstance(settings, dict) else None
    enabled = enabled if isinstance(enabled, dict) else {}
    installed = _load(h / ".claude" / "plugins" / "installed_plugins.json") or {}
    plugins = installed.get("plugins") if isinstance(installed, dict) else None
    plugins = plugins if isinstance(plugins, dict) else {}
    for pid in sorted({str(k) for k in [*enabled, *plugins] if str(k).startswith("agentmsg@")}):
        mkt = pid.split("@", 1)[1]
        entries = plugins.get(pid)
        path = next((e.get("installPath") for e in entries if isinstance(e, dict)), None) \
            if isinstance(entries, list) else None
        root = _claude_root(h, mkt, path if isinstance(path, str) else None)
        data = str(h / ".claude" / "plugins" / "data" / f"agentmsg-{mkt}")
        found.append({"host": "claude", "kind": "plugin", "id": pid, "root": root, "data": data,
                      "enabled": enabled.get(pid) is True, "cache": path,
                      "hooks_file": str(Path(root) / "hooks" / "hooks.json") if root else None,
                      "env": {"CLAUDE_PLUGIN_ROOT": root or "", "CLAUDE_PLUGIN_DATA": data}})
    for plugin in _codex_plugins(chome / "config.toml"):
        mkt = plugin["id"].split("@", 1)[1]
        cached = sorted(p for p in (chome / "plugins" / "cache" / mkt / "agentmsg").glob("*") if p.is_dir())
        root = str(cached[-1]) if cached else None
        data = str(chome / "plugins" / "data" / f"agentmsg-{mkt}")
        found.append({"host": "codex", "kind": "plugin", "id": plugin["id"], "root": root, "data": data,
                      "enabled": plugin["enabled"], "cache": root,
                      "hooks_file": str(Path(root) / "hooks" / "codex-hooks.json") if root else None,
                      "env": {"PLUGIN_ROOT": root or "", "PLUGIN_DATA": data,
                              "CLAUDE_PLUGIN_ROOT": root or "", "CLAUDE_PLUGIN_DATA": data}})
    hooks = _load(chome / "hooks.json")
    commands = sorted({
        hook["command"] for groups in (hooks.get("hooks", {}) if isinstance(hooks, dict) else {}).values()
        if isinstance(groups, list) for g in groups if isinstance(g, dict)
        for hook in (g.get("hooks") or []) if _ours(hook)
        and not str(hook["command"]).rstrip()[:-len(HOOK_MARK)].rstrip().endswith(_TOOL_MODES)
    })  # one copy per delivery command; its tool hooks (TOOL_EVENTS) are the same copy's
    for command in commands:
        hook_root = _hook_root(command)
        found.append({"host": "codex", "kind": "user hooks", "id": "agentmsg install codex",
                      "root": str(hook_root) if hook_root else None, "data": None, "enabled": True, "cache": None,
                      "hooks_file": str(chome / "hooks.json"), "command": command, "env": {}})
    from agentmsg.hosts import cliinstall as hostinstall
    from agentmsg.hosts import opencode_files as opencode

    return found + hostinstall.copies(_host_env(h)) + opencode.copies(_opencode_env(h))


def _host_env(home: Path) -> dict[str, str]:
    """What Gemini and Copilot look up: HOME, and COPILOT_HOME when it is set."""
    env = {"HOME": str(home)}
    if os.environ.get("COPILOT_HOME"):
        env["COPILOT_HOME"] = os.environ["COPILOT_HOME"]
    return env


def duplicates(found: list[dict[str, Any]]) -> list[str]:
    """One line per host whose enabled copies would each run every hook."""
    lines = []
    for host in HOSTS:
        running = [c for c in found if c["host"] == host and c["enabled"]]
        if len(running) > 1:
            what = "; ".join(f"{c['kind']} {c['id']} ({c['root']})" for c in running)
            fix = {"codex": "`agentmsg uninstall codex --keep-plugin` removes the user hooks and keeps the plugin",
                   "opencode": "`agentmsg uninstall opencode` or `agentmsg uninstall opencode --project DIR` "
                               "removes one"}.get(host, "`claude plugin uninstall` all but one")
            lines.append(f"{host}: agentmsg is installed {len(running)} times and every hook runs "
                         f"{len(running)} times: {what}; {fix}")
    return lines


def data_dir(env: Mapping[str, str]) -> Path:
    """The launcher's private folder (its venv and install log): ``${XDG_DATA_HOME:-~/.local/share}/agentmsg``."""
    base = env.get("XDG_DATA_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "share")
    return Path(base) / "agentmsg"


def cache_dir(env: Mapping[str, str]) -> Path:
    """The hooks' interpreter cache and the crash log: ``${XDG_CACHE_HOME:-~/.cache}/agentmsg``."""
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    return Path(base) / "agentmsg"


def _rmtree(path: Path, removed: list[str]) -> None:
    import shutil

    if path.is_symlink() or path.is_file():
        path.unlink()
        removed.append(str(path))
    elif path.is_dir():
        shutil.rmtree(path)
        removed.append(str(path))


def _claude_mcp_logs(env: Mapping[str, str], home: Path, removed: list[str]) -> None:
    """Claude Code's logs of the plugin's MCP server, one folder per project it ran in:
    ``${XDG_CACHE_HOME:-~/.cache}/claude-cli-nodejs/<project>/mcp-logs-plugin-agentmsg-<marketplace>``; a
    project folder left empty goes too."""
    base = Path(env.get("XDG_CACHE_HOME") or home / ".cache") / "claude-cli-nodejs"
    if not base.is_dir() or base.is_symlink():
        return
    for folder in sorted(base.glob("*/mcp-logs-plugin-agentmsg-*")):
        if folder.parent.is_symlink():
            continue
        _rmtree(folder, removed)
        _rmdir_empty(folder.parent)
    _rmdir_empty(base)


def uninstall(host: str, env: Mapping[str, str], *, codex_home: str | os.PathLike[str] | None = None,
              state_root: str | None = None, keep_plugin: bool = False, purge: bool = False) -> dict[str, Any]:
    """Remove agentmsg from ``host`` ("claude", "codex" or "all").

    * what ``agentmsg install codex`` wrote (user hooks, skill) and the empty folders left by that;
    * unless ``keep_plugin``: the host's plugin install, through the host's own CLI
      (``codex plugin remove``, ``claude plugin uninstall``, and the marketplace, if only agentmsg came
      from it), then the plugin's data folder and the empty cache folders the host leaves behind;
    * Claude Code, once no copy of the plugin is left there: its MCP logs of the plugin's server;
    * Copilot and Gemini: what their own uninstall keeps of agentmsg, where that is safe
      (``cliinstall.uninstall``);
    * once no copy is left on any host: the launcher's private venv (``data_dir``) and the hooks'
      interpreter cache (``cache_dir``);
    * ``purge``: the state root too (every message).  Otherwise the messages stay, and the result says where.

    Returns ``{"removed": [paths], "ran": [commands], "left": [what is still there and why],
    "state_root", "messages"}``.
    """
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    chome = Path(codex_home) if codex_home is not None else default_codex_home(home)
    hosts = HOSTS if host == "all" else (host,)
    removed: list[str] = []
    ran: list[str] = []
    left: list[str] = []
    if "codex" in hosts:
        out = uninstall_codex(chome, home=home)
        if out["removed_hooks"]:
            removed.append(f"{out['hooks_file']} ({out['removed_hooks']} agentmsg hooks)")
        if out["skill"] == "removed":
            removed.append(out["skill_file"])
    if "opencode" in hosts:
        done = _opencode().uninstall(env)
        removed += [done[f"{k}_file"] for k in ("plugin", "skill") if done[k] == "removed"]
    found = copies(home=home, codex_home=chome)
    if not keep_plugin:
        from agentmsg.hosts import cliinstall as hostinstall

        for other in ("gemini", "copilot"):
            if other in hosts:
                done_, left_ = hostinstall.uninstall(other, env, removed)
                ran += done_
                left += left_
        for copy in [c for c in found if c["host"] in hosts and c["host"] in ("claude", "codex")
                     and c["kind"] == "plugin"]:
            pid = copy["id"]
            mkt = pid.split("@", 1)[1]
            if copy["host"] == "codex":
                steps = [["plugin", "remove", pid]]
                others = [p for p in _codex_plugins(chome / "config.toml") if p["id"].endswith("@" + mkt)]
                if len(others) <= 1:
                    steps.append(["plugin", "marketplace", "remove", mkt])
                host_env = dict(env, CODEX_HOME=str(chome))
            else:
                steps = [["plugin", "uninstall", pid], ["plugin", "marketplace", "remove", mkt]]
                host_env = dict(env)
            done = True
            for args in steps:
                ok, detail = run_host_cli(copy["host"], args, host_env)
                line = f"{copy['host']} {' '.join(args)}"
                (ran if ok else left).append(line if ok else f"{line}: not done ({detail}); run it yourself")
                done = done and ok
            if copy["data"]:
                _rmtree(Path(copy["data"]), removed)
            base = (home / ".claude" / "plugins") if copy["host"] == "claude" else (chome / "plugins")
            if done:  # `claude plugin uninstall` leaves its cache copy of the plugin behind (2.1.328)
                _rmtree(base / "cache" / mkt / "agentmsg", removed)
            _rmdir_empty(base / "cache" / mkt / "agentmsg", base / "cache" / mkt, base / "cache",
                         base / "data", base)
    remaining = [c for c in copies(home=home, codex_home=chome) if c["enabled"]]
    if "claude" in hosts and not keep_plugin and not [c for c in remaining if c["host"] == "claude"]:
        _claude_mcp_logs(env, home, removed)
    for c in remaining:
        if c["host"] in hosts:
            left.append(f"{c['host']} {c['kind']} {c['id']} at {c['root']}")
    if not remaining:
        for folder in (data_dir(env), cache_dir(env)):
            _rmtree(folder, removed)
            if folder.parent.parent == home or folder.parent.parent.parent == home:
                _rmdir_empty(folder.parent, folder.parent.parent)  # ~/.local/share, ~/.local, ~/.cache: if empty
    else:
        users = ", ".join(f"{c['host']} {c['kind']} {c['id']}" for c in remaining)
        left.append(f"{data_dir(env)} and {cache_dir(env)} (the launcher's private environment and the hooks' "
                    f"cache): kept, still used by {users}")
    messages = "kept"
    if state_root and purge:
        _rmtree(Path(state_root), removed)
        messages = "removed (--purge)"
    elif state_root:
        messages = f"kept in {state_root} (remove them with --purge)"
    return {"hosts": list(hosts), "removed": removed, "ran": ran, "left": left, "state_root": state_root,
            "messages": messages}
