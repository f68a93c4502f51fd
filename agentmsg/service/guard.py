"""``agentmsg guard``: git pre-commit and pre-push hooks that refuse what another participant holds (docs/CLAIMS.md).

``install`` writes a small shim into the repository's hooks folder for each of the two hooks.  An existing hook
that is not ours is kept beside it as ``<hook>.agentmsg-chained`` and run first (with the same arguments and
stdin): it is chained, never overwritten.  ``uninstall`` puts it back.  The shim runs ``agentmsg guard check``,
which acts for the identity in its environment, resolved as every command resolves it (an agent's shell: that
session); with none (a person's terminal) it refuses just the same.  ``AGENTMSG_GUARD=off`` bypasses it, and
says so on stderr and in ROOT/hooks.log.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from agentmsg import fsio, records
from agentmsg.domain import claims
from agentmsg.domain.values import Pin
from agentmsg.errors import AgentmsgError, Conflict, UsageError
from agentmsg.runtime import gitrepo
from agentmsg.service.claims import repository
from agentmsg.service.context import Ctx

Payload = dict[str, Any]
HOOKS = ("pre-commit", "pre-push")
MARK = "# agentmsg-guard: written by `agentmsg guard install`; `agentmsg guard uninstall` removes it"
CHAINED = ".agentmsg-chained"


def _shim(hook: str, python: str) -> str:
    return f"""#!/bin/sh
{MARK}
# Runs the hook this one replaced first (kept as {hook}{CHAINED}), then agentmsg's claim check.
here=$(dirname "$0")
input=
[ {hook} = pre-push ] && input=$(cat)  # pre-commit's stdin may be a terminal: never read
if [ -x "$here/{hook}{CHAINED}" ]; then
  printf '%s\\n' "$input" | "$here/{hook}{CHAINED}" "$@" || exit $?
fi
printf '%s\\n' "$input" | exec {_quote(python)} -m agentmsg guard check {hook}
"""


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _ours(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return MARK in fh.read(4096)
    except OSError:
        return False


def install(cwd: str | None = None) -> Payload:
    """Write the shims through ``fsio.write_outside`` (nothing below the hooks folder is followed); an existing
    hook is copied beside them, then replaced: chained, never lost.  A symlinked hook is refused (exit 12)."""
    repo = repository(cwd)
    folder = gitrepo.hooks_dir(repo.top)
    if folder is None:
        raise UsageError("git did not name this repository's hooks folder")
    done = {}
    for hook in HOOKS:
        path = os.path.join(folder, hook)
        if os.path.islink(path):
            from agentmsg.errors import UnsafePath

            raise UnsafePath(f"{path} is a symlink: agentmsg guard does not replace it (chain it by hand, or remove "
                             "the link); nothing was written")
        kept = os.path.exists(path) and not _ours(path)
        if kept:
            with open(path, "rb") as fh:
                fsio.write_outside(folder, hook + CHAINED, fh.read(), mode=0o755)  # chained, never overwritten
        fsio.write_outside(folder, hook, _shim(hook, sys.executable).encode(), mode=0o755)
        os.chmod(path, 0o755)
        done[hook] = "chained the existing hook" if kept else "written"
    return {"repo": repo.key, "top": repo.top, "hooks_dir": folder, "hooks": done}


def uninstall(cwd: str | None = None) -> Payload:
    repo = repository(cwd)
    folder = gitrepo.hooks_dir(repo.top) or ""
    done = {}
    for hook in HOOKS:
        path = os.path.join(folder, hook)
        if not _ours(path):
            done[hook] = "not ours: left alone" if os.path.exists(path) else "absent"
            continue
        chained = path + CHAINED
        if os.path.isfile(chained) and not os.path.islink(chained):
            with open(chained, "rb") as fh:
                fsio.write_outside(folder, hook, fh.read(), mode=0o755)  # over the shim: the chained hook is back
            os.unlink(chained)
            done[hook] = "removed; the chained hook is back"
        else:
            os.unlink(path)
            done[hook] = "removed"
    return {"repo": repo.key, "top": repo.top, "hooks_dir": folder, "hooks": done}


def check(ctx: Ctx, hook: str, stdin: str, cwd: str | None = None) -> Payload:
    """Refuse (Conflict, exit 5) a commit or push touching a path someone else holds exclusively."""
    if hook not in HOOKS:
        raise UsageError(f"guard check: expected one of {', '.join(HOOKS)}")
    if ctx.env.get("AGENTMSG_GUARD", "").lower() == "off":
        _log(ctx, f"guard {hook}: AGENTMSG_GUARD=off, claims not checked")
        sys.stderr.write(f"agentmsg guard: AGENTMSG_GUARD=off: {hook} not checked against claims (logged)\n")
        return {"hook": hook, "checked": False, "bypassed": True}
    repo = repository(cwd)
    paths = gitrepo.staged(repo.top) if hook == "pre-commit" else gitrepo.pushed(repo.top, stdin)
    who = _who(ctx)
    now = time.time()
    for cid in ctx.store.collabs():
        try:
            held = claims.live(claims.fold(ctx.store.events(cid)), now)
        except (AgentmsgError, OSError, ValueError, KeyError, TypeError):
            continue
        for c in held:
            if not c.exclusive or c.repo != repo.key or (who is not None and c.pin == str(who)):
                continue
            hit = next((p for p in paths if claims.covers(c.pattern, p)), None)
            if hit is not None:
                raise Conflict(f"agentmsg guard: {hit} is claimed exclusively by {c.alias} ({c.pin}) as {c.pattern}"
                               f"{f' ({c.reason})' if c.reason else ''} until {claims.until(c.expires_at)}; "
                               f"{hook} refused (ask them: agentmsg send --collab {cid} --to {c.alias} ...; "
                               "AGENTMSG_GUARD=off bypasses this, logged)")
    return {"hook": hook, "checked": True, "paths": len(paths), "as": str(who) if who else None}


def _who(ctx: Ctx) -> Pin | None:
    try:
        return ctx.who(None)
    except AgentmsgError:
        return None  # a person's terminal: every claim is someone else's


def _log(ctx: Ctx, what: str) -> None:
    root = str(ctx.root)
    if os.path.isdir(root):
        from agentmsg.backends.file import layout

        fsio.append(os.path.join(root, layout.HOOKS_LOG), f"{records.now_utc()} {what}\n".encode(), durable=False)
