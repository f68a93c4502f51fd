"""Markdown transcripts (``collaboration.md``, ``transcripts/<alias>.md``) and the HTML page (derived)."""

from __future__ import annotations

from agentmsg import fsio
from agentmsg.backends.file import layout
from agentmsg.backends.file.derived import quietly
from agentmsg.backends.file.journal import Journal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from agentmsg.backends.file.protocols import Txn
    from agentmsg.domain.values import Message


def transcribe_event(tx: Txn, rec: dict[str, Any]) -> None:
    from agentmsg.text import transcript as render

    quietly(_append_or_render, tx, f"{tx.base}/{layout.TRANSCRIPT}", render.event_section(rec).encode())


def transcribe_note(tx: Txn, rec: dict[str, Any]) -> None:
    from agentmsg.text import transcript as render

    quietly(_append_or_render, tx, f"{tx.base}/{layout.TRANSCRIPT}", render.log_section(rec).encode())


def open_transcripts(tx: Txn, alias: str, others: Iterable[str] = ()) -> tuple[fsio.Appender, fsio.Appender]:
    """``collaboration.md`` and ``alias``'s transcript, opened to append a message that is not stored yet.

    A planted link, FIFO or hard link at either raises here, before anything
    is stored; so does one at ``others``' transcripts (a broadcast's other
    recipients).  The open that checks is the one that writes: no ``lstat``
    beforehand.  The caller closes both.
    """
    path = f"{tx.base}/{layout.TRANSCRIPT}"
    collab_md = fsio.Appender(path, fd=tx.store.handles.take(path, tx.key))  # kept open between sends
    try:
        transcripts = tx.existing("transcripts")
        inbox_md = fsio.Appender(layout.transcript(tx.base, alias))  # no folder: missing, like the file
        try:
            for to in dict.fromkeys(others) if transcripts is not None else ():
                if to != alias:
                    fsio.refuse_link(layout.transcript(tx.base, to))
        except BaseException:
            inbox_md.close()
            raise
    except BaseException:
        collab_md.close()
        raise
    return collab_md, inbox_md


def close_transcripts(tx: Txn, opened: tuple[fsio.Appender, fsio.Appender]) -> None:
    """After `open_transcripts`: ``collaboration.md``'s descriptor is kept for the next send (handles.py)."""
    tx.store.handles.give(opened[0].path, tx.key, opened[0].detach())
    opened[1].close()


def _append_view(view: str | fsio.Appender, section: bytes) -> int | None:
    """Append to a view that exists (None when it is missing or empty), by path or already opened."""
    if isinstance(view, fsio.Appender):
        return view.append(section)
    return fsio.append(view, section, durable=False, create=False)


def message_section(msg: Message) -> bytes:
    """The message's transcript section: pure, so a send renders it while its record is being written back,
    before the fsync (`fsio.append`'s ``meanwhile``), and only writes it after."""
    from agentmsg.text import transcript as render

    return render.message_section(msg).encode()


def transcribe_message(tx: Txn, msg: Message, opened: tuple[fsio.Appender, fsio.Appender] | None = None,
                       section: bytes | None = None) -> None:
    """Append the message to its inbox's transcript and to ``collaboration.md`` (``opened``: `open_transcripts`;
    ``section``: `message_section`, rendered already)."""
    if section is None:
        section = message_section(msg)
    appended = True
    try:  # one open: it refuses a link, a FIFO or a hard link, and says whether the view is there
        view = opened[1] if opened else f"{tx.dir('transcripts')}/{msg.to}.md"
        appended = _append_view(view, section) is not None
    except OSError:
        pass
    except Exception as exc:
        from agentmsg.errors import UnsafePath

        if not isinstance(exc, UnsafePath):
            raise
    if not appended:
        if msg.seq > 1:  # a view lost with history behind it: render every view whole, once
            quietly(render_all, tx)
            return
        from agentmsg.text import transcript as render

        head = render.inbox_header(msg.collab, msg.to).encode()  # the inbox's first message
        quietly(fsio.append, f"{tx.dir('transcripts')}/{msg.to}.md", head + section, durable=False)
    quietly(_append_or_render, tx, opened[0] if opened else f"{tx.base}/{layout.TRANSCRIPT}", section)


def _append_or_render(tx: Txn, view: str | fsio.Appender, section: bytes) -> None:
    """Append to a view that exists; a missing one with history behind it is re-rendered whole."""
    if _append_view(view, section) is not None:
        return
    if tx.next_cseq() <= 2:
        fsio.append(view.path if isinstance(view, fsio.Appender) else view, section, durable=False)
    else:
        render_all(tx)


def rendered_views(tx: Txn) -> list[tuple[str, bytes]]:
    """Every Markdown transcript of a collaboration as its records render it: ``(path, text)``, collab first.

    What a run of appends wrote, byte for byte (``verify`` compares the two).
    """
    from agentmsg.domain.values import Message
    from agentmsg.text import transcript as render

    reg = tx.registry()
    by_alias = {a: [Message.from_record(r) for _p, r in Journal(layout.inbox(tx.base, a)).scan()]
                for a in view_aliases(tx)}
    views = [(f"{tx.base}/{layout.TRANSCRIPT}", render.collaboration_md(reg, tx.events(), by_alias, tx.notes()))]
    views += [(layout.transcript(tx.base, a), render.inbox_md(reg, a, msgs)) for a, msgs in by_alias.items()]
    return [(path, text.encode()) for path, text in views]


def view_aliases(tx: Txn) -> list[str]:
    """Every alias with a transcript: each participant, and each inbox (a departed one's too); a registry
    name that is no alias (only a forged record holds one) has no inbox, so no transcript of its own."""
    from agentmsg.domain import rules

    return sorted(a for a in set(tx.registry().participants) | set(tx.aliases_with_inbox()) if rules.is_alias(a))


def render_all(tx: Txn) -> list[str]:
    """Regenerate every Markdown transcript of a collaboration from its records."""
    views = rendered_views(tx)
    fsio.refuse_link(views[0][0])
    if len(views) > 1:
        tx.dir("transcripts")
    for path, text in views:
        fsio.atomic_write(path, text, durable=False)
    return [path for path, _text in views]


def write_html(tx: Txn, page: bytes) -> str:
    """``collaboration.html``: the overseer's page, derived like the Markdown (``log render --html``)."""
    path = f"{tx.base}/{layout.HTML}"
    fsio.atomic_write(path, page, durable=False)  # a planted link is replaced, never written through
    return path
