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
    return hook.output(_within_cap(hook, lines)), _nothing


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
