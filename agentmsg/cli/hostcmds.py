"""The commands about one host: ``install HOST``, ``uninstall HOST`` and ``run gemini``.

The one module of the CLI that names hosts; each command hands over to the host's own module
(``agentmsg.hosts``).  Their options differ per host (a Codex home, an OpenCode project).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from agentmsg.cli.options import Json, Root, _ctx, _done
from agentmsg.hosts import opencode, registry


def _install(name: str, **options: str | None) -> dict[str, Any]:
    host = registry.by_name()[name]
    return host.install(_ctx(None).env, **options)


CodexHome = Annotated[str | None, typer.Option(help="Codex home (default: $CODEX_HOME, else ~/.codex).")]


def install_codex(codex_home: CodexHome = None, json_: Json = False) -> int:
    """Write agentmsg's hooks into Codex's user hooks.json and its skill; idempotent."""
    return _done("install codex", _install("codex", home=codex_home), json_)


def install_gemini(json_: Json = False) -> int:
    """Link this copy as a Gemini CLI extension (gemini extensions link); start Gemini with `agentmsg run gemini`."""
    return _done("install gemini", _install("gemini"), json_)


def install_copilot(json_: Json = False) -> int:
    """Install this copy as a Copilot CLI plugin (copilot plugin marketplace add + install); idempotent."""
    return _done("install copilot", _install("copilot"), json_)


OpencodeProject = Annotated[str | None, typer.Option(help="This project's .opencode/plugins and .agents/skills "
                                                           "instead of ~/.config/opencode.")]


def install_opencode(project: OpencodeProject = None, json_: Json = False) -> int:
    """Write agentmsg's OpenCode plugin and skill (user config, or --project); idempotent."""
    return _done("install opencode", _install("opencode", project=project), json_)


KeepPlugin = Annotated[bool, typer.Option("--keep-plugin", help="Remove only what `agentmsg install` wrote; keep "
                                                               "the host's plugin install.")]
Purge = Annotated[bool, typer.Option("--purge", help="Also delete the state root: every message.")]


def _uninstall(host: str, codex_home: str | None, keep_plugin: bool, purge: bool, root: str | None,
               json_: bool) -> int:
    """Remove what agentmsg put outside the state root for ``host`` (the messages stay unless ``purge``)."""
    from agentmsg.hosts import install as installer

    ctx = _ctx(root)
    return _done("uninstall", installer.uninstall(host, ctx.env, codex_home=codex_home, state_root=str(ctx.root),
                                                  keep_plugin=keep_plugin, purge=purge), json_)


def uninstall_codex(codex_home: CodexHome = None, keep_plugin: KeepPlugin = False, purge: Purge = False,
                    root: Root = None, json_: Json = False) -> int:
    """Remove agentmsg from Codex: user hooks, skill, the plugin install, and (if no copy is left) the caches."""
    return _uninstall("codex", codex_home, keep_plugin, purge, root, json_)


def uninstall_claude(keep_plugin: KeepPlugin = False, purge: Purge = False, root: Root = None,
                     json_: Json = False) -> int:
    """Remove agentmsg from Claude Code: the plugin install, its data, and (if no copy is left) the caches."""
    return _uninstall("claude", None, keep_plugin, purge, root, json_)


def uninstall_gemini(keep_plugin: KeepPlugin = False, purge: Purge = False, root: Root = None,
                     json_: Json = False) -> int:
    """Remove agentmsg from Gemini CLI (gemini extensions uninstall), and the caches if no copy is left."""
    return _uninstall("gemini", None, keep_plugin, purge, root, json_)


def uninstall_copilot(keep_plugin: KeepPlugin = False, purge: Purge = False, root: Root = None,
                      json_: Json = False) -> int:
    """Remove agentmsg from Copilot CLI (plugin and marketplace), and the caches if no copy is left."""
    return _uninstall("copilot", None, keep_plugin, purge, root, json_)


def uninstall_opencode(project: OpencodeProject = None, purge: Purge = False, root: Root = None,
                       json_: Json = False) -> int:
    """Remove agentmsg from OpenCode: the plugin and skill files `agentmsg install opencode` wrote."""
    if project is not None:  # only that project's two files: the user-level install and the caches stay
        return _done("uninstall", opencode.HOST.uninstall_project(_ctx(None).env, project), json_)
    return _uninstall("opencode", None, False, purge, root, json_)


def uninstall_all(codex_home: CodexHome = None, keep_plugin: KeepPlugin = False, purge: Purge = False,
                  root: Root = None, json_: Json = False) -> int:
    """Remove agentmsg from every host, its private venv and caches; messages stay unless --purge."""
    return _uninstall("all", codex_home, keep_plugin, purge, root, json_)


GeminiArgs = Annotated[list[str] | None, typer.Argument(help="Gemini CLI's own arguments, after `--`.")]


def run_gemini(args: GeminiArgs = None) -> int:
    """Start Gemini CLI (`agentmsg run gemini -- ARGS`) with a fixed --session-id, exported as GEMINI_SESSION_ID
    so that agentmsg in its shell acts as gemini:<id>."""
    from agentmsg.hosts.launch import run_gemini as launch

    return launch(args or [])


#: The groups these commands make up, as ``cli.app.GROUPS`` lists them.
GROUPS: dict[str, dict[str, Callable[..., int]]] = {
    "install": {"codex": install_codex, "gemini": install_gemini, "copilot": install_copilot,
                "opencode": install_opencode},
    "run": {"gemini": run_gemini},
    "uninstall": {"codex": uninstall_codex, "claude": uninstall_claude, "gemini": uninstall_gemini,
                  "copilot": uninstall_copilot, "opencode": uninstall_opencode, "all": uninstall_all},
}
