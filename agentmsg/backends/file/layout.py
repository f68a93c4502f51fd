"""Every path under the state root, built here and nowhere else.

Names on disk come only from validated aliases, UUIDs and hashes.
"""

from __future__ import annotations

import os

from ... import records

COLLABS = "collabs"
PINS = "pins"
HOOKS_LOG = "hooks.log"
#: Subdirectories of a collaboration; each is checked for a symlink on every access.
COLLAB_SUBDIRS = ("inbox", "receipts", "state", "ids", "transcripts")

EVENTS = "collab.jsonl"
LOG = "log.jsonl"
DELIVERY = "delivery.jsonl"
REGISTRY = "registry.yaml"
LOCK = "write.lock"
TRANSCRIPT = "collaboration.md"

_HEX = frozenset("0123456789abcdef")


def is_uuid(value: object) -> bool:
    """Canonical lowercase UUID text, as ``validate.as_uuid`` returns it."""
    return (isinstance(value, str) and len(value) == 36
            and all(value[i] == "-" for i in (8, 13, 18, 23))
            and set(value.replace("-", "")) <= _HEX and value.count("-") == 4)


def pin_key(pin: str) -> str:
    """The pin index file name: a hash, so no pin text reaches the filesystem."""
    return records.sha256_hex(pin.encode("utf-8"))[:32]


def collab(root: str, cid: str) -> str:
    return os.path.join(root, COLLABS, cid)


def inbox(base: str, alias: str) -> str:
    return os.path.join(base, "inbox", f"{alias}.jsonl")


def receipts(base: str, alias: str) -> str:
    return os.path.join(base, "receipts", f"{alias}.jsonl")


def inbox_map(base: str, alias: str) -> str:
    return os.path.join(base, "state", f"{alias}.map")


def inbox_offsets(base: str, alias: str) -> str:
    return os.path.join(base, "state", f"{alias}.offsets")


def hook_state(base: str, alias: str) -> str:
    """The hooks' per-binding state (a name no alias can take)."""
    return os.path.join(base, "state", f"{alias}.hook.json")


def index(base: str, message: str) -> str:
    return os.path.join(base, "ids", message[:2], f"{message}.json")


def transcript(base: str, alias: str) -> str:
    return os.path.join(base, "transcripts", f"{alias}.md")
