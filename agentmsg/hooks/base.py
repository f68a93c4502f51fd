"""The hooks' shared part: the run of one hook, its plumbing, the per-binding hook state, and the
records of a delivery attempt.  Lean: it runs on every prompt."""

from __future__ import annotations

import os
import sys
import time

from agentmsg import PACKAGE_DIR, TOOL, __version__, fsio, records
from agentmsg.backends.file import ahead, hookstate, idle, layout
from agentmsg.backends.file.derived import quietly
from agentmsg.backends.file.store import FileStore, FileTxn
from agentmsg.domain import envelope, kinds, rules
from agentmsg.hosts import base as hostcmd
from agentmsg.hosts import registry
from agentmsg.paths import resolve_root_str
from agentmsg.runtime import doorbell
from agentmsg.service import attempts as written
from agentmsg.text import boundary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from types import ModuleType
    from typing import Any

    from agentmsg.domain.values import Page, Registry
    from agentmsg.hosts.base import Host

    Binding = tuple[str, str, Registry]

MIDTURN = "PostToolUse"
EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", MIDTURN)
#: Other hosts' names for the same three events (docs/HOSTS-NOTES.md).
EVENT_ALIASES = {"BeforeAgent": "UserPromptSubmit", "AfterAgent": "Stop", "sessionStart": "SessionStart",
                 "userPromptSubmitted": "UserPromptSubmit", "agentStop": "Stop"}
#: Events ``hooks/run <host> fast`` may answer from the idle marker alone (never SessionStart).
FAST_EVENTS = ("UserPromptSubmit", "Stop")
PROBE = "AgentmsgProbe"  # agentmsg doctor's question: which agentmsg, interpreter and root would a hook use?
REPRESENT_AFTER = rules.REPRESENT_AFTER
#: Messages a hook reads per binding: more than any cap can show, never the whole backlog.
CANDIDATES = 60
LOCK_TIMEOUT = 2.0  # seconds; AGENTMSG_HOOK_LOCK_TIMEOUT overrides (at most 10)
LOG_MAX = 1 << 20


# ---- a host's hook JSON on stdin: bounded, one object, and the session ids it may carry ----------------

STDIN_MAX = 16 << 20


class HookError(Exception):
    """A reason to fail open, written to hooks.log."""


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


class LockTimeout(HookError):
    """The collaboration's write lock stayed held past ``LOCK_TIMEOUT``: nothing was written."""


def _errors() -> ModuleType:
    """``agentmsg.errors``, imported only when an exception is being matched (it costs ~0.3 ms bare)."""
    from agentmsg import errors

    return errors


def _nothing() -> None:
    pass


def _notices(root: str, pin: str, env: Mapping[str, str]) -> str:
    """Collision notices waiting for this session (``edits/<pin key>.notice``), rendered and taken; one
    ``lexists`` when there are none."""
    if not os.path.lexists(os.path.join(root, layout.EDITS, layout.pin_key(pin) + layout.NOTICE)):
        return ""
    from agentmsg.backends.file import edits
    from agentmsg.domain import collisions
    from agentmsg.hooks import edited

    return edited.render(edits.take(root, pin), collisions.window(env))


