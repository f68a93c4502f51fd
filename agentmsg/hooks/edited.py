"""The post-tool edit hook (docs/CLAIMS.md, "Collision notices"): two participants editing one file within a
short window, neither holding a claim on it, are both told.

``hooks/run HOST edited`` runs it after an edit tool (the hosts' hooks files match it to their edit tools only),
and only for a session that may be bound: with no ``pins/`` under the root, or a ``<session>.solo`` marker newer
than ``pins/`` (this hook writes it for a session bound to nothing), it exits before any interpreter starts.
Here:

1. the files the tool call wrote (pretool.py's ``targets``, edit tools only: a shell command is not an edit);
2. the session's collaborations (the pin index);
3. per file (its real path), this machine's recent edits (``ROOT/edits/``, backends/file/edits.py) and
   domain/collisions.py's rule: another participant of a shared collaboration edited it within the window, no
   notice for the pair was given within it, and no live claim covers the file;
4. the edit is recorded; for each collision the other session gets a notice waiting for its next prompt or
   tool call (its fast-path markers voided), and this session gets its own at once, with any left for it.

The file's path is quoted inside the untrusted boundary (it is a model's tool input).  Anything damaged fails
open, with a line in ``ROOT/hooks.log``.  Lean: stdlib and agentmsg's lean modules only.
"""

from __future__ import annotations

import os
import sys
import time

from agentmsg import records

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STDIN_MAX = 4 * 1024 * 1024
#: Files of one tool call looked at (an apply_patch may name many).
FILES_MAX = 8
#: Notices shown in one hook output.
SHOWN_MAX = 5
#: ``pins/`` must be this many seconds old before a ``.solo`` marker is written, so that "newer than pins/"
#: holds even where the shell compares whole seconds.
SOLO_SETTLE = 2.0


def main(host: str, argv: list[str] | None = None) -> int:
    """``hooks/run`` passes ``RUNTIME ROOT``; without them (``python -m``) they are looked up."""
    root = ""
    try:
        args = list(sys.argv[3:] if argv is None else argv)
        if len(args) >= 2:
            runtime, root = args[:2]
        else:
            from agentmsg.hooks import pretool

            root, runtime = pretool.state_root(), pretool.runtime_of(host)
        raw = sys.stdin.buffer.read(STDIN_MAX + 1)
        out = run(host, runtime, root, raw, time.time())
        if out:
            view = memoryview(out)
            while view:
                view = view[os.write(1, view):]
    except BaseException as exc:  # fail open: a notice is never worth a failed tool call
        _log(root, host, exc)
    return 0


def _log(root: str, host: str, exc: BaseException) -> None:
    from agentmsg.hooks import pretool

    pretool.log_failing_open(root, f"edited {host[:10]}: collisions not checked", exc)


def run(host: str, runtime: str, root: str, raw: bytes, now: float) -> bytes:
    """The hook's output for this edit (empty: nothing to say)."""
    from agentmsg.backends.file import edits, layout
    from agentmsg.domain import collisions
    from agentmsg.hooks import pretool

    if len(raw) > STDIN_MAX or not os.path.isdir(root):
        return b""
    data = records.loads(raw)
    if not isinstance(data, dict):
        raise pretool.Damaged("the hook's input is not a JSON object")
    session = data.get("session_id", data.get("sessionId"))
    if not _is_session(session):
        return b""
    pin = f"{runtime}:{session}"
    pins_dir = os.path.join(root, layout.PINS)
    mine = pretool.bindings(pins_dir, pin)
    if not mine:
        _mark_solo(root, pin, pins_dir, now)
        return b""
    notes: list[dict[str, Any]] = []
    span = collisions.window(os.environ)
    given = data.get("cwd")
    cwd = given if isinstance(given, str) else os.getcwd()
    held: list[Any] = []
    for target in edit_targets(str(data.get("tool_name") or ""), data.get("tool_input"))[:FILES_MAX]:
        path = os.path.normpath(os.path.join(cwd, target))
        real = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        others = collisions.due(edits.recent(root, real), pin=pin, mine=mine, now=now, window=span)
        if others and _claimed(root, cwd, target, held):
            others = []  # a claim covers it: the claim is the coordination (the pre-tool hook refuses the others)
        new: list[dict[str, Any]] = [{"t": now, "pin": pin, "alias": alias, "collab": collab}
                                     for collab, alias in list(mine.items())[:8]]
        new += [{"t": now, "pair": collisions.pair(pin, o["pin"])} for o in others]
        edits.add(root, real, new, keep_after=now - span)
        shown = _shown_path(real) if others else ""
        for o in others:
            collab = o["collab"]
            notes.append({"alias": o["alias"], "pin": o["pin"], "collab": collab, "path": shown})
            edits.leave_notice(root, o["pin"], {"t": now, "alias": mine[collab], "pin": pin, "collab": collab,
                                                "path": shown})
            _wake(root, o["pin"])
    notes += edits.take(root, pin)
    if not notes:
        return b""
    from agentmsg.hosts import registry  # only to speak: each host's own output shape

    return records.dumps_plain(registry.get_or_nothing(host).context("PostToolUse", render(notes, span))).encode()


