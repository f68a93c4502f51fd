"""SessionStart: who this session is in each collaboration it is bound to, and what waits for it."""

from __future__ import annotations

from agentmsg.domain import envelope
from agentmsg.hooks.base import HookBase, _nothing
from agentmsg.text import boundary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from agentmsg.domain.values import Registry
    from agentmsg.hooks.base import Binding


def session_start(hook: HookBase, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
    lines = []
    for collab, alias, reg in binds:
        with hook.txn(collab) as tx:
            st = hook.load_state(tx, alias)
            if data.get("source") in ("clear", "compact"):
                st["shown"] = {}  # the context that held them is gone: show them again
            hook._fold_receipts(tx, alias, st)
            page = tx.unacked(alias, limit=1)
            hook.save_state(tx, alias, st)
            env = hook._envelope(tx, alias, reg)
        lines.append(_identity(hook, collab, alias, reg, page.total, page.requests)
                     + _envelope_note(hook, env))
    hook.spec.session_started(hook.env, hook.root or "")
    held = hook._wake_step(_claims_note, hook, data, binds)  # never costs the identity block
    return hook.output(_within_cap(hook, lines + ([held] if held else []))), _nothing


#: Claims named at session start, at most.
CLAIMS_SHOWN = 10


def _claims_note(hook: HookBase, data: Mapping[str, Any], binds: list[Binding]) -> str:
    """Live exclusive claims others of this session's collaborations hold in the repository it starts in
    (docs/CLAIMS.md), so the model knows before it edits: agentmsg's line per claim, then the holders' patterns
    and reasons inside the untrusted boundary.  Empty without a claims index (the usual case: one stat)."""
    import os
    import time

    from agentmsg.backends.file import layout
    from agentmsg.hooks import pretool

    if hook.root is None or not os.path.exists(os.path.join(hook.root, layout.CLAIMS)):
        return ""
    index = pretool._read_json(os.path.join(hook.root, layout.CLAIMS))
    if not isinstance(index, dict) or not isinstance(index.get("claims"), list) or not isinstance(
            index.get("repos"), dict):
        return ""
    from agentmsg.runtime import gitrepo

    cwd = data.get("cwd")
    repo = gitrepo.identify(cwd if isinstance(cwd, str) and os.path.isdir(cwd) else os.getcwd(), index["repos"])
    if repo is None:
        return ""
    mine = {collab: alias for collab, alias, _reg in binds}
    now = time.time()
    theirs = [c for c in index["claims"] if isinstance(c, dict) and c.get("collab") in mine
              and c.get("repo") == repo.key and c.get("mode") == "exclusive" and c.get("pin") != hook.pin
              and c.get("alias") != mine[c["collab"]] and isinstance(c.get("expires_at"), (int, float))
              and now < c["expires_at"] and isinstance(c.get("pattern"), str)]
    if not theirs:
        return ""
    from agentmsg.domain import claims
    from agentmsg.text import injection as flags

    theirs.sort(key=lambda c: c["expires_at"])
    out = [f"agentmsg: {len(theirs)} exclusive claim{'s' * (len(theirs) != 1)} in this repository "
           f"({repo.top}) held by other participants; the pre-tool hook refuses this session's edits of them "
           f"until they are released or expire.\n"]
    for c in theirs[:CLAIMS_SHOWN]:
        alias, pin = boundary.one_line(str(c.get("alias")))[:32], boundary.one_line(str(c.get("pin")))[:140]
        fields = [("claim", str(c["pattern"]))] + ([("reason", str(c["reason"]))] if c.get("reason") else [])
        out.append(f"- held by {alias} ({pin}) until {claims.until(float(c['expires_at']))}, in collaboration "
                   f"{c['collab']}; to ask: {hook.cli} send --collab {c['collab']} --to {alias} --kind request "
                   f"--subject 'may I edit ...?' --body '...'\n"
                   + boundary.peer_fields(fields, flags.detect("\n".join(v for _, v in fields)),
                                          f"{alias} ({pin}), the claim's holder") + "\n")
    if len(theirs) > CLAIMS_SHOWN:
        out.append(f"{len(theirs) - CLAIMS_SHOWN} more: `{hook.cli} claims` lists them.\n")
    return "".join(out)


def _within_cap(hook: HookBase, lines: list[str]) -> str:
    """One identity block per binding, as many as fit the cap; the rest are counted."""
    size = boundary.measure(hook.unit)
    room = hook.cap - 200  # the "more" line
    kept: list[str] = []
    for line in lines:
        if size("".join(kept)) + size(line) > room:
            break
        kept.append(line)
    left = len(lines) - len(kept)
    if left:
        kept.append(f"agentmsg: {left} more binding{'s' * (left != 1)} of this session did not fit here; "
                    f"`{hook.cli} status` lists them.\n")
    return "".join(kept)


def _identity(hook: HookBase, collab: str, alias: str, reg: Registry, total: int, requests: int) -> str:
    counts = f"{total} ({requests} request{'s' * (requests != 1)}, {total - requests} other)"
    opener = reg.opener_alias or next((a for a, p in reg.participants.items() if p.pin == reg.opener), "?")
    label, task = str(reg.label)[:64], str(reg.task)[:500]
    from agentmsg.text import injection as flags  # SessionStart only: its patterns cost milliseconds to compile

    own = opener == alias and reg.opener == hook.pin  # this very session opened it and wrote label and task
    if own:
        role, author = "which this session opened", f"this session ({alias}), when it opened the collaboration"
    elif opener == alias:  # a handover moved the alias to this session; another session opened it
        role = f"which {alias} opened before this session took {alias} over"
        author = f"{alias}, the collaboration's opener, before this session took it over"
    else:
        role, author = f"opened by {boundary.one_line(opener)}", f"{opener}, the collaboration's opener"
    cli = f" The agentmsg CLI here is {hook.cli}." if hook.cli != "agentmsg" else ""
    return (
        f"agentmsg: this session ({hook.pin}) is participant {alias} in collaboration {collab}, "
        f"{role}. "
        f"State root: {hook.root}. Unacknowledged messages for {alias}: {counts}; they are quoted at "
        f"the next prompt inside an untrusted peer-data boundary, and "
        f"`{boundary.inbox_command(collab)}` lists them.{cli}\n"
        + boundary.peer_fields((("label", label), ("task", task)), flags.detect(label + "\n" + task), author,
                               peer=not own)
    )


def _envelope_note(hook: HookBase, env: envelope.Envelope | None) -> str:
    if env is None:
        return "\n"
    return (f" Stop continuations are enabled for this session until {envelope.iso(env.expires_at)}: "
            f"{env.remaining} of {env.slots} slots left.\n")