class HookBase:
    """What every event shares: the run, its plumbing, the per-binding state and the attempt records;
    each event is a subclass (``hooks.session_start``, ``prompt``, ``midturn``, ``stop``, ``render_ahead``)."""


    def __init__(self, host: str, env: Mapping[str, str]) -> None:
        self.host, self.env = host, env
        self.cwd = ""  # the session's working directory (run: the hook's input names it)
        self.spec: Host = registry.get_or_nothing(host)  # an unknown name fails in run()
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
        self.unit = self.spec.units  # how each host counts (docs/HOSTS-NOTES.md)
        self.cli = boundary.CLI = hostcmd.cli_command(self.spec, env)  # every command the text names runs as shown
        self.key = ahead.launcher_key(env)  # the environment the launcher checks a delivery rendered ahead against
        self.mirrored: bool | None = None  # a mirror is wanted for the root (the renderer: as the facts say)
        self.mirror_runs = False  # the renderer runs inside the root's mirror (it renders a replica root too)
        self.source: object = None
        self.preface = ""  # text shown before this run's own (collision notices: hooks/edited.py)

    # ---- plumbing ------------------------------------------------------------

    def run(self, raw: bytes) -> tuple[bytes, Callable[[], None]]:
        if not self.serves():
            raise HookError(f"unknown host {self.host[:20]!r}: expected one of {', '.join(registry.hook_runtimes())}")
        named: str | None
        source: str | None
        try:  # resolved once, as FileStore does: the root may be a link, nothing inside it may
            named, source = resolve_root_str(None, self.env)
            self.root = os.path.realpath(named)
        except _errors().UsageError:
            named = source = None
            self.root = None
        data = parse_stdin(raw)
        given_cwd = data.get("cwd")  # the session's working directory: where a typed message's artifacts are
        self.cwd = given_cwd if isinstance(given_cwd, str) and os.path.isabs(given_cwd) else os.getcwd()
        self.source = data.get("source")  # SessionStart: startup, resume, clear, compact or fork
        event, session = data.get("hook_event_name"), data.get("session_id", data.get("sessionId"))
        event = EVENT_ALIASES.get(event, event) if isinstance(event, str) else event
        if event == PROBE:
            self.event = event
            return self.probe(named, source), _nothing
        if event not in EVENTS:
            raise HookError(f"unsupported hook_event_name {str(event)[:40]!r}")
        self.event = event
        if self.spec.defers_to_plugin(self.env):
            return b"", _nothing  # a user-level copy while the host's plugin is enabled: the plugin's hook runs
        if event == "SessionStart":
            from agentmsg.runtime import spawn  # SessionStart only

            spawn.prepare_cli(self.env)  # the CLI's first call must not wait for pip (detached, fail-open)
        if not is_session(session):
            raise HookError(f"invalid session_id {str(session)[:40]!r}")
        self.pin = f"{self.spec.runtime}:{session}"
        if self.root is None or not os.path.isdir(self.root):
            return self.unbound(event), _nothing  # no state root: this machine never used agentmsg
        # Presence (runtime/presence.py): a prompt or a tool call marks a turn, a Stop or a start its end.
        quietly(idle.mark_presence, self.root, self.pin, layout.REST if event in ("Stop", "SessionStart")
                else layout.TURN)
        if doorbell.mirror_wanted(self.root, self.env):  # a replica root: its mirror keeps it current
            self._start_mirror()
        # The fast path's generation, read before any state (docs/DELIVERY.md, "Fast path").
        keyed = self._launcher_keyed(str(session))
        token = self._idle_token() if keyed and (event in FAST_EVENTS or event == MIDTURN) else None
        self.busy = token is None
        self.store = FileStore(self.root, lock_timeout=self.lock_timeout, on_wake=_nudge)
        if keyed:  # a delivery the launcher printed from .ready: folded before anything reads the state
            self.settle_claim(final=True)
        if event == "SessionStart":
            from agentmsg.runtime import facts as sessionfacts  # SessionStart only

            self._wake_step(sessionfacts.record, self.root, self.pin,
                            sessionfacts.gather(self.host, str(session), self.env))
            if self.env.get("AGENTMSG_TICKET"):  # a session agentmsg spawned binds itself (hooks/ticket.py)
                from agentmsg.hooks import ticket

                self._wake_step(ticket.admit, self, self.env)
        binds = self._locked_call(self.store.bound, self.pin)
        if not binds:
            out, after = self.unbound(event), _nothing  # not joined: joining never happens implicitly
        else:
            if event != "Stop":  # collision notices (hooks/edited.py) and claims news (hooks/claimnews.py)
                self.preface = self._news(data, binds)
            handler = {"SessionStart": self.session_start, "UserPromptSubmit": self.prompt, "Stop": self.stop,
                       MIDTURN: self.post_tool}[event]
            out, after = handler(data, binds)
            if self.preface:
                out = self.output("")  # the handler had nothing to say: the notices alone
        if event == MIDTURN:
            if token is not None and not self.mid_busy and not out:
                quietly(idle.mark_midturn_quiet, self.root, self.pin, token)  # until a writer wakes it
        elif token is not None and not self.busy and not out:
            quietly(idle.mark_idle, self.root, self.pin, token)  # nothing to show until a writer wakes it
        elif binds and self.spec.midturn:
            # A prompt counted or a context cleared may bring a shown message due again between tool calls.
            quietly(idle.clear_midturn, self.root, self.pin)
        if event == "Stop" and token is not None and self.stop_quiet and not out:
            quietly(idle.mark_stop_quiet, self.root, self.pin, token)  # unread mail, and nothing to do
        if keyed:
            self._keep_ahead(bool(binds))
        return out, after

    def _news(self, data: Mapping[str, Any], binds: list[Binding]) -> str:
        """What this session is told before its own delivery: collision notices left for it, and claims others
        hold that it was not told of yet (each costs one ``lexists`` or ``stat`` when there is none)."""
        root = self.root or ""
        text = _notices(root, self.pin, self.env) if self.event != "SessionStart" else ""
        if os.path.exists(os.path.join(root, layout.CLAIMS)) or os.path.lexists(
                os.path.join(root, layout.EDITS, layout.pin_key(self.pin) + layout.TOLD)):
            from agentmsg.hooks import claimnews

            text += self._wake_step(claimnews.news, root, self.pin, {c: a for c, a, _r in binds}, self.cli,
                                    data.get("cwd")) or ""
        return text

    def serves(self) -> bool:
        """Whether this entry serves the host it was named (``hooks/run NAME``; Cursor has its own entry)."""
        return self.spec.name == self.host and self.spec.runs_hooks

    def _start_mirror(self) -> None:
        """Spawn ``agentmsg sync`` unless a helper mirrors this root (a flock probe, then a detached process)."""
        explicit = self.env.get("AGENTMSG_CLI")
        found = None if explicit else hostcmd.launcher(os.path.abspath(PACKAGE_DIR))
        command = [explicit] if explicit else ["/bin/sh", found] if found else None
        if command is not None and self.root is not None:
            doorbell.ensure_mirror(self.root, self.env, command)

    def _wake_step(self, step: Callable[..., Any], *args: Any) -> Any:
        """A wake-up bookkeeping step (issue 11): its failure is logged and never costs the delivery."""
        try:
            return step(*args)
        except Exception as exc:
            self.log(exc)
            return None

    def _launcher_keyed(self, session: str) -> bool:
        """Whether ``hooks/run`` names this session's marker files as this run does."""
        if self.spec.session_on_stdin:
            return True  # the launcher keys the markers by stdin's session_id, the one this run read
        var = self.spec.hook_var
        return var is not None and self.env.get(var) == session  # a shell's variable is inherited: not its key

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
        """A session with no binding: nothing, except where the host may not find the CLI by name
        (``Host.bin_on_path``) and this shell's PATH, checked now, has no ``agentmsg``: there SessionStart states
        the command to use, so the skill's commands run as shown.  Said once per context (issue 30): not again
        when a session resumes or forks with the history that holds it."""
        if event != "SessionStart" or self.cli == "agentmsg" or self.source in ("resume", "fork"):
            return b""
        if on_path("agentmsg", self.env) is not None:  # the skill's `agentmsg ...` runs as shown: nothing to say
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
                os.replace(path, os.path.join(root, layout.HOOKS_LOG_OLD))
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
        fresh = {"v": 2, "pin": self.pin, "prompt": 0, "shown": {}, "blocked": [], "rpos": 0, "seen": None, "high": 0}
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

    def _due(self, tx: FileTxn, alias: str, st: dict[str, Any], *, requests_only: bool = False) -> Page:
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
        box = self.outbox(tx)
        collab, event = tx.collab, self.event
        written.present(tx, alias, ids, attempt=attempt, host=self.host, via=event, pin=self.pin, durable=durable,
                        outbox=box)

        def complete() -> None:
            if box is not None:
                written.complete(None, alias, attempt=attempt, host=self.host, via=event, count=len(ids), outbox=box)
                return
            with self.txn(collab) as after:
                written.complete(after, alias, attempt=attempt, host=self.host, via=event, count=len(ids))

        return complete

    def outbox(self, tx: FileTxn) -> _Outbox | None:
        """A mirrored root's outbox for ``tx``'s collaboration: there the hooks' records go to the server."""
        return _Outbox(tx.root, tx.collab) if self.store.replica_of is not None else None

    def output(self, text: str) -> bytes:
        if self.preface:
            text, self.preface = self.preface + text, ""
        if self.event == "Stop":
            return records.dumps({"decision": "block", "reason": text}).encode()
        return records.dumps(self.spec.context(self.event, text)).encode()


    def _envelope(self, tx: FileTxn, alias: str, reg: Registry) -> envelope.Envelope | None:
        """This exact binding's envelope, if it is active."""
        recs = tx.delivery_records()
        if self.store.replica_of is not None:  # slots spent here and not yet back from the server
            from agentmsg.backends.file import outbox  # a replica root only

            recs += outbox.slots(tx.root, tx.collab)
        env = envelope.latest(envelope.fold(recs), alias, self.pin)
        if env is None:
            return None
        status = env.status(time.time(), holder=reg.holder(alias), closed=reg.closed)
        return env if status == "active" else None

    # ---- each event's code is its own module: ``hooks.core.Hook`` runs them, importing only the one it needs

    def session_start(self, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
        raise NotImplementedError

    def prompt(self, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
        raise NotImplementedError

    def post_tool(self, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
        raise NotImplementedError

    def stop(self, data: Mapping[str, Any], binds: list[Binding]) -> tuple[bytes, Callable[[], None]]:
        raise NotImplementedError

    def settle_claim(self, *, final: bool) -> bool:
        raise NotImplementedError

    def _keep_ahead(self, bound: bool) -> None:
        raise NotImplementedError


class _Outbox:
    """``service.attempts.Outbox`` over ``backends.file.outbox``: each put is one entry with its own id."""

    __slots__ = ("collab", "root")

    def __init__(self, root: str, collab: str) -> None:
        self.root, self.collab = root, collab

    def put(self, stream: str, recs: list[dict[str, Any]], *, durable: bool) -> None:
        from agentmsg.backends.file import outbox  # a replica root only

        outbox.put(self.root, self.collab, stream, recs, entry_id=records.uuid4(), durable=durable)


class _LockedTxn(FileTxn):
    """A transaction whose lock timeout fails the hook open (LockTimeout), never blocks the host."""

    def __enter__(self) -> FileTxn:
        try:
            return super().__enter__()
        except _errors().StoreFailed as exc:
            raise LockTimeout(str(exc)) from None


def _nudge(root: str, pins: list[str]) -> None:
    """The store's ``on_wake``: ring the helper for woken pins."""
    doorbell.nudge(root, pins)


def on_path(name: str, env: Mapping[str, str]) -> str | None:
    """The executable ``name`` the shell would run with ``env``'s PATH (``shutil.which`` without importing it)."""
    for folder in (env.get("PATH") or "").split(os.pathsep):
        cand = os.path.join(folder or ".", name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def _mark_shown(st: dict[str, Any], seqs: Iterable[int]) -> None:
    """Shown at this prompt: not due again for ``REPRESENT_AFTER`` prompts (unless retried or cleared)."""
    for seq in seqs:
        st["shown"][str(seq)] = st["prompt"]
        if type(st.get("high")) is int:  # the highest seq ever shown; a state from before it was kept has none
            st["high"] = max(st["high"], seq)


def never_shown(st: dict[str, Any], seqs: Iterable[int]) -> bool:
    """Whether none of ``seqs`` was shown to this binding before (unknown, so False, for an older state)."""
    high = st.get("high")
    return type(high) is int and all(seq > high for seq in seqs)


def artifact_notes(hook: HookBase) -> Callable[[Any], str]:
    """``notes`` for ``boundary.render``: a typed message's artifacts as they are in this session's checkout at
    rendering (runtime/artifacts.py: unchanged, changed, missing or unverified), on one attribution line."""
    from agentmsg.runtime import artifacts

    here: list[artifacts.Checkout] = []

    def note(msg: Any) -> str:
        arts = artifacts.of(getattr(msg, "handoff", None))
        if not arts:
            return ""
        if not here:
            here.append(artifacts.Checkout(hook.cwd or os.getcwd()))
        found = artifacts.states(arts[:20], here[0])
        more = f" · {len(arts) - 20} more: {boundary.show_command(msg.collab, msg.id)}" if len(arts) > 20 else ""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        return (f"  artifacts in this checkout as of {stamp}: "
                + " · ".join(f"{boundary.one_line(loc[:160])} {state}" for loc, state in found) + more + "\n")

    return note
