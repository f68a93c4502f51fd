"""The derived data after records were placed in a journal, written once for both writers.

A transaction's own appends (:class:`.store.FileTxn`) and a mirror's import
of records sealed elsewhere (:func:`.store.import_records`) both end here, so
a replica's views, pin index and fast-path markers come out exactly as the
writer's did.  Every step is derived: a failure here is repaired later.
"""

from __future__ import annotations

from agentmsg.backends.file.idindex import index_receipt
from agentmsg.backends.file.idle import wake, wake_aliases
from agentmsg.backends.file.pinindex import update_pins
from agentmsg.backends.file.registryview import write_registry
from agentmsg.domain import kinds

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

    from agentmsg import fsio
    from agentmsg.backends.file.protocols import Txn
    from agentmsg.domain.values import Message, Registry

    Opened = tuple[fsio.Appender, fsio.Appender]  # `transcripts.open_transcripts`


def events_placed(tx: Txn, before: Registry | None, recs: Iterable[dict[str, Any]], pins: set[str]) -> None:
    """Membership changed: the registry rendered again, the pin index brought in line, every pin the events
    could concern woken (``pins``, and the new registry's), and the events transcribed (``recs``)."""
    from agentmsg.backends.file.transcripts import transcribe_event  # not on the hooks' path (receipts only)

    tx.set_registry(None)
    after = tx.registry()
    write_registry(tx, after)
    update_pins(tx.root, tx.collab, before, after)
    wake(tx.root, pins | {p.pin for p in after.participants.values()}, tx.store.on_wake)
    for rec in recs:
        transcribe_event(tx, rec)


def messages_placed(tx: Txn, alias: str, msgs: Sequence[Message], opened: Opened | None = None,
                    sections: Sequence[bytes] | None = None) -> None:
    """Mail for ``alias``: its pin woken (after the record is stored: the launcher must not skip it), then the
    messages transcribed (``opened``/``sections``: `transcripts.open_transcripts`, `message_section`).  The id
    index entry was written before each record, as its reservation; the inbox map folds it in at the next read."""
    from agentmsg.backends.file.transcripts import transcribe_message  # not on the hooks' path (receipts only)

    wake_aliases(tx, (alias,))
    for i, msg in enumerate(msgs):
        transcribe_message(tx, msg, opened, sections[i] if sections is not None else None)


def notes_placed(tx: Txn, recs: Iterable[dict[str, Any]]) -> None:
    """Log notes: transcribed."""
    from agentmsg.backends.file.transcripts import transcribe_note  # not on the hooks' path (receipts only)

    for rec in recs:
        transcribe_note(tx, rec)


def receipts_placed(tx: Txn, alias: str, placed: list[tuple[int, dict[str, Any]]]) -> None:
    """Derived data after receipts were appended, by a writer or by a replica's import: ``ids/``, the
    inbox map (an ack), and the fast-path markers (a retry shows a message again at the next prompt)."""
    for offset, rec in placed:
        if rec.get("message"):
            index_receipt(tx, rec["message"], offset)
    acked = any(rec.get("type") == kinds.ACK for _o, rec in placed)
    if acked:
        tx.map(alias)
    # A retry shows a message again; an ack takes one out of a delivery rendered ahead.
    if acked or any(rec.get("type") == kinds.RETRY for _o, rec in placed):
        wake_aliases(tx, (alias,))


def delivery_placed(tx: Txn, recs: Iterable[dict[str, Any]]) -> None:
    """After delivery records were appended: an envelope or a setting that changed makes its owner's hooks
    run again (a spent slot does not)."""
    for rec in recs:
        if rec.get("type") != kinds.SLOT:
            wake(tx.root, [p for p in (rec.get("pin"),) if isinstance(p, str)], tx.store.on_wake)
            wake_aliases(tx, [a for a in (rec.get("alias"),) if isinstance(a, str)])
