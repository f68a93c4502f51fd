"""Every path under the state root, built here and nowhere else.

Names on disk come only from validated aliases, UUIDs and hashes.
"""

from __future__ import annotations

import os

from agentmsg import fsio, records
from agentmsg.domain import rules

COLLABS = "collabs"
PINS = "pins"
HOOKS_LOG = "hooks.log"
#: The log kept once it passed its size: ``hooks.log.1``.
HOOKS_LOG_OLD = HOOKS_LOG + ".1"
#: The hook fast path's markers (docs/DELIVERY.md, "Fast path"): ``idle/<runtime>/<session>.{gen,idle,mid,stop}``.
IDLE = "idle"
#: Their suffixes: the generation token, and the markers that copy it ("nothing to show", "nothing due
#: between tool calls", "a Stop hook has nothing to do").  ``hooks/run`` spells the same names in sh.
GEN, IDLE_MARK, MID, STOP = ".gen", ".idle", ".mid", ".stop"
#: The renderer of deliveries ahead (backends/file/ahead.py), beside them: a session's recorded facts, its
#: delivery rendered ahead, a served delivery's fold, and the launcher's claim on it.
FACTS, READY, FOLD, TOOK = ".env", ".ready", ".fold", ".took"
#: The renderer's answer "this prompt runs the hook in full" for the generation it holds: a launcher waiting
#: for a render in flight stops waiting.
FULL = ".full"
#: A session's presence (``runtime/presence.py``), by modification time only: a prompt or a tool call marks a
#: turn (``.turn``), a Stop or a session start its end (``.rest``).  The launcher touches them without Python.
TURN, REST = ".turn", ".rest"
#: The post-tool edit hook's fast path (docs/CLAIMS.md, "Collision notices"): ``<session>.solo``, "this session is
#: bound to no collaboration"; ``hooks/run`` trusts it only while it is newer than ``pins/`` (any join changes that).
SOLO = ".solo"
#: Every marker a writer or the mirror's exit voids so that the next hook runs in full.
VOIDED_MARKS = (IDLE_MARK, MID, STOP, READY)
#: The resident helper's own files (``resident/helper.py``), one per root under ``idle/``: its lock, its pid and
#: duties, its doorbell; and, while it serves the command line (``cli/serve.py``), the thin client's socket.
HELPER_LOCK, HELPER_PID, HELPER_FIFO = "helper.lock", "helper.pid", "helper.fifo"
HELPER_SOCK = "helper.sock"
#: The pin index's lock, under ``pins/`` (never a pin's file: those are hashes).
PINS_LOCK = ".lock"
#: The hooks' per-binding state under ``state/``: ``<alias>.hook.json``.
HOOK_STATE = ".hook.json"
#: Subdirectories of a collaboration; each is checked for a symlink before use (a transaction: once per change
#: of the collaboration directory, `FileTxn._check_subdirs`).
COLLAB_SUBDIRS = ("inbox", "receipts", "state", "ids", "transcripts")

