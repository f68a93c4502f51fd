"""The pin index, ``pins/<hash>.json``: which (collaboration, alias) each pin is bound to (derived)."""

from __future__ import annotations

import os

from agentmsg import fsio, records
from agentmsg.backends.file import layout
from agentmsg.domain import rules

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from agentmsg.backends.file.protocols import Root
    from agentmsg.domain.values import Registry


def _pins_dir(root: str) -> str:
    return fsio.ensure_dir(root, layout.PINS)


def refuse_pin_links(root: str, pins: Iterable[str] = ()) -> None:
    """Refuse a planted link or non-regular file at the pin lock or these pins' index files, before a write."""
    base = fsio.ensure_dir(root, layout.PINS)
    fsio.refuse_link(os.path.join(base, layout.PINS_LOCK))
    for pin in pins:
        fsio.refuse_link(os.path.join(base, f"{layout.pin_key(pin)}.json"))


def pin_entries(root: str, pin: str) -> list[tuple[str, str]]:
    base = fsio.existing_dir(root, layout.PINS)
    raw = fsio.read_bytes(os.path.join(base, f"{layout.pin_key(pin)}.json")) if base is not None else None
    try:
        doc = records.loads(raw) if raw else {}
        entries = doc.get("bindings", []) if isinstance(doc, dict) else None
    except ValueError:
        entries = None
    if entries is None or not isinstance(entries, list):
        raise DamagedIndex(f"pin index of {pin[:60]} is damaged")
    return [(e["collab"], e["alias"]) for e in entries
            if isinstance(e, dict) and layout.is_uuid(e.get("collab")) and rules.is_alias(e.get("alias"))]


def _set_pin(root: str, pin: str, collab: str, alias: str | None) -> None:
    base = _pins_dir(root)
    path = os.path.join(base, f"{layout.pin_key(pin)}.json")
    with fsio.locked(os.path.join(base, layout.PINS_LOCK), 30.0):
        try:
            have = pin_entries(root, pin)
        except DamagedIndex:
            have = []
        entries = [{"collab": c, "alias": a} for c, a in have if c != collab]
        if alias is not None:
            entries.append({"collab": collab, "alias": alias})
        fsio.atomic_write(path, records.dumps_plain({"pin": pin, "bindings": entries}).encode(), durable=False)


class DamagedIndex(ValueError):
    """A derived index that does not parse: rebuilt from the registries."""


def update_pins(root: str, collab: str, before: Registry | None, after: Registry) -> None:
    """Bring the pin index in line with the registry for every pin the event could have changed."""
    pins = {p.pin for p in after.participants.values()}
    if before is not None:
        pins |= {p.pin for p in before.participants.values()}
    for pin in sorted(pins):
        alias = None if after.closed else after.alias_of(pin)
        was = None if before is None or before.closed else before.alias_of(pin)
        if alias != was or before is None:
            _set_pin(root, pin, collab, alias)


def ensure_pins(store: Root, *, force: bool = False) -> None:
    """A missing or damaged pin index is rebuilt from every registry (derived, like everything outside journals)."""
    if not force and (fsio.existing_dir(store.root, layout.PINS) is not None or not store.collabs()):
        return
    if force:
        base = fsio.ensure_dir(store.root, layout.PINS)
        for name in os.listdir(base):
            if name.endswith(".json"):
                os.unlink(os.path.join(base, name))
    for collab in store.collabs():
        try:
            reg = store.registry(collab)
        except Exception as exc:
            from agentmsg.errors import NotFound, UnsafePath

            if isinstance(exc, (NotFound, UnsafePath)):
                continue
            raise
        for p in reg.active().values():
            if not reg.closed:
                _set_pin(store.root, p.pin, collab, p.alias)
    fsio.ensure_dir(store.root, layout.PINS)
