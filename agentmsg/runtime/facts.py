"""Session facts for wake-ups, recorded by the recipient's own hooks (stdlib, cheap, fail-open).

At SessionStart the hook notes what a ring needs to reach this very session:
the host, its session id, the host process (pid and its start time from
``/proc``, so a reused pid is not mistaken for it), the tmux pane, and what
the host itself adds (``Host.facts``: a peer socket, a thread id).  The prompt and Stop hooks note
whether a turn is running.  The file, ``ROOT/wake/<pin key>.json``, is
derived and local to this machine: ``agentmsg wake on`` copies the facts
into its consent record, and a sender reads only the turn state from it.

Lean: the hooks import it.
"""

from __future__ import annotations

import os
import time

from agentmsg import fsio, records
from agentmsg.backends.file import layout
from agentmsg.hosts import registry
from agentmsg.runtime.procs import descends_from as descends_from
from agentmsg.runtime.procs import parent_pid, self_pid
from agentmsg.runtime.procs import proc_stat as proc_stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: Wrappers between a host and its hook (or its shell tool): skipped when looking for the host process.
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "env", "timeout", "nice", "nohup", "python3",
                    "python", "agentmsg"})
BUSY_FOR = 1800.0  # a "turn running" note older than this is stale (a crashed turn)
#: The facts every host has; a host adds its own (``Host.facts``).
FIELDS = ("host", "session", "pid", "pid_start", "exe", "tmux_socket", "pane")


def host_process(start: int | None = None) -> tuple[int, str] | None:
    """The nearest ancestor that is not a shell or wrapper: the host running this hook or command."""
    pid = parent_pid() if start is None else start
    for _ in range(12):
        stat = proc_stat(pid)
        if stat is None or pid <= 1:
            return None
        comm, ppid, started = stat
        if comm not in SHELLS:
            return pid, started
        pid = ppid
    return None


def alive(facts: Mapping[str, Any]) -> bool:
    """Whether the recorded host process still runs (same pid, same start time); True when none was recorded."""
    pid, started = facts.get("pid"), facts.get("pid_start")
    if type(pid) is not int or not isinstance(started, str):
        return True
    stat = proc_stat(pid)
    return stat is not None and stat[2] == started


def stop(facts: Mapping[str, Any], *, grace: float = 5.0) -> str:
    """Stop the recorded host process: ``SIGTERM``, then ``SIGKILL`` after ``grace`` seconds.  Only while its pid
    still has the recorded start time: a reused pid is never signalled.  Returns the signal that ended it."""
    import signal

    pid, started = facts.get("pid"), facts.get("pid_start")
    if type(pid) is not int or not isinstance(started, str) or pid <= 1 or pid in (os.getpid(), self_pid()):
        raise LookupError("no host process was recorded for this session")
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        stat = proc_stat(pid)
        if stat is None or stat[2] != started:
            raise LookupError(f"the recorded host process (pid {pid}) is not running")
        os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            stat = proc_stat(pid)
            if stat is None or stat[2] != started or _zombie(pid):
                return sig.name
            time.sleep(0.05)
    return "SIGKILL"


def _zombie(pid: int) -> bool:
    raw = fsio.read_bytes(f"/proc/{pid}/stat") or b""
    return raw.rpartition(b")")[2][:3].strip() == b"Z"


def gather(host: str, session: str, env: Mapping[str, str], *, strict: bool = False) -> dict[str, Any]:
    """What this process can see of its session (values are validated again where they are used).

    A tmux pane is kept only when this process runs in it (``runtime/panes.py``); a claimed pane that does
    not verify is left out, or with ``strict`` refused (``panes.Refused``).
    """
    facts: dict[str, Any] = {"host": host, "session": session}
    found = host_process()
    if found is not None:
        facts["pid"], facts["pid_start"] = found
        try:
            facts["exe"] = os.readlink(f"/proc/{found[0]}/exe")
        except OSError:
            pass
    if env.get("TMUX_PANE"):
        from agentmsg.runtime import panes  # only a session that claims a pane pays for the check

        claim = panes.claimed(env)
        try:
            if claim is None:
                raise panes.Refused("TMUX or TMUX_PANE is malformed")
            panes.verify(*claim, [self_pid()])
            facts["tmux_socket"], facts["pane"] = claim
        except panes.Refused:
            if strict:
                raise
    spec = registry.get(host)
    if spec is not None:
        facts.update(spec.facts(env, found[0] if found is not None else None, session))
    return facts