EVENTS = "collab.jsonl"
LOG = "log.jsonl"
DELIVERY = "delivery.jsonl"
REGISTRY = "registry.yaml"
LOCK = "write.lock"
TRANSCRIPT = "collaboration.md"
#: ``log render --html``: one self-contained page (derived, written only on request).
HTML = "collaboration.html"
#: The full-text search index (derived, under the root: one index for every collaboration).
SEARCH = "search.sqlite"
#: A replica root (``agentmsg sync``): the store it mirrors, and the hooks' receipts on their way there.
REPLICA = "replica.json"
#: Presence across machines (``backends/file/presence.py``): pulled by a replica root's mirror; reported
#: into a file store's collaboration by the mirrors of the machines that mirror it.
REMOTE_PRESENCE = "presence.remote.json"
PRESENCE = "presence.json"
OUTBOX = "outbox.jsonl"
OUTBOX_LOCK = "outbox.lock"
OUTBOX_REJECTED = "outbox.rejected.jsonl"
#: Every live claim of every collaboration under the root (docs/CLAIMS.md): the pre-tool hook's one read.  Its
#: absence (or emptiness) tells ``hooks/run`` there is nothing to check, without an interpreter.
CLAIMS = "claims.json"
#: Collision notices (docs/CLAIMS.md): this machine's recent edits of each file (``edits/<sha256(path)[:32]>.log``)
#: and the notices waiting for a session's next prompt or tool call (``edits/<pin key>.notice``).
EDITS, EDIT_LOG, NOTICE = "edits", ".log", ".notice"
#: The claims already told to a session (hooks/claimnews.py): ``edits/<pin key>.told``.
TOLD = ".told"
#: Wake-ups: per session, under ``wake/``.
WAKE = "wake"
#: Per session under ``wake/<pin key>.*``: the facts its hooks recorded, its waiter's lock and token, and a ring
#: left for the waiter.
SESSION_FACTS, WAITER_LOCK, WAITER_TOKEN, WAITER_RING = "json", "lock", "waiter", "ring"
#: Sessions agentmsg starts (``agentmsg spawn``): under ``spawn/``, the private tmux server of headless sessions
#: and, for the moment between writing and the new window reading it, each new session's environment.
SPAWN, SPAWN_TMUX, SPAWN_ENV = "spawn", "tmux.sock", ".env.json"
#: The journal of each plain stream a mirror copies (``ports.Replica``); ``inbox/<alias>``, ``receipts/<alias>``.
STREAM_FILES = {"events": EVENTS, "notes": LOG, "delivery": DELIVERY}

