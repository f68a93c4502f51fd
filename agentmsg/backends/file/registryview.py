"""``registry.yaml``: the alias -> participant map, rendered from ``collab.jsonl`` (derived, never trusted)."""

from __future__ import annotations

from agentmsg import fsio, records
from agentmsg.backends.file import layout
from agentmsg.backends.file.derived import quietly
from agentmsg.backends.file.journal import Journal
from agentmsg.domain import rules

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from agentmsg.backends.file.protocols import Txn
    from agentmsg.domain.values import Registry

REGISTRY_HEADER = (
    "# agentmsg registry: the alias -> participant map, rendered from collab.jsonl.\n"
    "# Nothing reads it to route mail (collab.jsonl decides); edits are reported by verify.\n"
    "# Written in YAML's JSON-compatible style so stdlib-only hooks can read it.\n"
)


def registry_document(base: str, last: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """``registry.yaml`` if it was built from the newest event (``last``, else read); None when missing,
    damaged or stale.  `registry` asks only that (to render it again); ``verify`` compares its contents."""
    raw = fsio.read_bytes(f"{base}/{layout.REGISTRY}")
    if raw is None:
        return None
    try:
        doc = records.loads(b"\n".join(line for line in raw.splitlines() if not line.startswith(b"#")))
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("participants"), dict):
        return None
    if last is None:
        last = Journal(f"{base}/{layout.EVENTS}").last()
    if not last or doc.get("built_from") != {"seq": last["seq"], "sum": last["sum"]}:
        return None
    return doc


def registry(tx: Txn) -> Registry:
    """The registry, always replayed from ``collab.jsonl``: ``registry.yaml`` is rendered, never trusted.

    Recipients and bindings resolve through the registry, so a derived file
    must not decide them: an edited ``registry.yaml`` is ignored here (and
    reported by ``verify``), a missing or stale one is written again.  The
    replay reads membership events only, a few per participant, never the
    mail.  The store remembers the last one per collaboration, keyed by
    ``collab.jsonl``'s identity, size and modification time: a long-lived
    process (the MCP server) then reads nothing while membership stays the
    same.  Any event changes the key.
    """
    key = tx.events_key()
    cached = tx.store.registries.get(tx.collab)
    if key is not None and cached is not None and cached[0] == key:
        return cached[1]
    events = tx.events()
    reg = rules.replay(events)
    if reg is None:
        from agentmsg.errors import NotFound  # only here: agentmsg.errors costs every hook ~0.3 ms

        raise NotFound(f"collaboration {tx.collab} has no opening record")
    if registry_document(tx.base, events[-1]) is None:  # missing, damaged or stale: rendered again
        quietly(write_registry, tx, reg)
    if key is not None:
        tx.store.registries[tx.collab] = (key, reg)
    return reg


def write_registry(tx: Txn, reg: Registry) -> None:
    last = Journal(f"{tx.base}/{layout.EVENTS}").last()
    built_from = {"seq": last["seq"], "sum": last["sum"]} if last else None
    doc = yaml_json(rules.registry_document(reg) | {"built_from": built_from})
    fsio.atomic_write(f"{tx.base}/{layout.REGISTRY}", REGISTRY_HEADER.encode() + doc.encode() + b"\n",
                      durable=False)


def yaml_json(doc: dict[str, Any]) -> str:
    """JSON that YAML parsers read back identically (C1 controls, NEL, LS/PS and BOM escaped)."""
    import json

    text = json.dumps(doc, indent=2, ensure_ascii=False)
    return "".join(f"\\u{ord(c):04x}" if _yaml_unsafe(c) else c for c in text)


def _yaml_unsafe(c: str) -> bool:
    o = ord(c)
    return 0x7F <= o <= 0x9F or o in (0x2028, 0x2029, 0xFEFF, 0xFFFE, 0xFFFF) or 0xD800 <= o <= 0xDFFF
