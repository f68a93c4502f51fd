"""Rendered ahead (docs/DELIVERY.md): the renderer prepares a session's next prompt with the hook's own code,
and folds a delivery the launcher printed from it."""

from __future__ import annotations

import os
import sys

from agentmsg import PACKAGE_DIR, __version__, records
from agentmsg.backends.file import ahead, edits, idle
from agentmsg.backends.file.derived import quietly
from agentmsg.backends.file.store import FileStore
from agentmsg.domain import kinds
from agentmsg.hooks import claimnews, prompt
from agentmsg.hooks import wake as wakehook
from agentmsg.hooks.base import HookError, LockTimeout, _mark_shown
from agentmsg.hosts import base as hostcmd
from agentmsg.runtime import artifacts, doorbell
from agentmsg.runtime import doorbell as aheadstart
from agentmsg.text import boundary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, TypeVar

    from agentmsg.backends.file.store import FileTxn
    from agentmsg.hooks.base import HookBase

    H = TypeVar("H", bound=HookBase)


def for_session(cls: type[H], root: str, pin: str, facts: Mapping[str, Any], store: FileStore) -> H:
    """The hook as the session's last full run saw it (its host, cap and CLI), for the renderer."""
    host = str(facts.get("host", ""))
    hook = cls(host, {"AGENTMSG_HOOK_CAP": str(facts.get("cap", ""))})
    hook.root, hook.pin, hook.store, hook.event = root, pin, store, "UserPromptSubmit"
    hook.cli = boundary.CLI = str(facts.get("cli") or "agentmsg")
    hook.key = str(facts.get("key", ""))
    hook.mirrored = facts.get("mirror") is not False
    return hook


def keep_ahead(hook: HookBase, bound: bool) -> None:
    """Record what the renderer needs to render this session's next prompt, and ring it (never fails)."""
    root = hook.root
    if root is None:
        return
    try:
        package = os.path.abspath(PACKAGE_DIR)
        facts = {"v": 1, "pin": hook.pin, "host": hook.host, "cap": hook.cap, "cli": hook.cli,
                 "key": ahead.launcher_key(hook.env), "python": sys.executable,
                 "hook": hostcmd.hook_script(package), "version": __version__,
                 "mirror": doorbell.mirror_wanted(root, hook.env)}
        ahead.remember(root, hook.pin, facts)
        if bound:
            if hook.event == "SessionStart":  # the prompt comes next, maybe before any renderer could look
                hook.event = "UserPromptSubmit"
                try:
                    render_ahead(hook)
                finally:
                    hook.event = "SessionStart"
            aheadstart.nudge(root, [hook.pin])
    except Exception as exc:
        hook.log(exc)


def settle_claim(hook: HookBase, *, final: bool) -> bool:
    """Fold the delivery the launcher printed for this session (``.took``) into presented receipts and
    the hook state, once.  ``final``: this is a full hook run of the same session, so the launcher is
    done with it whatever it wrote.  True while a claim is still being printed (the renderer waits)."""
    root = hook.root
    if root is None:
        return False
    try:
        ahead.refuse_planted_claim(root, hook.pin)
        with ahead.settling(root, hook.pin) as found:
            if found is None:
                return False
            if found.writer is not None:  # a renderer writing a delivery now (or one that died doing so)
                if found.stale_writer:
                    ahead.give_back(root, hook.pin)
                return False
            if not found.finished and not final:
                return True
            try:
                fold = ahead.load_fold(root, hook.pin)
                if found.end != "no" and fold is not None and fold.get("gen") == found.gen:
                    _fold(hook, fold, found.end or "cut")
            except LockTimeout:
                if not final:
                    return True  # the collaboration is busy: the renderer tries again, the claim kept
                raise
            ahead.give_back(root, hook.pin)
    except Exception as exc:  # a claim that cannot be folded: its messages come due again
        hook.log(exc)
        quietly(ahead.give_back, root, hook.pin)
    return False