#: Every kind of file under a state root: ``(path, role, written by, read by, what it holds)``.
#: ``role``: ``truth`` (append-only, hash-chained journals: the source of truth), ``derived`` (rebuilt from the
#: truth when missing or wrong), ``local`` (this machine's own notes, never a message's only copy), ``lock``
#: (never deleted), ``transient`` (a claim or a doorbell that lives for one hand-over), or ``log``.
#: docs/ARCHITECTURE.md's tree is generated from it (``tests/docs/test_house.py`` holds them together).
FILES: tuple[tuple[str, str, str, str, str], ...] = (
    (HOOKS_LOG, "log", "hooks", "people, doctor", "one line per hook diagnostic"),
    (HOOKS_LOG_OLD, "log", "hooks", "people", "the log before it passed 1 MiB"),
    (f"{PINS}/<sha256(pin)[:32]>.json", "derived", "store", "hooks, store", "pin -> [{collab, alias}]"),
    (f"{PINS}/{PINS_LOCK}", "lock", "store", "store", "the pin index's writers"),
    (f"{IDLE}/<runtime>/<session>{GEN}", "derived", "hooks", "hooks/run, store",
     "the fast path's generation; every writer deletes it"),
    (f"{IDLE}/<runtime>/<session>{IDLE_MARK}", "derived", "hooks", "hooks/run", "nothing to show at a prompt"),
    (f"{IDLE}/<runtime>/<session>{MID}", "derived", "hooks", "hooks/run", "nothing due between tool calls"),
    (f"{IDLE}/<runtime>/<session>{STOP}", "derived", "hooks", "hooks/run", "a Stop hook has nothing to do"),
    (f"{IDLE}/<runtime>/<session>{FACTS}", "derived", "hooks", "renderer", "what the renderer needs to render ahead"),
    (f"{IDLE}/<runtime>/<session>{READY}", "derived", "renderer", "hooks/run",
     "the next prompt's delivery, rendered ahead"),
    (f"{IDLE}/<runtime>/<session>{FOLD}", "derived", "renderer", "renderer, hooks",
     "what a served delivery records when folded"),
    (f"{IDLE}/<runtime>/<session>{FULL}", "derived", "renderer", "hooks/run",
     "the next prompt runs the hook in full (no wait for a render)"),
    (f"{IDLE}/<runtime>/<session>{TOOK}", "transient", "hooks/run, renderer", "renderer, hooks",
     "the launcher's claim on a delivery until it is folded"),
    (f"{IDLE}/<runtime>/<session>{TURN}", "local", "hooks/run, hooks", "roster, send",
     "presence: its mtime is the session's last prompt or tool call"),
    (f"{IDLE}/<runtime>/<session>{REST}", "local", "hooks/run, hooks", "roster, send",
     "presence: its mtime is the session's last Stop or start"),
    (f"{IDLE}/<runtime>/<session>{SOLO}", "derived", "hooks", "hooks/run",
     "no binding: no edit to record (valid while newer than pins/)"),
    (f"{IDLE}/{HELPER_LOCK}", "lock", "helper", "runtime, hooks", "one resident helper per root"),
    (f"{IDLE}/{HELPER_PID}", "local", "helper", "hooks/run, status", "the helper's pid and duties"),
    (f"{IDLE}/{HELPER_FIFO}", "transient", "hooks/run, runtime", "helper", "the helper's doorbell"),
    (f"{IDLE}/{HELPER_SOCK}", "transient", "helper", "cli", "the thin client's socket (a helper serving the CLI)"),
    (f"{WAKE}/<pin key>.{SESSION_FACTS}", "local", "hooks", "service, runtime",
     "a session's facts for wake-ups (host pid, tmux pane, ...)"),
    (f"{WAKE}/<pin key>.{WAITER_LOCK}", "lock", "waiter", "hosts, runtime", "the session's wake-up waiter"),
    (f"{WAKE}/<pin key>.{WAITER_TOKEN}", "local", "waiter", "waiter", "the newest waiter of the session"),
    (f"{WAKE}/<pin key>.{WAITER_RING}", "transient", "hosts", "waiter", "a ring left for the waiter"),
    (f"{WAKE}/retry-<key>.json", "local", "service", "helper", "a deferred ring the helper rings again"),
    (f"{SPAWN}/{SPAWN_TMUX}", "local", "runtime", "runtime", "the private tmux server of headless spawned sessions"),
    (f"{SPAWN}/<random>{SPAWN_ENV}", "transient", "runtime", "runtime",
     "a spawned session's environment, read and removed as it starts"),
    (SEARCH, "derived", "store", "store", "full-text index (SQLite FTS5) of every collaboration"),
    (CLAIMS, "derived", "service", "hooks/run, hooks", "every live claim (absent: nothing to check before a tool)"),
    (f"{EDITS}/<sha256(path)[:32]>{EDIT_LOG}", "local", "hooks", "hooks",
     "recent edits of one file (who, when) and the collision notices given"),
    (f"{EDITS}/<pin key>{NOTICE}", "local", "hooks", "hooks",
     "collision notices for a session's next prompt or tool call"),
    (f"{EDITS}/<pin key>{TOLD}", "local", "hooks", "hooks", "the claims held by others already told to a session"),
    (REPLICA, "local", "mirror", "store, hooks, mirror", "a replica root: the store it mirrors"),
    (OUTBOX, "truth", "hooks", "mirror", "the hooks' receipts on their way to the mirrored store"),
    (OUTBOX_LOCK, "lock", "hooks, mirror", "hooks, mirror", "the outbox's writers"),
    (OUTBOX_REJECTED, "log", "mirror", "people, verify", "outbox entries the server refused"),
    (REMOTE_PRESENCE, "local", "mirror", "roster, send",
     "presence of sessions on other machines, as the mirror last pulled it"),
    (f"{COLLABS}/<uuid>/{EVENTS}", "truth", "store", "store", "membership and lifecycle events"),
    (f"{COLLABS}/<uuid>/inbox/<alias>.jsonl", "truth", "store", "store", "messages addressed to alias"),
    (f"{COLLABS}/<uuid>/{PRESENCE}", "local", "mirrors", "mirrors",
     "each alias's last presence report, in a store other machines mirror"),
    (f"{COLLABS}/<uuid>/receipts/<alias>.jsonl", "truth", "store", "store",
     "acks, presented attempts, notify results, replied marks, retries"),
    (f"{COLLABS}/<uuid>/{LOG}", "truth", "store", "store", "log notes"),
    (f"{COLLABS}/<uuid>/{DELIVERY}", "truth", "store", "store",
     "consents (envelopes, wake-ups), spent slots and rings"),
    (f"{COLLABS}/<uuid>/{LOCK}", "lock", "store", "store", "one write lock per collaboration"),
    (f"{COLLABS}/<uuid>/{REGISTRY}", "derived", "store", "people, verify",
     "the registry, naming the event it was built from"),
    (f"{COLLABS}/<uuid>/.<journal>.head", "derived", "store", "verify", "newest seq and sum of each journal"),
    (f"{COLLABS}/<uuid>/ids/<2 hex>.log", "derived", "store", "store", "where each message id and receipt is"),
    (f"{COLLABS}/<uuid>/state/<alias>.map", "derived", "store", "store",
     "inbox map: a header, then one status byte per message"),
    (f"{COLLABS}/<uuid>/state/<alias>.offsets", "derived", "store", "store", "where each message starts"),
    (f"{COLLABS}/<uuid>/state/<alias>{HOOK_STATE}", "local", "hooks", "hooks, verify",
     "the hooks' per-binding state (reset when damaged)"),
    (f"{COLLABS}/<uuid>/{TRANSCRIPT}", "derived", "store", "people", "the whole transcript"),
    (f"{COLLABS}/<uuid>/transcripts/<alias>.md", "derived", "store", "people", "one inbox's transcript"),
    (f"{COLLABS}/<uuid>/{HTML}", "derived", "cli", "people", "the HTML log, written on request"),
    (".<name>.<pid>.<random>.tmp", "transient", "fsio", "repair", "an atomic write in progress (any folder)"),
)

