"""Writing the derived files again: restored when missing, rebuilt whole, and temp files cleaned."""

from __future__ import annotations

import os
import time

from agentmsg import fsio
from agentmsg.backends.file import layout
from agentmsg.backends.file.derived import quietly
from agentmsg.backends.file.hookstate import damaged_hook_states
from agentmsg.backends.file.idindex import SHARDS, first_layout, rebuild_ids, seq_of
from agentmsg.backends.file.idle import wake
from agentmsg.backends.file.inboxmap import InboxMap
from agentmsg.backends.file.pinindex import update_pins
from agentmsg.backends.file.registryview import write_registry
from agentmsg.backends.file.transcripts import render_all, rendered_views, view_aliases
from agentmsg.domain import rules

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentmsg.backends.file.protocols import Txn


def restore_missing(tx: Txn) -> None:
    """Write the derived files that are missing, as the first command to need each would (for ``verify``).

    Only missing ones: a deleted derived file is not a finding, while one
    that is there and disagrees with the journals stays for ``verify`` to
    report (``repair`` rewrites it).
    """
    if rules.replay(tx.events()) is None:
        return  # no opening record left (verify reports the journal): nothing to render from
    tx.registry()  # a missing or stale registry.yaml is rendered again
    ids = tx.existing("ids")
    if tx.aliases_with_inbox():
        if ids is None or first_layout(tx):
            rebuild_ids(tx)
        else:
            lost = [s for s in SHARDS if not os.path.lexists(f"{ids}/{s}.log")]
            if lost:
                rebuild_ids(tx, only=lost)
    paths = [f"{tx.base}/{layout.TRANSCRIPT}", *(layout.transcript(tx.base, a) for a in view_aliases(tx))]
    if all(os.path.lexists(path) for path in paths):
        return  # the usual case: nothing to render
    for i, (path, text) in enumerate(rendered_views(tx)):
        if not os.path.lexists(path):
            if i:  # an inbox's: its folder may be gone too
                tx.dir("transcripts")
            fsio.atomic_write(path, text, durable=False)


def rebuild(tx: Txn) -> list[str]:
    """Rewrite every derived file of one collaboration from its journals."""
    reg = rules.replay(tx.events())
    if reg is None:
        from agentmsg.errors import NotFound

        raise NotFound(f"collaboration {tx.collab} has no opening record")
    write_registry(tx, reg)
    tx.set_registry(reg)
    update_pins(tx.root, tx.collab, None, reg)
    wake(tx.root, {p.pin for p in reg.participants.values()}, tx.store.on_wake)
    rebuild_ids(tx)
    done = ["registry.yaml", "pins/", "ids/"]
    for alias in sorted(set(reg.participants) | set(tx.aliases_with_inbox())):
        for path in (layout.inbox_map(tx.base, alias), layout.inbox_offsets(tx.base, alias)):
            if os.path.lexists(path):
                os.unlink(path)
        tx.drop_map(alias)
        tx.map(alias).save()
        done.append(f"state/{alias}.map")
    for path in damaged_hook_states(tx):  # not derivable, only reset: its messages look never shown
        os.unlink(path)
        done.append(f"state/{os.path.basename(path)} (damaged: reset)")
    render_all(tx)
    done.append("transcripts")
    from agentmsg.backends.file.searchindex import SearchIndex

    quietly(SearchIndex(tx.store).reindex, tx.collab)
    done.append(layout.SEARCH)
    return done


#: A temp file younger than this whose writer is running may be a write in flight (``fsio.atomic_write``).
IN_FLIGHT_S = 60.0


def clean_temp(root: str, older_than: float) -> int:
    """Remove ``.*.tmp`` files a killed writer left behind (older than ``older_than`` seconds).

    Never one a running writer may still rename into place: the name holds
    the writer's pid (``.NAME.PID.RANDOM.tmp``), and a young temp file of a
    live process is left alone (other locks than the collaboration's guard
    the pin index and the root's own files).
    """
    removed = 0
    now = time.time()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            if name.startswith(".") and name.endswith(".tmp"):
                path = os.path.join(dirpath, name)
                try:
                    age = now - os.lstat(path).st_mtime
                    if age > older_than and not (age < IN_FLIGHT_S and _running(name)):
                        os.unlink(path)
                        removed += 1
                except OSError:
                    pass
    return removed


def _running(temp_name: str) -> bool:
    """Whether the pid a temp file's name holds is a live process (a name without one: no)."""
    parts = temp_name.split(".")
    pid = parts[-3] if len(parts) >= 5 else ""
    if not pid.isdigit() or int(pid) <= 0:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    except (OverflowError, OSError):
        return False
    return True


def fresh_map(tx: Txn, alias: str) -> InboxMap:
    """A map folded from zero, in memory (for ``verify``)."""
    m = InboxMap(tx.base, alias)
    return m.fold(lambda mid: seq_of(tx, mid))