def load(root: str, pin: str) -> dict[str, Any]:
    raw = fsio.read_bytes(layout.session_file(root, pin, layout.SESSION_FACTS))
    try:
        doc = records.loads(raw.decode("utf-8")) if raw else None
    except (ValueError, UnicodeDecodeError):
        doc = None
    return doc if isinstance(doc, dict) and doc.get("pin") == pin else {"pin": pin}


def save(root: str, pin: str, doc: dict[str, Any]) -> None:
    fsio.ensure_dir(root, layout.WAKE)
    fsio.atomic_write(layout.session_file(root, pin, layout.SESSION_FACTS), records.dumps(doc).encode(), durable=False)


def record(root: str, pin: str, facts: dict[str, Any]) -> None:
    """SessionStart: replace the facts, keep nothing of an earlier process."""
    spec = registry.get(str(facts.get("host")))
    kept = FIELDS + (spec.fact_fields if spec is not None else ())
    save(root, pin, {"pin": pin, "facts": {k: facts[k] for k in kept if k in facts}, "turn": "idle",
                     "turn_at": time.time()})


def set_turn(root: str, pin: str, turn: str) -> None:
    """``busy`` at a prompt, ``idle`` at Stop (only for sessions whose wake consent is active)."""
    doc = load(root, pin)
    doc.update(turn=turn, turn_at=time.time())
    save(root, pin, doc)


def busy(doc: Mapping[str, Any], now: float) -> bool:
    at = doc.get("turn_at")
    return doc.get("turn") == "busy" and isinstance(at, (int, float)) and now - at < BUSY_FOR


def recorded_hosts(root: str) -> dict[tuple[int, str], list[str]]:
    """Every host process a SessionStart hook recorded under ``root`` (pid, start time) -> its pins.

    Identity's ancestry rule asks this (not the hooks).  Several pins share one process when a host runs
    more than one session (a cleared or resumed session, OpenCode's sessions); a file that does not parse,
    or whose pin is not a ``runtime:session`` pair, counts for nothing.
    """
    try:
        names = os.listdir(os.path.join(root, layout.WAKE))
    except OSError:
        return {}
    found: dict[tuple[int, str], list[str]] = {}
    suffix = "." + layout.SESSION_FACTS
    for name in sorted(names):
        if not name.endswith(suffix) or name.startswith(layout.RETRY_PREFIX):
            continue
        try:
            raw = fsio.read_bytes(os.path.join(root, layout.WAKE, name))
            doc = records.loads(raw) if raw else None
        except Exception:  # a link, a FIFO, a torn or foreign file: not a record
            continue
        facts = doc.get("facts") if isinstance(doc, dict) else None
        pin = doc.get("pin") if isinstance(doc, dict) else None
        if not isinstance(facts, dict) or not isinstance(pin, str) or name != f"{layout.pin_key(pin)}{suffix}":
            continue
        pid, started = facts.get("pid"), facts.get("pid_start")
        if type(pid) is int and pid > 1 and isinstance(started, str):
            found.setdefault((pid, started), []).append(pin)
    return found


def nearest_recorded(recorded: Mapping[tuple[int, str], list[str]], start: int | None = None,
                     ) -> tuple[int, list[str]] | None:
    """The nearest process at or above ``start`` (this process) that ``recorded`` holds, with its pins.

    Compared by pid and start time, so a pid the kernel reused for another process never matches.  None
    without ``/proc``, at init, or when no recorded host process is an ancestor.
    """
    if not recorded:
        return None
    pid = self_pid() if start is None else start
    for _ in range(64):
        stat = proc_stat(pid)
        if stat is None or pid <= 1:
            return None
        pins = recorded.get((pid, stat[2]))
        if pins:
            return pid, pins
        pid = stat[1]
    return None