def edit_targets(tool: str, given: object) -> list[str]:
    """The files an edit tool wrote (a shell command is not an edit here: its targets are guesses)."""
    from agentmsg.hooks import pretool

    if tool in pretool.SHELL_TOOLS and tool not in pretool.PATCH_TOOLS:
        return []
    return pretool.targets(tool, given)


def _claimed(root: str, cwd: str, target: str, held: list[Any]) -> bool:
    """Whether any live claim (any holder, any mode) covers the file (the claims index, read once)."""
    from agentmsg.backends.file import layout
    from agentmsg.hooks import pretool

    if not held:
        index = pretool.read_json(os.path.join(root, layout.CLAIMS))
        ok = isinstance(index, dict) and isinstance(index.get("claims"), list) and isinstance(index.get("repos"), dict)
        now = time.time()
        held.append((index if ok else {"claims": [], "repos": {}}, now))
    index, now = held[0]
    live = [c for c in index["claims"] if isinstance(c, dict) and isinstance(c.get("expires_at"), (int, float))
            and now < c["expires_at"]]
    return bool(live) and pretool.held(live, index["repos"], cwd, target) is not None


def _shown_path(real: str) -> str:
    """The file as its repository names it (relative to the working tree's top), else its absolute path."""
    from agentmsg.runtime import gitrepo

    found = gitrepo.find(os.path.dirname(real)) if os.path.isdir(os.path.dirname(real)) else None
    if found is not None and real.startswith(found[0] + "/"):
        return real[len(found[0]) + 1:]
    return real


def _wake(root: str, pin: str) -> None:
    """The other session's next prompt or tool call runs its hook in full, which shows the notice."""
    from agentmsg.backends.file import idle
    from agentmsg.backends.file.derived import quietly

    quietly(idle.wake, root, [pin])


def _mark_solo(root: str, pin: str, pins_dir: str, now: float) -> None:
    """``<session>.solo``: bound to nothing (the launcher exits early while it is newer than ``pins/``)."""
    from agentmsg import fsio
    from agentmsg.backends.file import layout

    try:
        changed = os.stat(pins_dir).st_mtime
    except FileNotFoundError:
        return  # no pins/: the launcher exits early anyway
    path = layout.marker_file(root, pin, layout.SOLO)
    if path is None or changed > now - SOLO_SETTLE:
        return  # a join just now may not be visible yet: no marker, the next edit looks again
    fsio.ensure_dir(root, layout.IDLE, os.path.basename(os.path.dirname(path)))
    fsio.atomic_write(path, b"", durable=False)


def render(notes: list[dict[str, Any]], span: float) -> str:
    """agentmsg's lines (who, in which collaboration, the command to ask), then each file's path inside the
    untrusted boundary (a model's tool input wrote it)."""
    from agentmsg.text import boundary, injection

    out = [f"agentmsg (collision notice): another participant edited the same file as this session within "
           f"{int(span)} s, and no claim covers it; one edit may overwrite the other.\n"]
    seen = set()
    for n in notes:
        alias, pin, collab, path = (str(n.get(k) or "") for k in ("alias", "pin", "collab", "path"))
        if not (_is_alias(alias) and path and len(collab) <= 64) or (alias, collab, path) in seen:
            continue
        seen.add((alias, collab, path))
        if len(seen) > SHOWN_MAX:
            break
        who = f"{alias} ({boundary.one_line(pin)[:140]})"
        out.append(f"- {who}, in collaboration {boundary.one_line(collab)}. To coordinate: agentmsg send --collab "
                   f"{boundary.one_line(collab)} --to {alias} --kind request --subject 'we both edited a file' "
                   f"--body '...'; to reserve a file before editing it: agentmsg claim PATH.\n")
        out.append(boundary.peer_fields([("file", path[:1000])], injection.detect(path[:1000]),
                                        f"a tool call (this session's or {who}'s): the file both edited",
                                        peer=True) + "\n")
    return "".join(out) if seen else ""


_ALIAS_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz")
_ALIAS_REST = _ALIAS_FIRST | frozenset("0123456789_-")


def _is_alias(value: str) -> bool:
    """``validate.ALIAS_RE`` without ``re``."""
    return 0 < len(value) <= 32 and value[0] in _ALIAS_FIRST and set(value) <= _ALIAS_REST and value != "all"


_SESSION_FIRST = _ALIAS_FIRST | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_SESSION_REST = _SESSION_FIRST | frozenset("_.@-")


def _is_session(value: object) -> bool:
    """``hooks.base.is_session`` (not imported: hooks.base imports this module)."""
    return (isinstance(value, str) and 0 < len(value) <= 128 and value[0] in _SESSION_FIRST
            and set(value) <= _SESSION_REST)
