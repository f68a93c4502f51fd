"""The hooks: SessionStart, UserPromptSubmit, Stop and PostToolUse, for Claude Code, Codex, Copilot CLI and Gemini CLI.

Entry points: ``hooks/run claude|codex`` (the plugin's launcher), which runs
``hooks/agentmsg_hook.py``, which calls :func:`main`; or
``python3 -m agentmsg.hooks.core claude|codex``.  The host's hook JSON is on
stdin; ``hook_event_name`` picks the hook.

Rules for all three:

* **Fail open.**  Any error (bad stdin, corrupt or missing state, a lock
  held more than ``LOCK_TIMEOUT`` seconds, a bug) means exit 0, nothing on
  stdout, and one line in ``<root>/hooks.log``.  No traceback, ever.
* **Strict host JSON.**  Context goes out as ``{"hookSpecificOutput":
  {"hookEventName", "additionalContext"}}``; a Stop continuation as
  ``{"decision": "block", "reason"}``; nothing else, on either host (Codex
  rejects unknown keys).  "Nothing to do" is empty stdout.
* **Bounded.**  Injected text stays within ``boundary.cap_from_env`` (default
  8,000; UTF-16 code units for Claude Code, UTF-8 bytes for Codex: what each
  host counts against its 10,000 limit).
* **Attempts, never acks.**  Showing a message appends a ``presented``
  receipt (one per message, one attempt id) *before* printing, and an
  ``attempt-complete`` receipt after printing.  A message is shown again
  only if it is still unacknowledged ``REPRESENT_AFTER`` prompts later, after
  ``agentmsg delivery retry``, or after the context was cleared or compacted.
* **Lean.**  Imports only the lean core (``records``, ``fsio``,
  ``journal``, ``paths``, ``mailbox``: the same code the store uses),
  ``boundary`` and the pure part of ``delivery``: it runs on every prompt.

PostToolUse (mid-turn delivery, opt-in per binding with ``agentmsg delivery
midturn on``; rules in ``domain.midturn``) shows, between tool calls, the due
messages the binding's setting lets interrupt a turn (by default only
``--priority high``), at most once per ``min_gap``, with the prompt's cap and
boundary; presented, never acknowledged.

``{"hook_event_name": "AgentmsgProbe"}`` on stdin (an event no host sends)
answers ``agentmsg doctor``: one JSON object naming the version, the
interpreter, the package directory and the state root this hook would use.

Per-binding hook state (prompt counter, when each message was last shown,
the requests of the last Stop block, the receipts read so far, the last run)
is derived data in ``collabs/<uuid>/state/<alias>.hook.json``, replaced
atomically.  A corrupt one is logged and reset, and that prompt gets no
output.
"""

from __future__ import annotations

import os
import sys
import time

from agentmsg import PACKAGE_DIR, TOOL, __version__, fsio, records
from agentmsg.backends.file import ahead, hookstate, idle, layout, outbox
from agentmsg.backends.file.derived import quietly
from agentmsg.backends.file.store import FileStore, FileTxn
from agentmsg.domain import envelope, kinds, rules
from agentmsg.hooks import wake as wakehook
from agentmsg.hosts import cliname as hostcmd
from agentmsg.paths import resolve_root_str
from agentmsg.runtime import doorbell as aheadstart
from agentmsg.runtime import facts as sessionfacts
from agentmsg.runtime import mirrorstart
from agentmsg.text import boundary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from types import ModuleType
    from typing import Any

    from agentmsg.domain.values import Message, Page, Registry

    Binding = tuple[str, str, Registry]

HOSTS = {"claude": "claude-code", "codex": "codex", "copilot": "copilot", "gemini": "gemini",
         "opencode": "opencode"}  # opencode: its plugin (opencode/agentmsg.js) runs them
MIDTURN = "PostToolUse"
#: Hosts whose hooks file runs ``hooks/run <host> midturn`` after every tool call (docs/DELIVERY.md, "Mid-turn").
MIDTURN_HOSTS = ("claude", "codex")
EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", MIDTURN)
#: Other hosts' names for the same three events: Gemini CLI's, and Copilot CLI's camelCase hooks.
EVENT_ALIASES = {"BeforeAgent": "UserPromptSubmit", "AfterAgent": "Stop", "sessionStart": "SessionStart",
                 "userPromptSubmitted": "UserPromptSubmit", "agentStop": "Stop"}
#: The variable equal to the session id in every hook a host runs (the fast path's key); Codex and Copilot have none.
SESSION_VARS = {"claude": "CLAUDE_CODE_SESSION_ID", "gemini": "GEMINI_SESSION_ID"}
#: Hosts whose launcher fast path reads the session id from stdin instead (``hooks/run``), as this process does.
STDIN_SESSION_HOSTS = ("codex", "copilot")
#: How each host counts its context limit: the JS hosts in UTF-16 code units, Codex in UTF-8 bytes.
UNITS = {"codex": "bytes"}
#: Events ``hooks/run <host> fast`` may answer from the idle marker alone (never SessionStart).
FAST_EVENTS = ("UserPromptSubmit", "Stop")
PROBE = "AgentmsgProbe"  # agentmsg doctor's question: which agentmsg, interpreter and root would a hook use?
REPRESENT_AFTER = rules.REPRESENT_AFTER
#: Messages a hook reads per binding: more than any cap can show, never the whole backlog.
CANDIDATES = 60
LOCK_TIMEOUT = 2.0  # seconds; AGENTMSG_HOOK_LOCK_TIMEOUT overrides (at most 10)
STDIN_MAX = 16 << 20
LOG_MAX = 1 << 20


