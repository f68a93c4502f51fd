"""The hash-chain check of one stream of sealed records, for backends that keep no files (memory, PostgreSQL).

The file store checks its journals line by line (``file/integrity.py``);
a backend that hands back whole records checks them here, with the same
finding shape, so ``verify`` reports alike everywhere.
"""

from __future__ import annotations

from agentmsg import records

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


def chain_findings(where: str, log: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A finding per record whose checksum, link to the previous record or sequence number is wrong."""
    findings: list[dict[str, Any]] = []
    prev = ""
    for i, rec in enumerate(log, start=1):
        if rec.get("sum") != records.checksum(rec) or rec.get("prev") != prev or rec.get("seq") != i:
            findings.append({"path": where, "line": i, "kind": "edited", "detail": f"record {i} does not verify",
                             "tampering": True})
        prev = rec.get("sum", "")
    return findings
