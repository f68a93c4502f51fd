"""Derived files: kept current as records are appended, checked when read, rebuilt from the journals.

Nothing derived is fsynced: a derived file lost in a crash is rebuilt, and a
stale or damaged one is detected (``registry.yaml`` names the record it was
built from, an ids/ entry is checked against the record it points to, the
inbox map against the journals) and replaced.  A failure to update a view
never turns a stored record into a reported failure: every update goes
through :func:`quietly`.

The views, one module per concern: :mod:`.registryview`, :mod:`.pinindex`,
:mod:`.idindex`, :mod:`.transcripts`, :mod:`.idle` (the hook fast path's
markers), :mod:`.hookstate`; :mod:`.placed` updates them after an append,
:mod:`.rebuild` writes them again.  They see the store and its transaction
through :mod:`.protocols`, and never import :mod:`.store`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def quietly(update: Callable[..., object], *args: Any, **kwargs: Any) -> None:
    """Update a derived view after the records are durable; a failure here is repaired later."""
    try:
        update(*args, **kwargs)
    except OSError:
        pass
    except Exception as exc:
        from agentmsg.errors import UnsafePath  # only on the way out: the hooks never import it otherwise

        if not isinstance(exc, UnsafePath):
            raise