class HookError(Exception):
    """A reason to fail open, written to hooks.log."""


class LockTimeout(HookError):
    """The collaboration's write lock stayed held past ``LOCK_TIMEOUT``: nothing was written."""


def _errors() -> ModuleType:
    """``agentmsg.errors``, imported only when an exception is being matched (it costs ~0.3 ms bare)."""
    from agentmsg import errors

    return errors


class _Sink:
    """Stands in for stderr: a stray warning must never reach the host."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def host_of(named: str, env: Mapping[str, str]) -> str:
    """The host really running ``hooks/run claude``: Copilot CLI and Gemini CLI run Claude-format hook files too.
    Copilot sets ``CLAUDE_PLUGIN_ROOT`` as well, so ``COPILOT_CLI`` is checked first; Gemini gives its hooks
    ``GEMINI_SESSION_ID`` and never ``CLAUDE_CODE_SESSION_ID`` (which Claude Code sets for every hook).
    ``hooks/run`` makes the same choice for its fast path."""
    if named != "claude":
        return named
    if env.get("COPILOT_CLI"):
        return "copilot"
    if env.get("GEMINI_SESSION_ID") and not env.get("CLAUDE_CODE_SESSION_ID"):
        return "gemini"
    return named


def main(host: str) -> int:
    """Run one hook for ``host`` (a key of ``HOSTS``) on the JSON from stdin; always 0."""
    saved = sys.stderr
    sys.stderr = _Sink()  # type: ignore[assignment,unused-ignore]
    hook = Hook(host_of(host, os.environ), os.environ)
    try:
        raw = sys.stdin.buffer.read(STDIN_MAX + 1)
        out, after = hook.run(raw)
        if out:
            _write_stdout(out)
            after()
    except BaseException as exc:  # fail open, whatever happened
        hook.log(exc)
        hook.distrust()
    finally:
        sys.stderr = saved
    return 0


def _write_stdout(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


def _nothing() -> None:
    pass


class Hook:
    hosts = HOSTS  # host name -> pin runtime (agentmsg.hosts.cursor adds its own host)

    def __init__(self, host: str, env: Mapping[str, str]) -> None:
        self.host, self.env = host, env
        self.event = "?"
        self.pin = "?"
        self.root: str | None = None
        self.busy = True  # no idle marker unless a run proves there is nothing (see run)
        self.stop_quiet = True  # Stop: no binding has an active envelope or wake consent (the .stop marker)
        self.mid_busy = False  # PostToolUse: something qualifies but the gap holds it (no mid-turn marker)
        try:
            self.lock_timeout = min(10.0, max(0.05, float(env.get("AGENTMSG_HOOK_LOCK_TIMEOUT") or LOCK_TIMEOUT)))
        except ValueError:
            self.lock_timeout = LOCK_TIMEOUT
        self.cap = boundary.cap_from_env(env)
        self.unit = UNITS.get(host, "utf16")  # how each host counts (docs/HOSTS-NOTES.md)
        self.cli = boundary.CLI = hostcmd.cli_command(host, env)  # every command the text names runs as shown
        self.key = ahead.launcher_key(env)  # the environment the launcher checks a delivery rendered ahead against
        self.mirrored: bool | None = None  # a mirror is wanted for the root (the renderer: as the facts say)

    # ---- plumbing ------------------------------------------------------------

    def run(self, raw: bytes) -> tuple[bytes, Callable[[], None]]:
        if self.host not in self.hosts:
            raise HookError(f"unknown host {self.host[:20]!r}: expected one of {', '.join(self.hosts)}")
        named: str | None
        source: str | None
        try:  # resolved once, as FileStore does: the root may be a link, nothing inside it may
            named, source = resolve_root_str(None, self.env)
            self.root = os.path.realpath(named)
        except _errors().UsageError:
            named = source = None
            self.root = None
        data = parse_stdin(raw)
        event, session = data.get("hook_event_name"), data.get("session_id", data.get("sessionId"))
        event = EVENT_ALIASES.get(event, event) if isinstance(event, str) else event
        if event == PROBE:
            self.event = event
            return self.probe(named, source), _nothing
        if event not in EVENTS:
            raise HookError(f"unsupported hook_event_name {str(event)[:40]!r}")
        self.event = event
        if hostcmd.defers_to_plugin(self.host, self.env):
            return b"", _nothing  # a user-level copy while the Codex plugin is enabled: the plugin's hook runs
        if event == "SessionStart":
            hostcmd.prepare_cli(self.env)  # the CLI's first call must not wait for pip (detached, fail-open)
        if not is_session(session):
            raise HookError(f"invalid session_id {str(session)[:40]!r}")
        self.pin = f"{self.hosts[self.host]}:{session}"
        if self.root is None or not os.path.isdir(self.root):
            return self.unbound(event), _nothing  # no state root: this machine never used agentmsg
        if mirrorstart.wanted(self.root, self.env):  # a replica root: its mirror keeps it current
            self._start_mirror()
        # The fast path's generation, read before any state (docs/DELIVERY.md, "Fast path").
        keyed = self._launcher_keyed(str(session))
        token = self._idle_token() if keyed and (event in FAST_EVENTS or event == MIDTURN) else None
        self.busy = token is None
        self.store = FileStore(self.root, lock_timeout=self.lock_timeout, on_wake=aheadstart.nudge)
        if keyed:  # a delivery the launcher printed from .ready: folded before anything reads the state
            self.settle_claim(final=True)
        if event == "SessionStart":
            self._wake_step(sessionfacts.record, self.root, self.pin,
                            sessionfacts.gather(self.host, str(session), self.env))
        binds = self._locked_call(self.store.bound, self.pin)
        if not binds:
            out, after = self.unbound(event), _nothing  # not joined: joining never happens implicitly
        else:
            handler = {"SessionStart": self.session_start, "UserPromptSubmit": self.prompt, "Stop": self.stop,
                       MIDTURN: self.post_tool}[event]
            out, after = handler(data, binds)
        if event == MIDTURN:
            if token is not None and not self.mid_busy and not out:
                quietly(idle.mark_midturn_quiet, self.root, self.pin, token)  # until a writer wakes it
        elif token is not None and not self.busy and not out:
            quietly(idle.mark_idle, self.root, self.pin, token)  # nothing to show until a writer wakes it
        elif binds and self.host in MIDTURN_HOSTS:
            # A prompt counted or a context cleared may bring a shown message due again between tool calls.
            quietly(idle.clear_midturn, self.root, self.pin)
        if event == "Stop" and token is not None and self.stop_quiet and not out:
            quietly(idle.mark_stop_quiet, self.root, self.pin, token)  # unread mail, and nothing to do
        if keyed:
            self._keep_ahead(bool(binds))
        return out, after

    def _start_mirror(self) -> None:
        """Spawn ``agentmsg sync`` if none runs (mirrorstart: a flock probe, then a detached process)."""
        explicit = self.env.get("AGENTMSG_CLI")
        found = None if explicit else hostcmd.launcher(os.path.abspath(PACKAGE_DIR))
        command = [explicit] if explicit else ["/bin/sh", found] if found else None
        if command is not None and self.root is not None:
            mirrorstart.ensure(self.root, self.env, command)

    def _wake_step(self, step: Callable[..., Any], *args: Any) -> Any:
        """A wake-up bookkeeping step (issue 11): its failure is logged and never costs the delivery."""
        try:
            return step(*args)
        except Exception as exc:
            self.log(exc)
            return None

    def _launcher_keyed(self, session: str) -> bool:
        """Whether ``hooks/run`` names this session's marker files as this run does."""
        if self.host in STDIN_SESSION_HOSTS:
            return True  # the launcher keys the markers by stdin's session_id, the one this run read
        var = SESSION_VARS.get(self.host)
        return var is not None and self.env.get(var) == session  # Codex's variable is inherited: not its key

    def _idle_token(self) -> str | None:
        """The generation the launcher's idle marker must match; None when this run must not write one."""
        try:
            return idle.idle_token(self.root or "", self.pin)
        except OSError:
            return None

    def _pending(self, tx: FileTxn, alias: str, reg: Registry, total: int | None = None) -> None:
        """Keep the launcher's fast path off while this binding has anything a later hook may act on:
        an unacknowledged message (it comes due again, prompts later), or an envelope whose Stop waits."""
        if self.busy:
            return
        if total is None:
            total = tx.unacked(alias, limit=1).total
        if total:
            self.busy = True
            return
        env = self._envelope(tx, alias, reg)
        if env is not None and env.wait > 0:
            self.busy = True

    def unbound(self, event: str) -> bytes:
        """A session with no binding: nothing, except where the host cannot find the CLI by name
        (Codex): there SessionStart states the command to use, so the skill's commands run as shown."""
        if event != "SessionStart" or self.cli == "agentmsg":
            return b""
        return self.output(f"agentmsg (peer messaging; this session has not joined a collaboration): its CLI is "
                           f"not on this shell's PATH; run it as {self.cli} wherever the agentmsg skill or a "
                           f"message shows `agentmsg`, e.g. `{self.cli} status`.\n")

    def probe(self, root: str | None, source: str | None) -> bytes:
        """The answer to ``agentmsg doctor``: what this hook runs and where it would read and write."""
        return records.dumps({
            "agentmsg": __version__, "tool": TOOL, "python": sys.executable, "root": root, "root_source": source,
            "package": os.path.abspath(PACKAGE_DIR), "host": self.host,
        }).encode() + b"\n"

    def log(self, exc: BaseException) -> None:
        """One line in ``<root>/hooks.log``; silent if there is no root to write to."""
        try:
            root = self.root or resolve_root_str(None, self.env)[0]
            if not os.path.isdir(root):
                return
            path = os.path.join(root, layout.HOOKS_LOG)
            if fsio.file_size(path) > LOG_MAX:
                os.replace(path, path + ".1")
            what = boundary.one_line(f"{type(exc).__name__}: {exc}")[:400]
            line = f"{records.now_utc()} {TOOL} {self.host[:10]} {self.event} {self.pin[:80]}: {what}\n"
            fsio.append(path, line.encode("utf-8", "backslashreplace"), durable=False)  # best effort
        except BaseException:  # nowhere left to report to
            pass

    def distrust(self) -> None:
        """After a failed run: nothing decided from state this run could not read (a delivery rendered ahead,
        the Stop marker) stands in for the hook; the next ones run in full, and report what they find."""
        if self.root is not None and self.pin != "?":
            try:
                ahead.drop(self.root, self.pin)
                idle.clear_stop(self.root, self.pin)
            except BaseException:
                pass

    def _locked_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except _errors().StoreFailed as exc:
            raise LockTimeout(str(exc)) from None

    def txn(self, collab: str) -> FileTxn:
        return _LockedTxn(self.store, collab, self.store.base(collab))

    # ---- the hooks' own state (derived, per binding) -------------------------------------------

    def load_state(self, tx: FileTxn, alias: str, *, reset: bool = True) -> dict[str, Any]:
        """The binding's hook state; a corrupt one is reset (unless ``reset`` is False: the renderer leaves
        that, and its report, to the hook) and fails this run."""
        fresh = {"v": 2, "pin": self.pin, "prompt": 0, "shown": {}, "blocked": [], "rpos": 0, "seen": None}
        raw = fsio.read_bytes(layout.hook_state(tx.base, alias))
        if raw is None:
            return fresh
        doc = hookstate.hook_state(raw)
        if doc is None:
            if not reset:
                raise HookError(f"corrupt hook state {layout.hook_state(tx.base, alias)}")
            self.save_state(tx, alias, fresh)
            raise HookError(f"corrupt hook state {layout.hook_state(tx.base, alias)}; reset it")
        if doc.get("pin") != self.pin:
            return fresh  # another pin's state: a takeover
        # "shown at a later prompt than this one" is no state of ours: it would hold a message back for good
        doc["shown"] = {k: v for k, v in doc["shown"].items() if v <= doc["prompt"]}
        return doc

    def save_state(self, tx: FileTxn, alias: str, doc: dict[str, Any]) -> None:
        doc["seen"] = {"host": self.host, "event": self.event, "ts": records.now_utc()}
        doc["shown"] = {k: v for k, v in doc["shown"].items() if doc["prompt"] - v < REPRESENT_AFTER}
        fsio.ensure_dir(tx.base, "state")
        fsio.atomic_write(layout.hook_state(tx.base, alias), records.dumps(doc).encode(), durable=False)
        ahead.drop(tx.root, self.pin)  # rendered from the state before: the renderer renders again

    def _fold_receipts(self, tx: FileTxn, alias: str, st: dict[str, Any]) -> list[dict[str, Any]]:
        """Retry requests since the last run: whichever hook reads one first, the next prompt shows it.
        Returns the receipts read."""
        new, st["rpos"] = tx.receipts_since(alias, st["rpos"])
        retried = {r.get("message") for r in new if r.get("type") == kinds.RETRY}
        if retried:
            for msg in tx.unacked(alias, limit=CANDIDATES).messages:
                if msg.id in retried:
                    st["shown"].pop(str(msg.seq), None)
        return new

    def _due(self, tx: FileTxn, alias: str, st: dict[str, Any], *, requests_only: bool = False) -> Any:
        """The top unacknowledged messages not shown in the last prompts: a page, never the whole backlog."""
        self._fold_receipts(tx, alias, st)
        skip = {int(k) for k, v in st["shown"].items() if st["prompt"] - v < REPRESENT_AFTER}
        return tx.unacked(alias, limit=CANDIDATES, skip=skip, requests_only=requests_only)

    def claim(self, tx: FileTxn, alias: str, ids: tuple[str, ...], attempt: str, *,
              durable: bool = True) -> Callable[[], None]:
        """Record one presented attempt for ``ids`` (inside ``tx``), written before printing; returns its completer.

        ``durable=False`` (prompt and PostToolUse) skips the local append's fsync: a presented receipt lost in a
        power cut only makes its messages come due again, never acknowledged, never lost (docs/DELIVERY.md,
        "Presented receipts are not fsynced").  A Stop block keeps it durable beside the slot it spends, and a
        mirrored root's outbox entry stays durable as before.
        """
        presented = [{"type": kinds.PRESENTED, "message": mid, "attempt": attempt, "host": self.host,
                      "hook": self.event, "pin": self.pin} for mid in ids]
        collab = tx.collab
        done = {"type": kinds.COMPLETE, "attempt": attempt, "host": self.host, "hook": self.event,
                "messages": len(ids)}
        if self.store.replica_of is not None:  # a mirrored root: the receipts go to the server via the outbox
            outbox.put(tx.root, collab, f"receipts/{alias}", presented, entry_id=uuid4())
        else:
            tx.append_receipts(alias, presented, durable=durable, head=False)
        root = tx.root

        def complete() -> None:
            # Not fsynced: losing it in a crash only makes the attempt look interrupted (retry exists).
            if self.store.replica_of is not None:
                outbox.put(root, collab, f"receipts/{alias}", [done], entry_id=uuid4(), durable=False)
                return
            with self.txn(collab) as after:
                after.append_receipts(alias, [done], durable=False)

        return complete

    def output(self, text: str) -> bytes:
        if self.event == "Stop":
            return records.dumps({"decision": "block", "reason": text}).encode()
        if self.host == "copilot":  # Copilot reads only a top-level additionalContext (hookSpecificOutput is ignored)
            return records.dumps({"additionalContext": text}).encode()
        if self.host == "gemini":
            return records.dumps({"hookSpecificOutput": {"additionalContext": text}}).encode()
        return records.dumps({"hookSpecificOutput": {"hookEventName": self.event,
                                                     "additionalContext": text}}).encode()

    # ---- SessionStart ------------------------------------------------------------

    def session_start(self, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
        lines = []
        for collab, alias, reg in binds:
            with self.txn(collab) as tx:
                st = self.load_state(tx, alias)
                if data.get("source") in ("clear", "compact"):
                    st["shown"] = {}  # the context that held them is gone: show them again
                self._fold_receipts(tx, alias, st)
                page = tx.unacked(alias, limit=1)
                self.save_state(tx, alias, st)
                env = self._envelope(tx, alias, reg)
            lines.append(self._identity(collab, alias, reg, page.total, page.requests)
                         + self._envelope_note(env))
        if self.host == "claude":
            self._export()
        return self.output(self._within_cap(lines)), _nothing

    def _within_cap(self, lines: list[str]) -> str:
        """One identity block per binding, as many as fit the cap; the rest are counted."""
        size = boundary.measure(self.unit)
        room = self.cap - 200  # the "more" line
        kept: list[str] = []
        for line in lines:
            if size("".join(kept)) + size(line) > room:
                break
            kept.append(line)
        left = len(lines) - len(kept)
        if left:
            kept.append(f"agentmsg: {left} more binding{'s' * (left != 1)} of this session did not fit here; "
                        f"`{self.cli} status` lists them.\n")
        return "".join(kept)

    def _identity(self, collab: str, alias: str, reg: Registry, total: int, requests: int) -> str:
        counts = f"{total} ({requests} request{'s' * (requests != 1)}, {total - requests} other)"
        opener = reg.opener_alias or next((a for a, p in reg.participants.items() if p.pin == reg.opener), "?")
        label, task = str(reg.label)[:64], str(reg.task)[:500]
        from agentmsg.text import injection as flags  # SessionStart only: its patterns cost milliseconds to compile

        own = opener == alias and reg.opener == self.pin  # this very session opened it and wrote label and task
        if own:
            role, author = "which this session opened", f"this session ({alias}), when it opened the collaboration"
        elif opener == alias:  # a handover moved the alias to this session; another session opened it
            role = f"which {alias} opened before this session took {alias} over"
            author = f"{alias}, the collaboration's opener, before this session took it over"
        else:
            role, author = f"opened by {boundary.one_line(opener)}", f"{opener}, the collaboration's opener"
        cli = f" The agentmsg CLI here is {self.cli}." if self.cli != "agentmsg" else ""
        return (
            f"agentmsg: this session ({self.pin}) is participant {alias} in collaboration {collab}, "
            f"{role}. "
            f"State root: {self.root}. Unacknowledged messages for {alias}: {counts}; they are quoted at "
            f"the next prompt inside an untrusted peer-data boundary, and "
            f"`{boundary.inbox_command(collab)}` lists them.{cli}\n"
            + boundary.peer_fields((("label", label), ("task", task)), flags.detect(label + "\n" + task), author,
                                   peer=not own)
        )

    def _envelope_note(self, env: envelope.Envelope | None) -> str:
        if env is None:
            return "\n"
        return (f" Stop continuations are enabled for this session until {envelope.iso(env.expires_at)}: "
                f"{env.remaining} of {env.slots} slots left.\n")

    def _export(self) -> None:
        """The state root for later Bash commands, idempotently (SessionStart fires again on resume/clear).

        Not the collaboration: a session may join another one later, and a
        stale ``AGENTMSG_COLLAB`` would route its sends to the first.
        """
        path = self.env.get("CLAUDE_ENV_FILE")
        if not path:
            return
        wanted = [f"export AGENTMSG_HOME={_sh_quote(self.root or '')}"]
        have = set((fsio.read_bytes(path) or b"").decode("utf-8", "replace").splitlines())
        missing = [line for line in wanted if line not in have]
        if missing:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, ("\n" + "\n".join(missing) + "\n").encode())
            finally:
                os.close(fd)

    # ---- UserPromptSubmit -----------------------------------------------------------

    def prompt(self, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
        work = []
        for collab, alias, reg in binds:
            with self.txn(collab) as tx:
                st = self.load_state(tx, alias)
                st["prompt"] += 1
                if self._wake_step(wakehook.prompt, tx, alias, self.pin, reg, data.get("prompt")):
                    self.busy = True  # the launcher must run every prompt and Stop: they count wakes and turns
                    self._wake_step(wakehook.turn, self.root, self.pin, "busy")
                page = self._prompt_page(tx, alias, reg, st)
                if not page.messages:
                    self.save_state(tx, alias, st)
            work.append((collab, alias, st, page))
        rendered = self._render_prompt(work)
        if rendered is None:
            return b"", _nothing
        included = set(rendered.included)
        completers = []
        for collab, alias, st, page in work:
            ids = tuple(m.id for m in page.messages if m.id in included)
            if not page.messages:
                continue
            with self.txn(collab) as tx:
                if ids:
                    completers.append(self.claim(tx, alias, ids, uuid4(), durable=False))
                _mark_shown(st, [m.seq for m in page.messages if m.id in included])
                self.save_state(tx, alias, st)

        def after() -> None:
            for complete in completers:
                complete()

        return self.output(rendered.text), after

    def _prompt_page(self, tx: FileTxn, alias: str, reg: Registry, st: dict[str, Any]) -> Page:
        """The messages due at this prompt (its count already advanced), and whether the fast path stays off."""
        page = self._due(tx, alias, st)
        self._pending(tx, alias, reg, page.total)
        return page

    def _render_prompt(self, work: list[tuple[str, str, dict[str, Any], Page]]) -> boundary.Rendered | None:
        """The prompt's text for the due pages of its bindings; None when nothing is due."""
        due_all = [m for *_rest, page in work for m in page.messages]
        if not due_all:
            return None
        waiting = sum(page.total - page.skipped for *_rest, page in work)
        aliases = ", ".join(sorted({alias for _c, alias, *_ in work}))
        collabs = list(dict.fromkeys(m.collab for m in due_all))
        where = f" in collaboration {collabs[0]}" if len(collabs) == 1 else ""

        def lead(shown: int) -> str:
            return (f"agentmsg: {waiting} peer message{'s' * (waiting != 1)} for {aliases}{where} "
                    f"{'are' if waiting != 1 else 'is'} unacknowledged and not shown in the last "
                    f"{REPRESENT_AFTER} prompts; {shown} quoted below.\n")

        return boundary.render(due_all, alias=aliases, cap=self.cap, unit=self.unit, lead=lead,
                               more=waiting - len(due_all))

    # ---- PostToolUse: mid-turn delivery ------------------------------------------------------

    def post_tool(self, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
        """Between tool calls: the due messages the binding opted to be interrupted by, gap permitting."""
        from agentmsg.domain import midturn  # PostToolUse only

        now = time.time()
        work = []
        due_all: list[Message] = []
        for collab, alias, reg in binds:
            with self.txn(collab) as tx:
                setting = midturn.active(tx.delivery_records(), alias, self.pin, holder=reg.holder(alias),
                                         closed=reg.closed)
                if setting is None:
                    continue
                st = self.load_state(tx, alias)
                wanted = [m for m in self._due(tx, alias, st).messages if setting.wants(m)]
                if not wanted:
                    continue
                last = st.get("mid")
                if not setting.may_inject(last if type(last) in (int, float) else None, now):
                    self.mid_busy = True  # due, held by the gap: time alone will let it through
                    continue
            work.append((collab, alias, st, wanted))
            due_all += wanted
        if not due_all:
            return b"", _nothing
        aliases = ", ".join(sorted({alias for _c, alias, *_ in work}))
        collabs = list(dict.fromkeys(m.collab for m in due_all))
        where = f" in collaboration {collabs[0]}" if len(collabs) == 1 else ""
        n = len(due_all)

        def lead(shown: int) -> str:
            return (f"agentmsg (mid-turn delivery, between tool calls): {n} peer message{'s' * (n != 1)} for "
                    f"{aliases}{where} {'are' if n != 1 else 'is'} unacknowledged and chosen to reach this "
                    f"session before its turn ends; {shown} quoted below.\n")

        rendered = boundary.render(due_all, alias=aliases, cap=self.cap, unit=self.unit, lead=lead)
        included = set(rendered.included)
        if not included:
            self.mid_busy = True  # nothing fit: still due, so no marker
            return b"", _nothing
        completers = []
        for collab, alias, st, wanted in work:
            ids = tuple(m.id for m in wanted if m.id in included)
            if not ids:
                continue
            with self.txn(collab) as tx:
                completers.append(self.claim(tx, alias, ids, uuid4(), durable=False))
                _mark_shown(st, [m.seq for m in wanted if m.id in included])
                st["mid"] = now
                self.save_state(tx, alias, st)

        def after() -> None:
            for complete in completers:
                complete()

        return self.output(rendered.text), after

    # ---- Stop -------------------------------------------------------------------------

    def _envelope(self, tx: FileTxn, alias: str, reg: Registry) -> envelope.Envelope | None:
        """This exact binding's envelope, if it is active."""
        recs = tx.delivery_records()
        if self.store.replica_of is not None:  # slots spent here and not yet back from the server
            recs += outbox.slots(tx.root, tx.collab)
        env = envelope.latest(envelope.fold(recs), alias, self.pin)
        if env is None:
            return None
        status = env.status(time.time(), holder=reg.holder(alias), closed=reg.closed)
        return env if status == "active" else None

    def stop(self, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
        again = data.get("stop_hook_active") is True
        for collab, alias, reg in binds:
            with self.txn(collab) as tx:
                self._pending(tx, alias, reg)
                env = self._envelope(tx, alias, reg)  # first: an unsafe delivery journal ends the hook here, once
                if self._wake_step(wakehook.active, tx, alias, self.pin, reg) is not None:
                    self.busy = True
                    self.stop_quiet = False
                    self._wake_step(wakehook.turn, self.root, self.pin, "idle")
                if env is None:
                    continue
                self.stop_quiet = False
                st = self.load_state(tx, alias)
                requests = self._requests(tx, alias, st)
            if not requests and env.wait > 0 and not again:
                requests = self._wait_for_request(collab, alias, st, env.wait)
            if not requests:
                continue
            if again and {m.id for m in requests} <= set(st["blocked"]) | _last_block(env):
                continue  # nothing new since the last block: let it stop, never loop
            return self._block(collab, alias, reg, st)
        return b"", _nothing

    def _requests(self, tx: FileTxn, alias: str, st: dict[str, Any]) -> list[Message]:
        self._fold_receipts(tx, alias, st)
        return tx.unacked(alias, limit=CANDIDATES, requests_only=True).messages

    def _wait_for_request(self, collab: str, alias: str, st: dict[str, Any], wait: float) -> list[Message]:
        deadline = time.monotonic() + min(wait, envelope.MAX_WAIT)
        seen = self.store.last_seq(collab, alias)
        while time.monotonic() < deadline:
            if not self.store.wait(collab, alias, seen, deadline - time.monotonic()):
                return []
            seen = self.store.last_seq(collab, alias)
            with self.txn(collab) as tx:
                found = self._requests(tx, alias, st)
            if found:
                return found
        return []

    def _block(self, collab: str, alias: str, reg: Registry, st: dict[str, Any]) -> tuple[bytes, Callable[[], None]]:
        """Spend one slot and present the pending requests, all under the lock, before printing."""
        with self.txn(collab) as tx:
            env = self._envelope(tx, alias, reg)  # again, under the lock: slots are never reused
            requests = self._requests(tx, alias, st)
            if env is None or not requests:
                return b"", _nothing
            slot = 1 + max((s["slot"] for s in env.spent), default=0)
            total = tx.unacked(alias, limit=1, requests_only=True).total

            def lead(shown: int) -> str:
                return (f"agentmsg: {total} unacknowledged request{'s' * (total != 1)} from peers "
                        f"{'are' if total != 1 else 'is'} waiting for {alias} in collaboration {collab}; "
                        f"{shown} quoted below. Stop continuations are enabled for this session until "
                        f"{envelope.iso(env.expires_at)}; this one used slot {slot} of {env.slots}.\n")

            rendered = boundary.render(requests, alias=alias, cap=self.cap, unit=self.unit, lead=lead,
                                       more=total - len(requests))
            if not rendered.included:
                return b"", _nothing
            attempt = uuid4()
            spent = {"type": kinds.SLOT, "envelope": env.id, "slot": slot, "alias": alias, "pin": self.pin,
                     "host": self.host, "attempt": attempt, "messages": list(rendered.included)}
            if self.store.replica_of is not None:
                outbox.put(tx.root, collab, "delivery", [dict(spent, ts=records.now_utc())], entry_id=uuid4())
            else:
                tx.append_delivery(spent)
            complete = self.claim(tx, alias, rendered.included, attempt)
            st["blocked"] = [m.id for m in requests]
            _mark_shown(st, [m.seq for m in requests if m.id in rendered.included])
            self.save_state(tx, alias, st)
        return self.output(rendered.text), complete


    # ---- rendered ahead (docs/DELIVERY.md, "Rendered ahead") ----------------------------------------

    @classmethod
    def for_session(cls, root: str, pin: str, facts: Mapping[str, Any], store: FileStore) -> Hook:
        """The hook as the session's last full run saw it (its host, cap and CLI), for the renderer."""
        host = str(facts.get("host", ""))
        hook = cls(host, {"AGENTMSG_HOOK_CAP": str(facts.get("cap", ""))})
        hook.root, hook.pin, hook.store, hook.event = root, pin, store, "UserPromptSubmit"
        hook.cli = boundary.CLI = str(facts.get("cli") or "agentmsg")
        hook.key = str(facts.get("key", ""))
        hook.mirrored = facts.get("mirror") is not False
        return hook

    def _keep_ahead(self, bound: bool) -> None:
        """Record what the renderer needs to render this session's next prompt, and ring it (never fails)."""
        root = self.root
        if root is None:
            return
        try:
            if self.env.get("AGENTMSG_NO_AHEAD") or self.env.get("AGENTMSG_NO_FASTPATH"):
                ahead.forget(root, self.pin)
                return
            package = os.path.abspath(PACKAGE_DIR)
            facts = {"v": 1, "pin": self.pin, "host": self.host, "cap": self.cap, "cli": self.cli,
                     "key": ahead.launcher_key(self.env), "python": sys.executable,
                     "hook": hostcmd.hook_script(package), "version": __version__,
                     "mirror": mirrorstart.wanted(root, self.env)}
            ahead.remember(root, self.pin, facts)
            if bound:
                if self.event == "SessionStart":  # the prompt comes next, maybe before any renderer could look
                    self.event = "UserPromptSubmit"
                    try:
                        self.render_ahead()
                    finally:
                        self.event = "SessionStart"
                aheadstart.nudge(root, [self.pin])
        except Exception as exc:
            self.log(exc)

    def settle_claim(self, *, final: bool) -> bool:
        """Fold the delivery the launcher printed for this session (``.took``) into presented receipts and
        the hook state, once.  ``final``: this is a full hook run of the same session, so the launcher is
        done with it whatever it wrote.  True while a claim is still being printed (the renderer waits)."""
        root = self.root
        if root is None:
            return False
        try:
            ahead.refuse_planted_claim(root, self.pin)
            with ahead.settling(root, self.pin) as found:
                if found is None:
                    return False
                if found.writer is not None:  # a renderer writing a delivery now (or one that died doing so)
                    if found.stale_writer:
                        ahead.give_back(root, self.pin)
                    return False
                if not found.finished and not final:
                    return True
                try:
                    fold = ahead.load_fold(root, self.pin)
                    if found.end != "no" and fold is not None and fold.get("gen") == found.gen:
                        self._fold(fold, found.end or "cut")
                except LockTimeout:
                    if not final:
                        return True  # the collaboration is busy: the renderer tries again, the claim kept
                    raise
                ahead.give_back(root, self.pin)
        except Exception as exc:  # a claim that cannot be folded: its messages come due again
            self.log(exc)
            quietly(ahead.give_back, root, self.pin)
        return False

    def _fold(self, fold: Mapping[str, Any], end: str) -> None:
        """What printing a rendered delivery changes, as :meth:`prompt` would have: one more prompt, a
        presented receipt per message (``ok``: marked shown, and the attempt completed)."""
        collab, alias, attempt = fold.get("collab"), fold.get("alias"), fold.get("attempt")
        ids, seqs = fold.get("ids"), fold.get("seqs")
        if not (isinstance(collab, str) and isinstance(alias, str) and isinstance(attempt, str)
                and isinstance(ids, list) and isinstance(seqs, list)
                and all(isinstance(i, str) for i in ids) and all(type(q) is int for q in seqs)):
            raise HookError(f"malformed delivery fold for {self.pin[:80]}")
        held = any((c, a) == (collab, alias) for c, a, _r in self._locked_call(self.store.bound, self.pin))
        event, self.event = self.event, "UserPromptSubmit"  # the receipts say which hook showed it; put back
        try:
            complete = self._fold_in(collab, alias, attempt, ids, seqs, fold.get("rpos"), end, held)
            if complete is not None and end == "ok":
                complete()
        finally:
            self.event = event
        if self.host in MIDTURN_HOSTS:
            quietly(idle.clear_midturn, self.root, self.pin)

    def _fold_in(self, collab: str, alias: str, attempt: str, ids: list[str], seqs: list[int], rpos: object,
                 end: str, held: bool) -> Callable[[], None] | None:
        complete = None
        with self.txn(collab) as tx:
            # Taken over since (another pin's state): the receipts only.  A damaged state is left to the hook.
            st = self.load_state(tx, alias, reset=False) if held else None
            if st is not None and st.get("ahead") == attempt:
                return None  # folded already
            recorded = False
            if st is not None:
                st["prompt"] += 1
                recorded = any(r.get("attempt") == attempt for r in self._fold_receipts(tx, alias, st))
            if ids and not recorded:
                complete = self.claim(tx, alias, tuple(ids), attempt, durable=False)
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
                self.save_state(tx, alias, st)
        return complete

    def render_ahead(self) -> str:
        """Render what this session's next UserPromptSubmit would print, for the launcher to print without
        Python: ``ready``; ``idle`` (nothing pending: the idle marker); ``full`` (the hook must run: more
        than one binding, an active wake consent, unbound); ``busy`` (a claim exists)."""
        root, pin = self.root or "", self.pin
        if not ahead.take(root, pin):
            return "busy"
        try:
            return self._render_ahead(root, pin)
        except BaseException:
            ahead.drop(root, pin)  # whatever stopped it: the next prompt runs in full (and reports it)
            raise
        finally:
            ahead.give_back(root, pin)

    def _render_ahead(self, root: str, pin: str) -> str:
        # The generation first, before the bindings and the state (as every hook reads it): a join, takeover
        # or send after this read deletes it, and what is written below is then for a generation that is gone.
        token = self._idle_token()
        mirrored = self.mirrored if self.mirrored is not None else mirrorstart.wanted(root, self.env)
        if mirrored or self.store.replica_of is not None:
            ahead.drop(root, pin)  # a mirrored root: each full hook makes sure its mirror runs
            return "full"
        binds = self._locked_call(self.store.bound, pin)
        if token is None or len(binds) != 1:
            ahead.drop(root, pin)
            return "full"
        collab, alias, reg = binds[0]
        with self.txn(collab) as tx:
            if idle.idle_token_now(root, pin) != token or wakehook.active(tx, alias, pin, reg) is not None:
                ahead.drop(root, pin)  # changed meanwhile (rendered again at the writer's ring), or a wake
                return "full"  # consent: the prompt hook records wake prompts and turns, so it runs
            st = self.load_state(tx, alias, reset=False)
            st = dict(st, shown=dict(st["shown"]))  # what this prompt would change, never saved here
            st["prompt"] += 1
            self.busy = False
            page = self._prompt_page(tx, alias, reg, st)
            rendered = self._render_prompt([(collab, alias, st, page)])
            if self._envelope(tx, alias, reg) is None:  # and no wake consent (above): a Stop has nothing to do
                idle.mark_stop_quiet(root, pin, token)
            if rendered is None and not self.busy:
                idle.mark_idle(root, pin, token)
                ahead.drop(root, pin)
                return "idle"
            included = set(rendered.included) if rendered is not None else set()
            fold = {"v": 1, "attempt": uuid4(), "collab": collab, "alias": alias,
                    "ids": list(rendered.included) if rendered is not None else [],
                    "seqs": [m.seq for m in page.messages if m.id in included],
                    "rpos": st["rpos"]}  # how far into the receipts it read: a retry after it still counts
            payload = self.output(rendered.text) if rendered is not None else b""
            ahead.write(root, pin, token, self.key, payload, fold)
        return "ready"


class _LockedTxn(FileTxn):
    """A transaction whose lock timeout fails the hook open (LockTimeout), never blocks the host."""

    def __enter__(self) -> FileTxn:
        try:
            return super().__enter__()
        except _errors().StoreFailed as exc:
            raise LockTimeout(str(exc)) from None


def parse_stdin(raw: bytes) -> dict[str, Any]:
    """A host's hook JSON: one object, bounded; anything else is a reason to fail open."""
    if len(raw) > STDIN_MAX:
        raise HookError(f"stdin is over {STDIN_MAX} bytes")
    try:
        data = records.loads(raw.decode("utf-8"))
    except ValueError as exc:
        raise HookError(f"stdin is not JSON: {type(exc).__name__}") from None
    if not isinstance(data, dict):
        raise HookError(f"stdin is JSON {type(data).__name__}, not an object")
    return data


_SESSION_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_SESSION_REST = _SESSION_FIRST | frozenset("_.@-")


def is_session(value: object) -> bool:
    """``model.SESSION_RE`` without ``re``: a session id that may become part of a pin."""
    return (isinstance(value, str) and 0 < len(value) <= 128 and value[0] in _SESSION_FIRST
            and set(value) <= _SESSION_REST)


uuid4 = records.uuid4  # mcpserver imports it from here


def _mark_shown(st: dict[str, Any], seqs: Iterable[int]) -> None:
    """Shown at this prompt: not due again for ``REPRESENT_AFTER`` prompts (unless retried or cleared)."""
    for seq in seqs:
        st["shown"][str(seq)] = st["prompt"]


def _sh_quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


def _last_block(env: envelope.Envelope) -> set[str]:
    """The messages the binding's last Stop block showed, from its slot record (truth): a hook state lost or
    reset since then must not make a continued stop look new and block again."""
    found = env.spent[-1].get("messages") if env.spent else None
    return {m for m in found if isinstance(m, str)} if isinstance(found, list) else set()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