def _fold(hook: HookBase, fold: Mapping[str, Any], end: str) -> None:
    """What printing a rendered delivery changes, as :meth:`prompt` would have: one more prompt per binding, a
    presented receipt per message (``ok``: marked shown, and the attempt completed), and, for a session whose
    wake consent is active, the turn that prompt started."""
    parts = fold.get("parts")
    if parts is None:
        parts = [fold]  # one binding, as a renderer before several bindings wrote it
    if not (isinstance(parts, list) and parts and all(_fold_part_ok(part) for part in parts)):
        raise HookError(f"malformed delivery fold for {hook.pin[:80]}")
    bound = {(c, a) for c, a, _r in hook._locked_call(hook.store.bound, hook.pin)}
    event, hook.event = hook.event, "UserPromptSubmit"  # the receipts say which hook showed it; put back
    try:
        for part in parts:  # each binding's attempt whole before the next: one folded already is skipped
            collab, alias = part["collab"], part["alias"]
            complete = _fold_in(hook, collab, alias, part["attempt"], part["ids"], part["seqs"], part.get("rpos"),
                                end, (collab, alias) in bound)
            if complete is not None and end == "ok":
                complete()
    finally:
        hook.event = event
    if fold.get("turn") is True and hook.root is not None:  # the prompt a wake consent counts: a turn runs
        hook._wake_step(wakehook.turn, hook.root, hook.pin, "busy")
    if hook.spec.midturn:
        quietly(idle.clear_midturn, hook.root, hook.pin)


def _fold_part_ok(part: object) -> bool:
    """One binding's share of a fold, as the renderer writes it."""
    if not isinstance(part, dict):
        return False
    ids, seqs = part.get("ids"), part.get("seqs")
    return (isinstance(part.get("collab"), str) and isinstance(part.get("alias"), str)
            and isinstance(part.get("attempt"), str) and isinstance(ids, list) and isinstance(seqs, list)
            and all(isinstance(i, str) for i in ids) and all(type(q) is int for q in seqs))


def _fold_in(hook: HookBase, collab: str, alias: str, attempt: str, ids: list[str], seqs: list[int], rpos: object,
             end: str, held: bool) -> Callable[[], None] | None:
    complete = None
    with hook.txn(collab) as tx:
        # Taken over since (another pin's state): the receipts only.  A damaged state is left to the hook.
        st = hook.load_state(tx, alias, reset=False) if held else None
        if st is not None and st.get("ahead") == attempt:
            return None  # folded already
        recorded = False
        if st is not None:
            st["prompt"] += 1
            recorded = any(r.get("attempt") == attempt for r in hook._fold_receipts(tx, alias, st))
        if ids and not recorded:
            complete = hook.claim(tx, alias, tuple(ids), attempt, durable=False)
        if st is not None:
            if end == "ok":
                _mark_shown(st, seqs)
                if type(rpos) is int:  # a retry made after the delivery was rendered still shows it again
                    later = {r.get("message") for r in tx.receipts_since(alias, rpos)[0]
                             if r.get("type") == kinds.RETRY}
                    for mid, seq in zip(ids, seqs, strict=False):
                        if mid in later:
                            st["shown"].pop(str(seq), None)
            st["ahead"] = attempt
            hook.save_state(tx, alias, st)
    return complete


def render_ahead(hook: HookBase) -> str:
    """Render what this session's next UserPromptSubmit would print, for the launcher to print without
    Python: ``ready``; ``idle`` (nothing pending: the idle marker); ``full`` (the hook must run: unbound,
    a wake consent whose count this prompt's text decides, a typed message's artifacts, news to tell; the
    ``.full`` marker says so to a launcher waiting for this render); ``busy`` (a claim exists)."""
    root, pin = hook.root or "", hook.pin
    if not ahead.take(root, pin):
        return "busy"
    try:
        got = _render_ahead(hook, root, pin)
        if got == "full":
            _full(hook, root, pin)
        return got
    except BaseException:
        ahead.drop(root, pin)  # whatever stopped it: the next prompt runs in full (and reports it)
        quietly(_full, hook, root, pin)
        raise
    finally:
        ahead.give_back(root, pin)


def _full(hook: HookBase, root: str, pin: str) -> None:
    """Tell a launcher waiting for this render that the prompt runs in full (for the generation read first)."""
    ahead.drop(root, pin)
    token = idle.idle_token_now(root, pin)
    if token is not None:
        ahead.mark_full(root, pin, token)