_HEX = frozenset("0123456789abcdef")


def is_uuid(value: object) -> bool:
    """Canonical lowercase UUID text, as ``validate.as_uuid`` returns it."""
    return (isinstance(value, str) and len(value) == 36
            and all(value[i] == "-" for i in (8, 13, 18, 23))
            and set(value.replace("-", "")) <= _HEX and value.count("-") == 4)


def pin_key(pin: str) -> str:
    """The pin index file name: a hash, so no pin text reaches the filesystem."""
    return records.sha256_hex(pin.encode("utf-8"))[:32]


_SESSION_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_SESSION_REST = _SESSION_FIRST | frozenset("_.@-")
_RUNTIME = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


def idle_files(root: str, pin: str) -> tuple[str, str] | None:
    """The fast path's two files for a pin, ``(generation, idle)``; None for a pin no hook launcher can name.

    ``hooks/run`` builds the same names in sh, without hashing: the runtime
    and the session id (``[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}``) are safe file
    names, and the two suffixes cannot collide across sessions.  Remembered per
    (root, pin): every send wakes its recipient's pin.
    """
    key = (root, pin)
    if key in _IDLE_FILES:
        return _IDLE_FILES[key]
    if len(_IDLE_FILES) >= 256:
        _IDLE_FILES.clear()
    found = _IDLE_FILES[key] = _idle_files(root, pin)
    return found


_IDLE_FILES: dict[tuple[str, str], tuple[str, str] | None] = {}


def _idle_files(root: str, pin: str) -> tuple[str, str] | None:
    runtime, sep, session = pin.partition(":")
    if (not sep or not runtime or len(runtime) > 32 or not set(runtime) <= _RUNTIME
            or not 0 < len(session) <= 128 or session[0] not in _SESSION_FIRST or not set(session) <= _SESSION_REST):
        return None
    base = os.path.join(root, IDLE, runtime, session)
    return base + GEN, base + IDLE_MARK


def marker_file(root: str, pin: str, suffix: str) -> str | None:
    """A marker beside :func:`idle_files`: ``<session>.mid`` ("nothing due between tool calls"),
    ``<session>.stop`` ("a Stop hook has nothing to do")."""
    files = idle_files(root, pin)
    return files[0][: -len(GEN)] + suffix if files is not None else None


def midturn_file(root: str, pin: str) -> str | None:
    return marker_file(root, pin, MID)


def collab(root: str, cid: str) -> str:
    return os.path.join(root, COLLABS, cid)


