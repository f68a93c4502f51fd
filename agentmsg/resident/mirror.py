"""``agentmsg sync``: keep a local state root in step with a remote store, so the hooks read local files.

The mirror duty of the resident helper (``resident/helper.py``): ``agentmsg sync`` is the helper of a replica
root, under the root's one helper lock, and rings deferred wake-ups between its rounds.  Each round it:

1. **pulls**: for every collaboration the remote lets it read, compares the
   remote's last sequence per stream (``Replica.streams``) with the local
   journal's and copies the missing sealed records verbatim
   (``Replica.records_since`` -> ``FileStore.import_records``, which checks
   the chain and skips what it holds).  Streams that carry ``cseq``
   (events, notes, inboxes) are imported merged in ``cseq`` order, as they
   were written; receipts and delivery records after them.
2. **pushes** the hooks' outbox (``backends/file/outbox.py``) through the
   remote port, each entry once: an entry whose id is already in the local
   or the remote journal is never pushed again; an entry is removed when its
   records have come back down.
3. **indexes claims**: when the records it copied claim, release or end claims, it rewrites this machine's
   claims index (``ROOT/claims.json``, what the pre-tool hook reads) and wakes the participants here;
4. **shares presence** (at most every ``PRESENCE_EVERY`` seconds): reports to the store the state of each
   participant whose hooks ran on this machine (when it changed, and at least every
   ``domain.presence.REPORT_EVERY``), and pulls what the other machines reported into
   ``presence.remote.json``, so ``roster`` and a send's result line see sessions there, coarsely.
5. **waits** on the remote (``Replica.wait_any``: LISTEN/NOTIFY on
   PostgreSQL), never longer than a short slice while the outbox has
   entries, and exits after ``idle_exit`` seconds with nothing to do.

A lost connection is retried with backoff (the remote reconnects on its
next call); a record that does not continue the local chain stops the
mirror (exit 13): the replica never forks history.  Which collaborations:
all the remote lets this role read (on PostgreSQL, row-level security
decides), so a collaboration this machine joins later is already here.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from agentmsg import fsio, records
from agentmsg.backends.file import layout, outbox, replica
from agentmsg.backends.file.store import FileStore
from agentmsg.domain import kinds
from agentmsg.errors import AgentmsgError, IdentityError, NotFound, StoreFailed, TamperDetected, UsageError
from agentmsg.ports import Record, Replica, Store
from agentmsg.runtime import doorbell

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentmsg.service.context import Ctx

#: Default seconds without remote changes or outbox entries before the mirror exits.
IDLE_EXIT = 900.0
#: Seconds between full catch-ups while the remote announces nothing (a safety net under LISTEN/NOTIFY).
FULL_EVERY = 10.0
#: Longest single wait on the remote: the outbox (local) is looked at between waits.
SLICE = 0.5
PAGE = 1000
#: Present while a mirror runs; found at start, it means the last one died mid-import (see Mirror.recover).
DIRTY = ".mirror-running"
#: Events after which this machine's claims index is rewritten (claims made, released, or ended by a leave,
#: a kill or a close).
CLAIM_EVENTS = frozenset((kinds.CLAIMED, kinds.RELEASED, kinds.LEFT, kinds.KILLED, kinds.CLOSED))
#: Seconds between two rounds of presence sharing.
PRESENCE_EVERY = 5.0


class Mirror:
    """One local root mirroring one remote store."""

    def __init__(self, local: FileStore, remote: Store, url: str, *, page: int = PAGE,
                 say: Callable[[str], None] | None = None) -> None:
        self.local, self.remote, self.url, self.page = local, remote, url, page
        self.source: Replica = remote  # type: ignore[assignment]  # every backend that can be mirrored is one
        self.say = say or (lambda line: None)
        self.came_back: set[str] = set()  # outbox entry ids seen in imported records
        self.importing = self.stopping = False
        self.known: set[str] = set()  # collaborations pulled at least once
        self.watched: set[str] = set()  # collaborations waited on at least once
        self.pushed: set[str] = set()
        self.rejected: dict[str, Record] = {}  # entries the store refused (a role not let in, say)
        #: The helper's other duties, between rounds; True while they have work waiting (the mirror stays).
        self.between: Callable[[], bool] = lambda: False
        #: Whether the render duty expects a claim to fold soon (a delivery rendered ahead waits): shorter waits.
        self.soon: Callable[[], bool] = lambda: False
        self.reported: dict[tuple[str, str], tuple[tuple[object, ...], float]] = {}  # (collab, alias) -> last report
        self.shared_at: float | None = None  # monotonic time of the last presence round
        self.claims_moved: set[str] = set()  # collaborations whose imported events claim, release or end claims

    # ---- pull ---------------------------------------------------------------------------------------

    def pull(self, *, full: bool = True) -> int:
        """Copy every missing record of every readable collaboration (only of new ones unless ``full``)."""
        found = self.remote.collabs()
        copied = sum(self.pull_collab(c) for c in found if full or c not in self.known)
        self.known.update(found)
        return copied

    def local_streams(self, collab: str) -> dict[str, int]:
        return self.local.streams(collab) if collab in self.local.collabs() else {}

    def pull_collab(self, collab: str) -> int:
        copied = 0
        while True:
            have = self.local_streams(collab)
            todo = {s: have.get(s, 0) for s, last in self.source.streams(collab).items() if last > have.get(s, 0)}
            if not todo:
                return copied
            before = copied
            ordered = {s: n for s, n in todo.items() if not s.startswith("receipts/") and s != "delivery"}
            pages = {s: self.source.records_since(collab, s, n, self.page) for s, n in ordered.items()}
            copied += self._import_ordered(collab, pages)
            if any(len(p) >= self.page for p in pages.values()):
                continue  # a stream has more: receipts wait until every message they name is here
            for s in sorted(set(todo) - set(ordered)):
                recs = self.source.records_since(collab, s, todo[s], self.page)
                copied += self._import(collab, s, recs)
            if copied == before:  # the remote names records it does not return: never spin on that
                raise StoreFailed(f"collaboration {collab}: the store reports records after "
                                  f"{', '.join(f'{s} {n}' for s, n in sorted(todo.items()))} but returned none")

    def _import_ordered(self, collab: str, pages: dict[str, list[Record]]) -> int:
        """Import the pages merged by ``cseq``, up to where a truncated page could hide an earlier record."""
        bound = min((p[-1].get("cseq", 0) for p in pages.values() if len(p) >= self.page), default=None)
        merged = sorted(((r.get("cseq", 0), s, r) for s, p in pages.items() for r in p
                         if bound is None or r.get("cseq", 0) <= bound), key=lambda t: t[0])
        copied, run_stream = 0, None
        run: list[Record] = []
        for _c, s, rec in merged:
            if s != run_stream and run:
                copied += self._import(collab, run_stream or "", run)
                run = []
            run_stream = s
            run.append(rec)
        if run:
            copied += self._import(collab, run_stream or "", run)
        return copied

    def _import(self, collab: str, stream: str, recs: list[Record]) -> int:
        self.importing = True
        try:
            placed = self.local.import_records(collab, stream, recs)
        finally:
            self.importing = False
        if self.stopping:
            raise _Stopped
        self.came_back.update(r["outbox"] for r in placed if isinstance(r.get("outbox"), str))
        if stream == "events" and any(r.get("type") in CLAIM_EVENTS for r in placed):
            self.claims_moved.add(collab)
        return len(placed)

    def index_claims(self) -> None:
        """Claims made, released or ended on another machine reach this machine's claims index (the pre-tool
        hook reads only that), and the participants here hear of them (hooks/claimnews.py)."""
        if not self.claims_moved:
            return
        from agentmsg.service import claims

        moved, self.claims_moved = self.claims_moved, set()
        claims.write_index(self.local, self.local.root)
        for collab in sorted(moved):
            claims.wake_members(self.local, self.local.root, collab)

    # ---- push ---------------------------------------------------------------------------------------

    def reconcile(self) -> None:
        """At start: outbox entries whose records a previous run already copied down count as back."""
        waiting = {e["id"] for e in outbox.pending(self.local.root)} - self.came_back
        if not waiting:
            return
        for entry in outbox.pending(self.local.root):
            collab, stream = entry["collab"], entry["stream"]
            if collab not in self.local.collabs():
                continue
            if stream not in self.local_streams(collab):
                continue
            for rec in self.local.records_since(collab, stream, 0, limit=1 << 62):
                if rec.get("outbox") in waiting:
                    self.came_back.add(rec["outbox"])

    def push(self) -> int:
        """Send each outbox entry to the remote once; returns how many were sent now."""
        sent = 0
        for entry in outbox.pending(self.local.root):
            eid, collab, stream = entry["id"], entry["collab"], entry["stream"]
            if eid in self.came_back or eid in self.pushed:
                continue
            try:
                have = self.local_streams(collab).get(stream, 0)
                if any(r.get("outbox") == eid for r in self.source.records_since(collab, stream, have, 1 << 62)):
                    self.pushed.add(eid)  # stored by a run that died before it saw it come back
                    continue
                with self.remote.transaction(collab) as tx:
                    if stream == "delivery":
                        for item in entry["items"]:
                            tx.append_delivery(item)
                    else:
                        tx.append_receipts(stream.partition("/")[2], entry["items"])
            except (IdentityError, NotFound, UsageError) as exc:  # refused, not lost in transit: never retried
                self.say(f"agentmsg sync: the store refused outbox entry {eid}: {exc}; kept in "
                         f"{layout.OUTBOX_REJECTED}")
                self.rejected[eid] = entry
                continue
            self.pushed.add(eid)
            sent += 1
        return sent

    def settle(self) -> int:
        """Drop the entries that came back down (and set refused ones aside); returns how many remain."""
        for entry in self.rejected.values():
            fsio.append(os.path.join(self.local.root, layout.OUTBOX_REJECTED), records.canonical(entry) + b"\n")
        left = outbox.remove(self.local.root, self.came_back | set(self.rejected))
        self.pushed -= self.came_back
        self.rejected.clear()
        return left

    # ---- presence ------------------------------------------------------------------------------------

    def share_presence(self, now: float | None = None) -> int:
        """Report the sessions this machine sees and pull the others' reports; returns how many were sent.

        A report the store refuses (an alias this machine's role does not hold) is not this machine's to
        make, and is skipped; nothing here is a record, and nothing here keeps the mirror running."""
        from agentmsg.backends.file import presence as files
        from agentmsg.domain import presence
        from agentmsg.runtime import presence as reading
        from agentmsg.service import wake

        t = time.time() if now is None else now
        sent, pulled = 0, {}
        for collab in self.local.collabs():
            reg = self.local.registry(collab)
            for alias, p in sorted(reg.participants.items()):
                consent = wake.describe(self.local, collab, alias, p.pin, reg)
                seen = reading.here(self.local.root, p.pin, listening=bool(consent and consent["status"] == "active"),
                                    now=t)
                fields = presence.report(seen, p.pin, t)
                if fields is None or not self._due((collab, alias), fields, t):
                    continue
                try:
                    self.source.report_presence(collab, alias, fields)
                except (IdentityError, NotFound, UsageError):
                    continue
                self.reported[(collab, alias)] = ((fields["pin"], fields["state"]), t)
                sent += 1
            for alias, rep in self.source.presence(collab).items():
                holder = reg.participants.get(alias)
                if holder is not None and rep.get("pin") == holder.pin:  # a row the alias's current session left
                    pulled[holder.pin] = {"state": rep.get("state"), "quiet": rep.get("quiet"), "age": rep.get("age"),
                                          "pin": holder.pin, "collab": collab, "alias": alias, "pulled_at": t}
        files.save_pulled(self.local.root, pulled)
        return sent

    def _due(self, key: tuple[str, str], fields: dict[str, object], now: float) -> bool:
        """A report is due when the state changed, or the last one is getting old."""
        from agentmsg.domain import presence

        last = self.reported.get(key)
        return last is None or last[0] != (fields["pin"], fields["state"]) or now - last[1] >= presence.REPORT_EVERY

    # ---- the loop -----------------------------------------------------------------------------------

    def round(self, *, full: bool = True) -> tuple[int, int, int]:
        """One pull, push, pull, and presence when due: (records copied, entries pushed, entries still waiting)."""
        copied = self.pull(full=full)
        sent = self.push()
        if sent:
            copied += self.pull()
        self.index_claims()
        if self.shared_at is None or time.monotonic() - self.shared_at >= PRESENCE_EVERY:
            self.shared_at = time.monotonic()
            self.share_presence()
        return copied, sent, self.settle()

    def recover(self) -> list[str]:
        """After a mirror died mid-import, rewrite the derived files of every collaboration from the journals.

        Records are imported durably first and their views (transcripts, maps, ids) after, without fsync,
        as every writer does; a SIGKILL between the two leaves a view short, which a rebuild corrects.
        """
        marker = os.path.join(self.local.root, DIRTY)
        if not os.path.exists(marker):
            fsio.atomic_write(marker, b"running\n", durable=False)
            return []
        done = []
        for collab in self.local.collabs():
            if self.local.streams(collab).get("events"):
                self.local.rebuild(collab)
                done.append(collab)
        return done

    def run(self, *, once: bool = False, idle_exit: float = IDLE_EXIT) -> dict[str, Any]:
        """Rounds until idle (or one, ``once``); SIGTERM ends it cleanly between imports."""
        import signal

        replica.mark_replica(self.local.root, self.url)
        self.recover()
        previous = signal.signal(signal.SIGTERM, self._terminate)
        try:
            done = self._loop(once=once, idle_exit=idle_exit)
        except _Stopped:
            done = {"exit": "terminated"}
            if not once:
                _wake_all(self.local.root)  # what it rendered goes with it: the next hook runs in full, and starts one
        finally:
            signal.signal(signal.SIGTERM, previous)
        os.unlink(os.path.join(self.local.root, DIRTY))  # only a clean exit: a crash leaves it (see recover)
        return done

    def _terminate(self, _signum: int, _frame: object) -> None:
        """SIGTERM: stop now while waiting; while importing, stop after the current import."""
        self.stopping = True
        if not self.importing:
            raise _Stopped

    def _loop(self, *, once: bool, idle_exit: float) -> dict[str, Any]:
        copied = sent = 0
        errors = 0
        started = False
        last_work = last_full = time.monotonic()
        woke = True
        while True:
            try:
                if not started:
                    copied += self.pull()
                    self.reconcile()
                    started = True
                # A full catch-up when the remote said something changed (or a wait failed), and every
                # FULL_EVERY seconds regardless; otherwise only collaborations that are new since the last.
                full = woke or errors > 0 or time.monotonic() - last_full >= FULL_EVERY
                c, s, left = self.round(full=full)
                if full:
                    last_full = time.monotonic()
                copied, sent = copied + c, sent + s
                if errors:
                    self.say(f"agentmsg sync: reconnected to {replica.redact(self.url)}")
                errors = 0
                waiting = self.between()
                if c or s or left or waiting:
                    last_work = time.monotonic()
                if once:
                    return {"copied": copied, "pushed": sent, "outbox": left}
                idle = time.monotonic() - last_work
                if idle >= idle_exit:
                    _wake_all(self.local.root)
                    return {"copied": copied, "pushed": sent, "outbox": left, "exit": "idle"}
                soon = left or waiting or self.soon()  # outbox entries, a deferred ring, a delivery to fold
                timeout = SLICE if soon else min(SLICE * 10, idle_exit - idle)
                watched = self.remote.collabs()
                woke = self.source.wait_any(watched, max(0.01, timeout))
                # A collaboration waited on for the first time may have records from before its LISTEN:
                # the round after its first wait is a full one.
                woke = woke or not self.watched.issuperset(watched)
                self.watched.update(watched)
            except TamperDetected:
                raise
            except (AgentmsgError, OSError, ConnectionError) as exc:
                if once and not isinstance(exc, StoreFailed):
                    raise
                errors += 1
                delay = min(5.0, 0.1 * 2 ** min(errors, 6))
                self.say(f"agentmsg sync: {type(exc).__name__}: {str(exc)[:200]}; retrying in {delay:.1f}s")
                if once and errors > 3:
                    raise
                time.sleep(delay)
            except Exception as exc:  # a driver's own connection error (psycopg.OperationalError, say)
                if once or ("Operational" not in type(exc).__name__ and "Connection" not in type(exc).__name__):
                    raise
                errors += 1
                delay = min(5.0, 0.1 * 2 ** min(errors, 6))
                self.say(f"agentmsg sync: {type(exc).__name__}: {str(exc)[:200]}; retrying in {delay:.1f}s")
                time.sleep(delay)


class _Stopped(Exception):
    """SIGTERM arrived: the mirror leaves between imports, cleanly."""


def _wake_all(root: str) -> None:
    """On exit, drop every marker and delivery rendered ahead (``.idle``, ``.stop``, ``.mid``, ``.ready``): the
    next hook runs in full, and the hook restarts the mirror (a mirror killed outright leaves them: each
    still matches the replica as it stands, which nothing changes until a mirror runs again)."""
    base = fsio.existing_dir(root, layout.IDLE)
    if base is None:
        return
    for runtime in os.listdir(base):
        folder = os.path.join(base, runtime)
        if os.path.isdir(folder) and not os.path.islink(folder):
            for name in os.listdir(folder):
                if name.endswith(layout.VOIDED_MARKS):
                    try:
                        os.unlink(os.path.join(folder, name))
                    except OSError:
                        pass


def command(ctx: Ctx, *, once: bool, idle_exit: str | None) -> dict[str, Any]:
    """``agentmsg sync``: the store to mirror (``--store``/``AGENTMSG_STORE``, else the one this replica root is
    marked with) and the idle time (``--idle-exit``/``AGENTMSG_SYNC_IDLE_EXIT``), then :func:`sync`."""
    from agentmsg.domain import validate

    url = ctx.store_url
    if url is None:
        marked = replica.replica_of(str(ctx.root)) if ctx.root.is_dir() else None
        url = marked if marked not in (None, "?") else None
    if url is None:
        raise UsageError("no store to mirror: pass --store URL or set AGENTMSG_STORE")
    idle_exit = idle_exit or ctx.env.get("AGENTMSG_SYNC_IDLE_EXIT")
    seconds = validate.duration(idle_exit, "--idle-exit", maximum=7 * 86400) if idle_exit else IDLE_EXIT
    return sync(str(ctx.root), url, once=once, idle_exit=seconds)


def sync(root: str, url: str, *, once: bool = False, idle_exit: float = IDLE_EXIT) -> dict[str, Any]:
    """``agentmsg sync``: run the mirror as the root's helper; while another helper mirrors it, return at once
    (one that does not mirror is asked to leave)."""
    from agentmsg.backends import url as storeurl
    from agentmsg.resident import helper

    fsio.ensure_dir(root)
    local = FileStore(root, on_wake=doorbell.nudge)
    _refuse_foreign(local, url)
    duties = (doorbell.MIRROR, doorbell.RETRY) if once else (doorbell.MIRROR, doorbell.RENDER, doorbell.RETRY)
    resident = helper.Helper(local.root, duties, local)
    try:
        lock = resident.take(leave=True)
    except OSError as exc:
        raise StoreFailed(f"cannot take {local.root}'s helper lock: {exc.strerror or exc}") from exc
    if lock is None:
        return {"root": local.root, "store": replica.redact(url), "running": "already",
                "detail": f"a mirror already runs for {local.root}"}
    remote = storeurl.open_store(url, on_wake=doorbell.nudge)
    mirror = Mirror(local, remote, url, say=lambda line: print(line, file=sys.stderr))
    resident.ring_store = remote  # a deferred ring is decided where the CLI decides it: on the remote store
    mirror.between, mirror.soon = resident.between, resident.soon
    if not once:  # the render duty: each session's next prompt, rendered from the replica (docs/MIRROR.md)
        from agentmsg.hooks.core import Hook
        from agentmsg.resident.renderer import Renderer

        replica.mark_replica(local.root, url)  # before its store is made: the hooks' records go to the outbox
        rendering = FileStore(local.root, lock_timeout=2.0, on_wake=doorbell.nudge)
        resident.renderer = Renderer(local.root, rendering, Hook, mirrors=True)
        from agentmsg.hosts import registry

        logger = Hook(registry.NAMES[0], {})  # the render duty's failures: one line each in hooks.log
        logger.root, logger.event = local.root, "mirror"
        resident.log = logger.log
    done = resident.hold(lock, lambda: mirror.run(once=once, idle_exit=idle_exit), bell=not once)
    return {"root": local.root, "store": replica.redact(url), "running": "done", **done}


def _refuse_foreign(local: FileStore, url: str) -> None:
    """A mirror never adopts history that is not the server's, nor switches servers under a replica."""
    from agentmsg.errors import UsageError

    shown = replica.redact(url)
    if local.root == _file_root(url):
        raise UsageError(f"{shown} is this root itself: a root cannot mirror itself")
    marked = replica.replica_of(local.root)
    if marked is None and local.collabs():
        raise UsageError(f"{local.root} holds collaborations of its own, so it cannot become a replica of {shown}; "
                         "set AGENTMSG_HOME to an empty folder for the mirror")
    if marked is not None and marked != shown:
        raise UsageError(f"{local.root} mirrors {marked}, not {shown}; set AGENTMSG_HOME to another folder")


def _file_root(url: str) -> str | None:
    scheme, sep, rest = url.partition("://")
    return os.path.realpath(rest) if sep and scheme == "file" else None
