"""OpenCode: ``agentmsg install opencode`` / ``uninstall opencode``, and what doctor and delivery inspect see.

OpenCode has no command hooks; it loads JS plugins from
``$XDG_CONFIG_HOME/opencode/plugins/`` (default ``~/.config/opencode``) or
``<project>/.opencode/plugins/``.  The install writes, idempotently:

* ``plugins/agentmsg.js``: a copy of the repository's ``opencode/agentmsg.js``
  with the absolute path of this copy's ``hooks/run`` (and the CLI the hook
  text names) filled in.  The plugin runs that hook as ``hooks/run opencode``
  for every prompt, session start and idle, so the rendering, the cap and the
  envelope rules are the same Python code Claude Code and Codex run;
* ``skills/agentmsg/SKILL.md`` where OpenCode looks for skills
  (``<config>/skills/`` for the user, ``<project>/.agents/skills/`` for a project).

Each file carries a mark (``MARK`` / ``SKILL_MARK``); a file there without it is
the user's and is left alone, and uninstall removes exactly the marked files.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentmsg import fsio
from agentmsg.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Mapping

MARK = "agentmsg-managed-plugin"
SKILL_MARK = ("<!-- agentmsg-managed: written by `agentmsg install opencode`; "
              "`agentmsg uninstall opencode` removes it -->")
TEMPLATE = Path("opencode") / "agentmsg.js"
_HOOK_LINE = 'const HOOK = "";'
_CLI_LINE = 'const CLI = "";'


def config_dir(env: Mapping[str, str]) -> Path:
    """OpenCode's user configuration folder: ``$XDG_CONFIG_HOME/opencode``, else ``~/.config/opencode``."""
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(base) / "opencode"


def _places(env: Mapping[str, str], project: str | os.PathLike[str] | None) -> tuple[tuple[Path, str], ...]:
    """``((base, plugin path below it), (base, skill path below it))``: ``fsio.write_outside`` follows no
    link below the base (a project, or OpenCode's configuration folder)."""
    if project is not None:
        base = Path(project).resolve()
        return (base, ".opencode/plugins/agentmsg.js"), (base, ".agents/skills/agentmsg/SKILL.md")
    conf = config_dir(env)
    return (conf, "plugins/agentmsg.js"), (conf, "skills/agentmsg/SKILL.md")


def targets(env: Mapping[str, str], project: str | os.PathLike[str] | None = None) -> tuple[Path, Path]:
    """``(plugin file, skill file)`` for the user's configuration, or for ``project``."""
    (pbase, prel), (sbase, srel) = _places(env, project)
    return pbase / prel, sbase / srel


def render(root: Path, cli: str | None = None) -> str:
    """The plugin as installed: the template with this copy's hook (and CLI) filled in, as JS string literals."""
    text = (root / TEMPLATE).read_text(encoding="utf-8")
    if _HOOK_LINE not in text or _CLI_LINE not in text or MARK not in text:
        raise UsageError(f"{root / TEMPLATE} is not agentmsg's OpenCode plugin template")
    text = text.replace(_HOOK_LINE, f"const HOOK = {json.dumps(str(root / 'hooks' / 'run'))};", 1)
    return text.replace(_CLI_LINE, f"const CLI = {json.dumps(cli or str(root / 'bin' / 'agentmsg'))};", 1)


def _marked_state(path: Path, text: str, mark: str) -> str:
    """``written`` (to be), ``unchanged``, or ``left alone (not ours)`` for a file without ``mark``."""
    have = path.read_bytes() if path.is_file() else None
    if have is None and (path.exists() or path.is_symlink()):
        return "left alone (not ours)"
    if have is not None and mark.encode() not in have:
        return "left alone (not ours)"
    return "unchanged" if have == text.encode() else "written"


