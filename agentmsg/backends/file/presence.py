"""Presence across machines, as files: what mirrors report through a file store, and what this root pulled.

* ``collabs/<uuid>/presence.json``: in a store other machines mirror (``file://``), each alias's last report
  (``ports.Replica.report_presence``): its pin, state, seconds since its last activity, and when;
* ``presence.remote.json`` at a replica root: what its mirror last pulled from the store, per pin, for
  ``runtime/presence.py`` to read for sessions whose hooks never ran on this machine.

Neither is a record: presence is replaced in place, and losing either file only makes a session on another
machine ``unknown`` until the next report.  Both are written whole (``fsio.atomic_write``, no fsync).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from agentmsg import fsio
from agentmsg.backends.file import layout

Report = dict[str, Any]


def _load(path: str) -> dict[str, Any]:
    raw = fsio.read_bytes(path)
    if not raw:
        return {}
    try:
        doc = json.loads(raw)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def report(root: str, collab: str, alias: str, fields: Report, *, now: float | None = None) -> None:
    """Replace ``alias``'s report in ``collab`` (the caller holds the collaboration's lock)."""
    folder = layout.collab_dir(root, collab)
    if folder is None:
        from agentmsg.errors import NotFound

        raise NotFound(f"collaboration not found: {collab}")
    path = os.path.join(folder, layout.PRESENCE)
    doc = _load(path)
    doc[alias] = {**fields, "reported_at": time.time() if now is None else now}
    fsio.atomic_write(path, json.dumps(doc, sort_keys=True).encode(), durable=False)


def reports(root: str, collab: str, *, now: float | None = None) -> dict[str, Report]:
    """alias -> its last report, with ``age``: seconds since it was made."""
    t = time.time() if now is None else now
    out: dict[str, Report] = {}
    folder = layout.collab_dir(root, collab)
    for alias, rep in (_load(os.path.join(folder, layout.PRESENCE)) if folder else {}).items():
        if isinstance(rep, dict) and isinstance(rep.get("reported_at"), (int, float)):
            out[alias] = {k: v for k, v in rep.items() if k != "reported_at"} | {
                "age": max(0.0, t - float(rep["reported_at"]))}
    return out


def save_pulled(root: str, by_pin: dict[str, Report]) -> None:
    """What a mirror pulled, per pin: ``state``, ``quiet`` and ``age`` as the store said, and ``pulled_at``."""
    fsio.atomic_write(os.path.join(root, layout.REMOTE_PRESENCE), json.dumps(by_pin, sort_keys=True).encode(),
                      durable=False)


def pulled(root: str, pin: str) -> Report | None:
    """The last pulled report of ``pin``, or None."""
    rep = _load(os.path.join(root, layout.REMOTE_PRESENCE)).get(pin)
    return rep if isinstance(rep, dict) else None