def _render_ahead(hook: HookBase, root: str, pin: str) -> str:
    # The generation first, before the bindings and the state (as every hook reads it): a join, takeover
    # or send after this read deletes it, and what is written below is then for a generation that is gone.
    token = hook._idle_token()
    if hook.store.replica_of is not None:
        if not hook.mirror_runs:
            return "full"  # a replica root is rendered by its mirror alone: while it runs, the root is current
    elif hook.mirrored if hook.mirrored is not None else doorbell.mirror_wanted(root, hook.env):
        return "full"  # a store to mirror, and no replica yet: the full hook starts the mirror
    binds = hook._locked_call(hook.store.bound, pin)  # in the full hook's order: the text follows it
    if token is None or not binds or edits.pending(root, pin):  # collision notices: the hook shows them
        return "full"
    if claimnews.untold(root, pin, {c: a for c, a, _r in binds})[0]:  # claims news: the hook tells it
        return "full"
    # Every binding's lock, until the pair is written (a hook-state save drops .ready: it must come after).
    # Only the renderer ever holds two (one per root), so the order cannot deadlock.
    return _locked(hook, [c for c, _a, _r in binds], lambda txs: _write_ahead(hook, root, pin, token, binds, txs))


def _locked(hook: HookBase, collabs: list[str], body: Callable[[list[FileTxn]], str],
            txs: list[FileTxn] | None = None) -> str:
    """``body`` with every collaboration's transaction open (its lock held): entered in order, left in reverse,
    as ``contextlib.ExitStack`` would, without importing it on a full hook's path."""
    txs = txs or []
    if len(txs) == len(collabs):
        return body(txs)
    with hook.txn(collabs[len(txs)]) as tx:
        return _locked(hook, collabs, body, [*txs, tx])


def _write_ahead(hook: HookBase, root: str, pin: str, token: str, binds: list[tuple[str, str, Any]],
                 txs: list[FileTxn]) -> str:
    """Under every binding's lock: the delivery and its fold written for ``token``, or why the hook runs."""
    work = []
    quiet_stop, consent = True, False
    hook.busy = False
    for (collab, alias, reg), tx in zip(binds, txs, strict=True):
        if idle.idle_token_now(root, pin) != token:
            return "full"  # changed meanwhile (rendered again at the writer's ring)
        wake = wakehook.active(tx, alias, pin, reg)
        if wake is not None:
            if wake.consecutive or wake.pending_since is not None:
                return "full"  # whether this prompt is a person's or a doorbell's decides what it records
            consent = True  # nothing to record either way; the fold notes the turn
        st = hook.load_state(tx, alias, reset=False)
        st = dict(st, shown=dict(st["shown"]))  # what this prompt would change, never saved here
        st["prompt"] += 1
        page = prompt.due_page(hook, tx, alias, reg, st)
        if any(artifacts.of(m.handoff) for m in page.messages):
            return "full"  # a typed message's artifacts are told as of the prompt, in the session's checkout
        if wake is not None or hook._envelope(tx, alias, reg) is not None:
            quiet_stop = False
        work.append((collab, alias, st, page))
    rendered = prompt.render_page(hook, work)
    if quiet_stop:  # no envelope and no wake consent: a Stop has nothing to do
        idle.mark_stop_quiet(root, pin, token)
    if rendered is None and not hook.busy and not consent:
        idle.mark_idle(root, pin, token)
        ahead.drop(root, pin)
        return "idle"
    included = set(rendered.included) if rendered is not None else set()
    parts = [{"collab": collab, "alias": alias, "attempt": records.uuid4(),
              "ids": [m.id for m in page.messages if m.id in included],
              "seqs": [m.seq for m in page.messages if m.id in included],
              "rpos": st["rpos"]}  # how far into the receipts it read: a retry after it still counts
             for collab, alias, st, page in work]
    fold: dict[str, Any] = {"v": 1, "parts": parts}
    if consent:
        fold["turn"] = True
    payload = hook.output(rendered.text) if rendered is not None else b""
    ahead.write(root, pin, token, hook.key, payload, fold)
    return "ready"