def install(env: Mapping[str, str], plugin_root: str | os.PathLike[str], *, cli: str | None = None,
            project: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Write the plugin and the skill; running it again changes nothing.

    Returns ``{"plugin_file", "plugin", "skill_file", "skill", "hook", "note"}``
    (``plugin``/``skill``: ``written``, ``unchanged`` or ``left alone (not ours)``).
    """
    root = Path(plugin_root).resolve()
    if not (root / "hooks" / "run").is_file() or not (root / TEMPLATE).is_file():
        raise UsageError(f"{root} has no OpenCode plugin (hooks/run and {TEMPLATE})")
    plugin_file, skill_file = targets(env, project)
    skill_text = (root / "skills" / "agentmsg" / "SKILL.md").read_text(encoding="utf-8").rstrip("\n")
    texts = (render(root, cli), f"{skill_text}\n\n{SKILL_MARK}\n")
    plugin, skill = states = tuple(_marked_state(path, text, mark) for path, text, mark
                                   in zip((plugin_file, skill_file), texts, (MARK, SKILL_MARK), strict=True))
    writes = [(base, rel, text.encode()) for (base, rel), text, state in zip(_places(env, project), texts, states,
                                                                              strict=True) if state == "written"]
    for base, rel, _data in writes:  # both checked before either is written: a refusal writes nothing
        fsio.check_outside(base, rel)
    for base, rel, data in writes:
        fsio.write_outside(base, rel, data)
    return {"plugin_file": str(plugin_file), "plugin": plugin, "skill_file": str(skill_file), "skill": skill,
            "hook": hook_command(root),
            "note": "OpenCode loads the plugin at its next start; a state root outside the project needs "
                    "\"permission\": {\"external_directory\": \"allow\"} for commands that name it"}


def uninstall(env: Mapping[str, str], project: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Remove exactly the marked plugin and skill files (and the folders that leaves empty)."""
    out: dict[str, Any] = {}
    for key, path, mark in zip(("plugin", "skill"), targets(env, project), (MARK, SKILL_MARK), strict=True):
        out[f"{key}_file"] = str(path)
        if not path.is_file():
            out[key] = "absent"
        elif mark.encode() in path.read_bytes():
            path.unlink()
            for folder in path.parents[: 3 if key == "skill" else 2]:  # each only if that left it empty
                try:
                    folder.rmdir()
                except OSError:
                    pass  # not empty
            out[key] = "removed"
        else:
            out[key] = "left alone (not ours)"
    return out


def hook_command(root: Path) -> str:
    """What the plugin runs (and what doctor probes): ``/bin/sh <root>/hooks/run opencode``."""
    return f"/bin/sh {shlex.quote(str(root / 'hooks' / 'run'))} opencode"


def installed_hook(plugin_file: Path) -> Path | None:
    """The ``hooks/run`` an installed plugin file names, if it is ours."""
    try:
        text = plugin_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if MARK not in text:
        return None
    for line in text.splitlines():
        if line.startswith("const HOOK = "):
            try:
                value = json.loads(line.removeprefix("const HOOK = ").split(";", 1)[0])
            except ValueError:
                return None
            return Path(value) if isinstance(value, str) and value else None
    return None


def detect(env: Mapping[str, str]) -> dict[str, Any]:
    """The user-level install (project installs are not visible from here)."""
    plugin_file, skill_file = targets(env)
    hook = installed_hook(plugin_file)
    try:
        skill_text = skill_file.read_bytes() if skill_file.is_file() else b""
    except OSError:
        skill_text = b""
    return {"plugin": str(plugin_file) if hook else None, "hook": str(hook) if hook else None,
            "skill": "ours" if SKILL_MARK.encode() in skill_text else ("other" if skill_text else None),
            "installed": hook is not None, "checked": [str(plugin_file), str(skill_file)],
            "note": "a project's .opencode/plugins/ is not visible from here"}


def copies(env: Mapping[str, str], project: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """The user-level plugin, and ``project``'s (default: the current folder), as copies for doctor
    (``installer.copies`` shape).  OpenCode loads both, so both would run every hook."""
    found: list[dict[str, Any]] = []
    for kind, how, plugin_file in (
            ("plugin file", "agentmsg install opencode", targets(env)[0]),
            ("project plugin file", "agentmsg install opencode --project", targets(env, project or os.getcwd())[0])):
        hook = installed_hook(plugin_file)
        if hook is None:
            continue
        root = hook.parent.parent if hook.is_file() else None
        found.append({"host": "opencode", "kind": kind, "id": how, "root": str(root) if root else None,
                      "data": None, "enabled": True, "cache": None, "hooks_file": str(plugin_file),
                      "command": hook_command(root) if root else None, "env": {}})
    return found
