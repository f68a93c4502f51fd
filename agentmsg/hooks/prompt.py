"""UserPromptSubmit: the due messages, quoted inside the untrusted boundary, presented and never acked."""

from __future__ import annotations

from agentmsg import records
from agentmsg.backends.file.store import FileTxn
from agentmsg.hooks import wake as wakehook
from agentmsg.hooks.base import REPRESENT_AFTER, HookBase, _mark_shown, _nothing, artifact_notes, never_shown
from agentmsg.text import boundary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from agentmsg.domain.values import Page, Registry
    from agentmsg.hooks.base import Binding


def prompt(hook: HookBase, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
    work = []
    for collab, alias, reg in binds:
        with hook.txn(collab) as tx:
            st = hook.load_state(tx, alias)
            st["prompt"] += 1
            if hook._wake_step(wakehook.prompt, tx, alias, hook.pin, reg, data.get("prompt")):
                hook.busy = True  # the launcher must run every prompt and Stop: they count wakes and turns
                hook._wake_step(wakehook.turn, hook.root, hook.pin, "busy")
            page = due_page(hook, tx, alias, reg, st)
            if not page.messages:
                hook.save_state(tx, alias, st)
        work.append((collab, alias, st, page))
    rendered = render_page(hook, work)
    if rendered is None:
        return b"", _nothing
    included = set(rendered.included)
    completers = []
    for collab, alias, st, page in work:
        ids = tuple(m.id for m in page.messages if m.id in included)
        if not page.messages:
            continue
        with hook.txn(collab) as tx:
            if ids:
                completers.append(hook.claim(tx, alias, ids, records.uuid4(), durable=False))
            _mark_shown(st, [m.seq for m in page.messages if m.id in included])
            hook.save_state(tx, alias, st)

    def after() -> None:
        for complete in completers:
            complete()

    return hook.output(rendered.text), after


def due_page(hook: HookBase, tx: FileTxn, alias: str, reg: Registry, st: dict[str, Any]) -> Page:
    """The messages due at this prompt (its count already advanced), and whether the fast path stays off."""
    page = hook._due(tx, alias, st)
    hook._pending(tx, alias, reg, page.total)
    return page


def render_page(hook: HookBase, work: list[tuple[str, str, dict[str, Any], Page]]) -> boundary.Rendered | None:
    """The prompt's text for the due pages of its bindings; None when nothing is due."""
    due_all = [m for *_rest, page in work for m in page.messages]
    if not due_all:
        return None
    waiting = sum(page.total - page.skipped for *_rest, page in work)
    aliases = ", ".join(sorted({alias for _c, alias, *_ in work}))
    collabs = list(dict.fromkeys(m.collab for m in due_all))
    where = f" in collaboration {collabs[0]}" if len(collabs) == 1 else ""
    # issue 30: mail never shown before is new; "not shown in the last 5 prompts" only for mail shown before
    new = all(never_shown(st, [m.seq for m in page.messages]) for _c, _a, st, page in work)
    why = "" if new else f" and not shown in the last {REPRESENT_AFTER} prompts"

    def lead(shown: int) -> str:
        return (f"agentmsg: {waiting} {'new ' if new else ''}peer message{'s' * (waiting != 1)} for {aliases}"
                f"{where} {'are' if waiting != 1 else 'is'} unacknowledged{why}; {shown} quoted below.\n")

    return boundary.render(due_all, alias=aliases, cap=hook.cap, unit=hook.unit, lead=lead,
                           more=waiting - len(due_all), notes=artifact_notes(hook))