def _alias(alias: str) -> str:
    """Only a valid alias ever names a file: anything else is refused before a path is built."""
    if not rules.is_alias(alias):
        from agentmsg.errors import UsageError

        shown = alias[:40] if isinstance(alias, str) else type(alias).__name__
        raise UsageError(f"invalid alias {shown!r}: must match ^[a-z][a-z0-9_-]{{0,31}}$ and not be 'all'")
    return alias


# ``base`` below is a collaboration directory the store built (``collab``: never empty, no trailing
# slash) and every name is fixed or validated, so a plain ``/`` joins them as ``os.path.join`` would,
# at a tenth of its cost: a send builds a dozen paths.


def inbox(base: str, alias: str) -> str:
    return f"{base}/inbox/{_alias(alias)}.jsonl"


def receipts(base: str, alias: str) -> str:
    return f"{base}/receipts/{_alias(alias)}.jsonl"


def inbox_map(base: str, alias: str) -> str:
    return f"{base}/state/{_alias(alias)}.map"


def inbox_offsets(base: str, alias: str) -> str:
    return f"{base}/state/{_alias(alias)}.offsets"


def hook_state(base: str, alias: str) -> str:
    """The hooks' per-binding state (a name no alias can take)."""
    return f"{base}/state/{_alias(alias)}{HOOK_STATE}"


def index(base: str, message: str) -> str:
    """The ids/ log that holds a message id's entries (idindex.py)."""
    return index_shard(base, message[:2])


def index_shard(base: str, shard: str) -> str:
    return f"{base}/ids/{shard}.log"


def transcript(base: str, alias: str) -> str:
    return f"{base}/transcripts/{_alias(alias)}.md"


def stream(base: str, name: str) -> str:
    """The journal of a replicated stream (``ports.Replica``); an unknown stream or bad alias is refused."""
    if name in STREAM_FILES:
        return f"{base}/{STREAM_FILES[name]}"
    kind, _sep, alias = name.partition("/")
    if kind == "inbox":
        return inbox(base, alias)
    if kind == "receipts":
        return receipts(base, alias)
    from agentmsg.errors import UsageError

    raise UsageError(f"unknown stream {name[:40]!r}")



def session_file(root: str, pin: str, suffix: str) -> str:
    """``ROOT/wake/<pin key>.<suffix>``: one session's facts, its waiter's lock, token and ring (``SESSION_FACTS``,
    ``WAITER_*``)."""
    return os.path.join(root, WAKE, f"{pin_key(pin)}.{suffix}")


#: A deferred ring waiting for the helper, one per binding: ``wake/retry-<key>.json``.
RETRY_PREFIX, RETRY_SUFFIX = "retry-", ".json"


def retry_file(root: str, collab: str, alias: str) -> str:
    """The one deferred ring a binding may have waiting (``runtime.retries``)."""
    return os.path.join(root, WAKE, f"{RETRY_PREFIX}{pin_key(collab + '/' + alias)}{RETRY_SUFFIX}")


# ---- finding a collaboration's directory: no symlink, and (by default) an opening record ----------------


def collab_dir(root: str, collab: str, *, subdirs: bool = True) -> str | None:
    """The collaboration's directory, or None; a symlinked directory or subdirectory raises UnsafePath.

    ``subdirs=False`` leaves the subdirectories to the caller (a transaction
    checks them once it holds the lock: `FileTxn.__enter__`).
    """
    found = locate(root, collab)
    if found is None:
        return None
    if subdirs:
        for sub in COLLAB_SUBDIRS:
            fsio.existing_dir(found[0], sub)
    return found[0]


def locate(root: str, collab: str, *, opened: bool = True) -> tuple[str, os.stat_result] | None:
    """The collaboration's directory and its ``lstat`` (a transaction keys what it checked on it), or None.

    ``opened=False`` leaves the opening record (``collab.jsonl``) to the
    caller: a transaction looks for it once it holds the lock.
    """
    if not is_uuid(collab):
        return None
    parent = fsio.existing_dir(root, COLLABS)
    if parent is None:
        return None
    base = os.path.join(root, COLLABS, collab)
    st = fsio.dir_stat(base)
    if st is None or (opened and not os.path.exists(f"{base}/{EVENTS}")):
        return None
    return base, st
